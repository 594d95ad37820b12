//! Reason codes for what goes wrong talking to a member cluster. Codes, not raw errors:
//! raw errors carry addresses and go to the log only.

use karpor_health::Reason;
use kube::runtime::watcher;

use crate::status::watched_types::TypeError;

pub(crate) fn of_kube(error: &kube::Error) -> Reason {
    match error {
        kube::Error::Api(response) if matches!(response.code, 401 | 403) => Reason::Unauthorized,
        kube::Error::Auth(_) => Reason::Unauthorized,
        _ => Reason::Unreachable,
    }
}

/// What a failed request says of the type it was for.
pub(crate) fn type_error(error: &kube::Error) -> TypeError {
    match error {
        kube::Error::Api(response) => of_status(response.code),
        kube::Error::Auth(_) => TypeError::Unauthorized,
        _ => TypeError::Unreachable,
    }
}

fn of_status(code: u16) -> TypeError {
    match code {
        401 => TypeError::Unauthorized,
        403 => TypeError::Forbidden,
        404 => TypeError::Gone,
        400 | 422 => TypeError::Invalid,
        _ => TypeError::Unreachable,
    }
}

/// A watcher's error, as its type's; `None` for what the watcher recovers from by
/// itself (410 Gone: it relists).
pub(crate) fn of_type(error: &watcher::Error) -> Option<TypeError> {
    match error {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => Some(type_error(e)),
        watcher::Error::WatchError(response) if response.code == 410 => None,
        watcher::Error::WatchError(response) => Some(of_status(response.code)),
        watcher::Error::NoResourceVersion => Some(TypeError::Unreachable),
    }
}

/// `describe` for a watcher's error.
pub(crate) fn describe_watch(error: &watcher::Error) -> String {
    match error {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => karpor_kube::describe(e),
        watcher::Error::WatchError(response) => {
            format!(
                "the API server answered {} {}",
                response.code, response.reason
            )
        }
        watcher::Error::NoResourceVersion => "no resourceVersion in a watch result".to_owned(),
    }
}

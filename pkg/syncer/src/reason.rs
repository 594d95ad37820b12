//! Reason codes for what goes wrong talking to a member cluster. Codes, not raw errors:
//! raw errors carry addresses and go to the log only.

use karpor_health::Reason;
use kube::runtime::watcher;

pub fn of_kube(error: &kube::Error) -> Reason {
    match error {
        kube::Error::Api(response) if matches!(response.code, 401 | 403) => Reason::Unauthorized,
        kube::Error::Auth(_) => Reason::Unauthorized,
        _ => Reason::Unreachable,
    }
}

/// `None` for what the watcher recovers from by itself (410 Gone: it relists).
pub fn of_watch(error: &watcher::Error) -> Option<Reason> {
    match error {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => Some(of_kube(e)),
        watcher::Error::WatchError(response) if response.code == 410 => None,
        watcher::Error::WatchError(response) if matches!(response.code, 401 | 403) => {
            Some(Reason::Unauthorized)
        }
        watcher::Error::WatchError(_) | watcher::Error::NoResourceVersion => {
            Some(Reason::Unreachable)
        }
    }
}

/// `describe` for a watcher's error.
pub fn describe_watch(error: &watcher::Error) -> String {
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

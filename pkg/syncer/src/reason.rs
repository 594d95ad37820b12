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

/// Why a call to a member cluster failed, in words that cannot carry a credential:
/// kube-rs's own messages may quote an exec user's command line and environment. For
/// logs, check details and API errors alike.
pub fn describe(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => {
            format!("the API server answered {} {}", status.code, status.reason)
        }
        kube::Error::Auth(_) => CREDENTIALS.to_owned(),
        _ => {
            let text = format!("{error:?}").to_ascii_lowercase();
            [
                ("connection refused", "connection refused"),
                ("timed out", "timed out"),
                ("certificate", "TLS certificate not accepted"),
                ("tls", "TLS handshake failed"),
                ("dns", "name not resolved"),
                ("exec", CREDENTIALS),
            ]
            .into_iter()
            .find(|(needle, _)| text.contains(needle))
            .map_or("connection failed", |(_, cause)| cause)
            .to_owned()
        }
    }
}

/// Why a kubeconfig cannot be made a client of, the same way: anything about its user
/// becomes a fixed sentence.
pub fn describe_unusable(error: &dyn std::error::Error) -> String {
    let lower = format!("{error:?}").to_ascii_lowercase();
    if lower.contains("exec") || lower.contains("auth") || lower.contains("token") {
        CREDENTIALS.to_owned()
    } else {
        error.to_string()
    }
}

const CREDENTIALS: &str = "the user's credentials could not be obtained";

/// `describe` for a watcher's error.
pub fn describe_watch(error: &watcher::Error) -> String {
    match error {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => describe(e),
        watcher::Error::WatchError(response) => {
            format!(
                "the API server answered {} {}",
                response.code, response.reason
            )
        }
        watcher::Error::NoResourceVersion => "no resourceVersion in a watch result".to_owned(),
    }
}

//! Why a call to a member cluster failed, in words that cannot carry a credential:
//! kube-rs's own messages may quote an exec user's command line and environment, or a
//! URL's user-info. For logs, check details and API errors alike.

use crate::exec::ExecError;

const CREDENTIALS: &str = "the user's credentials could not be obtained";

/// A kube-rs error, described.
pub fn describe(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => {
            format!("the API server answered {} {}", status.code, status.reason)
        }
        kube::Error::Auth(_) => CREDENTIALS.to_owned(),
        kube::Error::Service(inner) => match inner.downcast_ref::<ExecError>() {
            Some(exec) => exec.to_string(),
            None => by_words(&format!("{inner:?}")),
        },
        _ => by_words(&format!("{error:?}")),
    }
}

fn by_words(debug: &str) -> String {
    let text = debug.to_ascii_lowercase();
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

/// Why a kubeconfig cannot be made a client of, the same way: anything about its user
/// becomes a fixed sentence, anything else is kube-rs's message without URLs.
pub(crate) fn describe_unusable(error: &dyn std::error::Error) -> String {
    let lower = format!("{error:?}").to_ascii_lowercase();
    if lower.contains("exec") || lower.contains("auth") || lower.contains("token") {
        CREDENTIALS.to_owned()
    } else if lower.contains("://") || lower.contains("url") || lower.contains("proxy") {
        "its server or proxy URL is not usable".to_owned()
    } else {
        error.to_string()
    }
}

//! A tool's work is a REST route's, called in process with the MCP request's own
//! credential: the route's permission, the caller's scope and the redaction apply as they
//! do to any REST call, and nothing is reachable here that is not a route.

use axum::body::Body;
use axum::http::{header, HeaderMap, Request, StatusCode};
use axum::Router;
use serde::de::DeserializeOwned;
use tower::ServiceExt;

/// Headers a tool's REST call carries from the MCP request.
const CARRIED: [&str; 2] = ["authorization", "x-request-id"];

/// A REST call's failure, as the caller may read it.
#[derive(Debug, Clone)]
pub(crate) struct Failure {
    pub status: StatusCode,
    pub message: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.status.as_u16())
    }
}

/// The API's routes (under no prefix, without the envelope: a tool reads the handler's
/// data as it is), called as one caller.
#[derive(Clone)]
pub(crate) struct Api {
    router: Router,
}

impl Api {
    pub(crate) fn new(router: Router) -> Self {
        Api { router }
    }

    /// `GET path?query` as the caller whose request `headers` are, its `data` read as `T`.
    pub(crate) async fn get<T: DeserializeOwned>(
        &self,
        headers: &HeaderMap,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<T, Failure> {
        let mut uri = path.to_owned();
        if !query.is_empty() {
            let mut encoded = form_urlencoded::Serializer::new(String::new());
            for (key, value) in query {
                encoded.append_pair(key, value);
            }
            uri.push('?');
            uri.push_str(&encoded.finish());
        }
        let mut request = Request::get(uri);
        for name in CARRIED {
            if let Some(value) = headers.get(name) {
                request = request.header(name, value);
            }
        }
        let request = request
            .header(header::ACCEPT, "application/json")
            .body(Body::empty())
            .map_err(|e| internal(format!("a tool's request could not be made: {e}")))?;
        let mut response = self
            .router
            .clone()
            .oneshot(request)
            .await
            .unwrap_or_else(|never| match never {});
        let status = response.status();
        let data = match crate::envelope::answered(&mut response) {
            Some(Ok(data)) => data,
            Some(Err(message)) => return Err(Failure { status, message }),
            None => {
                let message = crate::envelope::refusal(status, response.into_body()).await;
                return Err(Failure { status, message });
            }
        };
        serde_json::from_value(data)
            .map_err(|e| internal(format!("the answer was not the expected shape: {e}")))
    }
}

fn internal(message: String) -> Failure {
    Failure {
        status: StatusCode::INTERNAL_SERVER_ERROR,
        message,
    }
}

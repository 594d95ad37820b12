//! A JSON request body that must be an object. axum's `Json` lets serde read a struct
//! from an array too (its fields in order), so `[]` passed for a record whose fields all
//! have defaults; every record karpor takes is an object.

use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub(crate) struct Body<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Body<T> {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let Json(value) = Json::<Value>::from_request(request, state)
            .await
            .map_err(IntoResponse::into_response)?;
        if !value.is_object() {
            return Err((StatusCode::BAD_REQUEST, "the body must be a JSON object").into_response());
        }
        // With the failing field's path, as axum's `Json` says it (`transform.mode: ...`).
        serde_path_to_error::deserialize(value)
            .map(Body)
            .map_err(|e| {
                let message = format!(
                    "Failed to deserialize the JSON body into the target type: {}: {}",
                    e.path(),
                    e.inner()
                );
                (StatusCode::BAD_REQUEST, message).into_response()
            })
    }
}

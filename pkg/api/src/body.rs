//! JSON request bodies that must be objects. axum's `Json` lets serde read a struct from
//! an array too (its fields in order), so `[]` passed for a record whose fields all have
//! defaults; every record karpor takes is an object. [`NamedBody`] takes a record itself
//! as the body of a route named by its path, so no body type repeats a record's fields.

use axum::extract::{FromRequest, FromRequestParts, OptionalFromRequest, Path, Request};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::envelope::ApiError;
use crate::openapi::NamePath;

pub(crate) struct Body<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Body<T> {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let fields = object(request, state).await?;
        read(fields).map(Body).map_err(refused)
    }
}

/// A record's body on a route with a `{name}`: the body's `name` may be left out (the
/// path's fills it in); a different one is refused.
pub(crate) struct NamedBody<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for NamedBody<T> {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let (mut parts, body) = request.into_parts();
        let Path(NamePath { name }) = Path::<NamePath>::from_request_parts(&mut parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let mut fields = object(Request::from_parts(parts, body), state).await?;
        match fields.get("name") {
            None => {
                fields.insert("name".to_owned(), Value::String(name.into()));
            }
            Some(Value::String(named)) if **named != *name => {
                let message = format!("name: {named:?} in the body is not the path's {name:?}");
                return Err(ApiError::bad_request(message).into_response());
            }
            // The path's name, or not a name at all (which the record's reading refuses).
            Some(_) => {}
        }
        read(fields).map(NamedBody).map_err(refused)
    }
}

/// Without a content type, no body (as axum's `Option<Json<T>>`).
impl<T: DeserializeOwned, S: Send + Sync> OptionalFromRequest<S> for NamedBody<T> {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Option<Self>, Self::Rejection> {
        if request.headers().get(header::CONTENT_TYPE).is_none() {
            return Ok(None);
        }
        <NamedBody<T> as FromRequest<S>>::from_request(request, state)
            .await
            .map(Some)
    }
}

/// The body as a JSON object.
async fn object<S: Send + Sync>(
    request: Request,
    state: &S,
) -> Result<Map<String, Value>, Response> {
    let Json(value) = <Json<Value> as FromRequest<S>>::from_request(request, state)
        .await
        .map_err(IntoResponse::into_response)?;
    match value {
        Value::Object(fields) => Ok(fields),
        _ => Err((StatusCode::BAD_REQUEST, "the body must be a JSON object").into_response()),
    }
}

/// The object as `T`, or the refusal's text: it names the failing field's path, as axum's
/// `Json` says it (`transform.mode: ...`).
fn read<T: DeserializeOwned>(fields: Map<String, Value>) -> Result<T, String> {
    serde_path_to_error::deserialize(Value::Object(fields)).map_err(|e| {
        format!(
            "Failed to deserialize the JSON body into the target type: {}: {}",
            e.path(),
            e.inner()
        )
    })
}

fn refused(message: String) -> Response {
    (StatusCode::BAD_REQUEST, message).into_response()
}

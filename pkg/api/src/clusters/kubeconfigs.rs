//! Kubeconfigs before registration: an upload (parsed, its contexts listed, its text
//! given back to its uploader as Karpor's register flow expects) and a validation (the
//! API server reached with it).

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Multipart, State};
use axum::http::{header, HeaderMap, StatusCode};
use karpor_core::model::MAX_KUBECONFIG_BYTES;
use karpor_kube::{kubeconfig, Timeouts};
use utoipa::ToSchema;

use super::view::resource_yaml;
use super::{bad_kubeconfig, minify, too_large};
use crate::envelope::{ApiError, ApiResult, Reply};
use crate::openapi::Errors;
use crate::types::clusters::EXAMPLE_KUBECONFIG;
use crate::types::{Envelope, UploadView, ValidateBody, ValidateView};
use crate::AppState;

/// How long validation may take to reach a cluster's API server.
const VALIDATE_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(ToSchema)]
#[allow(dead_code)] // the multipart form, for the document only
pub(super) struct UploadForm {
    /// The kubeconfig file (at most 2 MiB).
    #[schema(format = Binary, content_media_type = "application/octet-stream")]
    file: String,
    /// The cluster's name, for `sanitizedClusterContent`.
    name: Option<String>,
    #[schema(rename = "displayName")]
    display_name: Option<String>,
    description: Option<String>,
}

#[utoipa::path(post, path = "/cluster/config/file", operation_id = "uploadKubeconfig", tag = "clusters",
    request_body(content = UploadForm, content_type = "multipart/form-data"),
    responses((status = 200, body = inline(Envelope<UploadView>)),
        Errors))]
pub(crate) async fn upload(mut form: Multipart) -> ApiResult<UploadView> {
    let bad = |e: axum::extract::multipart::MultipartError| {
        ApiError::new(
            e.status(),
            format!("the upload is not a readable form: {}", e.body_text()),
        )
    };
    let (mut file, mut name, mut display_name, mut description) = (None, None, None, None);
    while let Some(field) = form.next_field().await.map_err(bad)? {
        match field.name() {
            Some("file") => {
                let file_name = field.file_name().unwrap_or_default().to_owned();
                let bytes = field.bytes().await.map_err(bad)?;
                if bytes.len() > MAX_KUBECONFIG_BYTES {
                    return Err(too_large(bytes.len()));
                }
                file = Some((file_name, bytes));
            }
            Some(text @ ("name" | "displayName" | "description")) => {
                let slot = match text {
                    "name" => &mut name,
                    "displayName" => &mut display_name,
                    _ => &mut description,
                };
                *slot = Some(field.text().await.map_err(bad)?);
            }
            _ => {}
        }
    }
    let Some((file_name, bytes)) = file else {
        return Err(ApiError::bad_request("the form has no `file` field"));
    };
    let text = String::from_utf8(bytes.to_vec())
        .map_err(|_| ApiError::bad_request("the kubeconfig is not UTF-8 text"))?;
    let config = karpor_kube::parse_off_runtime(text.clone())
        .await
        .map_err(bad_kubeconfig)?;
    let sanitized = kubeconfig::select(&config, None)
        .map(|selected| {
            resource_yaml(
                name.as_deref().unwrap_or_default(),
                display_name.as_deref().unwrap_or_default(),
                description.as_deref().unwrap_or_default(),
                &selected,
            )
        })
        .unwrap_or_default();
    Ok(Reply::ok(UploadView {
        file_name,
        file_size: bytes.len(),
        content: text,
        sanitized_cluster_content: sanitized,
        current_context: config.current_context.clone(),
        contexts: kubeconfig::contexts(&config),
    }))
}

#[utoipa::path(post, path = "/cluster/config/validate", operation_id = "validateKubeconfig", tag = "clusters",
    request_body(content(
        (ValidateBody = "application/json"),
        (String = "text/plain", example = json!(EXAMPLE_KUBECONFIG)),
    )),
    responses((status = 200, body = inline(Envelope<ValidateView>)),
        Errors))]
pub(crate) async fn validate(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<ValidateView> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let body = if content_type.starts_with("application/json") {
        serde_json::from_slice::<ValidateBody>(&body).map_err(|e| {
            ApiError::bad_request(format!("the body is not a validation request: {e}"))
        })?
    } else if content_type.starts_with("text/plain") {
        ValidateBody {
            kube_config: String::from_utf8(body.to_vec())
                .map_err(|_| ApiError::bad_request("the kubeconfig is not UTF-8 text"))?,
            context: None,
        }
    } else {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "send the kubeconfig as application/json ({\"kubeConfig\": ...}) or text/plain",
        ));
    };
    let selected = minify(&state, body.kube_config, body.context.as_deref()).await?;
    let summary = kubeconfig::summary(&selected);
    let unreachable = |why: String| {
        ApiError::bad_request(format!(
            "cannot reach the API server at {}: {why}",
            summary.server
        ))
    };
    let timeouts = Timeouts {
        connect: VALIDATE_TIMEOUT,
        read: Some(VALIDATE_TIMEOUT),
    };
    let client = karpor_kube::build(selected.clone(), &state.exec, timeouts)
        .await
        .map_err(|e| ApiError::bad_request(e.to_string()))?
        .client;
    let version = tokio::time::timeout(VALIDATE_TIMEOUT, client.apiserver_version())
        .await
        .map_err(|_| unreachable(format!("no answer within {VALIDATE_TIMEOUT:?}")))?
        .map_err(|e| unreachable(karpor_kube::describe(&e)))?;
    Ok(Reply::ok(ValidateView {
        summary,
        git_version: version.git_version,
        platform: version.platform,
    }))
}

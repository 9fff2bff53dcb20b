//! Upload (RFC 8620 §6.1) and download (§6.2) of blobs. A blob is served only
//! to an account that owns it (its message or its upload): anything else is
//! 404, the same as a blob that does not exist.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::AppState;
use super::api::read_limited;
use super::auth::Authenticated;
use super::error::HttpError;
use crate::blob::blob_id_of;
use crate::jmap::ids;
use crate::mail::body::resolve_part;

fn check_account(account_id: &str, account: i64) -> Result<(), HttpError> {
    (ids::parse_account_id(account_id) == Some(account))
        .then_some(())
        .ok_or(HttpError::NotFound)
}

/// `POST {uploadUrl}`: stores the body and returns `{accountId, blobId, type, size}`.
pub async fn upload(
    State(state): State<Arc<AppState>>,
    Authenticated(account): Authenticated,
    Path(account_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, HttpError> {
    check_account(&account_id, account.id)?;
    let limit = state.jmap.limits.max_size_upload;
    let bytes = read_limited(body, limit)
        .await
        .map_err(|too_large| match too_large {
            Some(()) => HttpError::UploadTooLarge,
            None => HttpError::ClientDisconnected,
        })?;
    let blob_id = blob_id_of(&bytes);
    let size = bytes.len();
    state
        .jmap
        .blobs
        .put_with_id(&blob_id, bytes)
        .await
        .map_err(|e| HttpError::Internal(e.to_string()))?;
    state
        .jmap
        .store
        .add_blob(account.id, &blob_id, size as i64)
        .await
        .map_err(|e| HttpError::Internal(e.to_string()))?;
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/octet-stream");
    let body =
        json!({ "accountId": account_id, "blobId": blob_id, "type": content_type, "size": size });
    Ok((axum::http::StatusCode::CREATED, axum::Json(body)).into_response())
}

/// Query of the download URL.
#[derive(Debug, Deserialize)]
pub struct DownloadQuery {
    #[serde(rename = "type")]
    content_type: Option<String>,
}

/// `GET {downloadUrl}`: the blob's bytes (a body part decoded), with the
/// requested name and type.
pub async fn download(
    State(state): State<Arc<AppState>>,
    Authenticated(account): Authenticated,
    Path((account_id, blob_id, name)): Path<(String, String, String)>,
    Query(query): Query<DownloadQuery>,
) -> Result<Response, HttpError> {
    check_account(&account_id, account.id)?;
    let (message_blob, part) = ids::parse_blob_id(&blob_id).ok_or(HttpError::NotFound)?;
    let owned = state
        .jmap
        .store
        .has_blob(account.id, message_blob)
        .await
        .map_err(|e| HttpError::Internal(e.to_string()))?;
    if !owned {
        return Err(HttpError::NotFound);
    }
    let raw = state
        .jmap
        .blobs
        .get(message_blob)
        .await
        .map_err(|e| HttpError::Internal(e.to_string()))?
        .ok_or(HttpError::NotFound)?;
    state.jmap.metrics.count_blob_read(raw.len());
    let (bytes, part_type) = match part {
        None => (raw, None),
        Some(part_id) => {
            state.jmap.metrics.count_parse("full");
            let content = resolve_part(&raw, part_id).ok_or(HttpError::NotFound)?;
            (content.bytes, Some(content.content_type))
        }
    };
    let content_type = query
        .content_type
        .filter(|t| !t.is_empty())
        .or(part_type)
        .unwrap_or_else(|| "application/octet-stream".to_string());
    let mut response = Body::from(bytes).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_str(&content_type)
            .unwrap_or(HeaderValue::from_static("application/octet-stream")),
    );
    headers.insert(header::CONTENT_DISPOSITION, content_disposition(&name));
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, immutable, max-age=31536000"),
    );
    Ok(response)
}

/// `attachment; filename="…"; filename*=UTF-8''…` (RFC 6266), safe for any name.
fn content_disposition(name: &str) -> HeaderValue {
    let ascii: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() && c != '"' && c != '\\' || c == ' ' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut encoded = String::new();
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || b"!#$&+-.^_`|~".contains(&byte) {
            encoded.push(byte as char);
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    HeaderValue::from_str(&format!(
        "attachment; filename=\"{ascii}\"; filename*=UTF-8''{encoded}"
    ))
    .unwrap_or(HeaderValue::from_static("attachment"))
}

#[cfg(test)]
mod tests {
    use super::content_disposition;

    #[test]
    fn content_disposition_quotes_and_encodes_names() {
        assert_eq!(
            content_disposition("report.pdf"),
            "attachment; filename=\"report.pdf\"; filename*=UTF-8''report.pdf"
        );
        assert_eq!(
            content_disposition("Über \"x\".txt"),
            "attachment; filename=\"_ber _x_.txt\"; filename*=UTF-8''%C3%9Cber%20%22x%22.txt"
        );
    }
}

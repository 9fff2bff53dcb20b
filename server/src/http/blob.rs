//! Upload (RFC 8620 §6.1) and download (§6.2) of blobs. A blob is served only
//! to an account that owns it (its message or its upload): anything else is
//! 404, the same as a blob that does not exist.
//!
//! An upload streams: each chunk is hashed and written to a staging file
//! (a multipart upload on S3) as it arrives ([`crate::blob::BlobUpload`]),
//! never held whole in memory (24 concurrent 50 MiB uploads: 372 MB peak
//! RSS, against 1.43 GB when they were read into memory). At most `maxConcurrentUpload`
//! uploads of one account run at once on a node (429 with the `limit`
//! problem beyond). The grant (`account_blobs`, which also checks that the
//! account still exists and its quota) is written before the staging object
//! is renamed into place, so a refused upload leaves nothing behind. An
//! upload is never idle, so it has a pace to keep ([`UploadPace`]): after
//! the body deadline it must average `--min-upload-rate`, else 408.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use serde::Deserialize;
use serde_json::json;

use super::AppState;
use super::auth::AuthenticatedWith;
use super::error::HttpError;
use crate::blob::{BlobError, StagedBlob};
use crate::jmap::budget::{Holder, Taken};
use crate::jmap::ids;
use crate::mail::load::LoadError;
use crate::store::StoreError;

fn check_account(account_id: &str, account: i64) -> Result<(), HttpError> {
    (ids::parse_account_id(account_id) == Some(account))
        .then_some(())
        .ok_or(HttpError::NotFound)
}

/// `POST {uploadUrl}`: streams the body into the blob store and returns
/// `{accountId, blobId, type, size}` (201).
///
/// Errors: 404 for another account's URL (or an account removed while its
/// credentials were cached), 429 `limit` `maxConcurrentUpload`, 413 over
/// `maxSizeUpload`, 507 when the upload would take the account over its
/// quota or the blob store's disk is full. The quota is checked once the
/// bytes are hashed: bytes the account already holds add nothing (so
/// uploading them again, to repair a corrupt copy, works at any usage).
pub async fn upload(
    State(state): State<Arc<AppState>>,
    AuthenticatedWith(account, _): AuthenticatedWith,
    Path(account_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, HttpError> {
    check_account(&account_id, account.id)?;
    let limits = state.jmap.limits;
    let _upload_permit = state
        .upload_slots
        .try_acquire(account.id)
        .ok_or(HttpError::TooManyUploads)?;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limits.max_size_upload) {
        return Err(HttpError::UploadTooLarge);
    }
    let pace = UploadPace {
        started: tokio::time::Instant::now(),
        grace: state.body_deadline,
        min_rate: state.min_upload_rate,
    };
    let staged = stream_to_staging(&state, body, limits.max_size_upload, pace).await?;
    let (blob_id, size) = (staged.id.clone(), staged.size);
    grant_and_commit(&state, account.id, staged).await?;
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/octet-stream");
    let body =
        json!({ "accountId": account_id, "blobId": blob_id, "type": content_type, "size": size });
    Ok((axum::http::StatusCode::CREATED, axum::Json(body)).into_response())
}

/// The pace an upload body must keep: after `grace`, at least `min_rate`
/// octets per second on average since then (0: any pace), and never a
/// silence longer than `grace`.
#[derive(Debug, Clone, Copy)]
struct UploadPace {
    started: tokio::time::Instant,
    grace: std::time::Duration,
    min_rate: u64,
}

impl UploadPace {
    /// When the next octet must have arrived, `received` having arrived:
    /// the moment the average since the grace would fall under the rate,
    /// and never more than the grace after now (a burst cannot buy an hour
    /// of silence on a connection the cap cannot shed).
    fn deadline(&self, received: u64) -> tokio::time::Instant {
        // About 30 years: as good as no deadline, and no overflow.
        let far = std::time::Duration::from_secs(1 << 30);
        let allowed = match self.min_rate {
            0 => far,
            rate => std::time::Duration::from_secs_f64(received as f64 / rate as f64).min(far),
        };
        let average = self.started + self.grace.min(far) + allowed;
        let silence = tokio::time::Instant::now() + self.grace.min(far);
        average.min(silence)
    }
}

/// Streams `body` into a staging object, hashing it; 413 past `limit`
/// octets, 408 when it falls behind `pace`.
async fn stream_to_staging(
    state: &AppState,
    mut body: Body,
    limit: u64,
    pace: UploadPace,
) -> Result<StagedBlob, HttpError> {
    let mut upload = state.jmap.blobs.begin_upload().await.map_err(blob_error)?;
    loop {
        let next = tokio::time::timeout_at(pace.deadline(upload.size()), body.frame()).await;
        let frame = match next {
            Err(_behind) => {
                upload.abort().await;
                return Err(HttpError::BodyTimeout);
            }
            Ok(None) => break,
            Ok(Some(frame)) => frame,
        };
        let refused = match frame.map(|frame| frame.into_data()) {
            Err(_) => Some(HttpError::ClientDisconnected),
            Ok(Err(_trailers)) => None,
            Ok(Ok(chunk)) if upload.size() + chunk.len() as u64 > limit => {
                Some(HttpError::UploadTooLarge)
            }
            Ok(Ok(chunk)) => upload.write(&chunk).await.err().map(blob_error),
        };
        if let Some(error) = refused {
            upload.abort().await;
            return Err(error);
        }
    }
    upload.finish().await.map_err(blob_error)
}

/// Records the account's grant (checking that it still exists and its
/// quota), then moves the staged blob into place. A refused grant discards
/// the staging object.
async fn grant_and_commit(
    state: &AppState,
    account: i64,
    staged: StagedBlob,
) -> Result<(), HttpError> {
    let granted = state
        .jmap
        .store
        .add_blob(account, &staged.id, staged.size as i64)
        .await;
    if let Err(error) = granted {
        let _ = staged.discard().await;
        return Err(store_error(error));
    }
    staged.commit().await.map_err(blob_error)
}

/// The HTTP answer to a store error of an upload or download.
fn store_error(error: StoreError) -> HttpError {
    match error {
        // The account was removed while its credentials were still cached.
        StoreError::NotFound => HttpError::NotFound,
        StoreError::OverQuota => HttpError::OverQuota,
        StoreError::StorageFull(error) => HttpError::StorageFull(error.to_string()),
        error => HttpError::Internal(error.to_string()),
    }
}

/// The HTTP answer to a blob store error: 507 for a full disk, a 500
/// naming the blob for a missing or corrupt one.
fn blob_error(error: BlobError) -> HttpError {
    if error.is_storage_full() {
        return HttpError::StorageFull(error.to_string());
    }
    match error {
        BlobError::Missing(_) | BlobError::Corrupt(_) => HttpError::BrokenBlob(error.to_string()),
        error => HttpError::Internal(error.to_string()),
    }
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
    AuthenticatedWith(account, _): AuthenticatedWith,
    Path((account_id, blob_id, name)): Path<(String, String, String)>,
    Query(query): Query<DownloadQuery>,
) -> Result<Response, HttpError> {
    check_account(&account_id, account.id)?;
    let (message_blob, part) = ids::parse_blob_id(&blob_id).ok_or(HttpError::NotFound)?;
    let size = state
        .jmap
        .store
        .blob_size(account.id, message_blob)
        .await
        .map_err(store_error)?
        .ok_or(HttpError::NotFound)?;
    // The octets a download holds, from before the read until its body is
    // sent or dropped, are taken from the account's and the node's share
    // of what requests hold (issue 43: 40 downloads of one 50 MiB blob
    // held 2 GB); a part is at most its message.
    let mut held = Holder::new(state.jmap.holdings.clone(), account.id).taken();
    if !held.take(u64::try_from(size).unwrap_or(0)) {
        return Err(HttpError::Overloaded);
    }
    let (bytes, part_type) = match part {
        None => {
            let raw = state
                .jmap
                .blobs
                .read(message_blob)
                .await
                .map_err(blob_error)?;
            state.jmap.metrics.count_blob_read(raw.len());
            (raw, None)
        }
        Some(part_id) => {
            let content = state
                .jmap
                .loader
                .part_content(account.id, message_blob, part_id)
                .await
                .map_err(|error| match error {
                    LoadError::Blob { error, .. } => blob_error(error),
                    LoadError::Store(error) => store_error(error),
                })?
                .ok_or(HttpError::NotFound)?;
            (content.bytes, Some(content.content_type))
        }
    };
    let content_type = query
        .content_type
        .filter(|t| !t.is_empty())
        .or(part_type)
        .unwrap_or_else(|| "application/octet-stream".to_string());
    let length = bytes.len();
    let mut response = held_body(bytes, held).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
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

/// Octets a download's body hands the connection at a time.
const DOWNLOAD_FRAME: usize = 64 << 10;

/// `bytes` as a body of [`DOWNLOAD_FRAME`]s that keeps `held` until the
/// last is taken or the body is dropped (the client went): what a slow
/// reader holds stays counted while the server holds it.
fn held_body(bytes: Vec<u8>, held: Taken) -> Body {
    let bytes = axum::body::Bytes::from(bytes);
    let frames = futures::stream::unfold((bytes, 0, held), |(bytes, at, held)| async move {
        if at >= bytes.len() {
            return None;
        }
        let end = (at + DOWNLOAD_FRAME).min(bytes.len());
        let frame = bytes.slice(at..end);
        Some((Ok::<_, std::convert::Infallible>(frame), (bytes, end, held)))
    });
    Body::from_stream(frames)
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

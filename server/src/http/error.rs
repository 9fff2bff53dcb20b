//! The one error type of the HTTP edge and its status mapping. Internal
//! messages are logged, never sent.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::jmap::error::RequestError;

/// Every way an HTTP request can fail before or outside method dispatch.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// A JMAP request-level error (RFC 8620 §3.6.1), as problem JSON.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// Missing or wrong credentials (RFC 7617): 401 with a Basic challenge,
    /// the same for an unknown user and a wrong password.
    #[error("authentication required")]
    Unauthorized,
    /// An event source request without an Authorization header whose push
    /// access is missing, altered, expired or made for a credential that no
    /// longer stands: 401, saying to fetch the session again.
    #[error("the push access is not valid")]
    PushAccessInvalid,
    /// Too many failed logins: 429 with Retry-After (seconds).
    #[error("too many failed attempts")]
    TooManyAttempts { retry_after: u64 },
    /// Too many requests in flight: 429 with Retry-After.
    #[error("too many concurrent requests")]
    Overloaded,
    /// The upstream answered 429 (a JMAP proxy, issue 43): 429 with its
    /// Retry-After, not a 503 that tells a client the server is down.
    #[error("the upstream asks to slow down")]
    UpstreamThrottled { retry_after: u64 },
    /// An API request body did not arrive in full within the body deadline
    /// (twice `--header-read-timeout`), or an upload arrived slower than
    /// `--min-upload-rate` after it: 408, the connection closed.
    #[error("the request body took too long")]
    BodyTimeout,
    /// The account already has [`super::stream_slots::MAX_STREAMS_PER_ACCOUNT`]
    /// event streams open on this node: 429 with Retry-After.
    #[error("too many event streams")]
    TooManyStreams,
    /// Too many logins already wait for a password verification: 503 with
    /// Retry-After (the verifications in progress bound memory and CPU).
    #[error("too many logins being verified")]
    LoginBusy,
    /// The login could not be checked: the upstream IMAP server (`serve
    /// --upstream`) could not be asked. 503 with Retry-After; the cause is
    /// logged, not shown.
    #[error("the upstream could not check the login: {0}")]
    UpstreamUnavailable(String),
    /// A JMAP proxy's upstream (`serve --upstream https://…`) failed a
    /// round trip after the login: 502 Bad Gateway; the cause is logged.
    #[error("the upstream failed: {0}")]
    UpstreamFailed(String),
    /// The client hung up while its request was being read: logged at
    /// debug (nothing failed here), answered 400 if anyone is still there.
    #[error("the client disconnected")]
    ClientDisconnected,
    /// The account in the URL is not the caller's, or the blob does not exist.
    #[error("not found")]
    NotFound,
    /// A URL's query parameters of the wrong shape (the event source's
    /// `ping`, say): 400 with a problem JSON naming what is wrong.
    #[error("bad query parameters: {0}")]
    BadQuery(String),
    /// An upload over maxSizeUpload.
    #[error("the upload exceeds maxSizeUpload")]
    UploadTooLarge,
    /// More than `maxConcurrentUpload` uploads of one account at once
    /// (RFC 8620 §2): 429, the `limit` problem naming it, Retry-After.
    #[error("too many concurrent uploads")]
    TooManyUploads,
    /// The upload would take the account over its quota (RFC 9425): 507
    /// Insufficient Storage, as WebDAV answers a quota (RFC 4331 §6).
    #[error("over quota")]
    OverQuota,
    /// The blob store's disk is full: 507 Insufficient Storage; the text is
    /// logged only.
    #[error("storage full")]
    StorageFull(String),
    /// A blob the account owns is missing from the blob store or does not
    /// hash to its id: 500 naming the blob (the text, which names it, is
    /// also logged).
    #[error("{0}")]
    BrokenBlob(String),
    /// Something failed inside; the text is logged only.
    #[error("internal error")]
    Internal(String),
}

fn problem(status: StatusCode, kind: &str, detail: &str) -> Response {
    let body = serde_json::json!({ "type": kind, "status": status.as_u16(), "detail": detail });
    let mut response = (status, body.to_string()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    response
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        match self {
            HttpError::Request(error) => {
                let status =
                    StatusCode::from_u16(error.status()).unwrap_or(StatusCode::BAD_REQUEST);
                let mut response = (status, error.problem().to_string()).into_response();
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/problem+json"),
                );
                response
            }
            HttpError::Unauthorized => {
                let mut response = problem(
                    StatusCode::UNAUTHORIZED,
                    "about:blank",
                    "authentication required",
                );
                // Both schemes it accepts (RFC 7617, RFC 6750 §3).
                response.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Basic realm=\"Fastview\", charset=\"UTF-8\""),
                );
                response.headers_mut().append(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"Fastview\""),
                );
                response
            }
            HttpError::TooManyAttempts { retry_after } => {
                let mut response = problem(
                    StatusCode::TOO_MANY_REQUESTS,
                    "about:blank",
                    "too many failed attempts",
                );
                if let Ok(value) = HeaderValue::from_str(&retry_after.to_string()) {
                    response.headers_mut().insert(header::RETRY_AFTER, value);
                }
                response
            }
            HttpError::UpstreamThrottled { retry_after } => {
                let mut response = problem(
                    StatusCode::TOO_MANY_REQUESTS,
                    "about:blank",
                    "the mail server behind this one asks to slow down: try again later",
                );
                if let Ok(value) = HeaderValue::from_str(&retry_after.to_string()) {
                    response.headers_mut().insert(header::RETRY_AFTER, value);
                }
                response
            }
            HttpError::Overloaded => {
                let mut response = problem(
                    StatusCode::TOO_MANY_REQUESTS,
                    "urn:ietf:params:jmap:error:limit",
                    "too many concurrent requests",
                );
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                response
            }
            HttpError::PushAccessInvalid => problem(
                StatusCode::UNAUTHORIZED,
                "about:blank",
                "this event source URL's access is not valid (expired, or the password or token \
                 it was made for changed): fetch the session again for a new eventSourceUrl",
            ),
            HttpError::BodyTimeout => {
                let mut response = problem(
                    StatusCode::REQUEST_TIMEOUT,
                    "about:blank",
                    "the request body did not arrive in time: an API body has twice \
                     --header-read-timeout, an upload must keep --min-upload-rate",
                );
                response
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
                response
            }
            HttpError::TooManyStreams => {
                let mut response = problem(
                    StatusCode::TOO_MANY_REQUESTS,
                    "about:blank",
                    "too many event streams open for this account; close one first",
                );
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("30"));
                response
            }
            HttpError::LoginBusy => {
                let mut response = problem(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "about:blank",
                    "too many logins being verified",
                );
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                response
            }
            HttpError::UpstreamUnavailable(cause) => {
                tracing::warn!(%cause, "a login could not be checked against the upstream");
                let mut response = problem(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "about:blank",
                    "the mail server behind this one could not check the login; try again",
                );
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
                response
            }
            HttpError::UpstreamFailed(cause) => {
                tracing::warn!(%cause, "a round trip to the upstream failed");
                problem(
                    StatusCode::BAD_GATEWAY,
                    "about:blank",
                    "the mail server behind this one did not answer; try again",
                )
            }
            HttpError::ClientDisconnected => {
                tracing::debug!("client disconnected while its request was read");
                problem(
                    StatusCode::BAD_REQUEST,
                    "about:blank",
                    "the request body could not be read",
                )
            }
            HttpError::NotFound => problem(StatusCode::NOT_FOUND, "about:blank", "not found"),
            HttpError::BadQuery(why) => problem(
                StatusCode::BAD_REQUEST,
                "about:blank",
                &format!("bad query parameters: {why}"),
            ),
            HttpError::UploadTooLarge => problem(
                StatusCode::PAYLOAD_TOO_LARGE,
                "urn:ietf:params:jmap:error:limit",
                "the upload exceeds maxSizeUpload",
            ),
            HttpError::TooManyUploads => {
                let body = serde_json::json!({
                    "type": "urn:ietf:params:jmap:error:limit",
                    "status": 429,
                    "limit": "maxConcurrentUpload",
                    "detail": "too many concurrent uploads for this account; retry when one ends",
                });
                let mut response =
                    (StatusCode::TOO_MANY_REQUESTS, body.to_string()).into_response();
                let headers = response.headers_mut();
                headers.insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/problem+json"),
                );
                headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                response
            }
            HttpError::OverQuota => problem(
                StatusCode::INSUFFICIENT_STORAGE,
                "about:blank",
                "the upload would take the account over its quota",
            ),
            HttpError::StorageFull(message) => {
                tracing::error!(%message, "blob store full");
                problem(
                    StatusCode::INSUFFICIENT_STORAGE,
                    "about:blank",
                    "the server's storage is full; try again later",
                )
            }
            HttpError::BrokenBlob(message) => {
                tracing::error!(%message, "broken blob");
                problem(StatusCode::INTERNAL_SERVER_ERROR, "about:blank", &message)
            }
            HttpError::Internal(message) => {
                tracing::error!(%message, "internal error");
                problem(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "about:blank",
                    "internal error",
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// The log lines (debug and up) written while `error` becomes a response.
    fn logged(error: HttpError) -> String {
        let buffer = Arc::new(Mutex::new(Vec::<u8>::new()));
        let sink = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .with_writer(move || Sink(sink.clone()))
            .finish();
        tracing::subscriber::with_default(subscriber, || error.into_response());
        let bytes = buffer.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_client_disconnect_is_logged_at_debug_not_as_an_internal_error() {
        let log = logged(HttpError::ClientDisconnected);
        assert!(log.contains("DEBUG"), "{log}");
        assert!(log.contains("client disconnected"), "{log}");
        assert!(!log.contains("ERROR"), "{log}");
        // What an internal error logs, for contrast: the capture works.
        let log = logged(HttpError::Internal("disk on fire".into()));
        assert!(
            log.contains("ERROR") && log.contains("internal error"),
            "{log}"
        );
    }

    #[test]
    fn a_busy_login_gate_is_503_with_retry_after() {
        let response = HttpError::LoginBusy.into_response();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[header::RETRY_AFTER], "1");
    }
}

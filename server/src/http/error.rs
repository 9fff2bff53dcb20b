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
        const BLANK: &str = "about:blank";
        const LIMIT: &str = "urn:ietf:params:jmap:error:limit";
        match self {
            HttpError::Request(error) => {
                let status =
                    StatusCode::from_u16(error.status()).unwrap_or(StatusCode::BAD_REQUEST);
                let response = (status, error.problem().to_string()).into_response();
                with_header(response, header::CONTENT_TYPE, problem_json())
            }
            HttpError::Unauthorized => unauthorized(),
            HttpError::TooManyAttempts { retry_after } => {
                let response = problem(
                    StatusCode::TOO_MANY_REQUESTS,
                    BLANK,
                    "too many failed attempts",
                );
                with_retry_after(response, retry_after)
            }
            HttpError::UpstreamThrottled { retry_after } => {
                let detail = "the mail server behind this one asks to slow down: try again later";
                let response = problem(StatusCode::TOO_MANY_REQUESTS, BLANK, detail);
                with_retry_after(response, retry_after)
            }
            HttpError::Overloaded => {
                let detail = "too many concurrent requests";
                with_retry_after(problem(StatusCode::TOO_MANY_REQUESTS, LIMIT, detail), 1)
            }
            HttpError::PushAccessInvalid => problem(
                StatusCode::UNAUTHORIZED,
                BLANK,
                "this event source URL's access is not valid (expired, or the password or token \
                 it was made for changed): fetch the session again for a new eventSourceUrl",
            ),
            HttpError::BodyTimeout => {
                let response = problem(
                    StatusCode::REQUEST_TIMEOUT,
                    BLANK,
                    "the request body did not arrive in time: an API body has twice \
                     --header-read-timeout, an upload must keep --min-upload-rate",
                );
                with_header(
                    response,
                    header::CONNECTION,
                    HeaderValue::from_static("close"),
                )
            }
            HttpError::TooManyStreams => {
                let detail = "too many event streams open for this account; close one first";
                with_retry_after(problem(StatusCode::TOO_MANY_REQUESTS, BLANK, detail), 30)
            }
            HttpError::LoginBusy => {
                let detail = "too many logins being verified";
                with_retry_after(problem(StatusCode::SERVICE_UNAVAILABLE, BLANK, detail), 1)
            }
            HttpError::UpstreamUnavailable(cause) => {
                tracing::warn!(%cause, "a login could not be checked against the upstream");
                let detail = "the mail server behind this one could not check the login; try again";
                with_retry_after(problem(StatusCode::SERVICE_UNAVAILABLE, BLANK, detail), 5)
            }
            HttpError::UpstreamFailed(cause) => {
                tracing::warn!(%cause, "a round trip to the upstream failed");
                let detail = "the mail server behind this one did not answer; try again";
                problem(StatusCode::BAD_GATEWAY, BLANK, detail)
            }
            HttpError::ClientDisconnected => {
                tracing::debug!("client disconnected while its request was read");
                let detail = "the request body could not be read";
                problem(StatusCode::BAD_REQUEST, BLANK, detail)
            }
            HttpError::NotFound => problem(StatusCode::NOT_FOUND, BLANK, "not found"),
            HttpError::BadQuery(why) => {
                let detail = format!("bad query parameters: {why}");
                problem(StatusCode::BAD_REQUEST, BLANK, &detail)
            }
            HttpError::UploadTooLarge => {
                let detail = "the upload exceeds maxSizeUpload";
                problem(StatusCode::PAYLOAD_TOO_LARGE, LIMIT, detail)
            }
            HttpError::TooManyUploads => too_many_uploads(),
            HttpError::OverQuota => {
                let detail = "the upload would take the account over its quota";
                problem(StatusCode::INSUFFICIENT_STORAGE, BLANK, detail)
            }
            HttpError::StorageFull(message) => {
                tracing::error!(%message, "blob store full");
                let detail = "the server's storage is full; try again later";
                problem(StatusCode::INSUFFICIENT_STORAGE, BLANK, detail)
            }
            HttpError::BrokenBlob(message) => {
                tracing::error!(%message, "broken blob");
                problem(StatusCode::INTERNAL_SERVER_ERROR, BLANK, &message)
            }
            HttpError::Internal(message) => {
                tracing::error!(%message, "internal error");
                problem(StatusCode::INTERNAL_SERVER_ERROR, BLANK, "internal error")
            }
        }
    }
}

/// The Content-Type of a problem (RFC 9457).
fn problem_json() -> HeaderValue {
    HeaderValue::from_static("application/problem+json")
}

/// `response` with `name` set to `value`.
fn with_header(mut response: Response, name: header::HeaderName, value: HeaderValue) -> Response {
    response.headers_mut().insert(name, value);
    response
}

/// `response` with a Retry-After of `seconds`.
fn with_retry_after(response: Response, seconds: u64) -> Response {
    match HeaderValue::from_str(&seconds.to_string()) {
        Ok(value) => with_header(response, header::RETRY_AFTER, value),
        Err(_) => response,
    }
}

/// 401 with a challenge for both schemes it accepts (RFC 7617, RFC 6750 §3).
fn unauthorized() -> Response {
    let mut response = problem(
        StatusCode::UNAUTHORIZED,
        "about:blank",
        "authentication required",
    );
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

/// 429, the `limit` problem naming `maxConcurrentUpload` (RFC 8620 §2),
/// with Retry-After.
fn too_many_uploads() -> Response {
    let body = serde_json::json!({
        "type": "urn:ietf:params:jmap:error:limit",
        "status": 429,
        "limit": "maxConcurrentUpload",
        "detail": "too many concurrent uploads for this account; retry when one ends",
    });
    let response = (StatusCode::TOO_MANY_REQUESTS, body.to_string()).into_response();
    let response = with_header(response, header::CONTENT_TYPE, problem_json());
    with_retry_after(response, 1)
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

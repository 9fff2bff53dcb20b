//! `POST /jmap/api` (RFC 8620 §3): authenticate, read the body under
//! maxSizeRequest while it streams, parse, dispatch.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, Limited};

use super::AppState;
use super::auth::AuthenticatedWith;
use super::error::HttpError;
use super::push_access::CredentialTag;
use crate::jmap::dispatch;
use crate::jmap::error::RequestError;
use crate::jmap::request::Request;

/// Reads a body of at most `limit` octets, failing as soon as it grows past
/// it: `Err(Some(()))` when it is too large, `Err(None)` when it cannot be
/// read (the client hung up: [`HttpError::ClientDisconnected`]).
pub async fn read_limited(body: Body, limit: u64) -> Result<axum::body::Bytes, Option<()>> {
    match Limited::new(body, limit as usize).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) if error.is::<http_body_util::LengthLimitError>() => Err(Some(())),
        Err(_) => Err(None),
    }
}

/// Whether a request declares a JSON body (`application/json`, any
/// parameters).
pub fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .eq_ignore_ascii_case("application/json")
        })
        .unwrap_or(false)
}

/// Handles one API request.
pub async fn post_api(
    State(state): State<Arc<AppState>>,
    AuthenticatedWith(account, credential): AuthenticatedWith,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, HttpError> {
    let limits = state.jmap.limits;
    let _node_permit = state
        .in_flight
        .try_acquire()
        .map_err(|_| HttpError::Overloaded)?;
    let _account_permit = state
        .account_slots
        .try_acquire(account.id)
        .ok_or(HttpError::Overloaded)?;
    if !is_json(&headers) {
        return Err(
            RequestError::NotJson("the Content-Type must be application/json".into()).into(),
        );
    }
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limits.max_size_request) {
        return Err(RequestError::Limit("maxSizeRequest").into());
    }
    // A body that trickles in holds a connection the cap cannot shed (it is
    // not idle): it has `body_deadline` to arrive in full.
    let read = tokio::time::timeout(
        state.body_deadline,
        read_limited(body, limits.max_size_request),
    );
    let bytes = match read.await {
        Err(_elapsed) => return Err(HttpError::BodyTimeout),
        Ok(Ok(bytes)) => bytes,
        Ok(Err(Some(()))) => return Err(RequestError::Limit("maxSizeRequest").into()),
        Ok(Err(None)) => return Err(HttpError::ClientDisconnected),
    };
    let request = Request::parse(&bytes, limits.max_calls_in_request as usize)?;
    let tag = CredentialTag::of(&credential).state_tag();
    let response = dispatch::handle(&state.jmap, &account, request, &tag).await?;
    let headers = [(header::CONTENT_TYPE, "application/json")];
    Ok((headers, Body::new(Pieces::new(response.to_pieces()))).into_response())
}

/// A response body of pieces written one after the other, its length
/// known (so `Content-Length`, as a body of one buffer has): the HTTP
/// layer writes the pieces together without copying them into one
/// ([`crate::jmap::request::response_pieces`]: an Email/get's list is
/// one, shared with what rendered it, issue 20).
pub struct Pieces {
    pieces: std::collections::VecDeque<Bytes>,
    left: u64,
}

impl Pieces {
    /// The body of `pieces`, in order.
    pub fn new(pieces: Vec<Bytes>) -> Self {
        let left = pieces.iter().map(|piece| piece.len() as u64).sum();
        Self {
            pieces: pieces
                .into_iter()
                .filter(|piece| !piece.is_empty())
                .collect(),
            left,
        }
    }
}

impl http_body::Body for Pieces {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        let piece = self.pieces.pop_front();
        if let Some(piece) = &piece {
            self.left -= piece.len() as u64;
        }
        std::task::Poll::Ready(piece.map(|piece| Ok(http_body::Frame::data(piece))))
    }

    fn is_end_stream(&self) -> bool {
        self.pieces.is_empty()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_body_of_pieces_is_their_octets_with_its_length_known() {
        let pieces = vec![
            Bytes::from_static(b"{\"a\":"),
            Bytes::new(),
            Bytes::from(vec![b'1'; 5000]),
            Bytes::from_static(b"}"),
        ];
        let body = Body::new(Pieces::new(pieces.clone()));
        assert_eq!(http_body::Body::size_hint(&body).exact(), Some(5006));
        let collected = body.collect().await.unwrap().to_bytes();
        assert_eq!(collected, pieces.concat());
        let empty = Pieces::new(vec![]);
        assert!(http_body::Body::is_end_stream(&empty));
        assert_eq!(http_body::Body::size_hint(&empty).exact(), Some(0));
    }

    #[tokio::test]
    async fn a_body_whose_client_hangs_up_is_unreadable_not_too_large() {
        let chunks: Vec<Result<&'static [u8], std::io::Error>> = vec![
            Ok(b"{\"using\": ["),
            Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                "connection reset by peer",
            )),
        ];
        let body = Body::from_stream(futures::stream::iter(chunks));
        assert_eq!(read_limited(body, 1 << 20).await, Err(None));
        let body = Body::from(vec![b'x'; 100]);
        assert_eq!(read_limited(body, 10).await, Err(Some(())));
    }
}

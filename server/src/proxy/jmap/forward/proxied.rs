//! The request a JMAP proxy runs through its mirror and upstream, and how
//! it can fail (the methods are in `forward.rs` and its other files).

use std::sync::Arc;

use reqwest::header::HeaderValue;
use serde_json::Value;

use crate::jmap::Jmap;
use crate::proxy::jmap::mirror::Mirror;
use crate::proxy::jmap::{JmapUpstream, UpstreamSession};
use crate::proxy::upstream::UpstreamError;

/// What a proxied request needs: the local side, the mirror and the
/// upstream with the client's session and credential.
pub struct Proxied<'a> {
    pub jmap: &'a Jmap,
    pub mirror: &'a Arc<Mirror>,
    pub upstream: &'a JmapUpstream,
    pub session: &'a UpstreamSession,
    pub authorization: &'a HeaderValue,
}

/// Why a proxied request has no Response object of its own.
#[derive(Debug)]
pub enum ProxyError {
    /// The upstream answered a batch with something other than 200: its
    /// status, Retry-After and body, for the client as they are.
    Answered(crate::proxy::jmap::client::Answer),
    /// The upstream (or the mirror's store) failed.
    Upstream(UpstreamError),
}

/// A request's answer through the proxy: the Response object as JSON
/// (RFC 8620 §3.4), and its `sessionState`.
pub struct ProxiedResponse {
    pub body: Vec<u8>,
    pub session_state: Value,
}

impl From<UpstreamError> for ProxyError {
    fn from(error: UpstreamError) -> Self {
        Self::Upstream(error)
    }
}

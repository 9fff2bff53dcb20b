//! The HTTP edge: the only module that imports axum. Routes:
//!
//! | route | what |
//! |---|---|
//! | `GET /.well-known/jmap`, `GET /jmap/session` | the Session (RFC 8620 §2) |
//! | `POST /jmap/api` | the API (RFC 8620 §3) |
//! | `POST /jmap/upload/{accountId}/` | upload (RFC 8620 §6.1) |
//! | `GET /jmap/download/{accountId}/{blobId}/{name}?type=` | download (RFC 8620 §6.2) |
//! | `GET /jmap/eventsource` | push (RFC 8620 §7.3) |
//!
//! `GET /metrics` (Prometheus metrics, no auth) is not on the API router:
//! [`metrics_router`] serves it on its own listener (`--metrics-listen`,
//! loopback by default), so whoever reaches the API port cannot read it.
//!
//! [`assemble`] builds a serving instance of an [`App`] (its metrics, JMAP
//! side, [`AppState`] and router); [`serve`] (in `serve.rs`: hyper-util's
//! HTTP/1 server with a header-read timeout, an idle timeout and a
//! connection cap) never binds a port itself: it takes a listener, so tests
//! bind `127.0.0.1:0`.

pub mod api;
pub mod auth;
pub mod blob;
pub mod error;
pub mod eventsource;
pub mod push_access;
mod serve;
pub mod session;
pub mod stream_slots;
pub mod upstream;

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::routing::{get, post};
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::app::{App, ServeOptions};
use crate::jmap::Jmap;
use crate::mail::work::AccountSlots;
use auth::Authenticator;
pub use serve::serve;

/// API requests in flight on one node before 429 when
/// [`ServeOptions::max_in_flight`] is 0.
const DEFAULT_MAX_IN_FLIGHT: usize = 1024;

/// Shared state of the HTTP handlers.
pub struct AppState {
    pub jmap: Arc<Jmap>,
    pub auth: Authenticator,
    /// `serve --upstream https://…` (issue 19): the JMAP server this
    /// instance fronts; every route is then answered through it
    /// ([`upstream::routes`]).
    pub jmap_upstream: Option<Arc<crate::mail::upstream::jmap::JmapUpstream>>,
    /// The local mirror of the JMAP upstream's accounts, with it.
    pub mirror: Option<Arc<crate::mail::upstream::jmap::mirror::Mirror>>,
    /// `--public-url` without a trailing slash; `None` derives URLs from the Host header.
    pub public_url: Option<String>,
    /// Bounds the API requests in flight on this node.
    pub in_flight: tokio::sync::Semaphore,
    /// One semaphore per account bounding its API requests in flight
    /// (RFC 8620 `maxConcurrentRequests`).
    pub account_slots: AccountSlots,
    /// One semaphore per account bounding its uploads in flight
    /// (RFC 8620 `maxConcurrentUpload`, [`blob::upload`]).
    pub upload_slots: AccountSlots,
    /// The open event streams of this node, per account and credential
    /// ([`stream_slots`]): a stream is never idle, so the connection cap
    /// cannot shed it.
    pub stream_slots: stream_slots::StreamSlots,
    /// How long an API request body may take to arrive in full: twice the
    /// header-read timeout (60 s by default); then 408.
    pub body_deadline: std::time::Duration,
    /// The slowest an upload may arrive after `body_deadline`, in octets per
    /// second (`--min-upload-rate`); 0: no minimum.
    pub min_upload_rate: u64,
}

impl AppState {
    /// The state of a new serving instance of `app`: a new JMAP side (own
    /// metrics, empty caches), credential cache and request bounds.
    pub fn new(app: &App, options: &ServeOptions) -> Self {
        let mut jmap = Jmap::new(
            app.store.clone(),
            app.blobs.clone(),
            options.limits,
            options.switches,
            options.cache_sizes,
        );
        jmap.relay = options.smtp_relay.clone();
        jmap.upstream = options.upstream.clone().map(|upstream| {
            crate::mail::upstream::Upstream::new(
                upstream,
                app.store.clone(),
                app.blobs.clone(),
                jmap.metrics.clone(),
            )
        });
        let max_in_flight = match options.max_in_flight {
            0 => DEFAULT_MAX_IN_FLIGHT,
            max => max,
        };
        let metrics = jmap.metrics.clone();
        let limits = jmap.limits;
        let mut auth = Authenticator::new(
            app.store.clone(),
            metrics.clone(),
            options.trusted_proxies.clone(),
        );
        auth.upstream = jmap.upstream.clone();
        let jmap_upstream = options.jmap_upstream.as_ref().and_then(|options| {
            crate::mail::upstream::jmap::JmapUpstream::new(options.url.clone(), metrics.clone())
                .inspect_err(|error| tracing::error!(%error, "the JMAP upstream's client"))
                .ok()
                .map(|upstream| {
                    Arc::new(upstream.forwarding_client_address(options.trusts_forwarded))
                })
        });
        let mirror = jmap_upstream
            .clone()
            .zip(options.jmap_upstream.as_ref())
            .map(|(upstream, options)| {
                Arc::new(crate::mail::upstream::jmap::mirror::Mirror::new(
                    upstream,
                    app.store.clone(),
                    app.blobs.clone(),
                    metrics.clone(),
                    options.poll,
                    options.idle,
                    limits.max_size_upload,
                ))
            });
        Self {
            jmap: Arc::new(jmap),
            auth,
            jmap_upstream,
            mirror,
            public_url: options
                .public_url
                .as_ref()
                .map(|u| u.trim_end_matches('/').to_string()),
            in_flight: tokio::sync::Semaphore::new(max_in_flight),
            account_slots: AccountSlots::new(limits.max_concurrent_requests as usize),
            upload_slots: AccountSlots::new(limits.max_concurrent_upload as usize),
            stream_slots: stream_slots::StreamSlots::default(),
            body_deadline: options.connections.header_read_timeout.saturating_mul(2),
            min_upload_rate: options.connections.min_upload_rate,
        }
    }

    /// The absolute base URL for session URLs.
    pub fn base_url(&self, headers: &HeaderMap) -> String {
        if let Some(url) = &self.public_url {
            return url.clone();
        }
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .filter(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_graphic()))
            .unwrap_or("localhost");
        format!("http://{host}")
    }
}

/// A serving instance of `app` with `options`: the router to hand to
/// [`serve`], and its state (metrics, JMAP side) for in-process callers
/// such as tests and benchmarks.
pub fn assemble(app: &App, options: &ServeOptions) -> (Router, Arc<AppState>) {
    let state = Arc::new(AppState::new(app, options));
    (router(state.clone(), &options.cors_origins), state)
}

/// The router with every route, CORS answered for `cors_origins`.
pub fn router(state: Arc<AppState>, cors_origins: &[String]) -> Router {
    let router = if state.jmap_upstream.is_some() {
        upstream::routes(state)
    } else {
        local_routes(state)
    };
    if cors_origins.is_empty() {
        return router;
    }
    let origins: Vec<HeaderValue> = cors_origins
        .iter()
        .filter_map(|origin| HeaderValue::from_str(origin.trim_end_matches('/')).ok())
        .collect();
    router.layer(
        CorsLayer::new()
            .allow_origin(AllowOrigin::list(origins))
            .allow_methods([Method::GET, Method::POST, Method::OPTIONS])
            .allow_headers([header::AUTHORIZATION, header::CONTENT_TYPE, header::ACCEPT])
            .allow_credentials(true)
            .max_age(std::time::Duration::from_secs(3600)),
    )
}

/// The routes of a standalone instance (or one in front of an IMAP upstream).
fn local_routes(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/.well-known/jmap", get(session::get_session))
        .route("/jmap/session", get(session::get_session))
        .route("/jmap/api", post(api::post_api))
        .route("/jmap/upload/{account_id}/", post(blob::upload))
        .route("/jmap/upload/{account_id}", post(blob::upload))
        .route(
            "/jmap/download/{account_id}/{blob_id}/{name}",
            get(blob::download),
        )
        .route("/jmap/eventsource", get(eventsource::event_source))
        .with_state(state)
}

/// The router of the metrics listener: `GET /metrics` (no auth), the
/// counters of `state`'s instance in the OpenMetrics text format.
pub fn metrics_router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .with_state(state)
}

async fn metrics(
    axum::extract::State(state): axum::extract::State<Arc<AppState>>,
) -> impl axum::response::IntoResponse {
    state.jmap.loader.report_caches().await;
    state.jmap.list_texts.report(&state.jmap.metrics).await;
    state.jmap.mailboxes.report(&state.jmap.metrics).await;
    state.jmap.pages.report(&state.jmap.metrics).await;
    if let Some(mirror) = &state.mirror {
        mirror.names.report(&state.jmap.metrics).await;
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.jmap.metrics.encode(),
    )
}

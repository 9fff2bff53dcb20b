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
//! [`AppState::new`] builds the state of a serving instance of an [`App`]
//! (its metrics, JMAP side, bounds), [`local_routes`] its routes and
//! [`with_cors`] their CORS; the assembly (`crate::assembly`) puts them
//! together, or the proxy wing's routes instead. [`serve`] (in `serve.rs`: hyper-util's
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

use std::sync::Arc;

use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::routing::{get, post};
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::app::{App, ServeOptions};
use crate::jmap::Jmap;
use crate::mail::work::AccountSlots;
use auth::Authenticator;
pub use axum::Router;
pub use serve::serve;

/// API requests in flight on one node before 429 when
/// [`ServeOptions::max_in_flight`] is 0.
const DEFAULT_MAX_IN_FLIGHT: usize = 1024;

/// Shared state of the HTTP handlers.
pub struct AppState {
    pub jmap: Arc<Jmap>,
    pub auth: Authenticator,
    /// Caches beyond the JMAP side's whose sizes `GET /metrics` reports
    /// (the proxy wing's, when the assembly installs it).
    pub cache_reports: Vec<Arc<dyn crate::metrics::CacheReport>>,
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
        Self::with(app, options, |_, _| {})
    }

    /// [`AppState::new`], with `install` given the JMAP side and the
    /// authenticator before they are shared: where the assembly plugs in
    /// the seams of the proxy wing (its writer, outbound route, login check).
    pub fn with(
        app: &App,
        options: &ServeOptions,
        install: impl FnOnce(&mut Jmap, &mut Authenticator),
    ) -> Self {
        let mut jmap = Jmap::new(
            app.store.clone(),
            app.blobs.clone(),
            options.limits,
            options.switches,
            options.cache_sizes,
        );
        jmap.route = crate::mail::delivery::Route::Relay(options.smtp_relay.clone());
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
        install(&mut jmap, &mut auth);
        Self {
            jmap: Arc::new(jmap),
            auth,
            cache_reports: Vec::new(),
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

/// `router` with CORS answered for `cors_origins` (none: as it is).
pub fn with_cors(router: Router, cors_origins: &[String]) -> Router {
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

/// The routes of an instance that answers from its own store (standalone,
/// or with the proxy wing's seams installed).
pub fn local_routes(state: Arc<AppState>) -> Router {
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
    for cache in &state.cache_reports {
        cache.report(&state.jmap.metrics).await;
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.jmap.metrics.encode(),
    )
}

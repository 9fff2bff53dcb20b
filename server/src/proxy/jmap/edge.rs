//! The HTTP edge of a JMAP proxy (`serve --upstream https://…`, issue 19,
//! ADR 0009): the same routes as a standalone server, answered through the
//! upstream.
//!
//! - `GET /.well-known/jmap`, `/jmap/session`: the upstream's session for
//!   the request's credential, its URLs Fastview's
//!   ([`UpstreamSession::for_clients`]): the one kept for the credential
//!   when the upstream answered it within
//!   [`SESSION_GET_REUSE`] (seconds), else fetched again, so a changed
//!   password or session shows within that time (ADR 0009). The session
//!   kept for API calls is dropped as soon as an answer through this node
//!   names another `sessionState`.
//! - `POST /jmap/api`: read under the upstream's `maxSizeRequest` within
//!   the body deadline, then sent to the upstream's `apiUrl`; its answer
//!   streamed back as it is.
//! - downloads, uploads and the event source: streamed both ways, never
//!   held whole.
//!
//! Every request is authenticated by the upstream: the `Authorization`
//! header is forwarded as it came, and the session the upstream answered
//! for it is kept [`crate::proxy::jmap::client::SESSION_TTL`]. A
//! request without one is 401 here, without a round trip. An event source
//! may come without one (a browser's `EventSource` cannot send it): its URL
//! then carries what the upstream put in its template, and it goes to the
//! upstream's event source path as last seen in a session.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use crate::http::AppState;
use crate::http::api::{is_json, read_limited};
use crate::http::auth::brake_user;
use crate::http::error::HttpError;
use crate::jmap::error::RequestError;
use crate::jmap::request::{MAX_JSON_VALUES, Request, json_values_over};
use crate::proxy::jmap::client::{Answer, SESSION_GET_REUSE, SESSION_TTL};
use crate::proxy::jmap::forward::{Proxied, ProxyError};
use crate::proxy::jmap::mirror::Mirror;
use crate::proxy::jmap::{JmapUpstream, UpstreamSession};
use crate::proxy::upstream::{Throttle, UpstreamError};

/// Request headers a proxied request carries to the upstream.
const FORWARDED_REQUEST_HEADERS: [HeaderName; 6] = [
    header::ACCEPT,
    header::CONTENT_TYPE,
    header::RANGE,
    header::IF_NONE_MATCH,
    header::IF_MODIFIED_SINCE,
    HeaderName::from_static("last-event-id"),
];

/// Response headers of the upstream a client is given back (hop-by-hop
/// headers and the upstream's own connection handling stay behind).
const RETURNED_RESPONSE_HEADERS: [HeaderName; 9] = [
    header::CONTENT_TYPE,
    header::CONTENT_LENGTH,
    header::CONTENT_DISPOSITION,
    header::CONTENT_RANGE,
    header::CACHE_CONTROL,
    header::ETAG,
    header::LAST_MODIFIED,
    header::RETRY_AFTER,
    header::WWW_AUTHENTICATE,
];

/// What a JMAP proxy's routes share: the serving instance's own state
/// (authentication, bounds, the JMAP side that answers from the mirror),
/// the upstream's client and the mirror (both `None` only when the client
/// could not be made: every request is then a 500, and `serve` refuses to
/// start before that).
pub struct JmapProxy {
    pub app: Arc<AppState>,
    pub upstream: Option<Arc<JmapUpstream>>,
    pub mirror: Option<Arc<Mirror>>,
}

impl JmapProxy {
    /// The JMAP proxy of a serving instance (`serve --upstream https://…`)
    /// whose own state is `state`: the upstream's client (its TLS set-up
    /// logged when it cannot be made) and the mirror, whose caches
    /// `GET /metrics` reports from now on.
    pub fn assemble(
        options: &super::JmapUpstreamOptions,
        app: &crate::app::App,
        mut state: AppState,
    ) -> Arc<Self> {
        let metrics = state.jmap.metrics.clone();
        let upstream = JmapUpstream::new(options.url.clone(), metrics.clone())
            .inspect_err(|error| tracing::error!(%error, "the JMAP upstream's client"))
            .ok()
            .map(|upstream| {
                let upstream = upstream
                    .forwarding_client_address(options.trusts_forwarded)
                    .with_outage_grace(options.outage_grace);
                Arc::new(upstream)
            });
        let mirror = upstream.clone().map(|upstream| {
            Arc::new(Mirror::new(
                upstream,
                app.store.clone(),
                app.blobs.clone(),
                metrics,
                options,
                state.jmap.limits.max_size_upload,
            ))
        });
        if let Some(mirror) = &mirror {
            state.cache_reports.push(mirror.clone());
        }
        Arc::new(Self {
            app: Arc::new(state),
            upstream,
            mirror,
        })
    }
}

/// The routes of a proxying instance: the paths of
/// `crate::http::local_routes`.
pub fn routes(state: Arc<JmapProxy>) -> Router {
    Router::new()
        .route("/.well-known/jmap", get(session))
        .route("/jmap/session", get(session))
        .route("/jmap/api", post(api))
        .route("/jmap/upload/{account_id}/", post(upload))
        .route("/jmap/upload/{account_id}", post(upload))
        .route(
            "/jmap/download/{account_id}/{blob_id}/{name}",
            get(download),
        )
        .route("/jmap/eventsource", get(event_source))
        .with_state(state)
}

fn upstream(proxy: &JmapProxy) -> Result<&JmapUpstream, HttpError> {
    proxy
        .upstream
        .as_deref()
        .ok_or_else(|| HttpError::Internal("no JMAP upstream".into()))
}

fn authorization(headers: &HeaderMap) -> Result<&HeaderValue, HttpError> {
    headers
        .get(header::AUTHORIZATION)
        .ok_or(HttpError::Unauthorized)
}

/// Who is asking: the request's `Authorization` and the client's address
/// (the TCP peer, or `X-Forwarded-For` from a `--trusted-proxy`).
#[derive(Clone, Copy)]
struct Caller<'a> {
    authorization: &'a HeaderValue,
    client: IpAddr,
}

impl<'a> Caller<'a> {
    /// The caller of a request with `headers` from TCP peer `peer`; 401
    /// without an `Authorization` header.
    fn of(state: &AppState, headers: &'a HeaderMap, peer: SocketAddr) -> Result<Self, HttpError> {
        Ok(Self {
            authorization: authorization(headers)?,
            client: state.auth.client_address(peer.ip(), headers),
        })
    }
}

/// The session of a request's credential: 401 when the upstream refused
/// it, 429 when this node's failure brake or the upstream does, 503 when
/// the upstream could not be asked.
///
/// Failed logins are braked here per (user, client address) and per
/// address, as a standalone server brakes them (issue 43), before the
/// upstream sees them: otherwise every guess reaches the upstream from
/// this node's address, and its brake locks the user, or everyone, out.
/// A braked caller is refused before a kept session is looked at.
async fn session_of(
    state: &AppState,
    upstream: &JmapUpstream,
    caller: Caller<'_>,
    max_age: Duration,
) -> Result<Arc<UpstreamSession>, HttpError> {
    let user = brake_user(caller.authorization);
    state.auth.check_brake(&user, caller.client).await?;
    if let Some(kept) = upstream.kept_session(caller.authorization, max_age).await {
        return Ok(kept);
    }
    let slots = state.auth.reserve_login(&user, caller.client).await?;
    let session = upstream
        .session(caller.authorization, max_age, Some(caller.client))
        .await;
    match session {
        Ok(session) => Ok(session),
        Err(UpstreamError::LoginRefused) => {
            slots.keep();
            Err(HttpError::Unauthorized)
        }
        Err(UpstreamError::Throttled {
            why: Throttle::TooManyRequests,
            retry_after,
        }) => Err(HttpError::UpstreamThrottled {
            retry_after: retry_after.map_or(60, |wait| wait.as_secs()),
        }),
        Err(other) => Err(HttpError::UpstreamUnavailable(other.to_string())),
    }
}

/// Whether a request is run call by call ([`Proxied`]): one with a call
/// the mirror may answer or a write, that the upstream would not refuse
/// whole. One naming a capability the upstream's session does not name,
/// or more calls than its `maxCallsInRequest`, goes to the upstream as it
/// came, for it to answer (and so does a body past [`MAX_JSON_VALUES`],
/// which is never parsed).
fn taken_apart(session: &UpstreamSession, request: &Request) -> bool {
    let Some(capabilities) = session.object.get("capabilities") else {
        return false;
    };
    let max_calls = capabilities
        .get(crate::proxy::jmap::CAPABILITY_CORE)
        .and_then(|core| core.get("maxCallsInRequest"))
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(16);
    let known = request
        .using
        .iter()
        .all(|capability| capabilities.get(capability).is_some());
    let wanted = request.method_calls.iter().any(|call| {
        crate::proxy::jmap::forward::may_answer(&call.0)
            || crate::proxy::jmap::forward::is_write(&call.0)
    });
    known && wanted && request.method_calls.len() as u64 <= max_calls
}

/// A round trip that failed after the login: 502 naming the upstream.
fn failed(error: UpstreamError) -> HttpError {
    HttpError::UpstreamFailed(error.to_string())
}

async fn session(
    State(proxy): State<Arc<JmapProxy>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Result<Response, HttpError> {
    let state = &proxy.app;
    let upstream = upstream(&proxy)?;
    let caller = Caller::of(state, &headers, peer)?;
    let authorization = caller.authorization;
    let session = session_of(state, upstream, caller, SESSION_GET_REUSE).await?;
    // A client that fetches the session is about to use its accounts: their
    // mirrors start syncing now.
    if let Some(mirror) = &proxy.mirror
        && let Err(error) = mirror.use_accounts(&session, authorization).await
    {
        tracing::warn!(%error, "the mirror could not note the accounts in use");
    }
    Ok(axum::Json(session.for_clients(&state.base_url(&headers))).into_response())
}

async fn api(
    State(proxy): State<Arc<JmapProxy>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, HttpError> {
    let state = &proxy.app;
    let upstream = upstream(&proxy)?;
    let _node_permit = state
        .in_flight
        .try_acquire()
        .map_err(|_| HttpError::Overloaded)?;
    let caller = Caller::of(state, &headers, peer)?;
    let authorization = caller.authorization;
    let session = session_of(state, upstream, caller, SESSION_TTL).await?;
    let limit = session.max_size_request;
    let read = tokio::time::timeout(state.body_deadline, read_limited(body, limit));
    let bytes = match read.await {
        Err(_elapsed) => return Err(HttpError::BodyTimeout),
        Ok(Ok(bytes)) => bytes,
        Ok(Err(Some(()))) => return Err(RequestError::Limit("maxSizeRequest").into()),
        Ok(Err(None)) => return Err(HttpError::ClientDisconnected),
    };
    if let Some(mirror) = &proxy.mirror
        && let Err(error) = mirror.use_accounts(&session, authorization).await
    {
        tracing::warn!(%error, "the mirror could not note the accounts in use");
    }
    // A request with an Email/get may be answered here in part, and one
    // with a write is followed by the mirror's catching up; any other goes
    // as it came, and its answer streams back.
    // (A body not declared JSON goes as it came, for the upstream to refuse.)
    // The body is parsed once (not past the JSON-value bound a request has):
    // for the metrics label, and to take it apart.
    let request: Option<Request> = (!json_values_over(&bytes, MAX_JSON_VALUES))
        .then(|| serde_json::from_slice(&bytes).ok())
        .flatten();
    let method = first_method(request.as_ref());
    let request = request.filter(|request| is_json(&headers) && taken_apart(&session, request));
    if let (Some(request), Some(mirror)) = (request, &proxy.mirror) {
        let proxied = Proxied {
            jmap: &state.jmap,
            mirror,
            upstream,
            session: &session,
            authorization,
        };
        return match proxied.handle(request).await {
            Ok(response) => {
                // The session kept for the credential is not the
                // upstream's any more: the next one is fetched.
                if Some(&response.session_state) != session.object.get("state") {
                    upstream.forget_session(authorization).await;
                }
                Ok(([(header::CONTENT_TYPE, "application/json")], response.body).into_response())
            }
            Err(ProxyError::Answered(answer)) => Ok(as_the_upstream_answered(answer)),
            Err(ProxyError::Upstream(error)) => Err(failed(error)),
        };
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .cloned()
        .unwrap_or_else(|| HeaderValue::from_static("application/octet-stream"));
    let response = upstream
        .api(
            &session,
            authorization,
            content_type,
            bytes,
            method,
            Some(caller.client),
        )
        .await
        .map_err(failed)?;
    Ok(passed_back(response))
}

async fn download(
    State(proxy): State<Arc<JmapProxy>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path((account_id, blob_id, name)): Path<(String, String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, HttpError> {
    let target = |session: &UpstreamSession| {
        session.download_target(&account_id, &blob_id, &name, query.as_deref())
    };
    stream_through(&proxy, peer, &headers, "download", target, None).await
}

async fn upload(
    State(proxy): State<Arc<JmapProxy>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(account_id): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, HttpError> {
    let target = |session: &UpstreamSession| session.upload_target(&account_id, query.as_deref());
    stream_through(&proxy, peer, &headers, "upload", target, Some(body)).await
}

/// A download (no `body`: GET) or an upload (POST of `body`) streamed
/// through: the caller's upstream session, the URL `target` picks from it,
/// the request with the caller's headers, the upstream's answer passed back.
async fn stream_through(
    proxy: &JmapProxy,
    peer: SocketAddr,
    headers: &HeaderMap,
    command: &'static str,
    target: impl FnOnce(&UpstreamSession) -> Result<reqwest::Url, UpstreamError>,
    body: Option<Body>,
) -> Result<Response, HttpError> {
    let state = &proxy.app;
    let upstream = upstream(proxy)?;
    let caller = Caller::of(state, headers, peer)?;
    let session = session_of(state, upstream, caller, SESSION_TTL).await?;
    let url = target(&session).map_err(failed)?;
    let method = match body {
        None => reqwest::Method::GET,
        Some(_) => reqwest::Method::POST,
    };
    let request = forwarded(
        upstream,
        upstream.stream(method, url),
        headers,
        caller.client,
    );
    let request = match body {
        None => request,
        Some(body) => request.body(reqwest::Body::wrap_stream(body.into_data_stream())),
    };
    let response = upstream.forward(request, command).await.map_err(failed)?;
    Ok(passed_back(response))
}

async fn event_source(
    State(proxy): State<Arc<JmapProxy>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, HttpError> {
    let state = &proxy.app;
    let upstream = upstream(&proxy)?;
    let client = state.auth.client_address(peer.ip(), &headers);
    let url = match headers.contains_key(header::AUTHORIZATION) {
        true => session_of(
            state,
            upstream,
            Caller::of(state, &headers, peer)?,
            SESSION_TTL,
        )
        .await?
        .event_source_target(query.as_deref())
        .map_err(failed)?,
        false => upstream
            .event_source_target(query.as_deref())
            .ok_or(HttpError::PushAccessInvalid)?
            .map_err(failed)?,
    };
    let request = upstream.stream(reqwest::Method::GET, url);
    let request = forwarded(upstream, request, &headers, client);
    let response = upstream
        .forward(request, "eventsource")
        .await
        .map_err(failed)?;
    Ok(passed_back(response))
}

/// `request` with the client's `Authorization`,
/// [`FORWARDED_REQUEST_HEADERS`] and, when the upstream trusts it, the
/// client's address ([`JmapUpstream::with_client_address`]).
fn forwarded(
    upstream: &JmapUpstream,
    mut request: reqwest::RequestBuilder,
    headers: &HeaderMap,
    client: IpAddr,
) -> reqwest::RequestBuilder {
    for name in std::iter::once(&header::AUTHORIZATION).chain(&FORWARDED_REQUEST_HEADERS) {
        for value in headers.get_all(name) {
            request = request.header(name.clone(), value.clone());
        }
    }
    upstream.with_client_address(request, Some(client))
}

/// The upstream's response as the client's: its status,
/// [`RETURNED_RESPONSE_HEADERS`] and its body streamed as it arrives.
fn passed_back(response: reqwest::Response) -> Response {
    let status =
        StatusCode::from_u16(response.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut headers = HeaderMap::new();
    for name in &RETURNED_RESPONSE_HEADERS {
        for value in response.headers().get_all(name) {
            headers.append(name.clone(), value.clone());
        }
    }
    let mut passed = Response::new(Body::from_stream(response.bytes_stream()));
    *passed.status_mut() = status;
    *passed.headers_mut() = headers;
    passed
}

/// The metrics label of a request's first method call (`unknown` when it
/// names none the server knows, or the body is not a JMAP request at all).
fn first_method(request: Option<&Request>) -> &'static str {
    request
        .and_then(|request| request.method_calls.first())
        .map_or("unknown", |call| {
            crate::jmap::dispatch::method_label(&call.0)
        })
}

/// The upstream's non-200 answer to a forwarded request, for the client as
/// it came: status, body, and the `Retry-After` of a 429 or 503, so that a
/// client told to slow down is told for how long.
fn as_the_upstream_answered(answer: Answer) -> Response {
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut response = (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        answer.body,
    )
        .into_response();
    if let Some(retry_after) = answer.retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, retry_after);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::{Request, first_method};

    fn label(body: &[u8]) -> &'static str {
        first_method(serde_json::from_slice::<Request>(body).ok().as_ref())
    }

    #[test]
    fn a_request_is_counted_under_its_first_method() {
        let body = br#"{"using":[],"methodCalls":[["Email/get",{},"0"],["Mailbox/get",{},"1"]]}"#;
        assert_eq!(label(body), "Email/get");
        assert_eq!(
            label(br#"{"using":[],"methodCalls":[["Foo/bar",{},"0"]]}"#),
            "unknown"
        );
        assert_eq!(label(b"not json"), "unknown");
    }
}

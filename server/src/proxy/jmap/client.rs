//! The round trips of a JMAP proxy to its upstream (issue 19): the session
//! of a credential, API requests, and the streamed downloads, uploads and
//! event source.
//!
//! A credential is the upstream's: a request's `Authorization` header is
//! sent to the upstream's session URL, and the session it answers (200) is
//! what proves it, kept [`SESSION_TTL`] per credential (by a keyed digest of
//! the header; the header itself is not kept). 401 or 403 is a refused
//! login; 429 or 503 is [`UpstreamError::Throttled`] (with its
//! Retry-After, on API calls and downloads too); anything else that is
//! not a session is
//! [`UpstreamError::Refused`], and a failed connection or a timeout
//! [`UpstreamError::Unreachable`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use moka::future::Cache;

use crate::account::OutageGrace;
use reqwest::header::{AUTHORIZATION, HeaderValue, RETRY_AFTER};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;
use url::Url;

use super::JmapUpstreamUrl;
use crate::metrics::Metrics;
use crate::proxy::turns::parse_retry_after;
use crate::proxy::upstream::{Throttle, UpstreamError};

/// How long a session the upstream gave for a credential stands for it:
/// a password changed upstream stops working here within this time, as a
/// changed local password does (`account::CREDENTIAL_TTL`).
pub const SESSION_TTL: Duration = Duration::from_secs(60);

/// How old a kept session may be and still answer a client's session GET
/// (`/.well-known/jmap`) for its credential; an older one is fetched again
/// (ADR 0009). Kept short, as a cache that stands for a burst of logins of
/// one credential: a session changed upstream is shown to clients within
/// this time, and a refused credential is refused within this time at the
/// session GET (API calls trust a session for [`SESSION_TTL`] either way).
pub const SESSION_GET_REUSE: Duration = Duration::from_secs(5);

/// Session fetches (credential checks) in flight to the upstream at once
/// per node; more wait their turn.
const CHECKS_AT_ONCE: usize = 32;

/// The longest a session fetch or an API request may take, connection
/// included. Downloads, uploads and event streams have no total deadline
/// (they last as long as the data flows), only the connect timeout.
const ROUND_TRIP_TIMEOUT: Duration = Duration::from_secs(60);

/// The longest a new connection to the upstream may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest answer to an API request read whole (a batch of forwarded
/// calls, a sync's), in octets.
pub const MAX_ANSWER_OCTETS: usize = 64 << 20;

/// The largest session object read from the upstream, in octets.
const MAX_SESSION_OCTETS: usize = 1 << 20;

/// Octets kept unescaped in a path segment expanded into a URL template
/// (RFC 6570 simple expansion: the unreserved characters of RFC 3986).
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The upstream's session object for one credential (RFC 8620 §2), with
/// the URLs a proxy forwards to.
#[derive(Debug)]
pub struct UpstreamSession {
    /// The session object as the upstream answered it.
    pub object: Map<String, Value>,
    /// `apiUrl`, resolved against the session URL.
    pub api_url: Url,
    /// `downloadUrl`, `uploadUrl`, `eventSourceUrl`: the upstream's URL
    /// templates (RFC 6570 level 1), resolved against the session URL.
    pub download_url: String,
    pub upload_url: String,
    pub event_source_url: String,
    /// The core capability's `maxSizeRequest` in octets (10 MB when the
    /// upstream does not say).
    pub max_size_request: u64,
    /// The core capability's `maxObjectsInGet` (500 when the upstream does
    /// not say; at least 1).
    pub max_objects_in_get: usize,
    /// When the upstream answered it.
    pub fetched_at: Instant,
}

impl UpstreamSession {
    /// The session's `username` (RFC 8620 §2), when the upstream gave one.
    pub fn username(&self) -> Option<&str> {
        self.object.get("username").and_then(Value::as_str)
    }

    /// Reads the URLs and `maxSizeRequest` of a session object that the
    /// upstream answered at `base` (after redirects).
    fn from_object(base: &Url, object: Map<String, Value>) -> Result<Self, UpstreamError> {
        let template = |name: &str| -> Result<String, UpstreamError> {
            let text = object
                .get(name)
                .and_then(Value::as_str)
                .ok_or_else(|| UpstreamError::Refused(format!("the session has no {name}")))?;
            resolve(base, text)
        };
        let api_url = Url::parse(&template("apiUrl")?)
            .map_err(|error| UpstreamError::Refused(format!("apiUrl: {error}")))?;
        let core = object
            .get("capabilities")
            .and_then(|capabilities| capabilities.get(super::CAPABILITY_CORE));
        let core_limit = |name: &str| core.and_then(|core| core.get(name)).and_then(Value::as_u64);
        let max_size_request = core_limit("maxSizeRequest").unwrap_or(10_000_000);
        let max_objects_in_get = core_limit("maxObjectsInGet")
            .unwrap_or(500)
            .clamp(1, 10_000) as usize;
        Ok(Self {
            download_url: template("downloadUrl")?,
            upload_url: template("uploadUrl")?,
            event_source_url: template("eventSourceUrl")?,
            api_url,
            max_size_request,
            max_objects_in_get,
            object,
            fetched_at: Instant::now(),
        })
    }

    /// The session as a client of the proxy at `base` (`http://host:port`,
    /// no trailing slash) sees it: the upstream's object with its four URLs
    /// Fastview's, each keeping the query of the upstream's template (so a
    /// template variable or a parameter the upstream put there, such as an
    /// access token, reaches the upstream as the client fills it in).
    pub fn for_clients(&self, base: &str) -> Value {
        let with_query = |path: String, template: &str| match template.split_once('?') {
            Some((_, query)) => format!("{path}?{query}"),
            None => path,
        };
        let mut object = self.object.clone();
        object.insert("apiUrl".into(), Value::String(format!("{base}/jmap/api")));
        object.insert(
            "downloadUrl".into(),
            Value::String(with_query(
                format!("{base}/jmap/download/{{accountId}}/{{blobId}}/{{name}}"),
                &self.download_url,
            )),
        );
        object.insert(
            "uploadUrl".into(),
            Value::String(with_query(
                format!("{base}/jmap/upload/{{accountId}}/"),
                &self.upload_url,
            )),
        );
        object.insert(
            "eventSourceUrl".into(),
            Value::String(with_query(
                format!("{base}/jmap/eventsource"),
                &self.event_source_url,
            )),
        );
        Value::Object(object)
    }

    /// The upstream URL of a download: the path of `downloadUrl` with the
    /// variables filled in, then `query` as the client sent it (filled from
    /// the same template's query).
    pub fn download_target(
        &self,
        account_id: &str,
        blob_id: &str,
        name: &str,
        query: Option<&str>,
    ) -> Result<Url, UpstreamError> {
        expand(
            &self.download_url,
            &[
                ("accountId", account_id),
                ("blobId", blob_id),
                ("name", name),
            ],
            query,
        )
    }

    /// Whether the session (fetched with one credential) lists account
    /// `account_id` as the user's own (`isPersonal`): the accounts the
    /// mirror answers for (another user's, shared, may show each user a
    /// different part of itself).
    pub fn has_personal_account(&self, account_id: &str) -> bool {
        self.object
            .get("accounts")
            .and_then(|accounts| accounts.get(account_id))
            .and_then(|account| account.get("isPersonal"))
            == Some(&Value::Bool(true))
    }

    /// The upstream URL of a whole message's octets: `downloadUrl` with
    /// every variable filled in (`type` `message/rfc822`).
    pub fn message_url(&self, account_id: &str, blob_id: &str) -> Result<Url, UpstreamError> {
        let encode =
            |value: &str| percent_encoding::utf8_percent_encode(value, SEGMENT).to_string();
        let filled = self
            .download_url
            .replace("{accountId}", &encode(account_id))
            .replace("{blobId}", &encode(blob_id))
            .replace("{name}", "message.eml")
            .replace("{type}", &encode("message/rfc822"));
        Url::parse(&filled)
            .map_err(|error| UpstreamError::Refused(format!("the upstream's downloadUrl: {error}")))
    }

    /// The upstream URL of an upload into `account_id`.
    pub fn upload_target(
        &self,
        account_id: &str,
        query: Option<&str>,
    ) -> Result<Url, UpstreamError> {
        expand(&self.upload_url, &[("accountId", account_id)], query)
    }

    /// The upstream URL of an event source with the client's `query`.
    pub fn event_source_target(&self, query: Option<&str>) -> Result<Url, UpstreamError> {
        expand(&self.event_source_url, &[], query)
    }
}

/// `text` resolved against `base` when relative; template braces are kept
/// as they are (the URL parser would escape them).
fn resolve(base: &Url, text: &str) -> Result<String, UpstreamError> {
    if Url::parse(text).is_ok() || text.contains("://") {
        return Ok(text.to_string());
    }
    let origin = base.origin().ascii_serialization();
    if text.starts_with('/') {
        return Ok(format!("{origin}{text}"));
    }
    let directory = base.path().rsplit_once('/').map_or("", |(dir, _)| dir);
    Ok(format!("{origin}{directory}/{text}"))
}

/// The path part of URL template `template` with `variables` filled in
/// (each value percent-encoded as one segment), followed by `query`.
fn expand(
    template: &str,
    variables: &[(&str, &str)],
    query: Option<&str>,
) -> Result<Url, UpstreamError> {
    let path = template.split_once('?').map_or(template, |(path, _)| path);
    let mut expanded = path.to_string();
    for (name, value) in variables {
        let encoded = percent_encoding::utf8_percent_encode(value, SEGMENT).to_string();
        expanded = expanded.replace(&format!("{{{name}}}"), &encoded);
    }
    if let Some(query) = query.filter(|query| !query.is_empty()) {
        expanded.push('?');
        expanded.push_str(query);
    }
    Url::parse(&expanded)
        .map_err(|error| UpstreamError::Refused(format!("the upstream's URL {template}: {error}")))
}

/// The upstream's HTTP answer to a POSTed Request ([`JmapUpstream::post`]).
#[derive(Debug)]
pub struct Answer {
    /// Its HTTP status.
    pub status: u16,
    /// Its `Retry-After` (RFC 9110 §10.2.3), as sent: seconds or an HTTP
    /// date; passed on to the client with a 429 or 503.
    pub retry_after: Option<HeaderValue>,
    /// Its body.
    pub body: Vec<u8>,
}

/// The upstream JMAP server of one serving instance.
pub struct JmapUpstream {
    url: JmapUpstreamUrl,
    http: reqwest::Client,
    sessions: Cache<[u8; 32], Arc<UpstreamSession>>,
    /// Keys the digests `sessions` is indexed by, so the cache holds no
    /// credential and no digest that could be tried offline.
    key: [u8; 32],
    checks: Semaphore,
    metrics: Arc<Metrics>,
    /// `eventSourceUrl` of the last session fetched (any credential's): where
    /// an event source without an `Authorization` header goes.
    last_event_source: std::sync::RwLock<Option<String>>,
    /// `--upstream-trusts-forwarded`: each client's address goes to the
    /// upstream in `Forwarded` and `X-Forwarded-For`, so that it brakes
    /// failed logins per client, not per proxy (issue 43).
    forward_client_address: bool,
    /// `--upstream-outage-grace-minutes`: how long a session the upstream
    /// gave still stands for its credential while it cannot be reached.
    outage_grace: OutageGrace,
    /// Until when the upstream is taken as unreachable after a session
    /// fetch failed so (no request waits on a connect meanwhile).
    down_until: std::sync::Mutex<Option<Instant>>,
}

/// How long after a session fetch found the upstream unreachable no other
/// fetch is tried (kept sessions answer within the outage grace).
const DOWN_RETRY: Duration = Duration::from_secs(2);

impl JmapUpstream {
    /// An upstream at session URL `url`, counting its round trips into
    /// `metrics`.
    pub fn new(url: JmapUpstreamUrl, metrics: Arc<Metrics>) -> Result<Self, UpstreamError> {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true)
            .build()
            .map_err(|error| UpstreamError::Unreachable(error.to_string()))?;
        Ok(Self {
            url,
            http,
            sessions: Cache::builder()
                .max_capacity(100_000)
                .time_to_live(SESSION_TTL)
                .build(),
            key: rand::random(),
            checks: Semaphore::new(CHECKS_AT_ONCE),
            metrics,
            last_event_source: std::sync::RwLock::new(None),
            forward_client_address: false,
            outage_grace: OutageGrace::new(Duration::ZERO, SESSION_TTL),
            down_until: std::sync::Mutex::new(None),
        })
    }

    /// This upstream, a session of which still stands for its credential
    /// for `grace` after the upstream gave it, while the upstream cannot be
    /// reached (`--upstream-outage-grace-minutes`, issue 45): reads the
    /// mirror answers go on through an outage, forwarded calls answer
    /// `serverUnavailable`. Only the exact credential, only the one the
    /// upstream last accepted for its user, never one refused since.
    pub fn with_outage_grace(mut self, grace: Duration) -> Self {
        self.outage_grace = OutageGrace::new(grace, SESSION_TTL);
        self.sessions = Cache::builder()
            .max_capacity(100_000)
            .time_to_live(self.outage_grace.keep_for(SESSION_TTL))
            .build();
        self
    }

    /// This upstream, telling it each client's address
    /// (`--upstream-trusts-forwarded`) when `on`.
    pub fn forwarding_client_address(mut self, on: bool) -> Self {
        self.forward_client_address = on;
        self
    }

    /// `request` with the client's address in `Forwarded` (RFC 7239) and
    /// `X-Forwarded-For`, when this upstream is told it; as it was
    /// otherwise.
    pub fn with_client_address(
        &self,
        request: reqwest::RequestBuilder,
        client: Option<std::net::IpAddr>,
    ) -> reqwest::RequestBuilder {
        match client.filter(|_| self.forward_client_address) {
            Some(client @ std::net::IpAddr::V4(_)) => request
                .header("forwarded", format!("for={client}"))
                .header("x-forwarded-for", client.to_string()),
            Some(client @ std::net::IpAddr::V6(_)) => request
                .header("forwarded", format!("for=\"[{client}]\""))
                .header("x-forwarded-for", client.to_string()),
            None => request,
        }
    }

    /// The session kept for `authorization` if the upstream answered it
    /// within `max_age`: no round trip.
    pub async fn kept_session(
        &self,
        authorization: &HeaderValue,
        max_age: Duration,
    ) -> Option<Arc<UpstreamSession>> {
        let kept = self.sessions.get(&self.digest(authorization)).await?;
        (kept.fetched_at.elapsed() <= max_age).then_some(kept)
    }

    /// The upstream's session URL.
    pub fn url(&self) -> &JmapUpstreamUrl {
        &self.url
    }

    /// The session the upstream gives `authorization` (the client's own
    /// header), from the cache when it was fetched within `max_age` (at most
    /// [`SESSION_TTL`]) and not forgotten since; concurrent fetches for one
    /// credential share one round trip, made from `client` (told the
    /// upstream when it trusts it). Errors: [`UpstreamError::LoginRefused`] on 401
    /// or 403, [`UpstreamError::Throttled`] on 429, [`UpstreamError::Refused`] for any other answer that is not
    /// a session object, [`UpstreamError::Unreachable`].
    pub async fn session(
        &self,
        authorization: &HeaderValue,
        max_age: Duration,
        client: Option<std::net::IpAddr>,
    ) -> Result<Arc<UpstreamSession>, UpstreamError> {
        let digest = self.digest(authorization);
        let kept = self.sessions.get(&digest).await;
        if let Some(kept) = &kept {
            if kept.fetched_at.elapsed() <= max_age.min(SESSION_TTL) {
                return Ok(kept.clone());
            }
            if self.is_down()
                && let Some(kept) = self.in_outage(digest, kept).await
            {
                return Ok(kept);
            }
            self.sessions.invalidate(&digest).await;
        }
        let fetched = self
            .sessions
            .try_get_with(digest, self.fetch_session(authorization, client))
            .await
            .map_err(|error| match &*error {
                UpstreamError::LoginRefused => UpstreamError::LoginRefused,
                UpstreamError::Throttled { why, retry_after } => UpstreamError::Throttled {
                    why: *why,
                    retry_after: *retry_after,
                },
                UpstreamError::Unreachable(text) => UpstreamError::Unreachable(text.clone()),
                other => UpstreamError::Refused(other.to_string()),
            });
        match fetched {
            Ok(session) => {
                if let Some(user) = session.username() {
                    self.outage_grace.accepted(user, digest).await;
                }
                Ok(session)
            }
            Err(UpstreamError::Unreachable(why)) => {
                if let Ok(mut down) = self.down_until.lock() {
                    *down = Some(Instant::now() + DOWN_RETRY);
                }
                match kept {
                    Some(kept) => self
                        .in_outage(digest, &kept)
                        .await
                        .ok_or(UpstreamError::Unreachable(why)),
                    None => Err(UpstreamError::Unreachable(why)),
                }
            }
            Err(error) => Err(error),
        }
    }

    /// Whether a session fetch found the upstream unreachable within the
    /// last [`DOWN_RETRY`].
    fn is_down(&self) -> bool {
        self.down_until
            .lock()
            .ok()
            .and_then(|down| *down)
            .is_some_and(|until| Instant::now() < until)
    }

    /// `kept` (the session of credential `digest`) while the upstream
    /// cannot be reached: when it is within the outage grace and the
    /// credential is the one the upstream last accepted for its user; kept
    /// again so the next request finds it.
    async fn in_outage(
        &self,
        digest: [u8; 32],
        kept: &Arc<UpstreamSession>,
    ) -> Option<Arc<UpstreamSession>> {
        let user = kept.username()?;
        let ago = kept.fetched_at.elapsed();
        if !self.outage_grace.stands(user, digest, ago).await {
            return None;
        }
        self.metrics.upstream_outage_logins.inc();
        self.sessions.insert(digest, kept.clone()).await;
        Some(kept.clone())
    }

    /// Drops the session kept for `authorization`: the next request of the
    /// credential fetches it (an answer named another `sessionState`).
    pub async fn forget_session(&self, authorization: &HeaderValue) {
        self.sessions.invalidate(&self.digest(authorization)).await;
    }

    async fn fetch_session(
        &self,
        authorization: &HeaderValue,
        client: Option<std::net::IpAddr>,
    ) -> Result<Arc<UpstreamSession>, UpstreamError> {
        let _turn = self
            .checks
            .acquire()
            .await
            .map_err(|_| UpstreamError::Unreachable("shutting down".into()))?;
        let request = self
            .http
            .get(self.url.url().clone())
            .header(AUTHORIZATION, authorization.clone())
            .timeout(ROUND_TRIP_TIMEOUT);
        let request = self.with_client_address(request, client);
        let response = self.send(request, "session", "session").await?;
        let status = response.status();
        if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
            return Err(UpstreamError::LoginRefused);
        }
        if let Some(throttled) = throttled(&response) {
            return Err(throttled);
        }
        if !status.is_success() {
            return Err(UpstreamError::Refused(format!(
                "the session URL answered {status}"
            )));
        }
        let base = response.url().clone();
        let body = read_limited(response, MAX_SESSION_OCTETS).await?;
        let object: Map<String, Value> = serde_json::from_slice(&body)
            .map_err(|error| UpstreamError::Refused(format!("the session is not JSON: {error}")))?;
        let session = UpstreamSession::from_object(&base, object)?;
        if let Ok(mut last) = self.last_event_source.write() {
            *last = Some(session.event_source_url.clone());
        }
        Ok(Arc::new(session))
    }

    /// The upstream URL of an event source with the client's `query` and no
    /// credential of its own (what the query carries is the upstream's
    /// business), from the last session fetched; `None` before any.
    pub fn event_source_target(&self, query: Option<&str>) -> Option<Result<Url, UpstreamError>> {
        let template = self.last_event_source.read().ok()?.clone()?;
        Some(expand(&template, &[], query))
    }

    /// POSTs an API request body of `content_type` to the session's
    /// `apiUrl` as `authorization` from `client` (told the upstream when it
    /// trusts it), counted under `method` (the first call's, as a metrics
    /// label).
    pub async fn api(
        &self,
        session: &UpstreamSession,
        authorization: &HeaderValue,
        content_type: HeaderValue,
        body: Bytes,
        method: &'static str,
        client: Option<std::net::IpAddr>,
    ) -> Result<reqwest::Response, UpstreamError> {
        let request = self
            .http
            .post(session.api_url.clone())
            .header(AUTHORIZATION, authorization.clone())
            .header(reqwest::header::CONTENT_TYPE, content_type)
            .timeout(ROUND_TRIP_TIMEOUT)
            .body(body);
        let request = self.with_client_address(request, client);
        self.send(request, method, "api").await
    }

    /// POSTs a JMAP Request object (`request`, serialized here) as
    /// `authorization`, counted under `method`; the upstream's [`Answer`],
    /// its body read whole up to [`MAX_ANSWER_OCTETS`] (more is
    /// [`UpstreamError::Refused`]).
    pub async fn post(
        &self,
        session: &UpstreamSession,
        authorization: &HeaderValue,
        request: &Value,
        method: &'static str,
    ) -> Result<Answer, UpstreamError> {
        let response = self
            .post_response(session, authorization, request, method)
            .await?;
        let status = response.status().as_u16();
        let retry_after = response.headers().get(RETRY_AFTER).cloned();
        let body = read_limited(response, MAX_ANSWER_OCTETS).await?;
        Ok(Answer {
            status,
            retry_after,
            body,
        })
    }

    /// [`JmapUpstream::post`]'s response, its body unread.
    async fn post_response(
        &self,
        session: &UpstreamSession,
        authorization: &HeaderValue,
        request: &Value,
        method: &'static str,
    ) -> Result<reqwest::Response, UpstreamError> {
        let body = serde_json::to_vec(request)
            .map_err(|error| UpstreamError::Refused(error.to_string()))?;
        let json = HeaderValue::from_static("application/json");
        self.api(session, authorization, json, body.into(), method, None)
            .await
    }

    /// Makes method calls on the upstream ([`JmapUpstream::post`]) and
    /// returns its Response object. Errors: 401 is
    /// [`UpstreamError::LoginRefused`], 429 and 503
    /// [`UpstreamError::Throttled`] with the upstream's Retry-After, any
    /// other status than 2xx or a body that is not a Response
    /// [`UpstreamError::Refused`].
    pub async fn call(
        &self,
        session: &UpstreamSession,
        authorization: &HeaderValue,
        request: &Value,
        method: &'static str,
    ) -> Result<Map<String, Value>, UpstreamError> {
        let response = self
            .post_response(session, authorization, request, method)
            .await?;
        if let Some(throttled) = throttled(&response) {
            return Err(throttled);
        }
        let status = response.status().as_u16();
        let body = read_limited(response, MAX_ANSWER_OCTETS).await?;
        if status == 401 {
            return Err(UpstreamError::LoginRefused);
        }
        if !(200..300).contains(&status) {
            return Err(UpstreamError::Refused(format!(
                "the API answered {status}: {}",
                String::from_utf8_lossy(&body[..body.len().min(300)])
            )));
        }
        serde_json::from_slice(&body)
            .map_err(|error| UpstreamError::Refused(format!("not a JMAP Response: {error}")))
    }

    /// The octets of a message the upstream holds (its `downloadUrl`), at
    /// most `limit` of them. Errors: 429 and 503 are
    /// [`UpstreamError::Throttled`], another status than 2xx
    /// [`UpstreamError::Refused`].
    pub async fn message(
        &self,
        session: &UpstreamSession,
        authorization: &HeaderValue,
        account_id: &str,
        blob_id: &str,
        limit: usize,
    ) -> Result<Vec<u8>, UpstreamError> {
        let request = self
            .http
            .get(session.message_url(account_id, blob_id)?)
            .header(AUTHORIZATION, authorization.clone())
            .timeout(ROUND_TRIP_TIMEOUT);
        let response = self.send(request, "sync", "download").await?;
        if let Some(throttled) = throttled(&response) {
            return Err(throttled);
        }
        if !response.status().is_success() {
            return Err(UpstreamError::Refused(format!(
                "the download of {blob_id} answered {}",
                response.status()
            )));
        }
        read_limited(response, limit).await
    }

    /// Sends a request made with [`JmapUpstream::stream`] (a download, an
    /// upload, an event source), counted under command `command`.
    pub async fn forward(
        &self,
        request: reqwest::RequestBuilder,
        command: &'static str,
    ) -> Result<reqwest::Response, UpstreamError> {
        self.send(request, "other", command).await
    }

    /// A request to `url` on the client shared by every round trip, with no
    /// total deadline (only the connect timeout): what the HTTP edge streams.
    pub fn stream(&self, method: reqwest::Method, url: Url) -> reqwest::RequestBuilder {
        self.http.request(method, url)
    }

    async fn send(
        &self,
        request: reqwest::RequestBuilder,
        method: &'static str,
        command: &'static str,
    ) -> Result<reqwest::Response, UpstreamError> {
        self.metrics.count_upstream_round_trip(method, command);
        request
            .send()
            .await
            .map_err(|error| UpstreamError::Unreachable(error.to_string()))
    }

    fn digest(&self, authorization: &HeaderValue) -> [u8; 32] {
        let mut hasher = Sha256::new();
        hasher.update(self.key);
        hasher.update(authorization.as_bytes());
        hasher.finalize().into()
    }
}

/// [`UpstreamError::Throttled`] when `response` is a 429 or a 503, with
/// its Retry-After (seconds or an HTTP date) when it has one.
fn throttled(response: &reqwest::Response) -> Option<UpstreamError> {
    let why = match response.status() {
        reqwest::StatusCode::TOO_MANY_REQUESTS => Throttle::TooManyRequests,
        reqwest::StatusCode::SERVICE_UNAVAILABLE => Throttle::Unavailable,
        _ => return None,
    };
    let retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| parse_retry_after(value, chrono::Utc::now()));
    Some(UpstreamError::Throttled { why, retry_after })
}

/// The body of `response`, refused past `limit` octets.
async fn read_limited(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, UpstreamError> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|error| UpstreamError::Unreachable(error.to_string()))?
    {
        if body.len() + chunk.len() > limit {
            return Err(UpstreamError::Refused(format!(
                "the answer is larger than {limit} octets"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use url::Url;

    use super::UpstreamSession;

    fn session() -> UpstreamSession {
        let object = json!({
            "capabilities": {"urn:ietf:params:jmap:core": {"maxSizeRequest": 5_000_000}},
            "apiUrl": "/jmap/api",
            "downloadUrl": "https://up.example/dl/{accountId}/{blobId}/{name}?accept={type}",
            "uploadUrl": "up/{accountId}",
            "eventSourceUrl": "https://up.example/es?types={types}&closeafter={closeafter}&ping={ping}&access=k1",
        });
        let base = Url::parse("https://up.example/.well-known/jmap").unwrap();
        UpstreamSession::from_object(&base, object.as_object().unwrap().clone()).unwrap()
    }

    #[test]
    fn urls_are_resolved_against_the_session_url() {
        let session = session();
        assert_eq!(session.api_url.as_str(), "https://up.example/jmap/api");
        assert_eq!(
            session.upload_url,
            "https://up.example/.well-known/up/{accountId}"
        );
        assert_eq!(session.max_size_request, 5_000_000);
    }

    #[test]
    fn clients_see_fastview_urls_with_the_upstream_query() {
        let seen = session().for_clients("http://proxy:8080");
        assert_eq!(seen["apiUrl"], "http://proxy:8080/jmap/api");
        assert_eq!(
            seen["downloadUrl"],
            "http://proxy:8080/jmap/download/{accountId}/{blobId}/{name}?accept={type}"
        );
        assert_eq!(
            seen["uploadUrl"],
            "http://proxy:8080/jmap/upload/{accountId}/"
        );
        assert_eq!(
            seen["eventSourceUrl"],
            "http://proxy:8080/jmap/eventsource?types={types}&closeafter={closeafter}&ping={ping}&access=k1"
        );
        assert_eq!(
            seen["capabilities"]["urn:ietf:params:jmap:core"]["maxSizeRequest"],
            5_000_000
        );
    }

    #[test]
    fn targets_fill_the_path_and_keep_the_clients_query() {
        let session = session();
        let url = session
            .download_target("a1", "b/2", "my file.eml", Some("accept=message%2Frfc822"))
            .unwrap();
        assert_eq!(
            url.as_str(),
            "https://up.example/dl/a1/b%2F2/my%20file.eml?accept=message%2Frfc822"
        );
        let url = session
            .event_source_target(Some("types=*&closeafter=no&ping=30&access=k1"))
            .unwrap();
        assert_eq!(
            url.as_str(),
            "https://up.example/es?types=*&closeafter=no&ping=30&access=k1"
        );
        let url = session.upload_target("a1", None).unwrap();
        assert_eq!(url.as_str(), "https://up.example/.well-known/up/a1");
    }
}

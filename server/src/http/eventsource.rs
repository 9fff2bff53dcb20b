//! `GET /jmap/eventsource` (RFC 8620 §7.3): Server-Sent Events with a
//! StateChange whenever one of the account's state strings changes.
//!
//! Changes are detected by polling the account's states every
//! [`POLL_INTERVAL`], so changes made by the CLI or another server node are
//! delivered as well as this node's own.
//!
//! - `types`: `*` or a comma-separated list of type names (`Email`,
//!   `Mailbox`, `Thread`); only those types are pushed.
//! - `closeafter=state` ends the response after the first `state` event;
//!   `no` (or absent) keeps it open.
//! - `ping=N` sends a `ping` event whose data is `{"interval": N}` whenever
//!   N seconds pass without an event (N clamped to [`MIN_PING`]..[`MAX_PING`]);
//!   `ping=0` sends none.
//! - Each `state` event carries an event id encoding all three states
//!   (`email.mailbox.thread`); a client reconnecting with `Last-Event-ID`
//!   gets a StateChange at once for what changed while it was away. Pings
//!   set no id.
//! - `access`: without an `Authorization` header (a browser's EventSource
//!   cannot send one), the push access the session's `eventSourceUrl`
//!   carries ([`super::push_access`]) authenticates the stream.
//!
//! An open stream checks every [`TOKEN_RECHECK`] that the credential it was
//! opened with still stands ([`super::auth::Authenticator::still_valid`]): a
//! changed password, a revoked token or a removed account ends it.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, Sse};
use futures::Stream;
use serde::Deserialize;
use serde_json::json;

use super::AppState;
use super::auth::{AuthenticatedWith, FreshlyAuthenticated};
use super::error::HttpError;
use super::push_access::{CredentialTag, PushAccess};
use super::stream_slots::{StreamKey, StreamSlot};
use crate::account::{Credential, TOKEN_RECHECK, password_tag};
use crate::jmap::ids;
use crate::store::{States, Store};

/// How often the account's states are read.
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);

/// The shortest ping interval used, in seconds (RFC 8620 §7.3: a server's
/// minimum may not exceed 30).
pub const MIN_PING: u64 = 1;

/// The longest ping interval used, in seconds (RFC 8620 §7.3: a server's
/// maximum may not be under 300).
pub const MAX_PING: u64 = 3600;

/// Query parameters of the event source URL.
#[derive(Debug, Deserialize)]
pub struct EventSourceQuery {
    /// Comma-separated type names, or `*`.
    #[serde(default)]
    types: Option<String>,
    /// `state` closes the stream after the first StateChange; `no` keeps it open.
    #[serde(default)]
    closeafter: Option<String>,
    /// Seconds between pings; 0 sends none.
    #[serde(default)]
    ping: Option<u64>,
    /// A push access ([`super::push_access`]), used without an `Authorization` header.
    #[serde(default)]
    access: Option<String>,
}

/// The account and credential of an event source request: its
/// `Authorization` header when it has one, else its push access; 401 when
/// neither stands (the access altered, expired, or its credential changed).
async fn stream_account(
    state: &AppState,
    headers: &HeaderMap,
    access: Option<&str>,
    authorized: Option<FreshlyAuthenticated>,
) -> Result<(crate::store::Account, Credential), HttpError> {
    if let Some(AuthenticatedWith(account, credential)) = authorized {
        return Ok((account, credential));
    }
    if headers.contains_key(axum::http::header::AUTHORIZATION) {
        return Err(HttpError::Unauthorized);
    }
    let access = access.ok_or(HttpError::PushAccessInvalid)?;
    let now = chrono::Utc::now().timestamp();
    let key = state.auth.push_key().await?;
    let granted = PushAccess::verify(access, key, now).ok_or(HttpError::PushAccessInvalid)?;
    let account = state
        .jmap
        .store
        .account_by_id(granted.account)
        .await
        .map_err(|e| HttpError::Internal(e.to_string()))?
        .ok_or(HttpError::PushAccessInvalid)?;
    let credential = match granted.credential {
        CredentialTag::Password(tag) if tag == password_tag(&account.password_hash) => {
            Credential::Password { tag }
        }
        CredentialTag::Token(id) => Credential::Token { id },
        CredentialTag::Password(_) => return Err(HttpError::PushAccessInvalid),
    };
    if !state.auth.still_valid(account.id, &credential).await {
        return Err(HttpError::PushAccessInvalid);
    }
    Ok((account, credential))
}

fn changed_types(
    before: &States,
    after: &States,
    wanted: &dyn Fn(&str) -> bool,
) -> serde_json::Map<String, serde_json::Value> {
    let mut changed = serde_json::Map::new();
    for (name, old, new) in [
        ("Email", before.email, after.email),
        ("Mailbox", before.mailbox, after.mailbox),
        ("Thread", before.thread, after.thread),
        ("Identity", before.identity, after.identity),
        (
            "VacationResponse",
            before.vacation_response,
            after.vacation_response,
        ),
        (
            "EmailSubmission",
            before.email_submission,
            after.email_submission,
        ),
    ] {
        if old != new && wanted(name) {
            changed.insert(name.to_string(), json!(new.to_string()));
        }
    }
    changed
}

/// The event id of a `state` event: every state of the account.
fn event_id(states: &States) -> String {
    format!(
        "{}.{}.{}.{}.{}.{}",
        states.email,
        states.mailbox,
        states.thread,
        states.identity,
        states.vacation_response,
        states.email_submission
    )
}

/// The states a `Last-Event-ID` names, if it is one of ours (an id of a
/// server before Identity, VacationResponse and EmailSubmission had states
/// names three: those then read as 0, and their first event follows).
fn parse_event_id(id: &str) -> Option<States> {
    let parts: Vec<i64> = id
        .split('.')
        .map(|part| part.parse::<i64>().ok())
        .collect::<Option<_>>()?;
    match parts[..] {
        [e, m, t] => Some(States::from([e, m, t, 0, 0, 0])),
        [e, m, t, i, v, s] => Some(States::from([e, m, t, i, v, s])),
        _ => None,
    }
}

/// Opens the event stream for the authenticated account.
pub async fn event_source(
    State(state): State<Arc<AppState>>,
    query: Result<Query<EventSourceQuery>, axum::extract::rejection::QueryRejection>,
    headers: HeaderMap,
    authorized: Result<FreshlyAuthenticated, HttpError>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, HttpError> {
    let Query(query) = query.map_err(|rejection| HttpError::BadQuery(rejection.body_text()))?;
    // A request with an Authorization header stands or falls by it (429 and
    // 503 of the login brake included); one without uses its push access.
    let authorized = match authorized {
        Ok(authorized) => Some(authorized),
        Err(_) if !headers.contains_key(axum::http::header::AUTHORIZATION) => None,
        Err(error) => return Err(error),
    };
    let by_access = authorized.is_none();
    let (account, credential) =
        stream_account(&state, &headers, query.access.as_deref(), authorized).await?;
    // Held by the stream's task: given back when the client goes, taken
    // over by a newer stream of the same credential when it is full.
    let slot = state
        .stream_slots
        .acquire(StreamKey {
            account: account.id,
            credential: credential.clone(),
            by_access,
        })
        .ok_or(HttpError::TooManyStreams)?;
    let store = state.jmap.store.clone();
    let current = store
        .states(account.id)
        .await
        .map_err(|e| HttpError::Internal(e.to_string()))?;
    // A reconnecting client missed what changed since its last event id.
    let mut last = headers
        .get("last-event-id")
        .and_then(|value| value.to_str().ok())
        .and_then(parse_event_id)
        .unwrap_or(current);
    let StreamOptions {
        types,
        close_after_state,
        ping,
    } = StreamOptions::of(query);
    let account_id = ids::account_id(account.id);
    let state_for_stream = state.clone();
    let stream = async_stream(move |sender| async move {
        let state = state_for_stream;
        let mut last_sent = tokio::time::Instant::now();
        let mut last_checked = tokio::time::Instant::now();
        let mut now = Some(current);
        loop {
            let states = match now.take() {
                Some(states) => states,
                None => {
                    let polled = poll_states(
                        &state,
                        store.as_ref(),
                        &sender,
                        &slot,
                        (account.id, &credential),
                        &mut last_checked,
                    );
                    match polled.await {
                        Some(states) => states,
                        None => break,
                    }
                }
            };
            let wanted = |name: &str| types.iter().any(|t| t == "*" || t == name);
            let changed = changed_types(&last, &states, &wanted);
            last = states;
            if changed.is_empty() {
                if let Some(seconds) = ping
                    && last_sent.elapsed() >= Duration::from_secs(seconds)
                {
                    let event = Event::default()
                        .event("ping")
                        .data(json!({ "interval": seconds }).to_string());
                    if sender.send(event).await.is_err() {
                        break;
                    }
                    last_sent = tokio::time::Instant::now();
                }
                continue;
            }
            let data =
                json!({ "@type": "StateChange", "changed": { account_id.clone(): changed } });
            let event = Event::default()
                .event("state")
                .id(event_id(&states))
                .data(data.to_string());
            if sender.send(event).await.is_err() || close_after_state {
                break;
            }
            last_sent = tokio::time::Instant::now();
        }
    });
    Ok(Sse::new(stream))
}

/// What an event stream sends and how often (RFC 8620 §7.3).
struct StreamOptions {
    /// The type names asked for, or `*`.
    types: Vec<String>,
    /// Close after the first StateChange (`closeafter=state`).
    close_after_state: bool,
    /// Seconds between pings, within [`MIN_PING`]..=[`MAX_PING`]; none for 0.
    ping: Option<u64>,
}

impl StreamOptions {
    fn of(query: EventSourceQuery) -> Self {
        let types: Vec<String> = query
            .types
            .unwrap_or_else(|| "*".into())
            .split(',')
            .map(|t| t.trim().to_string())
            .collect();
        let close_after_state = query.closeafter.as_deref() == Some("state");
        let ping = match query.ping.unwrap_or(0) {
            0 => None,
            seconds => Some(seconds.clamp(MIN_PING, MAX_PING)),
        };
        Self {
            types,
            close_after_state,
            ping,
        }
    }
}

/// The account's states after one [`POLL_INTERVAL`], or `None` when the
/// stream ends: the client went, a newer stream took its slot, its
/// credential no longer stands (checked every [`TOKEN_RECHECK`]), or the
/// store failed.
async fn poll_states(
    state: &AppState,
    store: &dyn Store,
    sender: &tokio::sync::mpsc::Sender<Event>,
    slot: &StreamSlot,
    (account, credential): (i64, &Credential),
    last_checked: &mut tokio::time::Instant,
) -> Option<States> {
    tokio::time::sleep(POLL_INTERVAL).await;
    if sender.is_closed() || slot.replaced() {
        return None;
    }
    if last_checked.elapsed() >= TOKEN_RECHECK {
        if !state.auth.still_valid(account, credential).await {
            return None;
        }
        *last_checked = tokio::time::Instant::now();
    }
    store.states(account).await.ok()
}

/// A stream fed by a task through a channel; the task ends when the client goes.
fn async_stream<F, Fut>(task: F) -> impl Stream<Item = Result<Event, Infallible>>
where
    F: FnOnce(tokio::sync::mpsc::Sender<Event>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (sender, receiver) = tokio::sync::mpsc::channel(16);
    tokio::spawn(task(sender));
    futures::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|event| (Ok(event), receiver))
    })
}

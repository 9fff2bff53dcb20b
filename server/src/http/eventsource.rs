//! `GET /jmap/eventsource` (RFC 8620 §7.3): Server-Sent Events with a
//! StateChange whenever one of the account's state strings changes.
//!
//! Changes are detected by polling the account's states every
//! [`POLL_INTERVAL`], so changes made by the CLI or another server node are
//! delivered as well as this node's own.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use serde::Deserialize;
use serde_json::json;

use super::AppState;
use super::auth::Authenticated;
use super::error::HttpError;
use crate::jmap::ids;
use crate::store::States;

/// How often the account's states are read.
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);

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
    ] {
        if old != new && wanted(name) {
            changed.insert(name.to_string(), json!(new.to_string()));
        }
    }
    changed
}

/// Opens the event stream for the authenticated account.
pub async fn event_source(
    State(state): State<Arc<AppState>>,
    Authenticated(account): Authenticated,
    Query(query): Query<EventSourceQuery>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, HttpError> {
    let store = state.jmap.store.clone();
    let mut last = store
        .states(account.id)
        .await
        .map_err(|e| HttpError::Internal(e.to_string()))?;
    let types: Vec<String> = query
        .types
        .unwrap_or_else(|| "*".into())
        .split(',')
        .map(|t| t.trim().to_string())
        .collect();
    let close_after_state = query.closeafter.as_deref() == Some("state");
    let ping = query.ping.unwrap_or(0).clamp(0, 3600);
    let account_id = ids::account_id(account.id);
    let stream = async_stream(move |sender| async move {
        loop {
            tokio::time::sleep(POLL_INTERVAL).await;
            if sender.is_closed() {
                break;
            }
            let Ok(now) = store.states(account.id).await else {
                break;
            };
            let wanted = |name: &str| types.iter().any(|t| t == "*" || t == name);
            let changed = changed_types(&last, &now, &wanted);
            last = now;
            if changed.is_empty() {
                continue;
            }
            let data =
                json!({ "@type": "StateChange", "changed": { account_id.clone(): changed } });
            if sender
                .send(Event::default().event("state").data(data.to_string()))
                .await
                .is_err()
                || close_after_state
            {
                break;
            }
        }
    });
    // `ping=0` asks for no pings: an interval no connection outlives.
    let interval = if ping > 0 {
        Duration::from_secs(ping)
    } else {
        Duration::from_secs(365 * 86_400)
    };
    let sse = Sse::new(stream).keep_alive(
        KeepAlive::new().interval(interval).event(
            Event::default()
                .event("ping")
                .data(json!({"@type": "Ping", "interval": ping}).to_string()),
        ),
    );
    Ok(sse)
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

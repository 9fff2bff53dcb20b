//! The mirror's types: [`Mirror`] (the mirrors of one serving instance),
//! one account's [`Mirrored`] and what is read of it ([`MirrorState`],
//! [`Census`], [`MailboxSnapshot`]). The other files of `mirror/` add
//! their methods.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::header::HeaderValue;
use serde_json::Value;
use tokio::sync::Notify;

use crate::blob::BlobStore;
use crate::metrics::Metrics;
use crate::proxy::jmap::client::JmapUpstream;
use crate::proxy::jmap::names::{MIRROR_NAME_BYTES, MirrorNames};
use crate::proxy::jmap::{CAPABILITY_CORE, CAPABILITY_MAIL};
use crate::proxy::turns::UpstreamTurns;
use crate::store::{Account, Store};

/// `using` of the mirror's own requests.
pub(super) const USING: [&str; 2] = [CAPABILITY_CORE, CAPABILITY_MAIL];

/// How long after a client's last request its account counts as active:
/// without an event source its mirror polls every `--upstream-poll-active`
/// until then, and backs off after.
pub(super) const ACTIVE_CLIENT: Duration = Duration::from_secs(60);

/// An upstream account's mirror: its local account and the state it is at.
#[derive(Debug, Clone)]
pub struct MirrorState {
    /// The local account.
    pub account: Account,
    /// The upstream Email state the mirror holds.
    pub email_state: String,
    /// The upstream Mailbox id of each local mailbox, as of the last sync.
    pub mailboxes: Arc<HashMap<i64, String>>,
    /// What the upstream said of the account at `email_state`, when the
    /// last sync's census was taken at it.
    pub census: Option<Arc<Census>>,
}

/// What the upstream said of an account right after a sync, in one request
/// (the module doc of `mirror.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Census {
    /// The upstream Email state the answer was given at (the census counts
    /// only when it is the mirror's).
    pub email_state: String,
    /// The upstream Thread state at that Email state.
    pub thread_state: String,
    /// Whether the upstream's `queryState` (of the census's unfiltered
    /// Email/query) is not its Email state (Cyrus's `25:0` beside `25`):
    /// then an Email/query answered here carries a query state the proxy
    /// mints ([`crate::proxy::jmap::forward`]), never one that pretends
    /// to be the upstream's (issue 45 item 5, ADR 0009).
    pub mints_query_states: bool,
    /// Whether the mirror holds every upstream email of the account, one
    /// local email for each: the upstream's `total` of an unfiltered
    /// Email/query is both the number mapped and the number stored.
    pub complete: bool,
}

/// The upstream's own answer to Mailbox/get of every mailbox, all
/// properties, as the last sync read it (counts included): what a
/// Mailbox/get is answered from.
#[derive(Debug)]
pub struct MailboxSnapshot {
    /// The upstream Mailbox state of the answer.
    pub state: String,
    /// Its Mailbox objects, in its order.
    pub list: Vec<Value>,
}

/// One mirrored account in use on this node.
pub(super) struct Mirrored {
    pub(super) upstream_id: String,
    pub(super) account: Account,
    /// The upstream Mailbox id of each local mailbox, as of the last sync
    /// that succeeded.
    pub(super) mailboxes: Mutex<Arc<HashMap<i64, String>>>,
    /// Written by every sync of the account (one at a time), read by each
    /// local answer while it reads the mirror ([`Mirror::hold`]): local
    /// answers run side by side, never beside a sync.
    pub(super) syncing: Arc<tokio::sync::RwLock<()>>,
    /// The latest credential a request for the account came with, and when;
    /// cleared when the account's task ends.
    pub(super) authorization: Mutex<Option<(HeaderValue, Instant)>>,
    /// Whether the account's follow task runs.
    pub(super) following: Mutex<bool>,
    /// The upstream Email state of the last sync of the running task that
    /// succeeded; `None` before one, after one failed, and once the task
    /// ended (the mirror is then as old as anything: not answered from).
    pub(super) fresh_state: Mutex<Option<String>>,
    /// Writes forwarded for the account, and how many of them a sync that
    /// succeeded had started after: the mirror answers only when it has
    /// caught up with every write made through this node.
    pub(super) writes: AtomicU64,
    pub(super) synced_through: AtomicU64,
    /// Wakes the follow task (a write it must catch up with).
    pub(super) wake: Notify,
    /// Tells the follow task that a client came back after a minute without
    /// a request: without an event source it polls at once rather than at
    /// the end of an idle wait.
    pub(super) client_returned: Notify,
    /// The upstream's mailboxes as the last sync that succeeded read them.
    pub(super) mailbox_snapshot: Mutex<Option<Arc<MailboxSnapshot>>>,
    /// The census after the last sync that succeeded, when it could be
    /// taken.
    pub(super) census: Mutex<Option<Arc<Census>>>,
    /// Call shapes (by digest) whose local answer was compared with the
    /// upstream's: whether it was the same ([`Mirror::verify`]). Cleared
    /// when the account's task ends.
    pub(super) verified: Mutex<HashMap<[u8; 32], bool>>,
}

impl Mirrored {
    /// The upstream's Email, Mailbox and Thread states the mirror's last
    /// sync reached, `None` before it has all three.
    pub(super) fn states(&self) -> Option<[String; 3]> {
        let email = self.fresh_state.lock().ok().and_then(|s| s.clone());
        let mailbox =
            (self.mailbox_snapshot.lock().ok()).and_then(|s| s.as_ref().map(|s| s.state.clone()));
        let thread =
            (self.census.lock().ok()).and_then(|c| c.as_ref().map(|c| c.thread_state.clone()));
        Some([email?, mailbox?, thread?])
    }

    /// Whether a StateChange the upstream pushed (`heard`: its `changed`
    /// object) names for this account only states the mirror already has
    /// (a write through this node that the mirror caught up with): then no
    /// sync is needed. Types the mirror does not keep are not looked at.
    pub(super) fn already_at(&self, heard: &Value) -> bool {
        let Some(changed) = heard.get("changed").and_then(Value::as_object) else {
            return false;
        };
        let Some(mine) = changed.get(&self.upstream_id) else {
            return changed.values().all(Value::is_object);
        };
        let (Some(mine), Some(states)) = (mine.as_object(), self.states()) else {
            return false;
        };
        ["Email", "Mailbox", "Thread"]
            .iter()
            .zip(&states)
            .all(|(name, state)| {
                mine.get(*name)
                    .is_none_or(|told| told.as_str() == Some(state))
            })
    }
}

impl Mirrored {
    pub(super) fn credential(&self) -> Option<(HeaderValue, Instant)> {
        self.authorization.lock().ok().and_then(|a| a.clone())
    }

    pub(super) fn set_fresh(&self, state: Option<String>) {
        if state.is_none() {
            if let Ok(mut snapshot) = self.mailbox_snapshot.lock() {
                *snapshot = None;
            }
            if let Ok(mut census) = self.census.lock() {
                *census = None;
            }
            if let Ok(mut verified) = self.verified.lock() {
                verified.clear();
            }
        }
        if let Ok(mut fresh) = self.fresh_state.lock() {
            *fresh = state;
        }
    }
}

/// The mirrors of one serving instance.
pub struct Mirror {
    pub(super) upstream: Arc<JmapUpstream>,
    pub(super) store: Arc<dyn Store>,
    pub(super) blobs: Arc<BlobStore>,
    pub(super) metrics: Arc<Metrics>,
    /// How long a followed account waits between syncs without an event.
    pub(super) poll: Duration,
    /// How often a followed account whose client is active polls when the
    /// upstream's event source gives no stream (`--upstream-poll-active`).
    pub(super) poll_active: Duration,
    /// Whether the upstream's event source answering without a stream was
    /// logged: once per upstream (a node has one).
    pub(super) event_source_warned: AtomicBool,
    /// How long after its last request an account is followed.
    pub(super) idle: Duration,
    /// The largest message downloaded (`maxSizeUpload` of this server).
    pub(super) max_message: usize,
    pub(super) accounts: Mutex<HashMap<String, Arc<Mirrored>>>,
    /// The upstream names of mirrored emails, kept.
    pub names: MirrorNames,
    /// The turns the follow tasks' syncs and polls take at the upstream
    /// (`--upstream-syncs-at-once`); a client's catch-up takes none.
    pub(super) turns: UpstreamTurns,
}

impl Mirror {
    /// Mirrors of `upstream`'s accounts in `store` and `blobs`, followed
    /// as `options` say (`poll`, `poll_active`, `idle`).
    pub fn new(
        upstream: Arc<JmapUpstream>,
        store: Arc<dyn Store>,
        blobs: Arc<BlobStore>,
        metrics: Arc<Metrics>,
        options: &crate::proxy::jmap::JmapUpstreamOptions,
        max_message: u64,
    ) -> Self {
        Self {
            upstream,
            store,
            blobs,
            metrics: metrics.clone(),
            poll: options.poll,
            poll_active: options.poll_active,
            event_source_warned: AtomicBool::new(false),
            idle: options.idle,
            max_message: usize::try_from(max_message).unwrap_or(usize::MAX),
            accounts: Mutex::new(HashMap::new()),
            names: MirrorNames::new(MIRROR_NAME_BYTES),
            turns: UpstreamTurns::new(options.syncs_at_once, metrics.clone()),
        }
    }

    pub(super) fn entry(&self, upstream_id: &str) -> Option<Arc<Mirrored>> {
        self.accounts
            .lock()
            .ok()
            .and_then(|accounts| accounts.get(upstream_id).cloned())
    }
}

#[async_trait::async_trait]
impl crate::metrics::CacheReport for Mirror {
    /// The mirror's kept names ([`MirrorNames`]).
    async fn report(&self, metrics: &Metrics) {
        self.names.report(metrics).await;
    }
}

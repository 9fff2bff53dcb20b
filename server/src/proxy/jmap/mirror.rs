//! The local mirror of a JMAP upstream's accounts (issue 19, ADR 0009).
//!
//! Each upstream account a client uses gets a local account whose emails
//! are the upstream's, stored through the ordinary ingest path (one
//! download per new message), so the projection, part tree and search
//! index are Fastview's own, and mapped to the upstream's ids
//! (`store::jmap_mirror`). A sync is one of two:
//!
//! - **whole**, the first time or when the upstream cannot calculate
//!   changes from the mirror's state: every Email id and its metadata
//!   (Email/query + Email/get by result reference, a page of
//!   `maxObjectsInGet` per round trip), compared with the mapped ones: new
//!   ones downloaded and stored, changed keywords or mailboxIds set, ones
//!   the upstream no longer lists destroyed;
//! - **from a state**: Email/changes from the state the mirror is at until
//!   `hasMoreChanges` is false, the created and updated ones read and
//!   applied as above, the destroyed ones destroyed.
//!
//! The state the mirror is at is recorded after what it names is applied,
//! so a mirror is never ahead of its state string; it may be behind the
//! upstream, and then answers as of that state. Each account's syncs run
//! one at a time ([`Mirror::catch_up`]); after a client's first request an
//! account task follows the upstream's event source (or polls) and syncs on
//! each Email change, until the account has been idle for
//! `--upstream-idle-minutes`. Credentials live in memory only, as long as
//! that task.
//!
//! After each sync a **census** asks the upstream, in one request, its
//! Email state, its Thread state, how many emails the account has and its
//! Email state again ([`Census`]): the mirror holds every upstream email
//! one for one when that count is the number mapped and the number stored,
//! and the Thread state is the one of the mirror's Email state when both
//! Email states are the one the sync reached. Calls whose answers depend on the whole account
//! (Thread/get, Email/query) are answered only then, and only in a shape
//! the mirror has once answered exactly as the upstream did
//! ([`Mirror::verified`]).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::header::HeaderValue;
use serde_json::{Map, Value, json};
use tokio::sync::Notify;

use super::client::{JmapUpstream, UpstreamSession};
use super::names::{MIRROR_NAME_BYTES, MirrorNames};
use crate::blob::BlobStore;
use crate::mail::body;
use crate::mail::ingest;
use crate::mail::message::parse_message;
use crate::metrics::Metrics;
use crate::proxy::upstream::UpstreamError;
use crate::store::{Account, EmailUpdate, Inserted, MirroredEmail, NewMailbox, Store};

/// The Email properties a sync reads of each message.
const METADATA: [&str; 6] = [
    "id",
    "blobId",
    "threadId",
    "mailboxIds",
    "keywords",
    "receivedAt",
];

/// The most call shapes remembered per account as answered alike or not
/// ([`Mirror::verify`]); past it a new shape stays forwarded.
const MAX_SHAPES: usize = 256;

/// The most messages downloaded and stored in one batch.
const STORE_BATCH: usize = 64;

/// `using` of the mirror's own requests.
const USING: [&str; 2] = [super::CAPABILITY_CORE, super::CAPABILITY_MAIL];

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
/// (module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Census {
    /// The upstream Email state the answer was given at (the census counts
    /// only when it is the mirror's).
    pub email_state: String,
    /// The upstream Thread state at that Email state.
    pub thread_state: String,
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
struct Mirrored {
    upstream_id: String,
    account: Account,
    /// The upstream Mailbox id of each local mailbox, as of the last sync
    /// that succeeded.
    mailboxes: Mutex<Arc<HashMap<i64, String>>>,
    /// Written by every sync of the account (one at a time), read by each
    /// local answer while it reads the mirror ([`Mirror::hold`]): local
    /// answers run side by side, never beside a sync.
    syncing: Arc<tokio::sync::RwLock<()>>,
    /// The latest credential a request for the account came with, and when;
    /// cleared when the account's task ends.
    authorization: Mutex<Option<(HeaderValue, Instant)>>,
    /// Whether the account's follow task runs.
    following: Mutex<bool>,
    /// The upstream Email state of the last sync of the running task that
    /// succeeded; `None` before one, after one failed, and once the task
    /// ended (the mirror is then as old as anything: not answered from).
    fresh_state: Mutex<Option<String>>,
    /// Writes forwarded for the account, and how many of them a sync that
    /// succeeded had started after: the mirror answers only when it has
    /// caught up with every write made through this node.
    writes: AtomicU64,
    synced_through: AtomicU64,
    /// Wakes the follow task (a write it must catch up with).
    wake: Notify,
    /// The upstream's mailboxes as the last sync that succeeded read them.
    mailbox_snapshot: Mutex<Option<Arc<MailboxSnapshot>>>,
    /// The census after the last sync that succeeded, when it could be
    /// taken.
    census: Mutex<Option<Arc<Census>>>,
    /// Call shapes (by digest) whose local answer was compared with the
    /// upstream's: whether it was the same ([`Mirror::verify`]). Cleared
    /// when the account's task ends.
    verified: Mutex<HashMap<[u8; 32], bool>>,
}

impl Mirrored {
    /// The upstream's Email, Mailbox and Thread states the mirror's last
    /// sync reached, `None` before it has all three.
    fn states(&self) -> Option<[String; 3]> {
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
    fn already_at(&self, heard: &Value) -> bool {
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
    fn credential(&self) -> Option<(HeaderValue, Instant)> {
        self.authorization.lock().ok().and_then(|a| a.clone())
    }

    fn set_fresh(&self, state: Option<String>) {
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
    upstream: Arc<JmapUpstream>,
    store: Arc<dyn Store>,
    blobs: Arc<BlobStore>,
    metrics: Arc<Metrics>,
    /// How long a followed account waits between syncs without an event.
    poll: Duration,
    /// How long after its last request an account is followed.
    idle: Duration,
    /// The largest message downloaded (`maxSizeUpload` of this server).
    max_message: usize,
    accounts: Mutex<HashMap<String, Arc<Mirrored>>>,
    /// The upstream names of mirrored emails, kept.
    pub names: MirrorNames,
}

impl Mirror {
    /// Mirrors of `upstream`'s accounts in `store` and `blobs`.
    pub fn new(
        upstream: Arc<JmapUpstream>,
        store: Arc<dyn Store>,
        blobs: Arc<BlobStore>,
        metrics: Arc<Metrics>,
        poll: Duration,
        idle: Duration,
        max_message: u64,
    ) -> Self {
        Self {
            upstream,
            store,
            blobs,
            metrics,
            poll,
            idle,
            max_message: usize::try_from(max_message).unwrap_or(usize::MAX),
            accounts: Mutex::new(HashMap::new()),
            names: MirrorNames::new(MIRROR_NAME_BYTES),
        }
    }

    fn entry(&self, upstream_id: &str) -> Option<Arc<Mirrored>> {
        self.accounts
            .lock()
            .ok()
            .and_then(|accounts| accounts.get(upstream_id).cloned())
    }

    /// The mirror of upstream account `upstream_id` when a call may be
    /// answered from it: its task follows the upstream, its last sync
    /// succeeded, and it has caught up with every write made through this
    /// node. `None` otherwise (the call is forwarded).
    pub fn ready(&self, upstream_id: &str) -> Option<MirrorState> {
        let mirrored = self.entry(upstream_id)?;
        if mirrored.synced_through.load(Ordering::Acquire) < mirrored.writes.load(Ordering::Acquire)
        {
            return None;
        }
        let email_state = mirrored.fresh_state.lock().ok()?.clone()?;
        let mailboxes = mirrored.mailboxes.lock().ok()?.clone();
        let census = mirrored
            .census
            .lock()
            .ok()?
            .clone()
            .filter(|census| census.email_state == email_state);
        Some(MirrorState {
            account: mirrored.account.clone(),
            email_state,
            mailboxes,
            census,
        })
    }

    /// Whether a call of `shape` (a method and the arguments its answer
    /// depends on besides paging, as text) on upstream account
    /// `upstream_id` was answered here as the upstream answered it: `None`
    /// until compared.
    pub fn verified(&self, upstream_id: &str, shape: &str) -> Option<bool> {
        self.entry(upstream_id)?
            .verified
            .lock()
            .ok()?
            .get(&shape_digest(shape))
            .copied()
    }

    /// Whether a new shape of upstream account `upstream_id` may still be
    /// compared (fewer than [`MAX_SHAPES`] remembered).
    pub fn may_verify(&self, upstream_id: &str) -> bool {
        self.entry(upstream_id)
            .and_then(|mirrored| mirrored.verified.lock().ok().map(|v| v.len() < MAX_SHAPES))
            .unwrap_or(false)
    }

    /// Holds off the syncs of upstream account `upstream_id` while a local
    /// answer reads the mirror, so that it reads what one state names;
    /// `None` while a sync is applying changes or waits to (the call is
    /// then forwarded). Any number of local answers hold it at once.
    pub fn hold(&self, upstream_id: &str) -> Option<tokio::sync::OwnedRwLockReadGuard<()>> {
        self.entry(upstream_id)?
            .syncing
            .clone()
            .try_read_owned()
            .ok()
    }

    /// Records whether the mirror's answer to a call of `shape` was the
    /// upstream's (the first comparison stands; at most [`MAX_SHAPES`] per
    /// account are kept).
    pub fn verify(&self, upstream_id: &str, shape: &str, alike: bool) {
        let Some(mirrored) = self.entry(upstream_id) else {
            return;
        };
        let Ok(mut verified) = mirrored.verified.lock() else {
            return;
        };
        let digest = shape_digest(shape);
        if verified.len() < MAX_SHAPES && !verified.contains_key(&digest) {
            if !alike {
                tracing::info!(account = %upstream_id, %shape, "answered unlike the upstream: forwarded from now on");
            }
            verified.insert(digest, alike);
        }
    }

    /// The upstream's mailboxes of `upstream_id` as its last sync read them,
    /// when the mirror may be answered from ([`Mirror::ready`]).
    pub fn mailboxes(&self, upstream_id: &str) -> Option<Arc<MailboxSnapshot>> {
        self.ready(upstream_id)?;
        self.entry(upstream_id)?
            .mailbox_snapshot
            .lock()
            .ok()?
            .clone()
    }

    /// Notes a request for the upstream accounts of `session` with
    /// `authorization`: each personal mail account gets its local account
    /// and its follow task (a first sync, then one per Email change) if it
    /// has none. Only personal accounts (`isPersonal`) are mirrored: an
    /// account shared with the user may show each user a different part of
    /// itself, which one mirror cannot.
    pub async fn use_accounts(
        self: &Arc<Self>,
        session: &Arc<UpstreamSession>,
        authorization: &HeaderValue,
    ) -> Result<(), UpstreamError> {
        for upstream_id in mail_accounts(session) {
            let mirrored = self.mirrored(&upstream_id).await?;
            if let Ok(mut latest) = mirrored.authorization.lock() {
                *latest = Some((authorization.clone(), Instant::now()));
            }
            let start = mirrored
                .following
                .lock()
                .map(|mut following| !std::mem::replace(&mut *following, true))
                .unwrap_or(false);
            if start {
                let mirror = self.clone();
                let session = session.clone();
                tokio::spawn(async move { mirror.follow(mirrored, session).await });
            }
        }
        Ok(())
    }

    /// After a write forwarded for upstream account `upstream_id`: syncs it
    /// now when no sync runs (so that the client reads its write back),
    /// else leaves it to the follow task, woken; until a sync started after
    /// the write succeeds, the account's calls are forwarded. A failed sync
    /// is logged, not the write's failure.
    pub async fn catch_up(
        &self,
        session: &UpstreamSession,
        authorization: &HeaderValue,
        upstream_id: &str,
    ) {
        let Some(mirrored) = self.entry(upstream_id) else {
            return;
        };
        mirrored.writes.fetch_add(1, Ordering::AcqRel);
        let Ok(guard) = mirrored.syncing.try_write() else {
            mirrored.wake.notify_one();
            return;
        };
        if let Err(error) = self
            .sync_locked(&mirrored, guard, session, authorization)
            .await
        {
            tracing::warn!(account = %upstream_id, %error, "mirror catch-up failed");
            mirrored.wake.notify_one();
        }
    }

    /// Brings the mirror of `upstream_id` up to the upstream Email state
    /// `state` a forwarded call of the same request showed, when its task
    /// follows it (waiting for a sync in progress); whether it got there.
    pub async fn reach(
        &self,
        session: &UpstreamSession,
        authorization: &HeaderValue,
        upstream_id: &str,
        state: &str,
    ) -> bool {
        let Some(mirrored) = self.entry(upstream_id) else {
            return false;
        };
        let guard = mirrored.syncing.write().await;
        match self.ready(upstream_id) {
            None => return false,
            Some(ready) if ready.email_state == state => return true,
            Some(_) => {}
        }
        match self
            .sync_locked(&mirrored, guard, session, authorization)
            .await
        {
            Ok(()) => self
                .ready(upstream_id)
                .is_some_and(|ready| ready.email_state == state),
            Err(error) => {
                tracing::warn!(account = %upstream_id, %error, "mirror sync failed");
                false
            }
        }
    }

    /// The account's entry, its local account made on first use.
    async fn mirrored(&self, upstream_id: &str) -> Result<Arc<Mirrored>, UpstreamError> {
        if let Some(found) = self.entry(upstream_id) {
            return Ok(found);
        }
        let account = match self.store.mirror_account(upstream_id).await? {
            Some((account, _)) => self.store.account_by_id(account).await?.ok_or_else(|| {
                UpstreamError::Refused(format!("the mirror of {upstream_id} is gone"))
            })?,
            None => {
                let login = format!("{upstream_id}@upstream.invalid");
                let account = match self.store.account_by_email(&login).await? {
                    Some(account) => account,
                    None => {
                        self.store
                            .create_account(&login, crate::proxy::upstream::UPSTREAM_PASSWORD_HASH)
                            .await?
                    }
                };
                self.store
                    .put_mirror_account(account.id, upstream_id)
                    .await?;
                account
            }
        };
        let mut accounts = self
            .accounts
            .lock()
            .map_err(|_| UpstreamError::Refused("mirror lock poisoned".into()))?;
        Ok(accounts
            .entry(upstream_id.to_string())
            .or_insert_with(|| {
                Arc::new(Mirrored {
                    upstream_id: upstream_id.to_string(),
                    account,
                    mailboxes: Mutex::new(Arc::new(HashMap::new())),
                    syncing: Arc::new(tokio::sync::RwLock::new(())),
                    authorization: Mutex::new(None),
                    following: Mutex::new(false),
                    fresh_state: Mutex::new(None),
                    writes: AtomicU64::new(0),
                    synced_through: AtomicU64::new(0),
                    wake: Notify::new(),
                    mailbox_snapshot: Mutex::new(None),
                    census: Mutex::new(None),
                    verified: Mutex::new(HashMap::new()),
                })
            })
            .clone())
    }

    /// The account task: it listens to the upstream's event source for
    /// Email changes (opened before each sync, so no change between the
    /// sync and the listening is missed), syncs, and waits for a change, a
    /// write through this node or `poll`; until the account has been idle
    /// for `idle` or the credential is refused. Then the mirror is no longer
    /// answered from and the credential is dropped.
    async fn follow(self: Arc<Self>, mirrored: Arc<Mirrored>, session: Arc<UpstreamSession>) {
        let mut events: Option<reqwest::Response> = None;
        let mut retry = Duration::from_secs(1);
        // Whether the last wait ended by the poll's timer alone (no event,
        // no write to catch up with).
        let mut polled = false;
        // Whether the last wait ended by an event naming only states the
        // mirror already has.
        let mut already = false;
        while let Some((authorization, last_used)) = mirrored.credential() {
            if last_used.elapsed() > self.idle {
                break;
            }
            if events.is_none() {
                events = self.listen(&session, &authorization).await;
            }
            let writes = mirrored.writes.load(Ordering::Acquire);
            let caught_up = mirrored.synced_through.load(Ordering::Acquire) >= writes;
            let settled = caught_up
                && (already
                    || (polled && self.unchanged(&mirrored, &session, &authorization).await));
            polled = false;
            already = false;
            if !settled {
                let guard = mirrored.syncing.write().await;
                match self
                    .sync_locked(&mirrored, guard, &session, &authorization)
                    .await
                {
                    Ok(()) => {}
                    Err(UpstreamError::LoginRefused) => break,
                    Err(error) => {
                        tracing::warn!(account = %mirrored.upstream_id, %error, "mirror sync failed");
                    }
                }
            }
            if mirrored.synced_through.load(Ordering::Acquire) < writes {
                continue;
            }
            let change = async {
                match events.as_mut() {
                    Some(stream) => changed(stream).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                heard = change => match heard {
                    Heard::Change(told) => {
                        retry = Duration::from_secs(1);
                        // A change the mirror already has (its own write,
                        // caught up with) needs no sync: a sync holds the
                        // account's calls off the mirror while it runs.
                        already = told.is_some_and(|told| mirrored.already_at(&told));
                    }
                    Heard::Ended => {
                        // The stream ended or failed: listen again, not at once.
                        events = None;
                        tokio::time::sleep(retry).await;
                        retry = (retry * 2).min(self.poll);
                    }
                },
                () = mirrored.wake.notified() => {}
                () = tokio::time::sleep(jittered(self.poll)) => polled = true,
            }
        }
        mirrored.set_fresh(None);
        if let Ok(mut credential) = mirrored.authorization.lock() {
            *credential = None;
        }
        if let Ok(mut following) = mirrored.following.lock() {
            *following = false;
        }
    }

    /// Whether the upstream's Email, Mailbox and Thread states are still
    /// the ones the mirror's last sync reached: one round trip of three
    /// `/get`s of no ids (counted as method `poll`). A poll that finds them
    /// so runs no sync, and a sync holds the account's calls off the mirror
    /// while it runs ([`Mirror::hold`]): under load, a hundred accounts'
    /// polls forwarded thousands of calls to the upstream (ADR 0009).
    /// `false` when the mirror has no such states or the upstream does not
    /// answer: the sync then runs and reports.
    async fn unchanged(
        &self,
        mirrored: &Mirrored,
        session: &UpstreamSession,
        authorization: &HeaderValue,
    ) -> bool {
        let Some([email, mailbox, thread]) = mirrored.states() else {
            return false;
        };
        let id = &mirrored.upstream_id;
        let request = json!({"using": USING, "methodCalls": [
            ["Email/get", {"accountId": id, "ids": []}, "e"],
            ["Mailbox/get", {"accountId": id, "ids": []}, "m"],
            ["Thread/get", {"accountId": id, "ids": []}, "t"],
        ]});
        let Ok(response) = self
            .upstream
            .call(session, authorization, &request, "poll")
            .await
        else {
            return false;
        };
        states_are(&response, [&email, &mailbox, &thread])
    }

    /// The upstream's event source for Email changes, open; `None` when it
    /// cannot be opened (the task then polls).
    async fn listen(
        &self,
        session: &UpstreamSession,
        authorization: &HeaderValue,
    ) -> Option<reqwest::Response> {
        let url = session
            .event_source_target(Some("types=Email,Mailbox&closeafter=no&ping=30"))
            .ok()?;
        let request = self
            .upstream
            .stream(reqwest::Method::GET, url)
            .header(reqwest::header::AUTHORIZATION, authorization.clone());
        let response = self.upstream.forward(request, "eventsource").await.ok()?;
        response.status().is_success().then_some(response)
    }

    /// One sync of the account under its `syncing` guard (module doc); the
    /// mirror is answered from only after one succeeds.
    async fn sync_locked(
        &self,
        mirrored: &Mirrored,
        _one_at_a_time: tokio::sync::RwLockWriteGuard<'_, ()>,
        session: &UpstreamSession,
        authorization: &HeaderValue,
    ) -> Result<(), UpstreamError> {
        let writes = mirrored.writes.load(Ordering::Acquire);
        let started = Instant::now();
        // No local answer reads while this sync holds the lock; the next
        // reads the names the sync leaves (`names.rs`).
        self.names.forget(mirrored.account.id).await;
        let sync = Sync {
            mirror: self,
            session,
            authorization,
            upstream_id: &mirrored.upstream_id,
            account: mirrored.account.id,
        };
        let (state, (mailboxes, snapshot), stored) = match sync.run().await {
            Ok(done) => done,
            Err(error) => {
                mirrored.set_fresh(None);
                return Err(error);
            }
        };
        if let Ok(mut kept) = mirrored.mailbox_snapshot.lock() {
            *kept = Some(Arc::new(snapshot));
        }
        let census = match sync.census(&state).await {
            Ok(census) => census,
            Err(error) => {
                tracing::warn!(account = %mirrored.upstream_id, %error, "no census after the sync");
                None
            }
        };
        if let Ok(mut kept) = mirrored.census.lock() {
            *kept = census.map(Arc::new);
        }
        if let Ok(mut mapped) = mirrored.mailboxes.lock() {
            *mapped = Arc::new(
                mailboxes
                    .iter()
                    .map(|(upstream, local)| (*local, upstream.clone()))
                    .collect(),
            );
        }
        mirrored.set_fresh(Some(state));
        mirrored.synced_through.fetch_max(writes, Ordering::AcqRel);
        self.metrics.upstream_synced(
            "sync",
            mailboxes.len(),
            stored.0,
            stored.1,
            started.elapsed(),
        );
        Ok(())
    }
}

/// Whether a response to [`Mirror::unchanged`]'s three calls (Email/get,
/// Mailbox/get, Thread/get, in that order) names exactly `states`, in the
/// same order: an error, a missing or other state is a change.
fn states_are(response: &Map<String, Value>, states: [&str; 3]) -> bool {
    let Some(Value::Array(responses)) = response.get("methodResponses") else {
        return false;
    };
    responses.len() == states.len()
        && responses
            .iter()
            .zip(states)
            .all(|(answer, state)| answer[1]["state"].as_str() == Some(state))
}

/// `poll` and up to a quarter more, at random: mirrors that started
/// together (a node's restart, the logins of a busy minute) do not sync in
/// the same instant poll after poll. A sync holds its account's calls off
/// the mirror while it runs ([`Mirror::hold`]), so a hundred at once sent a
/// hundred accounts' calls to the upstream together (ADR 0009).
fn jittered(poll: Duration) -> Duration {
    poll + poll.mul_f64(rand::random::<f64>() / 4.0)
}

/// The key a shape is remembered by: a digest, so that what a client
/// sends is not kept.
fn shape_digest(shape: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(shape.as_bytes()).into()
}

/// What an event stream told: a change, with the StateChange it carried
/// when the chunk held exactly one that reads as JSON; or its end.
enum Heard {
    Change(Option<Value>),
    Ended,
}

/// Reads an event stream until it tells of a change (any event but a
/// ping, RFC 8620 §7.3) or ends or fails.
async fn changed(stream: &mut reqwest::Response) -> Heard {
    loop {
        match stream.chunk().await {
            Ok(Some(chunk)) => {
                let text = String::from_utf8_lossy(&chunk);
                if text.contains("event: state") || text.contains("event:state") {
                    return Heard::Change(state_change(&text));
                }
            }
            Ok(None) | Err(_) => return Heard::Ended,
        }
    }
}

/// The StateChange of an event stream chunk that holds one `state` event
/// whose data is one line of JSON; `None` for anything else (the caller
/// then syncs, as for any change).
fn state_change(text: &str) -> Option<Value> {
    if text.matches("event:").count() != 1 {
        return None;
    }
    let mut data = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(str::trim_start);
    let (Some(line), None) = (data.next(), data.next()) else {
        return None;
    };
    serde_json::from_str(line).ok()
}

/// The personal upstream accounts of a session that have the mail capability.
fn mail_accounts(session: &UpstreamSession) -> Vec<String> {
    session
        .object
        .get("accounts")
        .and_then(Value::as_object)
        .map(|accounts| {
            accounts
                .iter()
                .filter(|(_, account)| {
                    account.get("isPersonal") == Some(&Value::Bool(true))
                        && account
                            .get("accountCapabilities")
                            .and_then(|capabilities| capabilities.get(super::CAPABILITY_MAIL))
                            .is_some()
                })
                .map(|(id, _)| id.clone())
                .collect()
        })
        .unwrap_or_default()
}

/// The upstream's part blobIds by partId (a JSON object), when its
/// partIds are `local`'s in the same order; `None` otherwise (mail the two
/// servers split differently is the upstream's to answer about).
fn part_map(
    local: &[Option<String>],
    upstream: &[(Option<String>, Option<String>)],
) -> Option<String> {
    let same = local.len() == upstream.len()
        && local
            .iter()
            .zip(upstream)
            .all(|(local, (upstream, _))| local == upstream);
    if !same {
        return None;
    }
    let map: serde_json::Map<String, Value> = upstream
        .iter()
        .filter_map(|(part, blob)| Some((part.clone()?, Value::String(blob.clone()?))))
        .collect();
    Some(Value::Object(map).to_string())
}

/// One sync of one account.
struct Sync<'a> {
    mirror: &'a Mirror,
    session: &'a UpstreamSession,
    authorization: &'a HeaderValue,
    upstream_id: &'a str,
    account: i64,
}

/// An email's metadata as the upstream gave it.
struct Listed {
    id: String,
    blob_id: String,
    thread_id: String,
    mailbox_ids: Vec<String>,
    keywords: Vec<String>,
    received_at: i64,
}

impl Listed {
    fn read(value: &Value) -> Option<Self> {
        let text = |name: &str| value.get(name).and_then(Value::as_str).map(str::to_string);
        let keys = |name: &str| -> Vec<String> {
            let mut keys: Vec<String> = value
                .get(name)
                .and_then(Value::as_object)
                .map(|map| {
                    map.iter()
                        .filter(|(_, v)| **v == Value::Bool(true))
                        .map(|(k, _)| k.clone())
                        .collect()
                })
                .unwrap_or_default();
            keys.sort();
            keys
        };
        let received_at = chrono::DateTime::parse_from_rfc3339(&text("receivedAt")?).ok()?;
        Some(Self {
            id: text("id")?,
            blob_id: text("blobId")?,
            thread_id: text("threadId")?,
            mailbox_ids: keys("mailboxIds"),
            keywords: keys("keywords")
                .into_iter()
                .map(|k| k.to_ascii_lowercase())
                .collect(),
            received_at: received_at.timestamp(),
        })
    }
}

impl Sync<'_> {
    /// One round trip: `calls` as `[name, arguments, call id]`; the method
    /// responses. A call answered with `error` is [`UpstreamError::Refused`]
    /// naming its type, except `cannotCalculateChanges`, which is `Ok(None)`.
    async fn call(&self, calls: Value) -> Result<Option<Vec<Value>>, UpstreamError> {
        let request = json!({"using": USING, "methodCalls": calls});
        let response = self
            .mirror
            .upstream
            .call(self.session, self.authorization, &request, "sync")
            .await?;
        let responses = response
            .get("methodResponses")
            .and_then(Value::as_array)
            .cloned()
            .ok_or_else(|| UpstreamError::Refused("no methodResponses".into()))?;
        for response in &responses {
            if response[0] == "error" {
                let kind = response[1]["type"].as_str().unwrap_or("?");
                if kind == "cannotCalculateChanges" {
                    return Ok(None);
                }
                return Err(UpstreamError::Refused(format!("{}: {kind}", response[2])));
            }
        }
        Ok(Some(responses))
    }

    /// The census of the account after a sync that reached `state` (module
    /// doc); `None` when the upstream's Email state is no longer `state`
    /// or it did not answer each call.
    async fn census(&self, state: &str) -> Result<Option<Census>, UpstreamError> {
        let calls = json!([
            ["Email/get", {"accountId": self.upstream_id, "ids": []}, "s"],
            ["Thread/get", {"accountId": self.upstream_id, "ids": []}, "t"],
            ["Email/query", {"accountId": self.upstream_id, "limit": 0, "calculateTotal": true}, "n"],
            ["Email/get", {"accountId": self.upstream_id, "ids": []}, "e"],
        ]);
        let Some(responses) = self.call(calls).await? else {
            return Ok(None);
        };
        let answer = |name: &str| {
            responses
                .iter()
                .find(|r| r[0] == name)
                .map(|r| &r[1])
                .cloned()
        };
        // The calls of one request need not see one state: the Email state
        // asked before and after the others must both be the sync's.
        let after = responses
            .iter()
            .rev()
            .find(|r| r[0] == "Email/get")
            .and_then(|r| r[1]["state"].as_str());
        if after != Some(state) {
            return Ok(None);
        }
        let (Some(emails), Some(threads), Some(query)) = (
            answer("Email/get"),
            answer("Thread/get"),
            answer("Email/query"),
        ) else {
            return Ok(None);
        };
        let (Some(email_state), Some(thread_state), Some(total)) = (
            emails["state"].as_str(),
            threads["state"].as_str(),
            query["total"].as_i64(),
        ) else {
            return Ok(None);
        };
        if email_state != state {
            return Ok(None);
        }
        let (mapped, stored) = self.mirror.store.mirror_census(self.account).await?;
        Ok(Some(Census {
            email_state: email_state.to_string(),
            thread_state: thread_state.to_string(),
            complete: total == mapped && mapped == stored,
        }))
    }

    /// Maps every upstream mailbox to a local one (made when new); returns
    /// upstream id → local id.
    async fn mailboxes(&self) -> Result<(HashMap<String, i64>, MailboxSnapshot), UpstreamError> {
        let calls = json!([["Mailbox/get", {"accountId": self.upstream_id, "ids": null}, "m"]]);
        let responses = self.call(calls).await?.unwrap_or_default();
        let answer = responses.first().map(|r| &r[1]);
        let snapshot = MailboxSnapshot {
            state: answer
                .and_then(|a| a["state"].as_str())
                .ok_or_else(|| UpstreamError::Refused("Mailbox/get gave no state".into()))?
                .to_string(),
            list: answer
                .and_then(|a| a["list"].as_array())
                .cloned()
                .unwrap_or_default(),
        };
        let listed: Vec<String> = snapshot
            .list
            .iter()
            .filter_map(|m| m["id"].as_str().map(str::to_string))
            .collect();
        let store = &self.mirror.store;
        let mut mapped: HashMap<String, i64> = store
            .mirror_mailboxes(self.account)
            .await?
            .into_iter()
            .map(|(local, upstream)| (upstream, local))
            .collect();
        for upstream in listed {
            if mapped.contains_key(&upstream) {
                continue;
            }
            // The local mailbox is only a handle for mailboxIds: named by
            // the upstream id, which is unique in the account.
            let local = store
                .create_mailbox(
                    self.account,
                    &NewMailbox {
                        parent_id: None,
                        name: format!("upstream {upstream}"),
                        role: None,
                        sort_order: 0,
                        is_subscribed: false,
                    },
                )
                .await?;
            store
                .put_mirror_mailbox(self.account, local, &upstream)
                .await?;
            mapped.insert(upstream, local);
        }
        Ok((mapped, snapshot))
    }

    /// One sync: the mailboxes, then the emails from the state the mirror
    /// is at (whole when it has none, or the upstream cannot calculate the
    /// changes from it). Returns the upstream Email state reached, the
    /// mailboxes (upstream id → local id) and (messages stored, octets
    /// downloaded).
    async fn run(
        &self,
    ) -> Result<
        (
            String,
            (HashMap<String, i64>, MailboxSnapshot),
            (usize, u64),
        ),
        UpstreamError,
    > {
        let (mut mailboxes, snapshot) = self.mailboxes().await?;
        let state = self
            .mirror
            .store
            .mirror_account(self.upstream_id)
            .await?
            .and_then(|(_, state)| state);
        let (state, stored) = match state {
            Some(state) => match self.since(&mut mailboxes, state).await? {
                Some(done) => done,
                None => self.whole(&mut mailboxes).await?,
            },
            None => self.whole(&mut mailboxes).await?,
        };
        Ok((state, (mailboxes, snapshot), stored))
    }

    /// A whole sync; returns the state reached and (messages stored,
    /// octets downloaded). Pages until the upstream lists no more ids or
    /// its total is reached (a server may cap `limit` below the page).
    async fn whole(
        &self,
        mailboxes: &mut HashMap<String, i64>,
    ) -> Result<(String, (usize, u64)), UpstreamError> {
        let page = self.session.max_objects_in_get;
        let mut listed = Vec::new();
        let mut state: Option<String> = None;
        let mut position = 0usize;
        loop {
            let calls = json!([
                ["Email/query", {"accountId": self.upstream_id, "position": position, "limit": page,
                    "sort": [{"property": "receivedAt", "isAscending": true}], "calculateTotal": true}, "q"],
                ["Email/get", {"accountId": self.upstream_id, "properties": METADATA,
                    "#ids": {"resultOf": "q", "name": "Email/query", "path": "/ids"}}, "g"],
            ]);
            let responses = self.call(calls).await?.unwrap_or_default();
            let got = responses.get(1).map(|r| &r[1]);
            let list = got
                .and_then(|g| g["list"].as_array())
                .cloned()
                .unwrap_or_default();
            if state.is_none() {
                state = got.and_then(|g| g["state"].as_str()).map(str::to_string);
            }
            let query = responses.first().map(|r| &r[1]);
            let count = query.and_then(|q| q["ids"].as_array()).map_or(0, Vec::len);
            let total = query.and_then(|q| q["total"].as_u64());
            listed.extend(list.iter().filter_map(Listed::read));
            position += count;
            if count == 0 || total.is_some_and(|total| position as u64 >= total) {
                break;
            }
        }
        let state =
            state.ok_or_else(|| UpstreamError::Refused("Email/get gave no state".into()))?;
        let held: HashSet<&str> = listed.iter().map(|l| l.id.as_str()).collect();
        let gone: Vec<i64> = self
            .mirror
            .store
            .mirror_emails(self.account, None, None)
            .await?
            .into_iter()
            .filter(|m| !held.contains(m.upstream_id.as_str()))
            .map(|m| m.email_id)
            .collect();
        let stored = self.apply(mailboxes, listed).await?;
        if !gone.is_empty() {
            self.mirror
                .store
                .destroy_emails(self.account, &gone)
                .await?;
        }
        self.mirror
            .store
            .set_mirror_state(self.account, &state)
            .await?;
        Ok((state, stored))
    }

    /// A sync from `state`; `None` when the upstream cannot calculate the
    /// changes from it.
    async fn since(
        &self,
        mailboxes: &mut HashMap<String, i64>,
        mut state: String,
    ) -> Result<Option<(String, (usize, u64))>, UpstreamError> {
        let mut stored = (0, 0);
        loop {
            let calls = json!([
                ["Email/changes", {"accountId": self.upstream_id, "sinceState": state,
                    "maxChanges": self.session.max_objects_in_get}, "c"],
            ]);
            let Some(responses) = self.call(calls).await? else {
                return Ok(None);
            };
            let changes = &responses[0][1];
            let ids = |name: &str| -> Vec<String> {
                changes[name]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default()
            };
            let mut touched = ids("created");
            touched.extend(ids("updated"));
            let destroyed = ids("destroyed");
            let mut listed = Vec::new();
            for chunk in touched.chunks(self.session.max_objects_in_get) {
                let calls = json!([["Email/get", {"accountId": self.upstream_id, "ids": chunk, "properties": METADATA}, "g"]]);
                let responses = self.call(calls).await?.unwrap_or_default();
                let list = responses
                    .first()
                    .and_then(|r| r[1]["list"].as_array())
                    .cloned()
                    .unwrap_or_default();
                listed.extend(list.iter().filter_map(Listed::read));
            }
            let (count, octets) = self.apply(mailboxes, listed).await?;
            stored = (stored.0 + count, stored.1 + octets);
            if !destroyed.is_empty() {
                let destroyed: Vec<&str> = destroyed.iter().map(String::as_str).collect();
                let local: Vec<i64> = self
                    .mirror
                    .store
                    .mirror_emails(self.account, None, Some(&destroyed))
                    .await?
                    .into_iter()
                    .map(|m| m.email_id)
                    .collect();
                self.mirror
                    .store
                    .destroy_emails(self.account, &local)
                    .await?;
            }
            state = changes["newState"]
                .as_str()
                .ok_or_else(|| UpstreamError::Refused("Email/changes gave no newState".into()))?
                .to_string();
            self.mirror
                .store
                .set_mirror_state(self.account, &state)
                .await?;
            if changes["hasMoreChanges"] != Value::Bool(true) {
                return Ok(Some((state, stored)));
            }
        }
    }

    /// The upstream's `bodyStructure` of each of `batch`: Email id →
    /// (partId, blobId) of each part in document order.
    async fn parts(
        &self,
        batch: &[&Listed],
    ) -> Result<HashMap<String, Vec<(Option<String>, Option<String>)>>, UpstreamError> {
        let ids: Vec<&str> = batch.iter().map(|l| l.id.as_str()).collect();
        let calls = json!([["Email/get", {"accountId": self.upstream_id, "ids": ids,
            "properties": ["id", "bodyStructure"], "bodyProperties": ["partId", "blobId", "subParts"]}, "p"]]);
        let responses = self.call(calls).await?.unwrap_or_default();
        let list = responses
            .first()
            .and_then(|r| r[1]["list"].as_array())
            .cloned()
            .unwrap_or_default();
        Ok(list
            .iter()
            .filter_map(|email| {
                let id = email["id"].as_str()?.to_string();
                let mut parts = Vec::new();
                let mut stack = vec![&email["bodyStructure"]];
                while let Some(part) = stack.pop() {
                    let part_id = part["partId"].as_str().map(str::to_string);
                    parts.push((part_id, part["blobId"].as_str().map(str::to_string)));
                    if let Some(children) = part["subParts"].as_array() {
                        stack.extend(children.iter().rev());
                    }
                }
                Some((id, parts))
            })
            .collect())
    }

    /// Makes the mirror hold `listed` as the upstream does: new emails
    /// downloaded and stored, mapped ones given the upstream's keywords and
    /// mailboxIds. Returns (messages stored, octets downloaded).
    async fn apply(
        &self,
        mailboxes: &mut HashMap<String, i64>,
        listed: Vec<Listed>,
    ) -> Result<(usize, u64), UpstreamError> {
        // A mailbox made since this sync read them is read now: an email
        // in it must not lose that membership.
        if listed
            .iter()
            .any(|l| l.mailbox_ids.iter().any(|m| !mailboxes.contains_key(m)))
        {
            *mailboxes = self.mailboxes().await?.0;
        }
        let mailboxes = &*mailboxes;
        let store = &self.mirror.store;
        let local_mailboxes = |listed: &Listed| -> Vec<i64> {
            let mut ids: Vec<i64> = listed
                .mailbox_ids
                .iter()
                .filter_map(|m| mailboxes.get(m).copied())
                .collect();
            ids.sort_unstable();
            ids
        };
        let upstream_ids: Vec<&str> = listed.iter().map(|l| l.id.as_str()).collect();
        let mut mapped: HashMap<String, i64> = HashMap::new();
        for chunk in upstream_ids.chunks(1000) {
            for m in store.mirror_emails(self.account, None, Some(chunk)).await? {
                mapped.insert(m.upstream_id, m.email_id);
            }
        }
        let (known, new): (Vec<&Listed>, Vec<&Listed>) =
            listed.iter().partition(|l| mapped.contains_key(&l.id));
        // Known ones: keywords and mailboxIds set to the upstream's.
        let wanted: BTreeMap<i64, &Listed> = known.iter().map(|l| (mapped[&l.id], *l)).collect();
        let ids: Vec<i64> = wanted.keys().copied().collect();
        let mut updates = Vec::new();
        for chunk in ids.chunks(1000) {
            for meta in store.email_meta(self.account, chunk).await? {
                let Some(listed) = wanted.get(&meta.id) else {
                    continue;
                };
                let mailbox_ids = local_mailboxes(listed);
                if mailbox_ids != meta.mailbox_ids || listed.keywords != meta.keywords {
                    updates.push(EmailUpdate::replace(
                        meta.id,
                        Some(listed.keywords.clone()),
                        Some(mailbox_ids),
                    ));
                }
            }
        }
        if !updates.is_empty() {
            store.update_emails(self.account, &updates).await?;
        }
        // New ones: downloaded, stored through ingest, mapped.
        let mut stored = (0, 0u64);
        for batch in new.chunks(STORE_BATCH) {
            let mut upstream_parts = self.parts(batch).await?;
            let mut raws = Vec::with_capacity(batch.len());
            let mut fetched = Vec::with_capacity(batch.len());
            for listed in batch {
                let raw = match self
                    .mirror
                    .upstream
                    .message(
                        self.session,
                        self.authorization,
                        self.upstream_id,
                        &listed.blob_id,
                        self.mirror.max_message,
                    )
                    .await
                {
                    Ok(raw) => raw,
                    // One message the upstream will not give (or one over
                    // maxSizeUpload) stays unmirrored: calls naming it are
                    // forwarded. Anything else ends the sync.
                    Err(UpstreamError::Refused(reason)) => {
                        tracing::warn!(account = %self.upstream_id, email = %listed.id, %reason, "not mirrored");
                        continue;
                    }
                    Err(other) => return Err(other),
                };
                fetched.push(*listed);
                stored.1 += raw.len() as u64;
                raws.push((
                    raw,
                    local_mailboxes(listed),
                    listed.keywords.clone(),
                    listed.received_at,
                ));
            }
            let prepared = tokio::task::spawn_blocking(move || {
                raws.into_iter()
                    .map(|(raw, mailboxes, keywords, at)| {
                        let part_ids = body::part_ids(&parse_message(&raw));
                        (ingest::prepare(raw, mailboxes, keywords, |_| at), part_ids)
                    })
                    .unzip::<_, _, Vec<_>, Vec<_>>()
            })
            .await
            .map_err(|error| UpstreamError::Refused(format!("preparing messages: {error}")))?;
            let (prepared, local_part_ids) = prepared;
            let inserted =
                ingest::store_batch(store.as_ref(), &self.mirror.blobs, self.account, prepared)
                    .await?;
            let names: Vec<MirroredEmail> = fetched
                .iter()
                .zip(inserted)
                .zip(local_part_ids)
                .map(|((listed, inserted), local_part_ids)| {
                    let (Inserted::New(email_id) | Inserted::Duplicate(email_id)) = inserted;
                    let parts = upstream_parts
                        .remove(&listed.id)
                        .and_then(|parts| part_map(&local_part_ids, &parts));
                    MirroredEmail {
                        email_id,
                        upstream_id: listed.id.clone(),
                        blob_id: listed.blob_id.clone(),
                        thread_id: listed.thread_id.clone(),
                        parts,
                    }
                })
                .collect();
            store.put_mirror_emails(self.account, &names).await?;
            stored.0 += fetched.len();
        }
        Ok(stored)
    }
}

#[async_trait::async_trait]
impl crate::metrics::CacheReport for Mirror {
    /// The mirror's kept names ([`MirrorNames`]).
    async fn report(&self, metrics: &Metrics) {
        self.names.report(metrics).await;
    }
}

#[cfg(test)]
mod tests {
    use super::{jittered, part_map, state_change, states_are};

    #[test]
    fn a_state_event_is_read_only_when_it_is_one_line_of_json() {
        let one = "event: state\nid: 1\ndata: {\"@type\":\"StateChange\",\"changed\":{\"a\":{\"Email\":\"5\"}}}\n\n";
        assert_eq!(
            state_change(one),
            Some(serde_json::json!({"@type": "StateChange", "changed": {"a": {"Email": "5"}}}))
        );
        let two = format!("{one}{one}");
        assert_eq!(state_change(&two), None);
        assert_eq!(state_change("event: state\ndata: {\"cut"), None);
        assert_eq!(state_change("event: state\ndata: {}\ndata: {}\n\n"), None);
    }

    #[test]
    fn a_poll_settles_only_on_the_three_states_of_the_last_sync() {
        let answer = |e: &str, m: &str, t: &str| {
            let response = serde_json::json!({"methodResponses": [
                ["Email/get", {"state": e, "list": []}, "e"],
                ["Mailbox/get", {"state": m, "list": []}, "m"],
                ["Thread/get", {"state": t, "list": []}, "t"]]});
            response.as_object().unwrap().clone()
        };
        let last = ["E1", "M1", "T1"];
        assert!(states_are(&answer("E1", "M1", "T1"), last));
        // A mailbox renamed, a thread merged, a new email: each a change.
        assert!(!states_are(&answer("E1", "M2", "T1"), last));
        assert!(!states_are(&answer("E1", "M1", "T2"), last));
        assert!(!states_are(&answer("E2", "M1", "T1"), last));
        let error = serde_json::json!({"methodResponses": [
            ["error", {"type": "serverFail"}, "e"],
            ["Mailbox/get", {"state": "M1", "list": []}, "m"],
            ["Thread/get", {"state": "T1", "list": []}, "t"]]});
        assert!(!states_are(error.as_object().unwrap(), last));
        assert!(!states_are(&serde_json::Map::new(), last));
    }

    #[test]
    fn polls_are_spread_over_a_quarter_of_the_interval() {
        let poll = std::time::Duration::from_secs(60);
        let waits: Vec<_> = (0..200).map(|_| jittered(poll)).collect();
        assert!(waits.iter().all(|w| *w >= poll && *w <= poll * 5 / 4));
        // Spread, not one instant: 200 draws land in both halves.
        assert!(waits.iter().any(|w| *w < poll * 9 / 8));
        assert!(waits.iter().any(|w| *w > poll * 9 / 8));
    }

    #[test]
    fn part_blob_ids_are_kept_only_for_mail_split_alike() {
        let some = |id: &str| Some(id.to_string());
        let local = vec![None, some("1"), some("2")];
        let upstream = vec![
            (None, None),
            (some("1"), some("B1")),
            (some("2"), some("B2")),
        ];
        assert_eq!(
            part_map(&local, &upstream).as_deref(),
            Some(r#"{"1":"B1","2":"B2"}"#)
        );
        let numbered_otherwise = vec![(None, None), (some("0"), some("B")), (some("1"), some("C"))];
        assert_eq!(part_map(&local, &numbered_otherwise), None);
        assert_eq!(part_map(&local, &upstream[..2]), None);
    }
}

//! The upstream of one serving instance (`serve --upstream`): login checks
//! against the upstream, the accounts they make, and each active account's
//! sync task.
//!
//! A user's credentials live in memory only, in the account's [`Link`],
//! for as long as the account is in use: every authenticated request
//! renews it ([`Upstream::use_account`]); after `idle` without one the task
//! logs out and the credentials are dropped. Nothing is written to disk.
//! With a master login ([`MasterLogin`]) every account the store has is
//! synced all the time ([`Upstream::start_all`]) and users' passwords are
//! checked at login but never kept.
//!
//! While the account is in use its task keeps one connection: a sync
//! ([`super::sync::sync_account`]), then NOTIFY for every mailbox when the
//! upstream has it (RFC 5465) and IDLE on INBOX (RFC 2177) until the
//! upstream tells of a change or `poll` passes, then a sync again. An
//! upstream that cannot be reached is retried with backoff (1 s doubling
//! to `poll`); a refused login (the password changed upstream) ends the
//! task until the user logs in again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use super::UpstreamUrl;
use super::connection::{Connection, Selected};
use super::sync::{Removed, SyncReport, sync_account};
use crate::blob::BlobStore;
use crate::metrics::Metrics;
use crate::proxy::turns::{Backoff, UpstreamTurns};
use crate::proxy::upstream::UpstreamError;
use crate::store::{Account, Store, StoreError, UpstreamMailbox};

use crate::proxy::upstream::create_upstream_account;

/// Upstream logins checked at once per node; more wait their turn.
const LOGINS_AT_ONCE: usize = 32;

/// How recently a client must have made a request for its account to be
/// watched every `poll_active` (without NOTIFY) rather than every `poll`.
pub const ACTIVE_CLIENT: Duration = Duration::from_secs(60);

/// Folders asked their STATUS per round without NOTIFY; an account with
/// more has them asked in turns, a round starting where the last stopped.
const STATUS_PER_ROUND: usize = 100;

/// How an account's sync task learns of changes at the upstream (shown by
/// `fastview account list`, migration 0315).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Watch {
    /// NOTIFY (RFC 5465): every folder tells, on the one connection.
    Notify,
    /// IDLE (RFC 2177) on INBOX, STATUS of the other folders every
    /// `poll_active` while the account is in use.
    IdleAndStatus,
    /// No IDLE: STATUS of every folder as often.
    Status,
}

impl Watch {
    fn of(connection: &Connection, notify: bool) -> Self {
        match (notify, connection.has("IDLE")) {
            (true, _) => Self::Notify,
            (false, true) => Self::IdleAndStatus,
            (false, false) => Self::Status,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Notify => "notify",
            Self::IdleAndStatus => "idle+status",
            Self::Status => "status",
        }
    }
}

/// How a serving instance uses its upstream (`serve` flags).
#[derive(Debug, Clone)]
pub struct UpstreamOptions {
    /// `--upstream`.
    pub url: UpstreamUrl,
    /// `--upstream-poll`: the longest a listening account waits between
    /// syncs (and the IDLE timeout); without IDLE the poll interval.
    pub poll: Duration,
    /// `--upstream-poll-active`: without NOTIFY, how often the folders
    /// other than INBOX are asked their STATUS while the account is in use
    /// (a request within [`ACTIVE_CLIENT`]); idle, every `poll`.
    pub poll_active: Duration,
    /// `--upstream-idle-minutes`: how long after its last request an
    /// account stays synced (and its credentials kept).
    pub idle: Duration,
    /// `--upstream-smtp`: the upstream's submission server
    /// (`smtps://host[:465]`, `smtp://host[:587]` with STARTTLS unless
    /// loopback), to which mail is sent with each user's credentials.
    pub smtp: Option<String>,
    /// `--upstream-cache-mb` in octets: the most the message blobs of the
    /// data dir may take; the eviction pass deletes those of the oldest
    /// mail beyond it (read again by UID when needed). 0: no bound.
    pub cache_bytes: u64,
    /// `--upstream-master-user` / `--upstream-master-password`: a login
    /// that may act as any user (Dovecot's `user*master`), with which every
    /// account is synced all the time; users' own passwords are then only
    /// checked, never kept.
    pub master: Option<MasterLogin>,
    /// `--upstream-outage-grace-minutes`: how long after the upstream last
    /// accepted a user's credential it stays good for reads from the
    /// mirror while the upstream cannot be reached (zero: not at all).
    pub outage_grace: Duration,
    /// `--upstream-syncs-at-once`: the most account tasks that log in or
    /// sync against the upstream at once (issue 45,
    /// [`crate::proxy::turns`]); writes and the syncs around them take no
    /// turn.
    pub syncs_at_once: usize,
}

/// A master login of the upstream (Dovecot: a passdb with `master = yes`;
/// Cyrus: one of its `admins`): user `ann@example.com`'s IMAP sessions
/// authenticate as `{user}` with the master's password and
/// `ann@example.com` as SASL PLAIN's authorization identity (RFC 4616);
/// mail is sent as `ann@example.com*{user}` (Dovecot's
/// `auth_master_user_separator`).
#[derive(Clone)]
pub struct MasterLogin {
    pub user: String,
    pub password: String,
}

impl std::fmt::Debug for MasterLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MasterLogin")
            .field("user", &self.user)
            .field("password", &"…")
            .finish()
    }
}

/// Who an account's IMAP sessions log in as.
struct Credentials {
    login: String,
    password: String,
    /// With a master login: the user it acts as.
    acting_as: Option<String>,
}

/// The credentials and last use of one active account.
pub(super) struct Link {
    user: String,
    password: Mutex<String>,
    last_used: Mutex<Instant>,
    /// Held by every sync of the account and by every write through to the
    /// upstream (so a sync never records half a write); it keeps the
    /// connection writes use, made on the first write.
    pub(super) writer: tokio::sync::Mutex<Option<Connection>>,
    /// Copies writes took out of mailboxes since the last sync (written
    /// and read under `writer`'s lock): the next sync forgets them.
    removed: Mutex<Removed>,
}

impl Link {
    /// The copies writes removed since the last sync, handed to it.
    fn take_removed(&self) -> Removed {
        self.removed
            .lock()
            .map(|mut removed| std::mem::take(&mut *removed))
            .unwrap_or_default()
    }

    fn idle_for(&self) -> Duration {
        self.last_used
            .lock()
            .map_or(Duration::ZERO, |at| at.elapsed())
    }
}

/// The upstream of one serving instance.
pub struct Upstream {
    options: UpstreamOptions,
    store: Arc<dyn Store>,
    blobs: Arc<BlobStore>,
    metrics: Arc<Metrics>,
    links: Mutex<HashMap<i64, Arc<Link>>>,
    logins: Semaphore,
    /// The turns account tasks take to log in and to sync
    /// (`--upstream-syncs-at-once`); writes take none.
    turns: UpstreamTurns,
}

impl Upstream {
    /// An upstream with no active account.
    pub fn new(
        options: UpstreamOptions,
        store: Arc<dyn Store>,
        blobs: Arc<BlobStore>,
        metrics: Arc<Metrics>,
    ) -> Arc<Self> {
        let upstream = Arc::new(Self {
            turns: UpstreamTurns::new(options.syncs_at_once, metrics.clone()),
            options,
            store,
            blobs,
            metrics,
            links: Mutex::new(HashMap::new()),
            logins: Semaphore::new(LOGINS_AT_ONCE),
        });
        let refill: std::sync::Weak<dyn crate::blob::Refill> = Arc::downgrade(&upstream) as _;
        upstream.blobs.set_refill(refill);
        upstream
    }

    /// The upstream's URL.
    pub fn url(&self) -> &UpstreamUrl {
        &self.options.url
    }

    /// Whether the upstream accepts `user` with `password` (a LOGIN, then
    /// LOGOUT). `Err` when it cannot be asked (unreachable, not IMAP).
    pub async fn verify(&self, user: &str, password: &str) -> Result<bool, UpstreamError> {
        let _turn = self.logins.acquire().await;
        self.metrics
            .count_upstream_round_trip(crate::metrics::current_method(), "login");
        match Connection::login(&self.options.url, user, password).await {
            Ok(connection) => {
                connection.logout().await;
                Ok(true)
            }
            Err(UpstreamError::LoginRefused) => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// The account of a login the upstream accepted, made on its first one.
    pub async fn account(&self, user: &str) -> Result<Account, StoreError> {
        if let Some(account) = self.store.account_by_email(user).await? {
            return Ok(account);
        }
        create_upstream_account(self.store.as_ref(), user).await
    }

    /// Notes a request of `account` authenticated as `user` with
    /// `password`: keeps the credentials and starts the account's sync task
    /// when it is not running.
    pub fn use_account(self: &Arc<Self>, account: i64, user: &str, password: &str) {
        let Ok(mut links) = self.links.lock() else {
            return;
        };
        // With a master login a user's password is checked, never kept.
        let password = if self.options.master.is_some() {
            ""
        } else {
            password
        };
        if let Some(link) = links.get(&account) {
            if let Ok(mut at) = link.last_used.lock() {
                *at = Instant::now();
            }
            if let Ok(mut kept) = link.password.lock()
                && *kept != password
            {
                *kept = password.to_string();
            }
            return;
        }
        let link = Arc::new(Link {
            user: user.to_string(),
            password: Mutex::new(password.to_string()),
            last_used: Mutex::new(Instant::now()),
            writer: tokio::sync::Mutex::new(None),
            removed: Mutex::new(Vec::new()),
        });
        links.insert(account, link.clone());
        tokio::spawn(crate::metrics::JMAP_METHOD.scope("sync", self.clone().run(account, link)));
    }

    /// With a master login: starts the sync of every account the store
    /// has (a serving instance calls it once at start). Returns how many.
    pub async fn start_all(self: &Arc<Self>) -> Result<usize, StoreError> {
        if self.options.master.is_none() {
            return Ok(0);
        }
        let accounts = self.store.list_accounts().await?;
        for account in &accounts {
            self.use_account(account.id, &account.email, "");
        }
        Ok(accounts.len())
    }

    /// The login the account's sessions use: the user's own, or the master's
    /// acting as the user.
    fn credentials(&self, link: &Link) -> Credentials {
        match &self.options.master {
            Some(master) => Credentials {
                login: master.user.clone(),
                password: master.password.clone(),
                acting_as: Some(link.user.clone()),
            },
            None => Credentials {
                login: link.user.clone(),
                password: link.password.lock().map(|p| p.clone()).unwrap_or_default(),
                acting_as: None,
            },
        }
    }

    /// Connects and logs in with `credentials`.
    async fn connect(&self, credentials: &Credentials) -> Result<Connection, UpstreamError> {
        self.metrics
            .count_upstream_round_trip(crate::metrics::current_method(), "login");
        Connection::login_as(
            &self.options.url,
            &credentials.login,
            &credentials.password,
            credentials.acting_as.as_deref(),
        )
        .await
    }

    /// Whether the account's sync should stop: unused for the idle time,
    /// unless a master login syncs every account all the time.
    fn is_idle(&self, link: &Link) -> bool {
        self.options.master.is_none() && link.idle_for() >= self.options.idle
    }

    /// Whether mail is sent through the upstream (`--upstream-smtp`).
    pub fn sends(&self) -> bool {
        self.options.smtp.is_some()
    }

    /// The upstream's submission server as the account's user (or the
    /// master login as that user), while its credentials are here; `None`
    /// without `--upstream-smtp` or credentials.
    pub fn submission_for(&self, account: i64) -> Option<crate::mail::relay::Relay> {
        let url = self.options.smtp.as_deref()?;
        let link = self.link(account).ok()?;
        let credentials = self.credentials(&link);
        if credentials.password.is_empty() {
            return None;
        }
        let user = match &credentials.acting_as {
            Some(user) => format!("{user}*{}", credentials.login),
            None => credentials.login.clone(),
        };
        crate::mail::relay::Relay::from_url_as(url, &user, &credentials.password).ok()
    }

    /// Puts a message the upstream's submission server refused to send
    /// back (a bounce) in the account's upstream INBOX: APPENDed, then synced.
    pub async fn append_to_inbox(
        &self,
        account: i64,
        message: Vec<u8>,
    ) -> Result<(), UpstreamError> {
        let Some(inbox) = self.store.role_mailbox(account, "inbox").await? else {
            return Err(UpstreamError::Refused("the account has no inbox".into()));
        };
        let now = chrono::Utc::now().timestamp();
        let prepared = crate::mail::ingest::prepare(message, vec![inbox], Vec::new(), |_| now);
        match self.append(account, prepared).await? {
            Ok(_) => Ok(()),
            Err(refusal) => Err(UpstreamError::Refused(refusal)),
        }
    }

    /// The accounts whose sync task runs now.
    pub fn active_accounts(&self) -> usize {
        self.links.lock().map_or(0, |links| links.len())
    }

    /// One account's task: sync and listen while the account is in use.
    async fn run(self: Arc<Self>, account: i64, link: Arc<Link>) {
        tracing::debug!(account, upstream = %self.options.url, "upstream sync starts");
        let mut backoff = Backoff::new(self.options.poll);
        loop {
            if self.is_idle(&link) && self.release(account, &link) {
                return;
            }
            let credentials = self.credentials(&link);
            // A login is background work too: a hundred accounts' first
            // logins at once are a hundred connections to the upstream.
            let turn = self.turns.sync_turn().await;
            let login = self.connect(&credentials).await;
            drop(turn);
            let outcome = match login {
                Ok(connection) => self.listen(account, &link, connection, &mut backoff).await,
                Err(error) => Err(error),
            };
            match outcome {
                Ok(()) => {}
                Err(UpstreamError::LoginRefused) if self.options.master.is_none() => {
                    tracing::info!(account, "the upstream refused the login; sync stops");
                    self.forget(account, &link);
                    return;
                }
                Err(error) => {
                    // A refused login with a master login, a dropped
                    // connection, `[UNAVAILABLE]`: wait, longer each time.
                    let wait = backoff.after(&error);
                    self.turns.failed(&error, wait);
                    tracing::warn!(account, %error, retry_in = ?wait, "upstream sync failed; retrying");
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    /// Syncs, then waits for the upstream to tell of a change (or `poll`),
    /// until the account is idle.
    async fn listen(
        &self,
        account: i64,
        link: &Link,
        mut connection: Connection,
        backoff: &mut Backoff,
    ) -> Result<(), UpstreamError> {
        // NOTIFY before the first sync: a change made while the sync runs
        // is then either read by it or waiting as a notification below.
        let notify = connection.notify_all().await?;
        let watch = Watch::of(&connection, notify);
        let mut told = false;
        let mut next_status = 0;
        loop {
            // The turn at the upstream before the account's lock: a sync
            // waiting for its turn never holds off the account's writes.
            let upstream_turn = self.turns.sync_turn().await;
            let turn = link.writer.lock().await;
            let started = Instant::now();
            let removed = link.take_removed();
            let report =
                sync_account(&*self.store, &self.blobs, account, &mut connection, removed).await;
            drop(turn);
            drop(upstream_turn);
            let report = report?;
            self.count_sync(&report, started);
            tracing::debug!(account, ?report, took = ?started.elapsed(), "synced from the upstream");
            // Only a whole sync ends a run of failures (a login alone does not).
            backoff.reset();
            self.turns.succeeded();
            if !told {
                self.store
                    .record_upstream_watch(account, watch.name())
                    .await?;
                told = true;
            }
            if report.unstable {
                continue;
            }
            if self.is_idle(link) {
                connection.logout().await;
                return Ok(());
            }
            let inbox = connection.examine("INBOX").await?;
            // A change between the sync's read and now: sync again at once.
            if connection.changes_pending() || self.inbox_moved(account, &inbox).await? {
                continue;
            }
            connection = self
                .wait_for_change(account, link, watch, connection, &mut next_status)
                .await?;
        }
    }

    /// Waits until the upstream tells of a change or `poll` passes. With
    /// NOTIFY every folder tells; without it, while the account is in use,
    /// the wait on INBOX (IDLE, or a sleep and a NOOP) lasts `poll_active`,
    /// after which the other folders are asked their STATUS
    /// ([`Upstream::others_moved`]), until one moved.
    async fn wait_for_change(
        &self,
        account: i64,
        link: &Link,
        watch: Watch,
        mut connection: Connection,
        next_status: &mut usize,
    ) -> Result<Connection, UpstreamError> {
        let started = Instant::now();
        loop {
            let active = link.idle_for() < ACTIVE_CLIENT;
            let limit = match watch {
                Watch::Notify => self.options.poll,
                _ if active => self.options.poll_active.min(self.options.poll),
                _ => self.options.poll,
            };
            let (back, woke) = connection.wait(limit).await?;
            connection = back;
            if watch == Watch::Notify || started.elapsed() >= self.options.poll {
                return Ok(connection);
            }
            // INBOX: IDLE told, or (no IDLE) a NOOP makes the server tell.
            let inbox_told = match watch {
                Watch::IdleAndStatus => woke,
                _ => {
                    connection.noop().await?;
                    connection.changes_pending()
                }
            };
            if inbox_told
                || self
                    .others_moved(account, &mut connection, next_status)
                    .await?
            {
                return Ok(connection);
            }
        }
    }

    /// Without NOTIFY: whether a mirrored folder other than INBOX moved
    /// since its last read, by STATUS (HIGHESTMODSEQ with CONDSTORE, else
    /// its message count against the copies mapped), at most
    /// [`STATUS_PER_ROUND`] folders a round, in turns.
    async fn others_moved(
        &self,
        account: i64,
        connection: &mut Connection,
        next: &mut usize,
    ) -> Result<bool, UpstreamError> {
        let others: Vec<_> = self
            .store
            .upstream_mailboxes(account)
            .await?
            .into_iter()
            .filter(|m| !m.name.eq_ignore_ascii_case("INBOX"))
            .collect();
        if others.is_empty() {
            return Ok(false);
        }
        for step in 0..others.len().min(STATUS_PER_ROUND) {
            let mapped = &others[(*next + step) % others.len()];
            let status = match connection.status(&mapped.name).await {
                Ok(status) => status,
                // A folder that cannot be asked (\Noselect) tells nothing.
                Err(UpstreamError::Refused(_)) => continue,
                Err(error) => return Err(error),
            };
            if self.moved(mapped, &status).await? {
                *next = (*next + step) % others.len();
                return Ok(true);
            }
        }
        *next = (*next + STATUS_PER_ROUND) % others.len();
        Ok(false)
    }

    /// Whether INBOX as just opened is not as the last sync left it.
    async fn inbox_moved(&self, account: i64, inbox: &Selected) -> Result<bool, UpstreamError> {
        let mirrored = self.store.upstream_mailboxes(account).await?;
        match mirrored
            .iter()
            .find(|m| m.name.eq_ignore_ascii_case("INBOX"))
        {
            Some(mapped) => self.moved(mapped, inbox).await,
            None => Ok(false),
        }
    }

    /// Whether a mirrored folder as the upstream now tells of it (EXAMINE
    /// or STATUS) is not as the last sync left it: another UIDVALIDITY, its
    /// HIGHESTMODSEQ moved (CONDSTORE), or, without one, its message count.
    async fn moved(&self, mapped: &UpstreamMailbox, now: &Selected) -> Result<bool, UpstreamError> {
        if mapped.uid_validity != i64::from(now.uid_validity) {
            return Ok(true);
        }
        match (now.highest_modseq, mapped.highest_modseq) {
            (Some(now), Some(read)) => Ok(i64::try_from(now).ok() != Some(read)),
            _ => {
                let copies = self.store.upstream_uid_count(mapped.mailbox_id).await?;
                Ok(copies != i64::from(now.exists))
            }
        }
    }

    /// The link of an account in use: what a write through to the upstream
    /// logs in with. `Unreachable` when the account has no credentials here
    /// (it authenticated with an API token, or not recently).
    pub(super) fn link(&self, account: i64) -> Result<Arc<Link>, UpstreamError> {
        self.links
            .lock()
            .ok()
            .and_then(|links| links.get(&account).cloned())
            .ok_or_else(|| {
                UpstreamError::Unreachable(
                    "no upstream credentials for this account here: log in with a password".into(),
                )
            })
    }

    /// The writer connection of `link` (under its lock), logged in when
    /// there is none.
    pub(super) async fn writer<'a>(
        &self,
        link: &Link,
        slot: &'a mut Option<Connection>,
    ) -> Result<&'a mut Connection, UpstreamError> {
        // A kept connection the upstream may have dropped meanwhile (a
        // restart, an autologout): one NOOP tells, and a new login follows.
        if let Some(connection) = slot.as_mut()
            && connection.noop().await.is_err()
        {
            *slot = None;
        }
        if slot.is_none() {
            *slot = Some(self.connect(&self.credentials(link)).await?);
        }
        slot.as_mut()
            .ok_or_else(|| UpstreamError::Unreachable("no connection".into()))
    }

    /// Syncs the account on the writer connection after a write (the lock
    /// held), so the store records the write as any sync would.
    pub(super) async fn sync_after_write(
        &self,
        account: i64,
        connection: &mut Connection,
    ) -> Result<(), UpstreamError> {
        let started = Instant::now();
        let removed = self.link(account)?.take_removed();
        let report = sync_account(&*self.store, &self.blobs, account, connection, removed).await?;
        // No mailbox stays open on the writer between writes: another
        // client renaming or deleting it would end the session.
        connection.unselect().await?;
        self.count_sync(&report, started);
        Ok(())
    }

    /// Notes that a write took `uids` out of `mailbox` of `account` (the
    /// upstream answered a UID MOVE or EXPUNGE with OK): the next sync
    /// forgets those copies instead of reading the mailbox whole.
    pub(super) fn removed(&self, account: i64, mailbox: i64, uids: &[u32]) {
        if let Ok(link) = self.link(account)
            && let Ok(mut removed) = link.removed.lock()
        {
            removed.push((mailbox, uids.to_vec()));
        }
    }

    /// The blob store this upstream caches messages in.
    pub(super) fn blobs(&self) -> &Arc<BlobStore> {
        &self.blobs
    }

    /// The bound of the message cache in octets (0: none).
    pub(super) fn cache_bytes(&self) -> u64 {
        self.options.cache_bytes
    }

    /// Counts a sync that began at `started` in the metrics.
    fn count_sync(&self, report: &SyncReport, started: Instant) {
        self.metrics.upstream_synced(
            crate::metrics::current_method(),
            report.mailboxes_read,
            report.fetched,
            report.fetched_octets,
            started.elapsed(),
        );
    }

    /// The store this upstream syncs into.
    pub fn store(&self) -> &dyn Store {
        &*self.store
    }

    /// Counts message octets read from or appended to the upstream for
    /// the running JMAP method.
    pub(super) fn count_bytes(&self, octets: usize) {
        self.metrics
            .count_upstream_bytes(crate::metrics::current_method(), octets as u64);
    }

    /// Counts one evicted message read again.
    pub(super) fn count_refill(&self) {
        self.metrics.upstream_cache_refills.inc();
    }

    /// Counts one command sent on behalf of a JMAP method.
    pub(super) fn count(&self, command: &'static str) {
        self.metrics
            .count_upstream_round_trip(crate::metrics::current_method(), command);
    }

    /// Drops the account's link if it is still idle: `false` when a
    /// request renewed it meanwhile (the task goes on).
    fn release(&self, account: i64, link: &Arc<Link>) -> bool {
        let Ok(mut links) = self.links.lock() else {
            return true;
        };
        if !self.is_idle(link) {
            return false;
        }
        if links
            .get(&account)
            .is_some_and(|current| Arc::ptr_eq(current, link))
        {
            links.remove(&account);
        }
        true
    }

    /// Drops the account's link whatever its use.
    fn forget(&self, account: i64, link: &Arc<Link>) {
        if let Ok(mut links) = self.links.lock()
            && links
                .get(&account)
                .is_some_and(|current| Arc::ptr_eq(current, link))
        {
            links.remove(&account);
        }
    }
}

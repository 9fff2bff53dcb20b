//! Server metrics, owned by one server instance (not a process-global
//! recorder), so parallel test servers never see each other's counts.
//! Exposed at `GET /metrics` on the metrics listener (`--metrics-listen`,
//! not the API port) in the Prometheus/OpenMetrics text format.
//!
//! Names (the public interface; prometheus-client appends `_total` to counters):
//! - `fastview_email_get_total{read_level="metadata|header|fast_view|full"}`
//! - `fastview_fast_view_hits_total`, `fastview_fast_view_misses_total`
//! - `fastview_blob_reads_total`, `fastview_blob_read_bytes_total`
//! - `fastview_message_parses_total{scope="header|full"}`
//! - `fastview_jmap_method_duration_seconds{method="Email/get"}` (histogram)
//! - `fastview_login_verifications_total` (argon2 password verifications
//!   run, for known and unknown users alike)
//! - `fastview_login_refusals_total{reason="braked|busy"}` (logins refused
//!   unverified: too many failures, or too many verifications waiting)
//! - `fastview_upstream_round_trips_total{method, command}` (the
//!   projection proxy's commands to its IMAP upstream, issue 18, by the
//!   JMAP method they served — `sync` for the background sync, `other`
//!   for a download — and command: `login`, `sync`, `store`, `move`, …;
//!   to a JMAP upstream, issue 19: `session` (method `session`), `api`
//!   (under the request's first method), `download`, `upload`,
//!   `eventsource` (method `other`))
//! - `fastview_upstream_bytes_total{method}` (message octets read from or
//!   appended to the upstream, by JMAP method)
//! - `fastview_upstream_cache_refills_total` (evicted messages read again:
//!   the message cache's misses)
//! - `fastview_upstream_mailboxes_read_total` (mailboxes whose UIDs and
//!   flags a sync read; an unchanged one, by CONDSTORE, is not read)
//! - `fastview_upstream_fetched_messages_total`,
//!   `fastview_upstream_fetched_bytes_total` (messages read from the upstream)
//! - `fastview_upstream_sync_seconds` (histogram: how long one account's
//!   sync took; with IDLE/NOTIFY this is the lag of a change behind the upstream)
//! - `fastview_upstream_event_source_fallbacks_total` (a JMAP upstream's
//!   event source opened for a mirror that gave no stream — Cyrus 3.6
//!   built without WebSockets answers `204 No Content` — or no answer: the
//!   account's mirror polls instead, and asks again after `--upstream-poll`;
//!   issue 45)
//! - `fastview_upstream_outage_logins_total` (Basic logins let through for
//!   reads from the mirror while the upstream could not be asked: the same
//!   credential, accepted there within `--upstream-outage-grace-minutes`;
//!   issue 45)
//! - `fastview_upstream_polls_total{event_source="open|none"}` (a JMAP
//!   mirror's polls of the upstream's states: `open`, the `--upstream-poll`
//!   safety net beside a working event source; `none`, without one, every
//!   `--upstream-poll-active` while a client of the account is active)
//! - `fastview_upstream_syncs_waiting`, `fastview_upstream_syncs_running`
//!   (gauges: background syncs waiting for a turn at the upstream, and
//!   running, at most `--upstream-syncs-at-once`; issue 45)
//! - `fastview_upstream_backoffs_total{reason="throttled|unavailable|error"}`
//!   (background syncs that failed and wait before trying again:
//!   `throttled`, the upstream answered 429; `unavailable`, 503 or an IMAP
//!   login `NO [UNAVAILABLE]`; `error`, no answer or not the one asked;
//!   the first two pause every background sync for the Retry-After)
//! - `fastview_cache_entries{cache="header|fast_view|structure|metadata|list_text|mailboxes|pages|mirror_names"}`,
//!   `fastview_cache_bytes{cache}` (gauges, read when scraped: what the
//!   caches hold; bytes are the caches' own weights, the bound
//!   `serve --header-cache-mb` and its siblings set; `metadata` holds
//!   the snapshots of mailboxIds and keywords taken at an Email state,
//!   `list_text` the list view's texts per account, `mailboxes` each
//!   account's mailboxes with their counts at its Email and Mailbox states,
//!   `pages` the list view's Email/query pages at those states,
//!   `mirror_names` a JMAP proxy's upstream names of mirrored emails, one
//!   entry per account)
//! - `fastview_metadata_snapshots_total{result="hit|stale|miss"}` (Email/get
//!   and SearchSnippet/get calls whose metadata came from snapshots at the
//!   account's current Email state — `hit` — or from the store: `stale`,
//!   every id had a snapshot at one state but the account's had moved on;
//!   `miss`, some id had none, or the snapshots were of different states)
//!
//! No label carries an account.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// `read_level` label of `fastview_email_get_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReadLevelLabel {
    pub read_level: &'static str,
}

/// `scope` label of `fastview_message_parses_total`: `header` or `full`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ParseScopeLabel {
    pub scope: &'static str,
}

/// `reason` label of `fastview_login_refusals_total`: `braked` (the failure
/// brake) or `busy` (the verification queue is full).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusalLabel {
    pub reason: &'static str,
}

/// Labels of `fastview_upstream_round_trips_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UpstreamCommandLabel {
    pub method: &'static str,
    pub command: &'static str,
}

/// `event_source` label of `fastview_upstream_polls_total`: `open` (the
/// account's event source streams) or `none` (the mirror polls instead).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventSourceLabel {
    pub event_source: &'static str,
}

/// `reason` label of `fastview_upstream_backoffs_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BackoffLabel {
    pub reason: &'static str,
}

/// `method` label of `fastview_upstream_bytes_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UpstreamMethodLabel {
    pub method: &'static str,
}

/// `cache` label of `fastview_cache_entries` and `fastview_cache_bytes`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CacheLabel {
    pub cache: &'static str,
}

/// `result` label of `fastview_metadata_snapshots_total`: `hit`, `stale`
/// or `miss`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SnapshotLabel {
    pub result: &'static str,
}

/// `method` label of the per-method latency histogram.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabel {
    pub method: &'static str,
}

fn latency_histogram() -> Histogram {
    // 50 µs … ~3.3 s, doubling.
    Histogram::new(exponential_buckets(0.000_05, 2.0, 17))
}

tokio::task_local! {
    /// The JMAP method a task works for (set by the dispatcher around each
    /// call, `sync` for an account's sync task): what the upstream's round
    /// trips and octets are counted under.
    pub static JMAP_METHOD: &'static str;
}

/// [`JMAP_METHOD`] of the running task; `other` outside any (a download).
pub fn current_method() -> &'static str {
    JMAP_METHOD.try_with(|method| *method).unwrap_or("other")
}

/// A cache whose entries and bytes `GET /metrics` reports
/// (`fastview_cache_entries`, `fastview_cache_bytes`) when it is scraped.
#[async_trait::async_trait]
pub trait CacheReport: Send + Sync {
    /// Sets the cache's gauges in `metrics` to what it holds now.
    async fn report(&self, metrics: &Metrics);
}

/// The counters of one server instance.
pub struct Metrics {
    registry: Registry,
    pub email_get: Family<ReadLevelLabel, Counter>,
    pub fast_view_hits: Counter,
    pub fast_view_misses: Counter,
    pub blob_reads: Counter,
    pub blob_read_bytes: Counter,
    pub message_parses: Family<ParseScopeLabel, Counter>,
    pub method_duration: Family<MethodLabel, Histogram, fn() -> Histogram>,
    pub login_verifications: Counter,
    pub login_refusals: Family<RefusalLabel, Counter>,
    pub upstream_round_trips: Family<UpstreamCommandLabel, Counter>,
    pub upstream_bytes: Family<UpstreamMethodLabel, Counter>,
    pub upstream_cache_refills: Counter,
    pub upstream_mailboxes_read: Counter,
    pub upstream_fetched_messages: Counter,
    pub upstream_fetched_bytes: Counter,
    pub upstream_sync_seconds: Histogram,
    pub upstream_event_source_fallbacks: Counter,
    pub upstream_outage_logins: Counter,
    pub upstream_polls: Family<EventSourceLabel, Counter>,
    pub upstream_syncs_waiting: Gauge,
    pub upstream_syncs_running: Gauge,
    pub upstream_backoffs: Family<BackoffLabel, Counter>,
    pub cache_entries: Family<CacheLabel, Gauge>,
    pub cache_bytes: Family<CacheLabel, Gauge>,
    pub metadata_snapshots: Family<SnapshotLabel, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh set of counters at zero, registered in their own registry
    /// (in this order, the order `/metrics` lists them).
    pub fn new() -> Self {
        let mut metrics = Self {
            registry: Registry::default(),
            email_get: Family::<ReadLevelLabel, Counter>::default(),
            fast_view_hits: Counter::default(),
            fast_view_misses: Counter::default(),
            blob_reads: Counter::default(),
            blob_read_bytes: Counter::default(),
            message_parses: Family::<ParseScopeLabel, Counter>::default(),
            method_duration: Family::new_with_constructor(latency_histogram),
            login_verifications: Counter::default(),
            login_refusals: Family::<RefusalLabel, Counter>::default(),
            upstream_round_trips: Family::<UpstreamCommandLabel, Counter>::default(),
            upstream_bytes: Family::<UpstreamMethodLabel, Counter>::default(),
            upstream_cache_refills: Counter::default(),
            upstream_mailboxes_read: Counter::default(),
            upstream_fetched_messages: Counter::default(),
            upstream_fetched_bytes: Counter::default(),
            upstream_sync_seconds: latency_histogram(),
            upstream_event_source_fallbacks: Counter::default(),
            upstream_outage_logins: Counter::default(),
            upstream_polls: Family::<EventSourceLabel, Counter>::default(),
            upstream_syncs_waiting: Gauge::default(),
            upstream_syncs_running: Gauge::default(),
            upstream_backoffs: Family::<BackoffLabel, Counter>::default(),
            cache_entries: Family::<CacheLabel, Gauge>::default(),
            cache_bytes: Family::<CacheLabel, Gauge>::default(),
            metadata_snapshots: Family::<SnapshotLabel, Counter>::default(),
        };
        metrics.register_read_path();
        metrics.register_upstream();
        metrics.register_caches();
        metrics
    }

    /// Registers the read path's counters and the logins'.
    fn register_read_path(&mut self) {
        let registry = &mut self.registry;
        registry.register(
            "fastview_email_get",
            "Email/get calls by read level",
            self.email_get.clone(),
        );
        registry.register(
            "fastview_fast_view_hits",
            "Fast-view projection rows found",
            self.fast_view_hits.clone(),
        );
        registry.register(
            "fastview_fast_view_misses",
            "Fast-view projection rows computed from the full message",
            self.fast_view_misses.clone(),
        );
        registry.register(
            "fastview_blob_reads",
            "Blobs read from the blob store",
            self.blob_reads.clone(),
        );
        registry.register(
            "fastview_blob_read_bytes",
            "Bytes read from the blob store",
            self.blob_read_bytes.clone(),
        );
        registry.register(
            "fastview_message_parses",
            "Messages parsed on the read path, by scope",
            self.message_parses.clone(),
        );
        registry.register(
            "fastview_jmap_method_duration_seconds",
            "Latency of each JMAP method call",
            self.method_duration.clone(),
        );
        registry.register(
            "fastview_login_verifications",
            "Password verifications (argon2) run, known and unknown users alike",
            self.login_verifications.clone(),
        );
        registry.register(
            "fastview_login_refusals",
            "Logins refused without verifying the password, by reason",
            self.login_refusals.clone(),
        );
    }

    /// Registers the upstream's counters (either proxy mode).
    fn register_upstream(&mut self) {
        let registry = &mut self.registry;
        registry.register(
            "fastview_upstream_round_trips",
            "Round trips to the upstream (IMAP sessions, JMAP requests), by what they were for",
            self.upstream_round_trips.clone(),
        );
        registry.register(
            "fastview_upstream_bytes",
            "Message octets read from or appended to the IMAP upstream, by JMAP method",
            self.upstream_bytes.clone(),
        );
        registry.register(
            "fastview_upstream_cache_refills",
            "Evicted messages read again from the IMAP upstream",
            self.upstream_cache_refills.clone(),
        );
        registry.register(
            "fastview_upstream_mailboxes_read",
            "Mailboxes whose UIDs and flags an upstream sync read",
            self.upstream_mailboxes_read.clone(),
        );
        registry.register(
            "fastview_upstream_fetched_messages",
            "Messages read from the IMAP upstream",
            self.upstream_fetched_messages.clone(),
        );
        registry.register(
            "fastview_upstream_fetched_bytes",
            "Octets of the messages read from the IMAP upstream",
            self.upstream_fetched_bytes.clone(),
        );
        registry.register(
            "fastview_upstream_sync_seconds",
            "How long one account's sync with the IMAP upstream took",
            self.upstream_sync_seconds.clone(),
        );
        registry.register(
            "fastview_upstream_event_source_fallbacks",
            "Event sources of a JMAP upstream that gave a mirror no stream, which then polled",
            self.upstream_event_source_fallbacks.clone(),
        );
        registry.register(
            "fastview_upstream_outage_logins",
            "Logins let through for reads from the mirror while the upstream could not be asked",
            self.upstream_outage_logins.clone(),
        );
        registry.register(
            "fastview_upstream_polls",
            "A JMAP mirror's polls of the upstream's states, by whether its event source was open",
            self.upstream_polls.clone(),
        );
        registry.register(
            "fastview_upstream_syncs_waiting",
            "Background syncs waiting for a turn at the upstream",
            self.upstream_syncs_waiting.clone(),
        );
        registry.register(
            "fastview_upstream_syncs_running",
            "Background syncs running against the upstream",
            self.upstream_syncs_running.clone(),
        );
        registry.register(
            "fastview_upstream_backoffs",
            "Background syncs that failed and wait before trying again, by reason",
            self.upstream_backoffs.clone(),
        );
    }

    /// Registers the caches' gauges and the metadata snapshots' counter.
    fn register_caches(&mut self) {
        let registry = &mut self.registry;
        registry.register(
            "fastview_cache_entries",
            "Entries an Email/get cache holds",
            self.cache_entries.clone(),
        );
        registry.register(
            "fastview_cache_bytes",
            "Octets an Email/get cache holds, by its own weights",
            self.cache_bytes.clone(),
        );
        registry.register(
            "fastview_metadata_snapshots",
            "Email/get metadata from snapshots at the current Email state (hit) or the store",
            self.metadata_snapshots.clone(),
        );
    }

    /// Counts one message parse on the read path (`scope` is `header` or `full`).
    pub fn count_parse(&self, scope: &'static str) {
        self.message_parses
            .get_or_create(&ParseScopeLabel { scope })
            .inc();
    }

    /// The current value of `fastview_message_parses_total{scope}`.
    pub fn parses(&self, scope: &'static str) -> u64 {
        self.message_parses
            .get_or_create(&ParseScopeLabel { scope })
            .get()
    }

    /// Counts one login refused unverified (`reason` is `braked` or `busy`).
    pub fn count_login_refusal(&self, reason: &'static str) {
        self.login_refusals
            .get_or_create(&RefusalLabel { reason })
            .inc();
    }

    /// Counts one command to the upstream for JMAP method `method`.
    pub fn count_upstream_round_trip(&self, method: &'static str, command: &'static str) {
        self.upstream_round_trips
            .get_or_create(&UpstreamCommandLabel { method, command })
            .inc();
    }

    /// Counts one backoff of a background sync (`reason`: `throttled`,
    /// `unavailable` or `error`).
    pub fn count_upstream_backoff(&self, reason: &'static str) {
        self.upstream_backoffs
            .get_or_create(&BackoffLabel { reason })
            .inc();
    }

    /// Counts one poll of a JMAP upstream's states by an account's mirror
    /// (`event_source` is `open` or `none`).
    pub fn count_upstream_poll(&self, event_source: &'static str) {
        self.upstream_polls
            .get_or_create(&EventSourceLabel { event_source })
            .inc();
    }

    /// Counts message octets read from or appended to the upstream.
    pub fn count_upstream_bytes(&self, method: &'static str, octets: u64) {
        self.upstream_bytes
            .get_or_create(&UpstreamMethodLabel { method })
            .inc_by(octets);
    }

    /// Records one account sync: mailboxes read, messages and octets
    /// fetched, time taken.
    pub fn upstream_synced(
        &self,
        method: &'static str,
        mailboxes: usize,
        messages: usize,
        octets: u64,
        took: std::time::Duration,
    ) {
        self.count_upstream_round_trip(method, "sync");
        self.count_upstream_bytes(method, octets);
        self.upstream_mailboxes_read.inc_by(mailboxes as u64);
        self.upstream_fetched_messages.inc_by(messages as u64);
        self.upstream_fetched_bytes.inc_by(octets);
        self.upstream_sync_seconds.observe(took.as_secs_f64());
    }

    /// Counts one blob read of `bytes` octets.
    pub fn count_blob_read(&self, bytes: usize) {
        self.blob_reads.inc();
        self.blob_read_bytes.inc_by(bytes as u64);
    }

    /// Counts one Email/get's metadata read: `hit`, `stale` or `miss`
    /// (`fastview_metadata_snapshots_total`).
    pub fn count_snapshot(&self, result: &'static str) {
        self.metadata_snapshots
            .get_or_create(&SnapshotLabel { result })
            .inc();
    }

    /// Sets the gauges of one cache: `entries` held, weighing `bytes`.
    pub fn set_cache(&self, cache: &'static str, entries: u64, bytes: u64) {
        let label = CacheLabel { cache };
        let gauge = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        self.cache_entries.get_or_create(&label).set(gauge(entries));
        self.cache_bytes.get_or_create(&label).set(gauge(bytes));
    }

    /// Sets the gauges of `cache` under `name`
    /// (`fastview_cache_entries`, `fastview_cache_bytes`), after its
    /// pending evictions.
    pub async fn report_cache<K, V>(&self, name: &'static str, cache: &moka::future::Cache<K, V>)
    where
        K: std::hash::Hash + Eq + Send + Sync + 'static,
        V: Clone + Send + Sync + 'static,
    {
        cache.run_pending_tasks().await;
        self.set_cache(name, cache.entry_count(), cache.weighted_size());
    }

    /// Renders every metric in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

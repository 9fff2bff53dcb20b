//! JMAP protocol (RFC 8620): wire types, errors, result references, dispatch,
//! and the mail methods (RFC 8621) under [`mail`].
//!
//! [`Jmap`] is everything a method needs; the HTTP layer owns one and hands
//! each authenticated request to [`dispatch::handle`].

pub mod args;
pub mod budget;
pub mod call;
pub mod copy;
pub mod core;
pub mod dispatch;
pub mod error;
pub mod ids;
pub mod mail;
pub mod quota;
pub mod reference;
pub mod request;
pub mod session;
pub mod submission;
pub mod vacation;

use std::sync::Arc;

use crate::blob::BlobStore;
use crate::mail::load::{CacheSizes, EmailLoader};
use crate::mail::read_level::ReadSwitches;
use crate::mail::work::{AccountSlots, WorkPool};
use crate::metrics::Metrics;
use crate::store::Store;

/// Server limits advertised in the session (RFC 8620 §2, RFC 8621 §1.3.1) and enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Octets.
    pub max_size_upload: u64,
    pub max_concurrent_upload: u64,
    /// Octets.
    pub max_size_request: u64,
    pub max_concurrent_requests: u64,
    pub max_calls_in_request: u64,
    pub max_objects_in_get: u64,
    pub max_objects_in_set: u64,
    /// Characters (RFC 8621 `maxSizeMailboxName`).
    pub max_size_mailbox_name: u64,
    pub max_mailbox_depth: u64,
    /// Not advertised (RFC 8620 defines no such limit): render work units one
    /// request may spend in Email/get and Email/parse, a unit being one
    /// property of one email or one header field value rendered
    /// ([`crate::mail::work::WorkMeter`]); more is `requestTooLarge`.
    pub max_render_work: u64,
    /// Threads of the pool heavy parsing and rendering run on
    /// ([`crate::mail::work::WorkPool`]); 0: one per core.
    pub work_threads: usize,
    /// Heavy jobs one account may have on that pool at once; 0: half the
    /// pool's threads (at least 1), so one account never fills it.
    pub work_jobs_per_account: usize,
    /// Not advertised: EmailSubmissions one account may create per hour
    /// (`serve --max-sent-messages-per-hour`); more are `overQuota`
    /// (RFC 8620 §5.3). 0: no bound.
    pub max_sent_messages_per_hour: u64,
    /// Not advertised: recipients (envelope `rcptTo`, local ones included,
    /// summed over submissions) one account may send to per hour
    /// (`serve --max-sent-recipients-per-hour`); more are
    /// `tooManyRecipients` with the number left as `maxRecipients`
    /// (RFC 8621 §7.5). 0: no bound.
    pub max_sent_recipients_per_hour: u64,
    /// Not advertised: how long EmailSubmission/set waits for the relay (or
    /// the upstream's submission server) before it answers with the
    /// recipients still `queued`; the delivery goes on meanwhile. Local
    /// recipients are delivered before the answer whatever this is.
    pub submit_wait: std::time::Duration,
}

/// [`Limits::max_sent_messages_per_hour`] unless `serve` says otherwise:
/// more than a person writes in an hour (one every 18 s), a tenth of the
/// recipients below.
pub const DEFAULT_SENT_MESSAGES_PER_HOUR: u64 = 200;

/// [`Limits::max_sent_recipients_per_hour`] unless `serve` says otherwise:
/// ten submissions to the most recipients one may have (100), so a
/// person's heaviest hour fits; a stolen account sends at most 24,000
/// relay transactions a day, not 100,000 in one call.
pub const DEFAULT_SENT_RECIPIENTS_PER_HOUR: u64 = 1_000;

/// How many JSON octets one request may make the server build (resolved
/// result references plus method responses) per octet of `maxSizeRequest`.
pub const BUILT_BYTES_PER_REQUEST_BYTE: u64 = 4;

/// How many octets of messages one request may have parsed whole per octet
/// of `maxSizeUpload`: a request can always read a few of the largest
/// messages the server accepts (and the same one from two calls).
pub const PARSED_BYTES_PER_UPLOAD_BYTE: u64 = 5;

/// How many accounts' worth of [`Limits::max_held_per_account`] all requests
/// of a node may hold at once (about 3.5 GB of memory at the defaults, as
/// JSON values take a few times their serialized size).
pub const HELD_ACCOUNTS_PER_NODE: u64 = 4;

impl Limits {
    /// Not advertised: octets of messages one request may have parsed whole
    /// (Email/get at the full level, Email/parse), more is `requestTooLarge`:
    /// [`PARSED_BYTES_PER_UPLOAD_BYTE`] × `maxSizeUpload` (250 MiB by default),
    /// so raising the upload limit never makes an accepted message unreadable.
    pub fn max_parse_bytes(&self) -> u64 {
        self.max_size_upload
            .saturating_mul(PARSED_BYTES_PER_UPLOAD_BYTE)
    }

    /// JSON octets one request may make the server build: resolved result
    /// references plus method responses ([`budget::RequestBudget`]),
    /// [`BUILT_BYTES_PER_REQUEST_BYTE`] × `maxSizeRequest` (40 MiB by default).
    pub fn max_size_built(&self) -> u64 {
        self.max_size_request
            .saturating_mul(BUILT_BYTES_PER_REQUEST_BYTE)
    }

    /// Not advertised: octets the requests in flight of one account may hold
    /// together ([`budget::Holdings`]: JSON built, messages being parsed), one
    /// request's whole budgets ([`Limits::max_size_built`] +
    /// [`Limits::max_parse_bytes`], 290 MiB by default), so the largest
    /// request always fits when it runs alone.
    pub fn max_held_per_account(&self) -> u64 {
        self.max_size_built().saturating_add(self.max_parse_bytes())
    }

    /// Not advertised: octets all requests in flight may hold together,
    /// [`HELD_ACCOUNTS_PER_NODE`] × [`Limits::max_held_per_account`].
    pub fn max_held_per_node(&self) -> u64 {
        self.max_held_per_account()
            .saturating_mul(HELD_ACCOUNTS_PER_NODE)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_size_upload: 50 << 20,
            max_concurrent_upload: 4,
            max_size_request: 10 << 20,
            max_concurrent_requests: 32,
            max_calls_in_request: 64,
            max_objects_in_get: 1000,
            max_objects_in_set: 1000,
            max_size_mailbox_name: 255,
            max_mailbox_depth: 10,
            max_render_work: 250_000,
            work_threads: 0,
            work_jobs_per_account: 0,
            max_sent_messages_per_hour: DEFAULT_SENT_MESSAGES_PER_HOUR,
            max_sent_recipients_per_hour: DEFAULT_SENT_RECIPIENTS_PER_HOUR,
            submit_wait: std::time::Duration::from_secs(5),
        }
    }
}

/// The JMAP side of a server instance.
pub struct Jmap {
    pub store: Arc<dyn Store>,
    pub blobs: Arc<BlobStore>,
    pub metrics: Arc<Metrics>,
    pub loader: EmailLoader,
    /// The list view's texts per account ([`mail::email::render_text::ListTexts`]).
    pub list_texts: mail::email::render_text::ListTexts,
    /// The text shapes of the property lists calls asked for
    /// ([`mail::email::render_text::TextShapes`]).
    pub text_shapes: mail::email::render_text::TextShapes,
    /// Each account's mailboxes with their counts, at the states they were
    /// read at ([`mail::mailbox::kept::KeptMailboxes`]).
    pub mailboxes: mail::mailbox::kept::KeptMailboxes,
    /// The list view's Email/query pages, at the states they were read at
    /// ([`mail::email::kept_pages::KeptPages`]).
    pub pages: mail::email::kept_pages::KeptPages,
    pub limits: Limits,
    pub switches: ReadSwitches,
    /// The bounded pool heavy parsing and rendering run on (shared with the loader).
    pub work: Arc<WorkPool>,
    /// What the requests in flight hold (JSON built, messages being parsed),
    /// per account and in all; see [`budget`].
    pub holdings: Arc<budget::Holdings>,
    /// Queries of the full-text index each account runs at once, at most
    /// [`crate::mail::search::MAX_SEARCHES_PER_ACCOUNT`] (one permit per
    /// read-pool connection a query takes; issue 43).
    pub searches: AccountSlots,
    /// Where mail to other servers goes (`serve --smtp-relay`, or each
    /// account's own submission server); without a relay, EmailSubmission/set
    /// refuses such recipients.
    pub route: crate::mail::delivery::Route,
    /// Where the write methods apply a change: the store
    /// ([`crate::mail::writer::LocalWriter`]) unless the assembly installs
    /// another.
    pub writer: Arc<dyn crate::mail::writer::MailWriter>,
}

impl Jmap {
    /// The JMAP side of a new serving instance over `store` and `blobs`: its
    /// own metrics and empty caches of `cache_sizes`.
    pub fn new(
        store: Arc<dyn Store>,
        blobs: Arc<BlobStore>,
        limits: Limits,
        switches: ReadSwitches,
        cache_sizes: CacheSizes,
    ) -> Self {
        let metrics = Arc::new(Metrics::new());
        let work = Arc::new(WorkPool::new(
            limits.work_threads,
            limits.work_jobs_per_account,
        ));
        let loader = EmailLoader::new(
            store.clone(),
            blobs.clone(),
            metrics.clone(),
            cache_sizes,
            work.clone(),
        );
        Self {
            metrics,
            loader,
            list_texts: mail::email::render_text::ListTexts::new(cache_sizes.list_text_bytes),
            text_shapes: Default::default(),
            mailboxes: mail::mailbox::kept::KeptMailboxes::new(
                mail::mailbox::kept::KEPT_MAILBOX_BYTES,
            ),
            pages: mail::email::kept_pages::KeptPages::new(
                mail::email::kept_pages::KEPT_PAGE_BYTES,
            ),
            limits,
            switches,
            work,
            holdings: Arc::new(budget::Holdings::new(
                limits.max_held_per_account(),
                limits.max_held_per_node(),
            )),
            searches: AccountSlots::new(crate::mail::search::MAX_SEARCHES_PER_ACCOUNT),
            route: crate::mail::delivery::Route::default(),
            writer: Arc::new(crate::mail::writer::LocalWriter {
                store: store.clone(),
                blobs: blobs.clone(),
            }),
            store,
            blobs,
        }
    }
}

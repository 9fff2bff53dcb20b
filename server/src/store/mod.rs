//! Storage: the [`Store`] trait, its row types, and the one implementation
//! [`sql::SqlStore`] written once over a [`dialect::Dialect`]:
//! [`sqlite::SqliteStore`] (the embedded default) and
//! [`postgres::PostgresStore`] (selected by a `postgres://` database URL).
//! `server/tests/store/` runs one conformance suite against both. The only
//! module that imports sqlx; everything above it speaks in the row types
//! below.
//!
//! Every write runs in one transaction that also advances the account's state
//! counters (RFC 8620 §5.1 `state`): a message is visible completely (row,
//! mailbox memberships, header block, projection row) or not at all.
//!
//! The same transaction appends to the account's change log
//! ([`change_log`]): one row per object it created, updated or destroyed, at
//! the account's new modseq. A type's state string is the modseq of its last
//! change, so [`Store::changes`] answers Foo/changes (RFC 8620 §5.2) from any
//! state since the log began ([`LogPosition`]), collapsing what happened in
//! between ([`Changes`]). A write that changes nothing advances nothing.

pub mod change_log;
mod columns;
pub mod dialect;
mod hot_read;
mod identity;
pub mod insert_plan;
mod jmap_mirror;
pub mod postgres;
pub mod raw;
mod raw_copy;
pub mod sql;
pub mod sqlite;
mod submission;
mod upstream;

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;

use change_log::ChangeSet;
pub use change_log::{ChangeKind, ChangeType, Changes, LogPosition};

/// Role mailboxes every new account gets (RFC 8621 §2, IANA mailbox roles),
/// as (role, name), in sort order.
pub const ROLE_MAILBOXES: &[(&str, &str)] = &[
    ("inbox", "Inbox"),
    ("drafts", "Drafts"),
    ("sent", "Sent"),
    ("trash", "Trash"),
    ("junk", "Junk"),
    ("archive", "Archive"),
];

/// One projection row: the fast-view properties of one message (ADR 0003),
/// computed by [`crate::mail::fast_view`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FastView {
    /// Plain text, whitespace collapsed to single spaces, at most
    /// [`crate::mail::fast_view::PREVIEW_CHARS`] characters.
    pub preview: String,
    /// True when the RFC 8621 §4.1.4 partition puts at least one part in `attachments`.
    pub has_attachment: bool,
}

/// Errors of the storage layer. Callers map them to JMAP errors; the database
/// text never reaches a client.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The row to change does not exist in this account.
    #[error("not found")]
    NotFound,
    /// The change would break a rule of the data model (message in the text).
    #[error("{0}")]
    Conflict(String),
    /// Mailbox/set destroy of a mailbox that has child mailboxes (RFC 8621 §2.5 `mailboxHasChild`).
    #[error("the mailbox has child mailboxes")]
    MailboxHasChild,
    /// Mailbox/set destroy of a non-empty mailbox without onDestroyRemoveEmails (`mailboxHasEmail`).
    #[error("the mailbox has emails")]
    MailboxHasEmail,
    /// The write would take the account over its quota (RFC 8620 §5.3
    /// `overQuota`; see [`Quota`]).
    #[error("the account is over its quota")]
    OverQuota,
    /// The database cannot grow: the disk (or SQLite's size cap) is full
    /// (SQLite `SQLITE_FULL`, PostgreSQL SQLSTATE 53100 `disk_full`). The
    /// write was rolled back whole; reads go on, and writes work again once
    /// space is freed, without a restart.
    #[error("the database's storage is full: {0}")]
    StorageFull(sqlx::Error),
    /// The submission would take the account past an hourly send bound
    /// ([`Store::create_submission`], [`SendLimits`]); nothing was written.
    #[error("the account's hourly send limit is reached: {0:?}")]
    SendLimit(SendLimitHit),
    /// The database failed.
    #[error("database error: {0}")]
    Database(sqlx::Error),
    /// Applying migrations failed.
    #[error("migration error: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// [`Store::changes`] from a position that is not a valid past state:
    /// in the future, or before the retained log (RFC 8620 `cannotCalculateChanges`).
    #[error("cannot calculate changes from this state")]
    CannotCalculateChanges,
}

/// Result of a storage call.
pub type StoreResult<T> = Result<T, StoreError>;

impl From<sqlx::Error> for StoreError {
    /// [`StoreError::StorageFull`] for SQLite's `SQLITE_FULL` (result code
    /// 13) and PostgreSQL's `disk_full` (SQLSTATE 53100), else `Database`.
    fn from(error: sqlx::Error) -> Self {
        let full = matches!(
            &error,
            sqlx::Error::Database(db) if matches!(db.code().as_deref(), Some("13" | "53100"))
        );
        if full {
            StoreError::StorageFull(error)
        } else {
            StoreError::Database(error)
        }
    }
}

/// One account (a login and its mail).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Account {
    pub id: i64,
    pub email: String,
    /// PHC-format argon2 hash of the password.
    pub password_hash: String,
}

/// An API token of an account (`fastview token`; migration
/// `0302_api_tokens.sql`). The secret itself is never stored, only its
/// SHA-256 (hex), by which a `Bearer` credential is looked up.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ApiToken {
    pub id: i64,
    pub account_id: i64,
    pub name: String,
    /// Unix seconds.
    pub created_at: i64,
    /// Unix seconds; `None` never expires.
    pub expires_at: Option<i64>,
}

/// An account's storage quota and usage (RFC 9425 resource type `octets`).
///
/// `used` counts each distinct blob the account holds once: its emails'
/// messages and its pending uploads (both are rows of `account_blobs`; an
/// upload imported as an email is the same row). A write that adds an email
/// or an upload is refused ([`StoreError::OverQuota`]) when `used` would end
/// above `limit`; writes that add nothing new to the account (a blob it
/// already holds) are not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    /// Octets the account may hold; `None` for no limit.
    pub limit: Option<i64>,
    /// Octets the account holds.
    pub used: i64,
}

impl Quota {
    /// Whether adding `octets` more would take the account over its limit.
    pub fn would_exceed(&self, octets: i64) -> bool {
        self.limit
            .is_some_and(|limit| self.used.saturating_add(octets) > limit)
    }
}

/// The state strings of one account (RFC 8620 §5.1), as counters: each is the
/// account's modification sequence at the last change of that type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct States {
    pub email: i64,
    pub mailbox: i64,
    pub thread: i64,
    pub identity: i64,
    pub vacation_response: i64,
    pub email_submission: i64,
}

/// An Identity (RFC 8621 §6) as stored. `reply_to` and `bcc` are JSON
/// `EmailAddress[]` text, written and read by the JMAP layer; `None` is null.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct IdentityRow {
    pub id: i64,
    pub name: String,
    /// The From address; immutable.
    pub email: String,
    pub reply_to: Option<String>,
    pub bcc: Option<String>,
    pub text_signature: String,
    pub html_signature: String,
    /// False for the identity made with the account (its own address).
    pub may_delete: bool,
}

/// An EmailSubmission (RFC 8621 §7) as stored. `envelope` is JSON
/// `Envelope`, `delivery_status` JSON `String[DeliveryStatus]`, both
/// written and read by the JMAP layer; `send_at` in Unix seconds.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct SubmissionRow {
    pub id: i64,
    pub identity_id: i64,
    pub email_id: i64,
    pub thread_id: i64,
    pub envelope: String,
    pub send_at: i64,
    pub undo_status: String,
    pub delivery_status: String,
}

/// One delivery of a submission not yet done (issue 17): the message as
/// sent (`blob_id`, Bcc removed) to `recipients` (a JSON array of
/// addresses), from `mail_from`. Times in Unix seconds.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Delivery {
    pub id: i64,
    pub submission_id: i64,
    /// The sending account.
    pub account_id: i64,
    pub blob_id: String,
    pub mail_from: String,
    pub recipients: String,
    /// The submission's sendAt: what a recipient's copy is stamped with,
    /// so a retried delivery makes the same octets.
    pub send_at: i64,
    /// Tries made before this one.
    pub attempts: i64,
    /// The fencing token of the hold this copy was taken with (0 for the
    /// node that queued it; one more at each take): a node renews its hold
    /// and records its attempt only while the row still has this token.
    #[sqlx(rename = "lease_token")]
    pub lease: i64,
}

/// Per-account bounds on sending, counted over the hour before `now`
/// from what the store recorded (so they hold across nodes and restarts;
/// issue 43). Every recipient counts, local ones included. `None`: no bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SendLimits {
    /// Unix seconds: the hour counted is `(now - 3600, now]`.
    pub now: i64,
    /// Submissions an account may make per hour.
    pub messages_per_hour: Option<i64>,
    /// Recipients (envelope `rcptTo`, summed over submissions) per hour.
    pub recipients_per_hour: Option<i64>,
}

/// Which hourly send bound a submission would pass ([`SendLimits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendLimitHit {
    /// The account sent `limit` messages in the last hour (RFC 8620 §5.3
    /// `overQuota`).
    Messages { limit: i64 },
    /// The account may send to only `left` more recipients this hour, of
    /// `limit` (RFC 8621 §7.5 `tooManyRecipients`, `maxRecipients`).
    Recipients { limit: i64, left: i64 },
}

/// The mutable properties of an Identity to change; `None` keeps one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IdentityPatch {
    pub name: Option<String>,
    pub reply_to: Option<Option<String>>,
    pub bcc: Option<Option<String>>,
    pub text_signature: Option<String>,
    pub html_signature: Option<String>,
}

/// The VacationResponse of an account (RFC 8621 §8); dates in Unix
/// seconds. [`Default`] is the one of an account that never set it:
/// disabled, everything null.
#[derive(Debug, Clone, Default, PartialEq, Eq, sqlx::FromRow)]
pub struct VacationResponse {
    pub is_enabled: bool,
    pub from_date: Option<i64>,
    pub to_date: Option<i64>,
    pub subject: Option<String>,
    pub text_body: Option<String>,
    pub html_body: Option<String>,
}

/// A mailbox with its counts (RFC 8621 §2).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct MailboxRow {
    pub id: i64,
    pub parent_id: Option<i64>,
    pub name: String,
    /// RFC 8457 / IANA role name, lowercase (`inbox`, `sent`, …).
    pub role: Option<String>,
    pub sort_order: i64,
    pub is_subscribed: bool,
    pub total_emails: i64,
    pub unread_emails: i64,
    pub total_threads: i64,
    pub unread_threads: i64,
}

/// The writable properties of a new mailbox (RFC 8621 §2.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewMailbox {
    pub parent_id: Option<i64>,
    pub name: String,
    pub role: Option<String>,
    pub sort_order: i64,
    pub is_subscribed: bool,
}

/// A partial update of a mailbox: `None` leaves a property as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MailboxPatch {
    pub parent_id: Option<Option<i64>>,
    pub name: Option<String>,
    pub role: Option<Option<String>>,
    pub sort_order: Option<i64>,
    pub is_subscribed: Option<bool>,
}

/// An email of a JMAP upstream's account as the local mirror holds it
/// (issue 19, migration 0310): the local email and the upstream's names
/// for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirroredEmail {
    /// The local email row.
    pub email_id: i64,
    /// The upstream's Email id, blobId and threadId.
    pub upstream_id: String,
    pub blob_id: String,
    pub thread_id: String,
    /// The upstream's blobId of each part by partId, as a JSON object, when
    /// the upstream's partIds are Fastview's; `None` otherwise.
    pub parts: Option<String>,
}

/// A local mailbox that mirrors a mailbox of the upstream IMAP server
/// (issue 18, migration 0309).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamMailbox {
    pub mailbox_id: i64,
    /// The upstream's full name as on the wire (RFC 3501 §5.1.3 modified
    /// UTF-7, hierarchy delimiters included).
    pub name: String,
    /// The UIDVALIDITY the mapped UIDs belong to (RFC 3501 §2.3.1.1).
    pub uid_validity: i64,
    /// RFC 7162 HIGHESTMODSEQ when the mailbox was last read whole;
    /// `None` when unknown or the upstream has no CONDSTORE.
    pub highest_modseq: Option<i64>,
}

/// One synced copy of a message in a mirrored mailbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamCopy {
    pub uid: i64,
    pub email_id: i64,
    /// The copy's flags as keywords (lowercase, sorted).
    pub keywords: Vec<String>,
}

/// The metadata of one email: everything Email/get serves at the metadata
/// read level (RFC 8621 §4.1.1), from database rows only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmailMeta {
    pub id: i64,
    /// Hex SHA-256 of the raw message.
    pub blob_id: String,
    pub thread_id: i64,
    /// Raw message size in octets.
    pub size: i64,
    /// Unix seconds, UTC.
    pub received_at: i64,
    /// Ascending.
    pub mailbox_ids: Vec<i64>,
    /// Lowercase (RFC 8621 §4.1.1: keywords are case-insensitive), sorted.
    pub keywords: Vec<String>,
}

/// A message ready to be stored, prepared by [`crate::mail::ingest`].
#[derive(Debug, Clone)]
pub struct NewEmail {
    pub blob_id: String,
    pub size: i64,
    /// Unix seconds, UTC.
    pub received_at: i64,
    /// The Date header in unix seconds, UTC; `None` when absent or invalid.
    pub sent_at: Option<i64>,
    pub mailbox_ids: Vec<i64>,
    pub keywords: Vec<String>,
    /// The raw header block, up to and including the blank line.
    pub header_block: Vec<u8>,
    pub fast_view: FastView,
    /// The part tree in its stored form (`crate::mail::structure`).
    pub structure: Vec<u8>,
    /// The words the full-text index keeps (`crate::mail::search`).
    pub search: SearchText,
    /// Facts for threading and Email/query, see [`EmailIndex`].
    pub index: EmailIndex,
}

/// The folded words of a message the full-text index keeps, one space
/// between words (`crate::mail::search::document_of`): its header fields
/// (subject, from/to/cc/bcc names and addresses) and its body (text parts,
/// attachment names).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchText {
    pub headers: String,
    pub body: String,
}

/// Which words a full-text condition searches (RFC 8621 §4.4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SearchScope {
    /// `text`: headers and body.
    All,
    /// `body`: the body only.
    Body,
}

/// One term of a full-text condition: folded words that must be found next
/// to each other in this order (one word: anywhere); with `prefix`, the
/// last word matches the words it begins.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SearchTerm {
    pub words: Vec<String>,
    pub prefix: bool,
}

/// A full-text condition: every term must be found in the scope
/// (`crate::mail::search::parse_query` reads one from a filter value).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TextSearch {
    pub scope: SearchScope,
    pub terms: Vec<SearchTerm>,
}

/// Immutable facts about a message that Email/query filters and sorts on and
/// that threading matches on (RFC 8621 §3, §4.4).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EmailIndex {
    /// Message-ID without angle brackets (for threading: as Email/get renders
    /// it, else the first `local@domain` word of the field, as for `referenced_ids`).
    pub message_id: Option<String>,
    /// In-Reply-To and References ids, without angle brackets, for threading:
    /// as Email/get renders them, or, where a field is not a msg-id list, the
    /// `local@domain` words of its raw value (RFC 5322 §4.5.4 obs-in-reply-to).
    pub referenced_ids: Vec<String>,
    /// The subject with reply/forward prefixes and list tags removed, lowercase.
    pub base_subject: String,
    /// The decoded subject, lowercase (for the `subject` filter).
    pub subject: String,
    /// Name (else address) of the first From address, lowercase (the `from` sort).
    pub from_sort: String,
    /// Name (else address) of the first To address, lowercase (the `to` sort).
    pub to_sort: String,
    /// All names and addresses of From, lowercase, newline-separated (the `from` filter).
    pub from_text: String,
    pub to_text: String,
    pub cc_text: String,
    pub bcc_text: String,
    pub has_attachment: bool,
}

/// Outcome of storing one [`NewEmail`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inserted {
    /// Stored as a new email with this id.
    New(i64),
    /// The same bytes were already in the account as this email; nothing stored.
    Duplicate(i64),
}

/// What Email/query evaluates filters and sorts on, one per email.
#[derive(Debug, Clone)]
pub struct QueryRow {
    pub meta: EmailMeta,
    pub sent_at: Option<i64>,
    pub index: EmailIndex,
}

/// Patch operations on one list-valued property (RFC 8620 §5.3 PatchObject
/// on `keywords` or `mailboxIds`): replace the whole list, or add and remove
/// members. The store applies them to the current value inside its write
/// transaction, so concurrent patches of different members never lose one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListPatch<T> {
    /// The new whole value (`keywords` / `mailboxIds` set as a whole).
    pub replace: Option<Vec<T>>,
    /// Members to add (`keywords/$seen: true`), after `remove`.
    pub add: Vec<T>,
    /// Members to remove (`keywords/$seen: null`).
    pub remove: Vec<T>,
}

impl<T> Default for ListPatch<T> {
    fn default() -> Self {
        Self {
            replace: None,
            add: Vec::new(),
            remove: Vec::new(),
        }
    }
}

impl<T: Ord + Clone> ListPatch<T> {
    /// A patch replacing the whole list.
    pub fn replace(values: Vec<T>) -> Self {
        Self {
            replace: Some(values),
            ..Self::default()
        }
    }

    /// Whether the patch changes nothing whatever the current value.
    pub fn is_empty(&self) -> bool {
        self.replace.is_none() && self.add.is_empty() && self.remove.is_empty()
    }

    /// The members the patch may put in the list.
    pub fn additions(&self) -> impl Iterator<Item = &T> {
        self.replace.iter().flatten().chain(&self.add)
    }

    /// The patched value of `current`, sorted without repeats.
    pub fn apply(&self, current: &[T]) -> Vec<T> {
        let mut value: Vec<T> = self.replace.as_deref().unwrap_or(current).to_vec();
        value.retain(|member| !self.remove.contains(member));
        value.extend(self.add.iter().cloned());
        value.sort();
        value.dedup();
        value
    }
}

/// A change to one email's mutable properties (RFC 8621 §4.6), as patch
/// operations the store applies to the current values.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EmailUpdate {
    pub id: i64,
    /// Keywords, compared and stored lowercase.
    pub keywords: ListPatch<String>,
    pub mailbox_ids: ListPatch<i64>,
}

impl EmailUpdate {
    /// An update replacing whichever of the two lists is given.
    pub fn replace(id: i64, keywords: Option<Vec<String>>, mailbox_ids: Option<Vec<i64>>) -> Self {
        Self {
            id,
            keywords: ListPatch {
                replace: keywords,
                ..ListPatch::default()
            },
            mailbox_ids: ListPatch {
                replace: mailbox_ids,
                ..ListPatch::default()
            },
        }
    }
}

/// What [`Store::update_emails`] did with one [`EmailUpdate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateOutcome {
    /// Applied (possibly changing nothing).
    Updated,
    /// No such email in the account; nothing changed.
    NotFound,
    /// The email would end up in no mailbox; nothing changed.
    NoMailbox,
    /// A mailbox to add is not in the account; nothing changed.
    UnknownMailbox,
}

/// Keywords and mailbox ids of one email, as the store holds them
/// (lowercase sorted keywords, ascending mailbox ids).
pub(crate) type EmailLists = (Vec<String>, Vec<i64>);

/// Applies updates in order to the emails' values `before` (those in the
/// account), given the mailboxes to add that the account owns: the values
/// after, for every email with an applied update, and each update's outcome.
pub(crate) fn apply_updates(
    before: &HashMap<i64, EmailLists>,
    owned: &std::collections::HashSet<i64>,
    updates: &[EmailUpdate],
) -> (HashMap<i64, EmailLists>, Vec<UpdateOutcome>) {
    let mut current: HashMap<i64, EmailLists> = HashMap::new();
    let outcomes = updates
        .iter()
        .map(|update| {
            let Some(lists) = current.get(&update.id).or_else(|| before.get(&update.id)) else {
                return UpdateOutcome::NotFound;
            };
            if update.mailbox_ids.additions().any(|m| !owned.contains(m)) {
                return UpdateOutcome::UnknownMailbox;
            }
            let lower = |list: &[String]| -> Vec<String> {
                list.iter().map(|k| k.to_ascii_lowercase()).collect()
            };
            let keywords = ListPatch {
                replace: update.keywords.replace.as_deref().map(lower),
                add: lower(&update.keywords.add),
                remove: lower(&update.keywords.remove),
            }
            .apply(&lists.0);
            let mailboxes = update.mailbox_ids.apply(&lists.1);
            if mailboxes.is_empty() {
                return UpdateOutcome::NoMailbox;
            }
            current.insert(update.id, (keywords, mailboxes));
            UpdateOutcome::Updated
        })
        .collect();
    (current, outcomes)
}

/// Whether keywords make an email unread for the mailbox counts (neither
/// `$seen` nor `$draft`).
fn unread(keywords: &[String]) -> bool {
    !keywords.iter().any(|k| k == "$seen" || k == "$draft")
}

/// Records an email's keyword or membership change, and the mailboxes
/// whose counts it moves: those it entered or left, and, when it became
/// read or unread, those it stays in. Nothing when nothing changed.
pub(crate) fn record_email_update(
    set: &mut ChangeSet,
    id: i64,
    before: (&[String], &[i64]),
    after: (&[String], &[i64]),
) {
    if before == after {
        return;
    }
    set.record(ChangeType::Email, id, ChangeKind::Updated);
    let unread_changed = unread(before.0) != unread(after.0);
    for mailbox in before.1.iter().chain(after.1) {
        let moved = before.1.contains(mailbox) != after.1.contains(mailbox);
        if moved || unread_changed {
            set.counts(*mailbox);
        }
    }
}

/// The version of the newest migration this build applies (`migrations/`;
/// both databases have the same file names, which tidy checks): a
/// resumable job records it, so that a run under another schema starts over.
pub fn schema_version() -> i64 {
    sqlx::migrate!("../migrations/sqlite")
        .iter()
        .map(|migration| migration.version)
        .max()
        .unwrap_or(0)
}

/// The storage operations Fastview needs, implemented once per database.
/// Every method that takes an `account` touches only that account's rows.
/// Batched methods take id lists and run a fixed number of queries, never one per id.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Creates an account with the role mailboxes inbox, drafts, sent, trash,
    /// junk, archive. `Conflict` when the email is taken.
    async fn create_account(&self, email: &str, password_hash: &str) -> StoreResult<Account>;
    /// Finds an account by login, case-insensitively.
    async fn account_by_email(&self, email: &str) -> StoreResult<Option<Account>>;
    /// All accounts, by id.
    async fn list_accounts(&self) -> StoreResult<Vec<Account>>;
    /// Replaces the password hash; `NotFound` when there is no such account.
    async fn set_password(&self, email: &str, password_hash: &str) -> StoreResult<()>;
    /// Removes an account and all its rows; `NotFound` when there is none.
    /// Returns the blob ids its emails and uploads referred to: blobs are
    /// shared by content, so the caller hands them to the garbage collector
    /// ([`crate::mail::gc`]), which deletes those nothing else refers to.
    async fn remove_account(&self, email: &str) -> StoreResult<Vec<String>>;
    /// Sets the account's quota in octets, or lifts it (`None`); `NotFound`
    /// when there is no such account. Existing mail is kept either way.
    async fn set_quota(&self, email: &str, octets: Option<i64>) -> StoreResult<()>;
    /// The account's quota and usage; `NotFound` when there is no account.
    async fn quota(&self, account: i64) -> StoreResult<Quota>;
    /// The account by id, `None` when it no longer exists.
    async fn account_by_id(&self, account: i64) -> StoreResult<Option<Account>>;
    /// Records a new API token of the account whose secret hashes to
    /// `secret_sha256` (hex); `NotFound` when the account does not exist.
    async fn create_token(
        &self,
        account: i64,
        secret_sha256: &str,
        name: &str,
        created_at: i64,
        expires_at: Option<i64>,
    ) -> StoreResult<ApiToken>;
    /// The account's API tokens, by id (expired ones too).
    async fn tokens(&self, account: i64) -> StoreResult<Vec<ApiToken>>;
    /// Deletes one API token of the account; `NotFound` when it has none of that id.
    async fn revoke_token(&self, account: i64, token: i64) -> StoreResult<()>;
    /// The account and token a `Bearer` secret (by its SHA-256, hex) names,
    /// if the token exists and has not expired at `now` (unix seconds).
    async fn account_by_token(
        &self,
        secret_sha256: &str,
        now: i64,
    ) -> StoreResult<Option<(Account, ApiToken)>>;
    /// The key named `name` (32 random octets), made on first use and the
    /// same on every node of the database.
    async fn server_key(&self, name: &str) -> StoreResult<Vec<u8>>;
    /// Whether emails are stored and none of them is in the full-text
    /// index: mail stored before the index, or before a migration rebuilt
    /// it (SQLite's 0305 and 0312), that `fastview reproject` has not
    /// indexed yet. (An email without a single word has no index row.)
    async fn search_index_unfilled(&self) -> StoreResult<bool>;
    /// Refreshes the database's planner statistics after a bulk load
    /// (`fastview seed`, `fastview import`): PostgreSQL's `ANALYZE`;
    /// nothing on SQLite.
    async fn analyze(&self) -> StoreResult<()>;
    /// The account's current state counters.
    async fn states(&self, account: i64) -> StoreResult<States>;
    /// The account's identities (RFC 8621 §6), by id. The one made with the
    /// account, for its own address, comes first.
    async fn identities(&self, account: i64) -> StoreResult<Vec<IdentityRow>>;
    /// Stores a new identity (`id` and `may_delete` ignored: a new one may
    /// be deleted) and logs it; its id.
    async fn create_identity(&self, account: i64, identity: &IdentityRow) -> StoreResult<i64>;
    /// Changes an identity and logs it; `NotFound` unless the account has it.
    async fn update_identity(
        &self,
        account: i64,
        id: i64,
        patch: &IdentityPatch,
    ) -> StoreResult<()>;
    /// Deletes an identity and logs it; `NotFound` unless the account has it.
    async fn destroy_identity(&self, account: i64, id: i64) -> StoreResult<()>;
    /// The addresses the account may send as besides its own: lowercase,
    /// sorted.
    async fn aliases(&self, account: i64) -> StoreResult<Vec<String>>;
    /// Lets the account send as `address` (stored lowercase). `Conflict`
    /// when it is another account's login or alias; adding one it has
    /// changes nothing.
    async fn add_alias(&self, account: i64, address: &str) -> StoreResult<()>;
    /// Takes an alias away (its identities stay, and can no longer send);
    /// false when the account did not have it.
    async fn remove_alias(&self, account: i64, address: &str) -> StoreResult<bool>;
    /// The account's EmailSubmissions (RFC 8621 §7), by id.
    async fn submissions(&self, account: i64) -> StoreResult<Vec<SubmissionRow>>;
    /// One of the account's EmailSubmissions, if it has it.
    async fn submission(&self, account: i64, id: i64) -> StoreResult<Option<SubmissionRow>>;
    /// Stores a submission (its `id` ignored) with the deliveries that send
    /// it (their `id` and `submission_id` ignored), in one transaction, and
    /// logs it; the submission's id and the deliveries as stored (held by
    /// the caller, lease token 0). The submission counts against `limits`
    /// with all its deliveries' recipients: `SendLimit` and nothing written
    /// when the account's last hour (checked under the account's write
    /// lock, so concurrent submissions cannot both pass) leaves no room.
    async fn create_submission(
        &self,
        account: i64,
        submission: &SubmissionRow,
        deliveries: &[Delivery],
        limits: SendLimits,
    ) -> StoreResult<(i64, Vec<Delivery>)>;
    /// What the account sent in the hour before `now` (Unix seconds):
    /// (submissions, recipients), as [`SendLimits`] counts them.
    async fn sent_in_hour(&self, account: i64, now: i64) -> StoreResult<(i64, i64)>;
    /// Deletes a submission's record (its deliveries go on) and logs it;
    /// `NotFound` unless the account has it.
    async fn destroy_submission(&self, account: i64, id: i64) -> StoreResult<()>;
    /// Takes up to `limit` deliveries due at `now` that no node holds (or
    /// whose holder's lease ran out), holding each until `now + lease`
    /// under a new lease token ([`Delivery::lease`]): the previous holder's
    /// renewals and record fail from then on.
    async fn take_deliveries(&self, now: i64, lease: i64, limit: i64)
    -> StoreResult<Vec<Delivery>>;
    /// Records what a delivery attempt gave: `statuses` (recipient, JSON
    /// DeliveryStatus) merged into its submission's `delivery_status` (when
    /// the record still exists; logged), then the delivery deleted, or, with
    /// `retry_at`, kept for another attempt then, for `recipients` only.
    /// Only while the delivery still has the lease token `delivery` was
    /// taken with: false, and nothing written, when another node took it
    /// over (or it is gone).
    async fn finish_delivery(
        &self,
        delivery: &Delivery,
        statuses: &[(String, String)],
        retry: Option<(i64, String)>,
    ) -> StoreResult<bool>;
    /// Holds delivery `id` until `until` (Unix seconds) for the node working
    /// on it with lease token `lease`: false, and nothing changed, when the
    /// delivery has another token (another node took it over) or is gone.
    async fn renew_delivery(&self, id: i64, lease: i64, until: i64) -> StoreResult<bool>;
    /// The account whose login or alias `address` is (case-insensitively),
    /// if any: where mail to it is delivered.
    async fn account_for_address(&self, address: &str) -> StoreResult<Option<i64>>;
    /// Whether the account may answer `sender` automatically now (`now`,
    /// Unix seconds): true, and recorded, unless it did within `period`
    /// seconds (RFC 3834 §2: once per sender per period).
    async fn vacation_reply_due(
        &self,
        account: i64,
        sender: &str,
        now: i64,
        period: i64,
    ) -> StoreResult<bool>;
    /// The account's VacationResponse (the default when never set).
    async fn vacation_response(&self, account: i64) -> StoreResult<VacationResponse>;
    /// Replaces the account's VacationResponse and logs it.
    async fn set_vacation_response(
        &self,
        account: i64,
        response: &VacationResponse,
    ) -> StoreResult<()>;

    /// The upstream IMAP server this data dir mirrors (`serve --upstream`),
    /// if any (migration 0309).
    async fn upstream_source(&self) -> StoreResult<Option<String>>;
    /// Records the upstream this data dir mirrors.
    async fn set_upstream_source(&self, url: &str) -> StoreResult<()>;
    /// The account's mailboxes that mirror upstream mailboxes.
    async fn upstream_mailboxes(&self, account: i64) -> StoreResult<Vec<UpstreamMailbox>>;
    /// Records (or renames, or moves to a new UIDVALIDITY) the upstream
    /// mailbox a mailbox of the account mirrors; nothing when the mailbox is
    /// not the account's.
    async fn put_upstream_mailbox(
        &self,
        account: i64,
        mailbox: &UpstreamMailbox,
    ) -> StoreResult<()>;
    /// Every synced copy in a mirrored mailbox, by UID.
    async fn upstream_uids(&self, mailbox: i64) -> StoreResult<Vec<UpstreamCopy>>;
    /// Records (or updates the flags of) copies in a mirrored mailbox.
    async fn record_upstream_uids(&self, mailbox: i64, copies: &[UpstreamCopy]) -> StoreResult<()>;
    /// `(email id, mailbox id, uid, keywords)` of every upstream copy of
    /// the account's emails among `emails`, by mailbox then UID (keywords
    /// space-separated, as [`UpstreamCopy`] holds them).
    async fn upstream_locations(
        &self,
        account: i64,
        emails: &[i64],
    ) -> StoreResult<Vec<(i64, i64, i64, String)>>;
    /// `(blob id, email id)` of the account's emails with those blob ids.
    async fn emails_of_blobs(
        &self,
        account: i64,
        blob_ids: &[&str],
    ) -> StoreResult<Vec<(String, i64)>>;
    /// Octets of the distinct message blobs the data dir holds, evicted ones
    /// aside (the upstream cache's size).
    async fn upstream_cache_total(&self) -> StoreResult<i64>;
    /// Up to `limit` cached message blobs `(blob id, size)`, those of the
    /// oldest receivedAt first (what the cache evicts first).
    async fn upstream_cache_oldest(&self, limit: i64) -> StoreResult<Vec<(String, i64)>>;
    /// Records blobs as evicted (before they are deleted).
    async fn mark_evicted(&self, blobs: &[(String, i64)]) -> StoreResult<()>;
    /// Records blobs as back in the store.
    async fn unmark_evicted(&self, blobs: &[&str]) -> StoreResult<()>;
    /// Those of `blobs` that are evicted.
    async fn evicted_among(&self, blobs: &[&str]) -> StoreResult<Vec<String>>;
    /// Where a message blob is on the upstream: (account, mailbox name, UID).
    async fn upstream_blob_location(
        &self,
        blob_id: &str,
    ) -> StoreResult<Option<(i64, String, i64)>>;
    /// Records that `account` finished a sync at `at` (unix seconds).
    async fn record_upstream_sync(&self, account: i64, at: i64) -> StoreResult<()>;
    /// `(account, unix seconds)` of every account's last finished sync.
    async fn upstream_syncs(&self) -> StoreResult<Vec<(i64, i64)>>;
    /// Forgets UIDs of a mirrored mailbox (`None`: all of them, after a
    /// UIDVALIDITY change); the emails stay.
    async fn forget_upstream_uids(&self, mailbox: i64, uids: Option<&[i64]>) -> StoreResult<()>;

    /// The local account mirroring the JMAP upstream's account
    /// `upstream_id` and the upstream Email state its mirror is at (`None`
    /// until a first sync ended), if there is one (issue 19, migration 0310).
    async fn mirror_account(&self, upstream_id: &str)
    -> StoreResult<Option<(i64, Option<String>)>>;
    /// Records that `account` mirrors the upstream account `upstream_id`
    /// (nothing when it already mirrors one).
    async fn put_mirror_account(&self, account: i64, upstream_id: &str) -> StoreResult<()>;
    /// Records the upstream Email state the account's mirror is now at.
    async fn set_mirror_state(&self, account: i64, state: &str) -> StoreResult<()>;
    /// `(local mailbox, upstream Mailbox id)` of the account's mirrored mailboxes.
    async fn mirror_mailboxes(&self, account: i64) -> StoreResult<Vec<(i64, String)>>;
    /// Records the upstream id of one of the account's mailboxes (nothing
    /// when the mailbox is not the account's).
    async fn put_mirror_mailbox(
        &self,
        account: i64,
        mailbox: i64,
        upstream_id: &str,
    ) -> StoreResult<()>;
    /// The account's mirrored emails: those with local ids among `local`,
    /// else those with upstream ids among `upstream`, else all of them.
    async fn mirror_emails(
        &self,
        account: i64,
        local: Option<&[i64]>,
        upstream: Option<&[&str]>,
    ) -> StoreResult<Vec<MirroredEmail>>;
    /// Records the upstream names of the account's emails (an email or an
    /// upstream id already mapped keeps its mapping).
    async fn put_mirror_emails(&self, account: i64, emails: &[MirroredEmail]) -> StoreResult<()>;
    /// The upstream Email ids of the account's mirrored emails in each of
    /// the upstream threadIds `threads` that has any: `(threadId, ids)`,
    /// each list by receivedAt then local id (RFC 8621 §3's order, ties as
    /// a standalone Fastview breaks them).
    async fn mirror_threads(
        &self,
        account: i64,
        threads: &[&str],
    ) -> StoreResult<Vec<(String, Vec<String>)>>;
    /// `(mapped, emails)`: how many of the account's emails have upstream
    /// names, and how many emails the account has; equal to the upstream's
    /// count when the mirror holds every upstream email, one for one.
    async fn mirror_census(&self, account: i64) -> StoreResult<(i64, i64)>;

    /// All mailboxes of the account with their counts, by id.
    async fn mailboxes(&self, account: i64) -> StoreResult<Vec<MailboxRow>>;
    /// Whether the mailbox exists in the account (one indexed lookup).
    async fn owns_mailbox(&self, account: i64, mailbox: i64) -> StoreResult<bool>;
    /// The account's mailbox with `role` (`inbox`, `sent`, …), if it has
    /// one: one row read, without the counts [`Store::mailboxes`] computes.
    async fn role_mailbox(&self, account: i64, role: &str) -> StoreResult<Option<i64>>;
    /// Creates a mailbox; returns its id.
    async fn create_mailbox(&self, account: i64, mailbox: &NewMailbox) -> StoreResult<i64>;
    /// Applies a patch to a mailbox.
    async fn update_mailbox(&self, account: i64, id: i64, patch: &MailboxPatch) -> StoreResult<()>;
    /// Destroys a mailbox. With `remove_emails`, emails only in this mailbox are
    /// destroyed; without it, a mailbox holding emails is `MailboxHasEmail`.
    /// A mailbox with child mailboxes is `MailboxHasChild`; one not in the
    /// account is `NotFound`.
    async fn destroy_mailbox(&self, account: i64, id: i64, remove_emails: bool) -> StoreResult<()>;

    /// Stores messages in one transaction, assigning threads; a message whose
    /// blob id is already in the account is reported as a duplicate.
    async fn insert_emails(&self, account: i64, emails: &[NewEmail]) -> StoreResult<Vec<Inserted>>;
    /// Metadata of the given emails that exist in the account, in no set order.
    async fn email_meta(&self, account: i64, ids: &[i64]) -> StoreResult<Vec<EmailMeta>>;
    /// The account's Email state (RFC 8620 §5.1 `state` of Email/get) and,
    /// unless it is `known`, [`Store::email_meta`] read with it in one
    /// snapshot of the database (the metadata read level of Email/get needs
    /// nothing else). `None` rows when the state is `known`: the caller
    /// holds the rows of that state, the metadata snapshots of
    /// [`crate::mail::load::EmailLoader`]. `NotFound` for no such account.
    async fn email_meta_unless_state(
        &self,
        account: i64,
        ids: &[i64],
        known: Option<i64>,
    ) -> StoreResult<(Option<Vec<EmailMeta>>, i64)>;
    /// Header blocks of the given emails (ids must belong to the account).
    async fn header_blocks(&self, account: i64, ids: &[i64]) -> StoreResult<Vec<(i64, Vec<u8>)>>;
    /// Projection rows of the given emails; missing rows are simply absent.
    async fn fast_views(&self, account: i64, ids: &[i64]) -> StoreResult<Vec<(i64, FastView)>>;
    /// Writes projection rows (insert or replace).
    async fn put_fast_views(&self, rows: &[(i64, FastView)]) -> StoreResult<()>;
    /// Ids of the account's emails whose indexed words satisfy `search`, in
    /// no set order (SQLite FTS5, PostgreSQL `tsvector` with a GIN index).
    async fn search_ids(&self, account: i64, search: &TextSearch) -> StoreResult<Vec<i64>>;
    /// One page of the account's emails that satisfy `search` (and are in
    /// `mailbox`, when given), by receivedAt then id (newest first with
    /// `descending`), from `position` (0-based, not negative), at most
    /// `limit`; with the number of all of them. The list view of a search.
    async fn search_page(
        &self,
        account: i64,
        search: &TextSearch,
        mailbox: Option<i64>,
        descending: bool,
        position: i64,
        limit: i64,
    ) -> StoreResult<(Vec<i64>, i64)>;
    /// Writes the full-text index rows of emails that exist (replacing any).
    async fn put_search_texts(&self, rows: &[(i64, SearchText)]) -> StoreResult<()>;
    /// Stored part trees (`crate::mail::structure`) of the given emails (ids
    /// must belong to the account); an email without one is absent.
    async fn body_structures(&self, account: i64, ids: &[i64]) -> StoreResult<Vec<(i64, Vec<u8>)>>;
    /// Writes part trees (insert or replace) of emails that still exist.
    async fn put_body_structures(&self, rows: &[(i64, Vec<u8>)]) -> StoreResult<()>;
    /// The stored part tree of an email of the account whose message is
    /// blob `blob_id` (any of them, when several share it); `None` when no
    /// email has it or none has a tree yet.
    async fn body_structure_of_blob(
        &self,
        account: i64,
        blob_id: &str,
    ) -> StoreResult<Option<(i64, Vec<u8>)>>;
    /// Deletes all projection rows of an account (or of every account); returns the count.
    async fn clear_fast_views(&self, account: Option<i64>) -> StoreResult<u64>;
    /// Ids and blob ids of emails with an id above `after_id`, ascending, at
    /// most `limit`, of one account or all; with `missing_fast_view_only`, only
    /// those without a projection row.
    async fn email_blobs(
        &self,
        account: Option<i64>,
        after_id: i64,
        limit: i64,
        missing_fast_view_only: bool,
    ) -> StoreResult<Vec<(i64, String)>>;

    /// Email ids of one mailbox sorted by receivedAt (then id), from the
    /// (mailbox, receivedAt) index without scanning the mailbox, with the total.
    async fn mailbox_emails_by_received(
        &self,
        mailbox: i64,
        descending: bool,
        position: i64,
        limit: i64,
    ) -> StoreResult<(Vec<(i64, i64)>, i64)>;
    /// The rows Email/query evaluates, of one mailbox or of the whole account.
    async fn query_rows(&self, account: i64, in_mailbox: Option<i64>)
    -> StoreResult<Vec<QueryRow>>;
    /// The rows Email/query evaluates of the given emails of the account
    /// (the candidates a full-text condition left).
    async fn query_rows_of(&self, account: i64, ids: &[i64]) -> StoreResult<Vec<QueryRow>>;
    /// Applies patch updates in one transaction, each to the email's values
    /// as they are inside it (after the earlier updates of the call), and
    /// reports each one's outcome in order; an update that is not
    /// [`UpdateOutcome::Updated`] changes nothing. States advance only if
    /// something changed.
    async fn update_emails(
        &self,
        account: i64,
        updates: &[EmailUpdate],
    ) -> StoreResult<Vec<UpdateOutcome>>;
    /// Destroys emails; returns the ids that existed and were destroyed.
    async fn destroy_emails(&self, account: i64, ids: &[i64]) -> StoreResult<Vec<i64>>;
    /// Email ids of the given threads, ordered by receivedAt then id.
    async fn thread_emails(
        &self,
        account: i64,
        thread_ids: &[i64],
    ) -> StoreResult<Vec<(i64, Vec<i64>)>>;

    /// The changes of one type since `since`, at most `max_changes` ids
    /// (RFC 8620 §5.2); `CannotCalculateChanges` when `since` is after the
    /// type's state or before the retained log, `NotFound` for no account.
    async fn changes(
        &self,
        account: i64,
        kind: ChangeType,
        since: LogPosition,
        max_changes: usize,
    ) -> StoreResult<Changes>;
    /// Drops the account's log rows up to and including `through_modseq`:
    /// changes from earlier states can no longer be calculated. Returns the
    /// number of rows dropped.
    async fn truncate_changes(&self, account: i64, through_modseq: i64) -> StoreResult<u64>;
    /// The 0-based index of each given email in the receivedAt listing of
    /// a mailbox ([`Store::mailbox_emails_by_received`] order); emails not
    /// in the mailbox are absent. Counted on the (mailbox, receivedAt) index.
    async fn mailbox_positions(
        &self,
        mailbox: i64,
        descending: bool,
        ids: &[i64],
    ) -> StoreResult<Vec<(i64, i64)>>;

    /// Records that the account may read a blob (an upload or a message),
    /// under the account's write lock: `NotFound` when the account no longer
    /// exists, `OverQuota` when a new grant of `size` octets would take it
    /// over its [`Quota`]. A grant already there changes nothing.
    async fn add_blob(&self, account: i64, blob_id: &str, size: i64) -> StoreResult<()>;
    /// Whether the account may read a message or uploaded blob.
    async fn has_blob(&self, account: i64, blob_id: &str) -> StoreResult<bool> {
        Ok(self.blob_size(account, blob_id).await?.is_some())
    }
    /// The size in octets of a message or uploaded blob the account may
    /// read, `None` when it may not.
    async fn blob_size(&self, account: i64, blob_id: &str) -> StoreResult<Option<i64>>;
    /// Which of `blob_ids` the account may read (one query).
    async fn held_blobs(&self, account: i64, blob_ids: &[String]) -> StoreResult<HashSet<String>>;
    /// Which of `blob_ids` an email or a grant of any account refers to (one query).
    async fn referenced_blobs(&self, blob_ids: &[String]) -> StoreResult<HashSet<String>>;
    /// Deletes the upload grants created before `created_before` (unix
    /// seconds) that no email of their account uses (RFC 8620 §6.1: an
    /// unused upload may be deleted); returns how many.
    async fn expire_uploads(&self, created_before: i64) -> StoreResult<u64>;
    /// Up to `limit` distinct blob ids that emails or grants refer to,
    /// above `after`, ascending (for `fastview fsck`).
    async fn referenced_blob_page(&self, after: &str, limit: i64) -> StoreResult<Vec<String>>;

    /// Up to `limit` raw rows of `table` after `after`, in key order
    /// (`account` selects the account of per-account tables; ignored for
    /// accounts and emails), for copying the store ([`raw`]).
    async fn export_raw(
        &self,
        table: raw::RawTable,
        account: i64,
        after: &raw::RawCursor,
        limit: i64,
    ) -> StoreResult<raw::RawRows>;
    /// Writes raw rows as they are, ids and counters included, in one
    /// transaction, skipping rows already there; returns how many were new.
    async fn import_raw(&self, rows: &raw::RawRows) -> StoreResult<u64>;
    /// Row counts of one account's tables, or of the whole store.
    async fn raw_counts(&self, account: Option<i64>) -> StoreResult<raw::RowCounts>;
}

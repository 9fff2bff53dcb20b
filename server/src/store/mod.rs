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
//! change, so [`ChangeLog::changes`] answers Foo/changes (RFC 8620 §5.2) from any
//! state since the log began ([`LogPosition`]), collapsing what happened in
//! between ([`Changes`]). A write that changes nothing advances nothing.

mod accounts;
mod blobs;
pub mod change_log;
mod columns;
pub mod dialect;
mod emails;
mod hot_read;
mod identity;
pub mod insert_plan;
mod mailboxes;
mod maintenance;
pub mod postgres;
mod proxy;
pub mod raw;
mod search;
pub mod sql;
pub mod sqlite;
mod submission;

use std::collections::HashMap;

pub use accounts::Accounts;
pub use blobs::Blobs;
use change_log::ChangeSet;
pub use change_log::{ChangeKind, ChangeLog, ChangeType, Changes, LogPosition};
pub use emails::Emails;
pub use identity::Identities;
pub use mailboxes::Mailboxes;
pub use maintenance::Maintenance;
pub use proxy::{ImapProxyStore, JmapProxyStore, ProxyStore};
pub use search::Search;
pub use submission::Submissions;

/// The store's traits in scope for their methods, unnamed (so no name
/// clashes), for code that calls a concrete store (`SqliteStore`,
/// `PostgresStore`): `use crate::store::prelude::*;`.
pub mod prelude {
    pub use super::{
        Accounts as _, Blobs as _, ChangeLog as _, Emails as _, Identities as _,
        ImapProxyStore as _, JmapProxyStore as _, Mailboxes as _, Maintenance as _, Search as _,
        Submissions as _,
    };
}

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

/// The `sortOrder` of a folder (no role) that `fastview import` makes.
pub const FOLDER_SORT_ORDER: i64 = 10;

/// The `sortOrder` (RFC 8621 §2) a standalone Fastview gives a mailbox it
/// makes of its own accord: a role of [`ROLE_MAILBOXES`] its place there
/// from 1 (INBOX first, as a new account has them), another role the next
/// after those, a folder [`FOLDER_SORT_ORDER`]; so roles sort first. The
/// IMAP proxy gives the mailboxes it mirrors the same.
pub fn default_sort_order(role: Option<&str>) -> i64 {
    let Some(role) = role else {
        return FOLDER_SORT_ORDER;
    };
    let place = ROLE_MAILBOXES
        .iter()
        .position(|(known, _)| *known == role)
        .unwrap_or(ROLE_MAILBOXES.len());
    place as i64 + 1
}

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
    /// ([`Submissions::create_submission`], [`SendLimits`]); nothing was written.
    #[error("the account's hourly send limit is reached: {0:?}")]
    SendLimit(SendLimitHit),
    /// The database failed.
    #[error("database error: {0}")]
    Database(sqlx::Error),
    /// Applying migrations failed.
    #[error("migration error: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// [`ChangeLog::changes`] from a position that is not a valid past state:
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

/// A new API token of an account ([`Accounts::create_token`]): the SHA-256
/// (hex) of its secret, its name, and when it was made and expires (Unix
/// seconds; `None` never expires).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewToken<'a> {
    pub secret_sha256: &'a str,
    pub name: &'a str,
    pub created_at: i64,
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

impl From<[i64; 6]> for States {
    /// The counters in the order of their `accounts` columns: Email,
    /// Mailbox, Thread, Identity, VacationResponse, EmailSubmission.
    fn from(counters: [i64; 6]) -> Self {
        let [
            email,
            mailbox,
            thread,
            identity,
            vacation_response,
            email_submission,
        ] = counters;
        Self {
            email,
            mailbox,
            thread,
            identity,
            vacation_response,
            email_submission,
        }
    }
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

/// A mailbox without its counts (RFC 8621 §2): its place in the tree, its
/// name, role, sort order and subscription, read without counting the
/// account's emails ([`Mailboxes::mailbox_nodes`]).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct MailboxNode {
    pub id: i64,
    pub parent_id: Option<i64>,
    pub name: String,
    /// RFC 8457 / IANA role name, lowercase (`inbox`, `sent`, …).
    pub role: Option<String>,
    pub sort_order: i64,
    pub is_subscribed: bool,
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

/// What [`Emails::update_emails`] did with one [`EmailUpdate`].
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

/// The storage operations Fastview needs, implemented once per database
/// ([`sql::SqlStore`]), one trait a concern. An `Arc<dyn Store>` answers
/// every method as it is; code holding a concrete store brings the traits
/// in scope with `use crate::store::prelude::*`.
/// Every method that takes an `account` touches only that account's rows.
/// Batched methods take id lists and run a fixed number of queries, never one per id.
pub trait Store:
    Accounts
    + Mailboxes
    + Emails
    + Search
    + ChangeLog
    + Blobs
    + Identities
    + Submissions
    + Maintenance
    + ProxyStore
{
}

impl<
    T: Accounts
        + Mailboxes
        + Emails
        + Search
        + ChangeLog
        + Blobs
        + Identities
        + Submissions
        + Maintenance
        + ProxyStore
        + ?Sized,
> Store for T
{
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_sort_first_inbox_first_then_folders() {
        let orders: Vec<i64> = [
            Some("inbox"),
            Some("drafts"),
            Some("archive"),
            Some("all"),
            None,
        ]
        .into_iter()
        .map(default_sort_order)
        .collect();
        assert_eq!(orders, [1, 2, 6, 7, 10]);
    }
}

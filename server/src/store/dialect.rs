//! The seam between the one store ([`SqlStore`](super::sql::SqlStore)) and
//! the two databases: only what really differs between SQLite and
//! PostgreSQL.
//!
//! - **Id and text lists.** A batched read binds a whole list as one value:
//!   a JSON array expanded with `json_each` on SQLite, a `bigint[]` / `text[]`
//!   matched with `= any($n)` on PostgreSQL. [`Dialect::Ids`] and
//!   [`Dialect::Texts`] are those values; [`Dialect::IdArray`] is the
//!   aggregate a read returns for "the mailbox ids of this email"
//!   (`group_concat` text on SQLite, `array(…)` on PostgreSQL).
//! - **SQL text where it differs** ([`Statements`]): statements over those
//!   lists, the hot-path reads that keep their own SQL per database (and
//!   their EXPLAIN tests), id allocation, sequence bumps, logins compared
//!   case-insensitively.
//! - **Locking**: [`Dialect::BEGIN_WRITE`] (SQLite's single writer takes its
//!   lock at `BEGIN IMMEDIATE`) and the account-row lock of
//!   [`Statements::lock_account`] (PostgreSQL `FOR NO KEY UPDATE`).
//! - **Hot reads**: [`Dialect::Hot`], the few reads SQLite answers on the
//!   calling thread before the pool ([`HotReads`]); PostgreSQL has none.
//! - **What text can hold**: PostgreSQL `text` cannot hold NUL and its btree
//!   keys have a size limit ([`Dialect::text`], [`Dialect::ref_key`]).
//!
//! Placeholders are `$N` in both: sqlx-sqlite binds `$N` as argument N.

use std::borrow::Cow;

use sqlx::{Database, Decode, Encode, Type};

use super::{Account, MirroredEmail};

/// A Rust type that binds to and decodes from a column of `DB` (a bound
/// bundle, so the store's `where` clauses stay short).
pub trait Column<DB: Database>:
    for<'q> Encode<'q, DB> + for<'r> Decode<'r, DB> + Type<DB> + Send + Sync + Unpin
{
}

impl<DB: Database, T> Column<DB> for T where
    T: for<'q> Encode<'q, DB> + for<'r> Decode<'r, DB> + Type<DB> + Send + Sync + Unpin
{
}

/// What differs between the two databases. Implemented by
/// [`SqliteDialect`](super::sqlite::SqliteDialect) and
/// [`PostgresDialect`](super::postgres::PostgresDialect); everything else
/// about storage is written once in [`SqlStore`](super::sql::SqlStore).
pub trait Dialect: Send + Sync + Sized + 'static {
    /// The sqlx driver.
    type Db: Database;
    /// An id list bound as one value (see the module doc).
    type Ids: for<'q> Encode<'q, Self::Db> + Type<Self::Db> + Send;
    /// A text list bound as one value.
    type Texts: for<'q> Encode<'q, Self::Db> + Type<Self::Db> + Send;
    /// The mailbox-ids aggregate column of [`Statements::email_meta`],
    /// [`Statements::email_lists`] and [`Statements::query_rows`].
    type IdArray: Column<Self::Db>;
    /// The reads tried on the calling thread before the pool ([`HotReads`]).
    type Hot: HotReads;

    /// The statements whose text differs.
    const SQL: Statements;
    /// The statement that opens a write transaction (`None`: plain `BEGIN`).
    const BEGIN_WRITE: Option<&'static str>;
    /// Written between the column list and `VALUES` of an insert with
    /// explicit ids (PostgreSQL identity columns: `OVERRIDING SYSTEM VALUE`).
    const OVERRIDING: &'static str;
    /// The statement that refreshes the planner's statistics after a bulk
    /// load (`None`: nothing to do).
    const ANALYZE: Option<&'static str>;
    /// Run before a full-text read that visits every match
    /// ([`Statements::search_count`], [`Statements::search_ids`]), in one
    /// transaction with it (`None`: the read runs alone).
    const FULL_TEXT_SETUP: Option<&'static str>;

    /// An id list as bound (duplicates removed: reads join on it).
    fn ids(ids: &[i64]) -> Self::Ids;
    /// A text list as bound.
    fn texts(values: &[&str]) -> Self::Texts;
    /// The rows a statement wrote.
    fn rows_affected(result: &<Self::Db as Database>::QueryResult) -> u64;
    /// The ids of an [`Dialect::IdArray`], ascending.
    fn id_array(column: Self::IdArray) -> Vec<i64>;
    /// A message-derived string as the database's `text` can hold it.
    fn text(value: &str) -> Cow<'_, str>;
    /// The `thread_refs` key of a message id.
    fn ref_key(message_id: &str) -> String;
    /// A full-text condition in the database's query language: an FTS5
    /// MATCH expression, a PostgreSQL `tsquery`. The words are folded
    /// letters and digits (`crate::mail::search`), so no quoting can break.
    fn search_query(search: &crate::store::TextSearch) -> String;
    /// The two values a full-text row binds after its ids, from the words
    /// of the headers and of the body ([`Statements::search_insert_head`]).
    fn search_columns(text: &crate::store::SearchText) -> (String, String);
}

/// The reads a dialect can answer on the calling thread before the pool
/// (issue 20: SQLite's `HotReader`, `hot_read.rs`). Each takes the
/// statement the pool would run, where the store has it, and gives `None`
/// when it cannot read now: then the pool runs it. Without a hot form
/// (PostgreSQL, `()`), every one is `None`.
pub trait HotReads: Send + Sync + 'static {
    /// [`Statements::account_by_email`] of `email` (`Some(None)`: no such login).
    fn account_by_email(&self, _sql: &str, _email: &str) -> Option<Option<Account>> {
        None
    }
    /// An account's six states by `sql` (`$1` the account; `Some(None)`: no
    /// such account).
    fn states(&self, _sql: &str, _account: i64) -> Option<Option<[i64; 6]>> {
        None
    }
    /// Whether the account has the mailbox, by `sql` (`$1` mailbox, `$2` account).
    fn owns_mailbox(&self, _sql: &str, _account: i64, _mailbox: i64) -> Option<bool> {
        None
    }
    /// Email/get's one statement, [`Statements::email_meta_unless_state`]'s
    /// row (`Some(None)`: no such account).
    fn email_meta_unless_state(
        &self,
        _sql: &str,
        _account: i64,
        _ids: &[i64],
        _known: Option<i64>,
    ) -> Option<Option<(i64, Option<String>)>> {
        None
    }
    /// A page of a mailbox's listing by `sql` ([`Statements::listing_desc`]
    /// or `listing_asc`) and the mailbox's count.
    fn mailbox_page(
        &self,
        _sql: &str,
        _mailbox: i64,
        _position: i64,
        _limit: i64,
    ) -> Option<(Vec<(i64, i64)>, i64)> {
        None
    }
    /// The JMAP mirror's names of the account's emails with local ids among
    /// `local`, else with upstream ids among `upstream`, by the dialect's
    /// `statements` (`mirror_emails_by_local`, `mirror_emails_by_upstream`).
    fn mirror_emails(
        &self,
        _statements: &Statements,
        _account: i64,
        _local: Option<&[i64]>,
        _upstream: Option<&[&str]>,
    ) -> Option<Vec<MirroredEmail>> {
        None
    }
}

/// No hot reads: the pool reads everything.
impl HotReads for () {}

/// The SQL text of the statements that differ between the databases.
/// `list($n)` below means "`$n` is one of the dialect's bound lists".
#[derive(Debug, Clone, Copy)]
pub struct Statements {
    /// `$1` account → its id, locking the row against other writers of the
    /// account until commit where the database needs it.
    pub lock_account: &'static str,
    /// `$1` login → (id, email, password_hash), case-insensitively.
    pub account_by_email: &'static str,
    /// `$1` login, `$2` hash.
    pub set_password: &'static str,
    /// `$1` login → id, locked for deletion.
    pub account_to_remove: &'static str,
    /// `$1` count → that many new email ids, ascending, never used before.
    pub next_email_ids: &'static str,
    /// `$1` account, `$2` list of mailbox ids → those the account owns.
    pub owned_mailboxes: &'static str,
    /// `$1` account, `$2` list of blob ids → (blob_id, id) of its emails.
    pub stored_blobs: &'static str,
    /// `$1` mailbox, `$2` list of UIDs: deletes those `upstream_messages` rows.
    pub forget_upstream_uids: &'static str,
    /// `$1` mailbox, `$2` list of UIDs → (uid, email_id, keywords) of those
    /// mapped, by UID.
    pub upstream_uids_among: &'static str,
    /// `$1` text list of blob ids: deletes their `upstream_evicted` rows.
    pub unmark_evicted: &'static str,
    /// `$1` text list of blob ids → those in `upstream_evicted`.
    pub evicted_among: &'static str,
    /// `$1` account, `$2` list of email ids → (email_id, mailbox_id, uid,
    /// keywords) of their upstream copies, by mailbox then UID.
    pub upstream_locations: &'static str,
    /// `$1` account, `$2` id list → (email_id, upstream_id, blob_id,
    /// thread_id) of those of its emails a JMAP mirror maps.
    pub mirror_emails_by_local: &'static str,
    /// `$1` account, `$2` text list of upstream Email ids → the same.
    pub mirror_emails_by_upstream: &'static str,
    /// `$1` account, `$2` text list of upstream threadIds → (threadId,
    /// upstream Email id) of each mirrored email in them, by thread, then
    /// receivedAt, then local id.
    pub mirror_threads: &'static str,
    /// `$1` account, `$2` list of ref keys → (message_id, thread_id, base_subject).
    pub thread_refs: &'static str,
    /// `$1` account, `$2` thread list, `$3` email list → the threads that
    /// have an email outside `$3`.
    pub threads_with_others: &'static str,
    /// `$1` account, `$2` thread list → the threads that still have emails.
    pub threads_remaining: &'static str,
    /// `$1` account, `$2` list → (id, thread_id, received_at, keywords, IdArray).
    pub email_lists: &'static str,
    /// `$1` account, `$2` list → deleted (id, blob_id).
    pub delete_emails: &'static str,
    /// `$1` account, `$2` text list of blob ids: their grants deleted.
    pub delete_blob_grants: &'static str,
    /// `$1` text list of blob ids → those an email or a grant of any
    /// account, or a delivery not yet done, refers to (the garbage
    /// collector's check).
    pub referenced_blobs: &'static str,
    /// Which of the text list `$2` the account `$1` may read (its `account_blobs`).
    pub held_blobs: &'static str,
    /// `$1` list of email ids: their memberships deleted.
    pub delete_memberships: &'static str,
    /// `$1` list → the ids of those emails that exist, held against
    /// deletion until commit where the database needs it.
    pub live_emails: &'static str,
    /// Hot: `$1` account, `$2` list → (id, blob_id, thread_id, size,
    /// received_at, keywords, IdArray).
    pub email_meta: &'static str,
    /// Hot: `$1` account, `$2` list, `$3` a known Email state or NULL →
    /// one row (email_state, JSON array of `[id, blob_id, thread_id, size,
    /// received_at, keywords, "mailbox ids comma-separated" | null]`, or
    /// NULL when email_state is `$3`, the array not built): the metadata
    /// read level in one statement, one snapshot of the database.
    pub email_meta_unless_state: &'static str,
    /// Hot: `$1` account, `$2` list → (email_id, header_block).
    pub header_blocks: &'static str,
    /// Full-text index rows: `INSERT … (` before `VALUES ($1 email id, $2
    /// account, $3 receivedAt, $4 header words, $5 body words), …` and what
    /// follows them.
    pub search_insert_head: &'static str,
    pub search_insert_tail: &'static str,
    /// `$1` list → deletes those emails' full-text rows.
    pub search_delete: &'static str,
    /// `$1` account, `$2` the dialect's query ([`Dialect::search_query`]) →
    /// the matching email ids.
    pub search_ids: &'static str,
    /// No binds → whether emails are stored and none has index rows.
    pub search_index_unfilled: &'static str,
    /// Hot: `$1` account, `$2` the dialect's query, `$3` a mailbox or NULL,
    /// `$4` limit, `$5` offset → the email ids of one page of the matching
    /// emails (in the mailbox) by receivedAt, newest first / oldest first,
    /// then id in the same direction.
    pub search_page_desc: &'static str,
    pub search_page_asc: &'static str,
    /// Hot, where the index keeps its matches in receivedAt order (SQLite's
    /// search keys, migration 0305): `$1` account, `$2` query, `$3` mailbox
    /// or NULL, `$4`/`$5` the lowest/highest key, `$6` limit or -1 → (key,
    /// email id, received_at) of the matches, highest key first.
    /// `None`: pages are cut from every match ordered.
    pub search_walk: Option<&'static str>,
    /// `$1` account, `$2` query, `$3` mailbox or NULL → the number of matches.
    pub search_count: &'static str,
    /// `$1` list → (id, account_id, received_at) of those emails that exist.
    pub email_accounts: &'static str,
    /// Hot: `$1` account, `$2` list → (email_id, structure).
    pub body_structures: &'static str,
    /// Hot: `$1` account, `$2` list → (email_id, preview, has_attachment).
    pub fast_views: &'static str,
    /// Hot: `$1` mailbox, `$2` limit, `$3` offset → (email_id, thread_id),
    /// newest first / oldest first.
    pub listing_desc: &'static str,
    pub listing_asc: &'static str,
    /// `$1` mailbox, `$2` list → (email_id, 0-based position), newest first
    /// / oldest first.
    pub positions_desc: &'static str,
    pub positions_asc: &'static str,
    /// `$1` account → the Email/query columns of every email; with `$2`,
    /// of one mailbox's emails.
    pub query_rows: &'static str,
    pub query_rows_in_mailbox: &'static str,
    /// `$1` account, `$2` list → the Email/query columns of those emails.
    pub query_rows_of: &'static str,
    /// `$1` account, `$2` thread list → (thread_id, id) by thread, receivedAt, id.
    pub thread_emails: &'static str,
    /// (table, statement): run after a raw import into that table, so new
    /// rows get ids above the imported ones (never moving an id source back).
    pub after_raw_import: &'static [(&'static str, &'static str)],
}

/// The Email/query columns of [`Statements::query_rows`], given the
/// dialect's mailbox-ids aggregate of email `e`.
macro_rules! query_columns {
    ($($mailbox_ids:tt)*) => {
        concat!(
            "SELECT e.id, e.blob_id, e.thread_id, e.size, e.received_at, e.keywords, ",
            $($mailbox_ids)*,
            ", e.sent_at, e.message_id, e.base_subject, e.subject, e.from_sort, e.to_sort, \
             e.from_text, e.to_text, e.cc_text, e.bcc_text, e.has_attachment FROM emails e "
        )
    };
}
pub(super) use query_columns;

/// The 0-based position of each listed email (`$2`) in mailbox `$1`'s
/// receivedAt order (`>`: newest first), given the dialect's list match.
macro_rules! positions {
    ($compare:literal, $($in_list:tt)*) => {
        concat!(
            "SELECT t.email_id, (SELECT count(*) FROM email_mailboxes o WHERE o.mailbox_id = $1 \
             AND (o.received_at, o.email_id) ",
            $compare,
            " (t.received_at, t.email_id)) \
             FROM email_mailboxes t WHERE t.mailbox_id = $1 AND t.email_id ",
            $($in_list)*
        )
    };
}
pub(super) use positions;

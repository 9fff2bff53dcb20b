//! Raw rows of every table, for copying a store into another with the same
//! ids (`fastview migrate-store`): [`Maintenance::export_raw`](super::Maintenance::export_raw)
//! pages through one table in key order, [`Maintenance::import_raw`](super::Maintenance::import_raw)
//! writes rows as they are (ids, counters and all), skipping rows that are
//! already there, so an interrupted copy can simply be run again.
//!
//! Rows are copied column for column, with no state advance and no change-log
//! row: the target ends up in the source's state, with the same state strings.

use super::columns::keywords_to_column;
use super::{FastView, NewEmail, SearchText};

/// A table (or group of tables) to copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawTable {
    /// `accounts`, with password hashes, state counters and `changes_from`.
    Accounts,
    /// `mailboxes` of one account.
    Mailboxes,
    /// `emails` of every account with their `email_mailboxes`,
    /// `email_headers` and `fast_view` rows.
    Emails,
    /// `thread_refs` of one account.
    ThreadRefs,
    /// `account_blobs` of one account.
    AccountBlobs,
    /// `changes` (the change log) of one account.
    Changes,
}

/// Where an export page starts: strictly after this key, in the exporting
/// store's own order. [`RawCursor::default`] is before every row.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawCursor {
    /// The id (accounts, mailboxes, emails), the thread id (thread refs) or
    /// the change type (changes).
    pub number: i64,
    /// The modseq (changes).
    pub modseq: i64,
    /// The object id (changes).
    pub object: i64,
    /// The message id (thread refs) or blob id (account blobs).
    pub text: String,
}

/// One `accounts` row.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct AccountRecord {
    pub id: i64,
    pub email: String,
    /// PHC-format argon2 hash, copied as is.
    pub password_hash: String,
    pub modseq: i64,
    pub email_state: i64,
    pub mailbox_state: i64,
    pub thread_state: i64,
    /// The oldest modseq from which changes can be calculated.
    pub changes_from: i64,
    /// The account's quota in octets; `None` for no limit.
    pub quota_octets: Option<i64>,
}

/// One `mailboxes` row.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct MailboxRecord {
    pub id: i64,
    pub account_id: i64,
    pub parent_id: Option<i64>,
    pub name: String,
    pub role: Option<String>,
    pub sort_order: i64,
    pub is_subscribed: bool,
}

/// One `emails` row with its memberships, header block and projection row.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct EmailRecord {
    pub id: i64,
    pub account_id: i64,
    pub blob_id: String,
    pub thread_id: i64,
    pub size: i64,
    pub received_at: i64,
    pub sent_at: Option<i64>,
    /// The column as stored: sorted lowercase keywords separated by spaces.
    pub keywords: String,
    pub message_id: Option<String>,
    pub base_subject: String,
    pub subject: String,
    pub from_sort: String,
    pub to_sort: String,
    pub from_text: String,
    pub to_text: String,
    pub cc_text: String,
    pub bcc_text: String,
    pub has_attachment: bool,
    /// `email_mailboxes` rows: `(mailbox_id, received_at)`, by mailbox id.
    #[sqlx(skip)]
    pub memberships: Vec<(i64, i64)>,
    /// The `email_headers` row, when there is one.
    #[sqlx(skip)]
    pub header_block: Option<Vec<u8>>,
    /// The `fast_view` row, when there is one.
    #[sqlx(skip)]
    pub fast_view: Option<FastView>,
    /// The `body_structure` row, when there is one.
    #[sqlx(skip)]
    pub structure: Option<Vec<u8>>,
    /// The full-text words, when known: at ingest. An export has none (the
    /// index keeps no text back); `fastview reproject` indexes such emails.
    #[sqlx(skip)]
    pub search: Option<SearchText>,
}

impl EmailRecord {
    /// The rows of a new email `id` in `thread_id` of `account`.
    pub fn new(account_id: i64, id: i64, thread_id: i64, email: &NewEmail) -> Self {
        let index = email.index.clone();
        let mut mailbox_ids = email.mailbox_ids.clone();
        mailbox_ids.sort_unstable();
        mailbox_ids.dedup();
        Self {
            id,
            account_id,
            blob_id: email.blob_id.clone(),
            thread_id,
            size: email.size,
            received_at: email.received_at,
            sent_at: email.sent_at,
            keywords: keywords_to_column(&email.keywords),
            message_id: index.message_id,
            base_subject: index.base_subject,
            subject: index.subject,
            from_sort: index.from_sort,
            to_sort: index.to_sort,
            from_text: index.from_text,
            to_text: index.to_text,
            cc_text: index.cc_text,
            bcc_text: index.bcc_text,
            has_attachment: index.has_attachment,
            memberships: mailbox_ids
                .into_iter()
                .map(|mailbox| (mailbox, email.received_at))
                .collect(),
            header_block: Some(email.header_block.clone()),
            fast_view: Some(email.fast_view.clone()),
            structure: Some(email.structure.clone()),
            search: Some(email.search.clone()),
        }
    }
}

/// One `thread_refs` row (of the account the export was for).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ThreadRefRecord {
    pub message_id: String,
    pub thread_id: i64,
    pub base_subject: String,
}

/// One `account_blobs` row (of the account the export was for).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct BlobRecord {
    pub blob_id: String,
    pub size: i64,
    /// Unix seconds.
    pub created_at: i64,
}

/// One `changes` row (of the account the export was for).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ChangeRecord {
    /// 1 Email, 2 Mailbox, 3 Thread (column `type`).
    #[sqlx(rename = "type", try_from = "i16")]
    pub kind_of_object: i64,
    pub modseq: i64,
    pub object_id: i64,
    /// 0 created, 1 updated, 2 destroyed.
    #[sqlx(try_from = "i16")]
    pub kind: i64,
    pub counts_only: bool,
}

/// A page of rows of one [`RawTable`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawRows {
    Accounts(Vec<AccountRecord>),
    Mailboxes(Vec<MailboxRecord>),
    Emails(Vec<EmailRecord>),
    /// Thread refs of the account `.0`.
    ThreadRefs(i64, Vec<ThreadRefRecord>),
    /// Blob grants of the account `.0`.
    AccountBlobs(i64, Vec<BlobRecord>),
    /// Change-log rows of the account `.0`.
    Changes(i64, Vec<ChangeRecord>),
}

impl RawRows {
    /// The number of rows (an email with its memberships counts once).
    pub fn len(&self) -> usize {
        match self {
            Self::Accounts(rows) => rows.len(),
            Self::Mailboxes(rows) => rows.len(),
            Self::Emails(rows) => rows.len(),
            Self::ThreadRefs(_, rows) => rows.len(),
            Self::AccountBlobs(_, rows) => rows.len(),
            Self::Changes(_, rows) => rows.len(),
        }
    }

    /// Whether the page is empty (the export is done).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The cursor just past the last row, for the next page; `None` when empty.
    pub fn cursor(&self) -> Option<RawCursor> {
        let id = |id: i64| RawCursor {
            number: id,
            ..RawCursor::default()
        };
        match self {
            Self::Accounts(rows) => rows.last().map(|r| id(r.id)),
            Self::Mailboxes(rows) => rows.last().map(|r| id(r.id)),
            Self::Emails(rows) => rows.last().map(|r| id(r.id)),
            Self::ThreadRefs(_, rows) => rows.last().map(|r| RawCursor {
                number: r.thread_id,
                text: r.message_id.clone(),
                ..RawCursor::default()
            }),
            Self::AccountBlobs(_, rows) => rows.last().map(|r| RawCursor {
                text: r.blob_id.clone(),
                ..RawCursor::default()
            }),
            Self::Changes(_, rows) => rows.last().map(|r| RawCursor {
                number: r.kind_of_object,
                modseq: r.modseq,
                object: r.object_id,
                text: String::new(),
            }),
        }
    }
}

/// Row counts of one account's tables (or of the whole store), to see what
/// a copy still has to do and to check it when it is done.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, sqlx::FromRow)]
pub struct RowCounts {
    pub accounts: i64,
    pub mailboxes: i64,
    pub emails: i64,
    /// `email_mailboxes` rows.
    pub memberships: i64,
    pub headers: i64,
    pub fast_views: i64,
    /// `body_structure` rows.
    pub structures: i64,
    pub thread_refs: i64,
    pub account_blobs: i64,
    pub changes: i64,
    /// The highest email id (0 when there is none).
    pub max_email_id: i64,
}

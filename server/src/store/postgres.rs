//! The PostgreSQL implementation of [`Store`]: selected by a `postgres://`
//! (or `postgresql://`) database URL, with the same semantics as
//! [`SqliteStore`](super::sqlite::SqliteStore) and its own migrations in
//! `migrations/postgres`.
//!
//! - Batched reads bind an id list as one `bigint[]` and match it with
//!   `= any($n)`: one static, prepared statement whatever the number of ids.
//! - Batched writes bind one array per column and insert with `unnest`, so
//!   storing a batch of messages is a fixed number of statements. Email ids
//!   of a batch are drawn from the identity sequence first, which lets
//!   threading (a new thread's id is its first message's id) be decided in
//!   memory in batch order, exactly as SQLite decides it row by row.
//! - Every write transaction of an account starts by locking the account row
//!   (`SELECT … FOR NO KEY UPDATE`): writers of one account serialize, so
//!   state counters, duplicate checks and threading see each other's rows;
//!   writers of different accounts run in parallel. The lock does not block
//!   the foreign-key checks of other inserts (they take `KEY SHARE`).
//! - PostgreSQL `text` cannot hold NUL; the message-derived strings (subject,
//!   addresses, message ids, preview) are stored without NUL characters, and
//!   message ids longer than [`MAX_REF_KEY`] bytes are stored as a SHA-256
//!   digest in `thread_refs` (a btree key has a size limit), which matches
//!   exactly when the ids are equal.
//! - Covering indexes (see the migration) make the `inMailbox` + receivedAt
//!   listing and the projection read index-only scans;
//!   [`PostgresStore::mailbox_listing_plan`] and
//!   [`PostgresStore::fast_view_plan`] expose their plans to tests.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::str::FromStr;

use async_trait::async_trait;
use sha2::{Digest, Sha256};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgRow};
use sqlx::{Postgres, Row, Transaction};

use super::insert_plan::{self, ThreadRef};
use super::sqlite::ROLE_MAILBOXES;
use super::{
    Account, ChangeCollector, ChangeKind, ChangeSet, ChangeType, Changes, EmailIndex, EmailLists,
    EmailMeta, EmailUpdate, Inserted, LOG_BATCH, LogPosition, LogRow, MailboxPatch, MailboxRow,
    NewEmail, NewMailbox, QueryRow, States, Store, StoreError, StoreResult, UpdateOutcome,
};
use crate::mail::fast_view::FastView;

/// Message ids longer than this (in bytes) are keyed by their SHA-256 digest
/// in `thread_refs`.
pub const MAX_REF_KEY: usize = 512;

/// The listing of one mailbox by receivedAt: the page is cut from the
/// (mailbox_id, received_at, email_id) primary key alone, then joined to the
/// emails primary key (which INCLUDEs thread_id) for the page rows only.
macro_rules! listing_sql {
    ($direction:literal) => {
        concat!(
            "SELECT p.email_id, e.thread_id FROM \
             (SELECT email_id, received_at FROM email_mailboxes WHERE mailbox_id = $1 \
              ORDER BY received_at ",
            $direction,
            ", email_id ",
            $direction,
            " LIMIT $2 OFFSET $3) p \
             JOIN emails e ON e.id = p.email_id \
             ORDER BY p.received_at ",
            $direction,
            ", p.email_id ",
            $direction
        )
    };
}

/// The projection read of [`Store::fast_views`].
macro_rules! fast_views_sql {
    () => {
        "SELECT f.email_id, f.preview, f.has_attachment FROM fast_view f \
         JOIN emails e ON e.id = f.email_id \
         WHERE e.account_id = $1 AND f.email_id = any($2)"
    };
}

/// PostgreSQL-backed [`Store`].
#[derive(Clone)]
pub struct PostgresStore {
    pool: PgPool,
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://user@host/db`) with a
    /// pool of at most `max_connections`, and applies the migrations in
    /// `migrations/postgres`.
    pub async fn connect(url: &str, max_connections: u32) -> StoreResult<Self> {
        let options = PgConnectOptions::from_str(url)?.application_name("fastview");
        let pool = PgPoolOptions::new()
            .max_connections(max_connections.max(1))
            .connect_with(options)
            .await?;
        sqlx::migrate!("../migrations/postgres").run(&pool).await?;
        Ok(Self { pool })
    }

    /// The plan PostgreSQL chooses for the `inMailbox` + receivedAt listing
    /// (newest first, the SQL of [`Store::mailbox_emails_by_received`]) of
    /// `mailbox`, one line per plan line (for the test that proves it is
    /// served by index-only scans).
    pub async fn mailbox_listing_plan(
        &self,
        mailbox: i64,
        position: i64,
        limit: i64,
    ) -> StoreResult<Vec<String>> {
        let rows = sqlx::query(concat!("EXPLAIN ", listing_sql!("DESC")))
            .bind(mailbox)
            .bind(limit)
            .bind(position)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.iter().map(|row| row.get::<String, _>(0)).collect())
    }

    /// The plan PostgreSQL chooses for the projection read of
    /// [`Store::fast_views`], one line per plan line.
    pub async fn fast_view_plan(&self, account: i64, ids: &[i64]) -> StoreResult<Vec<String>> {
        let rows = sqlx::query(concat!("EXPLAIN ", fast_views_sql!()))
            .bind(account)
            .bind(ids)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.iter().map(|row| row.get::<String, _>(0)).collect())
    }

    async fn write(&self) -> StoreResult<Transaction<'static, Postgres>> {
        Ok(self.pool.begin().await?)
    }
}

/// A message-derived string as PostgreSQL `text` can hold it: without NUL.
fn text(value: &str) -> Cow<'_, str> {
    if value.contains('\0') {
        Cow::Owned(value.replace('\0', ""))
    } else {
        Cow::Borrowed(value)
    }
}

/// The `thread_refs` key of a message id: the id itself, or a digest when it
/// is too long for a btree key.
fn ref_key(message_id: &str) -> String {
    let clean = text(message_id);
    if clean.len() <= MAX_REF_KEY {
        return clean.into_owned();
    }
    let digest = Sha256::digest(clean.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

fn keywords_to_column(keywords: &[String]) -> String {
    let mut keywords: Vec<String> = keywords.iter().map(|k| k.to_ascii_lowercase()).collect();
    keywords.sort();
    keywords.dedup();
    keywords.join(" ")
}

fn keywords_from_column(column: &str) -> Vec<String> {
    column.split_whitespace().map(str::to_string).collect()
}

fn distinct(ids: &[i64]) -> Vec<i64> {
    let mut ids = ids.to_vec();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// Reads an [`EmailMeta`] from the first seven columns of a row:
/// id, blob_id, thread_id, size, received_at, keywords, mailbox ids (sorted array).
fn meta_from_row(row: &PgRow) -> EmailMeta {
    EmailMeta {
        id: row.get(0),
        blob_id: row.get(1),
        thread_id: row.get(2),
        size: row.get(3),
        received_at: row.get(4),
        keywords: keywords_from_column(row.get::<&str, _>(5)),
        mailbox_ids: row.get(6),
    }
}

/// Locks the account row for the rest of the transaction, so writers of one
/// account serialize. False when there is no such account.
async fn lock_account(tx: &mut Transaction<'static, Postgres>, account: i64) -> StoreResult<bool> {
    let found: Option<i64> =
        sqlx::query_scalar("SELECT id FROM accounts WHERE id = $1 FOR NO KEY UPDATE")
            .bind(account)
            .fetch_optional(&mut **tx)
            .await?;
    Ok(found.is_some())
}

/// [`lock_account`], `NotFound` when there is no such account.
async fn lock_existing_account(
    tx: &mut Transaction<'static, Postgres>,
    account: i64,
) -> StoreResult<()> {
    if lock_account(tx, account).await? {
        Ok(())
    } else {
        Err(StoreError::NotFound)
    }
}

/// Advances the account's modseq and the states of the types the write
/// changed, and appends its rows to the change log at the new modseq.
/// Nothing when the write changed nothing.
async fn record(
    tx: &mut Transaction<'static, Postgres>,
    account: i64,
    set: &ChangeSet,
) -> StoreResult<()> {
    if set.is_empty() {
        return Ok(());
    }
    let modseq: i64 = sqlx::query_scalar(
        "UPDATE accounts SET modseq = modseq + 1, \
         email_state = CASE WHEN $2 THEN modseq + 1 ELSE email_state END, \
         mailbox_state = CASE WHEN $3 THEN modseq + 1 ELSE mailbox_state END, \
         thread_state = CASE WHEN $4 THEN modseq + 1 ELSE thread_state END \
         WHERE id = $1 RETURNING modseq",
    )
    .bind(account)
    .bind(set.touches(ChangeType::Email))
    .bind(set.touches(ChangeType::Mailbox))
    .bind(set.touches(ChangeType::Thread))
    .fetch_one(&mut **tx)
    .await?;
    let (mut types, mut objects, mut kinds, mut counts) = (vec![], vec![], vec![], vec![]);
    for (kind_of, object, kind, counts_only) in set.rows() {
        types.push(kind_of);
        objects.push(object);
        kinds.push(kind);
        counts.push(counts_only);
    }
    if !objects.is_empty() {
        sqlx::query(
            "INSERT INTO changes (account_id, type, modseq, object_id, kind, counts_only) \
             SELECT $1, u.type, $2, u.object_id, u.kind, u.counts_only \
             FROM unnest($3::smallint[], $4::bigint[], $5::smallint[], $6::boolean[]) \
               AS u(type, object_id, kind, counts_only)",
        )
        .bind(account)
        .bind(modseq)
        .bind(&types)
        .bind(&objects)
        .bind(&kinds)
        .bind(&counts)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

async fn check_mailboxes_owned(
    tx: &mut Transaction<'static, Postgres>,
    account: i64,
    mailbox_ids: &[i64],
) -> StoreResult<()> {
    let distinct = distinct(mailbox_ids);
    if distinct.is_empty() {
        return Ok(());
    }
    let owned: i64 =
        sqlx::query_scalar("SELECT count(*) FROM mailboxes WHERE account_id = $1 AND id = any($2)")
            .bind(account)
            .bind(&distinct)
            .fetch_one(&mut **tx)
            .await?;
    if owned as usize != distinct.len() {
        return Err(StoreError::NotFound);
    }
    Ok(())
}

/// Deletes emails of the account and their blob grants, recording the
/// emails, their mailboxes' counts and their threads in `set`.
async fn delete_emails(
    tx: &mut Transaction<'static, Postgres>,
    account: i64,
    ids: &[i64],
    set: &mut ChangeSet,
) -> StoreResult<Vec<i64>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let before: Vec<(i64, i64, Vec<i64>)> = sqlx::query_as(
        "SELECT e.id, e.thread_id, \
           array(SELECT x.mailbox_id FROM email_mailboxes x WHERE x.email_id = e.id) \
         FROM emails e WHERE e.account_id = $1 AND e.id = any($2)",
    )
    .bind(account)
    .bind(ids)
    .fetch_all(&mut **tx)
    .await?;
    let destroyed: Vec<(i64, String)> = sqlx::query_as(
        "DELETE FROM emails WHERE account_id = $1 AND id = any($2) RETURNING id, blob_id",
    )
    .bind(account)
    .bind(ids)
    .fetch_all(&mut **tx)
    .await?;
    let blob_ids: Vec<&str> = destroyed
        .iter()
        .map(|(_, blob_id)| blob_id.as_str())
        .collect();
    sqlx::query("DELETE FROM account_blobs WHERE account_id = $1 AND blob_id = any($2)")
        .bind(account)
        .bind(&blob_ids)
        .execute(&mut **tx)
        .await?;
    let gone: HashSet<i64> = destroyed.iter().map(|(id, _)| *id).collect();
    let mut threads: Vec<i64> = Vec::new();
    for (id, thread, mailboxes) in before {
        if gone.contains(&id) {
            set.record(ChangeType::Email, id, ChangeKind::Destroyed);
            for mailbox in mailboxes {
                set.counts(mailbox);
            }
            threads.push(thread);
        }
    }
    let threads = distinct(&threads);
    let remaining: HashSet<i64> = sqlx::query_scalar(
        "SELECT DISTINCT thread_id FROM emails WHERE account_id = $1 AND thread_id = any($2)",
    )
    .bind(account)
    .bind(&threads)
    .fetch_all(&mut **tx)
    .await?
    .into_iter()
    .collect();
    for thread in threads {
        let kind = if remaining.contains(&thread) {
            ChangeKind::Updated
        } else {
            ChangeKind::Destroyed
        };
        set.record(ChangeType::Thread, thread, kind);
    }
    Ok(destroyed.into_iter().map(|(id, _)| id).collect())
}

/// The rows of a batch of new emails, one array per column (for `unnest`).
#[derive(Default)]
struct EmailColumns<'a> {
    id: Vec<i64>,
    blob_id: Vec<&'a str>,
    thread_id: Vec<i64>,
    size: Vec<i64>,
    received_at: Vec<i64>,
    sent_at: Vec<Option<i64>>,
    keywords: Vec<String>,
    message_id: Vec<Option<Cow<'a, str>>>,
    base_subject: Vec<Cow<'a, str>>,
    subject: Vec<Cow<'a, str>>,
    from_sort: Vec<Cow<'a, str>>,
    to_sort: Vec<Cow<'a, str>>,
    from_text: Vec<Cow<'a, str>>,
    to_text: Vec<Cow<'a, str>>,
    cc_text: Vec<Cow<'a, str>>,
    bcc_text: Vec<Cow<'a, str>>,
    has_attachment: Vec<bool>,
    header_block: Vec<&'a [u8]>,
    preview: Vec<Cow<'a, str>>,
    fast_view_has_attachment: Vec<bool>,
    member_mailbox: Vec<i64>,
    member_received_at: Vec<i64>,
    member_email: Vec<i64>,
    ref_message_id: Vec<String>,
    ref_thread_id: Vec<i64>,
    ref_base_subject: Vec<String>,
    blob_size: Vec<i64>,
}

impl<'a> EmailColumns<'a> {
    fn push(&mut self, id: i64, thread_id: i64, email: &'a NewEmail) {
        let index = &email.index;
        self.id.push(id);
        self.blob_id.push(&email.blob_id);
        self.thread_id.push(thread_id);
        self.size.push(email.size);
        self.received_at.push(email.received_at);
        self.sent_at.push(email.sent_at);
        self.keywords.push(keywords_to_column(&email.keywords));
        self.message_id.push(index.message_id.as_deref().map(text));
        self.base_subject.push(text(&index.base_subject));
        self.subject.push(text(&index.subject));
        self.from_sort.push(text(&index.from_sort));
        self.to_sort.push(text(&index.to_sort));
        self.from_text.push(text(&index.from_text));
        self.to_text.push(text(&index.to_text));
        self.cc_text.push(text(&index.cc_text));
        self.bcc_text.push(text(&index.bcc_text));
        self.has_attachment.push(index.has_attachment);
        self.header_block.push(&email.header_block);
        self.preview.push(text(&email.fast_view.preview));
        self.fast_view_has_attachment
            .push(email.fast_view.has_attachment);
        for mailbox_id in distinct(&email.mailbox_ids) {
            self.member_mailbox.push(mailbox_id);
            self.member_received_at.push(email.received_at);
            self.member_email.push(id);
        }
        self.blob_size.push(email.size);
    }
}

/// Inserts the rows of new emails (ids already drawn) and their memberships,
/// header blocks, projection rows, thread refs and blob grants.
async fn insert_columns(
    tx: &mut Transaction<'static, Postgres>,
    account: i64,
    columns: &EmailColumns<'_>,
) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO emails (id, account_id, blob_id, thread_id, size, received_at, sent_at, \
         keywords, message_id, base_subject, subject, from_sort, to_sort, from_text, to_text, \
         cc_text, bcc_text, has_attachment) OVERRIDING SYSTEM VALUE \
         SELECT u.id, $1, u.blob_id, u.thread_id, u.size, u.received_at, u.sent_at, u.keywords, \
           u.message_id, u.base_subject, u.subject, u.from_sort, u.to_sort, u.from_text, \
           u.to_text, u.cc_text, u.bcc_text, u.has_attachment \
         FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[], \
           $7::bigint[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], \
           $13::text[], $14::text[], $15::text[], $16::text[], $17::text[], $18::boolean[]) \
         AS u(id, blob_id, thread_id, size, received_at, sent_at, keywords, message_id, \
           base_subject, subject, from_sort, to_sort, from_text, to_text, cc_text, bcc_text, \
           has_attachment)",
    )
    .bind(account)
    .bind(&columns.id)
    .bind(&columns.blob_id)
    .bind(&columns.thread_id)
    .bind(&columns.size)
    .bind(&columns.received_at)
    .bind(&columns.sent_at)
    .bind(&columns.keywords)
    .bind(&columns.message_id)
    .bind(&columns.base_subject)
    .bind(&columns.subject)
    .bind(&columns.from_sort)
    .bind(&columns.to_sort)
    .bind(&columns.from_text)
    .bind(&columns.to_text)
    .bind(&columns.cc_text)
    .bind(&columns.bcc_text)
    .bind(&columns.has_attachment)
    .execute(&mut **tx)
    .await?;
    if !columns.member_email.is_empty() {
        sqlx::query(
            "INSERT INTO email_mailboxes (mailbox_id, received_at, email_id) \
             SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[])",
        )
        .bind(&columns.member_mailbox)
        .bind(&columns.member_received_at)
        .bind(&columns.member_email)
        .execute(&mut **tx)
        .await?;
    }
    sqlx::query(
        "INSERT INTO email_headers (email_id, header_block) \
         SELECT * FROM unnest($1::bigint[], $2::bytea[])",
    )
    .bind(&columns.id)
    .bind(&columns.header_block)
    .execute(&mut **tx)
    .await?;
    sqlx::query(
        "INSERT INTO fast_view (email_id, preview, has_attachment) \
         SELECT * FROM unnest($1::bigint[], $2::text[], $3::boolean[])",
    )
    .bind(&columns.id)
    .bind(&columns.preview)
    .bind(&columns.fast_view_has_attachment)
    .execute(&mut **tx)
    .await?;
    if !columns.ref_message_id.is_empty() {
        sqlx::query(
            "INSERT INTO thread_refs (account_id, message_id, thread_id, base_subject) \
             SELECT $1, u.message_id, u.thread_id, u.base_subject \
             FROM unnest($2::text[], $3::bigint[], $4::text[]) AS u(message_id, thread_id, base_subject) \
             ON CONFLICT DO NOTHING",
        )
        .bind(account)
        .bind(&columns.ref_message_id)
        .bind(&columns.ref_thread_id)
        .bind(&columns.ref_base_subject)
        .execute(&mut **tx)
        .await?;
    }
    sqlx::query(
        "INSERT INTO account_blobs (account_id, blob_id, size, created_at) \
         SELECT $1, u.blob_id, u.size, extract(epoch FROM now())::bigint \
         FROM unnest($2::text[], $3::bigint[]) AS u(blob_id, size) \
         ON CONFLICT DO NOTHING",
    )
    .bind(account)
    .bind(&columns.blob_id)
    .bind(&columns.blob_size)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

#[async_trait]
impl Store for PostgresStore {
    async fn create_account(&self, email: &str, password_hash: &str) -> StoreResult<Account> {
        let mut tx = self.write().await?;
        let id: Option<i64> = sqlx::query_scalar(
            "INSERT INTO accounts (email, password_hash) VALUES ($1, $2) \
             ON CONFLICT DO NOTHING RETURNING id",
        )
        .bind(email)
        .bind(password_hash)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(id) = id else {
            return Err(StoreError::Conflict(format!(
                "account {email} already exists"
            )));
        };
        let mut set = ChangeSet {
            all_types: true,
            ..ChangeSet::default()
        };
        for (order, (role, name)) in ROLE_MAILBOXES.iter().enumerate() {
            let mailbox: i64 = sqlx::query_scalar(
                "INSERT INTO mailboxes (account_id, name, role, sort_order) VALUES ($1, $2, $3, $4) \
                 RETURNING id",
            )
            .bind(id)
            .bind(*name)
            .bind(*role)
            .bind(order as i64 + 1)
            .fetch_one(&mut *tx)
            .await?;
            set.record(ChangeType::Mailbox, mailbox, ChangeKind::Created);
        }
        record(&mut tx, id, &set).await?;
        tx.commit().await?;
        Ok(Account {
            id,
            email: email.to_string(),
            password_hash: password_hash.to_string(),
        })
    }

    async fn account_by_email(&self, email: &str) -> StoreResult<Option<Account>> {
        let row: Option<(i64, String, String)> = sqlx::query_as(
            "SELECT id, email, password_hash FROM accounts WHERE lower(email) = lower($1)",
        )
        .bind(email)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|(id, email, password_hash)| Account {
            id,
            email,
            password_hash,
        }))
    }

    async fn list_accounts(&self) -> StoreResult<Vec<Account>> {
        let rows: Vec<(i64, String, String)> =
            sqlx::query_as("SELECT id, email, password_hash FROM accounts ORDER BY id")
                .fetch_all(&self.pool)
                .await?;
        Ok(rows
            .into_iter()
            .map(|(id, email, password_hash)| Account {
                id,
                email,
                password_hash,
            })
            .collect())
    }

    async fn set_password(&self, email: &str, password_hash: &str) -> StoreResult<()> {
        let done =
            sqlx::query("UPDATE accounts SET password_hash = $2 WHERE lower(email) = lower($1)")
                .bind(email)
                .bind(password_hash)
                .execute(&self.pool)
                .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }

    async fn remove_account(&self, email: &str) -> StoreResult<()> {
        let mut tx = self.write().await?;
        let id: Option<i64> =
            sqlx::query_scalar("SELECT id FROM accounts WHERE lower(email) = lower($1) FOR UPDATE")
                .bind(email)
                .fetch_optional(&mut *tx)
                .await?;
        let Some(id) = id else {
            return Err(StoreError::NotFound);
        };
        // Children first: mailboxes reference each other through parent_id.
        for statement in [
            "DELETE FROM emails WHERE account_id = $1",
            "UPDATE mailboxes SET parent_id = NULL WHERE account_id = $1 AND parent_id IS NOT NULL",
            "DELETE FROM mailboxes WHERE account_id = $1",
            "DELETE FROM thread_refs WHERE account_id = $1",
            "DELETE FROM account_blobs WHERE account_id = $1",
            "DELETE FROM accounts WHERE id = $1",
        ] {
            sqlx::query(statement).bind(id).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn states(&self, account: i64) -> StoreResult<States> {
        let row: Option<(i64, i64, i64)> = sqlx::query_as(
            "SELECT email_state, mailbox_state, thread_state FROM accounts WHERE id = $1",
        )
        .bind(account)
        .fetch_optional(&self.pool)
        .await?;
        let (email, mailbox, thread) = row.ok_or(StoreError::NotFound)?;
        Ok(States {
            email,
            mailbox,
            thread,
        })
    }

    async fn mailboxes(&self, account: i64) -> StoreResult<Vec<MailboxRow>> {
        let rows = sqlx::query(
            "WITH m AS (SELECT * FROM mailboxes WHERE account_id = $1), \
             c AS (SELECT em.mailbox_id, count(*) AS total, \
                     count(*) FILTER (WHERE e.unread) AS unread, \
                     count(DISTINCT e.thread_id) AS threads, \
                     count(DISTINCT e.thread_id) FILTER (WHERE e.unread) AS unread_threads \
                   FROM email_mailboxes em \
                   JOIN (SELECT id, thread_id, \
                           (strpos(' ' || keywords || ' ', ' $seen ') = 0 \
                            AND strpos(' ' || keywords || ' ', ' $draft ') = 0) AS unread \
                         FROM emails WHERE account_id = $1) e ON e.id = em.email_id \
                   WHERE em.mailbox_id IN (SELECT id FROM m) GROUP BY em.mailbox_id) \
             SELECT m.id, m.parent_id, m.name, m.role, m.sort_order, m.is_subscribed, \
               coalesce(c.total, 0), coalesce(c.unread, 0), coalesce(c.threads, 0), \
               coalesce(c.unread_threads, 0) \
             FROM m LEFT JOIN c ON c.mailbox_id = m.id ORDER BY m.id",
        )
        .bind(account)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .map(|row| MailboxRow {
                id: row.get(0),
                parent_id: row.get(1),
                name: row.get(2),
                role: row.get(3),
                sort_order: row.get(4),
                is_subscribed: row.get(5),
                total_emails: row.get(6),
                unread_emails: row.get(7),
                total_threads: row.get(8),
                unread_threads: row.get(9),
            })
            .collect())
    }

    async fn owns_mailbox(&self, account: i64, mailbox: i64) -> StoreResult<bool> {
        let found: Option<i32> =
            sqlx::query_scalar("SELECT 1 FROM mailboxes WHERE id = $1 AND account_id = $2")
                .bind(mailbox)
                .bind(account)
                .fetch_optional(&self.pool)
                .await?;
        Ok(found.is_some())
    }

    async fn create_mailbox(&self, account: i64, mailbox: &NewMailbox) -> StoreResult<i64> {
        let mut tx = self.write().await?;
        lock_existing_account(&mut tx, account).await?;
        if let Some(parent) = mailbox.parent_id {
            check_mailboxes_owned(&mut tx, account, &[parent]).await?;
        }
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO mailboxes (account_id, parent_id, name, role, sort_order, is_subscribed) \
             VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
        )
        .bind(account)
        .bind(mailbox.parent_id)
        .bind(&mailbox.name)
        .bind(&mailbox.role)
        .bind(mailbox.sort_order)
        .bind(mailbox.is_subscribed)
        .fetch_one(&mut *tx)
        .await?;
        let mut set = ChangeSet::default();
        set.record(ChangeType::Mailbox, id, ChangeKind::Created);
        record(&mut tx, account, &set).await?;
        tx.commit().await?;
        Ok(id)
    }

    async fn update_mailbox(&self, account: i64, id: i64, patch: &MailboxPatch) -> StoreResult<()> {
        let mut tx = self.write().await?;
        lock_existing_account(&mut tx, account).await?;
        check_mailboxes_owned(&mut tx, account, &[id]).await?;
        if let Some(Some(parent)) = patch.parent_id {
            check_mailboxes_owned(&mut tx, account, &[parent]).await?;
        }
        sqlx::query(
            "UPDATE mailboxes SET \
             parent_id = CASE WHEN $2 THEN $3 ELSE parent_id END, \
             name = coalesce($4, name), \
             role = CASE WHEN $5 THEN $6 ELSE role END, \
             sort_order = coalesce($7, sort_order), \
             is_subscribed = coalesce($8, is_subscribed) \
             WHERE id = $1",
        )
        .bind(id)
        .bind(patch.parent_id.is_some())
        .bind(patch.parent_id.flatten())
        .bind(&patch.name)
        .bind(patch.role.is_some())
        .bind(patch.role.clone().flatten())
        .bind(patch.sort_order)
        .bind(patch.is_subscribed)
        .execute(&mut *tx)
        .await?;
        let mut set = ChangeSet::default();
        set.record(ChangeType::Mailbox, id, ChangeKind::Updated);
        record(&mut tx, account, &set).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn destroy_mailbox(&self, account: i64, id: i64, remove_emails: bool) -> StoreResult<()> {
        let mut tx = self.write().await?;
        lock_existing_account(&mut tx, account).await?;
        check_mailboxes_owned(&mut tx, account, &[id]).await?;
        let has_children: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM mailboxes WHERE parent_id = $1)")
                .bind(id)
                .fetch_one(&mut *tx)
                .await?;
        if has_children {
            return Err(StoreError::MailboxHasChild);
        }
        let members: Vec<(i64, i64)> = sqlx::query_as(
            "SELECT em.email_id, \
               (SELECT count(*) FROM email_mailboxes o WHERE o.email_id = em.email_id) \
             FROM email_mailboxes em WHERE em.mailbox_id = $1",
        )
        .bind(id)
        .fetch_all(&mut *tx)
        .await?;
        if !members.is_empty() && !remove_emails {
            return Err(StoreError::MailboxHasEmail);
        }
        let only_here: Vec<i64> = members
            .iter()
            .filter(|(_, count)| *count == 1)
            .map(|(email, _)| *email)
            .collect();
        let mut set = ChangeSet::default();
        delete_emails(&mut tx, account, &only_here, &mut set).await?;
        for (email, _) in members.iter().filter(|(_, count)| *count > 1) {
            set.record(ChangeType::Email, *email, ChangeKind::Updated);
        }
        sqlx::query("DELETE FROM email_mailboxes WHERE mailbox_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM mailboxes WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        set.record(ChangeType::Mailbox, id, ChangeKind::Destroyed);
        record(&mut tx, account, &set).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn insert_emails(&self, account: i64, emails: &[NewEmail]) -> StoreResult<Vec<Inserted>> {
        if emails.is_empty() {
            return Ok(Vec::new());
        }
        let mut tx = self.write().await?;
        lock_existing_account(&mut tx, account).await?;
        let mailbox_ids: Vec<i64> = emails
            .iter()
            .flat_map(|e| e.mailbox_ids.iter().copied())
            .collect();
        check_mailboxes_owned(&mut tx, account, &mailbox_ids).await?;

        // Duplicates, ids and threads planned in memory (insert_plan).
        let blob_ids: Vec<&str> = emails.iter().map(|e| e.blob_id.as_str()).collect();
        let stored: HashMap<String, i64> = sqlx::query_as(
            "SELECT blob_id, id FROM emails WHERE account_id = $1 AND blob_id = any($2)",
        )
        .bind(account)
        .bind(&blob_ids)
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .collect();
        let new_count = insert_plan::new_count(emails, &stored);
        if new_count == 0 {
            tx.commit().await?;
            return Ok(emails
                .iter()
                .map(|e| Inserted::Duplicate(stored[&e.blob_id]))
                .collect());
        }
        let ids: Vec<i64> = sqlx::query_scalar(
            "SELECT nextval(pg_get_serial_sequence('emails', 'id')) FROM generate_series(1, $1)",
        )
        .bind(new_count as i64)
        .fetch_all(&mut *tx)
        .await?;
        let keys = insert_plan::ref_keys(emails, ref_key);
        let stored_refs: Vec<ThreadRef> = if keys.is_empty() {
            Vec::new()
        } else {
            sqlx::query_as::<_, (String, i64, String)>(
                "SELECT message_id, thread_id, base_subject FROM thread_refs \
                 WHERE account_id = $1 AND message_id = any($2)",
            )
            .bind(account)
            .bind(&keys)
            .fetch_all(&mut *tx)
            .await?
            .into_iter()
            .map(|(message_id, thread_id, base_subject)| ThreadRef {
                message_id,
                thread_id,
                base_subject,
            })
            .collect()
        };
        let plan = insert_plan::plan(emails, stored, ids, stored_refs, ref_key, |subject| {
            text(subject).into_owned()
        })?;
        let mut columns = EmailColumns::default();
        for planned in &plan.new {
            columns.push(planned.id, planned.thread_id, planned.email);
        }
        for r in &plan.refs {
            columns.ref_message_id.push(r.message_id.clone());
            columns.ref_thread_id.push(r.thread_id);
            columns.ref_base_subject.push(r.base_subject.clone());
        }
        insert_columns(&mut tx, account, &columns).await?;
        // A thread with none of its emails stored before this batch is new.
        let existed: HashSet<i64> = sqlx::query_scalar(
            "SELECT DISTINCT thread_id FROM emails WHERE account_id = $1 \
             AND thread_id = any($2) AND NOT (id = any($3))",
        )
        .bind(account)
        .bind(plan.threads())
        .bind(plan.new_ids())
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .collect();
        let set = plan.changes(&existed);
        record(&mut tx, account, &set).await?;
        tx.commit().await?;
        Ok(plan.outcomes)
    }

    async fn email_meta(&self, account: i64, ids: &[i64]) -> StoreResult<Vec<EmailMeta>> {
        let rows = sqlx::query(
            "SELECT e.id, e.blob_id, e.thread_id, e.size, e.received_at, e.keywords, \
             array(SELECT x.mailbox_id FROM email_mailboxes x WHERE x.email_id = e.id \
                   ORDER BY x.mailbox_id) \
             FROM emails e WHERE e.account_id = $1 AND e.id = any($2)",
        )
        .bind(account)
        .bind(ids)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(meta_from_row).collect())
    }

    async fn header_blocks(&self, account: i64, ids: &[i64]) -> StoreResult<Vec<(i64, Vec<u8>)>> {
        Ok(sqlx::query_as(
            "SELECT h.email_id, h.header_block FROM email_headers h JOIN emails e ON e.id = h.email_id \
             WHERE e.account_id = $1 AND h.email_id = any($2)",
        )
        .bind(account)
        .bind(ids)
        .fetch_all(&self.pool)
        .await?)
    }

    async fn fast_views(&self, account: i64, ids: &[i64]) -> StoreResult<Vec<(i64, FastView)>> {
        let rows: Vec<(i64, String, bool)> = sqlx::query_as(fast_views_sql!())
            .bind(account)
            .bind(ids)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows
            .into_iter()
            .map(|(id, preview, has_attachment)| {
                (
                    id,
                    FastView {
                        preview,
                        has_attachment,
                    },
                )
            })
            .collect())
    }

    async fn put_fast_views(&self, rows: &[(i64, FastView)]) -> StoreResult<()> {
        if rows.is_empty() {
            return Ok(());
        }
        // The last row of an id wins, as with one INSERT OR REPLACE per row.
        let mut latest: HashMap<i64, &FastView> = HashMap::with_capacity(rows.len());
        for (id, view) in rows {
            latest.insert(*id, view);
        }
        let ids = distinct(&rows.iter().map(|(id, _)| *id).collect::<Vec<_>>());
        let mut tx = self.write().await?;
        // The email may have been destroyed meanwhile: write only rows whose
        // email exists, holding it (KEY SHARE) until commit; an email being
        // destroyed right now is skipped rather than waited for.
        let live: Vec<i64> = sqlx::query_scalar(
            "SELECT id FROM emails WHERE id = any($1) ORDER BY id FOR KEY SHARE SKIP LOCKED",
        )
        .bind(&ids)
        .fetch_all(&mut *tx)
        .await?;
        if !live.is_empty() {
            let previews: Vec<Cow<'_, str>> =
                live.iter().map(|id| text(&latest[id].preview)).collect();
            let attachments: Vec<bool> = live.iter().map(|id| latest[id].has_attachment).collect();
            sqlx::query(
                "INSERT INTO fast_view (email_id, preview, has_attachment) \
                 SELECT * FROM unnest($1::bigint[], $2::text[], $3::boolean[]) \
                 ON CONFLICT (email_id) DO UPDATE \
                 SET preview = excluded.preview, has_attachment = excluded.has_attachment",
            )
            .bind(&live)
            .bind(&previews)
            .bind(&attachments)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn clear_fast_views(&self, account: Option<i64>) -> StoreResult<u64> {
        let done = match account {
            Some(account) => {
                sqlx::query(
                    "DELETE FROM fast_view f USING emails e \
                     WHERE e.id = f.email_id AND e.account_id = $1",
                )
                .bind(account)
                .execute(&self.pool)
                .await?
            }
            None => {
                sqlx::query("DELETE FROM fast_view")
                    .execute(&self.pool)
                    .await?
            }
        };
        Ok(done.rows_affected())
    }

    async fn email_blobs(
        &self,
        account: Option<i64>,
        after_id: i64,
        limit: i64,
        missing_fast_view_only: bool,
    ) -> StoreResult<Vec<(i64, String)>> {
        Ok(sqlx::query_as(
            "SELECT e.id, e.blob_id FROM emails e WHERE e.id > $2 \
             AND ($1::bigint IS NULL OR e.account_id = $1) \
             AND (NOT $4 OR NOT EXISTS (SELECT 1 FROM fast_view f WHERE f.email_id = e.id)) \
             ORDER BY e.id LIMIT $3",
        )
        .bind(account)
        .bind(after_id)
        .bind(limit)
        .bind(missing_fast_view_only)
        .fetch_all(&self.pool)
        .await?)
    }

    async fn mailbox_emails_by_received(
        &self,
        mailbox: i64,
        descending: bool,
        position: i64,
        limit: i64,
    ) -> StoreResult<(Vec<(i64, i64)>, i64)> {
        let sql = if descending {
            listing_sql!("DESC")
        } else {
            listing_sql!("ASC")
        };
        let ids: Vec<(i64, i64)> = sqlx::query_as(sql)
            .bind(mailbox)
            .bind(limit)
            .bind(position)
            .fetch_all(&self.pool)
            .await?;
        let total: i64 =
            sqlx::query_scalar("SELECT count(*) FROM email_mailboxes WHERE mailbox_id = $1")
                .bind(mailbox)
                .fetch_one(&self.pool)
                .await?;
        Ok((ids, total))
    }

    async fn query_rows(
        &self,
        account: i64,
        in_mailbox: Option<i64>,
    ) -> StoreResult<Vec<QueryRow>> {
        let query = match in_mailbox {
            Some(mailbox) => sqlx::query(
                "SELECT e.id, e.blob_id, e.thread_id, e.size, e.received_at, e.keywords, \
                   array(SELECT x.mailbox_id FROM email_mailboxes x WHERE x.email_id = e.id \
                         ORDER BY x.mailbox_id), \
                   e.sent_at, e.message_id, e.base_subject, e.subject, e.from_sort, e.to_sort, \
                   e.from_text, e.to_text, e.cc_text, e.bcc_text, e.has_attachment \
                 FROM emails e WHERE e.account_id = $1 AND e.id IN \
                   (SELECT email_id FROM email_mailboxes WHERE mailbox_id = $2)",
            )
            .bind(account)
            .bind(mailbox),
            None => sqlx::query(
                "SELECT e.id, e.blob_id, e.thread_id, e.size, e.received_at, e.keywords, \
                   array(SELECT x.mailbox_id FROM email_mailboxes x WHERE x.email_id = e.id \
                         ORDER BY x.mailbox_id), \
                   e.sent_at, e.message_id, e.base_subject, e.subject, e.from_sort, e.to_sort, \
                   e.from_text, e.to_text, e.cc_text, e.bcc_text, e.has_attachment \
                 FROM emails e WHERE e.account_id = $1",
            )
            .bind(account),
        };
        let rows = query.fetch_all(&self.pool).await?;
        Ok(rows
            .iter()
            .map(|row| QueryRow {
                meta: meta_from_row(row),
                sent_at: row.get(7),
                index: EmailIndex {
                    message_id: row.get(8),
                    referenced_ids: Vec::new(),
                    base_subject: row.get(9),
                    subject: row.get(10),
                    from_sort: row.get(11),
                    to_sort: row.get(12),
                    from_text: row.get(13),
                    to_text: row.get(14),
                    cc_text: row.get(15),
                    bcc_text: row.get(16),
                    has_attachment: row.get(17),
                },
            })
            .collect())
    }

    async fn update_emails(
        &self,
        account: i64,
        updates: &[EmailUpdate],
    ) -> StoreResult<Vec<UpdateOutcome>> {
        if updates.is_empty() {
            return Ok(Vec::new());
        }
        let mut tx = self.write().await?;
        if !lock_account(&mut tx, account).await? {
            return Ok(vec![UpdateOutcome::NotFound; updates.len()]);
        }
        let ids = distinct(&updates.iter().map(|u| u.id).collect::<Vec<_>>());
        let rows: Vec<(i64, String, Vec<i64>)> = sqlx::query_as(
            "SELECT e.id, e.keywords, \
               array(SELECT x.mailbox_id FROM email_mailboxes x WHERE x.email_id = e.id \
                     ORDER BY x.mailbox_id) \
             FROM emails e WHERE e.account_id = $1 AND e.id = any($2)",
        )
        .bind(account)
        .bind(&ids)
        .fetch_all(&mut *tx)
        .await?;
        let before: HashMap<i64, EmailLists> = rows
            .into_iter()
            .map(|(id, keywords, mailboxes)| (id, (keywords_from_column(&keywords), mailboxes)))
            .collect();
        let wanted = distinct(
            &updates
                .iter()
                .flat_map(|u| u.mailbox_ids.additions().copied())
                .collect::<Vec<_>>(),
        );
        let owned: HashSet<i64> =
            sqlx::query_scalar("SELECT id FROM mailboxes WHERE account_id = $1 AND id = any($2)")
                .bind(account)
                .bind(&wanted)
                .fetch_all(&mut *tx)
                .await?
                .into_iter()
                .collect();
        let (current, outcomes) = super::apply_updates(&before, &owned, updates);
        let mut set = ChangeSet::default();
        let (mut keyword_ids, mut keyword_values) = (Vec::new(), Vec::new());
        let (mut member_emails, mut member_mailboxes, mut moved) =
            (Vec::new(), Vec::new(), Vec::new());
        let mut changed: Vec<&i64> = current.keys().collect();
        changed.sort_unstable();
        for id in changed {
            let (keywords, mailboxes) = &current[id];
            let (old_keywords, old_mailboxes) = &before[id];
            if keywords != old_keywords {
                keyword_ids.push(*id);
                keyword_values.push(keywords_to_column(keywords));
            }
            if mailboxes != old_mailboxes {
                moved.push(*id);
                for mailbox in mailboxes {
                    member_emails.push(*id);
                    member_mailboxes.push(*mailbox);
                }
            }
            super::record_email_update(
                &mut set,
                *id,
                (old_keywords, old_mailboxes),
                (keywords, mailboxes),
            );
        }
        if !keyword_ids.is_empty() {
            sqlx::query(
                "UPDATE emails e SET keywords = u.keywords \
                 FROM unnest($1::bigint[], $2::text[]) AS u(id, keywords) WHERE e.id = u.id",
            )
            .bind(&keyword_ids)
            .bind(&keyword_values)
            .execute(&mut *tx)
            .await?;
        }
        if !moved.is_empty() {
            sqlx::query("DELETE FROM email_mailboxes WHERE email_id = any($1)")
                .bind(&moved)
                .execute(&mut *tx)
                .await?;
            sqlx::query(
                "INSERT INTO email_mailboxes (mailbox_id, received_at, email_id) \
                 SELECT u.mailbox_id, e.received_at, u.email_id \
                 FROM unnest($1::bigint[], $2::bigint[]) AS u(email_id, mailbox_id) \
                 JOIN emails e ON e.id = u.email_id \
                 ON CONFLICT DO NOTHING",
            )
            .bind(&member_emails)
            .bind(&member_mailboxes)
            .execute(&mut *tx)
            .await?;
        }
        record(&mut tx, account, &set).await?;
        tx.commit().await?;
        Ok(outcomes)
    }

    async fn destroy_emails(&self, account: i64, ids: &[i64]) -> StoreResult<Vec<i64>> {
        let mut tx = self.write().await?;
        if !lock_account(&mut tx, account).await? {
            return Ok(Vec::new());
        }
        let mut set = ChangeSet::default();
        let destroyed = delete_emails(&mut tx, account, ids, &mut set).await?;
        record(&mut tx, account, &set).await?;
        tx.commit().await?;
        Ok(destroyed)
    }

    async fn changes(
        &self,
        account: i64,
        kind: ChangeType,
        since: LogPosition,
        max_changes: usize,
    ) -> StoreResult<Changes> {
        let row: Option<(i64, i64, i64, i64)> = sqlx::query_as(
            "SELECT email_state, mailbox_state, thread_state, changes_from FROM accounts WHERE id = $1",
        )
        .bind(account)
        .fetch_optional(&self.pool)
        .await?;
        let (email, mailbox, thread, from) = row.ok_or(StoreError::NotFound)?;
        let state = match kind {
            ChangeType::Email => email,
            ChangeType::Mailbox => mailbox,
            ChangeType::Thread => thread,
        };
        super::check_since(since, state, from)?;
        let mut collector = ChangeCollector::new(since, max_changes);
        loop {
            let cursor = collector.cursor();
            let rows: Vec<(i64, i64, i16, bool)> = sqlx::query_as(
                "SELECT modseq, object_id, kind, counts_only FROM changes \
                 WHERE account_id = $1 AND type = $2 \
                 AND (modseq, object_id) > ($3, $4) AND modseq <= $5 \
                 ORDER BY modseq, object_id LIMIT $6",
            )
            .bind(account)
            .bind(kind as i16)
            .bind(cursor.modseq)
            .bind(cursor.object.unwrap_or(i64::MAX))
            .bind(state)
            .bind(LOG_BATCH)
            .fetch_all(&self.pool)
            .await?;
            let exhausted = (rows.len() as i64) < LOG_BATCH;
            let rows = rows
                .into_iter()
                .map(|(modseq, object, kind, counts_only)| LogRow {
                    modseq,
                    object,
                    kind: ChangeKind::from_code(kind.into()),
                    counts_only,
                })
                .collect();
            if !collector.feed(rows, exhausted) || exhausted {
                break;
            }
        }
        Ok(collector.finish(state))
    }

    async fn truncate_changes(&self, account: i64, through_modseq: i64) -> StoreResult<u64> {
        let mut tx = self.write().await?;
        if !lock_account(&mut tx, account).await? {
            return Err(StoreError::NotFound);
        }
        let done = sqlx::query("DELETE FROM changes WHERE account_id = $1 AND modseq <= $2")
            .bind(account)
            .bind(through_modseq)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "UPDATE accounts SET changes_from = greatest(changes_from, least($2, modseq)) \
             WHERE id = $1",
        )
        .bind(account)
        .bind(through_modseq)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(done.rows_affected())
    }

    async fn mailbox_positions(
        &self,
        mailbox: i64,
        descending: bool,
        ids: &[i64],
    ) -> StoreResult<Vec<(i64, i64)>> {
        let sql = if descending {
            "SELECT t.email_id, (SELECT count(*) FROM email_mailboxes o WHERE o.mailbox_id = $1 \
               AND (o.received_at, o.email_id) > (t.received_at, t.email_id)) \
             FROM email_mailboxes t WHERE t.mailbox_id = $1 AND t.email_id = any($2)"
        } else {
            "SELECT t.email_id, (SELECT count(*) FROM email_mailboxes o WHERE o.mailbox_id = $1 \
               AND (o.received_at, o.email_id) < (t.received_at, t.email_id)) \
             FROM email_mailboxes t WHERE t.mailbox_id = $1 AND t.email_id = any($2)"
        };
        Ok(sqlx::query_as(sql)
            .bind(mailbox)
            .bind(ids)
            .fetch_all(&self.pool)
            .await?)
    }

    async fn thread_emails(
        &self,
        account: i64,
        thread_ids: &[i64],
    ) -> StoreResult<Vec<(i64, Vec<i64>)>> {
        let rows: Vec<(i64, i64)> = sqlx::query_as(
            "SELECT thread_id, id FROM emails WHERE account_id = $1 \
             AND thread_id = any($2) ORDER BY thread_id, received_at, id",
        )
        .bind(account)
        .bind(thread_ids)
        .fetch_all(&self.pool)
        .await?;
        let mut threads: Vec<(i64, Vec<i64>)> = Vec::new();
        for (thread_id, email_id) in rows {
            match threads.last_mut() {
                Some((last, emails)) if *last == thread_id => emails.push(email_id),
                _ => threads.push((thread_id, vec![email_id])),
            }
        }
        Ok(threads)
    }

    async fn add_blob(&self, account: i64, blob_id: &str, size: i64) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO account_blobs (account_id, blob_id, size, created_at) \
             VALUES ($1, $2, $3, extract(epoch FROM now())::bigint) ON CONFLICT DO NOTHING",
        )
        .bind(account)
        .bind(blob_id)
        .bind(size)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn has_blob(&self, account: i64, blob_id: &str) -> StoreResult<bool> {
        let found: Option<i32> = sqlx::query_scalar(
            "SELECT 1 FROM account_blobs WHERE account_id = $1 AND blob_id = $2",
        )
        .bind(account)
        .bind(blob_id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(found.is_some())
    }

    async fn export_raw(
        &self,
        table: super::raw::RawTable,
        account: i64,
        after: &super::raw::RawCursor,
        limit: i64,
    ) -> StoreResult<super::raw::RawRows> {
        raw::export(self, table, account, after, limit).await
    }

    async fn import_raw(&self, rows: &super::raw::RawRows) -> StoreResult<u64> {
        raw::import(self, rows).await
    }

    async fn raw_counts(&self, account: Option<i64>) -> StoreResult<super::raw::RowCounts> {
        raw::counts(self, account).await
    }
}

/// Raw row export and import for `fastview migrate-store`.
mod raw;

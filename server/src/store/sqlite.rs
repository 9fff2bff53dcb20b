//! The SQLite implementation of [`Store`]: the embedded default.
//!
//! WAL journal, `synchronous = NORMAL`, foreign keys on; a pool of reader
//! connections and one writer connection that this process's writers queue for. Id lists are bound as
//! one JSON array and expanded with `json_each`, so every batched read is one
//! static, cached statement whatever the number of ids. Write transactions
//! start with `BEGIN IMMEDIATE`, so a writer waits for the lock (busy timeout)
//! instead of failing on a stale snapshot when `serve` and `import` share a
//! data dir. Change-log rows of a write are bound as one JSON array too.

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use sqlx::{QueryBuilder, Row, Sqlite, Transaction};

use std::collections::{HashMap, HashSet};

use super::insert_plan::{self, InsertPlan, ThreadRef};
use super::{
    Account, ChangeCollector, ChangeKind, ChangeSet, ChangeType, Changes, EmailIndex, EmailMeta,
    EmailUpdate, Inserted, LOG_BATCH, LogPosition, LogRow, MailboxPatch, MailboxRow, NewEmail,
    NewMailbox, QueryRow, States, Store, StoreError, StoreResult, UpdateOutcome,
};
use crate::mail::fast_view::FastView;

/// Role mailboxes every new account gets (RFC 8621 §2, IANA mailbox roles).
pub const ROLE_MAILBOXES: &[(&str, &str)] = &[
    ("inbox", "Inbox"),
    ("drafts", "Drafts"),
    ("sent", "Sent"),
    ("trash", "Trash"),
    ("junk", "Junk"),
    ("archive", "Archive"),
];

/// SQLite-backed [`Store`].
#[derive(Clone)]
pub struct SqliteStore {
    /// Readers.
    pool: SqlitePool,
    /// The one writer connection: writers of this process queue for it in
    /// order instead of retrying SQLite's lock (`busy_timeout` is only for
    /// writers in other processes, such as `fastview import` beside `serve`).
    writer: SqlitePool,
}

impl SqliteStore {
    /// Opens (creating if missing) and migrates the database at `url`
    /// (`sqlite://path/fastview.db`). `max_connections` bounds the read pool.
    pub async fn connect(url: &str, max_connections: u32) -> StoreResult<Self> {
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(30))
            .pragma("cache_size", "-65536")
            // Reads map the file instead of copying pages through read(2):
            // under load the copies and the page-cache lookups behind them
            // were a tenth of the server's CPU.
            .pragma("mmap_size", "2147418112")
            .pragma("temp_store", "memory");
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .connect_with(options.clone())
            .await?;
        // Processes started together on a new file (`serve` beside `import`)
        // can both find a migration unapplied; the one that loses the write
        // lock then fails on tables the other created, and a second run
        // finds them recorded as applied: each failure means another process
        // applied one migration, so one more run than there are migrations
        // always ends. (sqlx locks migrations only on PostgreSQL.)
        let migrator = sqlx::migrate!("../migrations/sqlite");
        let runs = migrator.iter().count() as u64 + 1;
        let mut attempt = 0;
        while let Err(error) = migrator.run(&writer).await {
            attempt += 1;
            if attempt == runs {
                return Err(error.into());
            }
            tokio::time::sleep(Duration::from_millis(100 * attempt)).await;
        }
        let pool = SqlitePoolOptions::new()
            .max_connections(max_connections.max(1))
            .min_connections(1)
            .connect_with(options)
            .await?;
        Ok(Self { pool, writer })
    }

    /// The query plan SQLite chooses for the inMailbox + receivedAt listing,
    /// one line per step (for the test that proves it is served from an index).
    pub async fn mailbox_listing_plan(&self) -> StoreResult<Vec<String>> {
        let rows = sqlx::query(
            "EXPLAIN QUERY PLAN SELECT em.email_id, e.thread_id FROM email_mailboxes em \
             JOIN emails e ON e.id = em.email_id WHERE em.mailbox_id = ?1 \
             ORDER BY em.received_at DESC, em.email_id DESC LIMIT ?2 OFFSET ?3",
        )
        .bind(1_i64)
        .bind(30_i64)
        .bind(0_i64)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .map(|row| row.get::<String, _>("detail"))
            .collect())
    }

    async fn write(&self) -> StoreResult<Transaction<'static, Sqlite>> {
        Ok(self.writer.begin_with("BEGIN IMMEDIATE").await?)
    }
}

/// An id list as the JSON array bound for `json_each`, without duplicates
/// (the reads join on it, so a repeated id would repeat its row).
fn id_list(ids: &[i64]) -> String {
    let mut ids = ids.to_vec();
    ids.sort_unstable();
    ids.dedup();
    serde_json::to_string(&ids).unwrap_or_else(|_| "[]".to_string())
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

fn mailbox_ids_from_column(column: Option<String>) -> Vec<i64> {
    let mut ids: Vec<i64> = column
        .unwrap_or_default()
        .split(',')
        .filter_map(|id| id.parse().ok())
        .collect();
    ids.sort_unstable();
    ids
}

/// Reads an [`EmailMeta`] from the first seven columns of a row:
/// id, blob_id, thread_id, size, received_at, keywords, mailbox ids (comma-separated).
fn meta_from_row(row: &SqliteRow) -> EmailMeta {
    EmailMeta {
        id: row.get(0),
        blob_id: row.get(1),
        thread_id: row.get(2),
        size: row.get(3),
        received_at: row.get(4),
        keywords: keywords_from_column(row.get::<&str, _>(5)),
        mailbox_ids: mailbox_ids_from_column(row.get(6)),
    }
}

/// Advances the account's modseq and the states of the types the write
/// changed, and appends its rows to the change log at the new modseq.
/// Nothing when the write changed nothing.
async fn record(
    tx: &mut Transaction<'static, Sqlite>,
    account: i64,
    set: &ChangeSet,
) -> StoreResult<()> {
    if set.is_empty() {
        return Ok(());
    }
    let modseq: i64 = sqlx::query_scalar(
        "UPDATE accounts SET modseq = modseq + 1, \
         email_state = CASE WHEN ?2 THEN modseq + 1 ELSE email_state END, \
         mailbox_state = CASE WHEN ?3 THEN modseq + 1 ELSE mailbox_state END, \
         thread_state = CASE WHEN ?4 THEN modseq + 1 ELSE thread_state END \
         WHERE id = ?1 RETURNING modseq",
    )
    .bind(account)
    .bind(set.touches(ChangeType::Email))
    .bind(set.touches(ChangeType::Mailbox))
    .bind(set.touches(ChangeType::Thread))
    .fetch_one(&mut **tx)
    .await?;
    let rows: Vec<(i16, i64, i16, bool)> = set.rows().collect();
    if !rows.is_empty() {
        sqlx::query(
            "INSERT INTO changes (account_id, type, modseq, object_id, kind, counts_only) \
             SELECT ?1, json_extract(value, '$[0]'), ?2, json_extract(value, '$[1]'), \
               json_extract(value, '$[2]'), json_extract(value, '$[3]') \
             FROM json_each(?3)",
        )
        .bind(account)
        .bind(modseq)
        .bind(serde_json::to_string(&rows).unwrap_or_else(|_| "[]".to_string()))
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

async fn check_mailboxes_owned(
    tx: &mut Transaction<'static, Sqlite>,
    account: i64,
    mailbox_ids: &[i64],
) -> StoreResult<()> {
    let owned: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM mailboxes WHERE account_id = ?1 \
         AND id IN (SELECT value FROM json_each(?2))",
    )
    .bind(account)
    .bind(id_list(mailbox_ids))
    .fetch_one(&mut **tx)
    .await?;
    let mut distinct = mailbox_ids.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    if owned as usize != distinct.len() {
        return Err(StoreError::NotFound);
    }
    Ok(())
}

/// Rows of one multi-row statement: 18 bound values per email stays far
/// below SQLite's 32,766 host parameters.
const INSERT_CHUNK: usize = 500;

/// Writes the planned new emails of a batch ([`insert_plan`]) with one
/// multi-row statement per table (per [`INSERT_CHUNK`] emails).
async fn insert_planned(
    tx: &mut Transaction<'static, Sqlite>,
    account: i64,
    plan: &InsertPlan<'_>,
) -> StoreResult<()> {
    for chunk in plan.new.chunks(INSERT_CHUNK) {
        QueryBuilder::<Sqlite>::new(
            "INSERT INTO emails (id, account_id, blob_id, thread_id, size, received_at, sent_at, \
             keywords, message_id, base_subject, subject, from_sort, to_sort, from_text, to_text, \
             cc_text, bcc_text, has_attachment) ",
        )
        .push_values(chunk, |mut row, planned| {
            let (email, index) = (planned.email, &planned.email.index);
            row.push_bind(planned.id)
                .push_bind(account)
                .push_bind(email.blob_id.clone())
                .push_bind(planned.thread_id)
                .push_bind(email.size)
                .push_bind(email.received_at)
                .push_bind(email.sent_at)
                .push_bind(keywords_to_column(&email.keywords))
                .push_bind(index.message_id.clone())
                .push_bind(index.base_subject.clone())
                .push_bind(index.subject.clone())
                .push_bind(index.from_sort.clone())
                .push_bind(index.to_sort.clone())
                .push_bind(index.from_text.clone())
                .push_bind(index.to_text.clone())
                .push_bind(index.cc_text.clone())
                .push_bind(index.bcc_text.clone())
                .push_bind(index.has_attachment);
        })
        .build()
        .execute(&mut **tx)
        .await?;
        let memberships: Vec<(i64, i64, i64)> = chunk
            .iter()
            .flat_map(|planned| {
                let mut mailbox_ids = planned.email.mailbox_ids.clone();
                mailbox_ids.sort_unstable();
                mailbox_ids.dedup();
                mailbox_ids
                    .into_iter()
                    .map(move |mailbox| (mailbox, planned.email.received_at, planned.id))
            })
            .collect();
        for members in memberships.chunks(INSERT_CHUNK) {
            QueryBuilder::<Sqlite>::new(
                "INSERT INTO email_mailboxes (mailbox_id, received_at, email_id) ",
            )
            .push_values(members, |mut row, (mailbox, received_at, email)| {
                row.push_bind(*mailbox)
                    .push_bind(*received_at)
                    .push_bind(*email);
            })
            .build()
            .execute(&mut **tx)
            .await?;
        }
        QueryBuilder::<Sqlite>::new("INSERT INTO email_headers (email_id, header_block) ")
            .push_values(chunk, |mut row, planned| {
                row.push_bind(planned.id)
                    .push_bind(planned.email.header_block.clone());
            })
            .build()
            .execute(&mut **tx)
            .await?;
        QueryBuilder::<Sqlite>::new("INSERT INTO fast_view (email_id, preview, has_attachment) ")
            .push_values(chunk, |mut row, planned| {
                row.push_bind(planned.id)
                    .push_bind(planned.email.fast_view.preview.clone())
                    .push_bind(planned.email.fast_view.has_attachment);
            })
            .build()
            .execute(&mut **tx)
            .await?;
        QueryBuilder::<Sqlite>::new(
            "INSERT OR IGNORE INTO account_blobs (account_id, blob_id, size, created_at) ",
        )
        .push_values(chunk, |mut row, planned| {
            row.push_bind(account)
                .push_bind(planned.email.blob_id.clone())
                .push_bind(planned.email.size)
                .push("strftime('%s','now')");
        })
        .build()
        .execute(&mut **tx)
        .await?;
    }
    for refs in plan.refs.chunks(INSERT_CHUNK) {
        QueryBuilder::<Sqlite>::new(
            "INSERT OR IGNORE INTO thread_refs (account_id, message_id, thread_id, base_subject) ",
        )
        .push_values(refs, |mut row, r| {
            row.push_bind(account)
                .push_bind(r.message_id.clone())
                .push_bind(r.thread_id)
                .push_bind(r.base_subject.clone());
        })
        .build()
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

async fn set_memberships(
    tx: &mut Transaction<'static, Sqlite>,
    email_id: i64,
    mailbox_ids: &[i64],
) -> StoreResult<()> {
    let received_at: i64 = sqlx::query_scalar("SELECT received_at FROM emails WHERE id = ?1")
        .bind(email_id)
        .fetch_one(&mut **tx)
        .await?;
    sqlx::query("DELETE FROM email_mailboxes WHERE email_id = ?1")
        .bind(email_id)
        .execute(&mut **tx)
        .await?;
    for mailbox_id in mailbox_ids {
        sqlx::query(
            "INSERT OR IGNORE INTO email_mailboxes (mailbox_id, received_at, email_id) \
             VALUES (?1, ?2, ?3)",
        )
        .bind(mailbox_id)
        .bind(received_at)
        .bind(email_id)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

/// Deletes emails of the account and their blob grants, recording the
/// emails, their mailboxes' counts and their threads in `set`.
async fn delete_emails(
    tx: &mut Transaction<'static, Sqlite>,
    account: i64,
    ids: &[i64],
    set: &mut ChangeSet,
) -> StoreResult<Vec<i64>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let before: Vec<(i64, i64, Option<String>)> = sqlx::query_as(
        "SELECT e.id, e.thread_id, \
           (SELECT group_concat(x.mailbox_id) FROM email_mailboxes x WHERE x.email_id = e.id) \
         FROM emails e WHERE e.account_id = ?1 AND e.id IN (SELECT value FROM json_each(?2))",
    )
    .bind(account)
    .bind(id_list(ids))
    .fetch_all(&mut **tx)
    .await?;
    let destroyed: Vec<(i64, String)> = sqlx::query_as(
        "DELETE FROM emails WHERE +account_id = ?1 AND id IN (SELECT value FROM json_each(?2)) \
         RETURNING id, blob_id",
    )
    .bind(account)
    .bind(id_list(ids))
    .fetch_all(&mut **tx)
    .await?;
    for (_, blob_id) in &destroyed {
        sqlx::query("DELETE FROM account_blobs WHERE account_id = ?1 AND blob_id = ?2")
            .bind(account)
            .bind(blob_id)
            .execute(&mut **tx)
            .await?;
    }
    let gone: HashSet<i64> = destroyed.iter().map(|(id, _)| *id).collect();
    let mut threads: Vec<i64> = Vec::new();
    for (id, thread, mailboxes) in before {
        if gone.contains(&id) {
            set.record(ChangeType::Email, id, ChangeKind::Destroyed);
            for mailbox in mailbox_ids_from_column(mailboxes) {
                set.counts(mailbox);
            }
            threads.push(thread);
        }
    }
    threads.sort_unstable();
    threads.dedup();
    let remaining: HashSet<i64> = sqlx::query_scalar(
        "SELECT DISTINCT thread_id FROM emails WHERE account_id = ?1 \
         AND thread_id IN (SELECT value FROM json_each(?2))",
    )
    .bind(account)
    .bind(id_list(&threads))
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

#[async_trait]
impl Store for SqliteStore {
    async fn create_account(&self, email: &str, password_hash: &str) -> StoreResult<Account> {
        let mut tx = self.write().await?;
        let id: Option<i64> = sqlx::query_scalar(
            "INSERT INTO accounts (email, password_hash) VALUES (?1, ?2) \
             ON CONFLICT (email) DO NOTHING RETURNING id",
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
                "INSERT INTO mailboxes (account_id, name, role, sort_order) VALUES (?1, ?2, ?3, ?4) \
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
        let row: Option<(i64, String, String)> =
            sqlx::query_as("SELECT id, email, password_hash FROM accounts WHERE email = ?1")
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
        let done = sqlx::query("UPDATE accounts SET password_hash = ?2 WHERE email = ?1")
            .bind(email)
            .bind(password_hash)
            .execute(&self.writer)
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }

    async fn remove_account(&self, email: &str) -> StoreResult<()> {
        let mut tx = self.write().await?;
        let id: Option<i64> = sqlx::query_scalar("SELECT id FROM accounts WHERE email = ?1")
            .bind(email)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(id) = id else {
            return Err(StoreError::NotFound);
        };
        // Children first: mailboxes reference each other through parent_id.
        for statement in [
            "DELETE FROM emails WHERE account_id = ?1",
            "UPDATE mailboxes SET parent_id = NULL WHERE account_id = ?1",
            "DELETE FROM mailboxes WHERE account_id = ?1",
            "DELETE FROM thread_refs WHERE account_id = ?1",
            "DELETE FROM account_blobs WHERE account_id = ?1",
            "DELETE FROM accounts WHERE id = ?1",
        ] {
            sqlx::query(statement).bind(id).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn states(&self, account: i64) -> StoreResult<States> {
        let row: Option<(i64, i64, i64)> = sqlx::query_as(
            "SELECT email_state, mailbox_state, thread_state FROM accounts WHERE id = ?1",
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
            "WITH m AS (SELECT * FROM mailboxes WHERE account_id = ?1), \
             c AS (SELECT em.mailbox_id, count(*) AS total, \
                     sum(e.unread) AS unread, count(DISTINCT e.thread_id) AS threads, \
                     count(DISTINCT CASE WHEN e.unread THEN e.thread_id END) AS unread_threads \
                   FROM email_mailboxes em \
                   JOIN (SELECT id, thread_id, \
                           (instr(' ' || keywords || ' ', ' $seen ') = 0 \
                            AND instr(' ' || keywords || ' ', ' $draft ') = 0) AS unread \
                         FROM emails WHERE account_id = ?1) e ON e.id = em.email_id \
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
        let found: Option<i64> =
            sqlx::query_scalar("SELECT 1 FROM mailboxes WHERE id = ?1 AND account_id = ?2")
                .bind(mailbox)
                .bind(account)
                .fetch_optional(&self.pool)
                .await?;
        Ok(found.is_some())
    }

    async fn create_mailbox(&self, account: i64, mailbox: &NewMailbox) -> StoreResult<i64> {
        let mut tx = self.write().await?;
        if let Some(parent) = mailbox.parent_id {
            check_mailboxes_owned(&mut tx, account, &[parent]).await?;
        }
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO mailboxes (account_id, parent_id, name, role, sort_order, is_subscribed) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING id",
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
        check_mailboxes_owned(&mut tx, account, &[id]).await?;
        if let Some(Some(parent)) = patch.parent_id {
            check_mailboxes_owned(&mut tx, account, &[parent]).await?;
        }
        sqlx::query(
            "UPDATE mailboxes SET \
             parent_id = CASE WHEN ?2 THEN ?3 ELSE parent_id END, \
             name = coalesce(?4, name), \
             role = CASE WHEN ?5 THEN ?6 ELSE role END, \
             sort_order = coalesce(?7, sort_order), \
             is_subscribed = coalesce(?8, is_subscribed) \
             WHERE id = ?1",
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
        check_mailboxes_owned(&mut tx, account, &[id]).await?;
        let children: i64 =
            sqlx::query_scalar("SELECT count(*) FROM mailboxes WHERE parent_id = ?1")
                .bind(id)
                .fetch_one(&mut *tx)
                .await?;
        if children > 0 {
            return Err(StoreError::MailboxHasChild);
        }
        let members: Vec<(i64, i64)> = sqlx::query_as(
            "SELECT em.email_id, (SELECT count(*) FROM email_mailboxes o WHERE o.email_id = em.email_id) \
             FROM email_mailboxes em WHERE em.mailbox_id = ?1",
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
        sqlx::query("DELETE FROM email_mailboxes WHERE mailbox_id = ?1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM mailboxes WHERE id = ?1")
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
        let mut mailbox_ids: Vec<i64> = emails.iter().flat_map(|e| e.mailbox_ids.clone()).collect();
        mailbox_ids.sort_unstable();
        mailbox_ids.dedup();
        check_mailboxes_owned(&mut tx, account, &mailbox_ids).await?;
        // Duplicates, ids and threads planned in memory (insert_plan).
        let stored: HashMap<String, i64> = sqlx::query_as(
            "SELECT blob_id, id FROM emails WHERE account_id = ?1 \
             AND blob_id IN (SELECT value FROM json_each(?2))",
        )
        .bind(account)
        .bind(
            serde_json::to_string(&emails.iter().map(|e| &e.blob_id).collect::<Vec<_>>())
                .unwrap_or_else(|_| "[]".to_string()),
        )
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .collect();
        let new_count = insert_plan::new_count(emails, &stored);
        // AUTOINCREMENT: ids above every id ever given, as SQLite would pick
        // them; the write lock is held, so no other writer takes them.
        let last: i64 = sqlx::query_scalar(
            "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'emails'), 0), \
             coalesce((SELECT max(id) FROM emails), 0))",
        )
        .fetch_one(&mut *tx)
        .await?;
        let ids: Vec<i64> = (1..=new_count as i64).map(|n| last + n).collect();
        let keys = insert_plan::ref_keys(emails, str::to_string);
        let stored_refs: Vec<ThreadRef> = if keys.is_empty() || new_count == 0 {
            Vec::new()
        } else {
            sqlx::query_as::<_, (String, i64, String)>(
                "SELECT message_id, thread_id, base_subject FROM thread_refs \
                 WHERE account_id = ?1 AND message_id IN (SELECT value FROM json_each(?2))",
            )
            .bind(account)
            .bind(serde_json::to_string(&keys).unwrap_or_else(|_| "[]".to_string()))
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
        let plan = insert_plan::plan(
            emails,
            stored,
            ids,
            stored_refs,
            str::to_string,
            str::to_string,
        )?;
        insert_planned(&mut tx, account, &plan).await?;
        let new_ids = plan.new_ids();
        // A thread with none of its emails stored before this batch is new.
        let existed: HashSet<i64> = if new_ids.is_empty() {
            HashSet::new()
        } else {
            sqlx::query_scalar(
                "SELECT DISTINCT thread_id FROM emails WHERE account_id = ?1 \
                 AND thread_id IN (SELECT value FROM json_each(?2)) \
                 AND id NOT IN (SELECT value FROM json_each(?3))",
            )
            .bind(account)
            .bind(id_list(&plan.threads()))
            .bind(id_list(&new_ids))
            .fetch_all(&mut *tx)
            .await?
            .into_iter()
            .collect()
        };
        let set = plan.changes(&existed);
        record(&mut tx, account, &set).await?;
        tx.commit().await?;
        Ok(plan.outcomes)
    }

    async fn email_meta(&self, account: i64, ids: &[i64]) -> StoreResult<Vec<EmailMeta>> {
        let rows = sqlx::query(
            "SELECT e.id, e.blob_id, e.thread_id, e.size, e.received_at, e.keywords, \
             (SELECT group_concat(x.mailbox_id) FROM email_mailboxes x WHERE x.email_id = e.id) \
             FROM json_each(?2) AS j CROSS JOIN emails e ON e.id = j.value WHERE e.account_id = ?1",
        )
        .bind(account)
        .bind(id_list(ids))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(meta_from_row).collect())
    }

    /// One statement and one row: the Email state and the metadata of all
    /// ids as a JSON array, so the call pays one trip to the database thread
    /// instead of one per row.
    async fn email_meta_and_state(
        &self,
        account: i64,
        ids: &[i64],
    ) -> StoreResult<(Vec<EmailMeta>, i64)> {
        let row: Option<(i64, String)> = sqlx::query_as(
            "SELECT a.email_state, (SELECT json_group_array(json_array(e.id, e.blob_id, e.thread_id, \
               e.size, e.received_at, e.keywords, \
               (SELECT group_concat(x.mailbox_id) FROM email_mailboxes x WHERE x.email_id = e.id))) \
               FROM json_each(?2) AS j CROSS JOIN emails e ON e.id = j.value WHERE e.account_id = ?1) \
             FROM accounts a WHERE a.id = ?1",
        )
        .bind(account)
        .bind(id_list(ids))
        .fetch_optional(&self.pool)
        .await?;
        let (state, rows) = row.ok_or(StoreError::NotFound)?;
        type MetaRow = (i64, String, i64, i64, i64, String, Option<String>);
        let rows: Vec<MetaRow> = serde_json::from_str(&rows)
            .map_err(|e| StoreError::Database(sqlx::Error::Decode(Box::new(e))))?;
        let metas = rows
            .into_iter()
            .map(
                |(id, blob_id, thread_id, size, received_at, keywords, mailboxes)| EmailMeta {
                    id,
                    blob_id,
                    thread_id,
                    size,
                    received_at,
                    keywords: keywords_from_column(&keywords),
                    mailbox_ids: mailbox_ids_from_column(mailboxes),
                },
            )
            .collect();
        Ok((metas, state))
    }

    async fn header_blocks(&self, account: i64, ids: &[i64]) -> StoreResult<Vec<(i64, Vec<u8>)>> {
        Ok(sqlx::query_as(
            "SELECT h.email_id, h.header_block FROM json_each(?2) AS j \
             CROSS JOIN emails e ON e.id = j.value CROSS JOIN email_headers h ON h.email_id = e.id \
             WHERE e.account_id = ?1",
        )
        .bind(account)
        .bind(id_list(ids))
        .fetch_all(&self.pool)
        .await?)
    }

    async fn fast_views(&self, account: i64, ids: &[i64]) -> StoreResult<Vec<(i64, FastView)>> {
        let rows: Vec<(i64, String, bool)> = sqlx::query_as(
            "SELECT f.email_id, f.preview, f.has_attachment FROM json_each(?2) AS j \
             CROSS JOIN emails e ON e.id = j.value CROSS JOIN fast_view f ON f.email_id = e.id \
             WHERE e.account_id = ?1",
        )
        .bind(account)
        .bind(id_list(ids))
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
        let mut tx = self.write().await?;
        for (id, view) in rows {
            // The email may have been destroyed meanwhile: write only if it exists.
            sqlx::query(
                "INSERT OR REPLACE INTO fast_view (email_id, preview, has_attachment) \
                 SELECT ?1, ?2, ?3 WHERE EXISTS (SELECT 1 FROM emails WHERE id = ?1)",
            )
            .bind(id)
            .bind(&view.preview)
            .bind(view.has_attachment)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn clear_fast_views(&self, account: Option<i64>) -> StoreResult<u64> {
        let done = sqlx::query(
            "DELETE FROM fast_view WHERE ?1 IS NULL \
             OR email_id IN (SELECT id FROM emails WHERE account_id = ?1)",
        )
        .bind(account)
        .execute(&self.writer)
        .await?;
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
            "SELECT e.id, e.blob_id FROM emails e WHERE e.id > ?2 \
             AND (?1 IS NULL OR e.account_id = ?1) \
             AND (NOT ?4 OR NOT EXISTS (SELECT 1 FROM fast_view f WHERE f.email_id = e.id)) \
             ORDER BY e.id LIMIT ?3",
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
            "SELECT em.email_id, e.thread_id FROM email_mailboxes em \
             JOIN emails e ON e.id = em.email_id WHERE em.mailbox_id = ?1 \
             ORDER BY em.received_at DESC, em.email_id DESC LIMIT ?2 OFFSET ?3"
        } else {
            "SELECT em.email_id, e.thread_id FROM email_mailboxes em \
             JOIN emails e ON e.id = em.email_id WHERE em.mailbox_id = ?1 \
             ORDER BY em.received_at ASC, em.email_id ASC LIMIT ?2 OFFSET ?3"
        };
        let ids: Vec<(i64, i64)> = sqlx::query_as(sql)
            .bind(mailbox)
            .bind(limit)
            .bind(position)
            .fetch_all(&self.pool)
            .await?;
        let total: i64 =
            sqlx::query_scalar("SELECT count(*) FROM email_mailboxes WHERE mailbox_id = ?1")
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
        let rows = sqlx::query(
            "SELECT e.id, e.blob_id, e.thread_id, e.size, e.received_at, e.keywords, \
               (SELECT group_concat(x.mailbox_id) FROM email_mailboxes x WHERE x.email_id = e.id), \
               e.sent_at, e.message_id, e.base_subject, e.subject, e.from_sort, e.to_sort, \
               e.from_text, e.to_text, e.cc_text, e.bcc_text, e.has_attachment \
             FROM emails e WHERE e.account_id = ?1 AND (?2 IS NULL OR e.id IN \
               (SELECT email_id FROM email_mailboxes WHERE mailbox_id = ?2))",
        )
        .bind(account)
        .bind(in_mailbox)
        .fetch_all(&self.pool)
        .await?;
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
        let ids: Vec<i64> = updates.iter().map(|u| u.id).collect();
        let rows = sqlx::query(
            "SELECT e.id, e.keywords, \
               (SELECT group_concat(x.mailbox_id) FROM email_mailboxes x WHERE x.email_id = e.id) \
             FROM emails e WHERE e.account_id = ?1 AND e.id IN (SELECT value FROM json_each(?2))",
        )
        .bind(account)
        .bind(id_list(&ids))
        .fetch_all(&mut *tx)
        .await?;
        let before: HashMap<i64, (Vec<String>, Vec<i64>)> = rows
            .iter()
            .map(|row| {
                (
                    row.get::<i64, _>(0),
                    (
                        keywords_from_column(row.get::<&str, _>(1)),
                        mailbox_ids_from_column(row.get(2)),
                    ),
                )
            })
            .collect();
        let mut wanted: Vec<i64> = updates
            .iter()
            .flat_map(|u| u.mailbox_ids.additions().copied())
            .collect();
        wanted.sort_unstable();
        wanted.dedup();
        let owned: HashSet<i64> = sqlx::query_scalar(
            "SELECT id FROM mailboxes WHERE account_id = ?1 \
             AND id IN (SELECT value FROM json_each(?2))",
        )
        .bind(account)
        .bind(id_list(&wanted))
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .collect();
        let (current, outcomes) = super::apply_updates(&before, &owned, updates);
        let mut set = ChangeSet::default();
        let mut changed: Vec<&i64> = current.keys().collect();
        changed.sort_unstable();
        for id in changed {
            let (keywords, mailboxes) = &current[id];
            let (old_keywords, old_mailboxes) = &before[id];
            if keywords != old_keywords {
                sqlx::query("UPDATE emails SET keywords = ?2 WHERE id = ?1")
                    .bind(id)
                    .bind(keywords_to_column(keywords))
                    .execute(&mut *tx)
                    .await?;
            }
            if mailboxes != old_mailboxes {
                set_memberships(&mut tx, *id, mailboxes).await?;
            }
            super::record_email_update(
                &mut set,
                *id,
                (old_keywords, old_mailboxes),
                (keywords, mailboxes),
            );
        }
        record(&mut tx, account, &set).await?;
        tx.commit().await?;
        Ok(outcomes)
    }

    async fn destroy_emails(&self, account: i64, ids: &[i64]) -> StoreResult<Vec<i64>> {
        let mut tx = self.write().await?;
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
            "SELECT email_state, mailbox_state, thread_state, changes_from FROM accounts WHERE id = ?1",
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
            let rows: Vec<(i64, i64, i64, bool)> = sqlx::query_as(
                "SELECT modseq, object_id, kind, counts_only FROM changes \
                 WHERE account_id = ?1 AND type = ?2 \
                 AND (modseq > ?3 OR (modseq = ?3 AND object_id > ?4)) AND modseq <= ?5 \
                 ORDER BY modseq, object_id LIMIT ?6",
            )
            .bind(account)
            .bind(kind as i64)
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
                    kind: ChangeKind::from_code(kind),
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
        let done = sqlx::query("DELETE FROM changes WHERE account_id = ?1 AND modseq <= ?2")
            .bind(account)
            .bind(through_modseq)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "UPDATE accounts SET changes_from = max(changes_from, min(?2, modseq)) WHERE id = ?1",
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
            "SELECT t.email_id, (SELECT count(*) FROM email_mailboxes o WHERE o.mailbox_id = ?1 \
               AND (o.received_at, o.email_id) > (t.received_at, t.email_id)) \
             FROM email_mailboxes t WHERE t.mailbox_id = ?1 \
             AND t.email_id IN (SELECT value FROM json_each(?2))"
        } else {
            "SELECT t.email_id, (SELECT count(*) FROM email_mailboxes o WHERE o.mailbox_id = ?1 \
               AND (o.received_at, o.email_id) < (t.received_at, t.email_id)) \
             FROM email_mailboxes t WHERE t.mailbox_id = ?1 \
             AND t.email_id IN (SELECT value FROM json_each(?2))"
        };
        Ok(sqlx::query_as(sql)
            .bind(mailbox)
            .bind(id_list(ids))
            .fetch_all(&self.pool)
            .await?)
    }

    async fn thread_emails(
        &self,
        account: i64,
        thread_ids: &[i64],
    ) -> StoreResult<Vec<(i64, Vec<i64>)>> {
        let rows: Vec<(i64, i64)> = sqlx::query_as(
            "SELECT thread_id, id FROM emails WHERE account_id = ?1 \
             AND thread_id IN (SELECT value FROM json_each(?2)) ORDER BY thread_id, received_at, id",
        )
        .bind(account)
        .bind(id_list(thread_ids))
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
            "INSERT OR IGNORE INTO account_blobs (account_id, blob_id, size, created_at) \
             VALUES (?1, ?2, ?3, strftime('%s','now'))",
        )
        .bind(account)
        .bind(blob_id)
        .bind(size)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    async fn has_blob(&self, account: i64, blob_id: &str) -> StoreResult<bool> {
        let found: Option<i64> = sqlx::query_scalar(
            "SELECT 1 FROM account_blobs WHERE account_id = ?1 AND blob_id = ?2",
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

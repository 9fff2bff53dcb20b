//! The one [`Store`]: every storage operation written once over a
//! [`Dialect`] (SQLite or PostgreSQL). Transactions, binds, row decoding,
//! change recording and state counters live here; the dialect holds the SQL
//! text that differs, the list binds, locking, what text can hold and the
//! full-text query's shape. Not yet as wanted (issue 44): SQLite's hot
//! reads (rusqlite, `hot_read.rs`) and its search-key walk are called from
//! here, not from behind the dialect.
//!
//! - A write that changes an account runs in one transaction that starts
//!   by taking the account's write lock ([`Statements::lock_account`]; on
//!   SQLite the transaction itself holds the database's one write lock)
//!   and ends by [`SqlStore::record`]ing its changes, so writers of one
//!   account serialize and state counters, duplicate checks and threading
//!   see each other's rows. Writes outside any account's objects (tokens,
//!   server keys, the delivery queue's leases) take no account lock.
//! - Ingest's writes are batched: rows go in with one multi-row statement
//!   per table ([`SqlStore::insert_rows`], at most [`MAX_BINDS`] bound
//!   values a statement), and updates and deletes take id lists. A few
//!   small writes (a submission's deliveries, the JMAP mirror's names) still
//!   insert a row a statement.
//! - Batched reads bind an id list as one value ([`Dialect::ids`]): one
//!   static, cached statement whatever the number of ids.

use std::collections::{HashMap, HashSet};
use std::marker::PhantomData;
use std::sync::Arc;

use async_trait::async_trait;
use futures::TryStreamExt;
use sqlx::query_builder::Separated;
use sqlx::{ColumnIndex, Database, Encode, Executor, IntoArguments, Pool, QueryBuilder, Row, Type};

use super::change_log::{ChangeCollector, ChangeSet, LOG_BATCH, LogRow, check_since};
use super::columns::{distinct, ids_from_csv, keywords_from_column, keywords_to_column};
use super::dialect::{Column, Dialect};
use super::hot_read::{HOT_IDS, HotReader};
use super::insert_plan::{self, InsertPlan, ThreadRef};
use super::raw::{EmailRecord, RawCursor, RawRows, RawTable, RowCounts};
use super::{
    Account, ApiToken, ChangeKind, ChangeType, Changes, Delivery, EmailIndex, EmailLists,
    EmailMeta, EmailUpdate, FastView, IdentityPatch, IdentityRow, Inserted, LogPosition,
    MailboxPatch, MailboxRow, MirroredEmail, NewEmail, NewMailbox, QueryRow, Quota, ROLE_MAILBOXES,
    SearchText, SendLimits, States, Store, StoreError, StoreResult, SubmissionRow, TextSearch,
    UpdateOutcome, UpstreamCopy, UpstreamMailbox, VacationResponse,
};
use rusqlite::OptionalExtension;

/// The most emails a mailbox may hold for its list view's count to run hot
/// (`mailbox_emails_by_received`): the count reads at most this many index
/// entries on the calling thread; a larger mailbox is counted by the pool.
const HOT_COUNT: i64 = 10_000;

/// Bound values per multi-row statement: below SQLite's 32,766 host
/// parameters and PostgreSQL's 65,535.
pub const MAX_BINDS: usize = 30_000;

/// A full-text index row to write: (email id, account, receivedAt in
/// seconds since 1970, the words).
pub(super) type SearchRow<'a> = (i64, i64, i64, &'a SearchText);

/// Search keys (SQLite, migration 0305): `partition << 40 | hour << 16 |
/// slot`. The partition is the account id's low 23 bits.
const SEARCH_KEY_PARTITIONS: i64 = (1 << 23) - 1;
/// The hour (since 1970) and slot bits of a key within its partition.
const SEARCH_KEY_IN_PARTITION: i64 = (1 << 40) - 1;
/// The hour field, once shifted down by 16.
const SEARCH_KEY_HOURS: i64 = (1 << 24) - 1;
/// The slot bits of a key.
const SEARCH_KEY_SLOTS: i64 = (1 << 16) - 1;

/// An open transaction of dialect `D`.
pub(super) type Tx<D> = sqlx::Transaction<'static, <D as Dialect>::Db>;

/// The store over dialect `D`: a read pool and a write pool (the same pool
/// on PostgreSQL; SQLite's one writer connection, for which this process's
/// writers queue instead of retrying the database lock).
pub struct SqlStore<D: Dialect> {
    pub(super) reader: Pool<D::Db>,
    pub(super) writer: Pool<D::Db>,
    /// SQLite's reads on the calling thread, tried before `reader` for the
    /// statements that have a hot form ([`HotReader`]); none on PostgreSQL.
    pub(super) hot: Option<Arc<HotReader>>,
    dialect: PhantomData<D>,
}

impl<D: Dialect> Clone for SqlStore<D> {
    fn clone(&self) -> Self {
        Self {
            reader: self.reader.clone(),
            writer: self.writer.clone(),
            hot: self.hot.clone(),
            dialect: PhantomData,
        }
    }
}

impl<D: Dialect> SqlStore<D> {
    /// A store over connected, migrated pools.
    pub(super) fn from_pools(reader: Pool<D::Db>, writer: Pool<D::Db>) -> Self {
        Self {
            reader,
            writer,
            hot: None,
            dialect: PhantomData,
        }
    }

    /// `read` on a hot connection ([`HotReader::try_read`]); `None` on
    /// PostgreSQL, or when it cannot run now: then the pool reads.
    pub(super) fn hot_read<T>(
        &self,
        read: impl FnOnce(&rusqlite::Connection) -> rusqlite::Result<T>,
    ) -> Option<T> {
        self.hot.as_ref()?.try_read(read)
    }

    /// This store, reading its hot statements through `hot` first.
    pub(super) fn with_hot_reader(mut self, hot: HotReader) -> Self {
        self.hot = Some(Arc::new(hot));
        self
    }
}

/// Unix seconds now (blob grants' `created_at`).
fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// A row of [`super::dialect::Statements::email_meta`].
type MetaRow<A> = (i64, String, i64, i64, i64, String, A);

fn meta<D: Dialect>(row: MetaRow<D::IdArray>) -> EmailMeta {
    let (id, blob_id, thread_id, size, received_at, keywords, mailboxes) = row;
    EmailMeta {
        id,
        blob_id,
        thread_id,
        size,
        received_at,
        keywords: keywords_from_column(&keywords),
        mailbox_ids: D::id_array(mailboxes),
    }
}

/// A row of [`super::dialect::Statements::email_lists`].
type ListsRow<A> = (i64, i64, i64, String, A);

/// The `thread_refs` rows of the batch's message ids.
fn thread_refs(rows: Vec<(String, i64, String)>) -> Vec<ThreadRef> {
    rows.into_iter()
        .map(|(message_id, thread_id, base_subject)| ThreadRef {
            message_id,
            thread_id,
            base_subject,
        })
        .collect()
}

/// Groups `(thread_id, email_id)` rows ordered by thread.
pub(super) fn group_threads<T: PartialEq, E>(rows: Vec<(T, E)>) -> Vec<(T, Vec<E>)> {
    let mut threads: Vec<(T, Vec<E>)> = Vec::new();
    for (thread_id, email_id) in rows {
        match threads.last_mut() {
            Some((last, emails)) if *last == thread_id => emails.push(email_id),
            _ => threads.push((thread_id, vec![email_id])),
        }
    }
    threads
}

impl<D: Dialect> SqlStore<D>
where
    for<'c> &'c mut <D::Db as Database>::Connection: Executor<'c, Database = D::Db>,
    <D::Db as Database>::Arguments: IntoArguments<D::Db>,
    usize: ColumnIndex<<D::Db as Database>::Row>,
    for<'s> &'s str: ColumnIndex<<D::Db as Database>::Row>,
    i16: Column<D::Db>,
    i64: Column<D::Db>,
    bool: Column<D::Db>,
    String: Column<D::Db>,
    Vec<u8>: Column<D::Db>,
    Option<i64>: Column<D::Db>,
    Option<bool>: Column<D::Db>,
    Option<String>: Column<D::Db>,
    for<'a> &'a str: Encode<'a, D::Db> + Type<D::Db>,
{
    /// `read` of every match of a full-text query on a reader connection,
    /// after the dialect's [`Dialect::FULL_TEXT_SETUP`] in one transaction
    /// with it where there is one.
    async fn full_text_read<T: Send, F>(&self, read: F) -> StoreResult<T>
    where
        F: Send
            + for<'c> FnOnce(
                &'c mut <D::Db as Database>::Connection,
            ) -> futures::future::BoxFuture<'c, Result<T, sqlx::Error>>,
    {
        let Some(setup) = D::FULL_TEXT_SETUP else {
            let mut connection = self.reader.acquire().await?;
            return Ok(read(&mut connection).await?);
        };
        let mut tx = self.reader.begin().await?;
        sqlx::raw_sql(setup).execute(&mut *tx).await?;
        let value = read(&mut tx).await?;
        tx.commit().await?;
        Ok(value)
    }

    /// A row of [`Statements::query_rows`](super::dialect::Statements::query_rows)
    /// and its siblings (the columns of `query_columns!`).
    fn query_row(row: &<D::Db as Database>::Row) -> QueryRow {
        QueryRow {
            meta: meta::<D>((
                row.get(0),
                row.get(1),
                row.get(2),
                row.get(3),
                row.get(4),
                row.get(5),
                row.get(6),
            )),
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
        }
    }

    /// Opens a write transaction; with `account`, takes that account's write
    /// lock first. `NotFound` when the account does not exist.
    pub(super) async fn write(&self, account: Option<i64>) -> StoreResult<Tx<D>> {
        let mut tx = match D::BEGIN_WRITE {
            Some(begin) => self.writer.begin_with(begin).await?,
            None => self.writer.begin().await?,
        };
        if let Some(account) = account {
            let found: Option<i64> = sqlx::query_scalar(D::SQL.lock_account)
                .bind(account)
                .fetch_optional(&mut *tx)
                .await?;
            found.ok_or(StoreError::NotFound)?;
        }
        Ok(tx)
    }

    /// Inserts `rows` with one multi-row statement per chunk:
    /// `{head} VALUES (…), (…) {tail}`, `push` binding the `columns` values
    /// of one row. Returns the rows written.
    pub(super) async fn insert_rows<T>(
        tx: &mut Tx<D>,
        head: &str,
        tail: &str,
        columns: usize,
        rows: &[T],
        mut push: impl FnMut(&mut Separated<'_, D::Db, &'static str>, &T),
    ) -> StoreResult<u64> {
        let mut written = 0;
        for chunk in rows.chunks((MAX_BINDS / columns.max(1)).max(1)) {
            let mut builder = QueryBuilder::<D::Db>::new(head);
            builder.push(" ");
            builder.push_values(chunk, |mut row, value| push(&mut row, value));
            builder.push(" ");
            builder.push(tail);
            written += D::rows_affected(&builder.build().execute(&mut **tx).await?);
        }
        Ok(written)
    }

    /// Advances the account's modseq and the states of the types the write
    /// changed, and appends its rows to the change log at the new modseq.
    /// Nothing when the write changed nothing.
    pub(super) async fn record(tx: &mut Tx<D>, account: i64, set: &ChangeSet) -> StoreResult<()> {
        if set.is_empty() {
            return Ok(());
        }
        let modseq: i64 = sqlx::query_scalar(
            "UPDATE accounts SET modseq = modseq + 1, \
             email_state = CASE WHEN $2 THEN modseq + 1 ELSE email_state END, \
             mailbox_state = CASE WHEN $3 THEN modseq + 1 ELSE mailbox_state END, \
             thread_state = CASE WHEN $4 THEN modseq + 1 ELSE thread_state END, \
             identity_state = CASE WHEN $5 THEN modseq + 1 ELSE identity_state END, \
             vacation_state = CASE WHEN $6 THEN modseq + 1 ELSE vacation_state END, \
             submission_state = CASE WHEN $7 THEN modseq + 1 ELSE submission_state END \
             WHERE id = $1 RETURNING modseq",
        )
        .bind(account)
        .bind(set.touches(ChangeType::Email))
        .bind(set.touches(ChangeType::Mailbox))
        .bind(set.touches(ChangeType::Thread))
        .bind(set.touches(ChangeType::Identity))
        .bind(set.touches(ChangeType::VacationResponse))
        .bind(set.touches(ChangeType::EmailSubmission))
        .fetch_one(&mut **tx)
        .await?;
        let rows: Vec<(i16, i64, i16, bool)> = set.rows().collect();
        Self::insert_rows(
            tx,
            "INSERT INTO changes (account_id, modseq, type, object_id, kind, counts_only)",
            "",
            6,
            &rows,
            |row, (kind_of, object, kind, counts_only)| {
                row.push_bind(account)
                    .push_bind(modseq)
                    .push_bind(*kind_of)
                    .push_bind(*object)
                    .push_bind(*kind)
                    .push_bind(*counts_only);
            },
        )
        .await?;
        Ok(())
    }

    /// `NotFound` unless the account owns every mailbox of `mailbox_ids`.
    async fn check_mailboxes_owned(
        tx: &mut Tx<D>,
        account: i64,
        mailbox_ids: &[i64],
    ) -> StoreResult<()> {
        let wanted = distinct(mailbox_ids);
        if wanted.is_empty() {
            return Ok(());
        }
        let owned = Self::owned_mailboxes(tx, account, &wanted).await?;
        if owned.len() != wanted.len() {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }

    /// Which of `mailbox_ids` the account owns.
    async fn owned_mailboxes(
        tx: &mut Tx<D>,
        account: i64,
        mailbox_ids: &[i64],
    ) -> StoreResult<HashSet<i64>> {
        Ok(sqlx::query_scalar(D::SQL.owned_mailboxes)
            .bind(account)
            .bind(D::ids(mailbox_ids))
            .fetch_all(&mut **tx)
            .await?
            .into_iter()
            .collect())
    }

    /// Keywords, memberships, thread and receivedAt of the account's emails
    /// among `ids`, read inside the write transaction.
    async fn email_lists(
        tx: &mut Tx<D>,
        account: i64,
        ids: &[i64],
    ) -> StoreResult<HashMap<i64, (i64, i64, EmailLists)>> {
        let rows: Vec<ListsRow<D::IdArray>> = sqlx::query_as(D::SQL.email_lists)
            .bind(account)
            .bind(D::ids(ids))
            .fetch_all(&mut **tx)
            .await?;
        Ok(rows
            .into_iter()
            .map(|(id, thread, received_at, keywords, mailboxes)| {
                let lists = (keywords_from_column(&keywords), D::id_array(mailboxes));
                (id, (thread, received_at, lists))
            })
            .collect())
    }

    /// Deletes emails of the account and their blob grants, recording the
    /// emails, their mailboxes' counts and their threads in `set`.
    async fn delete_emails(
        tx: &mut Tx<D>,
        account: i64,
        ids: &[i64],
        set: &mut ChangeSet,
    ) -> StoreResult<Vec<i64>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let before = Self::email_lists(tx, account, ids).await?;
        let destroyed: Vec<(i64, String)> = sqlx::query_as(D::SQL.delete_emails)
            .bind(account)
            .bind(D::ids(ids))
            .fetch_all(&mut **tx)
            .await?;
        let blob_ids: Vec<&str> = destroyed.iter().map(|(_, blob)| blob.as_str()).collect();
        sqlx::query(D::SQL.delete_blob_grants)
            .bind(account)
            .bind(D::texts(&blob_ids))
            .execute(&mut **tx)
            .await?;
        let mut threads = Vec::new();
        for (id, _) in &destroyed {
            let (thread, _, (_, mailboxes)) = &before[id];
            set.record(ChangeType::Email, *id, ChangeKind::Destroyed);
            for mailbox in mailboxes {
                set.counts(*mailbox);
            }
            threads.push(*thread);
        }
        let threads = distinct(&threads);
        let remaining: HashSet<i64> = sqlx::query_scalar(D::SQL.threads_remaining)
            .bind(account)
            .bind(D::ids(&threads))
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

    /// Writes the planned new emails of a batch ([`insert_plan`]) as
    /// [`EmailRecord`]s (the one email writer, shared with `migrate-store`),
    /// then their blob grants and thread refs.
    async fn insert_planned(
        tx: &mut Tx<D>,
        account: i64,
        plan: &InsertPlan<'_>,
    ) -> StoreResult<()> {
        let records: Vec<EmailRecord> = plan
            .new
            .iter()
            .map(|planned| EmailRecord::new(account, planned.id, planned.thread_id, planned.email))
            .collect();
        Self::write_emails(tx, &records).await?;
        let created_at = now();
        Self::insert_rows(
            tx,
            "INSERT INTO account_blobs (account_id, blob_id, size, created_at)",
            "ON CONFLICT DO NOTHING",
            4,
            &records,
            |row, record| {
                row.push_bind(account)
                    .push_bind(record.blob_id.clone())
                    .push_bind(record.size)
                    .push_bind(created_at);
            },
        )
        .await?;
        Self::insert_rows(
            tx,
            "INSERT INTO thread_refs (account_id, message_id, thread_id, base_subject)",
            "ON CONFLICT DO NOTHING",
            4,
            &plan.refs,
            |row, r| {
                row.push_bind(account)
                    .push_bind(r.message_id.clone())
                    .push_bind(r.thread_id)
                    .push_bind(r.base_subject.clone());
            },
        )
        .await?;
        Ok(())
    }

    /// Inserts `(mailbox_id, received_at, email_id)` membership rows.
    pub(super) async fn insert_memberships(
        tx: &mut Tx<D>,
        rows: &[(i64, i64, i64)],
    ) -> StoreResult<u64> {
        Self::insert_rows(
            tx,
            "INSERT INTO email_mailboxes (mailbox_id, received_at, email_id)",
            "ON CONFLICT DO NOTHING",
            3,
            rows,
            |row, (mailbox, received_at, email)| {
                row.push_bind(*mailbox)
                    .push_bind(*received_at)
                    .push_bind(*email);
            },
        )
        .await
    }

    /// Writes projection rows: replacing rows already there, or, without
    /// `replace`, keeping them.
    pub(super) async fn write_fast_views(
        tx: &mut Tx<D>,
        rows: &[(i64, &FastView)],
        replace: bool,
    ) -> StoreResult<u64> {
        let tail = if replace {
            "ON CONFLICT (email_id) DO UPDATE \
             SET preview = excluded.preview, has_attachment = excluded.has_attachment"
        } else {
            "ON CONFLICT DO NOTHING"
        };
        Self::insert_rows(
            tx,
            "INSERT INTO fast_view (email_id, preview, has_attachment)",
            tail,
            3,
            rows,
            |row, (id, view)| {
                row.push_bind(*id)
                    .push_bind(D::text(&view.preview).into_owned())
                    .push_bind(view.has_attachment);
            },
        )
        .await
    }

    /// Of `rows` keyed by email id (the last row of an id wins), those of
    /// emails that still exist, held against deletion until `tx` commits
    /// where the database needs it: a projection, tree or index row written
    /// after its email was destroyed would outlive it.
    async fn live_rows<'r, T>(
        tx: &mut Tx<D>,
        rows: &'r [(i64, T)],
    ) -> StoreResult<Vec<(i64, &'r T)>> {
        let latest: HashMap<i64, &T> = rows.iter().map(|(id, row)| (*id, row)).collect();
        let ids = distinct(&rows.iter().map(|(id, _)| *id).collect::<Vec<_>>());
        let live: Vec<i64> = sqlx::query_scalar(D::SQL.live_emails)
            .bind(D::ids(&ids))
            .fetch_all(&mut **tx)
            .await?;
        Ok(live.iter().map(|id| (*id, latest[id])).collect())
    }

    /// Writes full-text index rows of emails that have none yet, by account
    /// and receivedAt: SQLite's search keys then ascend through a batch, and
    /// FTS5 keeps them in memory until commit instead of writing a segment
    /// each time a key is lower than the last (migration 0305). An email
    /// without a word (no subject, address or text) gets no row: nothing
    /// could find it.
    pub(super) async fn write_search_texts(
        tx: &mut Tx<D>,
        rows: &[SearchRow<'_>],
    ) -> StoreResult<u64> {
        let mut rows: Vec<SearchRow<'_>> = rows
            .iter()
            .filter(|(_, _, _, text)| !text.headers.is_empty() || !text.body.is_empty())
            .copied()
            .collect();
        rows.sort_by_key(|(id, account, received_at, _)| (*account, *received_at, *id));
        Self::insert_rows(
            tx,
            D::SQL.search_insert_head,
            D::SQL.search_insert_tail,
            5,
            &rows,
            |row, (id, account, received_at, text)| {
                let (headers, body) = D::search_columns(text);
                row.push_bind(*id)
                    .push_bind(*account)
                    .push_bind(*received_at)
                    .push_bind(D::text(&headers).into_owned())
                    .push_bind(D::text(&body).into_owned());
            },
        )
        .await
    }

    /// One page, newest first, of the matches of `query` (in `mailbox`)
    /// through [`Statements::search_walk`](super::dialect::Statements),
    /// one statement read as a stream: matches arrive by search key, whose
    /// hour is never earlier than their email's receivedAt (migration 0305).
    /// Once `position + limit` matches are in, the walk reads on to the end
    /// of the last one's hour; there, if that many are at least as new as
    /// the hour's start, it stops: every match not yet read has a lower key,
    /// an earlier hour, so is older. Else it goes on an hour further.
    /// Reads the page and about one hour of matches, not every match.
    async fn search_walk(
        &self,
        walk: &'static str,
        account: i64,
        query: &str,
        mailbox: Option<i64>,
        position: i64,
        limit: i64,
    ) -> StoreResult<Vec<i64>> {
        if limit <= 0 {
            return Ok(Vec::new());
        }
        let need = (position.max(0) + limit) as usize;
        let partition = (account & SEARCH_KEY_PARTITIONS) << 40;
        let mut matches = sqlx::query_as::<_, (i64, i64, i64)>(walk)
            .bind(account)
            .bind(query)
            .bind(mailbox)
            .bind(partition)
            .bind(partition | SEARCH_KEY_IN_PARTITION)
            .bind(-1_i64)
            .fetch(&self.reader);
        // (receivedAt, id) of the matches read; the hour (as a key) being read
        // once `need` are in.
        let mut seen: Vec<(i64, i64)> = Vec::with_capacity(need);
        let mut hour: Option<i64> = None;
        while let Some((key, id, received_at)) = matches.try_next().await? {
            if let Some(current) = hour.filter(|current| key < *current) {
                seen.sort_unstable_by(|a, b| b.cmp(a));
                let hour_start = ((current >> 16) & SEARCH_KEY_HOURS) * 3600;
                if seen[need - 1].0 >= hour_start {
                    break;
                }
                hour = Some(key & !SEARCH_KEY_SLOTS);
            }
            seen.push((received_at, id));
            if hour.is_none() && seen.len() == need {
                hour = Some(key & !SEARCH_KEY_SLOTS);
            }
        }
        seen.sort_unstable_by(|a, b| b.cmp(a));
        Ok(seen
            .into_iter()
            .skip(position.max(0) as usize)
            .take(limit as usize)
            .map(|(_, id)| id)
            .collect())
    }

    /// Writes stored part trees: replacing rows already there, or, without
    /// `replace`, keeping them.
    pub(super) async fn write_body_structures(
        tx: &mut Tx<D>,
        rows: &[(i64, &Vec<u8>)],
        replace: bool,
    ) -> StoreResult<u64> {
        let tail = if replace {
            "ON CONFLICT (email_id) DO UPDATE SET structure = excluded.structure"
        } else {
            "ON CONFLICT DO NOTHING"
        };
        Self::insert_rows(
            tx,
            "INSERT INTO body_structure (email_id, structure)",
            tail,
            2,
            rows,
            |row, (id, tree)| {
                row.push_bind(*id).push_bind((*tree).clone());
            },
        )
        .await
    }

    /// The account's quota and usage, read with `executor` (inside a write
    /// transaction: after its own writes). `NotFound` for no account.
    async fn read_quota<'e, E>(executor: E, account: i64) -> StoreResult<Quota>
    where
        E: Executor<'e, Database = D::Db>,
    {
        let row: Option<(Option<i64>, i64)> = sqlx::query_as(
            "SELECT quota_octets, \
               (SELECT CAST(coalesce(sum(size), 0) AS BIGINT) FROM account_blobs \
                WHERE account_id = $1) \
             FROM accounts WHERE id = $1",
        )
        .bind(account)
        .fetch_optional(executor)
        .await?;
        let (limit, used) = row.ok_or(StoreError::NotFound)?;
        Ok(Quota { limit, used })
    }

    /// `OverQuota` when the account has a quota and holds more than it
    /// after this transaction's writes.
    async fn check_quota(tx: &mut Tx<D>, account: i64) -> StoreResult<()> {
        let limit: Option<i64> =
            sqlx::query_scalar("SELECT quota_octets FROM accounts WHERE id = $1")
                .bind(account)
                .fetch_optional(&mut **tx)
                .await?
                .flatten();
        if limit.is_none() {
            return Ok(());
        }
        if Self::read_quota(&mut **tx, account).await?.would_exceed(0) {
            return Err(StoreError::OverQuota);
        }
        Ok(())
    }

    /// Replaces the keywords columns of `(id, keywords)`.
    async fn set_keywords(tx: &mut Tx<D>, rows: &[(i64, String)]) -> StoreResult<()> {
        Self::insert_rows(
            tx,
            "WITH v (id, keywords) AS (",
            ") UPDATE emails SET keywords = v.keywords FROM v WHERE emails.id = v.id",
            2,
            rows,
            |row, (id, keywords)| {
                row.push_bind(*id).push_bind(D::text(keywords).into_owned());
            },
        )
        .await?;
        Ok(())
    }
}

#[async_trait]
impl<D: Dialect> Store for SqlStore<D>
where
    for<'c> &'c mut <D::Db as Database>::Connection: Executor<'c, Database = D::Db>,
    <D::Db as Database>::Arguments: IntoArguments<D::Db>,
    usize: ColumnIndex<<D::Db as Database>::Row>,
    for<'s> &'s str: ColumnIndex<<D::Db as Database>::Row>,
    i16: Column<D::Db>,
    i64: Column<D::Db>,
    bool: Column<D::Db>,
    String: Column<D::Db>,
    Vec<u8>: Column<D::Db>,
    Option<i64>: Column<D::Db>,
    Option<bool>: Column<D::Db>,
    Option<String>: Column<D::Db>,
    for<'a> &'a str: Encode<'a, D::Db> + Type<D::Db>,
{
    async fn create_account(&self, email: &str, password_hash: &str) -> StoreResult<Account> {
        let mut tx = self.write(None).await?;
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
                "INSERT INTO mailboxes (account_id, name, role, sort_order) \
                 VALUES ($1, $2, $3, $4) RETURNING id",
            )
            .bind(id)
            .bind(*name)
            .bind(*role)
            .bind(order as i64 + 1)
            .fetch_one(&mut *tx)
            .await?;
            set.record(ChangeType::Mailbox, mailbox, ChangeKind::Created);
        }
        Self::create_own_identity(&mut tx, id, email, &mut set).await?;
        Self::record(&mut tx, id, &set).await?;
        tx.commit().await?;
        Ok(Account {
            id,
            email: email.to_string(),
            password_hash: password_hash.to_string(),
        })
    }

    async fn account_by_email(&self, email: &str) -> StoreResult<Option<Account>> {
        if email.contains('\0') {
            return Ok(None); // no login holds NUL (PostgreSQL text cannot)
        }
        // Every session GET checks its credential here again (issue 20's
        // hot read: no hop to the pool's thread).
        let hot = self.hot_read(|connection| {
            connection
                .prepare_cached(D::SQL.account_by_email)?
                .query_row(rusqlite::named_params! {"$1": email}, |row| {
                    Ok(Account {
                        id: row.get(0)?,
                        email: row.get(1)?,
                        password_hash: row.get(2)?,
                    })
                })
                .optional()
        });
        if let Some(found) = hot {
            return Ok(found);
        }
        Ok(sqlx::query_as(D::SQL.account_by_email)
            .bind(email)
            .fetch_optional(&self.reader)
            .await?)
    }

    async fn list_accounts(&self) -> StoreResult<Vec<Account>> {
        Ok(
            sqlx::query_as("SELECT id, email, password_hash FROM accounts ORDER BY id")
                .fetch_all(&self.reader)
                .await?,
        )
    }

    async fn set_password(&self, email: &str, password_hash: &str) -> StoreResult<()> {
        if email.contains('\0') {
            return Err(StoreError::NotFound);
        }
        let done = sqlx::query(D::SQL.set_password)
            .bind(email)
            .bind(password_hash)
            .execute(&self.writer)
            .await?;
        if D::rows_affected(&done) == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }

    async fn remove_account(&self, email: &str) -> StoreResult<Vec<String>> {
        if email.contains('\0') {
            return Err(StoreError::NotFound);
        }
        let mut tx = self.write(None).await?;
        let id: Option<i64> = sqlx::query_scalar(D::SQL.account_to_remove)
            .bind(email)
            .fetch_optional(&mut *tx)
            .await?;
        let id = id.ok_or(StoreError::NotFound)?;
        let blobs: Vec<String> = sqlx::query_scalar(
            "SELECT blob_id FROM account_blobs WHERE account_id = $1 \
             UNION SELECT blob_id FROM emails WHERE account_id = $1",
        )
        .bind(id)
        .fetch_all(&mut *tx)
        .await?;
        // Children first: mailboxes reference each other through parent_id.
        for statement in [
            "DELETE FROM emails WHERE account_id = $1",
            "UPDATE mailboxes SET parent_id = NULL WHERE account_id = $1 AND parent_id IS NOT NULL",
            "DELETE FROM mailboxes WHERE account_id = $1",
            "DELETE FROM thread_refs WHERE account_id = $1",
            "DELETE FROM account_blobs WHERE account_id = $1",
            "DELETE FROM api_tokens WHERE account_id = $1",
            "DELETE FROM identities WHERE account_id = $1",
            "DELETE FROM account_aliases WHERE account_id = $1",
            "DELETE FROM vacation_responses WHERE account_id = $1",
            "DELETE FROM email_submissions WHERE account_id = $1",
            "DELETE FROM vacation_replies WHERE account_id = $1",
            "DELETE FROM send_log WHERE account_id = $1",
            "DELETE FROM accounts WHERE id = $1",
        ] {
            sqlx::query(statement).bind(id).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(blobs)
    }

    async fn account_by_id(&self, account: i64) -> StoreResult<Option<Account>> {
        Ok(
            sqlx::query_as("SELECT id, email, password_hash FROM accounts WHERE id = $1")
                .bind(account)
                .fetch_optional(&self.reader)
                .await?,
        )
    }

    async fn create_token(
        &self,
        account: i64,
        secret_sha256: &str,
        name: &str,
        created_at: i64,
        expires_at: Option<i64>,
    ) -> StoreResult<ApiToken> {
        if name.contains('\0') {
            return Err(StoreError::Conflict("a token name cannot hold NUL".into()));
        }
        let mut tx = self.write(Some(account)).await?;
        let token: ApiToken = sqlx::query_as(
            "INSERT INTO api_tokens (account_id, secret_sha256, name, created_at, expires_at) \
             SELECT id, $2, $3, $4, $5 FROM accounts WHERE id = $1 \
             RETURNING id, account_id, name, created_at, expires_at",
        )
        .bind(account)
        .bind(secret_sha256)
        .bind(name)
        .bind(created_at)
        .bind(expires_at)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or(StoreError::NotFound)?;
        tx.commit().await?;
        Ok(token)
    }

    async fn tokens(&self, account: i64) -> StoreResult<Vec<ApiToken>> {
        Ok(sqlx::query_as(
            "SELECT id, account_id, name, created_at, expires_at FROM api_tokens \
             WHERE account_id = $1 ORDER BY id",
        )
        .bind(account)
        .fetch_all(&self.reader)
        .await?)
    }

    async fn revoke_token(&self, account: i64, token: i64) -> StoreResult<()> {
        let done = sqlx::query("DELETE FROM api_tokens WHERE account_id = $1 AND id = $2")
            .bind(account)
            .bind(token)
            .execute(&self.writer)
            .await?;
        match D::rows_affected(&done) {
            0 => Err(StoreError::NotFound),
            _ => Ok(()),
        }
    }

    async fn account_by_token(
        &self,
        secret_sha256: &str,
        now: i64,
    ) -> StoreResult<Option<(Account, ApiToken)>> {
        let row: Option<(i64, String, String, i64, String, i64, Option<i64>)> = sqlx::query_as(
            "SELECT a.id, a.email, a.password_hash, t.id, t.name, t.created_at, t.expires_at \
             FROM api_tokens t JOIN accounts a ON a.id = t.account_id \
             WHERE t.secret_sha256 = $1 AND (t.expires_at IS NULL OR t.expires_at > $2)",
        )
        .bind(secret_sha256)
        .bind(now)
        .fetch_optional(&self.reader)
        .await?;
        Ok(row.map(
            |(id, email, password_hash, token, name, created_at, expires_at)| {
                (
                    Account {
                        id,
                        email,
                        password_hash,
                    },
                    ApiToken {
                        id: token,
                        account_id: id,
                        name,
                        created_at,
                        expires_at,
                    },
                )
            },
        ))
    }

    async fn search_index_unfilled(&self) -> StoreResult<bool> {
        Ok(sqlx::query_scalar(D::SQL.search_index_unfilled)
            .fetch_one(&self.reader)
            .await?)
    }

    async fn analyze(&self) -> StoreResult<()> {
        if let Some(statement) = D::ANALYZE {
            sqlx::raw_sql(statement).execute(&self.writer).await?;
        }
        Ok(())
    }

    async fn server_key(&self, name: &str) -> StoreResult<Vec<u8>> {
        let read = || {
            sqlx::query_scalar::<_, Vec<u8>>("SELECT key FROM server_keys WHERE name = $1")
                .bind(name)
        };
        if let Some(key) = read().fetch_optional(&self.reader).await? {
            return Ok(key);
        }
        // Two nodes may race to make it: the first insert wins, both read it.
        let fresh: [u8; 32] = rand::random();
        sqlx::query(
            "INSERT INTO server_keys (name, key) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
        )
        .bind(name)
        .bind(fresh.to_vec())
        .execute(&self.writer)
        .await?;
        Ok(read().fetch_one(&self.writer).await?)
    }

    async fn set_quota(&self, email: &str, octets: Option<i64>) -> StoreResult<()> {
        let Some(account) = self.account_by_email(email).await? else {
            return Err(StoreError::NotFound);
        };
        let done = sqlx::query("UPDATE accounts SET quota_octets = $2 WHERE id = $1")
            .bind(account.id)
            .bind(octets)
            .execute(&self.writer)
            .await?;
        if D::rows_affected(&done) == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }

    async fn quota(&self, account: i64) -> StoreResult<Quota> {
        Self::read_quota(&self.reader, account).await
    }

    async fn states(&self, account: i64) -> StoreResult<States> {
        const SQL: &str = "SELECT email_state, mailbox_state, thread_state, identity_state, \
             vacation_state, submission_state FROM accounts WHERE id = $1";
        let hot = self.hot.as_ref().and_then(|hot| hot.states(SQL, account));
        let row: Option<(i64, i64, i64, i64, i64, i64)> = match hot {
            Some(row) => row.map(|[a, b, c, d, e, f]| (a, b, c, d, e, f)),
            None => {
                sqlx::query_as(SQL)
                    .bind(account)
                    .fetch_optional(&self.reader)
                    .await?
            }
        };
        let (email, mailbox, thread, identity, vacation_response, email_submission) =
            row.ok_or(StoreError::NotFound)?;
        Ok(States {
            email,
            mailbox,
            thread,
            identity,
            vacation_response,
            email_submission,
        })
    }

    async fn identities(&self, account: i64) -> StoreResult<Vec<IdentityRow>> {
        self.read_identities(account).await
    }

    async fn create_identity(&self, account: i64, identity: &IdentityRow) -> StoreResult<i64> {
        self.insert_identity(account, identity).await
    }

    async fn update_identity(
        &self,
        account: i64,
        id: i64,
        patch: &IdentityPatch,
    ) -> StoreResult<()> {
        self.patch_identity(account, id, patch).await
    }

    async fn destroy_identity(&self, account: i64, id: i64) -> StoreResult<()> {
        self.delete_identity(account, id).await
    }

    async fn upstream_source(&self) -> StoreResult<Option<String>> {
        self.read_upstream_source().await
    }

    async fn set_upstream_source(&self, url: &str) -> StoreResult<()> {
        self.write_upstream_source(url).await
    }

    async fn upstream_mailboxes(&self, account: i64) -> StoreResult<Vec<UpstreamMailbox>> {
        self.read_upstream_mailboxes(account).await
    }

    async fn put_upstream_mailbox(
        &self,
        account: i64,
        mailbox: &UpstreamMailbox,
    ) -> StoreResult<()> {
        self.write_upstream_mailbox(account, mailbox).await
    }

    async fn upstream_uids(&self, mailbox: i64) -> StoreResult<Vec<UpstreamCopy>> {
        self.read_upstream_uids(mailbox).await
    }

    async fn record_upstream_uids(&self, mailbox: i64, copies: &[UpstreamCopy]) -> StoreResult<()> {
        self.write_upstream_uids(mailbox, copies).await
    }

    async fn upstream_locations(
        &self,
        account: i64,
        emails: &[i64],
    ) -> StoreResult<Vec<(i64, i64, i64, String)>> {
        self.read_upstream_locations(account, emails).await
    }

    async fn emails_of_blobs(
        &self,
        account: i64,
        blob_ids: &[&str],
    ) -> StoreResult<Vec<(String, i64)>> {
        self.read_emails_of_blobs(account, blob_ids).await
    }

    async fn upstream_cache_total(&self) -> StoreResult<i64> {
        self.read_upstream_cache_total().await
    }

    async fn upstream_cache_oldest(&self, limit: i64) -> StoreResult<Vec<(String, i64)>> {
        self.read_upstream_cache_oldest(limit).await
    }

    async fn mark_evicted(&self, blobs: &[(String, i64)]) -> StoreResult<()> {
        self.write_evicted(blobs).await
    }

    async fn unmark_evicted(&self, blobs: &[&str]) -> StoreResult<()> {
        self.delete_evicted(blobs).await
    }

    async fn evicted_among(&self, blobs: &[&str]) -> StoreResult<Vec<String>> {
        self.read_evicted_among(blobs).await
    }

    async fn upstream_blob_location(
        &self,
        blob_id: &str,
    ) -> StoreResult<Option<(i64, String, i64)>> {
        self.read_upstream_blob_location(blob_id).await
    }

    async fn record_upstream_sync(&self, account: i64, at: i64) -> StoreResult<()> {
        self.write_upstream_synced(account, at).await
    }

    async fn upstream_syncs(&self) -> StoreResult<Vec<(i64, i64)>> {
        self.read_upstream_syncs().await
    }

    async fn forget_upstream_uids(&self, mailbox: i64, uids: Option<&[i64]>) -> StoreResult<()> {
        self.delete_upstream_uids(mailbox, uids).await
    }

    async fn mirror_account(
        &self,
        upstream_id: &str,
    ) -> StoreResult<Option<(i64, Option<String>)>> {
        self.read_mirror_account(upstream_id).await
    }

    async fn put_mirror_account(&self, account: i64, upstream_id: &str) -> StoreResult<()> {
        self.write_mirror_account(account, upstream_id).await
    }

    async fn set_mirror_state(&self, account: i64, state: &str) -> StoreResult<()> {
        self.write_mirror_state(account, state).await
    }

    async fn mirror_mailboxes(&self, account: i64) -> StoreResult<Vec<(i64, String)>> {
        self.read_mirror_mailboxes(account).await
    }

    async fn put_mirror_mailbox(
        &self,
        account: i64,
        mailbox: i64,
        upstream_id: &str,
    ) -> StoreResult<()> {
        self.write_mirror_mailbox(account, mailbox, upstream_id)
            .await
    }

    async fn mirror_emails(
        &self,
        account: i64,
        local: Option<&[i64]>,
        upstream: Option<&[&str]>,
    ) -> StoreResult<Vec<MirroredEmail>> {
        self.read_mirror_emails(account, local, upstream).await
    }

    async fn put_mirror_emails(&self, account: i64, emails: &[MirroredEmail]) -> StoreResult<()> {
        self.write_mirror_emails(account, emails).await
    }

    async fn mirror_threads(
        &self,
        account: i64,
        threads: &[&str],
    ) -> StoreResult<Vec<(String, Vec<String>)>> {
        self.read_mirror_threads(account, threads).await
    }

    async fn mirror_census(&self, account: i64) -> StoreResult<(i64, i64)> {
        self.read_mirror_census(account).await
    }

    async fn aliases(&self, account: i64) -> StoreResult<Vec<String>> {
        self.read_aliases(account).await
    }

    async fn add_alias(&self, account: i64, address: &str) -> StoreResult<()> {
        self.insert_alias(account, address).await
    }

    async fn remove_alias(&self, account: i64, address: &str) -> StoreResult<bool> {
        self.delete_alias(account, address).await
    }

    async fn submissions(&self, account: i64) -> StoreResult<Vec<SubmissionRow>> {
        self.read_submissions(account).await
    }

    async fn submission(&self, account: i64, id: i64) -> StoreResult<Option<SubmissionRow>> {
        self.read_submission(account, id).await
    }

    async fn create_submission(
        &self,
        account: i64,
        submission: &SubmissionRow,
        deliveries: &[Delivery],
        limits: SendLimits,
    ) -> StoreResult<(i64, Vec<Delivery>)> {
        self.insert_submission(account, submission, deliveries, limits)
            .await
    }

    async fn sent_in_hour(&self, account: i64, now: i64) -> StoreResult<(i64, i64)> {
        Self::count_sent(&self.reader, account, now).await
    }

    async fn destroy_submission(&self, account: i64, id: i64) -> StoreResult<()> {
        self.delete_submission(account, id).await
    }

    async fn take_deliveries(
        &self,
        now: i64,
        lease: i64,
        limit: i64,
    ) -> StoreResult<Vec<Delivery>> {
        self.lease_deliveries(now, lease, limit).await
    }

    async fn finish_delivery(
        &self,
        delivery: &Delivery,
        statuses: &[(String, String)],
        retry: Option<(i64, String)>,
    ) -> StoreResult<bool> {
        self.record_delivery(delivery, statuses, retry).await
    }

    async fn renew_delivery(&self, id: i64, lease: i64, until: i64) -> StoreResult<bool> {
        self.extend_lease(id, lease, until).await
    }

    async fn account_for_address(&self, address: &str) -> StoreResult<Option<i64>> {
        self.address_owner(address).await
    }

    async fn vacation_reply_due(
        &self,
        account: i64,
        sender: &str,
        now: i64,
        period: i64,
    ) -> StoreResult<bool> {
        self.record_vacation_reply(account, sender, now, period)
            .await
    }

    async fn vacation_response(&self, account: i64) -> StoreResult<VacationResponse> {
        self.read_vacation_response(account).await
    }

    async fn set_vacation_response(
        &self,
        account: i64,
        response: &VacationResponse,
    ) -> StoreResult<()> {
        self.write_vacation_response(account, response).await
    }

    async fn mailboxes(&self, account: i64) -> StoreResult<Vec<MailboxRow>> {
        Ok(sqlx::query_as(
            "WITH m AS (SELECT * FROM mailboxes WHERE account_id = $1), \
             e AS (SELECT id, thread_id, \
                     (' ' || keywords || ' ' NOT LIKE '% $seen %' \
                      AND ' ' || keywords || ' ' NOT LIKE '% $draft %') AS unread \
                   FROM emails WHERE account_id = $1), \
             c AS (SELECT em.mailbox_id, count(*) AS total, \
                     sum(CASE WHEN e.unread THEN 1 ELSE 0 END) AS unread, \
                     count(DISTINCT e.thread_id) AS threads, \
                     count(DISTINCT CASE WHEN e.unread THEN e.thread_id END) AS unread_threads \
                   FROM email_mailboxes em JOIN e ON e.id = em.email_id \
                   WHERE em.mailbox_id IN (SELECT id FROM m) GROUP BY em.mailbox_id) \
             SELECT m.id, m.parent_id, m.name, m.role, m.sort_order, m.is_subscribed, \
               coalesce(c.total, 0) AS total_emails, coalesce(c.unread, 0) AS unread_emails, \
               coalesce(c.threads, 0) AS total_threads, \
               coalesce(c.unread_threads, 0) AS unread_threads \
             FROM m LEFT JOIN c ON c.mailbox_id = m.id ORDER BY m.id",
        )
        .bind(account)
        .fetch_all(&self.reader)
        .await?)
    }

    async fn owns_mailbox(&self, account: i64, mailbox: i64) -> StoreResult<bool> {
        const SQL: &str = "SELECT id FROM mailboxes WHERE id = $1 AND account_id = $2";
        let hot = self.hot_read(|connection| {
            connection
                .prepare_cached(SQL)?
                .query_row(
                    rusqlite::named_params! {"$1": mailbox, "$2": account},
                    |row| row.get::<_, i64>(0),
                )
                .optional()
        });
        if let Some(found) = hot {
            return Ok(found.is_some());
        }
        let found: Option<i64> = sqlx::query_scalar(SQL)
            .bind(mailbox)
            .bind(account)
            .fetch_optional(&self.reader)
            .await?;
        Ok(found.is_some())
    }

    async fn role_mailbox(&self, account: i64, role: &str) -> StoreResult<Option<i64>> {
        Ok(sqlx::query_scalar(
            "SELECT id FROM mailboxes WHERE account_id = $1 AND role = $2 ORDER BY id LIMIT 1",
        )
        .bind(account)
        .bind(role)
        .fetch_optional(&self.reader)
        .await?)
    }

    async fn create_mailbox(&self, account: i64, mailbox: &NewMailbox) -> StoreResult<i64> {
        let mut tx = self.write(Some(account)).await?;
        if let Some(parent) = mailbox.parent_id {
            Self::check_mailboxes_owned(&mut tx, account, &[parent]).await?;
        }
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO mailboxes (account_id, parent_id, name, role, sort_order, is_subscribed) \
             VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
        )
        .bind(account)
        .bind(mailbox.parent_id)
        .bind(D::text(&mailbox.name).into_owned())
        .bind(mailbox.role.clone())
        .bind(mailbox.sort_order)
        .bind(mailbox.is_subscribed)
        .fetch_one(&mut *tx)
        .await?;
        let mut set = ChangeSet::default();
        set.record(ChangeType::Mailbox, id, ChangeKind::Created);
        Self::record(&mut tx, account, &set).await?;
        tx.commit().await?;
        Ok(id)
    }

    async fn update_mailbox(&self, account: i64, id: i64, patch: &MailboxPatch) -> StoreResult<()> {
        let mut tx = self.write(Some(account)).await?;
        Self::check_mailboxes_owned(&mut tx, account, &[id]).await?;
        if let Some(Some(parent)) = patch.parent_id {
            Self::check_mailboxes_owned(&mut tx, account, &[parent]).await?;
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
        .bind(patch.name.as_deref().map(|name| D::text(name).into_owned()))
        .bind(patch.role.is_some())
        .bind(patch.role.clone().flatten())
        .bind(patch.sort_order)
        .bind(patch.is_subscribed)
        .execute(&mut *tx)
        .await?;
        let mut set = ChangeSet::default();
        set.record(ChangeType::Mailbox, id, ChangeKind::Updated);
        Self::record(&mut tx, account, &set).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn destroy_mailbox(&self, account: i64, id: i64, remove_emails: bool) -> StoreResult<()> {
        let mut tx = self.write(Some(account)).await?;
        Self::check_mailboxes_owned(&mut tx, account, &[id]).await?;
        let children: i64 =
            sqlx::query_scalar("SELECT count(*) FROM mailboxes WHERE parent_id = $1")
                .bind(id)
                .fetch_one(&mut *tx)
                .await?;
        if children > 0 {
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
        let (only_here, elsewhere): (Vec<(i64, i64)>, Vec<(i64, i64)>) =
            members.into_iter().partition(|(_, count)| *count == 1);
        let only_here: Vec<i64> = only_here.into_iter().map(|(email, _)| email).collect();
        let mut set = ChangeSet::default();
        Self::delete_emails(&mut tx, account, &only_here, &mut set).await?;
        for (email, _) in elsewhere {
            set.record(ChangeType::Email, email, ChangeKind::Updated);
        }
        for statement in [
            "DELETE FROM email_mailboxes WHERE mailbox_id = $1",
            "DELETE FROM mailboxes WHERE id = $1",
        ] {
            sqlx::query(statement).bind(id).execute(&mut *tx).await?;
        }
        set.record(ChangeType::Mailbox, id, ChangeKind::Destroyed);
        Self::record(&mut tx, account, &set).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn insert_emails(&self, account: i64, emails: &[NewEmail]) -> StoreResult<Vec<Inserted>> {
        if emails.is_empty() {
            return Ok(Vec::new());
        }
        let mut tx = self.write(Some(account)).await?;
        let mailbox_ids: Vec<i64> = emails
            .iter()
            .flat_map(|e| e.mailbox_ids.iter().copied())
            .collect();
        Self::check_mailboxes_owned(&mut tx, account, &mailbox_ids).await?;
        // Duplicates, ids and threads planned in memory (insert_plan).
        let blob_ids: Vec<&str> = emails.iter().map(|e| e.blob_id.as_str()).collect();
        let stored: HashMap<String, i64> = sqlx::query_as(D::SQL.stored_blobs)
            .bind(account)
            .bind(D::texts(&blob_ids))
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
        let ids: Vec<i64> = sqlx::query_scalar(D::SQL.next_email_ids)
            .bind(new_count as i64)
            .fetch_all(&mut *tx)
            .await?;
        let keys = insert_plan::ref_keys(emails, D::ref_key);
        let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let stored_refs = thread_refs(
            sqlx::query_as(D::SQL.thread_refs)
                .bind(account)
                .bind(D::texts(&key_refs))
                .fetch_all(&mut *tx)
                .await?,
        );
        let plan = insert_plan::plan(emails, stored, ids, stored_refs, D::ref_key, |subject| {
            D::text(subject).into_owned()
        })?;
        Self::insert_planned(&mut tx, account, &plan).await?;
        Self::check_quota(&mut tx, account).await?;
        // A thread with none of its emails stored before this batch is new.
        let existed: HashSet<i64> = sqlx::query_scalar(D::SQL.threads_with_others)
            .bind(account)
            .bind(D::ids(&plan.threads()))
            .bind(D::ids(&plan.new_ids()))
            .fetch_all(&mut *tx)
            .await?
            .into_iter()
            .collect();
        Self::record(&mut tx, account, &plan.changes(&existed)).await?;
        tx.commit().await?;
        Ok(plan.outcomes)
    }

    async fn email_meta(&self, account: i64, ids: &[i64]) -> StoreResult<Vec<EmailMeta>> {
        let rows: Vec<MetaRow<D::IdArray>> = sqlx::query_as(D::SQL.email_meta)
            .bind(account)
            .bind(D::ids(ids))
            .fetch_all(&self.reader)
            .await?;
        Ok(rows.into_iter().map(meta::<D>).collect())
    }

    /// [`super::dialect::Statements::email_meta_unless_state`]: one
    /// statement and one row, the call pays one trip to the database
    /// whether the state has moved or not.
    async fn email_meta_unless_state(
        &self,
        account: i64,
        ids: &[i64],
        known: Option<i64>,
    ) -> StoreResult<(Option<Vec<EmailMeta>>, i64)> {
        let sql = D::SQL.email_meta_unless_state;
        let hot = (self.hot.as_ref()).and_then(|hot| hot.state_row(sql, account, ids, known));
        let row: Option<(i64, Option<String>)> = match hot {
            Some(row) => row,
            None => {
                sqlx::query_as(sql)
                    .bind(account)
                    .bind(D::ids(ids))
                    .bind(known)
                    .fetch_optional(&self.reader)
                    .await?
            }
        };
        let (state, rows) = row.ok_or(StoreError::NotFound)?;
        let Some(rows) = rows else {
            return Ok((None, state));
        };
        let rows: Vec<MetaRow<Option<String>>> = serde_json::from_str(&rows)
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
                    mailbox_ids: ids_from_csv(mailboxes.as_deref()),
                },
            )
            .collect();
        Ok((Some(metas), state))
    }

    async fn header_blocks(&self, account: i64, ids: &[i64]) -> StoreResult<Vec<(i64, Vec<u8>)>> {
        Ok(sqlx::query_as(D::SQL.header_blocks)
            .bind(account)
            .bind(D::ids(ids))
            .fetch_all(&self.reader)
            .await?)
    }

    async fn fast_views(&self, account: i64, ids: &[i64]) -> StoreResult<Vec<(i64, FastView)>> {
        let rows: Vec<(i64, String, bool)> = sqlx::query_as(D::SQL.fast_views)
            .bind(account)
            .bind(D::ids(ids))
            .fetch_all(&self.reader)
            .await?;
        Ok(rows
            .into_iter()
            .map(|(id, preview, has_attachment)| {
                let view = FastView {
                    preview,
                    has_attachment,
                };
                (id, view)
            })
            .collect())
    }

    async fn search_ids(&self, account: i64, search: &TextSearch) -> StoreResult<Vec<i64>> {
        if search.terms.is_empty() {
            return Ok(Vec::new());
        }
        let query = D::search_query(search);
        self.full_text_read(move |connection| {
            Box::pin(
                sqlx::query_scalar(D::SQL.search_ids)
                    .bind(account)
                    .bind(query)
                    .fetch_all(connection),
            )
        })
        .await
    }

    async fn search_page(
        &self,
        account: i64,
        search: &TextSearch,
        mailbox: Option<i64>,
        descending: bool,
        position: i64,
        limit: i64,
    ) -> StoreResult<(Vec<i64>, i64)> {
        if search.terms.is_empty() {
            return Ok((Vec::new(), 0));
        }
        let query = D::search_query(search);
        // The page and the count on two connections at once: the count
        // reads every match, the page (mostly) only its own.
        let page = async {
            match (D::SQL.search_walk, descending) {
                (Some(walk), true) => {
                    self.search_walk(walk, account, &query, mailbox, position, limit)
                        .await
                }
                _ if limit <= 0 => Ok(Vec::new()),
                (_, descending) => {
                    let sql = match descending {
                        true => D::SQL.search_page_desc,
                        false => D::SQL.search_page_asc,
                    };
                    Ok(sqlx::query_scalar(sql)
                        .bind(account)
                        .bind(&query)
                        .bind(mailbox)
                        .bind(limit)
                        .bind(position)
                        .fetch_all(&self.reader)
                        .await?)
                }
            }
        };
        let count_query = query.clone();
        let count = self.full_text_read(move |connection| {
            Box::pin(
                sqlx::query_scalar(D::SQL.search_count)
                    .bind(account)
                    .bind(count_query)
                    .bind(mailbox)
                    .fetch_one(connection),
            )
        });
        let (ids, total) = tokio::try_join!(page, count)?;
        Ok((ids, total))
    }

    async fn put_search_texts(&self, rows: &[(i64, SearchText)]) -> StoreResult<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let mut tx = self.write(None).await?;
        let live_rows = Self::live_rows(&mut tx, rows).await?;
        let latest: HashMap<i64, &SearchText> = live_rows.iter().copied().collect();
        let live: Vec<i64> = live_rows.iter().map(|(id, _)| *id).collect();
        // With their accounts and receivedAt (the index rows keep them).
        let accounts: Vec<(i64, i64, i64)> = sqlx::query_as(D::SQL.email_accounts)
            .bind(D::ids(&live))
            .fetch_all(&mut *tx)
            .await?;
        sqlx::query(D::SQL.search_delete)
            .bind(D::ids(&live))
            .execute(&mut *tx)
            .await?;
        let texts: Vec<SearchRow<'_>> = accounts
            .iter()
            .map(|(id, account, received_at)| (*id, *account, *received_at, latest[id]))
            .collect();
        Self::write_search_texts(&mut tx, &texts).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn body_structures(&self, account: i64, ids: &[i64]) -> StoreResult<Vec<(i64, Vec<u8>)>> {
        Ok(sqlx::query_as(D::SQL.body_structures)
            .bind(account)
            .bind(D::ids(ids))
            .fetch_all(&self.reader)
            .await?)
    }

    async fn put_body_structures(&self, rows: &[(i64, Vec<u8>)]) -> StoreResult<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let mut tx = self.write(None).await?;
        let trees = Self::live_rows(&mut tx, rows).await?;
        Self::write_body_structures(&mut tx, &trees, true).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn body_structure_of_blob(
        &self,
        account: i64,
        blob_id: &str,
    ) -> StoreResult<Option<(i64, Vec<u8>)>> {
        Ok(sqlx::query_as(
            "SELECT e.id, s.structure FROM emails e JOIN body_structure s ON s.email_id = e.id \
             WHERE e.account_id = $1 AND e.blob_id = $2 ORDER BY e.id LIMIT 1",
        )
        .bind(account)
        .bind(blob_id)
        .fetch_optional(&self.reader)
        .await?)
    }

    async fn put_fast_views(&self, rows: &[(i64, FastView)]) -> StoreResult<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let mut tx = self.write(None).await?;
        let views = Self::live_rows(&mut tx, rows).await?;
        Self::write_fast_views(&mut tx, &views, true).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn clear_fast_views(&self, account: Option<i64>) -> StoreResult<u64> {
        let done = sqlx::query(
            "DELETE FROM fast_view WHERE $1 IS NULL \
             OR email_id IN (SELECT id FROM emails WHERE account_id = $1)",
        )
        .bind(account)
        .execute(&self.writer)
        .await?;
        Ok(D::rows_affected(&done))
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
             AND ($1 IS NULL OR e.account_id = $1) \
             AND (NOT $4 OR NOT EXISTS (SELECT 1 FROM fast_view f WHERE f.email_id = e.id)) \
             ORDER BY e.id LIMIT $3",
        )
        .bind(account)
        .bind(after_id)
        .bind(limit)
        .bind(missing_fast_view_only)
        .fetch_all(&self.reader)
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
            D::SQL.listing_desc
        } else {
            D::SQL.listing_asc
        };
        const COUNT: &str = "SELECT count(*) FROM email_mailboxes WHERE mailbox_id = $1";
        // At most HOT_COUNT + 1 index entries, so a hot count stays short.
        const HOT_COUNT_SQL: &str = "SELECT count(*) FROM (SELECT 1 FROM email_mailboxes \
             WHERE mailbox_id = $1 LIMIT $2)";
        // The page and the count on one hot connection, one after the other
        // (two snapshots, as through the pool), when the work is bounded: a
        // page reaching at most HOT_IDS rows in, a mailbox of at most
        // HOT_COUNT emails; else the pool reads.
        if position >= 0 && position.saturating_add(limit) <= HOT_IDS as i64 {
            let hot = self.hot_read(|connection| {
                let total: i64 = connection.prepare_cached(HOT_COUNT_SQL)?.query_row(
                    rusqlite::named_params! {"$1": mailbox, "$2": HOT_COUNT + 1},
                    |row| row.get(0),
                )?;
                if total > HOT_COUNT {
                    return Ok(None);
                }
                let ids = connection
                    .prepare_cached(sql)?
                    .query_map(
                        rusqlite::named_params! {"$1": mailbox, "$2": limit, "$3": position},
                        |row| Ok((row.get(0)?, row.get(1)?)),
                    )?
                    .collect::<rusqlite::Result<Vec<(i64, i64)>>>()?;
                Ok(Some((ids, total)))
            });
            if let Some(Some(page)) = hot {
                return Ok(page);
            }
        }
        let ids: Vec<(i64, i64)> = sqlx::query_as(sql)
            .bind(mailbox)
            .bind(limit)
            .bind(position)
            .fetch_all(&self.reader)
            .await?;
        let total: i64 = sqlx::query_scalar(COUNT)
            .bind(mailbox)
            .fetch_one(&self.reader)
            .await?;
        Ok((ids, total))
    }

    async fn query_rows(
        &self,
        account: i64,
        in_mailbox: Option<i64>,
    ) -> StoreResult<Vec<QueryRow>> {
        let query = match in_mailbox {
            Some(mailbox) => sqlx::query(D::SQL.query_rows_in_mailbox)
                .bind(account)
                .bind(mailbox),
            None => sqlx::query(D::SQL.query_rows).bind(account),
        };
        let rows = query.fetch_all(&self.reader).await?;
        Ok(rows.iter().map(Self::query_row).collect())
    }

    async fn query_rows_of(&self, account: i64, ids: &[i64]) -> StoreResult<Vec<QueryRow>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows = sqlx::query(D::SQL.query_rows_of)
            .bind(account)
            .bind(D::ids(ids))
            .fetch_all(&self.reader)
            .await?;
        Ok(rows.iter().map(Self::query_row).collect())
    }

    async fn update_emails(
        &self,
        account: i64,
        updates: &[EmailUpdate],
    ) -> StoreResult<Vec<UpdateOutcome>> {
        if updates.is_empty() {
            return Ok(Vec::new());
        }
        let mut tx = match self.write(Some(account)).await {
            Err(StoreError::NotFound) => return Ok(vec![UpdateOutcome::NotFound; updates.len()]),
            tx => tx?,
        };
        let ids = distinct(&updates.iter().map(|u| u.id).collect::<Vec<_>>());
        let rows = Self::email_lists(&mut tx, account, &ids).await?;
        let before: HashMap<i64, EmailLists> = rows
            .iter()
            .map(|(id, (_, _, lists))| (*id, lists.clone()))
            .collect();
        let wanted: Vec<i64> = updates
            .iter()
            .flat_map(|u| u.mailbox_ids.additions().copied())
            .collect();
        let owned = Self::owned_mailboxes(&mut tx, account, &distinct(&wanted)).await?;
        let (current, outcomes) = super::apply_updates(&before, &owned, updates);
        let mut set = ChangeSet::default();
        let (mut keywords_rows, mut moved, mut memberships) = (Vec::new(), Vec::new(), Vec::new());
        let mut changed: Vec<&i64> = current.keys().collect();
        changed.sort_unstable();
        for id in changed {
            let (keywords, mailboxes) = &current[id];
            let (old_keywords, old_mailboxes) = &before[id];
            if keywords != old_keywords {
                keywords_rows.push((*id, keywords_to_column(keywords)));
            }
            if mailboxes != old_mailboxes {
                moved.push(*id);
                let received_at = rows[id].1;
                memberships.extend(mailboxes.iter().map(|m| (*m, received_at, *id)));
            }
            super::record_email_update(
                &mut set,
                *id,
                (old_keywords, old_mailboxes),
                (keywords, mailboxes),
            );
        }
        Self::set_keywords(&mut tx, &keywords_rows).await?;
        if !moved.is_empty() {
            sqlx::query(D::SQL.delete_memberships)
                .bind(D::ids(&moved))
                .execute(&mut *tx)
                .await?;
            Self::insert_memberships(&mut tx, &memberships).await?;
        }
        Self::record(&mut tx, account, &set).await?;
        tx.commit().await?;
        Ok(outcomes)
    }

    async fn destroy_emails(&self, account: i64, ids: &[i64]) -> StoreResult<Vec<i64>> {
        let mut tx = match self.write(Some(account)).await {
            Err(StoreError::NotFound) => return Ok(Vec::new()),
            tx => tx?,
        };
        let mut set = ChangeSet::default();
        let destroyed = Self::delete_emails(&mut tx, account, ids, &mut set).await?;
        Self::record(&mut tx, account, &set).await?;
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
        let row: Option<(i64, i64, i64, i64, i64, i64, i64)> = sqlx::query_as(
            "SELECT email_state, mailbox_state, thread_state, identity_state, vacation_state, \
             submission_state, changes_from FROM accounts WHERE id = $1",
        )
        .bind(account)
        .fetch_optional(&self.reader)
        .await?;
        let (email, mailbox, thread, identity, vacation, submission, from) =
            row.ok_or(StoreError::NotFound)?;
        let state = match kind {
            ChangeType::Email => email,
            ChangeType::Mailbox => mailbox,
            ChangeType::Thread => thread,
            ChangeType::Identity => identity,
            ChangeType::VacationResponse => vacation,
            ChangeType::EmailSubmission => submission,
        };
        check_since(since, state, from)?;
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
            .fetch_all(&self.reader)
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
        let mut tx = self.write(Some(account)).await?;
        let (modseq, from): (i64, i64) =
            sqlx::query_as("SELECT modseq, changes_from FROM accounts WHERE id = $1")
                .bind(account)
                .fetch_one(&mut *tx)
                .await?;
        let done = sqlx::query("DELETE FROM changes WHERE account_id = $1 AND modseq <= $2")
            .bind(account)
            .bind(through_modseq)
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE accounts SET changes_from = $2 WHERE id = $1")
            .bind(account)
            .bind(from.max(through_modseq.min(modseq)))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(D::rows_affected(&done))
    }

    async fn mailbox_positions(
        &self,
        mailbox: i64,
        descending: bool,
        ids: &[i64],
    ) -> StoreResult<Vec<(i64, i64)>> {
        let sql = if descending {
            D::SQL.positions_desc
        } else {
            D::SQL.positions_asc
        };
        Ok(sqlx::query_as(sql)
            .bind(mailbox)
            .bind(D::ids(ids))
            .fetch_all(&self.reader)
            .await?)
    }

    async fn thread_emails(
        &self,
        account: i64,
        thread_ids: &[i64],
    ) -> StoreResult<Vec<(i64, Vec<i64>)>> {
        let rows: Vec<(i64, i64)> = sqlx::query_as(D::SQL.thread_emails)
            .bind(account)
            .bind(D::ids(thread_ids))
            .fetch_all(&self.reader)
            .await?;
        Ok(group_threads(rows))
    }

    async fn add_blob(&self, account: i64, blob_id: &str, size: i64) -> StoreResult<()> {
        let mut tx = self.write(Some(account)).await?;
        let done = sqlx::query(
            "INSERT INTO account_blobs (account_id, blob_id, size, created_at) \
             VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
        )
        .bind(account)
        .bind(blob_id)
        .bind(size)
        .bind(now())
        .execute(&mut *tx)
        .await?;
        if D::rows_affected(&done) > 0 {
            Self::check_quota(&mut tx, account).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn held_blobs(&self, account: i64, blob_ids: &[String]) -> StoreResult<HashSet<String>> {
        if blob_ids.is_empty() {
            return Ok(HashSet::new());
        }
        let ids: Vec<&str> = blob_ids.iter().map(String::as_str).collect();
        Ok(sqlx::query_scalar(D::SQL.held_blobs)
            .bind(account)
            .bind(D::texts(&ids))
            .fetch_all(&self.reader)
            .await?
            .into_iter()
            .collect())
    }

    async fn referenced_blobs(&self, blob_ids: &[String]) -> StoreResult<HashSet<String>> {
        if blob_ids.is_empty() {
            return Ok(HashSet::new());
        }
        let ids: Vec<&str> = blob_ids.iter().map(String::as_str).collect();
        Ok(sqlx::query_scalar(D::SQL.referenced_blobs)
            .bind(D::texts(&ids))
            .fetch_all(&self.reader)
            .await?
            .into_iter()
            .collect())
    }

    async fn expire_uploads(&self, created_before: i64) -> StoreResult<u64> {
        let done = sqlx::query(
            "DELETE FROM account_blobs WHERE created_at < $1 AND NOT EXISTS \
             (SELECT 1 FROM emails e WHERE e.account_id = account_blobs.account_id \
              AND e.blob_id = account_blobs.blob_id)",
        )
        .bind(created_before)
        .execute(&self.writer)
        .await?;
        Ok(D::rows_affected(&done))
    }

    async fn referenced_blob_page(&self, after: &str, limit: i64) -> StoreResult<Vec<String>> {
        Ok(sqlx::query_scalar(
            "SELECT blob_id FROM \
               (SELECT blob_id FROM account_blobs WHERE blob_id > $1 ORDER BY blob_id LIMIT $2) \
               AS g \
             UNION SELECT blob_id FROM \
               (SELECT blob_id FROM emails WHERE blob_id > $1 ORDER BY blob_id LIMIT $2) AS e \
             ORDER BY blob_id LIMIT $2",
        )
        .bind(after)
        .bind(limit)
        .fetch_all(&self.reader)
        .await?)
    }

    async fn blob_size(&self, account: i64, blob_id: &str) -> StoreResult<Option<i64>> {
        Ok(sqlx::query_scalar(
            "SELECT size FROM account_blobs WHERE account_id = $1 AND blob_id = $2",
        )
        .bind(account)
        .bind(blob_id)
        .fetch_optional(&self.reader)
        .await?)
    }

    async fn export_raw(
        &self,
        table: RawTable,
        account: i64,
        after: &RawCursor,
        limit: i64,
    ) -> StoreResult<RawRows> {
        self.export(table, account, after, limit).await
    }

    async fn import_raw(&self, rows: &RawRows) -> StoreResult<u64> {
        self.import(rows).await
    }

    async fn raw_counts(&self, account: Option<i64>) -> StoreResult<RowCounts> {
        self.counts(account).await
    }
}

//! The one [`Store`](super::Store): every storage operation written once over a
//! [`Dialect`] (SQLite or PostgreSQL), one file a concern trait
//! (`accounts.rs`, `mailboxes.rs`, `emails.rs`, `search.rs`, `changes.rs`,
//! `blobs.rs`, `identity.rs`, `submission.rs`, `raw_copy.rs`; the proxy's
//! own is `store/proxy/`). Transactions, binds, row decoding, change
//! recording and state counters live here; the dialect holds the SQL text
//! that differs, the list binds, locking, what text can hold, the
//! full-text query's shape and the reads tried on the calling thread
//! ([`HotReads`]). Not yet as wanted: SQLite's search-key walk
//! (`search.rs`) is SQL run here when the dialect gives its statement.
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
use sqlx::{Database, Executor, Pool, QueryBuilder, Row};

use super::change_log::{ChangeCollector, ChangeLog, ChangeSet, LOG_BATCH, LogRow, check_since};
use super::columns::{distinct, ids_from_csv, keywords_from_column, keywords_to_column};
use super::dialect::{Dialect, HotReads};
use super::insert_plan::{self, InsertPlan, ThreadRef};
use super::raw::EmailRecord;
use super::{
    Account, Accounts, ApiToken, Blobs, ChangeKind, ChangeType, Changes, Delivery, EmailIndex,
    EmailLists, EmailMeta, EmailUpdate, Emails, FastView, Identities, IdentityPatch, IdentityRow,
    Inserted, LogPosition, MailboxNode, MailboxPatch, MailboxRow, Mailboxes, Maintenance, NewEmail,
    NewMailbox, NewToken, QueryRow, Quota, ROLE_MAILBOXES, Search, SearchText, SendLimits, States,
    StoreError, StoreResult, SubmissionRow, Submissions, TextSearch, UpdateOutcome,
    VacationResponse, default_sort_order,
};

/// An `impl` block over every dialect `D` (`impl_sql! { impl Trait { … } }`,
/// or `impl { … }` for inherent methods), with the bounds sqlx needs of
/// `D::Db` written once. A macro rather than a trait with a blanket impl:
/// Rust implies a trait's bounds only on `Self` and its associated types
/// (rust-lang/rust#20671), and these bound `i64`, `&str` and `&mut` connections.
macro_rules! impl_sql {
    ($(#[$attr:meta])* impl $($trait:ident)? { $($item:tt)* }) => {
        $(#[$attr])*
        impl<D: $crate::store::dialect::Dialect> $($trait for)? $crate::store::sql::SqlStore<D>
        where
            for<'c> &'c mut <D::Db as ::sqlx::Database>::Connection:
                ::sqlx::Executor<'c, Database = D::Db>,
            <D::Db as ::sqlx::Database>::Arguments: ::sqlx::IntoArguments<D::Db>,
            usize: ::sqlx::ColumnIndex<<D::Db as ::sqlx::Database>::Row>,
            for<'s> &'s str: ::sqlx::ColumnIndex<<D::Db as ::sqlx::Database>::Row>,
            i16: $crate::store::dialect::Column<D::Db>,
            i64: $crate::store::dialect::Column<D::Db>,
            bool: $crate::store::dialect::Column<D::Db>,
            String: $crate::store::dialect::Column<D::Db>,
            Vec<u8>: $crate::store::dialect::Column<D::Db>,
            Option<i64>: $crate::store::dialect::Column<D::Db>,
            Option<bool>: $crate::store::dialect::Column<D::Db>,
            Option<String>: $crate::store::dialect::Column<D::Db>,
            for<'a> &'a str: ::sqlx::Encode<'a, D::Db> + ::sqlx::Type<D::Db>,
        {
            $($item)*
        }
    };
}
pub(crate) use impl_sql;

mod accounts;
mod blobs;
mod changes;
mod emails;
mod identity;
mod mailboxes;
mod raw_copy;
mod search;
mod submission;

/// Bound values per multi-row statement: below SQLite's 32,766 host
/// parameters and PostgreSQL's 65,535.
pub const MAX_BINDS: usize = 30_000;

/// A full-text index row to write: (email id, account, receivedAt in
/// seconds since 1970, the words).
pub(super) type SearchRow<'a> = (i64, i64, i64, &'a SearchText);

/// An open transaction of dialect `D`.
pub(super) type Tx<D> = sqlx::Transaction<'static, <D as Dialect>::Db>;

/// A statement of dialect `D` whose rows decode as `O`, its values bound
/// ([`SqlStore::rows`], [`SqlStore::optional`]).
pub(super) type QueryAs<'q, D, O> =
    sqlx::query::QueryAs<'q, <D as Dialect>::Db, O, <<D as Dialect>::Db as Database>::Arguments>;

/// A statement of dialect `D` whose rows' first column decodes as `O`, its
/// values bound ([`SqlStore::scalars`], [`SqlStore::optional_scalar`]).
pub(super) type QueryScalar<'q, D, O> = sqlx::query::QueryScalar<
    'q,
    <D as Dialect>::Db,
    O,
    <<D as Dialect>::Db as Database>::Arguments,
>;

/// The store over dialect `D`: a read pool and a write pool (the same pool
/// on PostgreSQL; SQLite's one writer connection, for which this process's
/// writers queue instead of retrying the database lock).
pub struct SqlStore<D: Dialect> {
    pub(super) reader: Pool<D::Db>,
    pub(super) writer: Pool<D::Db>,
    /// The dialect's reads on the calling thread, tried before `reader` for
    /// the statements that have a hot form ([`HotReads`]; SQLite's
    /// `HotReader` over a plain file, none on PostgreSQL).
    pub(super) hot: Option<Arc<D::Hot>>,
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

    /// The hot reads to try before the pool, if the store has them.
    pub(super) fn hot(&self) -> Option<&D::Hot> {
        self.hot.as_deref()
    }

    /// This store, reading its hot statements through `hot` first.
    pub(super) fn with_hot_reader(mut self, hot: D::Hot) -> Self {
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

/// The metadata of a [`MetaRow`], its mailbox-ids column read by `mailbox_ids`.
fn meta<A>(row: MetaRow<A>, mailbox_ids: impl FnOnce(A) -> Vec<i64>) -> EmailMeta {
    let (id, blob_id, thread_id, size, received_at, keywords, mailboxes) = row;
    EmailMeta {
        id,
        blob_id,
        thread_id,
        size,
        received_at,
        keywords: keywords_from_column(&keywords),
        mailbox_ids: mailbox_ids(mailboxes),
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
fn group_threads<T: PartialEq, E>(rows: Vec<(T, E)>) -> Vec<(T, Vec<E>)> {
    let mut threads: Vec<(T, Vec<E>)> = Vec::new();
    for (thread_id, email_id) in rows {
        match threads.last_mut() {
            Some((last, emails)) if *last == thread_id => emails.push(email_id),
            _ => threads.push((thread_id, vec![email_id])),
        }
    }
    threads
}

impl_sql! {
    impl {
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

        /// Runs one statement in a write transaction of its own, without an
        /// account's lock, and commits it.
        pub(super) async fn write_one(
            &self,
            query: sqlx::query::Query<'_, D::Db, <D::Db as Database>::Arguments>,
        ) -> StoreResult<()> {
            let mut tx = self.write(None).await?;
            query.execute(&mut *tx).await?;
            tx.commit().await?;
            Ok(())
        }

        /// Every row `query` (its values bound) reads on the read pool, each
        /// decoded as `O`.
        pub(super) async fn rows<O>(&self, query: QueryAs<'_, D, O>) -> StoreResult<Vec<O>>
        where
            O: for<'r> sqlx::FromRow<'r, <D::Db as Database>::Row> + Send + Unpin,
        {
            Ok(query.fetch_all(&self.reader).await?)
        }

        /// The row `query` (its values bound) reads on the read pool, if
        /// any, decoded as `O`.
        pub(super) async fn optional<O>(&self, query: QueryAs<'_, D, O>) -> StoreResult<Option<O>>
        where
            O: for<'r> sqlx::FromRow<'r, <D::Db as Database>::Row> + Send + Unpin,
        {
            Ok(query.fetch_optional(&self.reader).await?)
        }

        /// The first column of every row `query` (its values bound) reads on
        /// the read pool, decoded as `O`.
        pub(super) async fn scalars<O>(&self, query: QueryScalar<'_, D, O>) -> StoreResult<Vec<O>>
        where
            O: Send + Unpin,
            (O,): for<'r> sqlx::FromRow<'r, <D::Db as Database>::Row> + Send + Unpin,
        {
            Ok(query.fetch_all(&self.reader).await?)
        }

        /// The first column of the row `query` (its values bound) reads on the
        /// read pool, if any, decoded as `O`.
        pub(super) async fn optional_scalar<O>(
            &self,
            query: QueryScalar<'_, D, O>,
        ) -> StoreResult<Option<O>>
        where
            O: Send + Unpin,
            (O,): for<'r> sqlx::FromRow<'r, <D::Db as Database>::Row> + Send + Unpin,
        {
            Ok(query.fetch_optional(&self.reader).await?)
        }

        /// The `(thread_id, email_id)` rows `query` reads, ordered by thread,
        /// grouped a thread an entry ([`group_threads`]).
        pub(super) async fn thread_groups<T, E>(
            &self,
            query: QueryAs<'_, D, (T, E)>,
        ) -> StoreResult<Vec<(T, Vec<E>)>>
        where
            T: PartialEq,
            (T, E): for<'r> sqlx::FromRow<'r, <D::Db as Database>::Row> + Send + Unpin,
        {
            Ok(group_threads(self.rows(query).await?))
        }

        /// `Ok` when the statement changed a row, else `NotFound` (an update
        /// or delete of an object that is not there).
        pub(super) fn found(done: &<D::Db as Database>::QueryResult) -> StoreResult<()> {
            if D::rows_affected(done) == 0 {
                return Err(StoreError::NotFound);
            }
            Ok(())
        }

        /// Inserts `rows` in a write transaction of their own, without an
        /// account's lock, and commits it ([`SqlStore::insert_rows`]'s
        /// arguments); nothing when there are no rows.
        pub(super) async fn write_rows<T>(
            &self,
            head: &str,
            tail: &str,
            columns: usize,
            rows: &[T],
            push: impl FnMut(&mut Separated<'_, D::Db, &'static str>, &T),
        ) -> StoreResult<()> {
            if rows.is_empty() {
                return Ok(());
            }
            let mut tx = self.write(None).await?;
            Self::insert_rows(&mut tx, head, tail, columns, rows, push).await?;
            tx.commit().await?;
            Ok(())
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

        /// Records one change of one object in `tx` ([`SqlStore::record`]).
        pub(super) async fn record_one(
            tx: &mut Tx<D>,
            account: i64,
            kind_of: ChangeType,
            id: i64,
            kind: ChangeKind,
        ) -> StoreResult<()> {
            let mut set = ChangeSet::default();
            set.record(kind_of, id, kind);
            Self::record(tx, account, &set).await
        }

        /// Deletes object `id` of `account` with `sql` (`$1` the id, `$2` the
        /// account) and logs its destruction as a change of `kind_of`, in one
        /// write under the account's lock; `NotFound` when there is no such
        /// object.
        pub(super) async fn destroy_one(
            &self,
            account: i64,
            kind_of: ChangeType,
            id: i64,
            sql: &'static str,
        ) -> StoreResult<()> {
            let mut tx = self.write(Some(account)).await?;
            let done = sqlx::query(sql).bind(id).bind(account).execute(&mut *tx).await?;
            Self::found(&done)?;
            Self::commit_one(tx, account, kind_of, id, ChangeKind::Destroyed).await
        }

        /// Records one change of one object and commits the write it ends.
        pub(super) async fn commit_one(
            mut tx: Tx<D>,
            account: i64,
            kind_of: ChangeType,
            id: i64,
            kind: ChangeKind,
        ) -> StoreResult<()> {
            Self::record_one(&mut tx, account, kind_of, id, kind).await?;
            tx.commit().await?;
            Ok(())
        }
    }
}

//! SQLite, the embedded default: [`SqliteStore`] is the one store over
//! [`SqliteDialect`].
//!
//! WAL journal, `synchronous = NORMAL`, foreign keys on; a pool of reader
//! connections and one writer connection that this process's writers queue
//! for, and read-only connections for the hot reads that run on the calling
//! thread ([`HotReader`]). Write transactions start with `BEGIN IMMEDIATE`, so a writer waits
//! for the lock (busy timeout) instead of failing on a stale snapshot when
//! `serve` and `import` share a data dir; holding that lock is also what
//! serializes an account's writers (the account "lock" is a plain read).
//! Id lists are bound as one JSON array and expanded with `json_each`; an
//! email's mailbox ids come back as `group_concat` text. Email ids are
//! allocated above every id ever given (AUTOINCREMENT's rule), under the
//! write lock.

use std::borrow::Cow;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Connection, Row};

use super::columns::{distinct, ids_from_csv};
use super::dialect::{Dialect, Statements, positions, query_columns};
use super::hot_read::HotReader;
use super::sql::SqlStore;
use super::{SearchScope, SearchText, StoreResult, TextSearch};

/// The writer connection's page cache, in KiB (batched ingest walks the
/// indexes of every table it writes).
const WRITER_PAGE_CACHE_KIB: u32 = 64 * 1024;

/// The reader connections' page caches together, in KiB, shared out evenly
/// (each connection has its own, at least 1 MiB). The file is mapped up to
/// 2 GiB (`mmap_size`), and pages read through the map are not copied into a
/// cache; only the part of a larger file beyond the map is. A cache per
/// connection holds much the same hot pages as the next: with 64 MiB each,
/// 1,000,000 messages and 10,000 accounts active, the server held 496 MB
/// more anonymous memory for the same p50 (ADR 0002, the scale run).
const READERS_PAGE_CACHE_KIB: u32 = 64 * 1024;

/// How much of the database file reads map (`mmap_size`): 2 GiB.
const MMAP_BYTES: u64 = 2_147_418_112;

/// The SQLite-backed store.
pub type SqliteStore = SqlStore<SqliteDialect>;

/// What is SQLite's own (see the module doc).
#[derive(Debug, Clone, Copy)]
pub struct SqliteDialect;

/// `IN (…)` over a bound JSON array.
macro_rules! in_list {
    ($n:literal) => {
        concat!("IN (SELECT value FROM json_each($", $n, "))")
    };
}

/// The mailbox ids of email `e`, comma-separated.
macro_rules! mailbox_ids {
    () => {
        "(SELECT group_concat(x.mailbox_id) FROM email_mailboxes x WHERE x.email_id = e.id)"
    };
}

/// The search keys of account `$1` whose words match `$2`, in mailbox `$3`
/// unless NULL: `FROM` to the end of `WHERE`, the index as `s`, the keys as
/// `k` (migration 0305).
macro_rules! search_matches {
    () => {
        concat!(
            "FROM email_search s \
             CROSS JOIN email_search_keys k ON k.key = s.rowid \
             WHERE email_search MATCH $2 AND s.rowid BETWEEN ",
            search_keys_from!(1),
            " AND ",
            search_keys_to!(1),
            " AND k.account_id = $1 AND ($3 IS NULL OR EXISTS \
             (SELECT 1 FROM email_mailboxes m WHERE m.mailbox_id = $3 \
             AND m.received_at = k.received_at AND m.email_id = k.email_id))"
        )
    };
}

/// A page of the emails a full-text query matches (in mailbox `$3` unless
/// NULL) by receivedAt (`$4` limit, `$5` offset): every match ordered, for
/// the oldest-first order the search keys do not give (migration 0305).
macro_rules! search_page {
    ($direction:literal) => {
        concat!(
            "SELECT k.email_id ",
            search_matches!(),
            " ORDER BY k.received_at ",
            $direction,
            ", k.email_id ",
            $direction,
            " LIMIT $4 OFFSET $5"
        )
    };
}

/// The lowest search key of account `$n`'s partition (migration 0305).
macro_rules! search_keys_from {
    ($n:literal) => {
        concat!("(($", $n, " & 8388607) << 40)")
    };
}

/// The highest search key of account `$n`'s partition.
macro_rules! search_keys_to {
    ($n:literal) => {
        concat!("((($", $n, " & 8388607) << 40) | 1099511627775)")
    };
}

/// The matches of a full-text query (in mailbox `$3` unless NULL) whose
/// search keys are in `$4 ..= $5`, highest key first, at most `$6` (-1: all):
/// (key, email id, receivedAt). FTS5 returns its matches in rowid order and
/// stops at the limit: nothing outside the page is read.
macro_rules! search_walk {
    () => {
        "SELECT k.key, k.email_id, k.received_at FROM email_search s \
         CROSS JOIN email_search_keys k ON k.key = s.rowid \
         WHERE email_search MATCH $2 AND s.rowid BETWEEN $4 AND $5 AND k.account_id = $1 \
         AND ($3 IS NULL OR EXISTS (SELECT 1 FROM email_mailboxes m WHERE m.mailbox_id = $3 \
         AND m.received_at = k.received_at AND m.email_id = k.email_id)) \
         ORDER BY s.rowid DESC LIMIT $6"
    };
}

/// The listing of one mailbox by receivedAt, from its primary key.
macro_rules! listing {
    ($direction:literal) => {
        concat!(
            "SELECT em.email_id, e.thread_id FROM email_mailboxes em \
             JOIN emails e ON e.id = em.email_id WHERE em.mailbox_id = $1 \
             ORDER BY em.received_at ",
            $direction,
            ", em.email_id ",
            $direction,
            " LIMIT $2 OFFSET $3"
        )
    };
}

impl Dialect for SqliteDialect {
    type Db = sqlx::Sqlite;
    type Ids = String;
    type Texts = String;
    type IdArray = Option<String>;
    type Hot = HotReader;

    const BEGIN_WRITE: Option<&'static str> = Some("BEGIN IMMEDIATE");
    // The statements name their indexes' order of use (CROSS JOIN, the
    // search walk); no statistics are gathered.
    const ANALYZE: Option<&'static str> = None;
    const FULL_TEXT_SETUP: Option<&'static str> = None;
    const OVERRIDING: &'static str = "";
    // `+account_id` (a unary plus: the term uses no index) where rows are
    // picked by a list of their keys: without it SQLite, which has no
    // statistics here, reads every row of the account through an index on
    // `account_id` and tests each against the list
    // (`tests::id_lists_are_looked_up_by_key_not_by_account`).
    const SQL: Statements = Statements {
        lock_account: "SELECT id FROM accounts WHERE id = $1",
        // `email` is COLLATE NOCASE: the unique index answers.
        account_by_email: "SELECT id, email, password_hash FROM accounts WHERE email = $1",
        set_password: "UPDATE accounts SET password_hash = $2 WHERE email = $1",
        account_to_remove: "SELECT id FROM accounts WHERE email = $1",
        next_email_ids: "WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n \
             WHERE i < $1) \
             SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'emails'), 0), \
               coalesce((SELECT max(id) FROM emails), 0)) + i FROM n ORDER BY i",
        owned_mailboxes: concat!(
            "SELECT id FROM mailboxes WHERE account_id = $1 AND id ",
            in_list!(2)
        ),
        upstream_locations: concat!(
            "SELECT u.email_id, u.mailbox_id, u.uid, u.keywords FROM upstream_messages u \
             JOIN mailboxes m ON m.id = u.mailbox_id \
             WHERE +m.account_id = $1 AND u.email_id ",
            in_list!(2),
            " ORDER BY u.mailbox_id, u.uid"
        ),
        unmark_evicted: concat!("DELETE FROM upstream_evicted WHERE blob_id ", in_list!(1)),
        evicted_among: concat!(
            "SELECT blob_id FROM upstream_evicted WHERE blob_id ",
            in_list!(1)
        ),
        forget_upstream_uids: concat!(
            "DELETE FROM upstream_messages WHERE mailbox_id = $1 AND uid ",
            in_list!(2)
        ),
        upstream_uids_among: concat!(
            "SELECT uid, email_id, keywords FROM upstream_messages WHERE mailbox_id = $1 AND uid ",
            in_list!(2),
            " ORDER BY uid"
        ),
        mirror_emails_by_local: concat!(
            "SELECT email_id, upstream_id, blob_id, thread_id, parts FROM jmap_mirror_emails \
             WHERE +account_id = $1 AND email_id ",
            in_list!(2)
        ),
        mirror_emails_by_upstream: concat!(
            "SELECT email_id, upstream_id, blob_id, thread_id, parts FROM jmap_mirror_emails \
             WHERE account_id = $1 AND upstream_id ",
            in_list!(2)
        ),
        mirror_threads: concat!(
            "SELECT m.thread_id, m.upstream_id FROM jmap_mirror_emails m \
             JOIN emails e ON e.id = m.email_id \
             WHERE m.account_id = $1 AND m.thread_id ",
            in_list!(2),
            " ORDER BY m.thread_id, e.received_at, e.id"
        ),
        stored_blobs: concat!(
            "SELECT blob_id, id FROM emails WHERE account_id = $1 AND blob_id ",
            in_list!(2)
        ),
        thread_refs: concat!(
            "SELECT message_id, thread_id, base_subject FROM thread_refs \
             WHERE account_id = $1 AND message_id ",
            in_list!(2)
        ),
        threads_with_others: concat!(
            "SELECT DISTINCT thread_id FROM emails WHERE account_id = $1 AND thread_id ",
            in_list!(2),
            " AND id NOT ",
            in_list!(3)
        ),
        threads_remaining: concat!(
            "SELECT DISTINCT thread_id FROM emails WHERE account_id = $1 AND thread_id ",
            in_list!(2)
        ),
        email_lists: concat!(
            "SELECT e.id, e.thread_id, e.received_at, e.keywords, ",
            mailbox_ids!(),
            " FROM emails e WHERE +e.account_id = $1 AND e.id ",
            in_list!(2)
        ),
        delete_emails: concat!(
            "DELETE FROM emails WHERE +account_id = $1 AND id ",
            in_list!(2),
            " RETURNING id, blob_id"
        ),
        delete_blob_grants: concat!(
            "DELETE FROM account_blobs WHERE account_id = $1 AND blob_id ",
            in_list!(2)
        ),
        referenced_blobs: concat!(
            "SELECT blob_id FROM emails WHERE blob_id ",
            in_list!(1),
            " UNION SELECT blob_id FROM account_blobs WHERE blob_id ",
            in_list!(1),
            " UNION SELECT blob_id FROM deliveries WHERE blob_id ",
            in_list!(1)
        ),
        held_blobs: concat!(
            "SELECT blob_id FROM account_blobs WHERE account_id = $1 AND blob_id ",
            in_list!(2)
        ),
        delete_memberships: concat!("DELETE FROM email_mailboxes WHERE email_id ", in_list!(1)),
        live_emails: concat!("SELECT id FROM emails WHERE id ", in_list!(1)),
        email_accounts: concat!(
            "SELECT id, account_id, received_at FROM emails WHERE id ",
            in_list!(1)
        ),
        search_page_desc: search_page!("DESC"),
        search_page_asc: search_page!("ASC"),
        search_walk: Some(search_walk!()),
        // The partition's keys are the account's alone unless an account id
        // above 8,388,607 exists: then each match's account is checked.
        search_count: concat!(
            "SELECT CASE WHEN $3 IS NULL AND $1 <= 8388607 \
             AND coalesce((SELECT max(id) FROM accounts), 0) <= 8388607 \
             THEN (SELECT count(*) FROM email_search s WHERE email_search MATCH $2 \
             AND s.rowid BETWEEN ",
            search_keys_from!(1),
            " AND ",
            search_keys_to!(1),
            ") ELSE (SELECT count(*) ",
            search_matches!(),
            ") END"
        ),
        // Through the view of migration 0305: its triggers key the words.
        search_insert_head: "INSERT INTO email_search_input \
             (email_id, account_id, received_at, headers, body)",
        search_insert_tail: "",
        search_delete: concat!(
            "DELETE FROM email_search_input WHERE email_id ",
            in_list!(1)
        ),
        search_index_unfilled: "SELECT EXISTS (SELECT 1 FROM emails) \
             AND NOT EXISTS (SELECT 1 FROM email_search_keys)",
        search_ids: concat!(
            "SELECT k.email_id FROM email_search s \
             CROSS JOIN email_search_keys k ON k.key = s.rowid \
             WHERE email_search MATCH $2 AND s.rowid BETWEEN ",
            search_keys_from!(1),
            " AND ",
            search_keys_to!(1),
            " AND k.account_id = $1"
        ),
        email_meta: concat!(
            "SELECT e.id, e.blob_id, e.thread_id, e.size, e.received_at, e.keywords, ",
            mailbox_ids!(),
            " FROM json_each($2) AS j CROSS JOIN emails e ON e.id = j.value \
             WHERE e.account_id = $1"
        ),
        email_meta_unless_state: concat!(
            "SELECT a.email_state, CASE WHEN a.email_state IS NOT $3 THEN \
               (SELECT json_group_array(json_array(e.id, e.blob_id, \
               e.thread_id, e.size, e.received_at, e.keywords, ",
            mailbox_ids!(),
            ")) FROM json_each($2) AS j CROSS JOIN emails e ON e.id = j.value \
               WHERE e.account_id = $1) END \
             FROM accounts a WHERE a.id = $1"
        ),
        header_blocks: "SELECT h.email_id, h.header_block FROM json_each($2) AS j \
             CROSS JOIN emails e ON e.id = j.value CROSS JOIN email_headers h ON h.email_id = e.id \
             WHERE e.account_id = $1",
        body_structures: "SELECT s.email_id, s.structure FROM json_each($2) AS j \
             CROSS JOIN emails e ON e.id = j.value CROSS JOIN body_structure s \
             ON s.email_id = e.id WHERE e.account_id = $1",
        fast_views: "SELECT f.email_id, f.preview, f.has_attachment FROM json_each($2) AS j \
             CROSS JOIN emails e ON e.id = j.value CROSS JOIN fast_view f ON f.email_id = e.id \
             WHERE e.account_id = $1",
        listing_desc: listing!("DESC"),
        listing_asc: listing!("ASC"),
        positions_desc: positions!(">", in_list!(2)),
        positions_asc: positions!("<", in_list!(2)),
        query_rows: concat!(query_columns!(mailbox_ids!()), "WHERE e.account_id = $1"),
        query_rows_of: concat!(
            query_columns!(mailbox_ids!()),
            "WHERE +e.account_id = $1 AND e.id ",
            in_list!(2)
        ),
        query_rows_in_mailbox: concat!(
            query_columns!(mailbox_ids!()),
            "WHERE e.account_id = $1 \
             AND e.id IN (SELECT email_id FROM email_mailboxes WHERE mailbox_id = $2)"
        ),
        thread_emails: concat!(
            "SELECT thread_id, id FROM emails WHERE account_id = $1 AND thread_id ",
            in_list!(2),
            " ORDER BY thread_id, received_at, id"
        ),
        after_raw_import: &[],
    };

    fn ids(ids: &[i64]) -> String {
        serde_json::to_string(&distinct(ids)).unwrap_or_else(|_| "[]".to_string())
    }

    fn texts(values: &[&str]) -> String {
        serde_json::to_string(values).unwrap_or_else(|_| "[]".to_string())
    }

    fn rows_affected(result: &sqlx::sqlite::SqliteQueryResult) -> u64 {
        result.rows_affected()
    }

    fn id_array(column: Option<String>) -> Vec<i64> {
        ids_from_csv(column.as_deref())
    }

    fn text(value: &str) -> Cow<'_, str> {
        Cow::Borrowed(value)
    }

    fn ref_key(message_id: &str) -> String {
        message_id.to_string()
    }

    /// `{headers body} : ("w1" * AND "w2 w3")`: each term a phrase of its
    /// words (one word: the word), `*` after it for a prefix match; `body :`
    /// for the body alone.
    /// The words as they are: FTS5's tokenizer splits them at the spaces.
    fn search_columns(text: &SearchText) -> (String, String) {
        (text.headers.clone(), text.body.clone())
    }

    fn search_query(search: &TextSearch) -> String {
        let columns = match search.scope {
            SearchScope::All => "{headers body}",
            SearchScope::Body => "body",
        };
        let terms: Vec<String> = search
            .terms
            .iter()
            .map(|term| {
                let phrase = term.words.join(" ").replace('"', "\"\"");
                match term.prefix {
                    true => format!("\"{phrase}\" *"),
                    false => format!("\"{phrase}\""),
                }
            })
            .collect();
        format!("{columns} : ({})", terms.join(" AND "))
    }
}

impl SqliteStore {
    /// Opens (creating if missing) and migrates the database at `url`
    /// (`sqlite://path/fastview.db`). `max_connections` bounds the read pool.
    pub async fn connect(url: &str, max_connections: u32) -> StoreResult<Self> {
        Self::connect_capped(url, max_connections, None).await
    }

    /// [`SqliteStore::connect`] with the database file capped at about
    /// `max_bytes` (SQLite's `max_page_count`, rounded down to whole pages;
    /// `None`: no cap). A write past the cap fails with
    /// [`StoreError::StorageFull`](super::StoreError::StorageFull) exactly as
    /// on a full disk, and, as there, rows destroyed free space for later
    /// writes.
    ///
    /// A failed write never poisons the writer: SQLite rolls a transaction
    /// back by itself on `SQLITE_FULL`, after which sqlx's own rollback fails
    /// and its connection would stay at a non-zero transaction depth (every
    /// later `BEGIN` refused). The writer pool therefore drops a connection
    /// still in a transaction when it is next acquired and opens a new one.
    pub async fn connect_capped(
        url: &str,
        max_connections: u32,
        max_bytes: Option<u64>,
    ) -> StoreResult<Self> {
        let mut options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(30))
            .pragma("cache_size", format!("-{WRITER_PAGE_CACHE_KIB}"))
            // Reads map the file instead of copying pages through read(2):
            // under load the copies and the page-cache lookups behind them
            // were a tenth of the server's CPU.
            .pragma("mmap_size", MMAP_BYTES.to_string())
            .pragma("temp_store", "memory");
        if let Some(max_bytes) = max_bytes {
            // The default page size of a new file (4096); `page_size` is set
            // first so that the count means what it says.
            options = options
                .page_size(4096)
                .pragma("max_page_count", (max_bytes / 4096).max(1).to_string());
        }
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            // The pool's release ping runs after a dropped transaction's
            // rollback, so by the next acquire the depth is settled: a
            // connection still "in a transaction" is one whose rollback
            // failed (see above) and is replaced.
            .before_acquire(|conn, _| Box::pin(async move { Ok(!conn.is_in_transaction()) }))
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
        let readers = max_connections.max(1);
        let reader_cache_kib = (READERS_PAGE_CACHE_KIB / readers).max(1024);
        let path = options.get_filename().to_path_buf();
        let reader = SqlitePoolOptions::new()
            .max_connections(readers)
            .min_connections(1)
            .connect_with(options.pragma("cache_size", format!("-{reader_cache_kib}")))
            .await?;
        let store = Self::from_pools(reader, writer);
        // Hot reads open the file by its path alone: a URL with parameters
        // (`mode=memory`, `vfs=`, `immutable`) keeps every read on the pool.
        if url.contains('?') {
            return Ok(store);
        }
        // One hot connection per thread that can run tasks at once.
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let hot_count = threads.min(readers as usize);
        match HotReader::open(&path, hot_count, reader_cache_kib, MMAP_BYTES) {
            Ok(hot) => Ok(store.with_hot_reader(hot)),
            Err(error) => {
                tracing::warn!(%error, "no hot reads: every read goes through the pool");
                Ok(store)
            }
        }
    }

    /// The query plan SQLite chooses for the inMailbox + receivedAt listing
    /// (newest first), one line per step (for the test that proves it is
    /// served from an index).
    pub async fn mailbox_listing_plan(&self) -> StoreResult<Vec<String>> {
        let query = sqlx::query(concat!("EXPLAIN QUERY PLAN ", listing!("DESC")))
            .bind(1_i64)
            .bind(30_i64)
            .bind(0_i64);
        self.query_plan(query).await
    }

    /// The query plan SQLite chooses for a search's list view (newest
    /// first: the walk by search key), one line per step: for the test that
    /// proves it drives from the full-text index in key order, with no sort.
    pub async fn search_page_plan(&self) -> StoreResult<Vec<String>> {
        let query = sqlx::query(concat!("EXPLAIN QUERY PLAN ", search_walk!()))
            .bind(1_i64)
            .bind("{headers body} : (\"word\" *)")
            .bind(None::<i64>)
            .bind(1_i64 << 40)
            .bind((2_i64 << 40) - 1)
            .bind(50_i64);
        self.query_plan(query).await
    }

    /// The `detail` column of each step of an `EXPLAIN QUERY PLAN` statement.
    async fn query_plan(
        &self,
        query: sqlx::query::Query<'_, sqlx::Sqlite, sqlx::sqlite::SqliteArguments>,
    ) -> StoreResult<Vec<String>> {
        let rows = query.fetch_all(&self.reader).await?;
        Ok(rows
            .iter()
            .map(|row| row.get::<String, _>("detail"))
            .collect())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::store::prelude::*;

    /// A store with hot reads in a temp dir (kept alive by the first
    /// value), one account and the id of its inbox.
    pub(crate) async fn store_with_account() -> (tempfile::TempDir, SqliteStore, i64, i64) {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("a.db").display());
        let store = SqliteStore::connect(&url, 2).await.unwrap();
        let account = store.create_account("a@example.com", "x").await.unwrap().id;
        let inbox = store.mailboxes(account).await.unwrap()[0].id;
        (dir, store, account, inbox)
    }

    /// Stores one bare email in `inbox`; its id.
    pub(crate) async fn insert_one(store: &SqliteStore, account: i64, inbox: i64) -> i64 {
        let email = crate::store::NewEmail {
            blob_id: "b1".into(),
            size: 1,
            received_at: 0,
            sent_at: None,
            mailbox_ids: vec![inbox],
            keywords: Vec::new(),
            header_block: Vec::new(),
            fast_view: crate::store::FastView::default(),
            structure: Vec::new(),
            search: Default::default(),
            index: crate::store::EmailIndex::default(),
        };
        let inserted = store.insert_emails(account, &[email]).await.unwrap();
        let [crate::store::Inserted::New(id)] = inserted[..] else {
            panic!("not inserted");
        };
        id
    }

    /// A statement that picks rows by a list of their primary keys looks
    /// each one up, never reading the whole account: SQLite, left to
    /// itself (no statistics), prefers an index on `account_id` to the
    /// rowid, and reads every email of the account per call.
    #[tokio::test]
    async fn id_lists_are_looked_up_by_key_not_by_account() {
        let (dir, _store, _account, _inbox) = store_with_account().await;
        let connection = rusqlite::Connection::open(dir.path().join("a.db")).unwrap();
        // Every statement of the dialect that takes a list, by its name.
        macro_rules! by_name {
            ($($field:ident),* $(,)?) => {
                [$((stringify!($field), SqliteDialect::SQL.$field)),*]
            };
        }
        let by_id_list = by_name![
            body_structures,
            delete_blob_grants,
            delete_emails,
            delete_memberships,
            email_accounts,
            email_lists,
            email_meta,
            email_meta_unless_state,
            evicted_among,
            fast_views,
            forget_upstream_uids,
            header_blocks,
            held_blobs,
            live_emails,
            mirror_emails_by_local,
            mirror_emails_by_upstream,
            mirror_threads,
            owned_mailboxes,
            positions_asc,
            positions_desc,
            query_rows_of,
            referenced_blobs,
            search_delete,
            stored_blobs,
            thread_emails,
            thread_refs,
            threads_remaining,
            threads_with_others,
            unmark_evicted,
            upstream_locations,
            upstream_uids_among,
        ];
        for (name, sql) in by_id_list {
            let mut plan = connection
                .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
                .unwrap();
            // The list (`$2`, or `$1` where it comes first) as JSON, any
            // other parameter a number.
            for index in 1..=plan.parameter_count() {
                let list = plan
                    .parameter_name(index)
                    .is_some_and(|name| sql.contains(&format!("json_each({name})")));
                if list {
                    plan.raw_bind_parameter(index, "[1, 2]").unwrap();
                } else {
                    plan.raw_bind_parameter(index, 1).unwrap();
                }
            }
            let mut rows = plan.raw_query();
            let mut lines = Vec::new();
            while let Some(row) = rows.next().unwrap() {
                lines.push(row.get::<_, String>(3).unwrap());
            }
            assert!(
                !lines.iter().any(|line| line.ends_with("(account_id=?)")),
                "{name} reads a whole account: {lines:?}"
            );
            // Nor a whole table, but the list itself (`json_each`, or `j`);
            // search_delete's `SCAN email_search_input` is of the view's
            // rows its index search found, materialized for the trigger.
            let allowed = |line: &str| {
                line.starts_with("SCAN json_each")
                    || line.starts_with("SCAN j VIRTUAL TABLE")
                    || (name == "search_delete" && line.starts_with("SCAN email_search_input"))
            };
            let scans_a_table = lines
                .iter()
                .any(|line| line.starts_with("SCAN ") && !allowed(line));
            assert!(!scans_a_table, "{name} reads a whole table: {lines:?}");
        }
    }

    #[tokio::test]
    async fn the_list_views_query_reads_are_hot() {
        let (_dir, store, account, inbox) = store_with_account().await;
        let served = || store.hot.as_ref().unwrap().served();
        let before = served();
        assert!(store.states(account).await.is_ok());
        assert!(store.owns_mailbox(account, inbox).await.unwrap());
        assert!(!store.owns_mailbox(account + 1, inbox).await.unwrap());
        let page = store.mailbox_emails_by_received(inbox, true, 0, 30).await;
        assert_eq!(page.unwrap(), (Vec::new(), 0));
        // Each one statement (the page and its count: one read), none
        // handed to the pool.
        assert_eq!(served() - before, 4);
        // A page reaching past HOT_IDS goes through the pool.
        let page = store.mailbox_emails_by_received(inbox, true, 0, 101).await;
        assert_eq!(page.unwrap(), (Vec::new(), 0));
        let page = store.mailbox_emails_by_received(inbox, true, 90, 30).await;
        assert_eq!(page.unwrap(), (Vec::new(), 0));
        assert_eq!(served() - before, 4);
    }

    #[tokio::test]
    async fn a_proxied_calls_id_mapping_is_hot() {
        let (_dir, store, account, inbox) = store_with_account().await;
        let id = insert_one(&store, account, inbox).await;
        let mapped = crate::store::MirroredEmail {
            email_id: id,
            upstream_id: "M1".into(),
            blob_id: "B1".into(),
            thread_id: "T1".into(),
            parts: None,
        };
        store
            .put_mirror_emails(account, std::slice::from_ref(&mapped))
            .await
            .unwrap();
        let served = || store.hot.as_ref().unwrap().served();
        let before = served();
        let ids = [id, id + 1];
        let by_local = store.mirror_emails(account, Some(&ids), None);
        assert_eq!(by_local.await.unwrap(), vec![mapped.clone()]);
        let by_upstream = store.mirror_emails(account, None, Some(&["M1", "M2"]));
        assert_eq!(by_upstream.await.unwrap(), vec![mapped.clone()]);
        let other_account = store.mirror_emails(account + 1, None, Some(&["M1"]));
        assert_eq!(other_account.await.unwrap(), Vec::new());
        assert_eq!(served() - before, 3);
        // All of an account's, or more than HOT_IDS ids: the pool, alike.
        let all = store.mirror_emails(account, None, None);
        assert_eq!(all.await.unwrap(), vec![mapped.clone()]);
        let many: Vec<i64> = (id..id + 101).collect();
        let many = store.mirror_emails(account, Some(&many), None);
        assert_eq!(many.await.unwrap(), vec![mapped]);
        assert_eq!(served() - before, 3);
    }

    #[tokio::test]
    async fn a_known_email_state_needs_no_read_until_something_is_committed() {
        let (dir, store, account, inbox) = store_with_account().await;
        let other = store.create_account("b@example.com", "x").await.unwrap().id;
        let id = insert_one(&store, account, inbox).await;
        let hot = store.hot.clone().unwrap();
        let (rows, state) = store
            .email_meta_unless_state(account, &[id], None)
            .await
            .unwrap();
        assert_eq!(rows.unwrap().len(), 1);
        let (served, vouched) = (hot.served(), hot.vouched_reads());
        // Nothing committed since: the state without a read, twice.
        for _ in 0..2 {
            let again = store
                .email_meta_unless_state(account, &[id], Some(state))
                .await;
            assert_eq!(again.unwrap(), (None, state));
        }
        assert_eq!((hot.served(), hot.vouched_reads()), (served, vouched + 2));
        // A state the reader did not read is read.
        let other_state = store
            .email_meta_unless_state(account, &[id], Some(state - 1))
            .await;
        assert_eq!(other_state.unwrap().1, state);
        assert_eq!(
            (hot.served(), hot.vouched_reads()),
            (served + 1, vouched + 2)
        );
        // A commit of another account's: read again, the same state.
        let folder = crate::store::NewMailbox {
            parent_id: None,
            name: "Folder".into(),
            role: None,
            sort_order: 0,
            is_subscribed: true,
        };
        store.create_mailbox(other, &folder).await.unwrap();
        let again = store
            .email_meta_unless_state(account, &[id], Some(state))
            .await;
        assert_eq!(again.unwrap(), (None, state));
        assert_eq!(
            (hot.served(), hot.vouched_reads()),
            (served + 2, vouched + 2)
        );
        // A commit of another connection, as `fastview import` in another
        // process makes: seen at once.
        let outside = rusqlite::Connection::open(dir.path().join("a.db")).unwrap();
        outside
            .execute(
                "UPDATE accounts SET email_state = email_state + 1 WHERE id = ?1",
                [account],
            )
            .unwrap();
        let moved = store
            .email_meta_unless_state(account, &[id], Some(state))
            .await;
        let (rows, moved) = moved.unwrap();
        assert_eq!((rows.map(|rows| rows.len()), moved), (Some(1), state + 1));
        assert_eq!(hot.vouched_reads(), vouched + 2);
    }

    #[tokio::test]
    async fn an_accounts_states_need_no_read_until_something_is_committed() {
        let (dir, store, account, inbox) = store_with_account().await;
        let hot = store.hot.clone().unwrap();
        let first = store.states(account).await.unwrap();
        let (served, vouched) = (hot.served(), hot.vouched_reads());
        for _ in 0..2 {
            assert_eq!(store.states(account).await.unwrap(), first);
        }
        assert_eq!((hot.served(), hot.vouched_reads()), (served, vouched + 2));
        // A commit of this process: read again, the Email state moved.
        insert_one(&store, account, inbox).await;
        let served = hot.served();
        let after_insert = store.states(account).await.unwrap();
        assert!(after_insert.email > first.email);
        assert_eq!(hot.served(), served + 1);
        // A commit of another connection (another process): seen at once.
        let outside = rusqlite::Connection::open(dir.path().join("a.db")).unwrap();
        outside
            .execute(
                "UPDATE accounts SET mailbox_state = mailbox_state + 5 WHERE id = ?1",
                [account],
            )
            .unwrap();
        let moved = store.states(account).await.unwrap();
        assert_eq!(moved.mailbox, after_insert.mailbox + 5);
        assert_eq!(hot.served(), served + 2);
        // No such account: not found, each time read.
        assert!(store.states(account + 100).await.is_err());
        assert!(store.states(account + 100).await.is_err());
        assert_eq!(hot.vouched_reads(), vouched + 2);
    }

    #[tokio::test]
    async fn a_symlinked_database_is_watched_where_sqlite_keeps_its_shm() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("disk")).unwrap();
        let (real, link) = (dir.path().join("disk/a.db"), dir.path().join("a.db"));
        // A `-shm` left at the link's place (a crash before the file moved)
        // never changes: watching it would vouch for a state forever.
        let url = format!("sqlite://{}", real.display());
        drop(SqliteStore::connect(&url, 2).await.unwrap());
        std::os::unix::fs::symlink(&real, &link).unwrap();
        std::fs::write(dir.path().join("a.db-shm"), vec![1u8; 32_768]).unwrap();
        let url = format!("sqlite://{}", link.display());
        let store = SqliteStore::connect(&url, 2).await.unwrap();
        let account = store.create_account("a@example.com", "x").await.unwrap().id;
        let (_, state) = store
            .email_meta_unless_state(account, &[], None)
            .await
            .unwrap();
        let outside = rusqlite::Connection::open(&real).unwrap();
        outside
            .execute(
                "UPDATE accounts SET email_state = email_state + 1 WHERE id = ?1",
                [account],
            )
            .unwrap();
        let (_, moved) = store
            .email_meta_unless_state(account, &[], Some(state))
            .await
            .unwrap();
        assert_eq!(moved, state + 1);
    }

    #[tokio::test]
    async fn hot_reads_only_for_a_plain_file_url() {
        let dir = tempfile::tempdir().unwrap();
        let plain = format!("sqlite://{}", dir.path().join("a.db").display());
        assert!(SqliteStore::connect(&plain, 2).await.unwrap().hot.is_some());
        // Parameters (here `mode`) could name another database than the
        // file's path: every read goes through the pool.
        let with_mode = format!("sqlite://{}?mode=rwc", dir.path().join("b.db").display());
        assert!(
            SqliteStore::connect(&with_mode, 2)
                .await
                .unwrap()
                .hot
                .is_none()
        );
    }
}

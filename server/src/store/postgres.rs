//! PostgreSQL, selected by a `postgres://` (or `postgresql://`) database
//! URL: [`PostgresStore`] is the one store over [`PostgresDialect`], with its
//! own migrations in `migrations/postgres`.
//!
//! - Batched reads bind an id list as one `bigint[]` (a text list as
//!   `text[]`) and match it with `= any($n)`: one static, prepared statement
//!   whatever the number of ids. An email's mailbox ids come back as an array.
//! - Every write transaction of an account starts by locking the account row
//!   (`SELECT … FOR NO KEY UPDATE`): writers of one account serialize, so
//!   state counters, duplicate checks and threading see each other's rows;
//!   writers of different accounts run in parallel. The lock does not block
//!   the foreign-key checks of other inserts (they take `KEY SHARE`).
//! - Email ids of a batch are drawn from the identity sequence first
//!   (inserted with `OVERRIDING SYSTEM VALUE`), which lets threading decide
//!   in memory, in batch order, exactly as on SQLite.
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
use std::str::FromStr;

use sha2::{Digest, Sha256};
use sqlx::Row;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use super::columns::distinct;
use super::dialect::{Dialect, Statements, positions, query_columns};
use super::sql::SqlStore;
use super::{SearchScope, SearchText, StoreResult, TextSearch};

/// Message ids longer than this (in bytes) are keyed by their SHA-256 digest
/// in `thread_refs`.
pub const MAX_REF_KEY: usize = 512;

/// The PostgreSQL-backed store.
pub type PostgresStore = SqlStore<PostgresDialect>;

/// What is PostgreSQL's own (see the module doc).
#[derive(Debug, Clone, Copy)]
pub struct PostgresDialect;

/// The mailbox ids of email `e`, ascending.
macro_rules! mailbox_ids {
    () => {
        "array(SELECT x.mailbox_id FROM email_mailboxes x WHERE x.email_id = e.id \
         ORDER BY x.mailbox_id)"
    };
}

/// The listing of one mailbox by receivedAt: the page is cut from the
/// (mailbox_id, received_at, email_id) primary key alone, then joined to the
/// emails primary key (which INCLUDEs thread_id) for the page rows only.
macro_rules! listing {
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

/// A page of the emails a full-text query matches (in mailbox `$3` unless
/// NULL) by receivedAt (`$4` limit, `$5` offset). No count with it: a count
/// would read every match, and the planner could not stop after the page
/// along `email_search_recent` (migration 0305) for a common word.
macro_rules! search_page {
    ($direction:literal) => {
        concat!(
            "SELECT s.email_id FROM email_search s \
             WHERE s.account_id = $1 AND s.document @@ $2::tsquery AND ($3::bigint IS NULL \
             OR EXISTS (SELECT 1 FROM email_mailboxes m WHERE m.mailbox_id = $3 \
             AND m.received_at = s.received_at AND m.email_id = s.email_id)) \
             ORDER BY s.received_at ",
            $direction,
            ", s.email_id ",
            $direction,
            " LIMIT $4 OFFSET $5"
        )
    };
}

/// The projection read, from fast_view's covering primary key.
macro_rules! fast_views {
    () => {
        "SELECT f.email_id, f.preview, f.has_attachment FROM fast_view f \
         JOIN emails e ON e.id = f.email_id \
         WHERE e.account_id = $1 AND f.email_id = any($2)"
    };
}

/// Moves the identity sequence of a table up to its highest id, never back
/// (ids of destroyed rows stay unused, like SQLite's AUTOINCREMENT).
macro_rules! raise_sequence {
    ($table:literal) => {
        (
            $table,
            concat!(
                "SELECT setval(s.seq, max(t.id)) FROM ",
                $table,
                " t, (SELECT pg_get_serial_sequence('",
                $table,
                "', 'id') AS seq) s GROUP BY s.seq \
                 HAVING max(t.id) > coalesce(pg_sequence_last_value(s.seq::regclass), 0)"
            ),
        )
    };
}

impl Dialect for PostgresDialect {
    type Db = sqlx::Postgres;
    type Ids = Vec<i64>;
    type Texts = Vec<String>;
    type IdArray = Vec<i64>;
    type Hot = ();

    const BEGIN_WRITE: Option<&'static str> = None;
    const OVERRIDING: &'static str = "OVERRIDING SYSTEM VALUE";
    // Until autovacuum gets to it, a bulk load leaves estimates of an empty
    // account: the planner then ANDs the account's whole `email_search_recent`
    // range into a full-text count (4 ms of 17 on 100,000 messages; ADR 0006).
    const ANALYZE: Option<&'static str> = Some("ANALYZE");
    // With statistics, the planner counts a word in a tenth of an account by
    // reading every row and its TOASTed words (213 ms on 100,000 messages)
    // rather than through the GIN index (10 ms): it does not price the
    // detoasting. A read of every match (the count, the ids a condition
    // matched) never gains from a sequential scan here.
    const FULL_TEXT_SETUP: Option<&'static str> = Some("SET LOCAL enable_seqscan = off");
    const SQL: Statements = Statements {
        lock_account: "SELECT id FROM accounts WHERE id = $1 FOR NO KEY UPDATE",
        // The unique index is on lower(email).
        account_by_email: "SELECT id, email, password_hash FROM accounts \
             WHERE lower(email) = lower($1)",
        set_password: "UPDATE accounts SET password_hash = $2 WHERE lower(email) = lower($1)",
        account_to_remove: "SELECT id FROM accounts WHERE lower(email) = lower($1) FOR UPDATE",
        next_email_ids: "SELECT nextval(pg_get_serial_sequence('emails', 'id')) \
             FROM generate_series(1, $1)",
        owned_mailboxes: "SELECT id FROM mailboxes WHERE account_id = $1 AND id = any($2)",
        upstream_locations: "SELECT u.email_id, u.mailbox_id, u.uid, u.keywords FROM upstream_messages u \
             JOIN mailboxes m ON m.id = u.mailbox_id \
             WHERE m.account_id = $1 AND u.email_id = any($2) ORDER BY u.mailbox_id, u.uid",
        unmark_evicted: "DELETE FROM upstream_evicted WHERE blob_id = any($1)",
        evicted_among: "SELECT blob_id FROM upstream_evicted WHERE blob_id = any($1)",
        forget_upstream_uids: "DELETE FROM upstream_messages WHERE mailbox_id = $1 AND uid = any($2)",
        upstream_uids_among: "SELECT uid, email_id, keywords FROM upstream_messages \
             WHERE mailbox_id = $1 AND uid = any($2) ORDER BY uid",
        mirror_emails_by_local: "SELECT email_id, upstream_id, blob_id, thread_id, parts \
             FROM jmap_mirror_emails WHERE account_id = $1 AND email_id = any($2)",
        mirror_emails_by_upstream: "SELECT email_id, upstream_id, blob_id, thread_id, parts \
             FROM jmap_mirror_emails WHERE account_id = $1 AND upstream_id = any($2)",
        mirror_threads: "SELECT m.thread_id, m.upstream_id FROM jmap_mirror_emails m \
             JOIN emails e ON e.id = m.email_id \
             WHERE m.account_id = $1 AND m.thread_id = any($2) ORDER BY m.thread_id, e.received_at, e.id",
        stored_blobs: "SELECT blob_id, id FROM emails WHERE account_id = $1 AND blob_id = any($2)",
        thread_refs: "SELECT message_id, thread_id, base_subject FROM thread_refs \
             WHERE account_id = $1 AND message_id = any($2)",
        threads_with_others: "SELECT DISTINCT thread_id FROM emails WHERE account_id = $1 \
             AND thread_id = any($2) AND NOT (id = any($3))",
        threads_remaining: "SELECT DISTINCT thread_id FROM emails WHERE account_id = $1 \
             AND thread_id = any($2)",
        email_lists: concat!(
            "SELECT e.id, e.thread_id, e.received_at, e.keywords, ",
            mailbox_ids!(),
            " FROM emails e WHERE e.account_id = $1 AND e.id = any($2)"
        ),
        delete_emails: "DELETE FROM emails WHERE account_id = $1 AND id = any($2) \
             RETURNING id, blob_id",
        delete_blob_grants: "DELETE FROM account_blobs WHERE account_id = $1 \
             AND blob_id = any($2)",
        referenced_blobs: "SELECT blob_id FROM emails WHERE blob_id = any($1) \
             UNION SELECT blob_id FROM account_blobs WHERE blob_id = any($1) \
             UNION SELECT blob_id FROM deliveries WHERE blob_id = any($1)",
        held_blobs: "SELECT blob_id FROM account_blobs WHERE account_id = $1 AND blob_id = any($2)",
        delete_memberships: "DELETE FROM email_mailboxes WHERE email_id = any($1)",
        // KEY SHARE holds the emails against deletion until commit; one
        // being destroyed right now is skipped rather than waited for.
        live_emails: "SELECT id FROM emails WHERE id = any($1) ORDER BY id \
             FOR KEY SHARE SKIP LOCKED",
        email_accounts: "SELECT id, account_id, received_at FROM emails WHERE id = any($1)",
        search_page_desc: search_page!("DESC"),
        search_page_asc: search_page!("ASC"),
        search_walk: None,
        search_count: "SELECT count(*) FROM email_search s \
             WHERE s.account_id = $1 AND s.document @@ $2::tsquery AND ($3::bigint IS NULL \
             OR EXISTS (SELECT 1 FROM email_mailboxes m WHERE m.mailbox_id = $3 \
             AND m.received_at = s.received_at AND m.email_id = s.email_id))",
        search_insert_head: "INSERT INTO email_search (email_id, account_id, received_at, document) \
             SELECT v.id, v.account, v.received, (v.h || v.b)::tsvector FROM (",
        search_insert_tail: ") AS v(id, account, received, h, b) ON CONFLICT (email_id) \
             DO UPDATE SET document = excluded.document, received_at = excluded.received_at",
        search_delete: "DELETE FROM email_search WHERE email_id = any($1)",
        search_index_unfilled: "SELECT EXISTS (SELECT 1 FROM emails) \
             AND NOT EXISTS (SELECT 1 FROM email_search)",
        search_ids: "SELECT email_id FROM email_search \
             WHERE account_id = $1 AND document @@ $2::tsquery",
        email_meta: concat!(
            "SELECT e.id, e.blob_id, e.thread_id, e.size, e.received_at, e.keywords, ",
            mailbox_ids!(),
            " FROM emails e WHERE e.account_id = $1 AND e.id = any($2)"
        ),
        // One trip to the database per Email/get: the state, and the rows
        // unless the state is $3; the mailbox ids comma-separated as on SQLite.
        email_meta_unless_state: "SELECT a.email_state, CASE WHEN a.email_state IS DISTINCT FROM $3::bigint THEN \
               coalesce((SELECT json_agg(json_build_array(e.id, e.blob_id, \
               e.thread_id, e.size, e.received_at, e.keywords, (SELECT string_agg( \
               x.mailbox_id::text, ',' ORDER BY x.mailbox_id) FROM email_mailboxes x \
               WHERE x.email_id = e.id))) FROM emails e WHERE e.account_id = $1 \
               AND e.id = any($2)), '[]')::text END FROM accounts a WHERE a.id = $1",
        header_blocks: "SELECT h.email_id, h.header_block FROM email_headers h \
             JOIN emails e ON e.id = h.email_id WHERE e.account_id = $1 AND h.email_id = any($2)",
        body_structures: "SELECT s.email_id, s.structure FROM body_structure s \
             JOIN emails e ON e.id = s.email_id WHERE e.account_id = $1 AND s.email_id = any($2)",
        fast_views: fast_views!(),
        listing_desc: listing!("DESC"),
        listing_asc: listing!("ASC"),
        positions_desc: positions!(">", "= any($2)"),
        positions_asc: positions!("<", "= any($2)"),
        query_rows: concat!(query_columns!(mailbox_ids!()), "WHERE e.account_id = $1"),
        query_rows_of: concat!(
            query_columns!(mailbox_ids!()),
            "WHERE e.account_id = $1 AND e.id = any($2)"
        ),
        query_rows_in_mailbox: concat!(
            query_columns!(mailbox_ids!()),
            "WHERE e.account_id = $1 \
             AND e.id IN (SELECT email_id FROM email_mailboxes WHERE mailbox_id = $2)"
        ),
        thread_emails: "SELECT thread_id, id FROM emails WHERE account_id = $1 \
             AND thread_id = any($2) ORDER BY thread_id, received_at, id",
        after_raw_import: &[
            raise_sequence!("accounts"),
            raise_sequence!("mailboxes"),
            raise_sequence!("emails"),
        ],
    };

    fn ids(ids: &[i64]) -> Vec<i64> {
        distinct(ids)
    }

    fn texts(values: &[&str]) -> Vec<String> {
        values
            .iter()
            .map(|value| Self::text(value).into_owned())
            .collect()
    }

    fn rows_affected(result: &sqlx::postgres::PgQueryResult) -> u64 {
        result.rows_affected()
    }

    fn id_array(column: Vec<i64>) -> Vec<i64> {
        column
    }

    fn text(value: &str) -> Cow<'_, str> {
        if value.contains('\0') {
            Cow::Owned(value.replace('\0', ""))
        } else {
            Cow::Borrowed(value)
        }
    }

    fn ref_key(message_id: &str) -> String {
        let clean = Self::text(message_id);
        if clean.len() <= MAX_REF_KEY {
            return clean.into_owned();
        }
        let digest = Sha256::digest(clean.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        format!("sha256:{hex}")
    }

    /// `'w1':* & 'w2' <-> 'w3'`: each term its words in sequence (`<->`),
    /// `:*` on the last for a prefix match, `D` (the body's weight) on each
    /// for the body alone.
    /// `tsvector` literals, not text for `to_tsvector`: PostgreSQL's parser
    /// would cut a word such as `660320e687c8…` into a number and the rest,
    /// and its idea of a letter depends on the database's locale. Each word
    /// is a lexeme at its position (headers first, weight A; the body after
    /// them and one empty position, so no phrase spans the two, weight D);
    /// the two halves are joined in the insert. `mail/search.rs` bounds the
    /// words so that positions stay under PostgreSQL's 16,383.
    fn search_columns(text: &SearchText) -> (String, String) {
        let mut position = 0usize;
        let mut literal = |words: &str, weight: char, gap: usize| {
            position += gap;
            let mut out = String::with_capacity(words.len() * 2);
            let mut digits = itoa::Buffer::new();
            for word in words.split(' ').filter(|word| !word.is_empty()) {
                position += 1;
                out.push('\'');
                // Folded words are letters and digits; quote anyway.
                if word.contains(['\\', '\'']) {
                    out.push_str(&word.replace('\\', "\\\\").replace('\'', "''"));
                } else {
                    out.push_str(word);
                }
                out.push_str("':");
                out.push_str(digits.format(position.min(16_383)));
                out.push(weight);
                out.push(' ');
            }
            out
        };
        let headers = literal(&text.headers, 'A', 0);
        let body = literal(&text.body, 'D', 1);
        (headers, body)
    }

    fn search_query(search: &TextSearch) -> String {
        let weight = match search.scope {
            SearchScope::All => "",
            SearchScope::Body => "D",
        };
        let lexeme = |word: &str, prefix: bool| {
            let word = word.replace('\\', "\\\\").replace('\'', "''");
            let star = if prefix { "*" } else { "" };
            match (prefix, weight) {
                (false, "") => format!("'{word}'"),
                _ => format!("'{word}':{star}{weight}"),
            }
        };
        let terms: Vec<String> = search
            .terms
            .iter()
            .map(|term| {
                let last = term.words.len().saturating_sub(1);
                let words: Vec<String> = term
                    .words
                    .iter()
                    .enumerate()
                    .map(|(i, word)| lexeme(word, term.prefix && i == last))
                    .collect();
                format!("({})", words.join(" <-> "))
            })
            .collect();
        terms.join(" & ")
    }
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
        Ok(Self::from_pools(pool.clone(), pool))
    }

    /// The plan PostgreSQL chooses for the `inMailbox` + receivedAt listing
    /// (newest first) of `mailbox`, one line per plan line (for the test that
    /// proves it is served by index-only scans).
    pub async fn mailbox_listing_plan(
        &self,
        mailbox: i64,
        position: i64,
        limit: i64,
    ) -> StoreResult<Vec<String>> {
        let rows = sqlx::query(concat!("EXPLAIN ", listing!("DESC")))
            .bind(mailbox)
            .bind(limit)
            .bind(position)
            .fetch_all(&self.reader)
            .await?;
        Ok(rows.iter().map(|row| row.get::<String, _>(0)).collect())
    }

    /// The plan PostgreSQL chooses for the projection read, one line per plan line.
    pub async fn fast_view_plan(&self, account: i64, ids: &[i64]) -> StoreResult<Vec<String>> {
        let rows = sqlx::query(concat!("EXPLAIN ", fast_views!()))
            .bind(account)
            .bind(ids)
            .fetch_all(&self.reader)
            .await?;
        Ok(rows.iter().map(|row| row.get::<String, _>(0)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_columns_are_tsvector_literals_at_their_positions() {
        let text = SearchText {
            headers: "re pat'ch".into(),
            body: "back\\slash  re".into(),
        };
        let (headers, body) = PostgresDialect::search_columns(&text);
        assert_eq!(headers, "'re':1A 'pat''ch':2A ");
        // One empty position between the halves: no phrase spans them.
        assert_eq!(body, "'back\\\\slash':4D 're':5D ");
    }
}

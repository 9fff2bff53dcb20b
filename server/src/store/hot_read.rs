//! SQLite's hot reads on the calling thread (issue 20, ADR 0003).
//!
//! sqlx runs every SQLite statement on its connection's own worker thread:
//! a query is handed over, that thread wakes, runs it and hands the rows
//! back. For Email/get's one statement per call (the account's Email state,
//! and the metadata rows only when that state has moved) the hand-off cost
//! more than the statement: a fifth of the server's core went to switching
//! threads and waking them (ADR 0003's profile). The list view's
//! Email/query (inMailbox, by receivedAt: the account's states, whether it
//! owns the mailbox, the page and its count) has the same hot form, in
//! `HotReader`'s [`HotReads`] (`states`, `owns_mailbox`, `mailbox_page`), for a
//! page within the first [`HOT_IDS`] emails of a mailbox of at most 10,000.
//!
//! A [`HotReader`] keeps a few read-only connections of its own (rusqlite,
//! over the same SQLite library sqlx links) and runs such a statement on the
//! thread that asks, under the connection's mutex. It never waits there: a
//! call finds a free connection or gets `None`, and a statement that meets a
//! lock (`SQLITE_BUSY`, busy timeout 0) or fails in any way is reported as
//! `None` too. The caller then runs the same statement through sqlx's pool,
//! which waits, retries and reports errors as every other read does. Only
//! short, indexed reads belong here: the async executor's thread runs them
//! (at most [`HOT_IDS`] emails' rows; a page of a cold file is read from
//! disk on that thread, where the pool would read it on its own).
//!
//! Reads see the last committed transaction, as the pool's readers do (WAL).
//!
//! Email/get's statement, when the caller already holds the metadata of a
//! known Email state, needs no read transaction at all while nothing has
//! been committed since that state was read ([`HotReads::email_meta_unless_state`]). A
//! read transaction costs SQLite's file locks (four `fcntl` calls: a
//! twentieth of the core in ADR 0003's profile) and the statement; whether
//! anything was committed is in the WAL-index header, the first 96 octets
//! of the database's `-shm` file (two copies of a 48-octet header holding
//! the change counter, the last valid frame and the WAL's salts: any commit
//! of any process changes it; <https://sqlite.org/walformat.html> §2.1),
//! read here with one `pread`. The header is read before the statement
//! whose state it then vouches for, so a commit between the two only makes
//! the next call read again. An account's six states ([`HotReads::states`],
//! read first by every Email/query, Mailbox/get and Mailbox/query) are
//! vouched for the same way.

use rustc_hash::FxHashMap;
use std::cell::Cell;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use rusqlite::{Connection, OpenFlags, OptionalExtension};

use super::dialect::{HotReads, Statements};
use super::{Account, MirroredEmail};

/// The most ids a hot read of Email/get's statement takes, and the longest
/// page a hot list-view read reads: a list view's page and then some; a
/// larger call reads through the pool.
pub const HOT_IDS: usize = 100;

/// The most emails a mailbox may hold for its list view's count to run hot
/// ([`HotReads::mailbox_page`]): the count reads at most this many index
/// entries on the calling thread; a larger mailbox is counted by the pool.
const HOT_COUNT: i64 = 10_000;

/// Read-only connections of one database file for reads on the calling
/// thread (module doc).
pub struct HotReader {
    connections: Vec<Mutex<Connection>>,
    /// The database's `-shm` file, when it could be opened (WAL mode with
    /// a connection open: always, for a store's file).
    shm: Option<File>,
    /// Per account: the Email state [`HotReads::email_meta_unless_state`] read, and the
    /// WAL-index header read before it. At most [`MAX_VOUCHED`] accounts
    /// (keyed by account id, the server's own numbers: hashed with Fx).
    vouched: Mutex<FxHashMap<i64, (WalMark, i64)>>,
    /// Per account: the six states [`HotReads::states`] read, and the
    /// WAL-index header read before them. At most [`MAX_VOUCHED`] accounts.
    vouched_states: Mutex<FxHashMap<i64, (WalMark, [i64; 6])>>,
    /// Reads answered here (not handed to the pool), for tests.
    #[cfg(test)]
    served: AtomicUsize,
    /// States answered from `vouched` without a read, for tests.
    #[cfg(test)]
    vouched_reads: AtomicUsize,
}

/// The most accounts whose Email state [`HotReader`] vouches for at once
/// (about 64 octets each); past it the map starts over.
const MAX_VOUCHED: usize = 100_000;

/// One copy of SQLite's WAL-index header (module doc): equal octets, no
/// commit in between.
type WalMark = [u8; 48];

/// The `-shm` file of `connection`'s database when it is in WAL mode:
/// beside the file as SQLite names it (symbolic links resolved), which
/// need not be beside the path it was opened by.
fn shm_file(connection: &Connection) -> Option<File> {
    let mode: String = connection
        .query_row("PRAGMA journal_mode", [], |row| row.get(0))
        .ok()?;
    if !mode.eq_ignore_ascii_case("wal") {
        return None;
    }
    let mut shm_path = std::ffi::OsString::from(connection.path()?);
    shm_path.push("-shm");
    File::open(shm_path).ok()
}

/// Each thread starts at its own connection, so that a thread keeps reading
/// through the same page cache and the threads do not contend.
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static SLOT: Cell<Option<usize>> = const { Cell::new(None) };
}

/// This thread's first connection index (of any reader).
fn slot() -> usize {
    SLOT.with(|slot| match slot.get() {
        Some(index) => index,
        None => {
            let index = NEXT_SLOT.fetch_add(1, Ordering::Relaxed);
            slot.set(Some(index));
            index
        }
    })
}

impl HotReader {
    /// Opens `count` (at least one) read-only connections of the SQLite file
    /// at `path`, which must exist and be migrated. `cache_kib` is each
    /// connection's page cache; the file is read through a map of up to
    /// `mmap_bytes`, as the pool's readers read it. Errors: the file cannot
    /// be opened or a pragma fails.
    pub fn open(
        path: &Path,
        count: usize,
        cache_kib: u32,
        mmap_bytes: u64,
    ) -> rusqlite::Result<Self> {
        let connections = (0..count.max(1))
            .map(|_| {
                let connection = Connection::open_with_flags(
                    path,
                    OpenFlags::SQLITE_OPEN_READ_ONLY
                        | OpenFlags::SQLITE_OPEN_NO_MUTEX
                        | OpenFlags::SQLITE_OPEN_URI,
                )?;
                // Never wait for a lock on the executor's thread: busy
                // means the pool's turn.
                connection.busy_timeout(std::time::Duration::ZERO)?;
                connection.pragma_update(None, "cache_size", format!("-{cache_kib}"))?;
                connection.pragma_update(None, "mmap_size", mmap_bytes.to_string())?;
                connection.pragma_update(None, "query_only", true)?;
                Ok(Mutex::new(connection))
            })
            .collect::<rusqlite::Result<Vec<Mutex<Connection>>>>()?;
        let shm = match connections[0].lock() {
            Ok(first) => shm_file(&first),
            Err(_) => None,
        };
        Ok(Self {
            connections,
            shm,
            vouched: Mutex::new(FxHashMap::default()),
            vouched_states: Mutex::new(FxHashMap::default()),
            #[cfg(test)]
            served: AtomicUsize::new(0),
            #[cfg(test)]
            vouched_reads: AtomicUsize::new(0),
        })
    }

    /// Runs `read` on a free connection of this reader: `None` when every
    /// connection is in use or `read` fails (the caller reads through the
    /// pool instead; module doc). A failure other than a lock is logged at
    /// debug level.
    pub fn try_read<T>(&self, read: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Option<T> {
        let count = self.connections.len();
        let first = slot() % count;
        let connection =
            (0..count).find_map(|step| self.connections[(first + step) % count].try_lock().ok())?;
        match read(&connection) {
            Ok(value) => {
                #[cfg(test)]
                self.served.fetch_add(1, Ordering::Relaxed);
                Some(value)
            }
            Err(error) => {
                let busy = matches!(
                    error.sqlite_error_code(),
                    Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
                );
                if !busy {
                    tracing::debug!(%error, "hot read failed; reading through the pool");
                }
                None
            }
        }
    }

    /// How many reads were answered on a hot connection so far.
    #[cfg(test)]
    pub fn served(&self) -> usize {
        self.served.load(Ordering::Relaxed)
    }

    /// How many Email states were vouched for without a read so far.
    #[cfg(test)]
    pub fn vouched_reads(&self) -> usize {
        self.vouched_reads.load(Ordering::Relaxed)
    }

    /// The WAL-index header now, when its two copies agree (a writer
    /// updating it, or no `-shm` file: `None`, and the caller reads).
    fn wal_mark(&self) -> Option<WalMark> {
        let mut header = [0u8; 96];
        self.shm.as_ref()?.read_exact_at(&mut header, 0).ok()?;
        let (first, second) = header.split_at(48);
        // isInit (octet 12): a header SQLite has not written yet vouches
        // for nothing.
        (first == second && first[12] != 0).then(|| first.try_into().ok())?
    }
}

/// SQLite's hot forms of the store's reads ([`HotReads`]).
impl HotReads for HotReader {
    /// Email/get's statement ([`super::dialect::Statements::email_meta_unless_state`],
    /// SQLite's text: `$2` the ids as a JSON array): the account's Email
    /// state and, unless it is `known`, the metadata rows as JSON text.
    /// `Some(None)`: no such account; `None`: read it through the pool,
    /// as a call of more than [`HOT_IDS`] ids always is (its rows could
    /// keep the executor's thread on page faults of a cold file).
    ///
    /// When `known` is the state this reader last read for the account and
    /// nothing was committed since (module doc), the answer is `known`
    /// without a read transaction.
    fn email_meta_unless_state(
        &self,
        sql: &str,
        account: i64,
        ids: &[i64],
        known: Option<i64>,
    ) -> Option<Option<(i64, Option<String>)>> {
        if ids.len() > HOT_IDS {
            return None;
        }
        let mark = self.wal_mark();
        if let (Some(mark), Some(known)) = (mark, known) {
            let vouched = self.vouched.lock().ok()?.get(&account).copied();
            if vouched == Some((mark, known)) {
                #[cfg(test)]
                self.vouched_reads.fetch_add(1, Ordering::Relaxed);
                return Some(Some((known, None)));
            }
        }
        let row = self.try_read(|connection| {
            let ids = serde_json::to_string(&super::columns::distinct(ids))
                .unwrap_or_else(|_| "[]".to_string());
            connection
                .prepare_cached(sql)?
                .query_row(
                    rusqlite::named_params! {"$1": account, "$2": ids, "$3": known},
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .optional()
        })?;
        if let (Some(mark), Some((state, _))) = (mark, &row)
            && let Ok(mut vouched) = self.vouched.lock()
        {
            if vouched.len() >= MAX_VOUCHED {
                vouched.clear();
            }
            vouched.insert(account, (mark, *state));
        }
        Some(row)
    }

    /// The six states of `account` by `sql` (one row of six integers, `$1`
    /// the account): read on a free connection, or, when this reader read
    /// them last and nothing was committed since (module doc), the ones it
    /// read, without a read transaction. Every call's Email/query and
    /// Mailbox/get reads them first. `Some(None)`: no such account; `None`:
    /// read them through the pool.
    fn states(&self, sql: &str, account: i64) -> Option<Option<[i64; 6]>> {
        let mark = self.wal_mark();
        if let Some(mark) = mark
            && let Some((vouched_mark, states)) =
                self.vouched_states.lock().ok()?.get(&account).copied()
            && vouched_mark == mark
        {
            #[cfg(test)]
            self.vouched_reads.fetch_add(1, Ordering::Relaxed);
            return Some(Some(states));
        }
        let row = self.try_read(|connection| {
            connection
                .prepare_cached(sql)?
                .query_row(rusqlite::named_params! {"$1": account}, |row| {
                    Ok([
                        row.get(0)?,
                        row.get(1)?,
                        row.get(2)?,
                        row.get(3)?,
                        row.get(4)?,
                        row.get(5)?,
                    ])
                })
                .optional()
        })?;
        if let (Some(mark), Some(states)) = (mark, row)
            && let Ok(mut vouched) = self.vouched_states.lock()
        {
            if vouched.len() >= MAX_VOUCHED {
                vouched.clear();
            }
            vouched.insert(account, (mark, states));
        }
        Some(row)
    }
    fn account_by_email(&self, sql: &str, email: &str) -> Option<Option<Account>> {
        self.try_read(|connection| {
            connection
                .prepare_cached(sql)?
                .query_row(rusqlite::named_params! {"$1": email}, |row| {
                    Ok(Account {
                        id: row.get(0)?,
                        email: row.get(1)?,
                        password_hash: row.get(2)?,
                    })
                })
                .optional()
        })
    }

    fn owns_mailbox(&self, sql: &str, account: i64, mailbox: i64) -> Option<bool> {
        let found = self.try_read(|connection| {
            connection
                .prepare_cached(sql)?
                .query_row(
                    rusqlite::named_params! {"$1": mailbox, "$2": account},
                    |row| row.get::<_, i64>(0),
                )
                .optional()
        })?;
        Some(found.is_some())
    }

    /// The page and the count on one hot connection, one after the other
    /// (two snapshots, as through the pool), when the work is bounded: a
    /// page reaching at most [`HOT_IDS`] rows in, a mailbox of at most
    /// [`HOT_COUNT`] emails; else the pool reads.
    fn mailbox_page(
        &self,
        sql: &str,
        mailbox: i64,
        position: i64,
        limit: i64,
    ) -> Option<(Vec<(i64, i64)>, i64)> {
        // At most HOT_COUNT + 1 index entries, so a hot count stays short.
        const HOT_COUNT_SQL: &str = "SELECT count(*) FROM (SELECT 1 FROM email_mailboxes \
             WHERE mailbox_id = $1 LIMIT $2)";
        if position < 0 || position.saturating_add(limit) > HOT_IDS as i64 {
            return None;
        }
        self.try_read(|connection| {
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
        })?
    }

    /// A proxied call's few ids (issue 20's rule, [`HOT_IDS`]) are mapped
    /// on the calling thread: every call answered from the mirror maps its
    /// ids both ways, and the hop to the pool's thread was most of it.
    fn mirror_emails(
        &self,
        statements: &Statements,
        account: i64,
        local: Option<&[i64]>,
        upstream: Option<&[&str]>,
    ) -> Option<Vec<MirroredEmail>> {
        let (sql, ids) = match (local, upstream) {
            (Some(ids), _) if ids.len() <= HOT_IDS => (
                statements.mirror_emails_by_local,
                serde_json::to_string(ids),
            ),
            (None, Some(ids)) if ids.len() <= HOT_IDS => (
                statements.mirror_emails_by_upstream,
                serde_json::to_string(ids),
            ),
            _ => return None,
        };
        let ids = ids.ok()?;
        self.try_read(|connection| {
            connection
                .prepare_cached(sql)?
                .query_map(rusqlite::named_params! {"$1": account, "$2": ids}, |row| {
                    Ok(MirroredEmail {
                        email_id: row.get(0)?,
                        upstream_id: row.get(1)?,
                        blob_id: row.get(2)?,
                        thread_id: row.get(3)?,
                        parts: row.get(4)?,
                    })
                })?
                .collect::<rusqlite::Result<Vec<_>>>()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(connection: &Connection) -> rusqlite::Result<i64> {
        connection.query_row("SELECT count(*) FROM t", [], |row| row.get(0))
    }

    #[test]
    fn a_read_runs_on_a_free_connection_and_gives_way_to_the_pool_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hot.db");
        let writer = Connection::open(&path).unwrap();
        writer
            .execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1), (2), (3);")
            .unwrap();
        let hot = HotReader::open(&path, 2, 1024, 1 << 20).unwrap();
        assert_eq!(hot.try_read(count), Some(3));
        // Both connections in use: the caller reads through the pool.
        let held: Vec<_> = hot.connections.iter().map(|c| c.lock().unwrap()).collect();
        assert_eq!(hot.try_read(count), None);
        drop(held);
        // A lock (a rollback-journal database another connection holds
        // exclusively) is not waited for: the pool's turn.
        writer
            .execute_batch("BEGIN EXCLUSIVE; DELETE FROM t;")
            .unwrap();
        assert_eq!(hot.try_read(count), None);
        writer.execute_batch("COMMIT").unwrap();
        assert_eq!(hot.try_read(count), Some(0));
        // A statement that fails (no such table) is the pool's to report.
        assert_eq!(
            hot.try_read(|c| c.query_row("SELECT 1 FROM missing", [], |row| row.get::<_, i64>(0))),
            None
        );
        // Read-only: a write through a hot connection fails, not succeeds.
        assert_eq!(hot.try_read(|c| c.execute("DELETE FROM t", [])), None);
    }
}

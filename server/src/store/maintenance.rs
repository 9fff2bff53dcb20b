//! The [`Maintenance`] trait: bulk-load statistics and the raw store copy.

use async_trait::async_trait;

use super::{StoreResult, raw};

/// Whole-store work for the command line: planner statistics after a bulk
/// load and the raw copy of `fastview migrate-store` ([`raw`]).
#[async_trait]
pub trait Maintenance: Send + Sync + 'static {
    /// Refreshes the database's planner statistics after a bulk load
    /// (`fastview seed`, `fastview import`): PostgreSQL's `ANALYZE`;
    /// nothing on SQLite.
    async fn analyze(&self) -> StoreResult<()>;
    /// Up to `limit` raw rows of `table` after `after`, in key order
    /// (`account` selects the account of per-account tables; ignored for
    /// accounts and emails), for copying the store ([`raw`]).
    async fn export_raw(
        &self,
        table: raw::RawTable,
        account: i64,
        after: &raw::RawCursor,
        limit: i64,
    ) -> StoreResult<raw::RawRows>;
    /// Writes raw rows as they are, ids and counters included, in one
    /// transaction, skipping rows already there; returns how many were new.
    async fn import_raw(&self, rows: &raw::RawRows) -> StoreResult<u64>;
    /// Row counts of one account's tables, or of the whole store.
    async fn raw_counts(&self, account: Option<i64>) -> StoreResult<raw::RowCounts>;
}

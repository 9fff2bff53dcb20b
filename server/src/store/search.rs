//! The [`Search`] trait: the full-text index and the rows Email/query reads.

use async_trait::async_trait;

use super::{QueryRow, SearchText, StoreResult, TextSearch};

/// What Email/query evaluates: the full-text index, the rows a filter or
/// sort reads, and a mailbox's receivedAt listing.
#[async_trait]
pub trait Search: Send + Sync + 'static {
    /// Whether emails are stored and none of them is in the full-text
    /// index: mail stored before the index, or before a migration rebuilt
    /// it (SQLite's 0305 and 0312), that `fastview reproject` has not
    /// indexed yet. (An email without a single word has no index row.)
    async fn search_index_unfilled(&self) -> StoreResult<bool>;
    /// Ids of the account's emails whose indexed words satisfy `search`, in
    /// no set order (SQLite FTS5, PostgreSQL `tsvector` with a GIN index).
    async fn search_ids(&self, account: i64, search: &TextSearch) -> StoreResult<Vec<i64>>;
    /// One page of the account's emails that satisfy `search` (and are in
    /// `mailbox`, when given), by receivedAt then id (newest first with
    /// `descending`), from `position` (0-based, not negative), at most
    /// `limit`; with the number of all of them. The list view of a search.
    async fn search_page(
        &self,
        account: i64,
        search: &TextSearch,
        mailbox: Option<i64>,
        descending: bool,
        position: i64,
        limit: i64,
    ) -> StoreResult<(Vec<i64>, i64)>;
    /// Writes the full-text index rows of emails that exist (replacing any).
    async fn put_search_texts(&self, rows: &[(i64, SearchText)]) -> StoreResult<()>;
    /// The rows Email/query evaluates, of one mailbox or of the whole account.
    async fn query_rows(&self, account: i64, in_mailbox: Option<i64>)
    -> StoreResult<Vec<QueryRow>>;
    /// The rows Email/query evaluates of the given emails of the account
    /// (the candidates a full-text condition left).
    async fn query_rows_of(&self, account: i64, ids: &[i64]) -> StoreResult<Vec<QueryRow>>;
    /// Email ids of one mailbox sorted by receivedAt (then id), from the
    /// (mailbox, receivedAt) index without scanning the mailbox, with the total.
    async fn mailbox_emails_by_received(
        &self,
        mailbox: i64,
        descending: bool,
        position: i64,
        limit: i64,
    ) -> StoreResult<(Vec<(i64, i64)>, i64)>;
    /// The 0-based index of each given email in the receivedAt listing of
    /// a mailbox ([`Search::mailbox_emails_by_received`] order); emails not
    /// in the mailbox are absent. Counted on the (mailbox, receivedAt) index.
    async fn mailbox_positions(
        &self,
        mailbox: i64,
        descending: bool,
        ids: &[i64],
    ) -> StoreResult<Vec<(i64, i64)>>;
}

//! The list view's Email/query pages, kept at the states they were read at
//! (ADR 0003, issue 20).
//!
//! The list view's query (`inMailbox`, sorted by receivedAt, without anchor
//! or collapsing; [`super::query`]) reads whether the account owns the
//! mailbox, then the page and the mailbox's count from the
//! (mailbox, receivedAt) index: two SQLite reads a call, each a read
//! transaction with its file locks, where the rest of the call reads no
//! SQLite at all while nothing is committed (the states vouched for by the
//! WAL-index header, `store/hot_read.rs`). A page changes only with an email
//! (its mailboxes, its receivedAt, its existence) or a mailbox (its
//! existence, its owner), that is only when the account's Email or Mailbox
//! state moves (RFC 8620 §5.1: each change of an object of a type moves its
//! type's state), so a page is kept per (account, mailbox, order, position,
//! limit) with those two states and used while both are unchanged
//! ([`KeptAtStates`]).

use crate::jmap::mail::kept::KeptAtStates;
use crate::store::States;

/// The octets [`KeptPages`] holds at most, all accounts together.
pub const KEPT_PAGE_BYTES: u64 = 16 << 20;

/// What a list view's page is asked by: the account, the mailbox (row id),
/// whether oldest first, the position asked (negative counts from the end)
/// and the limit.
pub type PageKey = (i64, i64, bool, i64, i64);

/// One page of an Email/query's results.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The email row ids of the page, in order.
    pub ids: Vec<i64>,
    /// The index of the first id in the results.
    pub position: i64,
    /// The number of results.
    pub total: i64,
}

/// The list view's pages kept per account and query at the Email and
/// Mailbox states they were read at (module doc).
pub struct KeptPages {
    pages: KeptAtStates<PageKey, Page>,
}

impl KeptPages {
    /// An empty cache of at most `bytes` octets.
    pub fn new(bytes: u64) -> Self {
        Self {
            pages: KeptAtStates::new(bytes),
        }
    }

    /// The page kept for `key` when the account's states are still `states`
    /// (read by the caller before), else `None`.
    pub async fn get(&self, key: &PageKey, states: &States) -> Option<Page> {
        self.pages.get(key, states).await
    }

    /// Keeps `page`, read for `key` after the account's states were
    /// `before`, when they are still `after` (read after it): a page read
    /// across a change is not kept.
    pub async fn keep(&self, key: PageKey, before: &States, after: &States, page: &Page) {
        let weight = KeptAtStates::<PageKey, Page>::ENTRY_BYTES
            + std::mem::size_of::<PageKey>()
            + 8 * page.ids.len()
            + 32;
        (self.pages)
            .keep(key, before, after, page.clone(), weight)
            .await;
    }

    /// Sets its gauges in `metrics` (`cache="pages"`).
    pub async fn report(&self, metrics: &crate::metrics::Metrics) {
        self.pages.report(metrics, "pages").await;
    }
}

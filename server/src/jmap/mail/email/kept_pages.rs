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
//! limit) with those two states and used while both are unchanged. A page
//! is kept only when the states read after it are the ones read before, so
//! a kept page is always the page of its states. Bounded in octets.

use std::sync::Arc;

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
    pages: moka::future::Cache<PageKey, Arc<Kept>>,
}

/// One entry of [`KeptPages`].
struct Kept {
    email_state: i64,
    mailbox_state: i64,
    page: Page,
    /// Octets, roughly: the ids and the entry.
    weight: u32,
}

impl KeptPages {
    /// An empty cache of at most `bytes` octets.
    pub fn new(bytes: u64) -> Self {
        Self {
            pages: moka::future::Cache::builder()
                .max_capacity(bytes)
                .weigher(|_: &PageKey, kept: &Arc<Kept>| kept.weight)
                .build(),
        }
    }

    /// The page kept for `key` when the account's states are still `states`
    /// (read by the caller before), else `None`.
    pub async fn get(&self, key: &PageKey, states: &States) -> Option<Page> {
        let kept = self.pages.get(key).await?;
        (kept.email_state == states.email && kept.mailbox_state == states.mailbox)
            .then(|| kept.page.clone())
    }

    /// Keeps `page`, read for `key` after the account's states were
    /// `before`, when they are still `after` (read after it): a page read
    /// across a change is not kept.
    pub async fn keep(&self, key: PageKey, before: &States, after: &States, page: &Page) {
        if before.email != after.email || before.mailbox != after.mailbox {
            return;
        }
        let weight =
            std::mem::size_of::<Kept>() + std::mem::size_of::<PageKey>() + 8 * page.ids.len() + 32;
        let kept = Kept {
            email_state: before.email,
            mailbox_state: before.mailbox,
            page: page.clone(),
            weight: weight.min(u32::MAX as usize) as u32,
        };
        self.pages.insert(key, Arc::new(kept)).await;
    }

    /// Sets its gauges in `metrics` (`cache="pages"`).
    pub async fn report(&self, metrics: &crate::metrics::Metrics) {
        metrics.report_cache("pages", &self.pages).await;
    }
}

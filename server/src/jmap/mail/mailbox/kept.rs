//! An account's mailboxes with their counts, kept at the states they were
//! read at (ADR 0003, issue 20).
//!
//! `totalEmails`, `unreadEmails`, `totalThreads` and `unreadThreads` are
//! counted over every email of the account ([`Store::mailboxes`]): about
//! 0.3 ms of one core for 100 emails, and growing with the account, where
//! the rest of a webmail's visit costs a few tens of microseconds a call.
//! They change only with an email (its mailboxes, keywords, thread) or a
//! mailbox, that is only when the account's Email or Mailbox state moves,
//! so the rows are kept per account with those two states and used while
//! both are unchanged (one hot read of the states, ADR 0003;
//! [`KeptAtStates`]).

use std::sync::Arc;

use crate::jmap::mail::kept::KeptAtStates;
use crate::store::{MailboxRow, Store, StoreResult};

/// The octets [`KeptMailboxes`] holds at most, all accounts together.
pub const KEPT_MAILBOX_BYTES: u64 = 16 << 20;

/// An account's mailboxes as [`Store::mailboxes`] read them at one Email
/// and Mailbox state, kept per account (module doc).
pub struct KeptMailboxes {
    accounts: KeptAtStates<i64, Arc<Vec<MailboxRow>>>,
}

impl KeptMailboxes {
    /// An empty cache of at most `bytes` octets.
    pub fn new(bytes: u64) -> Self {
        Self {
            accounts: KeptAtStates::new(bytes),
        }
    }

    /// The mailboxes of `account` with their counts, and its Mailbox state
    /// (read before them, as an uncached read answers): the kept rows when
    /// the account's Email and Mailbox states are still theirs, else read
    /// from `store` (and kept when no change came in between). Errors: the
    /// store's.
    pub async fn read(
        &self,
        store: &dyn Store,
        account: i64,
    ) -> StoreResult<(i64, Arc<Vec<MailboxRow>>)> {
        let before = store.states(account).await?;
        if let Some(rows) = self.accounts.get(&account, &before).await {
            return Ok((before.mailbox, rows));
        }
        let rows = Arc::new(store.mailboxes(account).await?);
        let after = store.states(account).await?;
        let weight = rows
            .iter()
            .map(|row| std::mem::size_of::<MailboxRow>() + row.name.len() + 16)
            .sum::<usize>()
            + 64;
        (self.accounts)
            .keep(account, &before, &after, rows.clone(), weight)
            .await;
        Ok((before.mailbox, rows))
    }

    /// Sets its gauges in `metrics` (`cache="mailboxes"`).
    pub async fn report(&self, metrics: &crate::metrics::Metrics) {
        self.accounts.report(metrics, "mailboxes").await;
    }
}

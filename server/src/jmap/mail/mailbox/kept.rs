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
//! both are unchanged (one hot read of the states, ADR 0003). Rows are
//! kept only when the states read after them are the ones read before, so
//! kept rows are always the ones of their states. Bounded in octets.

use std::sync::Arc;

use crate::store::{MailboxRow, Store, StoreResult};

/// The octets [`KeptMailboxes`] holds at most, all accounts together.
pub const KEPT_MAILBOX_BYTES: u64 = 16 << 20;

/// An account's mailboxes as [`Store::mailboxes`] read them at one Email
/// and Mailbox state, kept per account (module doc).
pub struct KeptMailboxes {
    accounts: moka::future::Cache<i64, Arc<Kept>>,
}

/// One account's entry of [`KeptMailboxes`].
struct Kept {
    email_state: i64,
    mailbox_state: i64,
    rows: Arc<Vec<MailboxRow>>,
    /// Octets, roughly: the rows and their names.
    weight: u32,
}

impl KeptMailboxes {
    /// An empty cache of at most `bytes` octets.
    pub fn new(bytes: u64) -> Self {
        Self {
            accounts: moka::future::Cache::builder()
                .max_capacity(bytes)
                .weigher(|_: &i64, kept: &Arc<Kept>| kept.weight)
                .build(),
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
        if let Some(kept) = self.accounts.get(&account).await
            && kept.email_state == before.email
            && kept.mailbox_state == before.mailbox
        {
            return Ok((before.mailbox, kept.rows.clone()));
        }
        let rows = Arc::new(store.mailboxes(account).await?);
        let after = store.states(account).await?;
        if after.email == before.email && after.mailbox == before.mailbox {
            let weight = rows
                .iter()
                .map(|row| std::mem::size_of::<MailboxRow>() + row.name.len() + 16)
                .sum::<usize>()
                + 64;
            let kept = Kept {
                email_state: before.email,
                mailbox_state: before.mailbox,
                rows: rows.clone(),
                weight: weight.min(u32::MAX as usize) as u32,
            };
            self.accounts.insert(account, Arc::new(kept)).await;
        }
        Ok((before.mailbox, rows))
    }

    /// Sets its gauges in `metrics` (`cache="mailboxes"`).
    pub async fn report(&self, metrics: &crate::metrics::Metrics) {
        metrics.report_cache("mailboxes", &self.accounts).await;
    }
}

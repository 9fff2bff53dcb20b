//! The [`Mailboxes`] trait: an account's mailboxes.

use async_trait::async_trait;

use super::{MailboxNode, MailboxPatch, MailboxRow, NewMailbox, StoreResult};

/// An account's mailboxes (RFC 8621 §2) and their counts.
#[async_trait]
pub trait Mailboxes: Send + Sync + 'static {
    /// All mailboxes of the account with their counts, by id.
    async fn mailboxes(&self, account: i64) -> StoreResult<Vec<MailboxRow>>;
    /// All mailboxes of the account without their counts, by id: one read
    /// of the mailboxes alone, whatever the account holds (the counts of
    /// [`Mailboxes::mailboxes`] read every email of it).
    async fn mailbox_nodes(&self, account: i64) -> StoreResult<Vec<MailboxNode>>;
    /// The ids of all mailboxes of the account, ascending (what a write
    /// checks `mailboxIds` against): [`Mailboxes::mailbox_nodes`]'s.
    async fn mailbox_ids(&self, account: i64) -> StoreResult<Vec<i64>> {
        let nodes = self.mailbox_nodes(account).await?;
        Ok(nodes.iter().map(|node| node.id).collect())
    }
    /// Whether the mailbox exists in the account (one indexed lookup).
    async fn owns_mailbox(&self, account: i64, mailbox: i64) -> StoreResult<bool>;
    /// The account's mailbox with `role` (`inbox`, `sent`, …), if it has
    /// one: one row read, without the counts [`Mailboxes::mailboxes`] computes.
    async fn role_mailbox(&self, account: i64, role: &str) -> StoreResult<Option<i64>>;
    /// Creates a mailbox; returns its id.
    async fn create_mailbox(&self, account: i64, mailbox: &NewMailbox) -> StoreResult<i64>;
    /// Applies a patch to a mailbox.
    async fn update_mailbox(&self, account: i64, id: i64, patch: &MailboxPatch) -> StoreResult<()>;
    /// Destroys a mailbox. With `remove_emails`, emails only in this mailbox are
    /// destroyed; without it, a mailbox holding emails is `MailboxHasEmail`.
    /// A mailbox with child mailboxes is `MailboxHasChild`; one not in the
    /// account is `NotFound`.
    async fn destroy_mailbox(&self, account: i64, id: i64, remove_emails: bool) -> StoreResult<()>;
}

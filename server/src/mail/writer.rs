//! Where a change to an account's mail is applied: the seam between the
//! JMAP write handlers (Email/set, Email/import, Mailbox/set,
//! EmailSubmission/set) and what holds the mail.
//!
//! [`LocalWriter`] applies each change to the store (and blob store). In
//! front of an IMAP server the proxy wing's writer applies it upstream
//! first and lets the sync record it (ADR 0008). The handlers hold an
//! `Arc<dyn MailWriter>` chosen once at assembly and never ask which.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;

use super::ingest::{IngestError, PreparedEmail, store_batch};
use crate::blob::BlobStore;
use crate::store::{
    EmailUpdate, Inserted, MailboxPatch, NewMailbox, Store, StoreError, UpdateOutcome,
};

/// The outcome of one object's change: done, or refused by the server that
/// holds the mail (its words, which the handler gives as a `forbidden`
/// SetError).
pub type ObjectResult<T> = Result<T, String>;

/// Why a change failed as a whole (every object of the call).
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A message could not be stored.
    #[error(transparent)]
    Ingest(#[from] IngestError),
    /// The server that holds the mail could not be asked or refused the
    /// session (unreachable, a refused login, asked to slow down): what it
    /// had done before stands and shows after the next sync.
    #[error("{0}")]
    Unavailable(String),
    /// Something that should not happen did (a store that reported no
    /// outcome): a `serverFail`.
    #[error("{0}")]
    Internal(String),
}

/// An email that Email/import (or a copy kept in Sent) became: the email,
/// and the blob and size it holds (which the server behind may have
/// rewritten, so they can differ from what was sent).
#[derive(Debug, Clone)]
pub struct Imported {
    pub inserted: Inserted,
    pub blob_id: String,
    pub size: i64,
}

/// Applies changes to an account's mail (see the module doc). Every method
/// touches only `account`'s rows; a refusal of one object is in its
/// [`ObjectResult`], a failure of the whole call is the [`WriteError`].
#[async_trait]
pub trait MailWriter: Send + Sync {
    /// Email/set `update`: each update's outcome in order (RFC 8621 §4.6).
    async fn update_emails(
        &self,
        account: i64,
        updates: &[EmailUpdate],
    ) -> Result<Vec<ObjectResult<UpdateOutcome>>, WriteError>;

    /// Email/set `destroy`: the ids destroyed, and the refusals by id; an
    /// id not in the account is in neither.
    async fn destroy_emails(
        &self,
        account: i64,
        ids: &[i64],
    ) -> Result<(Vec<i64>, HashMap<i64, String>), WriteError>;

    /// Email/import (and Email/set `create`): stores one prepared message.
    async fn import(
        &self,
        account: i64,
        prepared: PreparedEmail,
    ) -> Result<ObjectResult<Imported>, WriteError>;

    /// Mailbox/set `create`: the new mailbox's id.
    async fn create_mailbox(
        &self,
        account: i64,
        new: &NewMailbox,
    ) -> Result<ObjectResult<i64>, WriteError>;

    /// Mailbox/set `update` of one mailbox.
    async fn update_mailbox(
        &self,
        account: i64,
        id: i64,
        patch: &MailboxPatch,
    ) -> Result<ObjectResult<()>, WriteError>;

    /// Mailbox/set `destroy` of one mailbox: the store's refusals
    /// (`MailboxHasChild`, `MailboxHasEmail`, `NotFound`) as
    /// [`WriteError::Store`].
    async fn destroy_mailbox(
        &self,
        account: i64,
        id: i64,
        remove_emails: bool,
    ) -> Result<ObjectResult<()>, WriteError>;

    /// Whether a sent message is also filed in the Sent mailbox through
    /// [`MailWriter::keep_sent_copies`] (an IMAP server's users expect their
    /// server to hold it); `false` when the Email sent is the copy.
    fn files_sent_copies(&self) -> bool {
        false
    }

    /// Files each `(email, message)` pair's message (as it left, without
    /// Bcc) in the account's Sent mailbox unless that Email is already
    /// there. Best effort: a refusal is logged, the submission stands.
    async fn keep_sent_copies(&self, _account: i64, _sent: Vec<(i64, Vec<u8>)>) {}

    /// Why this writer cannot carry out a JMAP `method` at all, if it
    /// cannot (the request's `forbidden`-like method error); `None` for
    /// every method it can.
    fn refuses(&self, _method: &str) -> Option<String> {
        None
    }
}

/// The local store's [`MailWriter`]: every change goes to the store (and
/// the blob store) at once.
pub struct LocalWriter {
    pub store: Arc<dyn Store>,
    pub blobs: Arc<BlobStore>,
}

#[async_trait]
impl MailWriter for LocalWriter {
    async fn update_emails(
        &self,
        account: i64,
        updates: &[EmailUpdate],
    ) -> Result<Vec<ObjectResult<UpdateOutcome>>, WriteError> {
        let outcomes = self.store.update_emails(account, updates).await?;
        Ok(outcomes.into_iter().map(Ok).collect())
    }

    async fn destroy_emails(
        &self,
        account: i64,
        ids: &[i64],
    ) -> Result<(Vec<i64>, HashMap<i64, String>), WriteError> {
        let destroyed = self.store.destroy_emails(account, ids).await?;
        Ok((destroyed, HashMap::new()))
    }

    async fn import(
        &self,
        account: i64,
        prepared: PreparedEmail,
    ) -> Result<ObjectResult<Imported>, WriteError> {
        let (blob_id, size) = (prepared.email.blob_id.clone(), prepared.email.size);
        let outcome =
            store_batch(self.store.as_ref(), &self.blobs, account, vec![prepared]).await?;
        let inserted = outcome
            .first()
            .copied()
            .ok_or_else(|| WriteError::Internal("the store reported no outcome".into()))?;
        Ok(Ok(Imported {
            inserted,
            blob_id,
            size,
        }))
    }

    async fn create_mailbox(
        &self,
        account: i64,
        new: &NewMailbox,
    ) -> Result<ObjectResult<i64>, WriteError> {
        Ok(Ok(self.store.create_mailbox(account, new).await?))
    }

    async fn update_mailbox(
        &self,
        account: i64,
        id: i64,
        patch: &MailboxPatch,
    ) -> Result<ObjectResult<()>, WriteError> {
        self.store.update_mailbox(account, id, patch).await?;
        Ok(Ok(()))
    }

    async fn destroy_mailbox(
        &self,
        account: i64,
        id: i64,
        remove_emails: bool,
    ) -> Result<ObjectResult<()>, WriteError> {
        self.store
            .destroy_mailbox(account, id, remove_emails)
            .await?;
        Ok(Ok(()))
    }
}

//! The [`Emails`] trait: storing, reading, changing and destroying emails.

use async_trait::async_trait;

use super::{EmailMeta, EmailUpdate, FastView, Inserted, NewEmail, StoreResult, UpdateOutcome};

/// Emails (RFC 8621 §4): stored in batches, read by id list at each read
/// level (metadata, header blocks, projection rows, part trees), updated and
/// destroyed in one transaction a call; threads' member lists.
#[async_trait]
pub trait Emails: Send + Sync + 'static {
    /// Stores messages in one transaction, assigning threads; a message whose
    /// blob id is already in the account is reported as a duplicate.
    async fn insert_emails(&self, account: i64, emails: &[NewEmail]) -> StoreResult<Vec<Inserted>>;
    /// Metadata of the given emails that exist in the account, in no set order.
    async fn email_meta(&self, account: i64, ids: &[i64]) -> StoreResult<Vec<EmailMeta>>;
    /// The account's Email state (RFC 8620 §5.1 `state` of Email/get) and,
    /// unless it is `known`, [`Emails::email_meta`] read with it in one
    /// snapshot of the database (the metadata read level of Email/get needs
    /// nothing else). `None` rows when the state is `known`: the caller
    /// holds the rows of that state, the metadata snapshots of
    /// [`crate::mail::load::EmailLoader`]. `NotFound` for no such account.
    async fn email_meta_unless_state(
        &self,
        account: i64,
        ids: &[i64],
        known: Option<i64>,
    ) -> StoreResult<(Option<Vec<EmailMeta>>, i64)>;
    /// Header blocks of the given emails (ids must belong to the account).
    async fn header_blocks(&self, account: i64, ids: &[i64]) -> StoreResult<Vec<(i64, Vec<u8>)>>;
    /// Projection rows of the given emails; missing rows are simply absent.
    async fn fast_views(&self, account: i64, ids: &[i64]) -> StoreResult<Vec<(i64, FastView)>>;
    /// Writes projection rows (insert or replace).
    async fn put_fast_views(&self, rows: &[(i64, FastView)]) -> StoreResult<()>;
    /// Stored part trees (`crate::mail::structure`) of the given emails (ids
    /// must belong to the account); an email without one is absent.
    async fn body_structures(&self, account: i64, ids: &[i64]) -> StoreResult<Vec<(i64, Vec<u8>)>>;
    /// Writes part trees (insert or replace) of emails that still exist.
    async fn put_body_structures(&self, rows: &[(i64, Vec<u8>)]) -> StoreResult<()>;
    /// The stored part tree of an email of the account whose message is
    /// blob `blob_id` (any of them, when several share it); `None` when no
    /// email has it or none has a tree yet.
    async fn body_structure_of_blob(
        &self,
        account: i64,
        blob_id: &str,
    ) -> StoreResult<Option<(i64, Vec<u8>)>>;
    /// Deletes all projection rows of an account (or of every account); returns the count.
    async fn clear_fast_views(&self, account: Option<i64>) -> StoreResult<u64>;
    /// Ids and blob ids of emails with an id above `after_id`, ascending, at
    /// most `limit`, of one account or all; with `missing_fast_view_only`, only
    /// those without a projection row.
    async fn email_blobs(
        &self,
        account: Option<i64>,
        after_id: i64,
        limit: i64,
        missing_fast_view_only: bool,
    ) -> StoreResult<Vec<(i64, String)>>;
    /// Applies patch updates in one transaction, each to the email's values
    /// as they are inside it (after the earlier updates of the call), and
    /// reports each one's outcome in order; an update that is not
    /// [`UpdateOutcome::Updated`] changes nothing. States advance only if
    /// something changed.
    async fn update_emails(
        &self,
        account: i64,
        updates: &[EmailUpdate],
    ) -> StoreResult<Vec<UpdateOutcome>>;
    /// Destroys emails; returns the ids that existed and were destroyed.
    async fn destroy_emails(&self, account: i64, ids: &[i64]) -> StoreResult<Vec<i64>>;
    /// Email ids of the given threads, ordered by receivedAt then id.
    async fn thread_emails(
        &self,
        account: i64,
        thread_ids: &[i64],
    ) -> StoreResult<Vec<(i64, Vec<i64>)>>;
}

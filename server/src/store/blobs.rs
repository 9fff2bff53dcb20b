//! The [`Blobs`] trait: blob grants, sizes and quota, and blob references.

use std::collections::HashSet;

use async_trait::async_trait;

use super::{Quota, StoreResult};

/// Which blobs an account may read (uploads and messages), their sizes,
/// the account's quota, and what the garbage collector and `fsck` ask.
#[async_trait]
pub trait Blobs: Send + Sync + 'static {
    /// The account's quota and usage; `NotFound` when there is no account.
    async fn quota(&self, account: i64) -> StoreResult<Quota>;
    /// Records that the account may read a blob (an upload or a message),
    /// under the account's write lock: `NotFound` when the account no longer
    /// exists, `OverQuota` when a new grant of `size` octets would take it
    /// over its [`Quota`]. A grant already there changes nothing.
    async fn add_blob(&self, account: i64, blob_id: &str, size: i64) -> StoreResult<()>;
    /// Whether the account may read a message or uploaded blob.
    async fn has_blob(&self, account: i64, blob_id: &str) -> StoreResult<bool> {
        Ok(self.blob_size(account, blob_id).await?.is_some())
    }
    /// The size in octets of a message or uploaded blob the account may
    /// read, `None` when it may not.
    async fn blob_size(&self, account: i64, blob_id: &str) -> StoreResult<Option<i64>>;
    /// Which of `blob_ids` the account may read (one query).
    async fn held_blobs(&self, account: i64, blob_ids: &[String]) -> StoreResult<HashSet<String>>;
    /// Which of `blob_ids` an email or a grant of any account refers to (one query).
    async fn referenced_blobs(&self, blob_ids: &[String]) -> StoreResult<HashSet<String>>;
    /// Deletes the upload grants created before `created_before` (unix
    /// seconds) that no email of their account uses (RFC 8620 §6.1: an
    /// unused upload may be deleted); returns how many.
    async fn expire_uploads(&self, created_before: i64) -> StoreResult<u64>;
    /// Up to `limit` distinct blob ids that emails or grants refer to,
    /// above `after`, ascending (for `fastview fsck`).
    async fn referenced_blob_page(&self, after: &str, limit: i64) -> StoreResult<Vec<String>>;
}

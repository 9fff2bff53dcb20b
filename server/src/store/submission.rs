//! The [`Submissions`] trait: EmailSubmission records, the delivery queue
//! and the send log (RFC 8621 §7).

use async_trait::async_trait;

use super::{Delivery, SendLimits, StoreResult, SubmissionRow};

/// EmailSubmissions (RFC 8621 §7), the delivery queue that sends them,
/// the hourly send log, and which account an address delivers to.
#[async_trait]
pub trait Submissions: Send + Sync + 'static {
    /// The account's EmailSubmissions (RFC 8621 §7), by id.
    async fn submissions(&self, account: i64) -> StoreResult<Vec<SubmissionRow>>;
    /// One of the account's EmailSubmissions, if it has it.
    async fn submission(&self, account: i64, id: i64) -> StoreResult<Option<SubmissionRow>>;
    /// Stores a submission (its `id` ignored) with the deliveries that send
    /// it (their `id` and `submission_id` ignored), in one transaction, and
    /// logs it; the submission's id and the deliveries as stored (held by
    /// the caller, lease token 0). The submission counts against `limits`
    /// with all its deliveries' recipients: `SendLimit` and nothing written
    /// when the account's last hour (checked under the account's write
    /// lock, so concurrent submissions cannot both pass) leaves no room.
    async fn create_submission(
        &self,
        account: i64,
        submission: &SubmissionRow,
        deliveries: &[Delivery],
        limits: SendLimits,
    ) -> StoreResult<(i64, Vec<Delivery>)>;
    /// What the account sent in the hour before `now` (Unix seconds):
    /// (submissions, recipients), as [`SendLimits`] counts them.
    async fn sent_in_hour(&self, account: i64, now: i64) -> StoreResult<(i64, i64)>;
    /// Deletes a submission's record (its deliveries go on) and logs it;
    /// `NotFound` unless the account has it.
    async fn destroy_submission(&self, account: i64, id: i64) -> StoreResult<()>;
    /// Takes up to `limit` deliveries due at `now` that no node holds (or
    /// whose holder's lease ran out), holding each until `now + lease`
    /// under a new lease token ([`Delivery::lease`]): the previous holder's
    /// renewals and record fail from then on.
    async fn take_deliveries(&self, now: i64, lease: i64, limit: i64)
    -> StoreResult<Vec<Delivery>>;
    /// Records what a delivery attempt gave: `statuses` (recipient, JSON
    /// DeliveryStatus) merged into its submission's `delivery_status` (when
    /// the record still exists; logged), then the delivery deleted, or, with
    /// `retry_at`, kept for another attempt then, for `recipients` only.
    /// Only while the delivery still has the lease token `delivery` was
    /// taken with: false, and nothing written, when another node took it
    /// over (or it is gone).
    async fn finish_delivery(
        &self,
        delivery: &Delivery,
        statuses: &[(String, String)],
        retry: Option<(i64, String)>,
    ) -> StoreResult<bool>;
    /// Holds delivery `id` until `until` (Unix seconds) for the node working
    /// on it with lease token `lease`: false, and nothing changed, when the
    /// delivery has another token (another node took it over) or is gone.
    async fn renew_delivery(&self, id: i64, lease: i64, until: i64) -> StoreResult<bool>;
    /// The account whose login or alias `address` is (case-insensitively),
    /// if any: where mail to it is delivered.
    async fn account_for_address(&self, address: &str) -> StoreResult<Option<i64>>;
}

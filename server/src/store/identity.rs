//! The [`Identities`] trait: identities, aliases and the VacationResponse
//! (issue 17, RFC 8621 §6, §8; migration 0306).

use async_trait::async_trait;

use super::{IdentityPatch, IdentityRow, StoreResult, VacationResponse};

/// What an account sends as and answers with: its Identities (RFC 8621
/// §6), the aliases an operator granted it, and its VacationResponse (§8).
#[async_trait]
pub trait Identities: Send + Sync + 'static {
    /// The account's identities (RFC 8621 §6), by id. The one made with the
    /// account, for its own address, comes first.
    async fn identities(&self, account: i64) -> StoreResult<Vec<IdentityRow>>;
    /// Stores a new identity (`id` and `may_delete` ignored: a new one may
    /// be deleted) and logs it; its id.
    async fn create_identity(&self, account: i64, identity: &IdentityRow) -> StoreResult<i64>;
    /// Changes an identity and logs it; `NotFound` unless the account has it.
    async fn update_identity(
        &self,
        account: i64,
        id: i64,
        patch: &IdentityPatch,
    ) -> StoreResult<()>;
    /// Deletes an identity and logs it; `NotFound` unless the account has it.
    async fn destroy_identity(&self, account: i64, id: i64) -> StoreResult<()>;
    /// The addresses the account may send as besides its own: lowercase,
    /// sorted.
    async fn aliases(&self, account: i64) -> StoreResult<Vec<String>>;
    /// Lets the account send as `address` (stored lowercase). `Conflict`
    /// when it is another account's login or alias; adding one it has
    /// changes nothing.
    async fn add_alias(&self, account: i64, address: &str) -> StoreResult<()>;
    /// Takes an alias away (its identities stay, and can no longer send);
    /// false when the account did not have it.
    async fn remove_alias(&self, account: i64, address: &str) -> StoreResult<bool>;
    /// Whether the account may answer `sender` automatically now (`now`,
    /// Unix seconds): true, and recorded, unless it did within `period`
    /// seconds (RFC 3834 §2: once per sender per period).
    async fn vacation_reply_due(
        &self,
        account: i64,
        sender: &str,
        now: i64,
        period: i64,
    ) -> StoreResult<bool>;
    /// The account's VacationResponse (the default when never set).
    async fn vacation_response(&self, account: i64) -> StoreResult<VacationResponse>;
    /// Replaces the account's VacationResponse and logs it.
    async fn set_vacation_response(
        &self,
        account: i64,
        response: &VacationResponse,
    ) -> StoreResult<()>;
}

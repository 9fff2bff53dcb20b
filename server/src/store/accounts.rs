//! The [`Accounts`] trait: accounts, logins, passwords, API tokens, quota
//! settings and server keys.

use async_trait::async_trait;

use super::{Account, ApiToken, NewToken, StoreResult};

/// Accounts and their credentials: logins, password hashes, API tokens,
/// the operator's quota setting, and the server's keys.
#[async_trait]
pub trait Accounts: Send + Sync + 'static {
    /// Creates an account with the role mailboxes inbox, drafts, sent, trash,
    /// junk, archive. `Conflict` when the email is taken.
    async fn create_account(&self, email: &str, password_hash: &str) -> StoreResult<Account>;
    /// Finds an account by login, case-insensitively.
    async fn account_by_email(&self, email: &str) -> StoreResult<Option<Account>>;
    /// All accounts, by id.
    async fn list_accounts(&self) -> StoreResult<Vec<Account>>;
    /// Replaces the password hash; `NotFound` when there is no such account.
    async fn set_password(&self, email: &str, password_hash: &str) -> StoreResult<()>;
    /// Removes an account and all its rows; `NotFound` when there is none.
    /// Returns the blob ids its emails and uploads referred to: blobs are
    /// shared by content, so the caller hands them to the garbage collector
    /// ([`crate::mail::gc`]), which deletes those nothing else refers to.
    async fn remove_account(&self, email: &str) -> StoreResult<Vec<String>>;
    /// Sets the account's quota in octets, or lifts it (`None`); `NotFound`
    /// when there is no such account. Existing mail is kept either way.
    async fn set_quota(&self, email: &str, octets: Option<i64>) -> StoreResult<()>;
    /// The account by id, `None` when it no longer exists.
    async fn account_by_id(&self, account: i64) -> StoreResult<Option<Account>>;
    /// Records a new API token of the account; `NotFound` when the account
    /// does not exist.
    async fn create_token(&self, account: i64, token: NewToken<'_>) -> StoreResult<ApiToken>;
    /// The account's API tokens, by id (expired ones too).
    async fn tokens(&self, account: i64) -> StoreResult<Vec<ApiToken>>;
    /// Deletes one API token of the account; `NotFound` when it has none of that id.
    async fn revoke_token(&self, account: i64, token: i64) -> StoreResult<()>;
    /// The account and token a `Bearer` secret (by its SHA-256, hex) names,
    /// if the token exists and has not expired at `now` (unix seconds).
    async fn account_by_token(
        &self,
        secret_sha256: &str,
        now: i64,
    ) -> StoreResult<Option<(Account, ApiToken)>>;
    /// The key named `name` (32 random octets), made on first use and the
    /// same on every node of the database.
    async fn server_key(&self, name: &str) -> StoreResult<Vec<u8>>;
}

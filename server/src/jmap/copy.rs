//! Foo/copy between accounts (RFC 8620 §5.4) for Email/copy (RFC 8621
//! §4.7), and Blob/copy (RFC 8620 §6.3).
//!
//! Both copy from `fromAccountId` into `accountId`, which "MUST be
//! different" (§5.4, §6.3): the same account twice is `invalidArguments`.
//! In Fastview a login sees exactly one account, its own (the Session lists
//! no other, `isPersonal` true, nothing shared), so the account to copy into
//! must be the authenticated one (`accountNotFound` otherwise, as every
//! method answers) and any other `fromAccountId` is one this user cannot
//! read: `fromAccountNotFound`. Copying between accounts becomes possible
//! with shared accounts, which Fastview does not have.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::args;
use super::dispatch::CallContext;
use super::error::MethodError;

/// The arguments both copies check first.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CopyAccounts {
    from_account_id: String,
    account_id: String,
}

/// Checks `fromAccountId` and `accountId` of an Email/copy or Blob/copy
/// call (module doc): `invalidArguments` when they are the same or missing,
/// `accountNotFound` for a destination that is not the user's account,
/// `fromAccountNotFound` for any other source.
fn check_accounts(ctx: &CallContext<'_>, arguments: &Map<String, Value>) -> MethodError {
    let accounts: CopyAccounts = match args::parse(
        arguments
            .iter()
            .filter(|(name, _)| matches!(name.as_str(), "fromAccountId" | "accountId"))
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect(),
    ) {
        Ok(accounts) => accounts,
        Err(error) => return error,
    };
    if accounts.from_account_id == accounts.account_id {
        return MethodError::InvalidArguments(
            "fromAccountId and accountId must be different accounts (RFC 8620 §5.4)".into(),
        );
    }
    if let Err(error) = args::check_account(ctx.account, &accounts.account_id) {
        return error;
    }
    MethodError::FromAccountNotFound
}

/// Email/copy (RFC 8621 §4.7): the accounts checked (module doc).
pub async fn email_copy(
    ctx: &mut CallContext<'_>,
    arguments: Map<String, Value>,
) -> Result<Value, MethodError> {
    Err(check_accounts(ctx, &arguments))
}

/// Blob/copy (RFC 8620 §6.3): the accounts checked (module doc).
pub async fn blob_copy(
    ctx: &mut CallContext<'_>,
    arguments: Map<String, Value>,
) -> Result<Value, MethodError> {
    Err(check_accounts(ctx, &arguments))
}

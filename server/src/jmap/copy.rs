//! Foo/copy between accounts (RFC 8620 §5.4) for Email/copy (RFC 8621
//! §4.7), and Blob/copy (RFC 8620 §6.3).
//!
//! Both copy from `fromAccountId` into `accountId`, which "MUST be
//! different" (§5.4, §6.3): the same account twice is `invalidArguments`,
//! as are arguments of the wrong shape or unknown.
//! In Fastview a login sees exactly one account, its own (the Session lists
//! no other, `isPersonal` true, nothing shared), so the account to copy into
//! must be the authenticated one (`accountNotFound` otherwise, as every
//! method answers) and any other `fromAccountId` is one this user cannot
//! read: `fromAccountNotFound`. Copying between accounts becomes possible
//! with shared accounts, which Fastview does not have.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::args;
use super::error::MethodError;
use crate::jmap::call::CallContext;

/// Email/copy arguments (RFC 8620 §5.4): all parsed, so that a call of the
/// wrong shape is `invalidArguments`; only the accounts are read after.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EmailCopyRequest {
    from_account_id: String,
    account_id: String,
    #[serde(rename = "ifFromInState")]
    _if_from_in_state: Option<String>,
    #[serde(rename = "ifInState")]
    _if_in_state: Option<String>,
    #[serde(rename = "create")]
    _create: Map<String, Value>,
    #[serde(rename = "onSuccessDestroyOriginal", default)]
    _on_success_destroy_original: bool,
    #[serde(rename = "destroyFromIfInState")]
    _destroy_from_if_in_state: Option<String>,
}

args::account_arguments!(EmailCopyRequest);

/// Blob/copy arguments (RFC 8620 §6.3), parsed likewise.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BlobCopyRequest {
    from_account_id: String,
    account_id: String,
    #[serde(rename = "blobIds")]
    _blob_ids: Vec<String>,
}

args::account_arguments!(BlobCopyRequest);

/// Why a copy is refused once its arguments parsed and its `accountId`
/// checked ([`super::args::parse_for`]): `invalidArguments` when the source is the
/// same account, `fromAccountNotFound` for any other source (module doc).
fn refusal(from_account_id: &str, account_id: &str) -> MethodError {
    if from_account_id == account_id {
        return MethodError::InvalidArguments(
            "fromAccountId and accountId must be different accounts (RFC 8620 §5.4)".into(),
        );
    }
    MethodError::FromAccountNotFound
}

/// Email/copy (RFC 8621 §4.7): refused (module doc).
pub async fn email_copy(
    _ctx: &mut CallContext<'_>,
    request: EmailCopyRequest,
) -> Result<Value, MethodError> {
    Err(refusal(&request.from_account_id, &request.account_id))
}

/// Blob/copy (RFC 8620 §6.3): refused (module doc).
pub async fn blob_copy(
    _ctx: &mut CallContext<'_>,
    request: BlobCopyRequest,
) -> Result<Value, MethodError> {
    Err(refusal(&request.from_account_id, &request.account_id))
}

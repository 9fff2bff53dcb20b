//! Email/changes (RFC 8621 §4.3, RFC 8620 §5.2).

use serde_json::{Map, Value};

use super::super::changes::changes;
use crate::jmap::call::CallContext;
use crate::jmap::error::MethodError;
use crate::jmap::ids;
use crate::store::ChangeType;

/// Handles one Email/changes call.
#[tracing::instrument(level = "debug", skip_all, fields(account = ctx.account.id))]
pub async fn email_changes(
    ctx: &mut CallContext<'_>,
    arguments: Map<String, Value>,
) -> Result<Value, MethodError> {
    Ok(changes(ctx, arguments, ChangeType::Email, ids::email_id)
        .await?
        .0)
}

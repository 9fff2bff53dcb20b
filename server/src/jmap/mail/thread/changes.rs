//! Thread/changes (RFC 8621 §3.2, RFC 8620 §5.2): a thread is created with
//! its first email, updated when an email joins or leaves it, destroyed with
//! its last email.

use serde_json::{Map, Value};

use super::super::changes::changes;
use crate::jmap::call::CallContext;
use crate::jmap::error::MethodError;
use crate::jmap::ids;
use crate::store::ChangeType;

/// Handles one Thread/changes call.
#[tracing::instrument(level = "debug", skip_all, fields(account = ctx.account.id))]
pub async fn thread_changes(
    ctx: &mut CallContext<'_>,
    arguments: Map<String, Value>,
) -> Result<Value, MethodError> {
    Ok(changes(ctx, arguments, ChangeType::Thread, ids::thread_id)
        .await?
        .0)
}

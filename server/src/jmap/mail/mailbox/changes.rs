//! Mailbox/changes (RFC 8621 §2.2, RFC 8620 §5.2), with `updatedProperties`:
//! the four count properties when every change in the page was a count
//! change of an existing mailbox (an email arrived, left, was read), else
//! null.

use serde_json::{Map, Value, json};

use super::super::changes::changes;
use crate::jmap::call::CallContext;
use crate::jmap::error::MethodError;
use crate::store::ChangeType;

/// The Mailbox properties a count-only change may have changed.
pub const COUNT_PROPERTIES: &[&str] = &[
    "totalEmails",
    "unreadEmails",
    "totalThreads",
    "unreadThreads",
];

/// Handles one Mailbox/changes call.
#[tracing::instrument(level = "debug", skip_all, fields(account = ctx.account.id))]
pub async fn mailbox_changes(
    ctx: &mut CallContext<'_>,
    arguments: Map<String, Value>,
) -> Result<Value, MethodError> {
    let (mut response, changes) = changes(ctx, arguments, ChangeType::Mailbox).await?;
    let counts_only = !changes.updated.is_empty()
        && changes.created.is_empty()
        && changes.destroyed.is_empty()
        && changes.counts_only.len() == changes.updated.len();
    response["updatedProperties"] = if counts_only {
        json!(COUNT_PROPERTIES)
    } else {
        Value::Null
    };
    Ok(response)
}

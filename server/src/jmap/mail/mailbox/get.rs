//! Mailbox/get (RFC 8621 §2.1, RFC 8620 §5.1).

use serde_json::{Map, Value};

use super::{MAILBOX_PROPERTIES, mailbox_json};
use crate::jmap::call::CallContext;
use crate::jmap::error::MethodError;
use crate::jmap::ids;
use crate::jmap::mail::get::ListGet;
use crate::store::MailboxRow;

/// Handles one Mailbox/get call: all mailboxes when `ids` is null.
#[tracing::instrument(level = "debug", skip_all, fields(account = ctx.account.id))]
pub async fn mailbox_get(
    ctx: &mut CallContext<'_>,
    arguments: Map<String, Value>,
) -> Result<Value, MethodError> {
    let plan = ListGet::read(ctx, arguments, MAILBOX_PROPERTIES)?;
    let store = &ctx.jmap.store;
    let (state, mailboxes) = ctx.jmap.mailboxes.read(&**store, ctx.account.id).await?;
    let id_of = |mailbox: &MailboxRow| mailbox.id;
    Ok(plan.respond(
        state,
        &mailboxes,
        ids::parse_mailbox_id,
        id_of,
        mailbox_json,
    ))
}

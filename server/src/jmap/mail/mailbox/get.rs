//! Mailbox/get (RFC 8621 §2.1, RFC 8620 §5.1).

use serde_json::{Map, Value};

use super::{MAILBOX_PROPERTIES, mailbox_json};
use crate::jmap::call::CallContext;
use crate::jmap::error::MethodError;
use crate::jmap::mail::get::{GetArgs, found, get_response, named_properties, requested_ids};
use crate::jmap::{args, ids};
use crate::store::MailboxRow;

/// Handles one Mailbox/get call: all mailboxes when `ids` is null.
#[tracing::instrument(level = "debug", skip_all, fields(account = ctx.account.id))]
pub async fn mailbox_get(
    ctx: &mut CallContext<'_>,
    arguments: Map<String, Value>,
) -> Result<Value, MethodError> {
    let request: GetArgs = args::parse(arguments)?;
    args::check_account(ctx.account, &request.account_id)?;
    // Plan.
    let properties = named_properties(request.properties.as_deref(), MAILBOX_PROPERTIES)?;
    let limit = ctx.jmap.limits.max_objects_in_get;
    let requested = request
        .ids
        .map(|ids| requested_ids(ids, limit))
        .transpose()?;
    // Load.
    let store = &ctx.jmap.store;
    let (state, mailboxes) = ctx.jmap.mailboxes.read(&**store, ctx.account.id).await?;
    // Render.
    let render = |mailbox: &MailboxRow| mailbox_json(mailbox, &properties);
    let (list, not_found) = match requested {
        None => (mailboxes.iter().map(render).collect(), Vec::new()),
        Some(requested) => found(&requested, |id| {
            let id = ids::parse_mailbox_id(id)?;
            mailboxes.iter().find(|m| m.id == id).map(render)
        }),
    };
    Ok(get_response(request.account_id, state, list, not_found))
}

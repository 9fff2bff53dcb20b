//! Mailbox/get (RFC 8621 §2.1, RFC 8620 §5.1).

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{MAILBOX_PROPERTIES, mailbox_json};
use crate::jmap::dispatch::CallContext;
use crate::jmap::error::MethodError;
use crate::jmap::{args, ids};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GetRequest {
    account_id: String,
    ids: Option<Vec<String>>,
    properties: Option<Vec<String>>,
}

/// Handles one Mailbox/get call: all mailboxes when `ids` is null.
#[tracing::instrument(skip_all, fields(account = ctx.account.id))]
pub async fn mailbox_get(
    ctx: &mut CallContext<'_>,
    arguments: Map<String, Value>,
) -> Result<Value, MethodError> {
    let request: GetRequest = args::parse(arguments)?;
    args::check_account(ctx.account, &request.account_id)?;
    let mut properties: Vec<&str> = match &request.properties {
        Some(names) => {
            let unknown: Vec<&str> = names
                .iter()
                .map(String::as_str)
                .filter(|n| !MAILBOX_PROPERTIES.contains(n))
                .collect();
            if !unknown.is_empty() {
                return Err(MethodError::InvalidArguments(format!(
                    "unknown properties: {}",
                    unknown.join(", ")
                )));
            }
            names.iter().map(String::as_str).collect()
        }
        None => MAILBOX_PROPERTIES.to_vec(),
    };
    if !properties.contains(&"id") {
        properties.insert(0, "id");
    }
    if let Some(ids) = &request.ids
        && ids.len() as u64 > ctx.jmap.limits.max_objects_in_get
    {
        return Err(MethodError::RequestTooLarge(
            ctx.jmap.limits.max_objects_in_get as usize,
        ));
    }
    let store = &ctx.jmap.store;
    let state = store.states(ctx.account.id).await?.mailbox;
    let mailboxes = store.mailboxes(ctx.account.id).await?;
    let (list, not_found): (Vec<Value>, Vec<String>) = match &request.ids {
        None => (
            mailboxes
                .iter()
                .map(|m| mailbox_json(m, &properties))
                .collect(),
            Vec::new(),
        ),
        Some(wanted) => {
            let mut list = Vec::new();
            let mut not_found = Vec::new();
            let mut seen = std::collections::HashSet::new();
            for id in wanted.iter().filter(|id| seen.insert(id.as_str())) {
                match ids::parse_mailbox_id(id).and_then(|n| mailboxes.iter().find(|m| m.id == n)) {
                    Some(mailbox) => list.push(mailbox_json(mailbox, &properties)),
                    None => not_found.push(id.clone()),
                }
            }
            (list, not_found)
        }
    };
    Ok(args::get_response(
        request.account_id,
        state,
        list,
        not_found,
    ))
}

//! Thread/get (RFC 8621 §3.1): the emails of each thread, oldest first.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::jmap::dispatch::CallContext;
use crate::jmap::error::MethodError;
use crate::jmap::{args, ids};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GetRequest {
    account_id: String,
    ids: Option<Vec<String>>,
}

/// Handles one Thread/get call (`ids` must be given: listing every thread is `requestTooLarge`).
#[tracing::instrument(skip_all, fields(account = ctx.account.id))]
pub async fn thread_get(
    ctx: &mut CallContext<'_>,
    arguments: Map<String, Value>,
) -> Result<Value, MethodError> {
    let request: GetRequest = args::parse(arguments)?;
    args::check_account(ctx.account, &request.account_id)?;
    let max = ctx.jmap.limits.max_objects_in_get;
    let Some(wanted) = request.ids else {
        return Err(MethodError::RequestTooLarge(max as usize));
    };
    if wanted.len() as u64 > max {
        return Err(MethodError::RequestTooLarge(max as usize));
    }
    let numeric: Vec<i64> = wanted
        .iter()
        .filter_map(|id| ids::parse_thread_id(id))
        .collect();
    let threads = ctx
        .jmap
        .store
        .thread_emails(ctx.account.id, &numeric)
        .await?;
    let state = ctx.jmap.store.states(ctx.account.id).await?.thread;
    let mut list = Vec::new();
    let mut not_found = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for id in wanted.iter().filter(|id| seen.insert(id.as_str())) {
        match ids::parse_thread_id(id).and_then(|n| threads.iter().find(|(t, _)| *t == n)) {
            Some((_, emails)) => list.push(json!({
                "id": id,
                "emailIds": emails.iter().map(|e| ids::email_id(*e)).collect::<Vec<_>>(),
            })),
            None => not_found.push(id.clone()),
        }
    }
    Ok(args::get_response(
        request.account_id,
        state,
        list,
        not_found,
    ))
}

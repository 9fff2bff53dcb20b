//! Thread/get (RFC 8621 §3.1): the emails of each thread, oldest first.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::jmap::call::CallContext;
use crate::jmap::error::MethodError;
use crate::jmap::mail::get::{found, get_response, requested_ids};
use crate::jmap::{args, ids};

/// Thread/get arguments (RFC 8621 §3.1).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetRequest {
    account_id: String,
    ids: Option<Vec<String>>,
}

args::account_arguments!(GetRequest);

/// Handles one Thread/get call (`ids` must be given: listing every thread is `requestTooLarge`).
#[tracing::instrument(level = "debug", skip_all, fields(account = ctx.account.id))]
pub async fn thread_get(
    ctx: &mut CallContext<'_>,
    request: GetRequest,
) -> Result<Value, MethodError> {
    // Plan.
    let max = ctx.jmap.limits.max_objects_in_get;
    let Some(requested) = request.ids else {
        return Err(MethodError::RequestTooLarge(max as usize));
    };
    let requested = requested_ids(requested, max)?;
    let numeric: Vec<i64> = requested
        .iter()
        .filter_map(|id| ids::parse_thread_id(id))
        .collect();
    // Load.
    let store = &ctx.jmap.store;
    let threads = store.thread_emails(ctx.account.id, &numeric).await?;
    let state = store.states(ctx.account.id).await?.thread;
    // Render.
    let (list, not_found) = found(&requested, |id| {
        let thread = ids::parse_thread_id(id)?;
        let (_, emails) = threads.iter().find(|(t, _)| *t == thread)?;
        Some(json!({
            "id": id,
            "emailIds": emails.iter().map(|e| ids::email_id(*e)).collect::<Vec<_>>(),
        }))
    });
    Ok(get_response(request.account_id, state, list, not_found))
}

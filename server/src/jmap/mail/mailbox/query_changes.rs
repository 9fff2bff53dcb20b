//! Mailbox/queryChanges (RFC 8621 §2.4, RFC 8620 §5.6), from the change log.
//!
//! Every Mailbox filter and sort reads a mutable property, so each mailbox
//! created, updated or destroyed since `sinceQueryState` is `removed` (but
//! a created one) and each created or updated one in the results now is
//! `added` at its index; a change of counts only moves nothing and is left
//! out. `upToId` is ignored (the properties are mutable).

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::query::{Comparator, results};
use crate::jmap::dispatch::CallContext;
use crate::jmap::error::MethodError;
use crate::jmap::mail::changes::parse_state;
use crate::jmap::{args, ids};
use crate::store::ChangeType;

/// Attempts at a result list and change window of one state before giving up.
const ATTEMPTS: usize = 3;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct QueryChangesRequest {
    account_id: String,
    filter: Option<Value>,
    sort: Option<Vec<Comparator>>,
    since_query_state: String,
    max_changes: Option<u64>,
    #[serde(rename = "upToId")]
    _up_to_id: Option<String>,
    #[serde(default)]
    calculate_total: bool,
}

/// Handles one Mailbox/queryChanges call.
#[tracing::instrument(skip_all, fields(account = ctx.account.id))]
pub async fn mailbox_query_changes(
    ctx: &mut CallContext<'_>,
    arguments: Map<String, Value>,
) -> Result<Value, MethodError> {
    let request: QueryChangesRequest = args::parse(arguments)?;
    args::check_account(ctx.account, &request.account_id)?;
    if request.max_changes == Some(0) {
        return Err(MethodError::InvalidArguments(
            "maxChanges must be greater than 0".into(),
        ));
    }
    let since = parse_state(&request.since_query_state)?;
    if since.object.is_some() {
        return Err(MethodError::CannotCalculateChanges(
            "not a query state".into(),
        ));
    }
    let comparators = request.sort.unwrap_or_default();
    let store = &ctx.jmap.store;
    let account = ctx.account.id;
    for _ in 0..ATTEMPTS {
        let changes = store
            .changes(account, ChangeType::Mailbox, since, usize::MAX)
            .await?;
        let moved: Vec<i64> = changes
            .updated
            .iter()
            .filter(|id| !changes.counts_only.contains(id))
            .copied()
            .collect();
        let mut removed: Vec<i64> = changes.destroyed.iter().chain(&moved).copied().collect();
        removed.sort_unstable();
        let candidates: Vec<i64> = changes.created.iter().chain(&moved).copied().collect();
        let mailboxes = store.mailboxes(account).await?;
        let listed = results(mailboxes, request.filter.as_ref(), &comparators)?;
        if store.states(account).await?.mailbox != changes.new_state.modseq {
            continue;
        }
        let added: Vec<Value> = listed
            .iter()
            .enumerate()
            .filter(|(_, m)| candidates.contains(&m.id))
            .map(|(index, m)| json!({"id": ids::mailbox_id(m.id), "index": index}))
            .collect();
        if let Some(max) = request.max_changes
            && (removed.len() + added.len()) as u64 > max
        {
            return Err(MethodError::TooManyChanges);
        }
        let mut response = json!({
            "accountId": request.account_id,
            "oldQueryState": request.since_query_state,
            "newQueryState": changes.new_state.to_string(),
            "removed": removed.into_iter().map(ids::mailbox_id).collect::<Vec<_>>(),
            "added": added,
        });
        if request.calculate_total {
            response["total"] = json!(listed.len());
        }
        return Ok(response);
    }
    Err(MethodError::CannotCalculateChanges(
        "the mailboxes keep changing; query again".into(),
    ))
}

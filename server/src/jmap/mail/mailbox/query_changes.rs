//! Mailbox/queryChanges (RFC 8621 §2.4, RFC 8620 §5.6), from the change log.
//!
//! Every Mailbox filter and sort reads a mutable property, so each mailbox
//! created, updated or destroyed since `sinceQueryState` is `removed` (but
//! a created one) and each created or updated one in the results now is
//! `added` at its index; a change of counts only moves nothing and is left
//! out. `upToId` is ignored (the properties are mutable).

use serde::Deserialize;
use serde_json::Value;

use super::query::{Comparator, results};
use crate::jmap::call::CallContext;
use crate::jmap::error::MethodError;
use crate::jmap::mail::query_changes::{
    QueryChangesArgs, ResultChanges, at_one_state, check_max_changes, parse_query_state,
    query_changes_response,
};
use crate::jmap::{args, ids};
use crate::store::{ChangeType, LogPosition};

/// Mailbox/queryChanges arguments (RFC 8620 §5.6).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryChangesRequest {
    #[serde(flatten)]
    args: QueryChangesArgs,
    filter: Option<Value>,
    sort: Option<Vec<Comparator>>,
    #[serde(rename = "upToId")]
    _up_to_id: Option<String>,
}

args::account_arguments!(QueryChangesRequest, args.account_id);

/// Handles one Mailbox/queryChanges call.
#[tracing::instrument(level = "debug", skip_all, fields(account = ctx.account.id))]
pub async fn mailbox_query_changes(
    ctx: &mut CallContext<'_>,
    request: QueryChangesRequest,
) -> Result<Value, MethodError> {
    // Plan.
    check_max_changes(request.args.max_changes)?;
    let since = parse_query_state(&request.args.since_query_state)?;
    let comparators = request.sort.unwrap_or_default();
    let filter = request.filter;
    // Load: the changes and the results, of one state.
    let ctx: &CallContext = ctx;
    let changes = at_one_state(
        || results_changes(ctx, since, filter.as_ref(), &comparators),
        "the mailboxes keep changing; query again",
    )
    .await?;
    // Render.
    query_changes_response(request.args, changes, ids::mailbox_id)
}

/// The changes since `since` and where they are in the results now; `None`
/// when a write came between reading the two.
async fn results_changes(
    ctx: &CallContext<'_>,
    since: LogPosition,
    filter: Option<&Value>,
    comparators: &[Comparator],
) -> Result<Option<ResultChanges>, MethodError> {
    let (store, account) = (&ctx.jmap.store, ctx.account.id);
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
    let listed = results(store.mailboxes(account).await?, filter, comparators)?;
    if store.states(account).await?.mailbox != changes.new_state.modseq {
        return Ok(None);
    }
    let added = listed
        .iter()
        .enumerate()
        .filter(|(_, m)| candidates.contains(&m.id))
        .map(|(index, m)| (m.id, index as i64))
        .collect();
    Ok(Some(ResultChanges {
        new_state: changes.new_state,
        removed,
        added,
        total: listed.len() as i64,
    }))
}

//! Email/queryChanges (RFC 8621 §4.5, RFC 8620 §5.6), from the change log.
//!
//! The query state is the Email state. Every email changed since
//! `sinceQueryState` may have entered, left or moved in the results: when
//! the filter or a sort reads a mutable property (mailboxIds, keywords) each updated or
//! destroyed email is `removed` and each created or updated one still in the
//! results is `added` again at its index (RFC 8620 §5.6 allows extra
//! removals); otherwise only destroyed emails are removed, created ones
//! added, and `upToId` bounds the additions. The list view (inMailbox +
//! receivedAt) finds indexes on the (mailbox, receivedAt) index; other
//! queries are evaluated as Email/query evaluates them. `collapseThreads`
//! and the filters and sorts over the keywords of whole threads are
//! `cannotCalculateChanges`, as Email/query's `canCalculateChanges` says.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;

use serde::Deserialize;
use serde_json::Value;

use super::query::{
    SortArgument, can_calculate_changes, distinct_searches, is_mutable, listing, matching_rows,
    parse_filter, parse_sort,
};
use crate::jmap::call::CallContext;
use crate::jmap::error::MethodError;
use crate::jmap::mail::query_changes::{
    QueryChangesArgs, ResultChanges, at_one_state, check_max_changes, parse_query_state,
    query_changes_response,
};
use crate::jmap::{args, ids};
use crate::mail::query::{Comparator, Filter};
use crate::store::{ChangeType, LogPosition};

/// The most changed emails one call looks at; beyond, the client re-queries.
pub const MAX_QUERY_CHANGES: usize = 10_000;

/// Email/queryChanges arguments (RFC 8621 §4.5).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryChangesRequest {
    #[serde(flatten)]
    args: QueryChangesArgs,
    filter: Option<Value>,
    sort: Option<Vec<SortArgument>>,
    up_to_id: Option<String>,
    #[serde(default)]
    collapse_threads: bool,
}

args::account_arguments!(QueryChangesRequest, args.account_id);

/// The query whose changes are asked for, parsed.
struct Query {
    filter: Option<Filter>,
    comparators: Vec<Comparator>,
    /// Whether the filter or the sort reads a property an update can change.
    mutable: bool,
    /// `upToId` as a row id (ignored when `mutable`).
    up_to_id: Option<i64>,
}

/// Handles one Email/queryChanges call.
#[tracing::instrument(level = "debug", skip_all, fields(account = ctx.account.id))]
pub async fn email_query_changes(
    ctx: &mut CallContext<'_>,
    request: QueryChangesRequest,
) -> Result<Value, MethodError> {
    // Plan.
    check_max_changes(request.args.max_changes)?;
    let filter = request.filter.as_ref().map(parse_filter).transpose()?;
    let comparators = parse_sort(request.sort)?;
    if !can_calculate_changes(filter.as_ref(), &comparators, request.collapse_threads) {
        return Err(MethodError::CannotCalculateChanges(
            "changes of a query with collapseThreads, or filtered or sorted by the keywords \
             of whole threads, cannot be calculated"
                .into(),
        ));
    }
    let since = parse_query_state(&request.args.since_query_state)?;
    let query = Query {
        mutable: filter.as_ref().is_some_and(is_mutable)
            || comparators.iter().any(|c| c.property.is_mutable()),
        filter,
        comparators,
        up_to_id: request.up_to_id.as_deref().and_then(ids::parse_email_id),
    };
    // Load: the changes and the results, of one state. Full-text
    // conditions are charged once, before any runs; text conditions spend
    // the request's render work.
    ctx.budget
        .charge_searches(distinct_searches(query.filter.as_ref()))?;
    let work = AtomicU64::new(ctx.budget.work_left);
    let changes = {
        let ctx: &CallContext = ctx;
        at_one_state(
            || results_changes(ctx, since, &query, &work),
            "the mailbox keeps changing; query again",
        )
        .await
    };
    ctx.budget.work_left = work.into_inner();
    let changes = changes?;
    // Render.
    query_changes_response(request.args, changes, ids::email_id)
}

/// The changes since `since` and where they are in the results now; `None`
/// when a write came between reading the two.
async fn results_changes(
    ctx: &CallContext<'_>,
    since: LogPosition,
    query: &Query,
    work: &AtomicU64,
) -> Result<Option<ResultChanges>, MethodError> {
    let (store, account) = (&ctx.jmap.store, ctx.account.id);
    let changes = store
        .changes(account, ChangeType::Email, since, MAX_QUERY_CHANGES)
        .await?;
    if changes.has_more {
        return Err(MethodError::CannotCalculateChanges(
            "too many changes since this state; query again".into(),
        ));
    }
    let mut removed: Vec<i64> = changes.destroyed.clone();
    let mut candidates: Vec<i64> = changes.created.clone();
    if query.mutable {
        removed.extend(&changes.updated);
        candidates.extend(&changes.updated);
    }
    removed.sort_unstable();
    let (mut added, total, up_to) = positions(ctx, query, &candidates, work).await?;
    // The results must be those of the state the changes lead to: a
    // write in between would leave them out of step, so try again.
    if store.states(account).await?.email != changes.new_state.modseq {
        return Ok(None);
    }
    if let Some(up_to) = up_to.filter(|_| !query.mutable) {
        added.retain(|(_, index)| *index <= up_to);
    }
    added.sort_by_key(|(id, index)| (*index, *id));
    Ok(Some(ResultChanges {
        new_state: changes.new_state,
        removed,
        added,
        total,
    }))
}

/// The (id, index) of each candidate in the results now, the number of
/// results, and the index of `upToId`: the list view from the (mailbox,
/// receivedAt) index (no `upToId` there), other queries evaluated.
async fn positions(
    ctx: &CallContext<'_>,
    query: &Query,
    candidates: &[i64],
    work: &AtomicU64,
) -> Result<(Vec<(i64, i64)>, i64, Option<i64>), MethodError> {
    let (store, account) = (&ctx.jmap.store, ctx.account.id);
    if let Some((mailbox, ascending)) = listing(query.filter.as_ref(), &query.comparators) {
        if !store.owns_mailbox(account, mailbox).await? {
            return Ok((Vec::new(), 0, None));
        }
        let positions = store
            .mailbox_positions(mailbox, !ascending, candidates)
            .await?;
        let (_, total) = store
            .mailbox_emails_by_received(mailbox, !ascending, 0, 0)
            .await?;
        return Ok((positions, total, None));
    }
    let rows = matching_rows(ctx, query.filter.as_ref(), &query.comparators, work).await?;
    let index: HashMap<i64, i64> = rows
        .iter()
        .enumerate()
        .map(|(i, row)| (row.meta.id, i as i64))
        .collect();
    let added = candidates
        .iter()
        .filter_map(|id| index.get(id).map(|i| (*id, *i)))
        .collect();
    let up_to = query.up_to_id.and_then(|id| index.get(&id).copied());
    Ok((added, rows.len() as i64, up_to))
}

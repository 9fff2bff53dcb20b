//! Email/queryChanges (RFC 8621 §4.5, RFC 8620 §5.6), from the change log.
//!
//! The query state is the Email state. Every email changed since
//! `sinceQueryState` may have entered, left or moved in the results: when
//! the filter reads a mutable property (mailboxIds, keywords) each updated or
//! destroyed email is `removed` and each created or updated one still in the
//! results is `added` again at its index (RFC 8620 §5.6 allows extra
//! removals); otherwise only destroyed emails are removed, created ones
//! added, and `upToId` bounds the additions. The list view (inMailbox +
//! receivedAt) finds indexes on the (mailbox, receivedAt) index; other
//! queries are evaluated as Email/query evaluates them. `collapseThreads`
//! is `cannotCalculateChanges`, as Email/query's `canCalculateChanges` says.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::query::{SortArgument, is_mutable, listing, matching_rows, parse_filter, parse_sort};
use crate::jmap::dispatch::CallContext;
use crate::jmap::error::MethodError;
use crate::jmap::mail::changes::parse_state;
use crate::jmap::{args, ids};
use crate::store::ChangeType;

/// The most changed emails one call looks at; beyond, the client re-queries.
pub const MAX_QUERY_CHANGES: usize = 10_000;

/// Attempts at a result list and change window of one state before giving up.
const ATTEMPTS: usize = 3;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct QueryChangesRequest {
    account_id: String,
    filter: Option<Value>,
    sort: Option<Vec<SortArgument>>,
    since_query_state: String,
    max_changes: Option<u64>,
    up_to_id: Option<String>,
    #[serde(default)]
    calculate_total: bool,
    #[serde(default)]
    collapse_threads: bool,
}

/// Handles one Email/queryChanges call.
#[tracing::instrument(skip_all, fields(account = ctx.account.id))]
pub async fn email_query_changes(
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
    let filter = request.filter.as_ref().map(parse_filter).transpose()?;
    let comparators = parse_sort(request.sort)?;
    if request.collapse_threads {
        return Err(MethodError::CannotCalculateChanges(
            "changes of a query with collapseThreads cannot be calculated".into(),
        ));
    }
    let since = parse_state(&request.since_query_state)?;
    if since.object.is_some() {
        return Err(MethodError::CannotCalculateChanges(
            "not a query state".into(),
        ));
    }
    let mutable = filter.as_ref().is_some_and(is_mutable);
    let store = &ctx.jmap.store;
    let account = ctx.account.id;
    for _ in 0..ATTEMPTS {
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
        if mutable {
            removed.extend(&changes.updated);
            candidates.extend(&changes.updated);
        }
        removed.sort_unstable();
        // Indexes of the candidates in the results now, and the total.
        let (mut added, total, up_to): (Vec<(i64, i64)>, i64, Option<i64>) =
            match listing(filter.as_ref(), &comparators) {
                Some((mailbox, ascending)) => {
                    if store.owns_mailbox(account, mailbox).await? {
                        let positions = store
                            .mailbox_positions(mailbox, !ascending, &candidates)
                            .await?;
                        let (_, total) = store
                            .mailbox_emails_by_received(mailbox, !ascending, 0, 0)
                            .await?;
                        (positions, total, None)
                    } else {
                        (Vec::new(), 0, None)
                    }
                }
                None => {
                    let rows = matching_rows(ctx, filter.as_ref(), &comparators).await?;
                    let index: HashMap<i64, i64> = rows
                        .iter()
                        .enumerate()
                        .map(|(i, row)| (row.meta.id, i as i64))
                        .collect();
                    let added = candidates
                        .iter()
                        .filter_map(|id| index.get(id).map(|i| (*id, *i)))
                        .collect();
                    let up_to = request
                        .up_to_id
                        .as_deref()
                        .and_then(ids::parse_email_id)
                        .and_then(|id| index.get(&id).copied());
                    (added, rows.len() as i64, up_to)
                }
            };
        // The results must be those of the state the changes lead to: a
        // write in between would leave them out of step, so try again.
        if store.states(account).await?.email != changes.new_state.modseq {
            continue;
        }
        if let Some(up_to) = up_to.filter(|_| !mutable) {
            added.retain(|(_, index)| *index <= up_to);
        }
        added.sort_by_key(|(id, index)| (*index, *id));
        if let Some(max) = request.max_changes
            && (removed.len() + added.len()) as u64 > max
        {
            return Err(MethodError::TooManyChanges);
        }
        let mut response = json!({
            "accountId": request.account_id,
            "oldQueryState": request.since_query_state,
            "newQueryState": changes.new_state.to_string(),
            "removed": removed.into_iter().map(ids::email_id).collect::<Vec<_>>(),
            "added": added
                .into_iter()
                .map(|(id, index)| json!({"id": ids::email_id(id), "index": index}))
                .collect::<Vec<_>>(),
        });
        if request.calculate_total {
            response["total"] = json!(total);
        }
        return Ok(response);
    }
    Err(MethodError::CannotCalculateChanges(
        "the mailbox keeps changing; query again".into(),
    ))
}

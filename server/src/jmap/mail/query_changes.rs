//! Foo/queryChanges (RFC 8620 §5.6) scaffolding shared by
//! Mailbox/queryChanges and Email/queryChanges, both computed from the
//! change log: the argument checks, the retry until the results and the
//! changes are of one state, and the response.

use std::future::Future;

use serde_json::{Value, json};

use super::changes::parse_state;
use crate::jmap::args;
use crate::jmap::error::MethodError;
use crate::store::LogPosition;

/// Attempts at a result list and change window of one state before giving up.
const ATTEMPTS: usize = 3;

/// The arguments every Foo/queryChanges has besides `filter`, `sort` and
/// `upToId` (whose handling is the type's); each request flattens it in.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryChangesArgs {
    pub account_id: String,
    pub since_query_state: String,
    pub max_changes: Option<u64>,
    #[serde(default)]
    pub calculate_total: bool,
}

args::account_arguments!(QueryChangesArgs);

/// `maxChanges` 0 is `invalidArguments` (RFC 8620 §5.6: greater than 0).
pub fn check_max_changes(max_changes: Option<u64>) -> Result<(), MethodError> {
    if max_changes == Some(0) {
        return Err(MethodError::InvalidArguments(
            "maxChanges must be greater than 0".into(),
        ));
    }
    Ok(())
}

/// Parses `sinceQueryState`: a state this server issued as a query state
/// (an intermediate Foo/changes state is not one), else `cannotCalculateChanges`.
pub fn parse_query_state(state: &str) -> Result<LogPosition, MethodError> {
    let since = parse_state(state)?;
    if since.object.is_some() {
        return Err(MethodError::CannotCalculateChanges(
            "not a query state".into(),
        ));
    }
    Ok(since)
}

/// How a query's results changed between `sinceQueryState` and `new_state`.
#[derive(Debug)]
pub struct ResultChanges {
    /// The state the results and changes are of.
    pub new_state: LogPosition,
    /// Row ids, in the order to report them.
    pub removed: Vec<i64>,
    /// (row id, index in the results now), in the order to report them.
    pub added: Vec<(i64, i64)>,
    /// The number of results now.
    pub total: i64,
}

/// Runs `attempt` until it returns changes whose results were read at the
/// state the changes lead to (it returns `None` when a write came between),
/// at most [`ATTEMPTS`] times; then `cannotCalculateChanges` saying `busy`.
pub async fn at_one_state<F, Fut>(mut attempt: F, busy: &str) -> Result<ResultChanges, MethodError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<ResultChanges>, MethodError>>,
{
    for _ in 0..ATTEMPTS {
        if let Some(changes) = attempt().await? {
            return Ok(changes);
        }
    }
    Err(MethodError::CannotCalculateChanges(busy.into()))
}

/// The response (RFC 8620 §5.6), ids rendered with `id`: `tooManyChanges`
/// when more than `maxChanges` ids were removed and added.
pub fn query_changes_response(
    args: QueryChangesArgs,
    changes: ResultChanges,
    id: fn(i64) -> String,
) -> Result<Value, MethodError> {
    if let Some(max) = args.max_changes
        && (changes.removed.len() + changes.added.len()) as u64 > max
    {
        return Err(MethodError::TooManyChanges);
    }
    let mut response = json!({
        "accountId": args.account_id,
        "oldQueryState": args.since_query_state,
        "newQueryState": changes.new_state.to_string(),
        "removed": changes.removed.into_iter().map(id).collect::<Vec<_>>(),
        "added": changes
            .added
            .into_iter()
            .map(|(row, index)| json!({"id": id(row), "index": index}))
            .collect::<Vec<_>>(),
    });
    if args.calculate_total {
        response["total"] = json!(changes.total);
    }
    Ok(response)
}

//! EmailSubmission/query and /queryChanges (RFC 8621 §7.3, §7.4): the
//! account's submissions filtered and sorted in memory (an account keeps
//! few), no query state kept.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::jmap::args::{self, parse_utc_date};
use crate::jmap::call::CallContext;
use crate::jmap::error::MethodError;
use crate::jmap::ids;
use crate::mail::query::{in_turn, page_start};
use crate::store::SubmissionRow;

/// EmailSubmission/query arguments (RFC 8621 §7.3).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryRequest {
    account_id: String,
    #[serde(default)]
    filter: Option<Map<String, Value>>,
    #[serde(default)]
    sort: Option<Vec<Map<String, Value>>>,
    #[serde(default)]
    position: i64,
    limit: Option<u64>,
    #[serde(default)]
    calculate_total: bool,
}

args::account_arguments!(QueryRequest);

/// Whether `row` meets a FilterCondition (RFC 8621 §7.3); operators
/// (`operator`/`conditions`) nest.
fn matches(row: &SubmissionRow, filter: &Map<String, Value>) -> Result<bool, MethodError> {
    let invalid = |what: &str| MethodError::InvalidArguments(format!("filter: {what}"));
    if let Some(operator) = filter.get("operator") {
        let conditions = filter
            .get("conditions")
            .and_then(Value::as_array)
            .ok_or_else(|| invalid("an operator needs conditions"))?;
        let mut results = Vec::with_capacity(conditions.len());
        for condition in conditions {
            let condition = condition
                .as_object()
                .ok_or_else(|| invalid("not an object"))?;
            results.push(matches(row, condition)?);
        }
        return match operator.as_str() {
            Some("AND") => Ok(results.iter().all(|r| *r)),
            Some("OR") => Ok(results.iter().any(|r| *r)),
            Some("NOT") => Ok(!results.iter().any(|r| *r)),
            _ => Err(invalid("unknown operator")),
        };
    }
    let id_list =
        |value: &Value, parse: fn(&str) -> Option<i64>| -> Result<Vec<i64>, MethodError> {
            let list = value.as_array().ok_or_else(|| invalid("an id list"))?;
            Ok(list
                .iter()
                .filter_map(Value::as_str)
                .filter_map(parse)
                .collect())
        };
    let date = |value: &Value| {
        value
            .as_str()
            .and_then(parse_utc_date)
            .ok_or_else(|| invalid("before and after are UTCDates"))
    };
    for (name, value) in filter {
        let ok = match name.as_str() {
            "identityIds" => id_list(value, ids::parse_identity_id)?.contains(&row.identity_id),
            "emailIds" => id_list(value, ids::parse_email_id)?.contains(&row.email_id),
            "threadIds" => id_list(value, ids::parse_thread_id)?.contains(&row.thread_id),
            "undoStatus" => value.as_str() == Some(row.undo_status.as_str()),
            "before" => row.send_at < date(value)?,
            "after" => row.send_at >= date(value)?,
            _ => return Err(MethodError::UnsupportedFilter(name.clone())),
        };
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Handles one EmailSubmission/query call (RFC 8621 §7.3): filters and
/// sorts (`emailId`, `threadId`, `sentAt`) over the account's submissions.
#[tracing::instrument(level = "debug", skip_all, fields(account = ctx.account.id))]
pub async fn submission_query(
    ctx: &mut CallContext<'_>,
    request: QueryRequest,
) -> Result<Value, MethodError> {
    let store = &ctx.jmap.store;
    let state = store.states(ctx.account.id).await?.email_submission;
    let mut rows = Vec::new();
    for row in store.submissions(ctx.account.id).await? {
        if request
            .filter
            .as_ref()
            .map_or(Ok(true), |f| matches(&row, f))?
        {
            rows.push(row);
        }
    }
    let keys = sort_keys(request.sort.as_deref().unwrap_or_default())?;
    sort_rows(&mut rows, &keys);
    let total = rows.len() as i64;
    let start = page_start(total, request.position, None);
    let max = ctx.jmap.limits.max_objects_in_get;
    let limit = request.limit.unwrap_or(max).min(max) as usize;
    let ids: Vec<String> = rows
        .iter()
        .skip(start as usize)
        .take(limit)
        .map(|row| ids::submission_id(row.id))
        .collect();
    let mut response = json!({
        "accountId": request.account_id,
        "queryState": state.to_string(),
        "canCalculateChanges": false,
        "position": start,
        "ids": ids,
    });
    if request.calculate_total {
        response["total"] = json!(total);
    }
    Ok(response)
}

/// The sort keys of an EmailSubmission/query, (property, ascending):
/// `emailId`, `threadId` or `sentAt`; another is `unsupportedSort`.
fn sort_keys(comparators: &[Map<String, Value>]) -> Result<Vec<(String, bool)>, MethodError> {
    let mut keys = Vec::new();
    for comparator in comparators {
        let ascending = comparator
            .get("isAscending")
            .and_then(Value::as_bool)
            .unwrap_or(true);
        match comparator.get("property").and_then(Value::as_str) {
            Some(p @ ("emailId" | "threadId" | "sentAt")) => keys.push((p.to_string(), ascending)),
            other => {
                return Err(MethodError::UnsupportedSort(
                    other.unwrap_or_default().to_string(),
                ));
            }
        }
    }
    Ok(keys)
}

/// Sorts submissions by `keys`, then by id.
fn sort_rows(rows: &mut [SubmissionRow], keys: &[(String, bool)]) {
    rows.sort_by(|a, b| {
        in_turn(keys, |(property, ascending)| {
            let order = match property.as_str() {
                "emailId" => a.email_id.cmp(&b.email_id),
                "threadId" => a.thread_id.cmp(&b.thread_id),
                _ => a.send_at.cmp(&b.send_at),
            };
            (order, *ascending)
        })
        .then_with(|| a.id.cmp(&b.id))
    });
}

/// Handles one EmailSubmission/queryChanges call (RFC 8621 §7.4): this
/// server keeps no query states for submissions (`canCalculateChanges` is
/// false in every EmailSubmission/query), so it says it cannot
/// (`cannotCalculateChanges`, RFC 8620 §5.6) and the client queries anew.
#[tracing::instrument(level = "debug", skip_all, fields(account = ctx.account.id))]
pub async fn submission_query_changes(
    ctx: &mut CallContext<'_>,
    arguments: Map<String, Value>,
) -> Result<Value, MethodError> {
    let account_id = arguments
        .get("accountId")
        .and_then(Value::as_str)
        .ok_or_else(|| MethodError::InvalidArguments("accountId is required".into()))?;
    args::check_account(ctx.account, account_id)?;
    Err(MethodError::CannotCalculateChanges(
        "EmailSubmission queries are not tracked: query again".into(),
    ))
}

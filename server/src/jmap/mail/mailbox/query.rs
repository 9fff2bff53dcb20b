//! Mailbox/query (RFC 8621 §2.3, RFC 8620 §5.5): filters parentId, name,
//! role, hasAnyRole, isSubscribed (and AND/OR/NOT); sorts sortOrder, name;
//! pages by `position` or `anchor` + `anchorOffset` (§5.5, saturating).
//! Every such query can be followed by Mailbox/queryChanges
//! ([`super::query_changes`]): `canCalculateChanges` is true.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::jmap::call::CallContext;
use crate::jmap::error::MethodError;
use crate::jmap::{args, ids};
use crate::mail::query::{in_turn, page_start};
use crate::store::MailboxRow;

/// Mailbox/query arguments (RFC 8621 §2.3).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryRequest {
    account_id: String,
    filter: Option<Value>,
    sort: Option<Vec<Comparator>>,
    #[serde(default)]
    position: i64,
    anchor: Option<String>,
    #[serde(default)]
    anchor_offset: i64,
    limit: Option<u64>,
    #[serde(default)]
    calculate_total: bool,
}

args::account_arguments!(QueryRequest);

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Comparator {
    property: String,
    #[serde(default = "yes")]
    is_ascending: bool,
}

fn yes() -> bool {
    true
}

fn matches(filter: &Value, mailbox: &MailboxRow) -> Result<bool, MethodError> {
    let object = filter
        .as_object()
        .ok_or_else(|| MethodError::InvalidArguments("a filter must be an object".into()))?;
    if let Some(operator) = object.get("operator") {
        let conditions = object
            .get("conditions")
            .and_then(Value::as_array)
            .ok_or_else(|| {
                MethodError::InvalidArguments("a FilterOperator needs conditions".into())
            })?;
        let results = conditions
            .iter()
            .map(|c| matches(c, mailbox))
            .collect::<Result<Vec<_>, _>>()?;
        return match operator.as_str() {
            Some("AND") => Ok(results.iter().all(|r| *r)),
            Some("OR") => Ok(results.iter().any(|r| *r)),
            Some("NOT") => Ok(!results.iter().any(|r| *r)),
            _ => Err(MethodError::InvalidArguments(
                "operator must be AND, OR or NOT".into(),
            )),
        };
    }
    for (name, value) in object {
        let ok = match name.as_str() {
            "parentId" => match value {
                Value::Null => mailbox.parent_id.is_none(),
                Value::String(id) => {
                    ids::parse_mailbox_id(id).is_some()
                        && mailbox.parent_id == ids::parse_mailbox_id(id)
                }
                _ => {
                    return Err(MethodError::InvalidArguments(
                        "parentId must be an id or null".into(),
                    ));
                }
            },
            "name" => {
                let needle = value
                    .as_str()
                    .ok_or_else(|| MethodError::InvalidArguments("name must be a string".into()))?;
                mailbox.name.to_lowercase().contains(&needle.to_lowercase())
            }
            "role" => match value {
                Value::Null => mailbox.role.is_none(),
                Value::String(role) => {
                    mailbox.role.as_deref() == Some(role.to_lowercase().as_str())
                }
                _ => {
                    return Err(MethodError::InvalidArguments(
                        "role must be a string or null".into(),
                    ));
                }
            },
            "hasAnyRole" => {
                let wanted = value.as_bool().ok_or_else(|| {
                    MethodError::InvalidArguments("hasAnyRole must be a boolean".into())
                })?;
                mailbox.role.is_some() == wanted
            }
            "isSubscribed" => {
                let wanted = value.as_bool().ok_or_else(|| {
                    MethodError::InvalidArguments("isSubscribed must be a boolean".into())
                })?;
                mailbox.is_subscribed == wanted
            }
            other => {
                return Err(MethodError::UnsupportedFilter(format!(
                    "unknown Mailbox filter {other}"
                )));
            }
        };
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Handles one Mailbox/query call.
#[tracing::instrument(level = "debug", skip_all, fields(account = ctx.account.id))]
pub async fn mailbox_query(
    ctx: &mut CallContext<'_>,
    request: QueryRequest,
) -> Result<Value, MethodError> {
    let (state, mailboxes) = ctx
        .jmap
        .mailboxes
        .read(&*ctx.jmap.store, ctx.account.id)
        .await?;
    let mailboxes = Vec::clone(&mailboxes);
    let comparators = request.sort.unwrap_or_default();
    let mailboxes = results(mailboxes, request.filter.as_ref(), &comparators)?;
    let total = mailboxes.len() as i64;
    let anchor = match &request.anchor {
        Some(anchor) => Some(
            ids::parse_mailbox_id(anchor)
                .and_then(|id| mailboxes.iter().position(|m| m.id == id))
                .ok_or(MethodError::AnchorNotFound)?,
        ),
        None => None,
    };
    let start = page_start(
        total,
        request.position,
        anchor.map(|index| (index, request.anchor_offset)),
    );
    let limit = request
        .limit
        .unwrap_or(u64::MAX)
        .min(ctx.jmap.limits.max_objects_in_get) as usize;
    let ids: Vec<String> = mailboxes
        .iter()
        .skip(start as usize)
        .take(limit)
        .map(|m| ids::mailbox_id(m.id))
        .collect();
    let mut response = json!({
        "accountId": request.account_id,
        "queryState": state.to_string(),
        "canCalculateChanges": true,
        "position": start,
        "ids": ids,
    });
    if request.calculate_total {
        response["total"] = json!(total);
    }
    // RFC 8620 §5.5: a clamped limit is returned with the response.
    let max_limit = ctx.jmap.limits.max_objects_in_get;
    if request.limit.is_none_or(|l| l > max_limit) {
        response["limit"] = json!(max_limit);
    }
    Ok(response)
}

/// The mailboxes matching `filter`, in `sort` order (then by id).
pub(crate) fn results(
    mailboxes: Vec<MailboxRow>,
    filter: Option<&Value>,
    comparators: &[Comparator],
) -> Result<Vec<MailboxRow>, MethodError> {
    let mut mailboxes = match filter {
        None => mailboxes,
        Some(filter) => {
            let mut kept = Vec::with_capacity(mailboxes.len());
            for mailbox in mailboxes {
                if matches(filter, &mailbox)? {
                    kept.push(mailbox);
                }
            }
            kept
        }
    };
    for comparator in comparators {
        if !matches!(comparator.property.as_str(), "sortOrder" | "name") {
            return Err(MethodError::UnsupportedSort(format!(
                "cannot sort mailboxes by {}",
                comparator.property
            )));
        }
    }
    mailboxes.sort_by(|a, b| {
        in_turn(comparators, |comparator| {
            let order = match comparator.property.as_str() {
                "sortOrder" => a.sort_order.cmp(&b.sort_order),
                _ => a.name.to_lowercase().cmp(&b.name.to_lowercase()),
            };
            (order, comparator.is_ascending)
        })
        .then_with(|| a.id.cmp(&b.id))
    });
    Ok(mailboxes)
}

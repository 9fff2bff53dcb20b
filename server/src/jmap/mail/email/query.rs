//! Email/query (RFC 8621 §4.4, RFC 8620 §5.5).
//!
//! `inMailbox` alone, sorted by receivedAt, without anchor or collapsing, is
//! the list view of every client: it is served from the store's
//! (mailbox, receivedAt) index without reading the mailbox. Everything else
//! is evaluated by [`crate::mail::query`] over the candidate rows. A filter
//! or sort not supported answers `unsupportedFilter` / `unsupportedSort`,
//! never a wrong list. Without `sort`, emails come newest first.
//!
//! `canCalculateChanges` is true exactly when Email/queryChanges
//! ([`super::query_changes`]) can follow the query: every filter and sort
//! here, without `collapseThreads` (which of a thread's emails represents it
//! changes when another email of the thread changes).

use std::collections::HashMap;

use chrono::DateTime;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::jmap::dispatch::CallContext;
use crate::jmap::error::MethodError;
use crate::jmap::{args, ids};
use crate::mail::header::HeaderFields;
use crate::mail::query::{self, Comparator, Filter, QueryFacts, SortProperty, ThreadKeywords};
use crate::mail::search;

use super::kept_pages::Page;
use crate::store::{SearchScope, TextSearch};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct QueryRequest {
    account_id: String,
    filter: Option<Value>,
    sort: Option<Vec<SortArgument>>,
    #[serde(default)]
    position: i64,
    anchor: Option<String>,
    #[serde(default)]
    anchor_offset: i64,
    limit: Option<u64>,
    #[serde(default)]
    calculate_total: bool,
    #[serde(default)]
    collapse_threads: bool,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SortArgument {
    property: String,
    #[serde(default = "yes")]
    is_ascending: bool,
    #[serde(default)]
    collation: Option<String>,
    /// The keyword of the keyword sorts (RFC 8621 §4.4.2).
    #[serde(default)]
    keyword: Option<String>,
}

fn yes() -> bool {
    true
}

fn invalid(message: impl Into<String>) -> MethodError {
    MethodError::InvalidArguments(message.into())
}

fn utc_date(value: &Value, name: &str) -> Result<i64, MethodError> {
    value
        .as_str()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|d| d.timestamp())
        .ok_or_else(|| invalid(format!("{name} must be a UTCDate")))
}

fn text(value: &Value, name: &str) -> Result<String, MethodError> {
    value
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| invalid(format!("{name} must be a string")))
}

fn number(value: &Value, name: &str) -> Result<i64, MethodError> {
    value
        .as_i64()
        .filter(|n| *n >= 0)
        .ok_or_else(|| invalid(format!("{name} must be an UnsignedInt")))
}

/// Parses a FilterOperator or FilterCondition (RFC 8621 §4.4.1).
pub(crate) fn parse_filter(value: &Value) -> Result<Filter, MethodError> {
    let object = value
        .as_object()
        .ok_or_else(|| invalid("a filter must be an object"))?;
    if let Some(operator) = object.get("operator") {
        let conditions = object
            .get("conditions")
            .and_then(Value::as_array)
            .ok_or_else(|| invalid("a FilterOperator needs conditions"))?
            .iter()
            .map(parse_filter)
            .collect::<Result<Vec<_>, _>>()?;
        return match operator.as_str() {
            Some("AND") => Ok(Filter::And(conditions)),
            Some("OR") => Ok(Filter::Or(conditions)),
            Some("NOT") => Ok(Filter::Not(conditions)),
            _ => Err(invalid("operator must be AND, OR or NOT")),
        };
    }
    let mut conditions = Vec::with_capacity(object.len());
    for (name, value) in object {
        let condition = match name.as_str() {
            "inMailbox" => match ids::parse_mailbox_id(&text(value, name)?) {
                Some(id) => Filter::InMailbox(id),
                None => Filter::InMailboxUnknown,
            },
            "inMailboxOtherThan" => Filter::InMailboxOtherThan(
                value
                    .as_array()
                    .ok_or_else(|| invalid("inMailboxOtherThan must be a list of ids"))?
                    .iter()
                    .map(|id| id.as_str().and_then(ids::parse_mailbox_id).unwrap_or(-1))
                    .collect(),
            ),
            "before" => Filter::Before(utc_date(value, name)?),
            "after" => Filter::After(utc_date(value, name)?),
            "minSize" => Filter::MinSize(number(value, name)?),
            "maxSize" => Filter::MaxSize(number(value, name)?),
            "hasKeyword" => Filter::HasKeyword(text(value, name)?.to_lowercase()),
            "notKeyword" => Filter::NotKeyword(text(value, name)?.to_lowercase()),
            "someInThreadHaveKeyword" => {
                Filter::SomeInThreadHaveKeyword(text(value, name)?.to_lowercase())
            }
            "allInThreadHaveKeyword" => {
                Filter::AllInThreadHaveKeyword(text(value, name)?.to_lowercase())
            }
            "noneInThreadHaveKeyword" => {
                Filter::NoneInThreadHaveKeyword(text(value, name)?.to_lowercase())
            }
            "hasAttachment" => Filter::HasAttachment(
                value
                    .as_bool()
                    .ok_or_else(|| invalid("hasAttachment must be a boolean"))?,
            ),
            "from" => Filter::From(text(value, name)?),
            "to" => Filter::To(text(value, name)?),
            "cc" => Filter::Cc(text(value, name)?),
            "bcc" => Filter::Bcc(text(value, name)?),
            "subject" => Filter::Subject(text(value, name)?),
            // An empty value is no condition (an empty AND matches all).
            "text" | "body" => {
                let scope = match name.as_str() {
                    "text" => SearchScope::All,
                    _ => SearchScope::Body,
                };
                search::parse_query(&text(value, name)?, scope)
                    .map_err(invalid)?
                    .map_or(Filter::And(Vec::new()), Filter::Text)
            }
            "header" => {
                let parts: Vec<String> = value
                    .as_array()
                    .filter(|a| (1..=2).contains(&a.len()))
                    .and_then(|a| a.iter().map(|v| v.as_str().map(str::to_string)).collect())
                    .ok_or_else(|| invalid("header must be [name] or [name, value]"))?;
                Filter::Header(parts[0].clone(), parts.get(1).cloned())
            }
            other => {
                return Err(MethodError::UnsupportedFilter(format!(
                    "the {other} filter is not supported"
                )));
            }
        };
        conditions.push(condition);
    }
    Ok(if conditions.len() == 1 {
        conditions.remove(0)
    } else {
        Filter::And(conditions)
    })
}

/// Parses `sort`; none is receivedAt descending.
pub(crate) fn parse_sort(sort: Option<Vec<SortArgument>>) -> Result<Vec<Comparator>, MethodError> {
    let Some(sort) = sort else {
        return Ok(vec![Comparator {
            property: SortProperty::ReceivedAt,
            ascending: false,
        }]);
    };
    sort.into_iter()
        .map(|s| {
            if let Some(collation) = &s.collation
                && !matches!(
                    collation.as_str(),
                    "i;ascii-casemap" | "i;unicode-casemap" | "i;ascii-numeric"
                )
            {
                return Err(MethodError::UnsupportedSort(format!(
                    "unknown collation {collation}"
                )));
            }
            let keyword = || {
                s.keyword
                    .as_deref()
                    .and_then(super::set::valid_keyword)
                    .ok_or_else(|| {
                        invalid(format!("sorting by {} needs a valid keyword", s.property))
                    })
            };
            let property = match s.property.as_str() {
                "receivedAt" => SortProperty::ReceivedAt,
                "sentAt" => SortProperty::SentAt,
                "size" => SortProperty::Size,
                "from" => SortProperty::From,
                "to" => SortProperty::To,
                "subject" => SortProperty::Subject,
                "hasKeyword" => SortProperty::HasKeyword(keyword()?),
                "someInThreadHaveKeyword" => SortProperty::SomeInThreadHaveKeyword(keyword()?),
                "allInThreadHaveKeyword" => SortProperty::AllInThreadHaveKeyword(keyword()?),
                other => {
                    return Err(MethodError::UnsupportedSort(format!(
                        "cannot sort by {other}"
                    )));
                }
            };
            Ok(Comparator {
                property,
                ascending: s.is_ascending,
            })
        })
        .collect()
}

/// Handles one Email/query call.
#[tracing::instrument(level = "debug", skip_all, fields(account = ctx.account.id))]
pub async fn email_query(
    ctx: &mut CallContext<'_>,
    arguments: Map<String, Value>,
) -> Result<Value, MethodError> {
    let mut request: QueryRequest = args::parse(arguments)?;
    args::check_account(ctx.account, &request.account_id)?;
    // Plan.
    let filter = request.filter.as_ref().map(parse_filter).transpose()?;
    let comparators = parse_sort(request.sort.take())?;
    let max_limit = ctx.jmap.limits.max_objects_in_get;
    let limit = request.limit.unwrap_or(max_limit).min(max_limit) as i64;
    let simple = request.anchor.is_none() && !request.collapse_threads;
    let list_view = listing(filter.as_ref(), &comparators).filter(|_| simple);
    let search_view = search_listing(filter.as_ref(), &comparators).filter(|_| simple);
    // Load.
    let states = ctx.jmap.store.states(ctx.account.id).await?;
    let state = states.email;
    let page = match (list_view, search_view) {
        (Some((mailbox, ascending)), _) => {
            let key = (ctx.account.id, mailbox, ascending, request.position, limit);
            match ctx.jmap.pages.get(&key, &states).await {
                Some(page) => page,
                None => {
                    let page =
                        list_view_page(ctx, mailbox, ascending, request.position, limit).await?;
                    let after = ctx.jmap.store.states(ctx.account.id).await?;
                    ctx.jmap.pages.keep(key, &states, &after, &page).await;
                    page
                }
            }
        }
        (None, Some(view)) => search_view_page(ctx, view, request.position, limit).await?,
        (None, None) => evaluated_page(ctx, filter.as_ref(), &comparators, &request, limit).await?,
    };
    // Render.
    let mut response = json!({
        "accountId": request.account_id,
        "queryState": state.to_string(),
        "canCalculateChanges": can_calculate_changes(filter.as_ref(), &comparators, request.collapse_threads),
        "position": page.position,
        "ids": page.ids.into_iter().map(ids::email_id).collect::<Vec<_>>(),
    });
    if request.calculate_total {
        response["total"] = json!(page.total);
    }
    // RFC 8620 §5.5: a limit over the server's maximum, or none, is clamped
    // to it "and the new limit is returned with the response".
    if request.limit.is_none_or(|l| l > max_limit) {
        response["limit"] = json!(max_limit);
    }
    Ok(response)
}

/// Whether Email/queryChanges can follow this query ([`super::query_changes`]):
/// not with `collapseThreads`, nor with a filter or sort over whole threads
/// (an update of one email moves others of its thread, which the change log
/// does not name).
pub(crate) fn can_calculate_changes(
    filter: Option<&Filter>,
    comparators: &[Comparator],
    collapse_threads: bool,
) -> bool {
    !collapse_threads
        && !filter.is_some_and(Filter::needs_threads)
        && !comparators.iter().any(|c| c.property.needs_threads())
}

/// The page of the list view (`inMailbox` sorted by receivedAt), read from
/// the (mailbox, receivedAt) index without reading the mailbox.
async fn list_view_page(
    ctx: &CallContext<'_>,
    mailbox: i64,
    ascending: bool,
    position: i64,
    limit: i64,
) -> Result<Page, MethodError> {
    let store = &ctx.jmap.store;
    if !store.owns_mailbox(ctx.account.id, mailbox).await? {
        return Ok(Page {
            ids: Vec::new(),
            position: 0,
            total: 0,
        });
    }
    // A negative position counts from the end: learn the total first
    // (a page of 0 rows), then read the page once.
    let start = if position < 0 {
        let (_, total) = store
            .mailbox_emails_by_received(mailbox, !ascending, 0, 0)
            .await?;
        (total + position).max(0)
    } else {
        position
    };
    let (page, total) = store
        .mailbox_emails_by_received(mailbox, !ascending, start, limit)
        .await?;
    Ok(Page {
        ids: page.into_iter().map(|(id, _)| id).collect(),
        position: start.min(total),
        total,
    })
}

/// The page of any other query: every match evaluated and sorted, threads
/// collapsed if asked, then cut at the anchor or position.
async fn evaluated_page(
    ctx: &CallContext<'_>,
    filter: Option<&Filter>,
    comparators: &[Comparator],
    request: &QueryRequest,
    limit: i64,
) -> Result<Page, MethodError> {
    let mut rows = matching_rows(ctx, filter, comparators).await?;
    if request.collapse_threads {
        rows = query::collapse_threads(rows);
    }
    let total = rows.len() as i64;
    let anchor = match &request.anchor {
        Some(anchor) => Some(
            ids::parse_email_id(anchor)
                .and_then(|id| rows.iter().position(|r| r.meta.id == id))
                .ok_or(MethodError::AnchorNotFound)?,
        ),
        None => None,
    };
    let start = query::page_start(
        total,
        request.position,
        anchor.map(|index| (index, request.anchor_offset)),
    );
    let ids = rows
        .iter()
        .skip(start as usize)
        .take(limit as usize)
        .map(|r| r.meta.id)
        .collect();
    Ok(Page {
        ids,
        position: start,
        total,
    })
}

/// A search as a client lists it: a full-text condition alone or with
/// `inMailbox`, sorted by receivedAt alone. Returns (search, mailbox,
/// ascending).
struct SearchView<'f> {
    search: &'f TextSearch,
    mailbox: Option<i64>,
    ascending: bool,
}

fn search_listing<'f>(
    filter: Option<&'f Filter>,
    comparators: &[Comparator],
) -> Option<SearchView<'f>> {
    let [
        Comparator {
            property: SortProperty::ReceivedAt,
            ascending,
        },
    ] = comparators
    else {
        return None;
    };
    let (search, mailbox) = match filter? {
        Filter::Text(search) => (search, None),
        Filter::And(conditions) => match conditions.as_slice() {
            [Filter::Text(search), Filter::InMailbox(mailbox)]
            | [Filter::InMailbox(mailbox), Filter::Text(search)] => (search, Some(*mailbox)),
            _ => return None,
        },
        _ => return None,
    };
    Some(SearchView {
        search,
        mailbox,
        ascending: *ascending,
    })
}

/// The page of a search's list view, found, sorted and counted by the
/// database in one statement (the full-text index joined with the emails),
/// without reading the matching rows.
async fn search_view_page(
    ctx: &CallContext<'_>,
    view: SearchView<'_>,
    position: i64,
    limit: i64,
) -> Result<Page, MethodError> {
    let store = &ctx.jmap.store;
    let descending = !view.ascending;
    let account = ctx.account.id;
    // A negative position counts from the end: learn the total first.
    let start = if position < 0 {
        let (_, total) = store
            .search_page(account, view.search, view.mailbox, descending, 0, 0)
            .await?;
        (total + position).max(0)
    } else {
        position
    };
    let (ids, total) = store
        .search_page(account, view.search, view.mailbox, descending, start, limit)
        .await?;
    Ok(Page {
        ids,
        position: start.min(total),
        total,
    })
}

/// The list view's shape, served from the (mailbox, receivedAt) index:
/// `inMailbox` alone, sorted by receivedAt alone. Returns (mailbox, ascending).
pub(crate) fn listing(filter: Option<&Filter>, comparators: &[Comparator]) -> Option<(i64, bool)> {
    match (filter, comparators) {
        (
            Some(Filter::InMailbox(mailbox)),
            [
                Comparator {
                    property: SortProperty::ReceivedAt,
                    ascending,
                },
            ],
        ) => Some((*mailbox, *ascending)),
        _ => None,
    }
}

/// Every email matching `filter`, sorted (the general path, before any
/// thread collapsing).
pub(crate) async fn matching_rows(
    ctx: &CallContext<'_>,
    filter: Option<&Filter>,
    comparators: &[Comparator],
) -> Result<Vec<crate::store::QueryRow>, MethodError> {
    let in_mailbox = match filter {
        Some(Filter::InMailbox(id)) => Some(*id),
        Some(Filter::And(conditions)) => conditions.iter().find_map(|c| match c {
            Filter::InMailbox(id) => Some(*id),
            _ => None,
        }),
        _ => None,
    };
    let store = &ctx.jmap.store;
    let mut facts = QueryFacts::default();
    for search in filter.map(Filter::searches).unwrap_or_default() {
        if !facts.search.contains_key(search) {
            let ids = store.search_ids(ctx.account.id, search).await?;
            facts
                .search
                .insert(search.clone(), ids.into_iter().collect());
        }
    }
    // A full-text condition all matches meet names every candidate: read
    // only those rows, not the whole account.
    let narrowed = filter.and_then(Filter::required_search).is_some();
    let mut rows = match filter.and_then(Filter::required_search) {
        Some(required) => {
            let ids: Vec<i64> = facts.search[required].iter().copied().collect();
            let mut rows = Vec::with_capacity(ids.len());
            for chunk in ids.chunks(10_000) {
                rows.extend(store.query_rows_of(ctx.account.id, chunk).await?);
            }
            rows
        }
        None => store.query_rows(ctx.account.id, in_mailbox).await?,
    };
    if filter.is_some_and(Filter::needs_threads)
        || comparators.iter().any(|c| c.property.needs_threads())
    {
        // A thread is all of it, not only its emails in the mailbox (or
        // among the full-text candidates).
        facts.threads = match (in_mailbox, narrowed) {
            (None, false) => ThreadKeywords::count(&rows),
            _ => ThreadKeywords::count(&store.query_rows(ctx.account.id, None).await?),
        };
    }
    if let Some(filter) = filter {
        if filter.needs_headers() {
            facts.headers = load_header_fields(ctx, &rows).await?;
        }
        rows.retain(|row| query::matches(filter, row, &facts));
    }
    query::sort(&mut rows, comparators, &facts.threads);
    Ok(rows)
}

/// Whether a filter reads a property an email's update can change
/// (mailboxIds, keywords).
pub(crate) fn is_mutable(filter: &Filter) -> bool {
    match filter {
        Filter::And(c) | Filter::Or(c) | Filter::Not(c) => c.iter().any(is_mutable),
        Filter::InMailbox(_)
        | Filter::InMailboxOtherThan(_)
        | Filter::HasKeyword(_)
        | Filter::NotKeyword(_)
        | Filter::SomeInThreadHaveKeyword(_)
        | Filter::AllInThreadHaveKeyword(_)
        | Filter::NoneInThreadHaveKeyword(_) => true,
        _ => false,
    }
}

/// Header fields of the candidate rows, for the `header` filter: each stored
/// header block split by [`HeaderFields`], as Email/get splits it.
async fn load_header_fields(
    ctx: &CallContext<'_>,
    rows: &[crate::store::QueryRow],
) -> Result<HashMap<i64, HeaderFields>, MethodError> {
    let ids: Vec<i64> = rows.iter().map(|r| r.meta.id).collect();
    let mut fields = HashMap::with_capacity(ids.len());
    for chunk in ids.chunks(1000) {
        for (id, block) in ctx.jmap.store.header_blocks(ctx.account.id, chunk).await? {
            fields.insert(id, HeaderFields::parse(block));
        }
    }
    Ok(fields)
}

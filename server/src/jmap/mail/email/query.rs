//! Email/query (RFC 8621 §4.4, RFC 8620 §5.5).
//!
//! `inMailbox` alone, sorted by receivedAt, without anchor or collapsing, is
//! the list view of every client: it is served from the store's
//! (mailbox, receivedAt) index without reading the mailbox. Everything else
//! is evaluated by [`crate::mail::query`] over the candidate rows. A filter
//! or sort not supported answers `unsupportedFilter` / `unsupportedSort`,
//! never a wrong list. Without `sort`, emails come newest first.
//!
//! A filter is bounded as it is read ([`crate::mail::query`]'s bounds:
//! values `invalidArguments`, conditions and operators `unsupportedFilter`,
//! and at most [`search::MAX_TEXT_CONDITIONS`] full-text ones). Its
//! evaluation spends the request's render work and, over more than
//! [`INLINE_RENDER_WORK`] steps (emails × (conditions and operators +
//! comparators)) or with a `header` condition, runs with the sort on the
//! work pool ([`crate::mail::work`]), like Email/get's heavy renders, so
//! another account's requests are not starved. Each full-text condition is
//! charged to the request ([`crate::jmap::budget`]) and runs under the
//! account's slots of [`crate::jmap::Jmap::searches`].
//!
//! `canCalculateChanges` is true exactly when Email/queryChanges
//! ([`super::query_changes`]) can follow the query: every filter and sort
//! here, without `collapseThreads` (which of a thread's emails represents it
//! changes when another email of the thread changes).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::DateTime;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::jmap::Limits;
use crate::jmap::call::CallContext;
use crate::jmap::error::MethodError;
use crate::jmap::{args, ids};
use crate::mail::header::HeaderFields;
use crate::mail::query::{
    self, Comparator, Filter, MAX_FILTER_MAILBOX_IDS, MAX_FILTER_NODES, MAX_FILTER_VALUE_OCTETS,
    Needle, QueryFacts, SortProperty, ThreadKeywords,
};
use crate::mail::search::{self, MAX_TEXT_CONDITIONS};
use crate::mail::work::{INLINE_RENDER_WORK, WorkMeter};
use crate::store::QueryRow;

use super::kept_pages::Page;
use crate::store::{SearchScope, TextSearch};

/// Email/query arguments (RFC 8621 §4.4).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryRequest {
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

args::account_arguments!(QueryRequest);

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

/// A string value of a filter, at most [`MAX_FILTER_VALUE_OCTETS`].
fn text(value: &Value, name: &str) -> Result<String, MethodError> {
    let text = value
        .as_str()
        .ok_or_else(|| invalid(format!("{name} must be a string")))?;
    bounded(text, name)?;
    Ok(text.to_string())
}

/// `invalidArguments` for a filter value over [`MAX_FILTER_VALUE_OCTETS`].
fn bounded(text: &str, name: &str) -> Result<(), MethodError> {
    match text.len() > MAX_FILTER_VALUE_OCTETS {
        true => Err(invalid(format!(
            "a {name} filter value holds at most {MAX_FILTER_VALUE_OCTETS} octets"
        ))),
        false => Ok(()),
    }
}

fn number(value: &Value, name: &str) -> Result<i64, MethodError> {
    value
        .as_i64()
        .filter(|n| *n >= 0)
        .ok_or_else(|| invalid(format!("{name} must be an UnsignedInt")))
}

/// Parses a FilterOperator or FilterCondition (RFC 8621 §4.4.1), within
/// the bounds of [`crate::mail::query`]: a string value over
/// [`MAX_FILTER_VALUE_OCTETS`] or a list over [`MAX_FILTER_MAILBOX_IDS`] is
/// `invalidArguments`; more than [`MAX_FILTER_NODES`] conditions and
/// operators, or more than [`MAX_TEXT_CONDITIONS`] `text` and `body`
/// conditions, is `unsupportedFilter`.
pub(crate) fn parse_filter(value: &Value) -> Result<Filter, MethodError> {
    FilterReader::default().read(value)
}

/// What a filter read so far holds, against its bounds.
#[derive(Default)]
struct FilterReader {
    nodes: usize,
    searches: usize,
}

impl FilterReader {
    /// Counts one more condition or operator.
    fn node(&mut self) -> Result<(), MethodError> {
        self.nodes += 1;
        match self.nodes > MAX_FILTER_NODES {
            true => Err(MethodError::UnsupportedFilter(format!(
                "a filter holds at most {MAX_FILTER_NODES} conditions and operators; \
                 simplify the search"
            ))),
            false => Ok(()),
        }
    }

    /// Counts one more full-text condition.
    fn search(&mut self) -> Result<(), MethodError> {
        self.searches += 1;
        match self.searches > MAX_TEXT_CONDITIONS {
            true => Err(MethodError::UnsupportedFilter(format!(
                "a filter holds at most {MAX_TEXT_CONDITIONS} text and body conditions; \
                 simplify the search"
            ))),
            false => Ok(()),
        }
    }

    /// Reads one filter: a FilterOperator, or a FilterCondition (one
    /// condition per property, ANDed when more than one).
    fn read(&mut self, value: &Value) -> Result<Filter, MethodError> {
        let object = value
            .as_object()
            .ok_or_else(|| invalid("a filter must be an object"))?;
        if let Some(operator) = object.get("operator") {
            return self.operator(operator, object);
        }
        let mut conditions = Vec::with_capacity(object.len());
        for (name, value) in object {
            self.node()?;
            conditions.push(self.condition(name, value)?);
        }
        Ok(if conditions.len() == 1 {
            conditions.remove(0)
        } else {
            Filter::And(conditions)
        })
    }

    /// A FilterOperator: AND, OR or NOT over its conditions.
    fn operator(
        &mut self,
        operator: &Value,
        object: &Map<String, Value>,
    ) -> Result<Filter, MethodError> {
        self.node()?;
        let conditions = object
            .get("conditions")
            .and_then(Value::as_array)
            .ok_or_else(|| invalid("a FilterOperator needs conditions"))?
            .iter()
            .map(|condition| self.read(condition))
            .collect::<Result<Vec<_>, _>>()?;
        match operator.as_str() {
            Some("AND") => Ok(Filter::And(conditions)),
            Some("OR") => Ok(Filter::Or(conditions)),
            Some("NOT") => Ok(Filter::Not(conditions)),
            _ => Err(invalid("operator must be AND, OR or NOT")),
        }
    }

    /// One property of a FilterCondition (RFC 8621 §4.4.1).
    fn condition(&mut self, name: &str, value: &Value) -> Result<Filter, MethodError> {
        Ok(match name {
            "inMailbox" => match ids::parse_mailbox_id(&text(value, name)?) {
                Some(id) => Filter::InMailbox(id),
                None => Filter::InMailboxUnknown,
            },
            "inMailboxOtherThan" => in_mailbox_other_than(value)?,
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
            "from" => Filter::From(Needle::new(&text(value, name)?)),
            "to" => Filter::To(Needle::new(&text(value, name)?)),
            "cc" => Filter::Cc(Needle::new(&text(value, name)?)),
            "bcc" => Filter::Bcc(Needle::new(&text(value, name)?)),
            "subject" => Filter::Subject(Needle::new(&text(value, name)?)),
            "text" | "body" => self.text_search(name, value)?,
            "header" => header_condition(name, value)?,
            other => {
                return Err(MethodError::UnsupportedFilter(format!(
                    "the {other} filter is not supported"
                )));
            }
        })
    }

    /// A `text` or `body` condition, counted as a full-text one; an empty
    /// value is no condition (an empty AND matches all).
    fn text_search(&mut self, name: &str, value: &Value) -> Result<Filter, MethodError> {
        let scope = match name {
            "text" => SearchScope::All,
            _ => SearchScope::Body,
        };
        match search::parse_query(&text(value, name)?, scope).map_err(invalid)? {
            Some(search) => {
                self.search()?;
                Ok(Filter::Text(search))
            }
            None => Ok(Filter::And(Vec::new())),
        }
    }
}

/// An `inMailboxOtherThan` condition: at most [`MAX_FILTER_MAILBOX_IDS`]
/// ids, sorted and without repeats (an id not ours is no mailbox's).
fn in_mailbox_other_than(value: &Value) -> Result<Filter, MethodError> {
    let list = value
        .as_array()
        .ok_or_else(|| invalid("inMailboxOtherThan must be a list of ids"))?;
    if list.len() > MAX_FILTER_MAILBOX_IDS {
        return Err(invalid(format!(
            "inMailboxOtherThan holds at most {MAX_FILTER_MAILBOX_IDS} ids"
        )));
    }
    let mut ids: Vec<i64> = list
        .iter()
        .map(|id| id.as_str().and_then(ids::parse_mailbox_id).unwrap_or(-1))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    Ok(Filter::InMailboxOtherThan(ids))
}

/// A `header` condition: `[name]` or `[name, value]`, each bounded.
fn header_condition(name: &str, value: &Value) -> Result<Filter, MethodError> {
    let parts: Vec<String> = value
        .as_array()
        .filter(|a| (1..=2).contains(&a.len()))
        .and_then(|a| a.iter().map(|v| v.as_str().map(str::to_string)).collect())
        .ok_or_else(|| invalid("header must be [name] or [name, value]"))?;
    for part in &parts {
        bounded(part, name)?;
    }
    Ok(Filter::Header(
        parts[0].to_ascii_lowercase(),
        parts.get(1).map(|value| Needle::new(value)),
    ))
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
                    .and_then(super::members::valid_keyword)
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
    mut request: QueryRequest,
) -> Result<Value, MethodError> {
    // Plan.
    let filter = request.filter.as_ref().map(parse_filter).transpose()?;
    let comparators = parse_sort(request.sort.take())?;
    let max_limit = ctx.jmap.limits.max_objects_in_get;
    let limit = request.limit.unwrap_or(max_limit).min(max_limit) as i64;
    let simple = request.anchor.is_none() && !request.collapse_threads;
    let list_view = listing(filter.as_ref(), &comparators).filter(|_| simple);
    let search_view = search_listing(filter.as_ref(), &comparators).filter(|_| simple);
    // Full-text conditions are charged before any runs.
    let searches = match (&list_view, &search_view) {
        (Some(_), _) => 0,
        (None, Some(view)) if view.search.terms.is_empty() => 0,
        // A negative position learns the total first: a second query.
        (None, Some(_)) => 1 + usize::from(request.position < 0),
        (None, None) => distinct_searches(filter.as_ref()),
    };
    ctx.budget.charge_searches(searches)?;
    // Load.
    let states = ctx.jmap.store.states(ctx.account.id).await?;
    let state = states.email;
    let work = AtomicU64::new(ctx.budget.work_left);
    let page = match (list_view, search_view) {
        (Some((mailbox, ascending)), _) => {
            kept_list_view_page(ctx, &states, mailbox, ascending, request.position, limit).await
        }
        (None, Some(view)) => search_view_page(ctx, view, request.position, limit).await,
        (None, None) => {
            evaluated_page(ctx, filter.as_ref(), &comparators, &request, limit, &work).await
        }
    };
    // Work spent is spent, whether the call is answered or not.
    ctx.budget.work_left = work.into_inner();
    let page = page?;
    // Render.
    let can_calculate =
        can_calculate_changes(filter.as_ref(), &comparators, request.collapse_threads);
    Ok(query_response(
        &request,
        state,
        page,
        can_calculate,
        max_limit,
    ))
}

/// The list view's page from the account's kept pages
/// ([`super::kept_pages`]) at `states`, else read and kept.
async fn kept_list_view_page(
    ctx: &CallContext<'_>,
    states: &crate::store::States,
    mailbox: i64,
    ascending: bool,
    position: i64,
    limit: i64,
) -> Result<Page, MethodError> {
    let key = (ctx.account.id, mailbox, ascending, position, limit);
    if let Some(page) = ctx.jmap.pages.get(&key, states).await {
        return Ok(page);
    }
    let page = list_view_page(ctx, mailbox, ascending, position, limit).await?;
    let after = ctx.jmap.store.states(ctx.account.id).await?;
    ctx.jmap.pages.keep(key, states, &after, &page).await;
    Ok(page)
}

/// The Email/query response for a page read at `state`.
fn query_response(
    request: &QueryRequest,
    state: i64,
    page: Page,
    can_calculate_changes: bool,
    max_limit: u64,
) -> Value {
    let mut response = json!({
        "accountId": request.account_id,
        "queryState": state.to_string(),
        "canCalculateChanges": can_calculate_changes,
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
    response
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
    work: &AtomicU64,
) -> Result<Page, MethodError> {
    let mut rows = matching_rows(ctx, filter, comparators, work).await?;
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
    // The page and the count run on two connections at once.
    let slots = search_slots(ctx, 2).await;
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
    drop(slots);
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

/// The queries of the full-text index `filter` runs: its distinct `text`
/// and `body` conditions that hold a word.
pub(crate) fn distinct_searches(filter: Option<&Filter>) -> usize {
    filter
        .map(Filter::searches)
        .unwrap_or_default()
        .into_iter()
        .filter(|search| !search.terms.is_empty())
        .collect::<HashSet<_>>()
        .len()
}

/// `connections` of the account's [`crate::jmap::Jmap::searches`] slots
/// (at most all of them), waited for: held while a full-text query runs.
async fn search_slots(
    ctx: &CallContext<'_>,
    connections: usize,
) -> Option<tokio::sync::OwnedSemaphorePermit> {
    let wanted = connections.min(search::MAX_SEARCHES_PER_ACCOUNT) as u32;
    // The semaphore is never closed; were it, the query would run unslotted.
    ctx.jmap
        .searches
        .of(ctx.account.id)
        .acquire_many_owned(wanted)
        .await
        .ok()
}

/// Every email matching `filter`, sorted (the general path, before any
/// thread collapsing). Text conditions spend `work` (the request's render
/// work left; [`crate::mail::query`] gives the units).
pub(crate) async fn matching_rows(
    ctx: &CallContext<'_>,
    filter: Option<&Filter>,
    comparators: &[Comparator],
    work: &AtomicU64,
) -> Result<Vec<QueryRow>, MethodError> {
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
            let slots = search_slots(ctx, 1).await;
            let ids = store.search_ids(ctx.account.id, search).await?;
            drop(slots);
            facts
                .search
                .insert(search.clone(), ids.into_iter().collect());
        }
    }
    // A full-text condition all matches meet names every candidate: read
    // only those rows, not the whole account.
    let narrowed = filter.and_then(Filter::required_search).is_some();
    let rows = match filter.and_then(Filter::required_search) {
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
    filter_and_sort(ctx, filter, comparators, rows, facts, work).await
}

/// Emails a `header` filter is evaluated over at once: their header blocks
/// are read and held together, then dropped.
const HEADER_CHUNK: usize = 1000;

/// `rows` that match `filter`, sorted. On the work pool (as Email/get's
/// heavy renders) when the filter reads header blocks or emails ×
/// (conditions and operators + comparators) passes [`INLINE_RENDER_WORK`],
/// else in place; a `header` filter [`HEADER_CHUNK`] emails at a time.
/// `requestTooLarge` when the text conditions would pass `work`.
async fn filter_and_sort(
    ctx: &CallContext<'_>,
    filter: Option<&Filter>,
    comparators: &[Comparator],
    mut rows: Vec<QueryRow>,
    mut facts: QueryFacts,
    work: &AtomicU64,
) -> Result<Vec<QueryRow>, MethodError> {
    let (jmap, account) = (ctx.jmap, ctx.account.id);
    let headers = filter.is_some_and(Filter::needs_headers);
    let steps = filter.map_or(0, Filter::nodes) + comparators.len();
    let heavy = headers || (rows.len() as u64).saturating_mul(steps as u64) > INLINE_RENDER_WORK;
    if let Some(filter) = filter {
        let filter = Arc::new(filter.clone());
        let chunk = match headers {
            true => HEADER_CHUNK,
            false => rows.len().max(1),
        };
        let mut rest = rows;
        let mut kept = Vec::new();
        while !rest.is_empty() {
            let tail = rest.split_off(chunk.min(rest.len()));
            let rows = std::mem::replace(&mut rest, tail);
            let blocks = match headers {
                true => {
                    let ids: Vec<i64> = rows.iter().map(|row| row.meta.id).collect();
                    jmap.store.header_blocks(account, &ids).await?
                }
                false => Vec::new(),
            };
            let job = FilterJob {
                filter: filter.clone(),
                rows,
                blocks,
                facts,
                work_left: work.load(Ordering::Relaxed),
            };
            let done = match heavy {
                true => jmap.work.run(account, move || job.run()).await,
                false => job.run(),
            };
            work.store(done.work_left, Ordering::Relaxed);
            facts = done.facts;
            kept.extend(done.kept.ok_or_else(|| over_filter_work(&jmap.limits))?);
        }
        rows = kept;
    }
    let comparators = comparators.to_vec();
    let sort = move || {
        query::sort(&mut rows, &comparators, &facts.threads);
        rows
    };
    Ok(match heavy {
        true => jmap.work.run(account, sort).await,
        false => sort(),
    })
}

/// One evaluation of a filter over some emails, on the work pool or in place.
struct FilterJob {
    filter: Arc<Filter>,
    rows: Vec<QueryRow>,
    /// The header blocks of `rows`, for a `header` condition (else empty).
    blocks: Vec<(i64, Vec<u8>)>,
    facts: QueryFacts,
    /// Render work units the request has left.
    work_left: u64,
}

/// What a [`FilterJob`] gives back.
struct Filtered {
    /// The rows that match, or `None` when the work ran out.
    kept: Option<Vec<QueryRow>>,
    /// The facts it was given, without the header fields.
    facts: QueryFacts,
    work_left: u64,
}

impl FilterJob {
    fn run(self) -> Filtered {
        let FilterJob {
            filter,
            mut rows,
            blocks,
            mut facts,
            work_left,
        } = self;
        facts.headers = blocks
            .into_iter()
            .map(|(id, block)| (id, HeaderFields::parse(block)))
            .collect();
        let meter = WorkMeter::new(work_left);
        let mut spent = false;
        rows.retain(|row| {
            !spent
                && query::matches(&filter, row, &facts, &meter).unwrap_or_else(|_| {
                    spent = true;
                    false
                })
        });
        facts.headers = HashMap::new();
        Filtered {
            kept: (!spent).then_some(rows),
            facts,
            work_left: meter.left(),
        }
    }
}

/// `requestTooLarge` for a filter whose text conditions would pass the
/// request's render work.
fn over_filter_work(limits: &Limits) -> MethodError {
    MethodError::OverBudget(format!(
        "evaluating this filter would pass the request's {} units of work (one per from, \
         to, cc, bcc or subject condition per email; one per header condition per email and \
         per field of that name); narrow it (inMailbox, before, after) or simplify it",
        limits.max_render_work
    ))
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

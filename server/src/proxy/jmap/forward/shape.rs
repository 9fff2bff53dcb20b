//! What a call through a JMAP proxy may be answered with here: the
//! properties, filters and sorts the mirror holds, the shape of a call
//! (what its answer depends on besides ids and paging), collapsed paging.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use crate::jmap::ids;
use crate::mail::property::EmailProperty;

/// Whether an Email property names body parts (`bodyStructure`,
/// `textBody`, `htmlBody`, `attachments`, `bodyValues`): answered by the
/// mirror only for an email whose upstream split it into the same parts
/// (its part map, kept at sync, then names each part's partId and blobId
/// as the upstream does: `mirror/apply.rs`).
pub(super) fn names_parts(name: &str) -> bool {
    use crate::mail::property::EmailProperty::*;
    matches!(
        EmailProperty::parse(name),
        Some(BodyStructure | TextBody | HtmlBody | Attachments | BodyValues)
    )
}

/// Whether the mirror answers an Email property as the upstream would:
/// every property of RFC 8621 §4.1 (`mail::property`), from what it stores
/// of each email and what Fastview computes from the same octets, the body
/// ones for mail split alike ([`names_parts`]). An unknown or malformed
/// name is the upstream's to refuse.
pub fn local_property(name: &str) -> bool {
    EmailProperty::parse(name).is_some()
}

/// Whether a call of `method` may be answered from the mirror
/// (Email/queryChanges: when its `sinceQueryState` is one the proxy
/// minted, which never reaches the upstream).
pub fn may_answer(method: &str) -> bool {
    matches!(
        method,
        "Email/get" | "Mailbox/get" | "Thread/get" | "Email/query" | "Email/queryChanges"
    )
}

/// The Email/query filter conditions answered from the mirror: those on
/// what it holds as the upstream does (mailboxes, keywords, receivedAt,
/// size). Text and header conditions, whose matching rules are each
/// server's own, and the thread keyword ones (the upstream's threads are
/// not Fastview's) are forwarded.
pub(super) const LOCAL_FILTER_CONDITIONS: [&str; 8] = [
    "inMailbox",
    "inMailboxOtherThan",
    "before",
    "after",
    "minSize",
    "maxSize",
    "hasKeyword",
    "notKeyword",
];

/// The Email/query sort properties answered from the mirror.
pub(super) const LOCAL_SORT_PROPERTIES: [&str; 3] = ["receivedAt", "size", "hasKeyword"];

/// Whether an Email/query's arguments are all ones the mirror answers
/// (its sort by [`LOCAL_SORT_PROPERTIES`]), and then whether it collapses
/// threads; `None` otherwise. Only `true` collapses here; anything but a
/// boolean (`null` included) is the upstream's to judge.
pub(super) fn query_collapses_here(arguments: &Map<String, Value>) -> Option<bool> {
    let known = arguments.keys().all(|key| {
        matches!(
            key.as_str(),
            "accountId"
                | "filter"
                | "sort"
                | "position"
                | "anchor"
                | "anchorOffset"
                | "limit"
                | "calculateTotal"
                | "collapseThreads"
        )
    });
    let collapsed = match arguments.get("collapseThreads") {
        None | Some(Value::Bool(false)) => false,
        Some(Value::Bool(true)) => true,
        Some(_) => return None,
    };
    let sorted_here = match arguments.get("sort") {
        None | Some(Value::Null) => true,
        Some(Value::Array(sort)) => sort.iter().all(|comparator| {
            comparator
                .get("property")
                .and_then(Value::as_str)
                .is_some_and(|p| LOCAL_SORT_PROPERTIES.contains(&p))
        }),
        Some(_) => false,
    };
    (known && sorted_here).then_some(collapsed)
}

/// The most pages of `maxObjectsInGet` matches a collapsed Email/query
/// reads from the mirror (10,000 emails at the default 1,000): each page is
/// a local query over every match, and the account's calls are held off
/// the mirror meanwhile; a bigger one is forwarded.
pub(super) const MAX_COLLAPSED_PAGES: u64 = 10;

/// The shape of an Email/query or Thread/get call: what its answer depends
/// on besides the account's emails and the ids or page asked (the filter
/// and sort of a query, the properties of a Thread/get), as text. `None`
/// for another method or when one of those is a result reference.
pub(super) fn shape(method: &str, arguments: &Map<String, Value>) -> Option<String> {
    let of = |name: &str| arguments.get(name).cloned().unwrap_or(Value::Null);
    let referenced = |names: &[&str]| {
        names
            .iter()
            .any(|name| arguments.contains_key(&format!("#{name}")))
    };
    // Besides the filter and sort: the limit and whether a total is asked
    // (servers cap and report them their own way), and whether the page
    // is found by anchor or counted from the end.
    let paging = [
        of("limit"),
        of("calculateTotal"),
        Value::Bool(arguments.contains_key("anchor")),
        Value::Bool(of("position").as_i64().is_some_and(|p| p < 0)),
    ];
    match method {
        "Email/query"
            if !referenced(&[
                "filter",
                "sort",
                "collapseThreads",
                "limit",
                "calculateTotal",
                "anchor",
                "position",
            ]) =>
        {
            Some(format!(
                "Email/query {}",
                json!([of("filter"), of("sort"), of("collapseThreads"), paging])
            ))
        }
        "Thread/get" if !referenced(&["properties"]) => {
            Some(format!("Thread/get {}", of("properties")))
        }
        _ => None,
    }
}

/// How a Thread/get lists a thread whose id is asked more than once.
/// RFC 8620 §5.1 says once; Cyrus 3.6 lists it each time it is asked
/// (and so does its Email/get). Which one an upstream does is learnt as
/// a shape is ([`Listing::keyed`]), so that one request with a repeated
/// id neither marks its shape forwarded for good nor is answered unlike
/// the upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Listing {
    /// Each thread once, where first asked.
    Once,
    /// One entry per id asked, repeats included, in the order asked.
    AsAsked,
}

impl Listing {
    /// The keys the verdicts of a Thread/get of `shape` are remembered by,
    /// each with the listing it stands for: the shape itself when no id
    /// repeats (both listings are then the same answer), else one key per
    /// listing.
    pub(super) fn keyed(shape: &str, repeated: bool) -> Vec<(Listing, String)> {
        if !repeated {
            return vec![(Listing::Once, shape.to_string())];
        }
        vec![
            (Listing::Once, format!("{shape} repeated ids listed once")),
            (
                Listing::AsAsked,
                format!("{shape} repeated ids listed as asked"),
            ),
        ]
    }
}

/// Whether a call's `ids` name one id more than once.
pub(super) fn ids_repeat(arguments: &Map<String, Value>) -> bool {
    let Some(Value::Array(ids)) = arguments.get("ids") else {
        return false;
    };
    let mut seen = std::collections::HashSet::new();
    ids.iter().any(|id| !seen.insert(id.as_str()))
}

/// What of an Email/query answer is compared with the mirror's when the
/// upstream's `queryState` is not its Email state (so the two states never
/// match): the answer without `queryState`, with only the properties of
/// RFC 8620 §5.5 (`accountId`, `position`, `ids`, `canCalculateChanges`,
/// `limit`; `total` only when `calculateTotal` was asked). What an
/// upstream adds besides (Cyrus echoes `filter`, `sort` and
/// `collapseThreads`, and gives `total` unasked) is not compared, and an
/// answer from the mirror does not carry it.
pub(super) fn comparable_query(answer: &Value, arguments: &Map<String, Value>) -> Value {
    let mut names = vec![
        "accountId",
        "position",
        "ids",
        "canCalculateChanges",
        "limit",
    ];
    if arguments.get("calculateTotal") == Some(&Value::Bool(true)) {
        names.push("total");
    }
    Value::Object(
        names
            .into_iter()
            .filter_map(|name| Some((name.to_string(), answer.get(name)?.clone())))
            .collect(),
    )
}

/// The paging arguments of an Email/query answered with collapsed threads
/// (RFC 8620 §5.5), each exactly of its type: `None` from
/// [`CollapsedPaging::of`] for anything else (`null` included), which the
/// upstream is left to judge.
pub(super) struct CollapsedPaging {
    position: i64,
    anchor: Option<String>,
    anchor_offset: i64,
    limit: Option<u64>,
    calculate_total: bool,
}

impl CollapsedPaging {
    pub(super) fn of(arguments: &Map<String, Value>) -> Option<Self> {
        let integer = |name: &str| match arguments.get(name) {
            None => Some(None),
            Some(value) => value.as_i64().map(Some),
        };
        Some(Self {
            position: integer("position")?.unwrap_or(0),
            anchor: match arguments.get("anchor") {
                None => None,
                Some(anchor) => Some(anchor.as_str()?.to_string()),
            },
            anchor_offset: integer("anchorOffset")?.unwrap_or(0),
            limit: match arguments.get("limit") {
                None => None,
                Some(limit) => Some(limit.as_u64()?),
            },
            calculate_total: match arguments.get("calculateTotal") {
                None => false,
                Some(total) => total.as_bool()?,
            },
        })
    }

    /// The page's size: `limit` clamped to `max_limit`, which is also the
    /// size without one (RFC 8620 §5.5).
    pub(super) fn limit_within(&self, max_limit: u64) -> u64 {
        self.limit.unwrap_or(max_limit).min(max_limit)
    }

    /// How many collapsed matches, from the first, the page needs; `None`
    /// when every one is (a total, an anchor, a position from the end).
    pub(super) fn needs(&self, max_limit: u64) -> Option<usize> {
        let limit = self.limit_within(max_limit);
        (!self.calculate_total && self.anchor.is_none() && self.position >= 0)
            .then(|| (self.position as u64).saturating_add(limit) as usize)
    }

    /// The answer over `collapsed` (the matches read, one per thread, in
    /// order: upstream ids; every one unless [`Self::needs`] asked fewer),
    /// paged as Fastview pages any query (`limit` clamped to
    /// `maxObjectsInGet` and then returned, `canCalculateChanges` false for
    /// collapsed threads); `accountId` and `queryState` are the caller's to
    /// set. `None` when the anchor is not among the matches (the upstream
    /// answers `anchorNotFound`).
    pub(super) fn answer(&self, collapsed: Vec<String>, max_limit: u64) -> Option<Value> {
        let limit = self.limit_within(max_limit) as usize;
        let anchor = match &self.anchor {
            None => None,
            Some(anchor) => Some((
                collapsed.iter().position(|id| id == anchor)?,
                self.anchor_offset,
            )),
        };
        let total = collapsed.len() as i64;
        let start = crate::mail::query::page_start(total, self.position, anchor);
        let ids: Vec<Value> = collapsed
            .into_iter()
            .skip(start as usize)
            .take(limit)
            .map(Value::String)
            .collect();
        let mut answer = json!({
            "accountId": Value::Null,
            "queryState": Value::Null,
            "canCalculateChanges": false,
            "position": start,
        });
        answer["ids"] = Value::Array(ids);
        if self.calculate_total {
            answer["total"] = json!(total);
        }
        if self.limit.is_none_or(|l| l > max_limit) {
            answer["limit"] = json!(max_limit);
        }
        Some(answer)
    }
}

/// A query's filter with upstream Mailbox ids made local ones, or `None`
/// when it has a condition the mirror does not answer
/// ([`LOCAL_FILTER_CONDITIONS`]) or a mailbox it does not map.
pub(super) fn local_filter(filter: &Value, local_of: &HashMap<&str, i64>) -> Option<Value> {
    let object = filter.as_object()?;
    if let Some(operator) = object.get("operator") {
        let conditions = object.get("conditions")?.as_array()?;
        let conditions: Option<Vec<Value>> = conditions
            .iter()
            .map(|c| local_filter(c, local_of))
            .collect();
        return Some(json!({"operator": operator, "conditions": conditions?}));
    }
    let mut local = Map::new();
    for (name, value) in object {
        if !LOCAL_FILTER_CONDITIONS.contains(&name.as_str()) {
            return None;
        }
        let value = match name.as_str() {
            "inMailbox" => Value::String(ids::mailbox_id(*local_of.get(value.as_str()?)?)),
            "inMailboxOtherThan" => value
                .as_array()?
                .iter()
                .map(|m| Some(Value::String(ids::mailbox_id(*local_of.get(m.as_str()?)?))))
                .collect::<Option<Vec<Value>>>()?
                .into(),
            _ => value.clone(),
        };
        local.insert(name.clone(), value);
    }
    Some(Value::Object(local))
}

/// Whether a method may change what the mirror holds: `/set`, `/import`,
/// `/copy` (EmailSubmission/set's implicit Email/set included), and
/// MDN/send (RFC 9007: its `onSuccessUpdateEmail`).
pub fn is_write(method: &str) -> bool {
    method.ends_with("/set")
        || method.ends_with("/import")
        || method.ends_with("/copy")
        || method == "MDN/send"
}

/// Whether an Email/get names its properties, all of them ones the mirror
/// answers ([`local_property`]; without `properties` the defaults include
/// the body ones).
pub(super) fn asks_local_properties(arguments: &Map<String, Value>) -> bool {
    arguments
        .get("properties")
        .and_then(Value::as_array)
        .is_some_and(|properties| {
            properties
                .iter()
                .all(|p| p.as_str().is_some_and(local_property))
        })
}

/// The call ids a call's result references name.
pub(super) fn references(arguments: &Map<String, Value>) -> Vec<String> {
    arguments
        .iter()
        .filter(|(key, _)| key.starts_with('#'))
        .filter_map(|(_, reference)| reference.get("resultOf")?.as_str().map(str::to_string))
        .collect()
}

//! A request through a JMAP upstream (issue 19, ADR 0009): each call
//! answered from the local mirror where it holds what the call asks, else
//! forwarded, in the client's order.
//!
//! - **Answered here**: Email/get of ids the mirror maps, for properties it
//!   holds as the upstream would give them (metadata, header fields and
//!   their parsed forms, `preview`, `hasAttachment`; [`local_property`]),
//!   on an account whose mirror has finished a sync. The call is run on the
//!   local account by the ordinary dispatcher and its answer translated:
//!   the upstream's accountId, Email ids, threadIds, blobIds and Mailbox
//!   ids, and as `state` the upstream Email state the mirror is at.
//!   Anything else about such a call (an id the mirror does not map yet, a
//!   body property, whose part ids are the upstream's own) forwards it.
//! - **Answered here once verified**: Thread/get and Email/query (filters
//!   on mailboxes, keywords, dates and sizes; sorted by receivedAt, size or
//!   a keyword; `collapseThreads` by the upstream's threadIds, which the
//!   mirror keeps, never by Fastview's own threads), whose answers depend on every email
//!   of the account: only while the mirror's census says it holds them all
//!   at its state, and only in a shape (the query's filter and sort, the
//!   Thread/get's properties) whose first forwarded answer at the mirror's
//!   state was exactly what the mirror would have answered (ids, order,
//!   total, state strings). Another server's `queryState`, tie order or
//!   filter semantics that differ from Fastview's keep that shape
//!   forwarded.
//! - **Forwarded**: consecutive forwarded calls go as one request, with the
//!   `createdIds` so far, so the upstream resolves references among them
//!   and creation ids across batches; a reference to an earlier batch or to
//!   a call answered here is resolved here first.
//! - **Reads see writes**: after a batch with a `/set`, `/import` or
//!   `/copy`, the mirrors of the accounts it named catch up with the
//!   upstream before the next call is answered.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use reqwest::header::HeaderValue;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use tokio::sync::OwnedRwLockReadGuard;

use crate::jmap::Jmap;
use crate::jmap::budget::RequestBudget;
use crate::jmap::dispatch;
use crate::jmap::ids;
use crate::jmap::reference::{self, ReferenceError};
use crate::jmap::request::{
    Arguments, CAPABILITY_CORE, CAPABILITY_MAIL, CallArguments, Invocation, Request, response_json,
    write_value,
};
use crate::mail::property::EmailProperty;
use crate::proxy::jmap::mirror::{Census, Mirror, MirrorState};
use crate::proxy::jmap::{JmapUpstream, UpstreamSession};
use crate::proxy::upstream::UpstreamError;

/// Whether an Email property names body parts (`bodyStructure`,
/// `textBody`, `htmlBody`, `attachments`, `bodyValues`): answered by the
/// mirror only for an email whose upstream split it into the same partIds
/// (its part blobIds are then the upstream's, kept at sync).
fn names_parts(name: &str) -> bool {
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

/// Whether a call of `method` may be answered from the mirror.
pub fn may_answer(method: &str) -> bool {
    matches!(
        method,
        "Email/get" | "Mailbox/get" | "Thread/get" | "Email/query"
    )
}

/// The Email/query filter conditions answered from the mirror: those on
/// what it holds as the upstream does (mailboxes, keywords, receivedAt,
/// size). Text and header conditions, whose matching rules are each
/// server's own, and the thread keyword ones (the upstream's threads are
/// not Fastview's) are forwarded.
const LOCAL_FILTER_CONDITIONS: [&str; 8] = [
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
const LOCAL_SORT_PROPERTIES: [&str; 3] = ["receivedAt", "size", "hasKeyword"];

/// The most pages of `maxObjectsInGet` matches a collapsed Email/query
/// reads from the mirror (10,000 emails at the default 1,000): each page is
/// a local query over every match, and the account's calls are held off
/// the mirror meanwhile; a bigger one is forwarded.
const MAX_COLLAPSED_PAGES: u64 = 10;

/// The shape of an Email/query or Thread/get call: what its answer depends
/// on besides the account's emails and the ids or page asked (the filter
/// and sort of a query, the properties of a Thread/get), as text. `None`
/// for another method or when one of those is a result reference.
fn shape(method: &str, arguments: &Map<String, Value>) -> Option<String> {
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

/// The paging arguments of an Email/query answered with collapsed threads
/// (RFC 8620 §5.5), each exactly of its type: `None` from
/// [`CollapsedPaging::of`] for anything else (`null` included), which the
/// upstream is left to judge.
struct CollapsedPaging {
    position: i64,
    anchor: Option<String>,
    anchor_offset: i64,
    limit: Option<u64>,
    calculate_total: bool,
}

impl CollapsedPaging {
    fn of(arguments: &Map<String, Value>) -> Option<Self> {
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
    fn limit_within(&self, max_limit: u64) -> u64 {
        self.limit.unwrap_or(max_limit).min(max_limit)
    }

    /// How many collapsed matches, from the first, the page needs; `None`
    /// when every one is (a total, an anchor, a position from the end).
    fn needs(&self, max_limit: u64) -> Option<usize> {
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
    fn answer(&self, collapsed: Vec<String>, max_limit: u64) -> Option<Value> {
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
fn local_filter(filter: &Value, local_of: &HashMap<&str, i64>) -> Option<Value> {
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

/// What a proxied request needs: the local side, the mirror and the
/// upstream with the client's session and credential.
pub struct Proxied<'a> {
    pub jmap: &'a Jmap,
    pub mirror: &'a Arc<Mirror>,
    pub upstream: &'a JmapUpstream,
    pub session: &'a UpstreamSession,
    pub authorization: &'a HeaderValue,
}

/// Why a proxied request has no Response object of its own.
#[derive(Debug)]
pub enum ProxyError {
    /// The upstream answered a batch with something other than 200: its
    /// status and body, for the client as they are.
    Answered(u16, bytes::Bytes),
    /// The upstream (or the mirror's store) failed.
    Upstream(UpstreamError),
}

/// A request's answer through the proxy: the Response object as JSON
/// (RFC 8620 §3.4), and its `sessionState`.
pub struct ProxiedResponse {
    pub body: Vec<u8>,
    pub session_state: Value,
}

impl From<UpstreamError> for ProxyError {
    fn from(error: UpstreamError) -> Self {
        Self::Upstream(error)
    }
}

impl Proxied<'_> {
    /// Runs `request` (module doc); the Response object.
    pub async fn handle(&self, request: Request) -> Result<ProxiedResponse, ProxyError> {
        let mail_enabled = request.using.iter().any(|c| c == CAPABILITY_MAIL);
        let mut run = Run {
            proxied: self,
            using: request.using,
            email_states: HashMap::new(),
            mailbox_states: HashMap::new(),
            thread_states: HashMap::new(),
            responses: Vec::new(),
            pending: Vec::new(),
            created_ids: request.created_ids.clone().unwrap_or_default(),
            session_state: None,
            budget: RequestBudget::new(&self.jmap.limits),
        };
        for Invocation(method, mut arguments, call_id) in request.method_calls {
            let referenced = references(&arguments);
            let outside = referenced
                .iter()
                .any(|id| !run.pending.iter().any(|call| &call.2 == id));
            // A call the mirror may answer is answered here: what was
            // forwarded before it goes first.
            let local_candidate = mail_enabled
                && match method.as_str() {
                    "Email/get" => asks_local_properties(&arguments),
                    "Mailbox/get" => true,
                    "Thread/get" | "Email/query" => self.verified(&method, &arguments),
                    _ => false,
                };
            if (outside || local_candidate) && !run.pending.is_empty() {
                run.flush().await?;
            }
            if !referenced.is_empty() && run.pending.is_empty() {
                match reference::resolve(&mut arguments, &run.responses, &mut run.budget) {
                    Ok(()) => {}
                    Err(ReferenceError::Method(error)) => {
                        let answer = crate::jmap::call::error_response(&method, &call_id, &error);
                        run.responses.push(("error".into(), answer.into(), call_id));
                        continue;
                    }
                    Err(ReferenceError::OverBudget(_)) => {
                        let answer = json!({"type": "requestTooLarge"});
                        run.responses.push(("error".into(), answer.into(), call_id));
                        continue;
                    }
                }
            }
            let answer = match method.as_str() {
                "Email/get" if local_candidate => self
                    .email_get(&arguments, &call_id, &run.email_states)
                    .await?
                    .map(|(text, state)| {
                        if let Some(account) = arguments.get("accountId").and_then(Value::as_str) {
                            run.note(&method, account, &state);
                        }
                        Arguments::text(text, None)
                    }),
                "Mailbox/get" if local_candidate => self
                    .mailbox_get(&arguments, &run.mailbox_states)
                    .map(|answer| run.answered(&method, answer)),
                "Thread/get" if local_candidate => self
                    .thread_get(&arguments, &run.email_states, &run.thread_states)
                    .await?
                    .map(|answer| run.answered(&method, answer)),
                "Email/query" if local_candidate => self
                    .email_query(&arguments, &call_id, &run.email_states)
                    .await?
                    .map(|answer| run.answered(&method, answer)),
                _ => None,
            };
            // Later calls of the request are answered at the state a
            // local answer showed (noted above), or forwarded.
            if let Some(answer) = answer {
                run.responses.push((method, answer, call_id));
                continue;
            }
            run.pending.push(Invocation(method, arguments, call_id));
        }
        if !run.pending.is_empty() {
            run.flush().await?;
        }
        let session_state = run
            .session_state
            .or_else(|| self.session.object.get("state").cloned())
            .unwrap_or(Value::String(String::new()));
        // Written as Fastview writes its own Response, each answer's text
        // copied in; createdIds in order, as a map of them is written.
        let created = request.created_ids.is_some().then(|| {
            run.created_ids
                .iter()
                .collect::<std::collections::BTreeMap<_, _>>()
        });
        let body = response_json(&run.responses, created.as_ref(), &session_state);
        Ok(ProxiedResponse {
            body,
            session_state,
        })
    }

    /// A Mailbox/get answered from the upstream's own answer as the
    /// mirror's last sync read it (every mailbox, every property, at its
    /// Mailbox state), or `None` when it cannot be: not the request's own
    /// personal account, a mirror not answered from, a Mailbox state a
    /// forwarded call of the request showed that is not the snapshot's, a
    /// property the upstream's objects do not have, or arguments of
    /// another shape (all the upstream's to answer).
    fn mailbox_get(
        &self,
        arguments: &Map<String, Value>,
        seen: &HashMap<String, String>,
    ) -> Option<Value> {
        let account_id = arguments.get("accountId")?.as_str()?;
        if !self.session.has_personal_account(account_id)
            || arguments
                .keys()
                .any(|key| !matches!(key.as_str(), "accountId" | "ids" | "properties"))
        {
            return None;
        }
        let snapshot = self.mirror.mailboxes(account_id)?;
        if seen
            .get(account_id)
            .is_some_and(|state| *state != snapshot.state)
        {
            return None;
        }
        let properties: Option<Vec<&str>> = match arguments.get("properties") {
            None | Some(Value::Null) => None,
            Some(Value::Array(names)) => {
                Some(names.iter().map(Value::as_str).collect::<Option<_>>()?)
            }
            Some(_) => return None,
        };
        let first = snapshot.list.first()?.as_object()?;
        if properties
            .as_ref()
            .is_some_and(|names| names.iter().any(|name| !first.contains_key(*name)))
        {
            return None;
        }
        let shaped = |mailbox: &Value| -> Value {
            match (&properties, mailbox.as_object()) {
                (Some(names), Some(object)) => Value::Object(
                    object
                        .iter()
                        .filter(|(key, _)| *key == "id" || names.contains(&key.as_str()))
                        .map(|(key, value)| (key.clone(), value.clone()))
                        .collect(),
                ),
                _ => mailbox.clone(),
            }
        };
        let (list, not_found): (Vec<Value>, Vec<Value>) = match arguments.get("ids") {
            None | Some(Value::Null) => (snapshot.list.iter().map(shaped).collect(), Vec::new()),
            Some(Value::Array(ids)) => {
                let mut list = Vec::new();
                let mut not_found = Vec::new();
                let mut seen_ids = HashSet::new();
                for id in ids {
                    let id = id.as_str()?;
                    if !seen_ids.insert(id) {
                        continue;
                    }
                    match snapshot.list.iter().find(|m| m["id"] == id) {
                        Some(mailbox) => list.push(shaped(mailbox)),
                        None => not_found.push(Value::String(id.into())),
                    }
                }
                (list, not_found)
            }
            Some(_) => return None,
        };
        // The lists moved in, not serialized again as `json!` would.
        let mut answer = json!({"accountId": account_id, "state": snapshot.state});
        answer["list"] = Value::Array(list);
        answer["notFound"] = Value::Array(not_found);
        Some(answer)
    }

    /// An Email/get answered from the mirror, or `None` when it cannot be
    /// (module doc). `seen`: the upstream Email state of each account that
    /// an earlier forwarded call of the request showed; a mirror not at it
    /// catches up first (or the call is forwarded), so a client that read
    /// `newState` from Email/changes reads the changes themselves here.
    async fn email_get(
        &self,
        arguments: &Map<String, Value>,
        call_id: &str,
        seen: &HashMap<String, String>,
    ) -> Result<Option<(String, String)>, UpstreamError> {
        let Some(account_id) = arguments.get("accountId").and_then(Value::as_str) else {
            return Ok(None);
        };
        // Only an account this credential's own session lists: the mirror
        // holds every user's accounts, the upstream decides who reads which.
        if !self.session.has_personal_account(account_id) {
            return Ok(None);
        }
        let Some(wanted) = arguments.get("ids").and_then(Value::as_array) else {
            return Ok(None);
        };
        let wanted: Option<Vec<&str>> = wanted.iter().map(Value::as_str).collect();
        let Some(wanted) = wanted else {
            return Ok(None);
        };
        if wanted.len() > self.session.max_objects_in_get {
            return Ok(None);
        }
        let Some((
            MirrorState {
                account: local_account,
                email_state,
                mailboxes,
                ..
            },
            _held,
        )) = self.ready_at(account_id, seen).await
        else {
            return Ok(None);
        };
        let account = local_account.id;
        let store = &*self.jmap.store;
        let mapped = (self.mirror.names)
            .by_upstream(store, account, &wanted)
            .await?;
        let distinct: HashSet<&str> = wanted.iter().copied().collect();
        if mapped.len() < distinct.len() {
            return Ok(None);
        }
        let names_parts = arguments
            .get("properties")
            .and_then(Value::as_array)
            .is_some_and(|properties| {
                properties
                    .iter()
                    .any(|p| p.as_str().is_some_and(names_parts))
            });
        if names_parts && mapped.iter().any(|m| m.parts.is_none()) {
            return Ok(None);
        }
        let local_of: HashMap<&str, i64> = mapped
            .iter()
            .map(|m| (m.upstream_id.as_str(), m.email_id))
            .collect();
        let by_local: HashMap<String, &crate::store::MirroredEmail> = mapped
            .iter()
            .map(|m| (ids::email_id(m.email_id), &**m))
            .collect();
        let mut local_arguments = arguments.clone();
        local_arguments.insert("accountId".into(), Value::String(ids::account_id(account)));
        local_arguments.insert(
            "ids".into(),
            wanted
                .iter()
                .map(|id| Value::String(ids::email_id(local_of[id])))
                .collect(),
        );
        let Some(answer) = self
            .local_answer(&local_account, "Email/get", local_arguments, call_id)
            .await
        else {
            return Ok(None);
        };
        let translate = Translation {
            emails: &by_local,
            mailboxes: &mailboxes,
        };
        // Text we wrote always translates; should it not, the upstream
        // answers.
        Ok(translate
            .answer(&answer.json(), account_id, &email_state)
            .map(|text| (text, email_state)))
    }
}

impl Proxied<'_> {
    /// The mirror of upstream account `account_id` when it may answer (
    /// [`Mirror::ready`]), brought first to the upstream Email state an
    /// earlier forwarded call of the request showed (`seen`), so a client
    /// that read `newState` from Email/changes reads the changes here.
    ///
    /// Returned with the account's sync lock held ([`Mirror::hold`]): the
    /// answer reads the mirror as of its state. `None` while a sync runs.
    async fn ready_at(
        &self,
        account_id: &str,
        seen: &HashMap<String, String>,
    ) -> Option<(MirrorState, OwnedRwLockReadGuard<()>)> {
        if let Some(state) = seen.get(account_id)
            && self
                .mirror
                .ready(account_id)
                .is_some_and(|ready| ready.email_state != *state)
            && !self
                .mirror
                .reach(self.session, self.authorization, account_id, state)
                .await
        {
            return None;
        }
        let held = self.mirror.hold(account_id)?;
        let ready = self.mirror.ready(account_id)?;
        if seen
            .get(account_id)
            .is_some_and(|state| *state != ready.email_state)
        {
            return None;
        }
        Some((ready, held))
    }

    /// Runs one call of `method` on the local account; its arguments as a
    /// value when it answered with `method` (not an error).
    async fn local_call(
        &self,
        account: &crate::store::Account,
        method: &str,
        arguments: Map<String, Value>,
        call_id: &str,
    ) -> Option<Value> {
        self.local_answer(account, method, arguments, call_id)
            .await
            .map(Arguments::into_value)
    }

    /// [`Proxied::local_call`]'s arguments as the local call made them
    /// (an Email/get's JSON text as it was written).
    async fn local_answer(
        &self,
        account: &crate::store::Account,
        method: &str,
        arguments: Map<String, Value>,
        call_id: &str,
    ) -> Option<Arguments> {
        let request = Request {
            using: vec![CAPABILITY_CORE.into(), CAPABILITY_MAIL.into()],
            method_calls: vec![Invocation(
                method.into(),
                CallArguments::Map(arguments),
                call_id.into(),
            )],
            created_ids: None,
        };
        let response = dispatch::handle(self.jmap, account, request, "")
            .await
            .ok()?;
        let (name, answer, _) = response.method_responses.into_iter().next()?;
        (name == method).then_some(answer)
    }

    /// Whether a call of `method` has a shape the mirror answered as the
    /// upstream did, on a personal account of the session.
    fn verified(&self, method: &str, arguments: &Map<String, Value>) -> bool {
        let Some(account_id) = arguments.get("accountId").and_then(Value::as_str) else {
            return false;
        };
        self.session.has_personal_account(account_id)
            && shape(method, arguments)
                .is_some_and(|shape| self.mirror.verified(account_id, &shape) == Some(true))
    }

    /// The mirror whose census says it holds every upstream email of
    /// `account_id` at its state: what Thread/get and Email/query are
    /// answered from.
    async fn complete_at(
        &self,
        account_id: &str,
        seen: &HashMap<String, String>,
    ) -> Option<(MirrorState, Arc<Census>, OwnedRwLockReadGuard<()>)> {
        if !self.session.has_personal_account(account_id) {
            return None;
        }
        let (ready, held) = self.ready_at(account_id, seen).await?;
        let census = ready.census.clone().filter(|census| census.complete)?;
        Some((ready, census, held))
    }

    /// A Thread/get answered from the mirror (module doc), or `None`: a
    /// mirror that is not complete, a Thread state a forwarded call of the
    /// request showed that is not the census's, a thread id the mirror does
    /// not know, or arguments of another shape.
    async fn thread_get(
        &self,
        arguments: &Map<String, Value>,
        seen_emails: &HashMap<String, String>,
        seen_threads: &HashMap<String, String>,
    ) -> Result<Option<Value>, UpstreamError> {
        let Some(account_id) = arguments.get("accountId").and_then(Value::as_str) else {
            return Ok(None);
        };
        if arguments
            .keys()
            .any(|key| !matches!(key.as_str(), "accountId" | "ids" | "properties"))
        {
            return Ok(None);
        }
        let properties: Option<Vec<&str>> = match arguments.get("properties") {
            None | Some(Value::Null) => None,
            Some(Value::Array(names)) => {
                match names.iter().map(Value::as_str).collect::<Option<Vec<_>>>() {
                    Some(names) if names.iter().all(|n| matches!(*n, "id" | "emailIds")) => {
                        Some(names)
                    }
                    _ => return Ok(None),
                }
            }
            Some(_) => return Ok(None),
        };
        let Some(Value::Array(wanted)) = arguments.get("ids") else {
            return Ok(None);
        };
        let Some(wanted) = wanted.iter().map(Value::as_str).collect::<Option<Vec<_>>>() else {
            return Ok(None);
        };
        if wanted.len() > self.session.max_objects_in_get {
            return Ok(None);
        }
        let Some((ready, census, _held)) = self.complete_at(account_id, seen_emails).await else {
            return Ok(None);
        };
        if seen_threads
            .get(account_id)
            .is_some_and(|state| *state != census.thread_state)
        {
            return Ok(None);
        }
        let threads = self
            .jmap
            .store
            .mirror_threads(ready.account.id, &wanted)
            .await?;
        let mut distinct = HashSet::new();
        let mut list = Vec::new();
        for id in wanted {
            if !distinct.insert(id) {
                continue;
            }
            match threads.iter().find(|(thread, _)| thread == id) {
                Some((_, emails)) => {
                    let mut thread = Map::new();
                    thread.insert("id".into(), Value::String(id.into()));
                    if properties.as_ref().is_none_or(|p| p.contains(&"emailIds")) {
                        thread.insert("emailIds".into(), json!(emails));
                    }
                    list.push(Value::Object(thread));
                }
                // A thread the mirror does not know may be one whose
                // emails it has not stored yet: the upstream's to answer.
                None => return Ok(None),
            }
        }
        let mut answer = json!({"accountId": account_id, "state": census.thread_state,
            "notFound": []});
        answer["list"] = Value::Array(list);
        Ok(Some(answer))
    }

    /// An Email/query answered from the mirror (module doc), or `None`: a
    /// mirror that is not complete, a condition, sort or argument it does
    /// not answer, a mailbox or anchor it does not map.
    async fn email_query(
        &self,
        arguments: &Map<String, Value>,
        call_id: &str,
        seen: &HashMap<String, String>,
    ) -> Result<Option<Value>, UpstreamError> {
        let Some(account_id) = arguments.get("accountId").and_then(Value::as_str) else {
            return Ok(None);
        };
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
        // Only `true` collapses here; anything but a boolean (`null`
        // included) is the upstream's to judge.
        let collapsed = match arguments.get("collapseThreads") {
            None | Some(Value::Bool(false)) => false,
            Some(Value::Bool(true)) => true,
            Some(_) => return Ok(None),
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
        if !known || !sorted_here {
            return Ok(None);
        }
        let Some((ready, census, _held)) = self.complete_at(account_id, seen).await else {
            return Ok(None);
        };
        let local_of: HashMap<&str, i64> = ready
            .mailboxes
            .iter()
            .map(|(local, upstream)| (upstream.as_str(), *local))
            .collect();
        let mut local_arguments = arguments.clone();
        local_arguments.insert(
            "accountId".into(),
            Value::String(ids::account_id(ready.account.id)),
        );
        match arguments.get("filter") {
            None | Some(Value::Null) => {}
            Some(filter) => match local_filter(filter, &local_of) {
                Some(local) => {
                    local_arguments.insert("filter".into(), local);
                }
                None => return Ok(None),
            },
        }
        if collapsed {
            let Some(paging) = CollapsedPaging::of(arguments) else {
                return Ok(None);
            };
            let max_limit = self.jmap.limits.max_objects_in_get;
            let need = paging.needs(max_limit);
            let Some(collapsed) = self
                .collapsed_matches(&ready, local_arguments, call_id, need)
                .await?
            else {
                return Ok(None);
            };
            return Ok(paging.answer(collapsed, max_limit).map(|mut answer| {
                answer["accountId"] = Value::String(account_id.into());
                answer["queryState"] = Value::String(census.email_state.clone());
                answer
            }));
        }
        let store = &*self.jmap.store;
        let account = ready.account.id;
        let names = &self.mirror.names;
        if let Some(anchor) = arguments.get("anchor").and_then(Value::as_str) {
            let Some(mapped) = names.by_upstream(store, account, &[anchor]).await?.pop() else {
                return Ok(None);
            };
            local_arguments.insert(
                "anchor".into(),
                Value::String(ids::email_id(mapped.email_id)),
            );
        }
        let Some(mut answer) = self
            .local_call(&ready.account, "Email/query", local_arguments, call_id)
            .await
        else {
            return Ok(None);
        };
        let local_ids: Option<Vec<i64>> = answer["ids"]
            .as_array()
            .map(|list| {
                list.iter()
                    .map(|id| id.as_str().and_then(ids::parse_email_id))
                    .collect()
            })
            .unwrap_or_default();
        let Some(local_ids) = local_ids else {
            return Ok(None);
        };
        let mapped = names.by_local(store, account, &local_ids).await?;
        let upstream_of: HashMap<i64, &str> = mapped
            .iter()
            .map(|m| (m.email_id, m.upstream_id.as_str()))
            .collect();
        let Some(upstream_ids) = local_ids
            .iter()
            .map(|id| upstream_of.get(id).map(|&id| Value::String(id.into())))
            .collect::<Option<Vec<Value>>>()
        else {
            return Ok(None);
        };
        answer["ids"] = Value::Array(upstream_ids);
        answer["accountId"] = Value::String(account_id.into());
        answer["queryState"] = Value::String(census.email_state.clone());
        Ok(Some(answer))
    }

    /// Every match of an Email/query with `collapseThreads` (RFC 8621
    /// §4.4.3), as upstream Email ids in the query's order, one per
    /// **upstream** thread: the first of each. The local query (its filter
    /// and sort already local, threads not collapsed) is read a page of
    /// `maxObjectsInGet` at a time and each page's emails named by the
    /// mirror with their upstream ids and threadIds; Fastview's own threads
    /// need not be the upstream's, so they are never what collapses. Stops
    /// once `need` are in (when some), and gives up (`None`: forwarded)
    /// past [`MAX_COLLAPSED_PAGES`] pages, an email not mapped or a page
    /// that does not come.
    async fn collapsed_matches(
        &self,
        ready: &MirrorState,
        mut local_arguments: Map<String, Value>,
        call_id: &str,
        need: Option<usize>,
    ) -> Result<Option<Vec<String>>, UpstreamError> {
        for name in ["collapseThreads", "anchor", "anchorOffset"] {
            local_arguments.remove(name);
        }
        let page_size = self.jmap.limits.max_objects_in_get;
        local_arguments.insert("limit".into(), json!(page_size));
        local_arguments.insert("calculateTotal".into(), Value::Bool(true));
        let mut threads: HashSet<String> = HashSet::new();
        let mut collapsed = Vec::new();
        let mut position = 0u64;
        loop {
            local_arguments.insert("position".into(), json!(position));
            let Some(answer) = self
                .local_call(
                    &ready.account,
                    "Email/query",
                    local_arguments.clone(),
                    call_id,
                )
                .await
            else {
                return Ok(None);
            };
            let Some(local_ids) = answer["ids"].as_array().and_then(|list| {
                list.iter()
                    .map(|id| id.as_str().and_then(ids::parse_email_id))
                    .collect::<Option<Vec<i64>>>()
            }) else {
                return Ok(None);
            };
            let mirrored: HashMap<i64, Arc<crate::store::MirroredEmail>> = (self.mirror.names)
                .by_local(&*self.jmap.store, ready.account.id, &local_ids)
                .await?
                .into_iter()
                .map(|m| (m.email_id, m))
                .collect();
            for id in &local_ids {
                let Some(email) = mirrored.get(id) else {
                    return Ok(None);
                };
                if threads.insert(email.thread_id.clone()) {
                    collapsed.push(email.upstream_id.clone());
                }
            }
            position += local_ids.len() as u64;
            let total = answer["total"].as_u64().unwrap_or(0);
            if local_ids.is_empty()
                || position >= total
                || need.is_some_and(|need| collapsed.len() >= need)
            {
                return Ok(Some(collapsed));
            }
            // The account's calls are held off the mirror while it is read:
            // a mailbox past MAX_COLLAPSED_PAGES pages is the upstream's.
            if position >= MAX_COLLAPSED_PAGES * page_size {
                return Ok(None);
            }
        }
    }

    /// Compares the mirror's answer to a forwarded Thread/get or
    /// Email/query with the upstream's `answer`, when the mirror could have
    /// answered it at the same state, and records the shape as answered
    /// alike or not ([`Mirror::verify`]).
    async fn compare(&self, call: &Invocation, answer: &Value) {
        let Invocation(method, arguments, call_id) = call;
        let Some(account_id) = arguments.get("accountId").and_then(Value::as_str) else {
            return;
        };
        let Some(shape) = shape(method, arguments) else {
            return;
        };
        if self.mirror.verified(account_id, &shape).is_some() || !self.mirror.may_verify(account_id)
        {
            return;
        }
        let Some(census) = self.mirror.ready(account_id).and_then(|ready| ready.census) else {
            return;
        };
        // Only an answer at the mirror's state, and one that shows an
        // order: at least two emails listed, or a thread of two.
        let (state, shown) = match method.as_str() {
            "Thread/get" => (
                &census.thread_state,
                answer["list"].as_array().is_some_and(|threads| {
                    threads
                        .iter()
                        .any(|t| t["emailIds"].as_array().is_some_and(|e| e.len() >= 2))
                }),
            ),
            "Email/query" => (
                &census.email_state,
                answer["ids"].as_array().is_some_and(|ids| ids.len() >= 2),
            ),
            _ => return,
        };
        let upstream_state = answer
            .get("state")
            .or_else(|| answer.get("queryState"))
            .and_then(Value::as_str);
        if upstream_state != Some(state.as_str()) || !shown {
            return;
        }
        let none = HashMap::new();
        let local = match method.as_str() {
            "Thread/get" => self.thread_get(arguments, &none, &none).await,
            _ => self.email_query(arguments, call_id, &none).await,
        };
        if let Ok(Some(local)) = local {
            self.mirror.verify(account_id, &shape, local == *answer);
        }
    }
}

/// Local names → the upstream's, for one Email/get answer.
struct Translation<'a> {
    emails: &'a HashMap<String, &'a crate::store::MirroredEmail>,
    /// Local mailbox row id → upstream Mailbox id.
    mailboxes: &'a HashMap<i64, String>,
}

/// An object member's name as JSON text has it: borrowed unless escaped.
#[derive(Debug, serde::Deserialize, PartialEq, Eq, PartialOrd, Ord)]
struct Key<'a>(#[serde(borrow)] std::borrow::Cow<'a, str>);

/// An object's members as JSON text, in serde_json's map order (the order
/// its `Map` writes them, which is how this server writes its answers).
type Members<'a> = std::collections::BTreeMap<Key<'a>, &'a RawValue>;

impl Translation<'_> {
    fn email_id(&self, id: &mut Value) {
        if let Some(mapped) = id.as_str().and_then(|local| self.emails.get(local)) {
            *id = Value::String(mapped.upstream_id.clone());
        }
    }

    /// A local Email/get answer (its JSON text) as the upstream names it:
    /// `accountId` and `state` the upstream's, each email as
    /// [`Translation::email`] writes it, `notFound` ids the upstream's.
    /// Written in serde_json's map order, as the answer was: what a
    /// Value of it would serialize to, without building one (issue 19:
    /// the parse and the second serialization were a tenth of the proxy's
    /// core). `None` when the text is not such an answer.
    fn answer(&self, local: &str, account_id: &str, state: &str) -> Option<String> {
        // One pass over the text: each email's members found, not parsed.
        #[derive(serde::Deserialize)]
        struct LocalGet<'a> {
            #[serde(borrow)]
            list: Vec<Members<'a>>,
            #[serde(rename = "notFound")]
            not_found: Vec<Value>,
        }
        let LocalGet { list, not_found } = serde_json::from_str(local).ok()?;
        let mut out = Vec::with_capacity(local.len() + 256);
        out.extend_from_slice(b"{\"accountId\":");
        write_value(&mut out, account_id);
        out.extend_from_slice(b",\"list\":[");
        for (position, email) in list.iter().enumerate() {
            if position > 0 {
                out.push(b',');
            }
            self.email(email, &mut out)?;
        }
        out.extend_from_slice(b"],\"notFound\":[");
        for (position, id) in not_found.into_iter().enumerate() {
            if position > 0 {
                out.push(b',');
            }
            let mut id = id;
            self.email_id(&mut id);
            write_value(&mut out, &id);
        }
        out.extend_from_slice(b"],\"state\":");
        write_value(&mut out, state);
        out.push(b'}');
        String::from_utf8(out).ok()
    }

    /// Appends local Email object `email` (JSON text) to `out` as the
    /// upstream names it: `id`, `threadId`, `blobId` and each part's
    /// `blobId` the upstream's, `mailboxIds` keyed by upstream Mailbox ids
    /// (one the mirror does not map left out); every other member as it
    /// was written. An email the translation does not know is written as
    /// it was. `None` when a member to translate is not what it should be.
    fn email(&self, members: &Members, out: &mut Vec<u8>) -> Option<()> {
        let mapped = members
            .get(&Key("id".into()))
            .and_then(|id| serde_json::from_str::<&str>(id.get()).ok())
            .and_then(|local| self.emails.get(local));
        const PART_LISTS: [&str; 3] = ["textBody", "htmlBody", "attachments"];
        // The part map is read only for an answer that has parts (a list
        // view's has none).
        let has_parts = members
            .keys()
            .any(|Key(name)| name == "bodyStructure" || PART_LISTS.contains(&name.as_ref()));
        let parts: Map<String, Value> = mapped
            .and_then(|mapped| mapped.parts.as_deref())
            .filter(|_| has_parts)
            .and_then(|parts| serde_json::from_str(parts).ok())
            .unwrap_or_default();
        out.push(b'{');
        for (position, (Key(name), raw)) in members.iter().enumerate() {
            if position > 0 {
                out.push(b',');
            }
            write_value(out, name.as_ref());
            out.push(b':');
            let Some(mapped) = mapped else {
                out.extend_from_slice(raw.get().as_bytes());
                continue;
            };
            match name.as_ref() {
                "id" => write_value(out, &mapped.upstream_id),
                "threadId" => write_value(out, &mapped.thread_id),
                "blobId" => write_value(out, &mapped.blob_id),
                "mailboxIds" => {
                    let local: Map<String, Value> = serde_json::from_str(raw.get()).ok()?;
                    let translated: Map<String, Value> = local
                        .into_iter()
                        .filter_map(|(local, value)| {
                            let local = ids::parse_mailbox_id(&local)?;
                            Some((self.mailboxes.get(&local)?.clone(), value))
                        })
                        .collect();
                    write_value(out, &translated);
                }
                "bodyStructure" => {
                    let mut structure: Value = serde_json::from_str(raw.get()).ok()?;
                    Self::part(&mut structure, &parts);
                    write_value(out, &structure);
                }
                list if PART_LISTS.contains(&list) => {
                    let mut list: Value = serde_json::from_str(raw.get()).ok()?;
                    if let Value::Array(list) = &mut list {
                        for part in list {
                            Self::part(part, &parts);
                        }
                    }
                    write_value(out, &list);
                }
                _ => out.extend_from_slice(raw.get().as_bytes()),
            }
        }
        out.push(b'}');
        Some(())
    }
}

/// Whether an Email/get names its properties, all of them ones the mirror
/// answers ([`local_property`]; without `properties` the defaults include
/// the body ones).
fn asks_local_properties(arguments: &Map<String, Value>) -> bool {
    arguments
        .get("properties")
        .and_then(Value::as_array)
        .is_some_and(|properties| {
            properties
                .iter()
                .all(|p| p.as_str().is_some_and(local_property))
        })
}

impl Translation<'_> {
    /// A body part (and its sub-parts) with the upstream's blobId: found by
    /// its partId, or by the one a local part blobId ends in
    /// (`{blobId}_{partId}`) when `partId` was not asked for.
    fn part(part: &mut Value, parts: &Map<String, Value>) {
        let Some(object) = part.as_object_mut() else {
            return;
        };
        if let Some(Value::String(local)) = object.get("blobId") {
            let part_id = object
                .get("partId")
                .and_then(Value::as_str)
                .or_else(|| local.split_once('_').map(|(_, part_id)| part_id));
            if let Some(upstream) = part_id.and_then(|part_id| parts.get(part_id)) {
                let upstream = upstream.clone();
                object.insert("blobId".into(), upstream);
            }
        }
        if let Some(Value::Array(children)) = object.get_mut("subParts") {
            for child in children {
                Self::part(child, parts);
            }
        }
    }
}

/// The call ids a call's result references name.
fn references(arguments: &Map<String, Value>) -> Vec<String> {
    arguments
        .iter()
        .filter(|(key, _)| key.starts_with('#'))
        .filter_map(|(_, reference)| reference.get("resultOf")?.as_str().map(str::to_string))
        .collect()
}

/// The state of one proxied request.
struct Run<'a, 'p> {
    proxied: &'a Proxied<'p>,
    using: Vec<String>,
    /// The upstream Email and Mailbox states of each account forwarded
    /// calls showed.
    email_states: HashMap<String, String>,
    mailbox_states: HashMap<String, String>,
    /// The upstream Thread states forwarded calls showed.
    thread_states: HashMap<String, String>,
    responses: Vec<(String, Arguments, String)>,
    pending: Vec<Invocation>,
    created_ids: HashMap<String, String>,
    session_state: Option<Value>,
    budget: RequestBudget,
}

impl Run<'_, '_> {
    /// Sends the pending calls as one request; their responses follow the
    /// earlier ones. After a write the mirrors it touched catch up. When
    /// the upstream does not answer the batch and earlier calls of the
    /// request were answered (so their effects stand), each call of the
    /// batch gets `serverUnavailable` rather than the whole request an
    /// error that would say none was processed (RFC 8620 §3.6.1).
    async fn flush(&mut self) -> Result<(), ProxyError> {
        let calls = std::mem::take(&mut self.pending);
        match self.send(&calls).await {
            Ok(answer) => {
                let first = self.responses.len();
                self.take(answer);
                self.catch_up(&calls).await;
                // A forwarded Thread/get or Email/query of a shape not yet
                // compared: is the mirror's answer the upstream's?
                // Its result references are resolved against the answers
                // as the upstream gave them.
                for call in calls
                    .iter()
                    .filter(|call| shape(&call.0, &call.1).is_some())
                {
                    let answered = self.responses[first..]
                        .iter()
                        .find(|(name, _, id)| *name == call.0 && *id == call.2);
                    let Some((_, answer, _)) = answered else {
                        continue;
                    };
                    let answer = answer.clone().into_value();
                    let mut arguments = call.1.clone();
                    let mut budget = RequestBudget::new(&self.proxied.jmap.limits);
                    if reference::resolve(&mut arguments, &self.responses, &mut budget).is_ok() {
                        let resolved = Invocation(call.0.clone(), arguments, call.2.clone());
                        self.proxied.compare(&resolved, &answer).await;
                    }
                }
                Ok(())
            }
            Err(error) if self.responses.is_empty() => Err(error),
            Err(error) => {
                let reason = match &error {
                    ProxyError::Answered(status, _) => {
                        format!("the upstream answered HTTP {status}")
                    }
                    ProxyError::Upstream(error) => error.to_string(),
                };
                tracing::warn!(%reason, "a batch of forwarded calls failed");
                for Invocation(_, _, call_id) in calls {
                    let answer = json!({"type": "serverUnavailable",
                        "description": "the mail server behind this one did not answer this call"});
                    self.responses
                        .push(("error".into(), answer.into(), call_id));
                }
                Ok(())
            }
        }
    }

    /// One round trip with `calls`: the upstream's Response object.
    async fn send(&self, calls: &[Invocation]) -> Result<Map<String, Value>, ProxyError> {
        let request = json!({
            "using": self.using,
            "methodCalls": calls,
            "createdIds": self.created_ids,
        });
        let p = self.proxied;
        let method = dispatch::method_label(&calls[0].0);
        let (status, body) = p
            .upstream
            .post(p.session, p.authorization, &request, method)
            .await?;
        if status != 200 {
            return Err(ProxyError::Answered(status, body.into()));
        }
        Ok(serde_json::from_slice(&body)
            .map_err(|error| UpstreamError::Refused(format!("not a JMAP Response: {error}")))?)
    }

    /// Takes in a batch's answer: its method responses, creation ids,
    /// session state, and the Email states it shows.
    fn take(&mut self, mut answer: Map<String, Value>) {
        if let Some(Value::Array(responses)) = answer.remove("methodResponses") {
            for response in responses {
                let Value::Array(mut parts) = response else {
                    continue;
                };
                if parts.len() != 3 {
                    continue;
                }
                let call_id = parts
                    .pop()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                let arguments = parts.pop().unwrap_or(Value::Null);
                let name = parts
                    .pop()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                self.saw(&name, &arguments);
                self.responses.push((name, arguments.into(), call_id));
            }
        }
        if let Some(Value::Object(created)) = answer.remove("createdIds") {
            for (creation, id) in created {
                if let Value::String(id) = id {
                    self.created_ids.insert(creation, id);
                }
            }
        }
        if let Some(state) = answer.remove("sessionState") {
            self.session_state = Some(state);
        }
    }

    /// A local answer of `method` with its state noted ([`Run::saw`]).
    fn answered(&mut self, method: &str, answer: Value) -> Arguments {
        self.saw(method, &answer);
        Arguments::Value(answer)
    }

    /// Notes the state an answer of `method` shows (`newState`, else
    /// `state`) for its account.
    fn saw(&mut self, method: &str, answer: &Value) {
        if let Some(account) = answer.get("accountId").and_then(Value::as_str)
            && let Some(state) = answer
                .get("newState")
                .or_else(|| answer.get("state"))
                .and_then(Value::as_str)
        {
            self.note(method, account, state);
        }
    }

    /// Notes that an answer of `method` showed `account` at `state`.
    fn note(&mut self, method: &str, account: &str, state: &str) {
        let states = if method.starts_with("Email/") {
            &mut self.email_states
        } else if method.starts_with("Mailbox/") {
            &mut self.mailbox_states
        } else if method.starts_with("Thread/") {
            &mut self.thread_states
        } else {
            return;
        };
        states.insert(account.to_string(), state.to_string());
    }

    /// The mirrors of the accounts a batch's writes named catch up.
    async fn catch_up(&self, calls: &[Invocation]) {
        let written: HashSet<&str> = calls
            .iter()
            .filter(|call| is_write(&call.0))
            .flat_map(|call| {
                ["accountId", "fromAccountId"]
                    .into_iter()
                    .filter_map(|name| call.1.get(name).and_then(Value::as_str))
            })
            .collect();
        let p = self.proxied;
        for account in written {
            p.mirror.catch_up(p.session, p.authorization, account).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use serde_json::json;

    use super::{Translation, local_filter, shape};
    use crate::store::MirroredEmail;

    #[test]
    fn a_filter_is_answered_here_only_on_what_the_mirror_holds() {
        let local_of = HashMap::from([("Inbox-U", 3), ("Arch-U", 7)]);
        let filter = json!({"operator": "AND", "conditions": [
            {"inMailbox": "Inbox-U", "hasKeyword": "$seen"},
            {"operator": "NOT", "conditions": [{"inMailboxOtherThan": ["Arch-U"], "minSize": 10}]},
        ]});
        assert_eq!(
            local_filter(&filter, &local_of),
            Some(json!({"operator": "AND", "conditions": [
                {"inMailbox": "m3", "hasKeyword": "$seen"},
                {"operator": "NOT", "conditions": [{"inMailboxOtherThan": ["m7"], "minSize": 10}]},
            ]}))
        );
        for forwarded in [
            json!({"inMailbox": "Unmapped-U"}),
            json!({"inMailboxOtherThan": ["Inbox-U", "Unmapped-U"]}),
            json!({"text": "hello"}),
            json!({"operator": "OR", "conditions": [{"inMailbox": "Inbox-U"}, {"from": "ann"}]}),
            json!({"allInThreadHaveKeyword": "$seen"}),
            json!({"inMailbox": 3}),
        ] {
            assert_eq!(local_filter(&forwarded, &local_of), None, "{forwarded}");
        }
    }

    #[test]
    fn a_shape_is_what_an_answer_depends_on_besides_ids_and_paging() {
        let of = |arguments: serde_json::Value| arguments.as_object().unwrap().clone();
        let query = of(json!({"accountId": "A", "filter": {"inMailbox": "I"},
            "sort": [{"property": "receivedAt"}], "position": 5, "limit": 10}));
        // Another page of the same query is the same shape.
        let next = of(json!({"accountId": "A", "filter": {"inMailbox": "I"},
            "sort": [{"property": "receivedAt"}], "position": 15, "limit": 10}));
        assert_eq!(shape("Email/query", &query), shape("Email/query", &next));
        assert!(shape("Email/query", &query).is_some());
        // Another limit, a total asked, an anchor, a position from the end:
        // each another shape (servers cap, count and page their own way).
        for paged in [
            json!({"limit": 20}),
            json!({"limit": 10, "calculateTotal": true}),
            json!({"limit": 10, "anchor": "E1"}),
            json!({"limit": 10, "position": -5}),
        ] {
            let mut arguments = of(json!({"accountId": "A", "filter": {"inMailbox": "I"},
                "sort": [{"property": "receivedAt"}]}));
            arguments.extend(of(paged.clone()));
            assert_ne!(
                shape("Email/query", &query),
                shape("Email/query", &arguments),
                "{paged}"
            );
        }
        let other = of(json!({"accountId": "A", "filter": {"inMailbox": "J"}}));
        assert_ne!(shape("Email/query", &query), shape("Email/query", &other));
        let threads = of(
            json!({"accountId": "A", "#ids": {"resultOf": "1", "name": "Email/get", "path": "/list/*/threadId"}}),
        );
        assert_eq!(
            shape("Thread/get", &threads).as_deref(),
            Some("Thread/get null")
        );
        let referenced = of(
            json!({"accountId": "A", "#filter": {"resultOf": "0", "name": "X/y", "path": "/f"}}),
        );
        assert_eq!(shape("Email/query", &referenced), None);
        assert_eq!(shape("Email/get", &query), None);
    }

    #[test]
    fn an_answer_names_what_the_upstream_names() {
        let mirrored = MirroredEmail {
            email_id: 42,
            upstream_id: "Mx7".into(),
            blob_id: "Gb1".into(),
            thread_id: "Tq2".into(),
            parts: Some(json!({"2": "Gb1.p2", "3": "Gb1.p3"}).to_string()),
        };
        let emails = HashMap::from([("e42".to_string(), &mirrored)]);
        let mailboxes = HashMap::from([(3, "Inbox-U".to_string())]);
        let translation = Translation {
            emails: &emails,
            mailboxes: &mailboxes,
        };
        let email = json!({
            "id": "e42", "threadId": "t9", "blobId": "aa", "mailboxIds": {"m3": true, "m8": true},
            "subject": "kept \u{e9}\"\\", "from": [{"name": null, "email": "a@example.com"}],
            "bodyStructure": {"partId": "1", "blobId": null, "subParts": [
                {"partId": "2", "blobId": "aa_2"}, {"blobId": "aa_3", "type": "image/png"}]},
            "textBody": [{"partId": "2", "blobId": "aa_2"}],
            "attachments": [{"blobId": "aa_3"}],
            "bodyValues": {"2": {"value": "hi"}},
        });
        let unknown = json!({"id": "e7", "threadId": "t7"});
        // As the local Email/get writes it: serde_json's text of the value.
        let local = json!({"accountId": "a1", "state": "9", "list": [email, unknown],
            "notFound": ["e42", "e5"]})
        .to_string();
        let translated = translation.answer(&local, "U-acct", "s-up").unwrap();
        let expected = json!({
            "accountId": "U-acct", "state": "s-up", "notFound": ["Mx7", "e5"],
            "list": [{
                "id": "Mx7", "threadId": "Tq2", "blobId": "Gb1", "mailboxIds": {"Inbox-U": true},
                "subject": "kept \u{e9}\"\\", "from": [{"name": null, "email": "a@example.com"}],
                "bodyStructure": {"partId": "1", "blobId": null, "subParts": [
                    {"partId": "2", "blobId": "Gb1.p2"}, {"blobId": "Gb1.p3", "type": "image/png"}]},
                "textBody": [{"partId": "2", "blobId": "Gb1.p2"}],
                "attachments": [{"blobId": "Gb1.p3"}],
                "bodyValues": {"2": {"value": "hi"}},
            }, {"id": "e7", "threadId": "t7"}],
        });
        // The octets serde_json writes for the translated value.
        assert_eq!(translated, expected.to_string());
        assert_eq!(translation.answer("[1]", "U-acct", "s-up"), None);
    }
}

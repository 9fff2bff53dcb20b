//! A request through a JMAP upstream (issue 19, ADR 0009): each call
//! answered from the local mirror where it holds what the call asks, else
//! forwarded, in the client's order.
//!
//! - **Answered here**: Email/get of ids the mirror maps, for properties it
//!   holds as the upstream would give them (metadata, header fields and
//!   their parsed forms, `preview`, `hasAttachment` as the upstream gave
//!   them at the sync; [`local_property`]),
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
//!   total, state strings; `compare.rs`). Tie order or filter semantics
//!   that differ from Fastview's keep that shape forwarded. Of an upstream
//!   whose `queryState` is not its Email state (Cyrus), a query is compared
//!   without it, at an Email state learnt in the same forwarded request,
//!   and answered here with a query state the proxy mints; an
//!   Email/queryChanges since a minted state is the mirror's to answer
//!   (`query_changes.rs`). A Thread/get asking a thread twice is listed as
//!   the upstream lists it (`shape.rs`, `Listing`).
//! - **Forwarded**: consecutive forwarded calls go as one request, with the
//!   `createdIds` so far, so the upstream resolves references among them
//!   and creation ids across batches; a reference to an earlier batch or to
//!   a call answered here is resolved here first.
//! - **Reads see writes**: after a batch with a `/set`, `/import` or
//!   `/copy`, the mirrors of the accounts it named catch up with the
//!   upstream before the next call is answered.

mod compare;
mod proxied;
mod query_changes;
mod run;
mod shape;
mod translation;

pub use proxied::{Proxied, ProxiedResponse, ProxyError};
use query_changes::{minted_query_state, parse_minted};
use run::Run;
use shape::{
    CollapsedPaging, Listing, MAX_COLLAPSED_PAGES, asks_local_properties, ids_repeat, local_filter,
    names_parts, query_collapses_here, references, shape,
};
pub use shape::{is_write, local_property, may_answer};
use translation::Translation;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::{Map, Value, json};
use tokio::sync::OwnedRwLockReadGuard;

use crate::jmap::budget::RequestBudget;
use crate::jmap::dispatch;
use crate::jmap::ids;
use crate::jmap::reference::{self, ReferenceError};
use crate::jmap::request::{
    Arguments, CAPABILITY_CORE, CAPABILITY_MAIL, CallArguments, Invocation, Request, response_json,
};
use crate::proxy::jmap::mirror::{Census, MirrorState};
use crate::proxy::upstream::UpstreamError;

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
            let here = if mail_enabled {
                self.candidate(&method, &arguments)
            } else {
                None
            };
            if (outside || here.is_some()) && !run.pending.is_empty() {
                run.flush().await?;
            }
            let resolved_here = !referenced.is_empty() && run.pending.is_empty();
            if resolved_here {
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
            // Whether a Thread/get's ids repeat, or an Email/queryChanges is
            // since a minted state, shows once they are resolved.
            let here = if here.is_some() || (mail_enabled && resolved_here) {
                self.candidate(&method, &arguments)
            } else {
                None
            };
            // Later calls of the request are answered at the state a
            // local answer showed (noted), or forwarded.
            if let Some(listing) = here
                && let Some((name, answer)) = self
                    .answer_here(&mut run, &method, &arguments, &call_id, listing)
                    .await?
            {
                run.responses.push((name, answer, call_id));
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

    /// Whether a call may be answered here, decided before its references
    /// are resolved: `Some` with how a Thread/get lists repeated ids
    /// ([`Listing`]; `Once` for the other methods), `None` to forward it.
    /// An Email/queryChanges since a query state the proxy minted is always
    /// answered here, from the mirror or with `cannotCalculateChanges`.
    fn candidate(&self, method: &str, arguments: &Map<String, Value>) -> Option<Listing> {
        match method {
            "Email/get" => asks_local_properties(arguments).then_some(Listing::Once),
            "Mailbox/get" => Some(Listing::Once),
            "Thread/get" | "Email/query" => self.verified(method, arguments),
            "Email/queryChanges" => arguments
                .get("sinceQueryState")
                .and_then(Value::as_str)
                .and_then(parse_minted)
                .map(|_| Listing::Once),
            _ => None,
        }
    }

    /// A call answered here ([`Proxied::candidate`]): its response's name
    /// and arguments, with the state it shows noted in `run`; `None` to
    /// forward it.
    async fn answer_here(
        &self,
        run: &mut Run<'_, '_>,
        method: &str,
        arguments: &Map<String, Value>,
        call_id: &str,
        listing: Listing,
    ) -> Result<Option<(String, Arguments)>, UpstreamError> {
        let answer = match method {
            "Email/get" => self
                .email_get(arguments, call_id, &run.email_states)
                .await?
                .map(|(text, state)| {
                    if let Some(account) = arguments.get("accountId").and_then(Value::as_str) {
                        run.note(method, account, &state);
                    }
                    Arguments::text(text, None)
                }),
            "Mailbox/get" => self
                .mailbox_get(arguments, &run.mailbox_states)
                .map(|answer| run.answered(method, answer)),
            "Thread/get" => self
                .thread_get(arguments, listing, &run.email_states, &run.thread_states)
                .await?
                .map(|answer| run.answered(method, answer)),
            "Email/query" => self
                .email_query(arguments, call_id, &run.email_states)
                .await?
                .map(|answer| run.answered(method, answer)),
            "Email/queryChanges" => {
                let (name, answer) = self
                    .email_query_changes(arguments, call_id, &run.email_states)
                    .await?;
                return Ok(Some((name, Arguments::Value(answer))));
            }
            _ => None,
        };
        Ok(answer.map(|answer| (method.to_string(), answer)))
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
        let (name, answer) = self
            .local_response(account, method, arguments, call_id)
            .await?;
        (name == method).then_some(answer)
    }

    /// Runs one call of `method` on the local account: the response's
    /// name (`method`, or `error`) and arguments.
    async fn local_response(
        &self,
        account: &crate::store::Account,
        method: &str,
        arguments: Map<String, Value>,
        call_id: &str,
    ) -> Option<(String, Arguments)> {
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
        Some((name, answer))
    }

    /// Whether a call of `method` has a shape the mirror answered as the
    /// upstream did, on a personal account of the session: `Some` with how
    /// it lists repeated ids ([`Listing::keyed`]; `Once` for a query).
    fn verified(&self, method: &str, arguments: &Map<String, Value>) -> Option<Listing> {
        let account_id = arguments.get("accountId").and_then(Value::as_str)?;
        if !self.session.has_personal_account(account_id) {
            return None;
        }
        let shape = shape(method, arguments)?;
        let mut keys = Listing::keyed(&shape, method == "Thread/get" && ids_repeat(arguments));
        // Ids still a result reference may repeat or not: any listing
        // verified makes it a candidate, decided once they are resolved.
        if method == "Thread/get" && arguments.contains_key("#ids") {
            keys.extend(Listing::keyed(&shape, true));
        }
        keys.into_iter()
            .find(|(_, key)| self.mirror.verified(account_id, key) == Some(true))
            .map(|(listing, _)| listing)
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

    /// A Thread/get answered from the mirror (module doc), a thread asked
    /// more than once listed as `listing` says, or `None`: a mirror that is
    /// not complete, a Thread state a forwarded call of the request showed
    /// that is not the census's, a thread id the mirror does not know, or
    /// arguments of another shape.
    async fn thread_get(
        &self,
        arguments: &Map<String, Value>,
        listing: Listing,
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
            if !distinct.insert(id) && listing == Listing::Once {
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
        let Some(collapsed) = query_collapses_here(arguments) else {
            return Ok(None);
        };
        let Some((ready, census, _held)) = self.complete_at(account_id, seen).await else {
            return Ok(None);
        };
        let Some(local_arguments) = local_query_arguments(arguments, &ready) else {
            return Ok(None);
        };
        let answer = if collapsed {
            (self.collapsed_query(arguments, &ready, local_arguments, call_id)).await?
        } else {
            (self.uncollapsed_query(arguments, &ready, local_arguments, call_id)).await?
        };
        // The upstream's Email state where that is its query state, else
        // one the proxy mints from the mirror's own (never the upstream's).
        Ok(answer.map(|(mut answer, local_state)| {
            answer["accountId"] = Value::String(account_id.into());
            answer["queryState"] = Value::String(if census.mints_query_states {
                minted_query_state(ready.account.id, &local_state)
            } else {
                census.email_state.clone()
            });
            answer
        }))
    }

    /// An Email/query with `collapseThreads` answered from the mirror with
    /// `local_arguments` (its filter local), in upstream ids, and the local
    /// query state it was read at; `None` when its paging or matches are
    /// not the mirror's to answer.
    async fn collapsed_query(
        &self,
        arguments: &Map<String, Value>,
        ready: &MirrorState,
        local_arguments: Map<String, Value>,
        call_id: &str,
    ) -> Result<Option<(Value, String)>, UpstreamError> {
        let Some(paging) = CollapsedPaging::of(arguments) else {
            return Ok(None);
        };
        let max_limit = self.jmap.limits.max_objects_in_get;
        let need = paging.needs(max_limit);
        let Some((collapsed, local_state)) = self
            .collapsed_matches(ready, local_arguments, call_id, need)
            .await?
        else {
            return Ok(None);
        };
        Ok(paging
            .answer(collapsed, max_limit)
            .map(|answer| (answer, local_state)))
    }

    /// An Email/query without `collapseThreads` run on the local account
    /// with `local_arguments` (its filter local, its anchor mapped here),
    /// its ids the upstream's, and the local query state; `None` when an
    /// anchor or a match is not mapped.
    async fn uncollapsed_query(
        &self,
        arguments: &Map<String, Value>,
        ready: &MirrorState,
        mut local_arguments: Map<String, Value>,
        call_id: &str,
    ) -> Result<Option<(Value, String)>, UpstreamError> {
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
        let local_state = answer["queryState"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        Ok(Some((answer, local_state)))
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
    /// that does not come. With them, the local query state of the first
    /// page (the account's calls are held off the mirror meanwhile, so the
    /// pages are of one state).
    async fn collapsed_matches(
        &self,
        ready: &MirrorState,
        mut local_arguments: Map<String, Value>,
        call_id: &str,
        need: Option<usize>,
    ) -> Result<Option<(Vec<String>, String)>, UpstreamError> {
        for name in ["collapseThreads", "anchor", "anchorOffset"] {
            local_arguments.remove(name);
        }
        let page_size = self.jmap.limits.max_objects_in_get;
        local_arguments.insert("limit".into(), json!(page_size));
        local_arguments.insert("calculateTotal".into(), Value::Bool(true));
        let mut threads: HashSet<String> = HashSet::new();
        let mut collapsed = Vec::new();
        let mut position = 0u64;
        let mut local_state = None;
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
            let state = answer["queryState"].as_str().unwrap_or_default();
            let local_state = local_state.get_or_insert_with(|| state.to_string());
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
                return Ok(Some((collapsed, local_state.clone())));
            }
            // The account's calls are held off the mirror while it is read:
            // a mailbox past MAX_COLLAPSED_PAGES pages is the upstream's.
            if position >= MAX_COLLAPSED_PAGES * page_size {
                return Ok(None);
            }
        }
    }
}

#[cfg(test)]
mod tests;

/// An Email/query's arguments for the local account of `ready`: its
/// accountId and its filter's mailboxes local; `None` when the filter is
/// not one the mirror answers or names a mailbox it does not map.
fn local_query_arguments(
    arguments: &Map<String, Value>,
    ready: &MirrorState,
) -> Option<Map<String, Value>> {
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
        Some(filter) => {
            local_arguments.insert("filter".into(), local_filter(filter, &local_of)?);
        }
    }
    Some(local_arguments)
}

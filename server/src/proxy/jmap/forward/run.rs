//! The forwarded calls of one request: consecutive ones sent as one
//! request with the `createdIds` so far, references resolved here, the
//! mirrors caught up after a write.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value, json};

use crate::jmap::budget::RequestBudget;
use crate::jmap::dispatch;
use crate::jmap::reference::{self};
use crate::jmap::request::{Arguments, Invocation};
use crate::proxy::jmap::forward::proxied::{Proxied, ProxyError};
use crate::proxy::jmap::forward::shape::*;
use crate::proxy::upstream::UpstreamError;

/// The state of one proxied request.
pub(super) struct Run<'a, 'p> {
    pub(super) proxied: &'a Proxied<'p>,
    pub(super) using: Vec<String>,
    /// The upstream Email and Mailbox states of each account forwarded
    /// calls showed.
    pub(super) email_states: HashMap<String, String>,
    pub(super) mailbox_states: HashMap<String, String>,
    /// The upstream Thread states forwarded calls showed.
    pub(super) thread_states: HashMap<String, String>,
    pub(super) responses: Vec<(String, Arguments, String)>,
    pub(super) pending: Vec<Invocation>,
    pub(super) created_ids: HashMap<String, String>,
    pub(super) session_state: Option<Value>,
    pub(super) budget: RequestBudget,
}

impl Run<'_, '_> {
    /// Sends the pending calls as one request; their responses follow the
    /// earlier ones. After a write the mirrors it touched catch up. When
    /// the upstream does not answer the batch and earlier calls of the
    /// request were answered (so their effects stand), each call of the
    /// batch gets `serverUnavailable` rather than the whole request an
    /// error that would say none was processed (RFC 8620 §3.6.1).
    pub(super) async fn flush(&mut self) -> Result<(), ProxyError> {
        let calls = std::mem::take(&mut self.pending);
        let bracketed = self.brackets(&calls);
        match self.send(&calls, &bracketed).await {
            Ok(mut answer) => {
                let states = bracket_states(&mut answer);
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
                        let bracket = states.get(&call.2).map(String::as_str);
                        self.proxied.compare(&resolved, &answer, bracket).await;
                    }
                }
                Ok(())
            }
            // A status the upstream answered (a 401, a 429 with its
            // Retry-After) is the whole request's when nothing was
            // answered yet; an upstream that cannot be reached fails each
            // call with serverUnavailable, whether or not an earlier call
            // was answered here (README, "In front of a JMAP server").
            Err(error)
                if self.responses.is_empty()
                    && !matches!(error, ProxyError::Upstream(UpstreamError::Unreachable(_))) =>
            {
                Err(error)
            }
            Err(error) => {
                let reason = match &error {
                    ProxyError::Answered(answer) => {
                        format!("the upstream answered HTTP {}", answer.status)
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

    /// One round trip with `calls`, the ones at the indexes `bracketed`
    /// each between two Email/get of no ids ([`Run::brackets`]): the
    /// upstream's Response object. Counted under the first of `calls`.
    pub(super) async fn send(
        &self,
        calls: &[Invocation],
        bracketed: &[usize],
    ) -> Result<Map<String, Value>, ProxyError> {
        let mut wire: Vec<Value> = Vec::with_capacity(calls.len() + 2 * bracketed.len());
        for (index, call) in calls.iter().enumerate() {
            let around = bracketed.contains(&index);
            let state_of = |when: &str| {
                json!(["Email/get", {"accountId": call.1.get("accountId"), "ids": []},
                    format!("{STATE_CALL}{when}:{}", call.2)])
            };
            if around {
                wire.push(state_of("before"));
            }
            wire.push(json!(call));
            if around {
                wire.push(state_of("after"));
            }
        }
        let request = json!({
            "using": self.using,
            "methodCalls": wire,
            "createdIds": self.created_ids,
        });
        let p = self.proxied;
        let method = dispatch::method_label(&calls[0].0);
        let answer = p
            .upstream
            .post(p.session, p.authorization, &request, method)
            .await?;
        if answer.status != 200 {
            return Err(ProxyError::Answered(answer));
        }
        Ok(serde_json::from_slice(&answer.body)
            .map_err(|error| UpstreamError::Refused(format!("not a JMAP Response: {error}")))?)
    }

    /// Takes in a batch's answer: its method responses, creation ids,
    /// session state, and the Email states it shows.
    pub(super) fn take(&mut self, mut answer: Map<String, Value>) {
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
    pub(super) fn answered(&mut self, method: &str, answer: Value) -> Arguments {
        self.saw(method, &answer);
        Arguments::Value(answer)
    }

    /// Notes the state an answer of `method` shows (`newState`, else
    /// `state`) for its account.
    pub(super) fn saw(&mut self, method: &str, answer: &Value) {
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
    pub(super) fn note(&mut self, method: &str, account: &str, state: &str) {
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
    pub(super) async fn catch_up(&self, calls: &[Invocation]) {
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

/// How the call ids of the Email/get calls the proxy puts around a
/// forwarded Email/query begin (then `before:` or `after:` and the query's
/// call id). A request whose own call ids begin so gets none.
const STATE_CALL: &str = "fastview~state~";

impl Run<'_, '_> {
    /// The indexes of the `calls` to send between two Email/get of no ids,
    /// so that the upstream's Email state is known at the moment it
    /// answered them (issue 45 item 5): each Email/query of a shape not yet
    /// compared, on a personal account whose mirror may answer it and
    /// whose upstream's `queryState` is not its Email state. None when a
    /// call id of the request could be taken for theirs, or when the
    /// added calls would go over the upstream's `maxCallsInRequest`.
    fn brackets(&self, calls: &[Invocation]) -> Vec<usize> {
        let p = self.proxied;
        if calls.iter().any(|call| call.2.starts_with(STATE_CALL)) {
            return Vec::new();
        }
        let wanted: Vec<usize> = (calls.iter().enumerate())
            .filter(|(_, Invocation(method, arguments, _))| {
                let Some(account) = arguments.get("accountId").and_then(Value::as_str) else {
                    return false;
                };
                method == "Email/query"
                    && p.session.has_personal_account(account)
                    && shape(method, arguments)
                        .is_some_and(|shape| p.mirror.verified(account, &shape).is_none())
                    && p.mirror.may_verify(account)
                    && (p.mirror.ready(account).and_then(|ready| ready.census))
                        .is_some_and(|census| census.complete && census.mints_query_states)
            })
            .map(|(index, _)| index)
            .collect();
        let max_calls = (p.session.object.get("capabilities"))
            .and_then(|capabilities| capabilities.get(crate::proxy::jmap::CAPABILITY_CORE))
            .and_then(|core| core.get("maxCallsInRequest"))
            .and_then(Value::as_u64)
            .unwrap_or(16);
        if (calls.len() + 2 * wanted.len()) as u64 > max_calls {
            return Vec::new();
        }
        wanted
    }
}

/// Takes the answers to the Email/get calls [`Run::send`] put around
/// forwarded queries out of `answer`: for each such query's call id, the
/// upstream Email state both showed (absent when they differ: a write came
/// between, and the query's state is not known).
pub(super) fn bracket_states(answer: &mut Map<String, Value>) -> HashMap<String, String> {
    let mut seen: HashMap<(String, String), String> = HashMap::new();
    if let Some(Value::Array(responses)) = answer.get_mut("methodResponses") {
        responses.retain(|response| {
            let Some(rest) = response[2]
                .as_str()
                .and_then(|id| id.strip_prefix(STATE_CALL))
            else {
                return true;
            };
            if let (Some((when, call_id)), Some(state)) =
                (rest.split_once(':'), response[1]["state"].as_str())
            {
                seen.insert((when.to_string(), call_id.to_string()), state.to_string());
            }
            false
        });
    }
    let mut states = HashMap::new();
    for ((when, call_id), state) in &seen {
        if when == "before" && seen.get(&("after".to_string(), call_id.clone())) == Some(state) {
            states.insert(call_id.clone(), state.clone());
        }
    }
    states
}

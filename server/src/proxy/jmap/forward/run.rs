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
    pub(super) async fn send(
        &self,
        calls: &[Invocation],
    ) -> Result<Map<String, Value>, ProxyError> {
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

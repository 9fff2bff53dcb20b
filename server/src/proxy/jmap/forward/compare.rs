//! Verification by shape (ADR 0009): the mirror's answer to a forwarded
//! Thread/get or Email/query compared with the upstream's, when the mirror
//! could have answered it at the same upstream state, and the shape
//! recorded as answered alike or not ([`Mirror::verify`]).
//!
//! - A Thread/get is compared at the census's Thread state; one that asks
//!   a thread more than once is compared once per [`Listing`], so the
//!   mirror learns whether the upstream lists repeats (Cyrus does).
//! - An Email/query of an upstream whose `queryState` is its Email state
//!   is compared whole, state included, when that state is the mirror's.
//! - Of an upstream whose `queryState` is not (Cyrus), the forwarded query
//!   went between two Email/get of no ids ([`super::run`]): when both
//!   showed the mirror's Email state, the answers are compared without
//!   `queryState` ([`comparable_query`]).
//!
//! [`Mirror::verify`]: crate::proxy::jmap::mirror::Mirror::verify

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::jmap::request::Invocation;
use crate::proxy::jmap::forward::proxied::Proxied;
use crate::proxy::jmap::forward::shape::{Listing, comparable_query, ids_repeat, shape};
use crate::proxy::jmap::mirror::Census;

impl Proxied<'_> {
    /// Compares the mirror's answer to a forwarded Thread/get or
    /// Email/query `call` with the upstream's `answer` (module doc);
    /// `bracket`: the upstream Email state the Email/get calls around a
    /// forwarded Email/query both showed, if the proxy put them there.
    pub(super) async fn compare(&self, call: &Invocation, answer: &Value, bracket: Option<&str>) {
        let Invocation(method, arguments, call_id) = call;
        let Some(account_id) = arguments.get("accountId").and_then(Value::as_str) else {
            return;
        };
        let Some(shape) = shape(method, arguments) else {
            return;
        };
        if !self.mirror.may_verify(account_id) {
            return;
        }
        let Some(census) = self.mirror.ready(account_id).and_then(|ready| ready.census) else {
            return;
        };
        let call = Compared {
            account_id,
            arguments,
            shape: &shape,
            census: &census,
            answer,
        };
        match method.as_str() {
            "Thread/get" => self.compare_threads(call).await,
            "Email/query" => self.compare_query(call, call_id, bracket).await,
            _ => {}
        }
    }

    /// A Thread/get's answer compared, when at the census's Thread state
    /// and showing an order (a thread of at least two emails), once per
    /// listing of repeated ids not yet compared.
    async fn compare_threads(&self, call: Compared<'_>) {
        let shown = call.answer["list"].as_array().is_some_and(|threads| {
            threads
                .iter()
                .any(|t| t["emailIds"].as_array().is_some_and(|e| e.len() >= 2))
        });
        if call.answer["state"].as_str() != Some(call.census.thread_state.as_str()) || !shown {
            return;
        }
        let none = HashMap::new();
        for (listing, key) in Listing::keyed(call.shape, ids_repeat(call.arguments)) {
            if self.mirror.verified(call.account_id, &key).is_some() {
                continue;
            }
            let local = self.thread_get(call.arguments, listing, &none, &none).await;
            if let Ok(Some(local)) = local {
                self.mirror
                    .verify(call.account_id, &key, local == *call.answer);
            }
        }
    }

    /// An Email/query's answer compared, when it shows an order (at least
    /// two ids) and is known to be at the mirror's Email state (module
    /// doc).
    async fn compare_query(&self, call: Compared<'_>, call_id: &str, bracket: Option<&str>) {
        let (answer, census) = (call.answer, call.census);
        let shown = answer["ids"].as_array().is_some_and(|ids| ids.len() >= 2);
        if !shown || self.mirror.verified(call.account_id, call.shape).is_some() {
            return;
        }
        let state = census.email_state.as_str();
        let at_state = if census.mints_query_states {
            bracket == Some(state)
        } else {
            answer["queryState"].as_str() == Some(state)
        };
        if !at_state {
            return;
        }
        // Answered at that state or not at all (a sync since is not waited
        // for).
        let seen = HashMap::from([(call.account_id.to_string(), state.to_string())]);
        let Ok(Some(local)) = self.email_query(call.arguments, call_id, &seen).await else {
            return;
        };
        let alike = if census.mints_query_states {
            comparable_query(&local, call.arguments) == comparable_query(answer, call.arguments)
        } else {
            local == *answer
        };
        self.mirror.verify(call.account_id, call.shape, alike);
    }
}

/// A forwarded call being compared, and what it is compared at.
struct Compared<'a> {
    account_id: &'a str,
    arguments: &'a Map<String, Value>,
    shape: &'a str,
    census: &'a Census,
    answer: &'a Value,
}

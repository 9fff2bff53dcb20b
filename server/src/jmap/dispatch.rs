//! Method dispatch (RFC 8620 §3.3–§3.7): calls run in order, result
//! references resolve against earlier responses, and a method error (or a
//! panic, logged) becomes an `error` response for that call only.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::time::Instant;

use futures::FutureExt;
use serde_json::{Map, Value};

use super::error::MethodError;
use super::mail::{email, mailbox, thread};
use super::request::{Invocation, Request, Response};
use super::{Jmap, core, reference};
use crate::metrics::MethodLabel;
use crate::store::Account;

/// What a method call sees: the server, the authenticated account, and the
/// request's creation ids (RFC 8620 §5.3 `createdIds`).
pub struct CallContext<'a> {
    pub jmap: &'a Jmap,
    pub account: &'a Account,
    pub created_ids: &'a mut HashMap<String, String>,
}

/// Every method this server answers, with the name used as the metrics label.
const METHODS: &[&str] = &[
    "Core/echo",
    "Mailbox/get",
    "Mailbox/query",
    "Mailbox/set",
    "Email/get",
    "Email/query",
    "Email/set",
    "Email/import",
    "Thread/get",
];

async fn call(ctx: &mut CallContext<'_>, method: &str, arguments: Map<String, Value>) -> Result<Value, MethodError> {
    match method {
        "Core/echo" => Ok(core::echo(arguments)),
        "Mailbox/get" => mailbox::get::mailbox_get(ctx, arguments).await,
        "Mailbox/query" => mailbox::query::mailbox_query(ctx, arguments).await,
        "Mailbox/set" => mailbox::set::mailbox_set(ctx, arguments).await,
        "Email/get" => email::get::email_get(ctx, arguments).await,
        "Email/query" => email::query::email_query(ctx, arguments).await,
        "Email/set" => email::set::email_set(ctx, arguments).await,
        "Email/import" => email::import::email_import(ctx, arguments).await,
        "Thread/get" => thread::get::thread_get(ctx, arguments).await,
        _ => Err(MethodError::UnknownMethod),
    }
}

/// Runs a validated request for an authenticated account.
#[tracing::instrument(skip_all, fields(account = account.id, calls = request.method_calls.len()))]
pub async fn handle(jmap: &Jmap, account: &Account, request: Request) -> Response {
    let mut responses: Vec<(String, Value, String)> = Vec::with_capacity(request.method_calls.len());
    let mut created_ids = request.created_ids.clone().unwrap_or_default();
    for Invocation(method, mut arguments, call_id) in request.method_calls {
        let started = Instant::now();
        let result = match reference::resolve(&mut arguments, &responses) {
            Ok(()) => {
                let mut ctx = CallContext {
                    jmap,
                    account,
                    created_ids: &mut created_ids,
                };
                AssertUnwindSafe(call(&mut ctx, &method, arguments))
                    .catch_unwind()
                    .await
                    .unwrap_or_else(|_| {
                        tracing::error!(%method, "method handler panicked");
                        Err(MethodError::ServerFail("panic".into()))
                    })
            }
            Err(error) => Err(error),
        };
        let label = METHODS.iter().find(|m| **m == method).copied().unwrap_or("unknown");
        jmap.metrics
            .method_duration
            .get_or_create(&MethodLabel { method: label.to_string() })
            .observe(started.elapsed().as_secs_f64());
        match result {
            Ok(value) => responses.push((method, value, call_id)),
            Err(error) => {
                tracing::debug!(%method, error = error.type_name(), "method error");
                responses.push(("error".to_string(), error.to_json(), call_id));
            }
        }
    }
    Response {
        method_responses: responses,
        created_ids: request.created_ids.map(|_| created_ids),
        session_state: super::session::session_state(account),
    }
}

//! Method dispatch (RFC 8620 §3.3–§3.7): calls run in order, result
//! references resolve against earlier responses, and a method error (or a
//! panic) becomes an `error` response for that call only. Every
//! `serverFail` is logged once, with its cause, by
//! [`super::call::error_response`].
//!
//! # What a request may make the server build
//!
//! Every resolved result reference and every method response is counted
//! against the request's [`RequestBudget`] (JSON octets, at most
//! [`super::Limits::max_size_built`] = 4 × `maxSizeRequest`). A request that
//! would pass it is answered with the request-level error RFC 8620 §3.6.1
//! names for a request over a capability's limits, `limit` with
//! `"limit": "maxSizeRequest"` (HTTP 413): a request whose references expand
//! it is a request larger than the server processes, and §3.6.1's "the
//! request was not processed" holds, because no call of it changed any state
//! (reads only). The method-level errors of §3.6.2 do not fit: none names a
//! size bound, and after one "any further method calls in the request MUST
//! then be processed as normal", which would go on building.
//!
//! Once a call of the request has changed state (a `/set` or `/import` that
//! succeeded), refusing the whole request would hide those changes from the
//! client and make §3.6.1 untrue. Then each later call that does not fit gets
//! the method-level `requestTooLarge` (the RFC 8620 §5.1/§5.3 name for "more
//! than the server is willing to process in a single method call", which a
//! client treats as `serverFail` where it does not know it, §3.6.2), and the
//! calls that fit still run: the response stays within the budget plus one
//! short error per call.

use std::panic::AssertUnwindSafe;
use std::time::Instant;

use futures::FutureExt;
use serde_json::{Map, Value};

use super::args::{self, AccountArguments};
use super::budget::{OverBudget, RequestBudget, server_busy};
use super::call::{CallContext, error_response};
use super::error::{MethodError, RequestError};
use super::mail::changes::changes_response;
use super::mail::get::list_get;
use super::mail::{email, mailbox, thread};
use super::reference::ReferenceError;
use super::request::{Arguments, CallArguments, Invocation, Request, Response};
use super::submission::{email_submission, identity, submission_query};
use super::{Jmap, core, reference};
use crate::metrics::MethodLabel;
use crate::store::{Account, ChangeType, IdentityRow, MailboxRow, SubmissionRow, VacationResponse};

/// Every method this server answers, with the name used as the metrics label.
const METHODS: &[&str] = &[
    "Core/echo",
    "Blob/copy",
    "Mailbox/get",
    "Mailbox/changes",
    "Mailbox/query",
    "Mailbox/queryChanges",
    "Mailbox/set",
    "Email/get",
    "Email/changes",
    "Email/query",
    "Email/queryChanges",
    "Email/set",
    "Email/import",
    "Email/parse",
    "Email/copy",
    "Thread/get",
    "Thread/changes",
    "SearchSnippet/get",
    "Quota/get",
    "Quota/changes",
    "Identity/get",
    "Identity/changes",
    "Identity/set",
    "VacationResponse/get",
    "VacationResponse/set",
    "EmailSubmission/get",
    "EmailSubmission/changes",
    "EmailSubmission/query",
    "EmailSubmission/queryChanges",
    "EmailSubmission/set",
];

/// The capability a method belongs to: `Core/*` and `Blob/copy` (RFC 8620
/// §6.3) to core, `Quota/*` to quota (RFC 9425), `Identity/*` and
/// `EmailSubmission/*` to submission, `VacationResponse/*` to
/// vacationresponse (RFC 8621 §1.3), the rest to mail.
fn capability_of(method: &str) -> &'static str {
    if method.starts_with("Core/") || method == "Blob/copy" {
        super::request::CAPABILITY_CORE
    } else if method.starts_with("Quota/") {
        super::request::CAPABILITY_QUOTA
    } else if method.starts_with("Identity/") || method.starts_with("EmailSubmission/") {
        super::request::CAPABILITY_SUBMISSION
    } else if method.starts_with("VacationResponse/") {
        super::request::CAPABILITY_VACATION
    } else {
        super::request::CAPABILITY_MAIL
    }
}

/// Whether the instance offers `capability` (what its session advertises):
/// all but submission, which needs a way to send
/// ([`crate::mail::delivery::Route::offers_submission`]). A method of a
/// capability not offered is `unknownMethod` (RFC 8620 §3.6.2), as a
/// method of a capability the request did not name.
fn offered(jmap: &Jmap, capability: &str) -> bool {
    capability != super::request::CAPABILITY_SUBMISSION || jmap.route.offers_submission()
}

async fn call(
    ctx: &mut CallContext<'_>,
    method: &str,
    arguments: CallArguments,
) -> Result<Arguments, MethodError> {
    // A method the writer cannot carry out at all (in front of an IMAP
    // server: Email/copy).
    if let Some(why) = ctx.jmap.writer.refuses(method) {
        return Err(MethodError::Forbidden(why));
    }
    // Each method's future is boxed: unboxed, this future would be as large
    // as the largest of them (kilobytes), copied whole at each of its moves
    // on every call (ADR 0003, issue 20).
    let arguments = match method {
        // Email/get answers text, serialized as it rendered each email.
        "Email/get" => return Box::pin(email::get::email_get(ctx, arguments)).await,
        _ => arguments.into_map(),
    };
    let value = match method.split_once('/').map(|(data_type, _)| data_type) {
        Some("Mailbox" | "Email" | "Thread" | "SearchSnippet") => {
            call_mail(ctx, method, arguments).await
        }
        _ => call_other(ctx, method, arguments).await,
    };
    value.map(Arguments::Value)
}

/// The RFC 8621 mail methods (Mailbox, Email, Thread, SearchSnippet) but
/// Email/get, each future boxed (see [`call`]).
async fn call_mail(
    ctx: &mut CallContext<'_>,
    method: &str,
    arguments: Map<String, Value>,
) -> Result<Value, MethodError> {
    match method {
        "Mailbox/get" => Box::pin(list_get::<MailboxRow>(ctx, arguments)).await,
        "Mailbox/changes" => Box::pin(mailbox::changes::mailbox_changes(ctx, arguments)).await,
        "Mailbox/query" => typed(ctx, arguments, mailbox::query::mailbox_query).await,
        "Mailbox/queryChanges" => {
            typed(
                ctx,
                arguments,
                mailbox::query_changes::mailbox_query_changes,
            )
            .await
        }
        "Mailbox/set" => typed(ctx, arguments, mailbox::set::mailbox_set).await,
        "Email/changes" => Box::pin(changes_response(ctx, arguments, ChangeType::Email)).await,
        "Email/query" => typed(ctx, arguments, email::query::email_query).await,
        "Email/queryChanges" => {
            typed(ctx, arguments, email::query_changes::email_query_changes).await
        }
        "Email/set" => typed(ctx, arguments, email::set::email_set).await,
        "Email/import" => typed(ctx, arguments, email::import::email_import).await,
        "Email/parse" => typed(ctx, arguments, email::parse::email_parse).await,
        "Email/copy" => typed(ctx, arguments, super::copy::email_copy).await,
        "Thread/get" => typed(ctx, arguments, thread::get::thread_get).await,
        "Thread/changes" => Box::pin(changes_response(ctx, arguments, ChangeType::Thread)).await,
        "SearchSnippet/get" => {
            typed(
                ctx,
                arguments,
                super::mail::search_snippet::search_snippet_get,
            )
            .await
        }
        _ => Err(MethodError::UnknownMethod),
    }
}

/// Runs a handler that takes its arguments typed: parsed and their
/// `accountId` checked ([`args::parse_for`]), its future boxed (see [`call`]).
async fn typed<'c, 'j, T, F>(
    ctx: &'c mut CallContext<'j>,
    arguments: Map<String, Value>,
    handler: impl FnOnce(&'c mut CallContext<'j>, T) -> F,
) -> Result<Value, MethodError>
where
    T: AccountArguments,
    F: Future<Output = Result<Value, MethodError>>,
{
    let request = args::parse_for(ctx.account, arguments)?;
    Box::pin(handler(ctx, request)).await
}

/// Every other method: core, blobs, quota, submission, vacation.
async fn call_other(
    ctx: &mut CallContext<'_>,
    method: &str,
    arguments: Map<String, Value>,
) -> Result<Value, MethodError> {
    match method {
        "Core/echo" => Ok(core::echo(arguments)),
        "Blob/copy" => typed(ctx, arguments, super::copy::blob_copy).await,
        "Quota/get" => typed(ctx, arguments, super::quota::quota_get).await,
        "Quota/changes" => typed(ctx, arguments, super::quota::quota_changes).await,
        "Identity/get" => Box::pin(list_get::<IdentityRow>(ctx, arguments)).await,
        "Identity/changes" => {
            Box::pin(changes_response(ctx, arguments, ChangeType::Identity)).await
        }
        "Identity/set" => typed(ctx, arguments, identity::identity_set).await,
        "EmailSubmission/get" => Box::pin(list_get::<SubmissionRow>(ctx, arguments)).await,
        "EmailSubmission/changes" => {
            Box::pin(changes_response(
                ctx,
                arguments,
                ChangeType::EmailSubmission,
            ))
            .await
        }
        "EmailSubmission/query" => typed(ctx, arguments, submission_query::submission_query).await,
        "EmailSubmission/queryChanges" => {
            Box::pin(submission_query::submission_query_changes(ctx, arguments)).await
        }
        "EmailSubmission/set" => typed(ctx, arguments, email_submission::submission_set).await,
        "VacationResponse/get" => Box::pin(list_get::<VacationResponse>(ctx, arguments)).await,
        "VacationResponse/set" => typed(ctx, arguments, super::vacation::vacation_set).await,
        _ => Err(MethodError::UnknownMethod),
    }
}

/// Runs one method call, turning a panic inside it into `serverFail` for
/// that call alone, with the panic message as its cause (RFC 8620 §3.6.2:
/// the other calls of the request still run).
pub async fn guarded<T>(
    method: &str,
    call: impl Future<Output = Result<T, MethodError>>,
) -> Result<T, MethodError> {
    AssertUnwindSafe(call)
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| {
            let message = panic
                .downcast_ref::<&str>()
                .map(|text| text.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Err(MethodError::server_fail(
                format_args!("{method} handler panicked"),
                message,
            ))
        })
}

/// Runs a validated request for an authenticated account. `credential` tags
/// what it authenticated with, for the response's `sessionState`
/// ([`super::session::session_state`]). The error is the request-level
/// `limit` for a request over its build budget (module doc).
///
/// Its span is at debug level (a span per request is a few percent of a
/// list view's call, issue 20); a failed call's log names the account.
#[tracing::instrument(level = "debug", skip_all, fields(account = account.id, calls = request.method_calls.len()))]
pub async fn handle(
    jmap: &Jmap,
    account: &Account,
    request: Request<CallArguments>,
    credential: &str,
) -> Result<Response, RequestError> {
    let mut responses: Vec<(String, Arguments, String)> =
        Vec::with_capacity(request.method_calls.len());
    let mut created_ids = request.created_ids.clone().unwrap_or_default();
    let mut budget = RequestBudget::held(&jmap.limits, &jmap.holdings, account.id);
    let mut changed_state = false;
    for Invocation(method, mut arguments, call_id) in request.method_calls {
        let started = Instant::now();
        let mut follow_ups = Vec::new();
        let enabled = offered(jmap, capability_of(&method))
            && request.using.iter().any(|c| c == capability_of(&method));
        // Typed arguments hold no result reference (`CallArguments`).
        let resolved = match &mut arguments {
            CallArguments::Map(map) => reference::resolve(map, &responses, &mut budget),
            CallArguments::EmailGet(_) => Ok(()),
        };
        let result = match resolved {
            // RFC 8620 §3.3: a method of a capability the request did not
            // name in `using`, or that this instance does not offer.
            Ok(()) if !enabled => Ok(Err(MethodError::UnknownMethod)),
            Ok(()) => {
                let mut ctx = CallContext {
                    jmap,
                    account,
                    created_ids: &mut created_ids,
                    budget: &mut budget,
                    follow_ups: Vec::new(),
                };
                // Round trips to a server behind this one are counted under the method.
                let calling = crate::metrics::JMAP_METHOD
                    .scope(method_label(&method), call(&mut ctx, &method, arguments));
                let result = guarded(&method, calling).await;
                follow_ups = std::mem::take(&mut ctx.follow_ups);
                let result = match result {
                    Ok(arguments) => match charge(&mut budget, &arguments) {
                        Ok(()) => Ok(Ok(arguments)),
                        Err(OverBudget::Request) => Err(()),
                        Err(OverBudget::Server) => Ok(Err(server_busy())),
                    },
                    Err(MethodError::TooMuchBuilt(_)) => Err(()),
                    Err(error) => Ok(Err(error)),
                };
                budget.end_call();
                result
            }
            Err(ReferenceError::Method(error)) => Ok(Err(error)),
            Err(ReferenceError::OverBudget(OverBudget::Request)) => Err(()),
            Err(ReferenceError::OverBudget(OverBudget::Server)) => Ok(Err(server_busy())),
        };
        observe_duration(jmap, &method, started);
        let result = match result {
            Ok(result) => result,
            Err(()) if !changed_state => {
                tracing::info!(
                    account = account.id,
                    %method,
                    call_id,
                    "request over its build budget: limit"
                );
                return Err(RequestError::TooMuchBuilt {
                    max: jmap.limits.max_size_built(),
                });
            }
            Err(()) => Err(MethodError::OverBudget(format!(
                "this call would take the request over {} octets of JSON built \
                 ({} × maxSizeRequest); earlier calls changed state, so they are answered",
                jmap.limits.max_size_built(),
                super::BUILT_BYTES_PER_REQUEST_BYTE,
            ))),
        };
        match result {
            Ok(value) => {
                changed_state |= method.ends_with("/set") || method.ends_with("/import");
                responses.push((method, value, call_id.clone()));
            }
            Err(error) => {
                let arguments = tracing::info_span!("handle", account = account.id)
                    .in_scope(|| error_response(&method, &call_id, &error));
                responses.push(("error".to_string(), arguments.into(), call_id.clone()));
            }
        }
        for (name, value) in follow_ups {
            changed_state = true;
            responses.push((name, value.into(), call_id.clone()));
        }
    }
    Ok(Response {
        method_responses: responses,
        created_ids: request.created_ids.map(|_| created_ids),
        session_state: super::session::session_state(account, credential),
    })
}

/// Takes a response's JSON octets from the request's budget: a value's
/// counted, text's known.
fn charge(budget: &mut RequestBudget, arguments: &Arguments) -> Result<(), OverBudget> {
    match arguments {
        Arguments::Value(value) => budget.charge_json(value),
        Arguments::Text { text, .. } => budget.charge_bytes(text.len() as u64),
    }
}

/// A method's name as a metrics label: `unknown` for a name not in [`METHODS`].
pub(crate) fn method_label(method: &str) -> &'static str {
    METHODS
        .iter()
        .find(|m| **m == method)
        .copied()
        .unwrap_or("unknown")
}

/// Records a call's latency under its method name (`unknown` for a name not in [`METHODS`]).
fn observe_duration(jmap: &Jmap, method: &str, started: Instant) {
    let label = method_label(method);
    jmap.metrics
        .method_duration
        .get_or_create(&MethodLabel { method: label })
        .observe(started.elapsed().as_secs_f64());
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use serde_json::{Value, json};

    use super::*;

    /// A log sink for a test subscriber.
    #[derive(Clone, Default)]
    struct Log(Arc<Mutex<Vec<u8>>>);

    impl Write for Log {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Runs `body` with a subscriber writing every event at debug level
    /// and above; returns its result and the log text.
    fn logged<T>(body: impl FnOnce() -> T) -> (T, String) {
        let log = Log::default();
        let writer = log.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .finish();
        let result = tracing::subscriber::with_default(subscriber, body);
        let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
        (result, text)
    }

    #[test]
    fn a_panicking_method_is_server_fail_for_its_call_and_is_logged_once() {
        let (responses, log) = logged(|| {
            futures::executor::block_on(async {
                let panicked = guarded("Email/get", async {
                    if json!(1).is_number() {
                        panic!("the handler broke");
                    }
                    Ok(json!({}))
                })
                .await;
                let fine = guarded("Core/echo", async { Ok(json!({"a": 1})) }).await;
                let error = panicked.unwrap_err();
                (error_response("Email/get", "c1", &error), fine)
            })
        });
        let (error, fine) = responses;
        // The panic text is logged, never sent.
        assert_eq!(
            error,
            json!({"type": "serverFail", "description": "internal error"})
        );
        assert_eq!(fine.unwrap(), json!({"a": 1}));
        assert_eq!(log.lines().count(), 1, "{log}");
        assert!(log.contains("ERROR") && log.contains("serverFail"), "{log}");
        assert!(
            log.contains("Email/get") && log.contains("c1") && log.contains("the handler broke"),
            "{log}"
        );
        // A method error is not a panic: it passes through unchanged.
        let error = futures::executor::block_on(guarded("Email/get", async {
            Err::<Value, _>(MethodError::UnknownMethod)
        }));
        assert_eq!(error.unwrap_err(), MethodError::UnknownMethod);
    }

    #[test]
    fn every_server_fail_is_logged_with_its_cause_and_other_errors_are_not_errors() {
        let failure = MethodError::server_fail("reading blob 3f2a", "connection reset");
        let (response, log) = logged(|| error_response("Email/import", "i7", &failure));
        assert_eq!(
            response,
            json!({"type": "serverFail", "description": "internal error"})
        );
        assert_eq!(log.lines().count(), 1, "{log}");
        assert!(log.contains("ERROR"), "{log}");
        for part in ["Email/import", "i7", "reading blob 3f2a: connection reset"] {
            assert!(log.contains(part), "{part} in {log}");
        }
        let (response, log) = logged(|| {
            error_response(
                "Email/get",
                "g1",
                &MethodError::InvalidArguments("ids must be a list".into()),
            )
        });
        assert_eq!(response["type"], json!("invalidArguments"));
        assert!(!log.contains("ERROR") && log.contains("DEBUG"), "{log}");
    }
}

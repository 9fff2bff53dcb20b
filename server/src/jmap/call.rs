//! What a method handler sees of its request ([`CallContext`]) and how a
//! failed call is answered ([`error_response`]). The handlers take these
//! from here; [`super::dispatch`] runs them.

use std::collections::HashMap;

use serde_json::Value;

use super::Jmap;
use super::budget::RequestBudget;
use super::error::MethodError;
use crate::store::Account;

/// What a method call sees: the server, the authenticated account, the
/// request's creation ids (RFC 8620 §5.3 `createdIds`) and what is left of
/// the request's budget.
pub struct CallContext<'a> {
    pub jmap: &'a Jmap,
    pub account: &'a Account,
    pub created_ids: &'a mut HashMap<String, String>,
    pub budget: &'a mut RequestBudget,
    /// Responses of implicit calls a method made (EmailSubmission/set's
    /// Email/set, RFC 8621 §7.5), answered right after its own with its
    /// call id: (name, arguments).
    pub follow_ups: Vec<(String, Value)>,
}

/// The arguments of the `error` response to a failed call (RFC 8620
/// §3.6.2). A `serverFail` is logged here at error level with the method,
/// the call id and its cause, which goes no further than the log; any other
/// method error is the client's and logged at debug level only.
pub fn error_response(method: &str, call_id: &str, error: &MethodError) -> Value {
    match (error.cause(), error) {
        (Some(cause), _) => tracing::error!(%method, call_id, cause, "serverFail"),
        // The operator has to act (free disk space): not the client's error.
        (None, MethodError::ServerUnavailable(reason)) => {
            tracing::warn!(%method, call_id, reason, "serverUnavailable")
        }
        (None, _) => tracing::debug!(%method, call_id, error = error.type_name(), "method error"),
    }
    error.to_json()
}

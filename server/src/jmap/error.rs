//! JMAP errors exactly as RFC 8620 names them.
//!
//! - [`RequestError`]: request-level errors (§3.6.1), sent as RFC 7807 problem
//!   JSON with a non-200 status by the HTTP layer.
//! - [`MethodError`]: method-level errors (§3.6.2), sent as an `error`
//!   invocation; they never fail the HTTP request.
//! - [`SetError`]: per-object errors of `/set` (§5.3), inside `notCreated`,
//!   `notUpdated`, `notDestroyed`.

use serde_json::{Value, json};

/// The longest error description or problem detail sent, in octets: a
/// description quoting the client's input (a 5 MB property name, a serde
/// message with the offending string) is cut, not echoed back whole.
pub const MAX_DESCRIPTION_BYTES: usize = 1024;

/// `text` cut to at most [`MAX_DESCRIPTION_BYTES`] octets on a character
/// boundary, with `…` marking the cut.
pub fn bounded_description(text: String) -> String {
    if text.len() <= MAX_DESCRIPTION_BYTES {
        return text;
    }
    let mut end = MAX_DESCRIPTION_BYTES - '…'.len_utf8();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut cut = text;
    cut.truncate(end);
    cut.push('…');
    cut
}

/// A request-level error (RFC 8620 §3.6.1).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The content type was not `application/json` or the body was not I-JSON.
    #[error("{0}")]
    NotJson(String),
    /// The body was JSON but not a Request object.
    #[error("{0}")]
    NotRequest(String),
    /// `using` named a capability the server does not support.
    #[error("unknown capability {0}")]
    UnknownCapability(String),
    /// A request limit was exceeded; the field is the limit's name (e.g. `maxCallsInRequest`).
    #[error("the request exceeds the {0} limit")]
    Limit(&'static str),
    /// The request, with its result references resolved and the responses
    /// of its calls, would make the server build more than `max` octets of
    /// JSON ([`super::Limits::max_size_built`], a multiple of
    /// `maxSizeRequest`): the `limit` error naming `maxSizeRequest`.
    #[error(
        "the request, with its result references resolved and its responses, \
         would exceed {max} octets ({factor} × maxSizeRequest)",
        factor = super::BUILT_BYTES_PER_REQUEST_BYTE
    )]
    TooMuchBuilt { max: u64 },
    /// The body holds more than `max` JSON values
    /// ([`super::request::MAX_JSON_VALUES`]), whatever its size in octets:
    /// the `limit` error, naming `maxSizeRequest` (the capability limit a
    /// client can act on: a smaller request) with a description saying
    /// which bound it is (issue 43).
    #[error(
        "the request holds more than {max} JSON values, this server's bound on \
         values per request (its size may be under maxSizeRequest)"
    )]
    TooManyValues { max: usize },
}

impl RequestError {
    /// The RFC 8620 type URI.
    pub fn type_uri(&self) -> &'static str {
        match self {
            RequestError::NotJson(_) => "urn:ietf:params:jmap:error:notJSON",
            RequestError::NotRequest(_) => "urn:ietf:params:jmap:error:notRequest",
            RequestError::UnknownCapability(_) => "urn:ietf:params:jmap:error:unknownCapability",
            RequestError::Limit(_)
            | RequestError::TooMuchBuilt { .. }
            | RequestError::TooManyValues { .. } => "urn:ietf:params:jmap:error:limit",
        }
    }

    /// The HTTP status: 413 for `maxSizeRequest` (a body over it, or a
    /// request that would build more than its multiple), else 400.
    pub fn status(&self) -> u16 {
        match self {
            RequestError::Limit("maxSizeRequest")
            | RequestError::TooMuchBuilt { .. }
            | RequestError::TooManyValues { .. } => 413,
            _ => 400,
        }
    }

    /// The RFC 7807 problem details object.
    pub fn problem(&self) -> Value {
        let mut problem = json!({
            "type": self.type_uri(),
            "status": self.status(),
            "detail": bounded_description(self.to_string()),
        });
        match self {
            RequestError::Limit(limit) => problem["limit"] = json!(limit),
            RequestError::TooMuchBuilt { .. } | RequestError::TooManyValues { .. } => {
                problem["limit"] = json!("maxSizeRequest")
            }
            RequestError::NotJson(_)
            | RequestError::NotRequest(_)
            | RequestError::UnknownCapability(_) => {}
        }
        problem
    }
}

/// A method-level error (RFC 8620 §3.6.2, RFC 8621 method sections).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MethodError {
    #[error("unknown method")]
    UnknownMethod,
    #[error("{0}")]
    InvalidArguments(String),
    #[error("{0}")]
    InvalidResultReference(String),
    #[error("account not found")]
    AccountNotFound,
    /// Foo/copy and Blob/copy: the `fromAccountId` is not an account this
    /// user can read (RFC 8620 §5.4, §6.3).
    #[error("the account to copy from is not found")]
    FromAccountNotFound,
    #[error("{0}")]
    Forbidden(String),
    #[error("too many objects in the request (limit {0})")]
    RequestTooLarge(usize),
    /// `requestTooLarge` for more work than the server does for one call or
    /// request (render work, octets parsed, octets built): RFC 8620 §5.1 and
    /// §5.3 name it for "more than the server is willing to process in a
    /// single method call"; the description says which bound.
    #[error("{0}")]
    OverBudget(String),
    /// A handler found, while building its response, that it would take the
    /// request past the JSON octets it may make the server build
    /// ([`super::Limits::max_size_built`]); the dispatcher answers it like
    /// any other response over that budget (the request-level `limit`).
    #[error("the response would pass the request's {0} octets of JSON built")]
    TooMuchBuilt(u64),
    #[error("{0}")]
    UnsupportedFilter(String),
    #[error("{0}")]
    UnsupportedSort(String),
    #[error("the anchor is not in the results")]
    AnchorNotFound,
    #[error("{0}")]
    CannotCalculateChanges(String),
    /// Foo/queryChanges: more changes than the client's `maxChanges` (RFC 8620 §5.6).
    #[error("there are more changes than maxChanges")]
    TooManyChanges,
    #[error("the state does not match ifInState")]
    StateMismatch,
    /// An internal failure. `cause` (what failed and why) is for the log:
    /// the dispatcher writes it once, with the method and call id
    /// ([`super::call::error_response`]); the client sees only
    /// `serverFail` and the description "internal error".
    #[error("internal error")]
    ServerFail { cause: String },
    /// A server resource is temporarily short (RFC 8620 §3.6.2
    /// `serverUnavailable`): the description says which, and a retry after
    /// a backoff may succeed. Today: the store's disk is full
    /// ([`crate::store::StoreError::StorageFull`]): writes fail whole, reads
    /// go on.
    #[error("{0}")]
    ServerUnavailable(String),
}

impl From<crate::mail::writer::WriteError> for MethodError {
    /// A write that failed as a whole: the server holding the mail could
    /// not be reached or refused the session (`serverUnavailable`, a retry
    /// may succeed; the store shows what that server holds, so what it did
    /// before the failure shows too), a store error as any.
    fn from(error: crate::mail::writer::WriteError) -> Self {
        use crate::mail::writer::WriteError;
        match error {
            WriteError::Store(error) => error.into(),
            WriteError::Ingest(error) => {
                MethodError::server_fail("storing a synced message", error)
            }
            WriteError::Internal(error) => MethodError::server_fail("storing a message", error),
            WriteError::Unavailable(text) => MethodError::ServerUnavailable(format!(
                "the mail server behind this one: {text}; what it had done before \
                 stands and shows after the next sync"
            )),
        }
    }
}

impl MethodError {
    /// The error `type` string.
    pub fn type_name(&self) -> &'static str {
        match self {
            MethodError::UnknownMethod => "unknownMethod",
            MethodError::InvalidArguments(_) => "invalidArguments",
            MethodError::InvalidResultReference(_) => "invalidResultReference",
            MethodError::AccountNotFound => "accountNotFound",
            MethodError::FromAccountNotFound => "fromAccountNotFound",
            MethodError::Forbidden(_) => "forbidden",
            MethodError::RequestTooLarge(_)
            | MethodError::OverBudget(_)
            | MethodError::TooMuchBuilt(_) => "requestTooLarge",
            MethodError::UnsupportedFilter(_) => "unsupportedFilter",
            MethodError::UnsupportedSort(_) => "unsupportedSort",
            MethodError::AnchorNotFound => "anchorNotFound",
            MethodError::CannotCalculateChanges(_) => "cannotCalculateChanges",
            MethodError::TooManyChanges => "tooManyChanges",
            MethodError::StateMismatch => "stateMismatch",
            MethodError::ServerFail { .. } => "serverFail",
            MethodError::ServerUnavailable(_) => "serverUnavailable",
        }
    }

    /// `serverFail` caused by `error` while `doing` something ("reading
    /// blob …"): the cause is logged by the dispatcher, never sent.
    pub fn server_fail(doing: impl std::fmt::Display, error: impl std::fmt::Display) -> Self {
        MethodError::ServerFail {
            cause: format!("{doing}: {error}"),
        }
    }

    /// The internal cause of a `serverFail`, for the log; `None` for every
    /// other error (those are the client's, and their description says it).
    pub fn cause(&self) -> Option<&str> {
        match self {
            MethodError::ServerFail { cause } => Some(cause),
            _ => None,
        }
    }

    /// The arguments of the `error` response invocation.
    pub fn to_json(&self) -> Value {
        json!({ "type": self.type_name(), "description": bounded_description(self.to_string()) })
    }
}

/// What a client is told when a write fails on a full store.
pub const STORAGE_FULL: &str =
    "the server's storage is full: nothing was written; retry once space is freed";

impl From<crate::store::StoreError> for MethodError {
    fn from(error: crate::store::StoreError) -> Self {
        if let crate::store::StoreError::CannotCalculateChanges = error {
            return MethodError::CannotCalculateChanges(
                "the state is not one changes can be calculated from; refetch".into(),
            );
        }
        // Handlers check ids against the account before they write, so a store
        // `NotFound` escaping to here means the account itself is gone (removed
        // while a cached credential still let the request in).
        if let crate::store::StoreError::NotFound = error {
            return MethodError::AccountNotFound;
        }
        if let crate::store::StoreError::StorageFull(_) = error {
            return MethodError::ServerUnavailable(STORAGE_FULL.into());
        }
        MethodError::server_fail("store", error)
    }
}

impl From<crate::mail::load::LoadError> for MethodError {
    fn from(error: crate::mail::load::LoadError) -> Self {
        match error {
            crate::mail::load::LoadError::Store(error) => error.into(),
            crate::mail::load::LoadError::Blob { blob_id, error } => {
                MethodError::server_fail(format_args!("reading blob {blob_id}"), error)
            }
        }
    }
}

/// A per-object error of a `/set` or `/import` method (RFC 8620 §5.3, RFC 8621 §2.5, §4.6, §4.8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetError {
    /// `invalidProperties`, `notFound`, `forbidden`, `mailboxHasChild`, …
    pub kind: &'static str,
    pub description: String,
    /// The offending properties, for `invalidProperties`.
    pub properties: Vec<String>,
    /// The id of the existing object, for `alreadyExists` (RFC 8620 §5.4).
    pub existing_id: Option<String>,
    /// Further properties of the SetError object ([`SetError::with`]):
    /// `notFound` of `blobNotFound` (RFC 8621 §4.6), `maxSize` of
    /// `tooLarge`, `maxRecipients` and `invalidRecipients` (§7.5).
    pub extra: Vec<(&'static str, Value)>,
}

impl SetError {
    /// A SetError of the given type with a description.
    pub fn new(kind: &'static str, description: impl Into<String>) -> Self {
        Self {
            kind,
            description: description.into(),
            properties: Vec::new(),
            existing_id: None,
            extra: Vec::new(),
        }
    }

    /// `invalidProperties` naming the properties at fault.
    pub fn invalid_properties(properties: &[&str], description: impl Into<String>) -> Self {
        Self {
            kind: "invalidProperties",
            description: description.into(),
            properties: properties.iter().map(|p| p.to_string()).collect(),
            existing_id: None,
            extra: Vec::new(),
        }
    }

    /// This error with a further property `name` (RFC 8621 `notFound`,
    /// `maxSize`, `maxRecipients`, `invalidRecipients`).
    pub fn with(mut self, name: &'static str, value: Value) -> Self {
        self.extra.push((name, value));
        self
    }

    /// `notFound`.
    pub fn not_found() -> Self {
        Self::new("notFound", "no such object in this account")
    }

    /// The SetError object.
    pub fn to_json(&self) -> Value {
        let mut value = json!({
            "type": self.kind,
            "description": bounded_description(self.description.clone()),
        });
        if !self.properties.is_empty() {
            value["properties"] = json!(self.properties);
        }
        if let Some(id) = &self.existing_id {
            value["existingId"] = json!(id);
        }
        for (name, extra) in &self.extra {
            value[*name] = extra.clone();
        }
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_are_bounded_on_character_boundaries() {
        assert_eq!(bounded_description("short".into()), "short");
        let exact = "x".repeat(MAX_DESCRIPTION_BYTES);
        assert_eq!(bounded_description(exact.clone()), exact);
        for filler in ["x", "é", "😀"] {
            let long = filler.repeat(5 << 20);
            let cut = bounded_description(long);
            assert!(cut.len() <= MAX_DESCRIPTION_BYTES, "{filler}");
            assert!(cut.ends_with('…'));
        }
        let error = MethodError::InvalidArguments("p".repeat(5 << 20));
        let json = error.to_json();
        assert!(json["description"].as_str().unwrap().len() <= MAX_DESCRIPTION_BYTES);
        let problem = RequestError::NotRequest("q".repeat(5 << 20)).problem();
        assert!(problem["detail"].as_str().unwrap().len() <= MAX_DESCRIPTION_BYTES);
    }

    #[test]
    fn a_server_fail_keeps_its_cause_out_of_the_response() {
        let error = MethodError::server_fail("reading blob ab12", "disk on fire");
        assert_eq!(error.cause(), Some("reading blob ab12: disk on fire"));
        assert_eq!(
            error.to_json(),
            json!({"type": "serverFail", "description": "internal error"})
        );
        let store = MethodError::from(crate::store::StoreError::Conflict("a rule broke".into()));
        assert_eq!(store.type_name(), "serverFail");
        assert!(store.cause().unwrap().starts_with("store: "), "{store:?}");
        assert_eq!(MethodError::StateMismatch.cause(), None);
    }
}

//! The Request and Response objects (RFC 8620 §3.3, §3.4).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::RequestError;

/// `urn:ietf:params:jmap:core` (RFC 8620 §2).
pub const CAPABILITY_CORE: &str = "urn:ietf:params:jmap:core";
/// `urn:ietf:params:jmap:mail` (RFC 8621 §1.3.1).
pub const CAPABILITY_MAIL: &str = "urn:ietf:params:jmap:mail";
/// `urn:ietf:params:jmap:quota` (RFC 9425 §2.1).
pub const CAPABILITY_QUOTA: &str = "urn:ietf:params:jmap:quota";

/// Capabilities a request may name in `using`: the ones implemented, and the
/// other capabilities of the IANA "JMAP Capabilities" registry. Real clients
/// (the `jmap-client` crate among them) name all of those in every request;
/// accepting them keeps such clients working, and a method of a capability
/// not implemented still answers `unknownMethod`. Anything else is
/// `unknownCapability` (RFC 8620 §3.6.1).
pub const SUPPORTED_CAPABILITIES: &[&str] = &[
    CAPABILITY_CORE,
    CAPABILITY_MAIL,
    CAPABILITY_QUOTA,
    "urn:ietf:params:jmap:submission",
    "urn:ietf:params:jmap:vacationresponse",
    "urn:ietf:params:jmap:contacts",
    "urn:ietf:params:jmap:calendars",
    "urn:ietf:params:jmap:websocket",
    "urn:ietf:params:jmap:sieve",
    "urn:ietf:params:jmap:blob",
    "urn:ietf:params:jmap:principals",
    "urn:ietf:params:jmap:mdn",
    "urn:ietf:params:jmap:smimeverify",
];

/// One method call: `[name, arguments, methodCallId]` (RFC 8620 §3.2).
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Invocation(pub String, pub Map<String, Value>, pub String);

/// A JMAP request (RFC 8620 §3.3).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    pub using: Vec<String>,
    pub method_calls: Vec<Invocation>,
    #[serde(default)]
    pub created_ids: Option<HashMap<String, String>>,
}

impl Request {
    /// Parses and validates a request body: `notJSON`, `notRequest`,
    /// `unknownCapability` and the `maxCallsInRequest` limit.
    pub fn parse(body: &[u8], max_calls: usize) -> Result<Self, RequestError> {
        let value: Value = serde_json::from_slice(body).map_err(|error| {
            RequestError::NotJson(format!("the body is not valid JSON: {error}"))
        })?;
        let request: Request = serde_json::from_value(value).map_err(|error| {
            RequestError::NotRequest(format!("not a JMAP Request object: {error}"))
        })?;
        if let Some(unknown) = request
            .using
            .iter()
            .find(|capability| !SUPPORTED_CAPABILITIES.contains(&capability.as_str()))
        {
            return Err(RequestError::UnknownCapability(unknown.clone()));
        }
        if request.method_calls.len() > max_calls {
            return Err(RequestError::Limit("maxCallsInRequest"));
        }
        Ok(request)
    }
}

/// A JMAP response (RFC 8620 §3.4).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Response {
    pub method_responses: Vec<(String, Value, String)>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_ids: Option<HashMap<String, String>>,
    pub session_state: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(body: &str, expected: Result<usize, &str>) {
        let got = Request::parse(body.as_bytes(), 2)
            .map(|r| r.method_calls.len())
            .map_err(|e| e.type_uri());
        match (got, expected) {
            (Ok(n), Ok(m)) => assert_eq!(n, m, "{body}"),
            (Err(uri), Err(suffix)) => assert!(uri.ends_with(suffix), "{body}: {uri}"),
            (got, expected) => panic!("{body}: got {got:?}, expected {expected:?}"),
        }
    }

    #[test]
    fn request_level_errors_are_named_as_rfc8620_section_3_6_1() {
        let core = r#""using":["urn:ietf:params:jmap:core"]"#;
        check(
            &format!(r#"{{{core},"methodCalls":[["Core/echo",{{}},"c1"]]}}"#),
            Ok(1),
        );
        check("{", Err("notJSON"));
        check("\u{0}", Err("notJSON"));
        check("[]", Err("notRequest"));
        check(&format!(r#"{{{core}}}"#), Err("notRequest"));
        check(
            &format!(r#"{{{core},"methodCalls":[["Core/echo",[],"c1"]]}}"#),
            Err("notRequest"),
        );
        check(
            &format!(r#"{{{core},"methodCalls":[["Core/echo",{{}}]]}}"#),
            Err("notRequest"),
        );
        check(
            r#"{"using":["urn:example:nope"],"methodCalls":[]}"#,
            Err("unknownCapability"),
        );
        check(
            &format!(r#"{{{core},"methodCalls":[["a",{{}},"1"],["b",{{}},"2"],["c",{{}},"3"]]}}"#),
            Err("limit"),
        );
    }
}

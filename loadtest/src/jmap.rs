//! A tiny JMAP client toolkit: the session object (RFC 8620 §2), request
//! building (§3.3), method-response checks (§3.4, §3.6) and the checks of the
//! `Mailbox/get`, `Email/query` and `Email/get` responses the scenarios rely on
//! (RFC 8620 §5.1, §5.5; RFC 8621 §2, §4).
//!
//! Every check returns a [`CheckError`] whose [`tag`](CheckError::tag) is a
//! short, stable reason (goose groups its error summary by it) and whose
//! [`detail`](CheckError::detail) says what exactly was wrong.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;
use std::marker::PhantomData;

use reqwest::Url;
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::scenario::{BodyValues, EmailGet};

/// The core capability (RFC 8620 §2).
pub const CAPABILITY_CORE: &str = "urn:ietf:params:jmap:core";
/// The mail capability (RFC 8621 §1.3.1).
pub const CAPABILITY_MAIL: &str = "urn:ietf:params:jmap:mail";
/// The `using` of every request.
pub const USING: [&str; 2] = [CAPABILITY_CORE, CAPABILITY_MAIL];
/// The path of the session resource (RFC 8620 §2.2).
pub const SESSION_PATH: &str = "/.well-known/jmap";
/// The method call id of the single call in each request.
pub const CALL_ID: &str = "c0";

/// Why a response did not pass its checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckError {
    /// Short and stable, such as `notFound not empty`: no ids or values.
    pub tag: String,
    /// The particulars.
    pub detail: String,
}

impl CheckError {
    /// A check error with a short `tag` and a longer `detail`.
    pub fn new(tag: impl Into<String>, detail: impl Into<String>) -> Self {
        CheckError {
            tag: tag.into(),
            detail: detail.into(),
        }
    }
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.detail.is_empty() {
            f.write_str(&self.tag)
        } else {
            write!(f, "{}: {}", self.tag, self.detail)
        }
    }
}

impl std::error::Error for CheckError {}

/// What the load test needs from the session object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    /// `apiUrl` as the server gave it.
    pub api_url: String,
    /// `primaryAccounts["urn:ietf:params:jmap:mail"]`.
    pub account_id: String,
}

/// Reads `apiUrl` and the primary mail account from a session object.
pub fn parse_session(session: &Value) -> Result<Session, CheckError> {
    let api_url = session
        .get("apiUrl")
        .and_then(Value::as_str)
        .filter(|url| !url.is_empty())
        .ok_or_else(|| CheckError::new("session without apiUrl", ""))?;
    let account_id = session
        .get("primaryAccounts")
        .and_then(|accounts| accounts.get(CAPABILITY_MAIL))
        .and_then(Value::as_str)
        .ok_or_else(|| {
            CheckError::new(
                "session without primary mail account",
                format!("primaryAccounts has no {CAPABILITY_MAIL:?}"),
            )
        })?;
    if let Some(capabilities) = session.get("capabilities").and_then(Value::as_object) {
        for capability in USING {
            if !capabilities.contains_key(capability) {
                return Err(CheckError::new(
                    "session lacks a capability",
                    format!("capabilities has no {capability:?}"),
                ));
            }
        }
    } else {
        return Err(CheckError::new("session without capabilities", ""));
    }
    Ok(Session {
        api_url: api_url.to_string(),
        account_id: account_id.to_string(),
    })
}

/// Where API requests go: the session's `apiUrl` resolved against `host`,
/// kept on `host`'s scheme, host and port.
///
/// A server may advertise an `apiUrl` on another origin (a public name behind
/// a proxy, say); the load test only ever sends traffic to the host it was
/// given, so it then keeps the path and query and uses them on `host`. The
/// second value says whether that happened.
pub fn resolve_api_url(host: &Url, api_url: &str) -> Result<(Url, bool), CheckError> {
    let resolved = host
        .join(api_url)
        .map_err(|e| CheckError::new("bad apiUrl", format!("{api_url:?}: {e}")))?;
    if resolved.origin() == host.origin() {
        return Ok((resolved, false));
    }
    let mut on_host = host.clone();
    on_host.set_path(resolved.path());
    on_host.set_query(resolved.query());
    on_host.set_fragment(None);
    Ok((on_host, true))
}

/// A JMAP request object with one method call, id [`CALL_ID`].
pub fn request(method: &str, arguments: Value) -> Value {
    json!({
        "using": USING,
        "methodCalls": [[method, arguments, CALL_ID]],
    })
}

/// `Mailbox/get` of every mailbox (`ids: null`, all properties), as a mail
/// client does to show its folder list.
pub fn mailbox_get(account_id: &str) -> Value {
    json!({ "accountId": account_id, "ids": null })
}

/// `Email/query` of the mailbox, newest first.
pub fn email_query(account_id: &str, mailbox_id: &str, limit: u64) -> Value {
    json!({
        "accountId": account_id,
        "filter": { "inMailbox": mailbox_id },
        "sort": [{ "property": "receivedAt", "isAscending": false }],
        "limit": limit,
    })
}

/// `Email/get` of `ids` with the step's properties and body values.
pub fn email_get(account_id: &str, ids: &[String], get: &EmailGet) -> Value {
    let mut arguments = json!({
        "accountId": account_id,
        "ids": ids,
        "properties": get.properties,
    });
    match get.body_values {
        BodyValues::None => {}
        BodyValues::Html => arguments["fetchHTMLBodyValues"] = Value::Bool(true),
        BodyValues::All => arguments["fetchAllBodyValues"] = Value::Bool(true),
    }
    arguments
}

/// Parses a response body as JSON.
pub fn parse_json(body: &[u8]) -> Result<Value, CheckError> {
    serde_json::from_slice(body).map_err(|e| CheckError::new("response is not JSON", e.to_string()))
}

/// The short description of a request-level error (RFC 8620 §3.6.1), an
/// `application/problem+json` body, if the body is one.
pub fn problem_type(body: &[u8]) -> Option<String> {
    let problem: Value = serde_json::from_slice(body).ok()?;
    let kind = problem.get("type")?.as_str()?;
    Some(
        kind.trim_start_matches("urn:ietf:params:jmap:error:")
            .to_string(),
    )
}

/// A string of a response, borrowed from the body unless it had escapes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Text<'a>(pub Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for TextVisitor<'a> {
            type Value = Text<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Borrowed(text)))
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Owned(text.to_string())))
            }
        }
        deserializer.deserialize_str(TextVisitor(PhantomData))
    }
}

/// The arguments of the response to the single method call of [`request`],
/// read from the response `body` as `T` (a [`Value`], or a typed view such as
/// [`EmailGetArguments`] that borrows from `body` and skips what it does not
/// keep): the body must be UTF-8 and a JSON object, and the first invocation
/// must be named `method` (not `error`) and carry [`CALL_ID`]. Values a view
/// skips are held to JSON's syntax, not to the ranges a [`Value`] checks
/// (a lone surrogate escape, a number past `f64`).
pub fn method_response<'a, T: Deserialize<'a>>(
    body: &'a [u8],
    method: &str,
) -> Result<T, CheckError> {
    #[derive(Deserialize)]
    struct Response<'a> {
        #[serde(rename = "methodResponses", borrow)]
        method_responses: Option<Vec<&'a RawValue>>,
    }
    #[derive(Deserialize)]
    struct ErrorArguments<'a> {
        #[serde(rename = "type", borrow)]
        kind: Option<Text<'a>>,
        #[serde(borrow)]
        description: Option<Text<'a>>,
    }
    // The whole body's UTF-8 once (the values skipped below are checked
    // for JSON syntax only), and an object at the top (RFC 8620 §3.4).
    let text = std::str::from_utf8(body)
        .map_err(|e| CheckError::new("response is not JSON", e.to_string()))?;
    if !text.trim_start().starts_with('{') {
        return Err(CheckError::new(
            "response is not JSON",
            "the response is not a JSON object",
        ));
    }
    let response: Response<'a> = serde_json::from_str(text)
        .map_err(|e| CheckError::new("response is not JSON", e.to_string()))?;
    let responses = response
        .method_responses
        .ok_or_else(|| CheckError::new("no methodResponses", ""))?;
    let (name, arguments, call_id): (Text<'a>, &'a RawValue, Text<'a>) = responses
        .first()
        .and_then(|invocation| serde_json::from_str(invocation.get()).ok())
        .ok_or_else(|| {
            CheckError::new(
                "bad invocation",
                "methodResponses[0] is not a 3-array of name, arguments and call id",
            )
        })?;
    if call_id.0 != CALL_ID {
        return Err(CheckError::new(
            "wrong method call id",
            format!("expected {CALL_ID:?}, got {:?}", call_id.0),
        ));
    }
    if !arguments.get().starts_with('{') {
        return Err(CheckError::new(
            "bad invocation",
            "arguments are not an object",
        ));
    }
    if name.0 == "error" {
        let error: ErrorArguments<'a> = serde_json::from_str(arguments.get())
            .map_err(|e| CheckError::new(format!("{method} error"), e.to_string()))?;
        let kind = error.kind.map_or(Cow::Borrowed("(no type)"), |t| t.0);
        return Err(CheckError::new(
            format!("{method} error: {kind}"),
            error.description.map(|t| t.0).unwrap_or_default(),
        ));
    }
    if name.0 != method {
        return Err(CheckError::new(
            "wrong response name",
            format!("expected {method:?}, got {:?}", name.0),
        ));
    }
    serde_json::from_str(arguments.get())
        .map_err(|e| CheckError::new(format!("bad {method} arguments"), e.to_string()))
}

/// The id of the mailbox with role `inbox` in a `Mailbox/get` response.
pub fn find_inbox(arguments: &Value) -> Result<String, CheckError> {
    let list = list(arguments)?;
    list.iter()
        .find(|mailbox| {
            mailbox
                .get("role")
                .and_then(Value::as_str)
                .is_some_and(|role| role.eq_ignore_ascii_case("inbox"))
        })
        .and_then(|inbox| inbox.get("id").and_then(Value::as_str))
        .map(str::to_string)
        .ok_or_else(|| {
            CheckError::new(
                "no inbox",
                format!("none of {} mailboxes has role \"inbox\"", list.len()),
            )
        })
}

/// The `ids` of an `Email/query` response: at most `limit`, and at least one,
/// as an empty inbox would leave nothing to load-test.
pub fn query_ids(arguments: &Value, limit: u64) -> Result<Vec<String>, CheckError> {
    let ids = arguments
        .get("ids")
        .and_then(Value::as_array)
        .ok_or_else(|| CheckError::new("query without ids", ""))?;
    let ids: Vec<String> = ids
        .iter()
        .map(|id| id.as_str().map(str::to_string))
        .collect::<Option<_>>()
        .ok_or_else(|| CheckError::new("query ids not strings", ""))?;
    if ids.len() as u64 > limit {
        return Err(CheckError::new(
            "query over limit",
            format!("{} ids for limit {limit}", ids.len()),
        ));
    }
    if ids.is_empty() {
        return Err(CheckError::new(
            "inbox is empty",
            "Email/query found no message: load the accounts with mail first",
        ));
    }
    Ok(ids)
}

/// What [`check_email_get`] reads of `Email/get` arguments (RFC 8621 §4.2):
/// the ids in `list`, the property names of each object, and `notFound`;
/// every value but `id` is skipped unread.
#[derive(Debug, Deserialize)]
pub struct EmailGetArguments<'a> {
    /// The objects, by their property names.
    #[serde(borrow)]
    pub list: Option<Vec<EmailProperties<'a>>>,
    /// The ids the server did not find.
    #[serde(rename = "notFound", borrow)]
    pub not_found: Option<Vec<Text<'a>>>,
}

/// One object of an `Email/get` `list`: its `id` (a string, RFC 8620 §1.2)
/// and the names of the properties it carries, whatever their values.
#[derive(Debug, Default)]
pub struct EmailProperties<'a> {
    /// The value of `id`, if the object has one.
    pub id: Option<Text<'a>>,
    /// Every property name, in the order given.
    pub names: Vec<Text<'a>>,
}

impl<'de: 'a, 'a> Deserialize<'de> for EmailProperties<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectVisitor<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for ObjectVisitor<'a> {
            type Value = EmailProperties<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an Email object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
                let mut object = EmailProperties::default();
                while let Some(name) = map.next_key::<Text<'a>>()? {
                    if name.0 == "id" {
                        object.id = Some(map.next_value()?);
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                    object.names.push(name);
                }
                Ok(object)
            }
        }
        deserializer.deserialize_map(ObjectVisitor(PhantomData))
    }
}

/// Checks a `Email/get` response: `list` holds exactly the `expected` ids (in
/// any order, RFC 8620 §5.1), `notFound` is empty, and every object carries
/// every requested property (its value may be null).
pub fn check_email_get(
    arguments: &EmailGetArguments<'_>,
    expected: &[String],
    properties: &[&str],
) -> Result<(), CheckError> {
    if let Some(not_found) = &arguments.not_found
        && !not_found.is_empty()
    {
        let ids: Vec<&str> = not_found.iter().map(|id| id.0.as_ref()).collect();
        return Err(CheckError::new(
            "notFound not empty",
            format!(
                "{} of {} ids not found: {ids:?}",
                not_found.len(),
                expected.len()
            ),
        ));
    }
    let list = arguments
        .list
        .as_ref()
        .ok_or_else(|| CheckError::new("no list", ""))?;
    let mut got = HashSet::with_capacity(list.len());
    for email in list {
        let id = email
            .id
            .as_ref()
            .map(|id| id.0.as_ref())
            .ok_or_else(|| CheckError::new("email without id", ""))?;
        if !got.insert(id) {
            return Err(CheckError::new("duplicate id in list", id.to_string()));
        }
        if let Some(missing) = properties
            .iter()
            .find(|p| !email.names.iter().any(|name| name.0 == **p))
        {
            return Err(CheckError::new(
                format!("missing property {missing}"),
                format!("email {id} lacks {missing:?}"),
            ));
        }
    }
    let wanted: HashSet<&str> = expected.iter().map(String::as_str).collect();
    if got != wanted {
        let missing: Vec<&&str> = wanted.difference(&got).collect();
        let extra: Vec<&&str> = got.difference(&wanted).collect();
        return Err(CheckError::new(
            "list ids differ",
            format!("missing {missing:?}, unexpected {extra:?}"),
        ));
    }
    Ok(())
}

fn list(arguments: &Value) -> Result<&Vec<Value>, CheckError> {
    arguments
        .get("list")
        .and_then(Value::as_array)
        .ok_or_else(|| CheckError::new("no list", ""))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{EMAIL_GET_FULL, FULL_PROPERTIES, IdSelection, METADATA_PROPERTIES};

    fn session_json() -> Value {
        json!({
            "capabilities": {
                "urn:ietf:params:jmap:core": { "maxObjectsInGet": 500 },
                "urn:ietf:params:jmap:mail": {}
            },
            "accounts": { "A13824": { "name": "user1@example.com", "isPersonal": true } },
            "primaryAccounts": { "urn:ietf:params:jmap:mail": "A13824" },
            "username": "user1@example.com",
            "apiUrl": "http://127.0.0.1:8080/jmap/api",
            "downloadUrl": "http://127.0.0.1:8080/jmap/download/{accountId}/{blobId}/{name}?accept={type}",
            "uploadUrl": "http://127.0.0.1:8080/jmap/upload/{accountId}/",
            "eventSourceUrl": "http://127.0.0.1:8080/jmap/eventsource",
            "state": "75128aab4b1b"
        })
    }

    #[test]
    fn session_is_parsed() {
        let session = parse_session(&session_json()).unwrap();
        assert_eq!(
            session,
            Session {
                api_url: "http://127.0.0.1:8080/jmap/api".into(),
                account_id: "A13824".into()
            }
        );
        let mut no_mail = session_json();
        no_mail["primaryAccounts"] = json!({});
        assert_eq!(
            parse_session(&no_mail).unwrap_err().tag,
            "session without primary mail account"
        );
        let mut no_api = session_json();
        no_api.as_object_mut().unwrap().remove("apiUrl");
        assert_eq!(
            parse_session(&no_api).unwrap_err().tag,
            "session without apiUrl"
        );
        let mut no_capability = session_json();
        no_capability["capabilities"]
            .as_object_mut()
            .unwrap()
            .remove(CAPABILITY_MAIL);
        assert_eq!(
            parse_session(&no_capability).unwrap_err().tag,
            "session lacks a capability"
        );
    }

    #[test]
    fn api_url_stays_on_the_host() {
        let host = Url::parse("http://127.0.0.1:8080").unwrap();
        let (url, rewritten) = resolve_api_url(&host, "http://127.0.0.1:8080/jmap/api").unwrap();
        assert_eq!(url.as_str(), "http://127.0.0.1:8080/jmap/api");
        assert!(!rewritten);
        let (url, rewritten) = resolve_api_url(&host, "/jmap/api/").unwrap();
        assert_eq!(url.as_str(), "http://127.0.0.1:8080/jmap/api/");
        assert!(!rewritten);
        let (url, rewritten) =
            resolve_api_url(&host, "https://mail.example.com/jmap/api?x=1").unwrap();
        assert_eq!(url.as_str(), "http://127.0.0.1:8080/jmap/api?x=1");
        assert!(rewritten);
    }

    #[test]
    fn requests_are_shaped_as_rfc_8620() {
        let body = request("Email/query", email_query("A1", "M1", 30));
        assert_eq!(
            body,
            json!({
                "using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
                "methodCalls": [["Email/query", {
                    "accountId": "A1",
                    "filter": { "inMailbox": "M1" },
                    "sort": [{ "property": "receivedAt", "isAscending": false }],
                    "limit": 30
                }, "c0"]]
            })
        );
        assert_eq!(mailbox_get("A1"), json!({ "accountId": "A1", "ids": null }));
        let ids = vec!["e1".to_string(), "e2".to_string()];
        let full = EmailGet {
            name: EMAIL_GET_FULL,
            ids: IdSelection::All,
            properties: FULL_PROPERTIES,
            body_values: BodyValues::All,
        };
        let arguments = email_get("A1", &ids, &full);
        assert_eq!(arguments["fetchAllBodyValues"], json!(true));
        assert_eq!(arguments["ids"], json!(["e1", "e2"]));
        assert_eq!(
            arguments["properties"].as_array().unwrap().len(),
            FULL_PROPERTIES.len()
        );
        let metadata = EmailGet {
            properties: METADATA_PROPERTIES,
            body_values: BodyValues::None,
            ..full.clone()
        };
        let arguments = email_get("A1", &ids, &metadata);
        assert_eq!(arguments["properties"], json!(["mailboxIds", "keywords"]));
        assert!(arguments.get("fetchAllBodyValues").is_none());
        let html = EmailGet {
            body_values: BodyValues::Html,
            ..full
        };
        assert_eq!(
            email_get("A1", &ids, &html)["fetchHTMLBodyValues"],
            json!(true)
        );
    }

    /// `method_response` of `response` written out as a body.
    fn arguments_of(response: &Value, method: &str) -> Result<Value, CheckError> {
        method_response(&serde_json::to_vec(response).unwrap(), method)
    }

    #[test]
    fn method_responses_are_checked() {
        let ok = json!({
            "methodResponses": [["Mailbox/get", { "accountId": "A1", "state": "1", "list": [], "notFound": [] }, "c0"]],
            "sessionState": "75128aab4b1b"
        });
        assert_eq!(
            arguments_of(&ok, "Mailbox/get").unwrap()["state"],
            json!("1")
        );
        assert_eq!(
            arguments_of(&ok, "Email/get").unwrap_err().tag,
            "wrong response name"
        );
        let error = json!({
            "methodResponses": [["error", { "type": "unknownMethod", "description": "no such" }, "c0"]],
            "sessionState": "1"
        });
        assert_eq!(
            arguments_of(&error, "Email/get").unwrap_err(),
            CheckError::new("Email/get error: unknownMethod", "no such")
        );
        let wrong_id = json!({ "methodResponses": [["Email/get", {}, "c9"]] });
        assert_eq!(
            arguments_of(&wrong_id, "Email/get").unwrap_err().tag,
            "wrong method call id"
        );
        assert_eq!(
            arguments_of(&json!({}), "Email/get").unwrap_err().tag,
            "no methodResponses"
        );
        for bad in [
            json!({ "methodResponses": [] }),
            json!({ "methodResponses": [["Email/get", {}]] }),
            json!({ "methodResponses": [["Email/get", {}, 7]] }),
        ] {
            assert_eq!(
                arguments_of(&bad, "Email/get").unwrap_err().tag,
                "bad invocation",
                "{bad}"
            );
        }
        let not_object = json!({ "methodResponses": [["Email/get", [], "c0"]] });
        assert_eq!(
            arguments_of(&not_object, "Email/get").unwrap_err(),
            CheckError::new("bad invocation", "arguments are not an object")
        );
        let not_json = method_response::<Value>(b"<html>", "Email/get").unwrap_err();
        assert_eq!(not_json.tag, "response is not JSON");
        let array = br#"[[["Email/get",{"list":[]},"c0"]]]"#;
        assert_eq!(
            method_response::<Value>(array, "Email/get").unwrap_err(),
            CheckError::new("response is not JSON", "the response is not a JSON object")
        );
        let skipped_not_utf8 =
            b"{\"methodResponses\":[[\"Email/get\",{\"list\":[]},\"c0\"]],\"sessionState\":\"\xff\"}";
        assert_eq!(
            method_response::<Value>(skipped_not_utf8, "Email/get")
                .unwrap_err()
                .tag,
            "response is not JSON"
        );
    }

    #[test]
    fn strings_are_borrowed_unless_escaped() {
        let plain: Text = serde_json::from_str(r#""Mailbox/get""#).unwrap();
        assert!(matches!(plain.0, Cow::Borrowed("Mailbox/get")));
        let escaped: Text = serde_json::from_str(r#""a\"b""#).unwrap();
        assert!(matches!(escaped.0, Cow::Owned(ref text) if text == "a\"b"));
        assert!(serde_json::from_str::<Text>("7").is_err());
    }

    #[test]
    fn problem_details_are_read() {
        let body = br#"{"type":"urn:ietf:params:jmap:error:notRequest","status":400,"detail":"x"}"#;
        assert_eq!(problem_type(body).as_deref(), Some("notRequest"));
        assert_eq!(problem_type(b"<html>"), None);
    }

    #[test]
    fn inbox_is_found_by_role() {
        let arguments = json!({ "list": [
            { "id": "m2", "name": "Archive", "role": "archive" },
            { "id": "m1", "name": "Inbox", "role": "inbox" },
            { "id": "m3", "name": "Stuff", "role": null }
        ], "notFound": [] });
        assert_eq!(find_inbox(&arguments).unwrap(), "m1");
        let none = json!({ "list": [{ "id": "m3", "role": null }] });
        assert_eq!(find_inbox(&none).unwrap_err().tag, "no inbox");
    }

    #[test]
    fn query_ids_are_checked() {
        let arguments = json!({ "ids": ["e3", "e2", "e1"], "position": 0, "queryState": "q" });
        assert_eq!(query_ids(&arguments, 30).unwrap(), vec!["e3", "e2", "e1"]);
        assert_eq!(
            query_ids(&arguments, 2).unwrap_err().tag,
            "query over limit"
        );
        assert_eq!(
            query_ids(&json!({ "ids": [] }), 30).unwrap_err().tag,
            "inbox is empty"
        );
        assert_eq!(
            query_ids(&json!({ "ids": [1] }), 30).unwrap_err().tag,
            "query ids not strings"
        );
    }

    /// `check_email_get` of `arguments` read as an `Email/get` response.
    fn check(
        arguments: &Value,
        expected: &[String],
        properties: &[&str],
    ) -> Result<(), CheckError> {
        let response = json!({ "methodResponses": [["Email/get", arguments, "c0"]] });
        let body = serde_json::to_vec(&response).unwrap();
        let arguments: EmailGetArguments = method_response(&body, "Email/get")?;
        check_email_get(&arguments, expected, properties)
    }

    #[test]
    fn email_get_is_checked() {
        let expected = vec!["e1".to_string(), "e2".to_string()];
        let ok = json!({
            "accountId": "A1", "state": "s",
            "list": [
                { "id": "e2", "mailboxIds": { "m1": true }, "keywords": {} },
                { "id": "e1", "mailboxIds": { "m1": true }, "keywords": { "$seen": true } }
            ],
            "notFound": []
        });
        check(&ok, &expected, METADATA_PROPERTIES).unwrap();

        let not_found = json!({
            "list": [{ "id": "e1", "mailboxIds": {}, "keywords": {} }],
            "notFound": ["e2"]
        });
        assert_eq!(
            check(&not_found, &expected, METADATA_PROPERTIES)
                .unwrap_err()
                .tag,
            "notFound not empty"
        );
        let short = json!({
            "list": [{ "id": "e1", "mailboxIds": {}, "keywords": {} }],
            "notFound": []
        });
        assert_eq!(
            check(&short, &expected, METADATA_PROPERTIES)
                .unwrap_err()
                .tag,
            "list ids differ"
        );
        let missing_property = json!({
            "list": [
                { "id": "e1", "mailboxIds": {} },
                { "id": "e2", "mailboxIds": {}, "keywords": {} }
            ],
            "notFound": []
        });
        assert_eq!(
            check(&missing_property, &expected, METADATA_PROPERTIES)
                .unwrap_err()
                .tag,
            "missing property keywords"
        );
        let null_is_fine = json!({
            "list": [
                { "id": "e1", "mailboxIds": {}, "keywords": null },
                { "id": "e2", "mailboxIds": {}, "keywords": {} }
            ],
            "notFound": []
        });
        check(&null_is_fine, &expected, METADATA_PROPERTIES).unwrap();
        let duplicate = json!({
            "list": [
                { "id": "e1", "mailboxIds": {}, "keywords": {} },
                { "id": "e1", "mailboxIds": {}, "keywords": {} }
            ],
            "notFound": []
        });
        assert_eq!(
            check(&duplicate, &expected, METADATA_PROPERTIES)
                .unwrap_err()
                .tag,
            "duplicate id in list"
        );
        let without_id = json!({ "list": [{ "mailboxIds": {}, "keywords": {} }], "notFound": [] });
        assert_eq!(
            check(&without_id, &expected, METADATA_PROPERTIES)
                .unwrap_err()
                .tag,
            "email without id"
        );
        assert_eq!(
            check(&json!({ "notFound": [] }), &expected, METADATA_PROPERTIES)
                .unwrap_err()
                .tag,
            "no list"
        );
        let numeric_id = json!({ "list": [{ "id": 1, "mailboxIds": {}, "keywords": {} }] });
        assert_eq!(
            check(&numeric_id, &expected, METADATA_PROPERTIES)
                .unwrap_err()
                .tag,
            "bad Email/get arguments"
        );
        assert_eq!(
            check(&not_found, &expected, METADATA_PROPERTIES)
                .unwrap_err()
                .detail,
            r#"1 of 2 ids not found: ["e2"]"#
        );
    }
}

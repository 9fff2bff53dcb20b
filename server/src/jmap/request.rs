//! The Request and Response objects (RFC 8620 §3.3, §3.4).

use std::collections::HashMap;

use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::error::RequestError;
use super::mail::email::get_arguments::EmailGetArguments;

/// `urn:ietf:params:jmap:core` (RFC 8620 §2).
pub const CAPABILITY_CORE: &str = "urn:ietf:params:jmap:core";
/// `urn:ietf:params:jmap:mail` (RFC 8621 §1.3.1).
pub const CAPABILITY_MAIL: &str = "urn:ietf:params:jmap:mail";
/// `urn:ietf:params:jmap:quota` (RFC 9425 §2.1).
pub const CAPABILITY_QUOTA: &str = "urn:ietf:params:jmap:quota";

/// `urn:ietf:params:jmap:submission` (RFC 8621 §1.3.2).
pub const CAPABILITY_SUBMISSION: &str = "urn:ietf:params:jmap:submission";
/// `urn:ietf:params:jmap:vacationresponse` (RFC 8621 §1.3.3).
pub const CAPABILITY_VACATION: &str = "urn:ietf:params:jmap:vacationresponse";

/// Capabilities a request may name in `using`: the ones implemented, and the
/// other capabilities of the IANA "JMAP Capabilities" registry. Real clients
/// (the `jmap-client` crate among them) name all of those in every request;
/// accepting them keeps such clients working, and a method of a capability
/// not implemented still answers `unknownMethod`. So does a method of
/// submission where the instance does not offer it (no way to send: ADR
/// 0008), though the name stays accepted here. Anything else is
/// `unknownCapability` (RFC 8620 §3.6.1).
pub const SUPPORTED_CAPABILITIES: &[&str] = &[
    CAPABILITY_CORE,
    CAPABILITY_MAIL,
    CAPABILITY_QUOTA,
    CAPABILITY_SUBMISSION,
    CAPABILITY_VACATION,
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
///
/// `A` is what the arguments are read into: a `Map` of values (any
/// method's, as the JMAP proxy takes them apart), or [`CallArguments`]
/// (what this server runs).
#[derive(Debug, Clone, Serialize)]
pub struct Invocation<A = Map<String, Value>>(pub String, pub A, pub String);

/// What a method call's arguments are read into, knowing the method's name
/// (the invocation's first element, read before them).
pub trait MethodArguments: Sized {
    /// Reads the arguments of a call to `method` from `deserializer`.
    fn deserialize_for<'de, D: serde::Deserializer<'de>>(
        method: &str,
        deserializer: D,
    ) -> Result<Self, D::Error>;
}

impl MethodArguments for Map<String, Value> {
    fn deserialize_for<'de, D: serde::Deserializer<'de>>(
        _method: &str,
        deserializer: D,
    ) -> Result<Self, D::Error> {
        Map::deserialize(deserializer)
    }
}

/// The arguments of a call this server runs (RFC 8620 §3.2): a `Map` of
/// values, in which result references are resolved and from which each
/// method reads its type, or, for an Email/get whose arguments are exactly
/// its own (no `#` reference among them), those arguments already in their
/// type, read in the same pass as the request ([`get_arguments`]; ADR 0003,
/// session 23).
///
/// [`get_arguments`]: super::mail::email::get_arguments
#[derive(Debug, Clone)]
pub enum CallArguments {
    /// Any method's arguments as JSON values.
    Map(Map<String, Value>),
    /// An Email/get's arguments in their type.
    EmailGet(Box<EmailGetArguments>),
}

impl CallArguments {
    /// The arguments as a `Map` of values (Email/get's typed arguments
    /// written out, each present: [`EmailGetArguments::into_map`]).
    pub fn into_map(self) -> Map<String, Value> {
        match self {
            CallArguments::Map(map) => map,
            CallArguments::EmailGet(typed) => typed.into_map(),
        }
    }
}

impl MethodArguments for CallArguments {
    fn deserialize_for<'de, D: serde::Deserializer<'de>>(
        method: &str,
        deserializer: D,
    ) -> Result<Self, D::Error> {
        match method {
            "Email/get" => {
                use super::mail::email::get_arguments::{ReadArguments, read};
                read(deserializer).map(|read| match read {
                    ReadArguments::Typed(typed) => CallArguments::EmailGet(typed),
                    ReadArguments::Map(map) => CallArguments::Map(map),
                })
            }
            _ => Map::deserialize(deserializer).map(CallArguments::Map),
        }
    }
}

impl Serialize for CallArguments {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            CallArguments::Map(map) => map.serialize(serializer),
            CallArguments::EmailGet(typed) => typed.serialize(serializer),
        }
    }
}

impl<'de, A: MethodArguments> Deserialize<'de> for Invocation<A> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use std::marker::PhantomData;
        /// The three elements, the arguments read knowing the method.
        struct Elements<A>(PhantomData<A>);
        /// The arguments of a call to the method it names.
        struct ArgumentsOf<'m, A>(&'m str, PhantomData<A>);
        impl<'de, A: MethodArguments> serde::de::DeserializeSeed<'de> for ArgumentsOf<'_, A> {
            type Value = A;
            fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<A, D::Error> {
                A::deserialize_for(self.0, d)
            }
        }
        impl<'de, A: MethodArguments> serde::de::Visitor<'de> for Elements<A> {
            type Value = Invocation<A>;

            // The derived tuple struct's words.
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("tuple struct Invocation")
            }

            fn visit_seq<S: serde::de::SeqAccess<'de>>(
                self,
                mut seq: S,
            ) -> Result<Invocation<A>, S::Error> {
                let missing = |at| {
                    serde::de::Error::invalid_length(at, &"tuple struct Invocation with 3 elements")
                };
                let method: String = seq.next_element()?.ok_or_else(|| missing(0))?;
                let arguments = seq
                    .next_element_seed(ArgumentsOf(&method, PhantomData))?
                    .ok_or_else(|| missing(1))?;
                let call_id: String = seq.next_element()?.ok_or_else(|| missing(2))?;
                Ok(Invocation(method, arguments, call_id))
            }
        }
        deserializer.deserialize_tuple_struct("Invocation", 3, Elements(PhantomData))
    }
}

/// A JMAP request (RFC 8620 §3.3).
///
/// Deserialized straight from the body's text: `using`, `methodCalls` and
/// `createdIds` into their types, any other member into a `Value` that is
/// then dropped, so that it is still held to JSON's rules (its strings'
/// UTF-8, its numbers' range) as when the whole body was a `Value` first.
/// Stricter than that `Value` was: `using`, `methodCalls` or `createdIds`
/// named twice is not a Request (I-JSON, RFC 7493 §2.3; the `Value` kept
/// the last), nor is an array (a Request is an object, RFC 8620 §3.3).
///
/// `A` is what each call's arguments are read into ([`Invocation`]):
/// [`Request::parse`] reads [`CallArguments`].
#[derive(Debug, Clone)]
pub struct Request<A = Map<String, Value>> {
    pub using: Vec<String>,
    pub method_calls: Vec<Invocation<A>>,
    pub created_ids: Option<HashMap<String, String>>,
}

impl<'de, A: MethodArguments> Deserialize<'de> for Request<A> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Members<A>(std::marker::PhantomData<A>);
        impl<'de, A: MethodArguments> serde::de::Visitor<'de> for Members<A> {
            type Value = Request<A>;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JMAP Request object")
            }

            fn visit_map<M: serde::de::MapAccess<'de>>(
                self,
                mut map: M,
            ) -> Result<Request<A>, M::Error> {
                use serde::de::Error;
                let (mut using, mut method_calls, mut created_ids) = (None, None, None);
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    let twice = match key.as_ref() {
                        "using" => using.replace(map.next_value()?).is_some(),
                        "methodCalls" => method_calls.replace(map.next_value()?).is_some(),
                        "createdIds" => created_ids.replace(map.next_value()?).is_some(),
                        _ => {
                            map.next_value::<Value>()?;
                            false
                        }
                    };
                    if twice {
                        return Err(M::Error::custom(format!("duplicate field `{key}`")));
                    }
                }
                Ok(Request {
                    using: using.ok_or_else(|| M::Error::missing_field("using"))?,
                    method_calls: method_calls
                        .ok_or_else(|| M::Error::missing_field("methodCalls"))?,
                    created_ids: created_ids.flatten(),
                })
            }
        }
        deserializer.deserialize_map(Members(std::marker::PhantomData))
    }
}

impl Request<CallArguments> {
    /// Parses and validates a request body: `notJSON`, `notRequest`,
    /// `unknownCapability`, the `maxCallsInRequest` limit, and the
    /// `limit` error for more than [`MAX_JSON_VALUES`] values
    /// ([`RequestError::TooManyValues`]).
    pub fn parse(body: &[u8], max_calls: usize) -> Result<Self, RequestError> {
        // A JSON value takes 32 octets or more in memory and may be written
        // in two (`0,`): counted before parsing, so a 10 MiB body of tiny
        // values cannot take hundreds of MB (found by a fresh reviewer).
        if json_values_over(body, MAX_JSON_VALUES) {
            return Err(RequestError::TooManyValues {
                max: MAX_JSON_VALUES,
            });
        }
        // Straight into the typed form (one pass, no `Value` of the whole
        // body first: ADR 0003's profile had the two passes at 8 % of a
        // metadata call); only a body that is not a Request is parsed
        // again, to tell `notJSON` from `notRequest`.
        //
        // The body's UTF-8 is checked once, whole, and the text parsed as
        // a `str`: from octets, serde_json checks each string's UTF-8 on
        // its own, about 75 instructions a string however short, and an
        // Email/get of 30 ids has 45 strings (ADR 0003, session 22). A
        // body that is not UTF-8 is parsed from its octets as before, so
        // its error is the same.
        let parsed = match std::str::from_utf8(body) {
            Ok(text) => serde_json::from_str(text),
            Err(_) => serde_json::from_slice(body),
        };
        // Email/get's arguments are read in the same pass and fail where
        // and as a `Map` of them fails (`CallArguments`), so the words are
        // the same as when every call's arguments were a `Map`.
        let request: Request<CallArguments> =
            parsed.map_err(|error| match serde_json::from_slice::<Value>(body) {
                Err(error) => RequestError::NotJson(format!("the body is not valid JSON: {error}")),
                Ok(_) => RequestError::NotRequest(format!("not a JMAP Request object: {error}")),
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

/// The arguments of one method response (RFC 8620 §3.4 `methodResponses`):
/// a JSON value, or JSON text serialized once where it was built and written
/// into the response as it is (Email/get serializes each email as it
/// renders it, on the work pool when heavy, counting its octets exactly:
/// ADR 0002), with the value beside it when it was small enough to keep.
/// Both serialize to the same octets the value would.
#[derive(Debug, Clone)]
pub enum Arguments {
    Value(Value),
    Text {
        /// JSON text this server wrote (never a client's): written into
        /// the response as it is ([`Response::to_json`]), or, when large,
        /// handed to the HTTP body as it is ([`response_pieces`]).
        text: Arc<String>,
        /// The same arguments as a value: kept by a light render, else
        /// parsed from the text the first time a result reference reads
        /// them, and kept for the next (at most one parse per response).
        value: OnceLock<Value>,
    },
}

impl Arguments {
    /// JSON text this server wrote, with the value it was serialized from
    /// when that is worth keeping for result references.
    pub fn text(mut text: String, value: Option<Value>) -> Self {
        // What a request's budget counts is the text's length: no spare
        // capacity is kept beside it (the response may hold it while a
        // slow client reads).
        text.shrink_to_fit();
        Arguments::Text {
            text: Arc::new(text),
            value: value.map(OnceLock::from).unwrap_or_default(),
        }
    }

    /// The arguments as a JSON value, for a result reference into them
    /// (RFC 8620 §3.7): text without its value is parsed once, which only a
    /// reference pays for. Text this server wrote always parses; should it
    /// not, `null`.
    pub fn value(&self) -> &Value {
        match self {
            Arguments::Value(value) => value,
            Arguments::Text { text, value } => {
                value.get_or_init(|| serde_json::from_str(text).unwrap_or(Value::Null))
            }
        }
    }

    /// The arguments as an owned JSON value (text parsed, unless its value
    /// was kept); `null` for text that does not parse.
    pub fn into_value(self) -> Value {
        match self {
            Arguments::Value(value) => value,
            Arguments::Text { text, value } => value
                .into_inner()
                .unwrap_or_else(|| serde_json::from_str(&text).unwrap_or(Value::Null)),
        }
    }

    /// The arguments as JSON text: text as it is, a value as serde_json
    /// writes it.
    pub fn json(&self) -> std::borrow::Cow<'_, str> {
        match self {
            Arguments::Value(value) => std::borrow::Cow::Owned(value.to_string()),
            Arguments::Text { text, .. } => std::borrow::Cow::Borrowed(text.as_str()),
        }
    }

    /// Appends the arguments' JSON to `out`: text as it is, a value as
    /// serde_json writes it.
    fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            Arguments::Value(value) => write_value(out, value),
            Arguments::Text { text, .. } => out.extend_from_slice(text.as_bytes()),
        }
    }
}

/// Appends `value` as compact JSON (serializing a `Value` into memory
/// cannot fail).
pub(crate) fn write_value<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    if serde_json::to_writer(&mut *out, value).is_err() {
        out.extend_from_slice(b"null");
    }
}

/// Serialized as [`Response::to_json`] writes it: text passes through
/// serde_json's `RawValue`, which checks it first (the response itself is
/// written without that check).
impl Serialize for Arguments {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Arguments::Value(value) => value.serialize(serializer),
            Arguments::Text { text, .. } => RawValue::from_string(text.as_str().to_string())
                .map_err(serde::ser::Error::custom)?
                .serialize(serializer),
        }
    }
}

impl From<Value> for Arguments {
    fn from(value: Value) -> Self {
        Arguments::Value(value)
    }
}

/// A JMAP response (RFC 8620 §3.4).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Response {
    pub method_responses: Vec<(String, Arguments, String)>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_ids: Option<HashMap<String, String>>,
    pub session_state: String,
}

impl Response {
    /// The response as JSON, the octets its `Serialize` gives, written
    /// straight into one buffer: each call's text (an Email/get's emails,
    /// serialized where they were rendered) is copied in as it is, not
    /// checked and copied through serde_json's `RawValue` again (issue 20).
    pub fn to_json(&self) -> Vec<u8> {
        response_json(
            &self.method_responses,
            self.created_ids.as_ref(),
            &self.session_state,
        )
    }

    /// The octets of [`Response::to_json`] in pieces ([`response_pieces`]):
    /// an Email/get's text is handed on, not copied.
    pub fn to_pieces(&self) -> Vec<Bytes> {
        response_pieces(
            &self.method_responses,
            self.created_ids.as_ref(),
            &self.session_state,
        )
    }
}

/// A Response object (RFC 8620 §3.4) written straight into one buffer, as
/// [`Response::to_json`] writes it: [`response_pieces`] put together. The
/// JMAP proxy writes its responses with it.
pub(crate) fn response_json<C, S>(
    method_responses: &[(String, Arguments, String)],
    created_ids: Option<&C>,
    session_state: &S,
) -> Vec<u8>
where
    C: Serialize + ?Sized,
    S: Serialize + ?Sized,
{
    let pieces = response_pieces(method_responses, created_ids, session_state);
    let mut out = Vec::with_capacity(pieces.iter().map(Bytes::len).sum());
    for piece in &pieces {
        out.extend_from_slice(piece);
    }
    out
}

/// Text arguments of at least this many octets are their own piece of a
/// response ([`response_pieces`]), shared, not copied; smaller ones are
/// copied in beside the rest (a piece costs the HTTP layer one more
/// buffer to write).
pub const SHARED_TEXT: usize = 4096;

/// A Response object (RFC 8620 §3.4) as JSON, in pieces whose octets one
/// after the other are the response: `methodResponses` (each call's text
/// as it is: one of [`SHARED_TEXT`] octets or more is its own piece,
/// shared with the arguments, never copied; an Email/get's list view is),
/// `createdIds` when given, `sessionState`. The octets are those of the
/// response's `Serialize`.
pub(crate) fn response_pieces<C, S>(
    method_responses: &[(String, Arguments, String)],
    created_ids: Option<&C>,
    session_state: &S,
) -> Vec<Bytes>
where
    C: Serialize + ?Sized,
    S: Serialize + ?Sized,
{
    let copied: usize = method_responses
        .iter()
        .map(|(_, arguments, _)| match arguments {
            Arguments::Text { text, .. } if text.len() < SHARED_TEXT => text.len(),
            Arguments::Text { .. } => 0,
            Arguments::Value(_) => 256,
        })
        .sum();
    let mut pieces = Vec::new();
    let mut out = Vec::with_capacity(copied + 128);
    out.extend_from_slice(b"{\"methodResponses\":[");
    for (position, (name, arguments, call_id)) in method_responses.iter().enumerate() {
        if position > 0 {
            out.push(b',');
        }
        out.push(b'[');
        write_value(&mut out, name);
        out.push(b',');
        match arguments {
            Arguments::Text { text, .. } if text.len() >= SHARED_TEXT => {
                pieces.push(Bytes::from(std::mem::take(&mut out)));
                pieces.push(Bytes::from_owner(SharedText(text.clone())));
            }
            arguments => arguments.write_json(&mut out),
        }
        out.push(b',');
        write_value(&mut out, call_id);
        out.push(b']');
    }
    out.push(b']');
    if let Some(created_ids) = created_ids {
        out.extend_from_slice(b",\"createdIds\":");
        write_value(&mut out, created_ids);
    }
    out.extend_from_slice(b",\"sessionState\":");
    write_value(&mut out, session_state);
    out.push(b'}');
    pieces.push(Bytes::from(out));
    pieces
}

/// Text arguments as a piece of a response body: the octets of the shared text.
struct SharedText(Arc<String>);

impl AsRef<[u8]> for SharedText {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// The most JSON values (numbers, strings, arrays, objects, literals) one
/// request may hold: far more than any JMAP request needs (an Email/set of
/// `maxObjectsInSet` emails of ~100 values each), few enough that parsing
/// it holds tens of MB, not hundreds. More is the `limit` error.
pub const MAX_JSON_VALUES: usize = 200_000;

/// Whether `body` holds more than `max` JSON values, counted without parsing
/// it: one per `,` and per `[` or `{` outside strings, plus one (an upper
/// bound of the values a valid document of those octets holds, give or take
/// the empty `[]` and `{}`).
pub fn json_values_over(body: &[u8], max: usize) -> bool {
    // The count grows by one per octet at most: a body shorter than `max`
    // cannot pass it, and is not scanned (every list view's call: the scan
    // was 5 % of a metadata Email/get's instructions, issue 20).
    if body.len() < max {
        return false;
    }
    let (mut count, mut in_string, mut escaped) = (1usize, false, false);
    for &byte in body {
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b',' | b'[' | b'{' => {
                count += 1;
                if count > max {
                    return true;
                }
            }
            _ => {}
        }
    }
    false
}

#[cfg(test)]
/// What the code before sessions 22 and 23 made of a body: parsed from
/// its octets, every call's arguments a `Map` (what the tests compare
/// with).
pub(crate) fn from_octets_as_maps(body: &[u8]) -> Result<Request, RequestError> {
    serde_json::from_slice::<Request>(body).map_err(|error| {
        match serde_json::from_slice::<Value>(body) {
            Err(error) => RequestError::NotJson(format!("the body is not valid JSON: {error}")),
            Ok(_) => RequestError::NotRequest(format!("not a JMAP Request object: {error}")),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_as_text_write_their_octets_and_are_parsed_once_for_references() {
        let value = serde_json::json!({"list": [{"id": "M1", "threadId": "T\"1"}], "state": "3"});
        let raw = || serde_json::to_string(&value).unwrap();
        let written = |arguments: &Arguments| serde_json::to_string(arguments).unwrap();
        let kept = Arguments::text(raw(), Some(value.clone()));
        let parsed = Arguments::text(raw(), None);
        let plain = Arguments::Value(value.clone());
        assert_eq!(written(&kept), written(&plain));
        assert_eq!(written(&parsed), written(&plain));
        let Arguments::Text { value: memo, .. } = &parsed else {
            unreachable!()
        };
        assert!(memo.get().is_none());
        assert_eq!(parsed.value(), &value);
        // Parsed once, then kept: the next reference reads the same value.
        assert!(std::ptr::eq(parsed.value(), memo.get().unwrap()));
        assert_eq!(kept.value(), &value);
    }

    #[test]
    fn a_response_written_straight_is_the_octets_serde_writes() {
        let get = serde_json::json!({"accountId": "a\"1", "list": [{"id": "e1"}], "state": "3"});
        let mut response = Response {
            method_responses: vec![
                (
                    "Email/query".into(),
                    serde_json::json!({"ids": ["e1"], "total": 1}).into(),
                    "q\u{7}".into(),
                ),
                (
                    "Email/get".into(),
                    Arguments::text(serde_json::to_string(&get).unwrap(), None),
                    "g".into(),
                ),
            ],
            created_ids: None,
            session_state: "s\"1".into(),
        };
        let written = response.to_json();
        assert_eq!(written, serde_json::to_vec(&response).unwrap());
        assert_eq!(
            String::from_utf8(written).unwrap(),
            r#"{"methodResponses":[["Email/query",{"ids":["e1"],"total":1},"q\u0007"],["Email/get",{"accountId":"a\"1","list":[{"id":"e1"}],"state":"3"},"g"]],"sessionState":"s\"1"}"#
        );
        response.created_ids = Some(HashMap::from([("k1".to_string(), "e9".to_string())]));
        response.method_responses.clear();
        assert_eq!(response.to_json(), serde_json::to_vec(&response).unwrap());
        assert_eq!(
            response.to_json(),
            br#"{"methodResponses":[],"createdIds":{"k1":"e9"},"sessionState":"s\"1"}"#
        );
    }

    #[test]
    fn text_arguments_keep_no_spare_capacity_beyond_what_is_counted() {
        let mut text = String::with_capacity(1 << 20);
        text.push_str(r#"{"list":[]}"#);
        let Arguments::Text { text, .. } = Arguments::text(text, None) else {
            unreachable!()
        };
        assert_eq!(text.capacity(), text.len());
    }

    #[test]
    fn a_large_text_is_its_own_piece_shared_and_the_pieces_are_the_responses_octets() {
        let large = serde_json::json!({"list": ["x".repeat(SHARED_TEXT)], "state": "1"});
        let small = serde_json::json!({"list": [], "state": "2"});
        let response = Response {
            method_responses: vec![
                (
                    "Email/get".into(),
                    Arguments::text(serde_json::to_string(&large).unwrap(), None),
                    "a".into(),
                ),
                (
                    "Email/get".into(),
                    Arguments::text(serde_json::to_string(&small).unwrap(), None),
                    "b".into(),
                ),
                (
                    "Core/echo".into(),
                    serde_json::json!({"n": 1}).into(),
                    "c".into(),
                ),
            ],
            created_ids: None,
            session_state: "s".into(),
        };
        let pieces = response.to_pieces();
        assert_eq!(pieces.concat(), serde_json::to_vec(&response).unwrap());
        assert_eq!(pieces.concat(), response.to_json());
        // The head, the large text itself (not a copy), the rest.
        assert_eq!(pieces.len(), 3);
        let Arguments::Text { text, .. } = &response.method_responses[0].1 else {
            unreachable!()
        };
        assert_eq!(pieces[1].as_ptr(), text.as_ptr());
        assert_eq!(&pieces[0][..], br#"{"methodResponses":[["Email/get","#);
    }

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
        // Other members are ignored, but must be JSON; a member named twice
        // is not a Request; createdIds may be null.
        check(
            &format!(r#"{{{core},"x":{{"y":[1,"z"]}},"methodCalls":[],"createdIds":null}}"#),
            Ok(0),
        );
        check(
            &format!(r#"{{{core},"methodCalls":[],"x":1e999}}"#),
            Err("notJSON"),
        );
        check(
            &format!(r#"{{{core},"methodCalls":[],{core}}}"#),
            Err("notRequest"),
        );
        check(r#"[["urn:ietf:params:jmap:core"],[]]"#, Err("notRequest"));
        check(
            &format!(r#"{{{core},"methodCalls":[["a",{{}},"1"],["b",{{}},"2"],["c",{{}},"3"]]}}"#),
            Err("limit"),
        );
    }

    #[test]
    fn bodies_read_as_text_or_octets_parse_alike() {
        // Valid UTF-8 is parsed as a `str`; anything else from its octets.
        // Either way the outcome and its words are serde_json's from octets.
        let bodies: [&[u8]; 6] = [
            b"{\"using\":[\"urn:ietf:params:jmap:core\"],\"methodCalls\":[[\"Core/echo\",{\"a\":\"\\u00e9\\ud83d\\ude00 \xc3\xa9\"},\"c1\"]]}",
            b"{\"using\":[],\"methodCalls\":[[\"Core/echo\",{\"a\":\"\xff\"},\"c1\"]]}",
            b"{\"using\":[],\"methodCalls\":[[\"Core/echo\",{\"a\":\"\xed\xa0\x80\"},\"c1\"]]}",
            b"{\"using\":[],\"methodCalls\":[[\"Core/echo\",{\"a\":\"\\ud800\"},\"c1\"]]}",
            b"{\"using\":[],\"methodCalls\":[[\"Core/echo\",{},\"c1\"]]\xff}",
            b"{\"using\":[],\"methodCalls\":[[\"Core/echo\",{},\"c1\"]],}",
        ];
        for body in bodies {
            let parsed =
                Request::parse(body, 2).map(|r| serde_json::to_value(&r.method_calls).unwrap());
            assert_eq!(
                parsed,
                from_octets_as_maps(body).map(|r| serde_json::to_value(&r.method_calls).unwrap()),
                "{:?}",
                String::from_utf8_lossy(body)
            );
        }
        // The first is a Request, the others are not JSON.
        assert!(Request::parse(bodies[0], 2).is_ok());
        for body in &bodies[1..] {
            assert!(
                matches!(Request::parse(body, 2), Err(RequestError::NotJson(_))),
                "{body:?}"
            );
        }
    }

    #[test]
    fn json_values_are_counted_outside_strings_before_parsing() {
        // A body shorter than the bound is not scanned: it cannot hold
        // more (one value per octet at most, and one more).
        for length in 0..64 {
            let body = vec![b'['; length];
            assert!(!json_values_over(&body, length + 1), "{length}");
            assert_eq!(json_values_over(&body, length), length > 0, "{length}");
        }
        assert!(!json_values_over(b"[1,2,3]", 4));
        assert!(json_values_over(b"[1,2,3]", 3));
        // Commas and brackets inside strings (escaped quotes too) do not count.
        assert!(!json_values_over(br#"["a,b,[c{", "\",,,"]"#, 3));
        let tiny = format!("[{}0]", "0,".repeat(MAX_JSON_VALUES));
        assert!(matches!(
            Request::parse(tiny.as_bytes(), 64),
            Err(RequestError::TooManyValues {
                max: MAX_JSON_VALUES
            })
        ));
    }
}

//! Email/get's arguments (RFC 8620 §5.1, RFC 8621 §4.2): their type, and
//! reading them straight from a request's text.
//!
//! Every list view is an Email/get. Its arguments used to be read as a
//! `Map` of JSON values with the rest of the request, then from the `Map`
//! into their type (that second step alone 2.4 % of a metadata call's time
//! under load; ADR 0003, session 23). [`read`] reads them into their type in
//! the same pass as the rest of
//! the request, as long as they are exactly Email/get's own, each once and
//! of its type; from the first argument that is not (a `#` result
//! reference, an argument of no meaning here, a value of another type, an
//! argument named twice) it reads them as the `Map` they always were, so
//! everything but a plain Email/get is read, resolved and answered as
//! before, with the same errors.

use std::borrow::Cow;
use std::fmt;

use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::jmap::args;
use crate::jmap::error::MethodError;

/// Email/get arguments (RFC 8620 §5.1, RFC 8621 §4.2).
///
/// The body value arguments are written out rather than flattened in from
/// `BodyValueArgs`: serde's `flatten` buffers every argument (the ids too)
/// as generic content before either struct reads it (ADR 0003, session 22).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EmailGetArguments {
    pub account_id: String,
    pub ids: Option<Vec<String>>,
    pub properties: Option<Vec<String>>,
    pub body_properties: Option<Vec<String>>,
    #[serde(default)]
    pub fetch_text_body_values: bool,
    #[serde(default, rename = "fetchHTMLBodyValues")]
    pub fetch_html_body_values: bool,
    #[serde(default)]
    pub fetch_all_body_values: bool,
    #[serde(default)]
    pub max_body_value_bytes: u64,
}

impl EmailGetArguments {
    /// Reads the arguments from a `Map`, ignoring any other argument (as
    /// Email/get always has); a type error or a missing `accountId` is
    /// `invalidArguments`.
    pub fn from_map(arguments: Map<String, Value>) -> Result<Self, MethodError> {
        args::parse(arguments)
    }

    /// The arguments as a `Map`, each argument present (`null` or `false`
    /// or `0` where the request left it out: the same meaning).
    pub fn into_map(self) -> Map<String, Value> {
        match serde_json::to_value(self) {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        }
    }
}

/// What [`read`] made of an Email/get's arguments (the request turns it
/// into its `CallArguments`).
#[derive(Debug)]
pub enum ReadArguments {
    /// Exactly Email/get's own, in their type.
    Typed(Box<EmailGetArguments>),
    /// Anything else: the `Map` a `Map`'s own reading makes.
    Map(Map<String, Value>),
}

/// Reads the arguments of an Email/get from `deserializer` in one pass:
/// [`ReadArguments::Typed`] when they are exactly Email/get's own, each
/// once and of its type, with `accountId` given; otherwise
/// [`ReadArguments::Map`], the very `Map` a `Map`'s own reading makes
/// (module doc). Errors where reading a `Map` errs, with its words.
pub fn read<'de, D: Deserializer<'de>>(deserializer: D) -> Result<ReadArguments, D::Error> {
    deserializer.deserialize_map(ArgumentsVisitor)
}

/// How many Strings an array of them has room for before it is read: a
/// list view's page of ids (clients ask for 20 to 50 at a time).
const IDS_AT_ONCE: usize = 32;

/// What one argument's value was read as.
enum Read {
    Text(String),
    Texts(Option<Vec<String>>),
    Flag(bool),
    Count(u64),
    /// Not of the argument's type: the value, as a `Map` holds it.
    Other(Value),
}

/// The type of an argument's value.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A String.
    Text,
    /// `String[]|null`.
    Texts,
    /// A Boolean.
    Flag,
    /// An `UnsignedInt`.
    Count,
}

impl Kind {
    fn of(name: &str) -> Option<Kind> {
        Some(match name {
            "accountId" => Kind::Text,
            "ids" | "properties" | "bodyProperties" => Kind::Texts,
            "fetchTextBodyValues" | "fetchHTMLBodyValues" | "fetchAllBodyValues" => Kind::Flag,
            "maxBodyValueBytes" => Kind::Count,
            _ => return None,
        })
    }
}

impl EmailGetArguments {
    /// Sets argument `name` to `read`, of its kind ([`Kind::of`]); false
    /// for any other pair (none is read).
    fn set(&mut self, name: &str, read: Read) -> bool {
        match (name, read) {
            ("accountId", Read::Text(id)) => self.account_id = id,
            ("ids", Read::Texts(ids)) => self.ids = ids,
            ("properties", Read::Texts(names)) => self.properties = names,
            ("bodyProperties", Read::Texts(names)) => self.body_properties = names,
            ("fetchTextBodyValues", Read::Flag(flag)) => self.fetch_text_body_values = flag,
            ("fetchHTMLBodyValues", Read::Flag(flag)) => self.fetch_html_body_values = flag,
            ("fetchAllBodyValues", Read::Flag(flag)) => self.fetch_all_body_values = flag,
            ("maxBodyValueBytes", Read::Count(count)) => self.max_body_value_bytes = count,
            _ => return false,
        }
        true
    }

    /// The arguments named in `given` (read so far, in the request's
    /// order) as the `Map` reading them would have made.
    fn into_map_of(mut self, given: Vec<Cow<'_, str>>) -> Map<String, Value> {
        let mut map = Map::new();
        for name in given {
            let value = self.take_value(&name);
            map.insert(name.into_owned(), value);
        }
        map
    }

    /// Argument `name`'s value as a `Map` holds it, taken out.
    fn take_value(&mut self, name: &str) -> Value {
        let texts = |texts: Option<Vec<String>>| match texts {
            Some(texts) => texts.into_iter().map(Value::String).collect(),
            None => Value::Null,
        };
        match name {
            "accountId" => Value::String(std::mem::take(&mut self.account_id)),
            "ids" => texts(self.ids.take()),
            "properties" => texts(self.properties.take()),
            "bodyProperties" => texts(self.body_properties.take()),
            "fetchTextBodyValues" => Value::Bool(self.fetch_text_body_values),
            "fetchHTMLBodyValues" => Value::Bool(self.fetch_html_body_values),
            "fetchAllBodyValues" => Value::Bool(self.fetch_all_body_values),
            "maxBodyValueBytes" => Value::from(self.max_body_value_bytes),
            _ => Value::Null,
        }
    }
}

struct ArgumentsVisitor;

impl<'de> Visitor<'de> for ArgumentsVisitor {
    type Value = ReadArguments;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        // A `Map`'s words, so that the request's error reads as before.
        f.write_str("a map")
    }

    fn visit_map<M: MapAccess<'de>>(self, mut access: M) -> Result<ReadArguments, M::Error> {
        let mut typed = EmailGetArguments::default();
        // The names read so far, in the request's order, while all are
        // Email/get's own, each once, of its type.
        let mut given: Vec<Cow<'de, str>> = Vec::with_capacity(8);
        while let Some(name) = access.next_key::<Cow<'de, str>>()? {
            let kind = Kind::of(&name).filter(|_| !given.contains(&name));
            let read = match kind {
                Some(kind) => access.next_value_seed(ValueOf(kind))?,
                None => Read::Other(access.next_value()?),
            };
            match read {
                Read::Other(value) => {
                    let mut map = typed.into_map_of(given);
                    map.insert(name.into_owned(), value);
                    // The rest as a `Map` reads them (a name given twice:
                    // the last value, as `Map::insert` keeps it).
                    while let Some((name, value)) = access.next_entry::<String, Value>()? {
                        map.insert(name, value);
                    }
                    return Ok(ReadArguments::Map(map));
                }
                read => {
                    if !typed.set(&name, read) {
                        return Err(serde::de::Error::custom(format!(
                            "the argument {name} was read as another type"
                        )));
                    }
                    given.push(name);
                }
            }
        }
        if given.iter().any(|name| name == "accountId") {
            return Ok(ReadArguments::Typed(Box::new(typed)));
        }
        // Without `accountId`: the `Map`, whose reading gives the error.
        Ok(ReadArguments::Map(typed.into_map_of(given)))
    }
}

/// Reads one argument's value: of `kind` when it is, else as a `Value`
/// (exactly as `Value`'s own reading makes it).
struct ValueOf(Kind);

impl<'de> DeserializeSeed<'de> for ValueOf {
    type Value = Read;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Read, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl ValueOf {
    /// A value not of the kind, as `Value` reads it.
    fn other<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Read, D::Error> {
        Value::deserialize(deserializer).map(Read::Other)
    }
}

impl<'de> Visitor<'de> for ValueOf {
    type Value = Read;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Read, E> {
        Ok(match self.0 {
            Kind::Text => Read::Text(text.to_owned()),
            _ => Read::Other(Value::String(text.to_owned())),
        })
    }

    fn visit_string<E: serde::de::Error>(self, text: String) -> Result<Read, E> {
        Ok(match self.0 {
            Kind::Text => Read::Text(text),
            _ => Read::Other(Value::String(text)),
        })
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Read, E> {
        Ok(match self.0 {
            Kind::Texts => Read::Texts(None),
            _ => Read::Other(Value::Null),
        })
    }

    fn visit_bool<E: serde::de::Error>(self, flag: bool) -> Result<Read, E> {
        Ok(match self.0 {
            Kind::Flag => Read::Flag(flag),
            _ => Read::Other(Value::Bool(flag)),
        })
    }

    fn visit_u64<E: serde::de::Error>(self, count: u64) -> Result<Read, E> {
        match self.0 {
            Kind::Count => Ok(Read::Count(count)),
            _ => Self::other(count.into_deserializer()),
        }
    }

    fn visit_i64<E: serde::de::Error>(self, number: i64) -> Result<Read, E> {
        Self::other(number.into_deserializer())
    }

    fn visit_f64<E: serde::de::Error>(self, number: f64) -> Result<Read, E> {
        Self::other(number.into_deserializer())
    }

    fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<Read, S::Error> {
        if self.0 != Kind::Texts {
            return Self::other(SeqAccessDeserializer::new(seq));
        }
        // JSON does not say how long an array is: at its first String,
        // room for a list view's page of ids, not grown four times to it.
        let mut texts = Vec::new();
        while let Some(item) = seq.next_element_seed(ValueOf(Kind::Text))? {
            match item {
                Read::Text(text) => {
                    if texts.capacity() == 0 {
                        texts.reserve_exact(IDS_AT_ONCE);
                    }
                    texts.push(text)
                }
                other => {
                    // Not all Strings: the array as `Value` reads it.
                    let Read::Other(other) = other else {
                        return Err(serde::de::Error::custom("an id read as another type"));
                    };
                    let mut items: Vec<Value> = texts.into_iter().map(Value::String).collect();
                    items.push(other);
                    while let Some(item) = seq.next_element::<Value>()? {
                        items.push(item);
                    }
                    return Ok(Read::Other(Value::Array(items)));
                }
            }
        }
        // A short array gives its room back: a request of many calls of
        // short arrays holds no more than it did as `Value`s (found by a
        // fresh reviewer: 18,000 calls of empty arrays held three times as
        // much).
        if texts.capacity() > 2 * texts.len() {
            texts.shrink_to_fit();
        }
        Ok(Read::Texts(Some(texts)))
    }

    fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<Read, M::Error> {
        Self::other(MapAccessDeserializer::new(map))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jmap::request::{CallArguments, Invocation, Request, from_octets_as_maps};

    /// The room each array of ids keeps once read.
    fn room(ids: &str) -> usize {
        let text = format!(r#"{{"accountId":"A1","ids":{ids}}}"#);
        match read(&mut serde_json::Deserializer::from_str(&text)) {
            Ok(ReadArguments::Typed(typed)) => typed.ids.map_or(0, |ids| ids.capacity()),
            other => panic!("{ids}: {other:?}"),
        }
    }

    #[test]
    fn arrays_of_ids_keep_room_for_a_page_and_short_ones_give_it_back() {
        let ids = |n: usize| {
            let ids: Vec<String> = (0..n).map(|i| format!("M{i}")).collect();
            serde_json::to_string(&ids).unwrap()
        };
        assert_eq!(room("[]"), 0);
        assert_eq!(room(&ids(1)), 1);
        assert_eq!(room(&ids(15)), 15);
        assert_eq!(room(&ids(16)), IDS_AT_ONCE);
        assert_eq!(room(&ids(30)), IDS_AT_ONCE);
        // Past the page, grown as any vector (and within twice its length).
        let grown = room(&ids(100));
        assert!((100..=200).contains(&grown), "{grown}");
    }

    #[test]
    fn email_get_arguments_read_in_their_type_or_as_the_map_they_were() {
        let ids = r#""ids":["Mb1","Mc2"]"#;
        // (arguments, read in their type?, valid?)
        let cases = [
            (format!(r#"{{"accountId":"A1",{ids},"properties":["id","keywords"]}}"#), true, true),
            (
                format!(
                    r#"{{"properties":null,{ids},"bodyProperties":["partId"],"accountId":"A1",
                    "fetchTextBodyValues":true,"fetchHTMLBodyValues":false,
                    "fetchAllBodyValues":true,"maxBodyValueBytes":100}}"#
                ),
                true,
                true,
            ),
            (r#"{"accountId":"A\u0031","ids":["M\u0062\n1"]}"#.into(), true, true),
            (r#"{"accountId":"A1","ids":null,"properties":[]}"#.into(), true, true),
            // A result reference, an argument of no meaning to Email/get,
            // an argument twice (the last one counts, as in a `Map`).
            (
                r##"{"accountId":"A1","#ids":{"resultOf":"q","name":"Email/query","path":"/ids"}}"##
                    .into(),
                false,
                true,
            ),
            (format!(r#"{{"accountId":"A1",{ids},"sort":[{{"x":1e300}}]}}"#), false, true),
            (format!(r#"{{"accountId":"A1",{ids},"ids":["Md3"]}}"#), false, true),
            (format!(r#"{{"accountId":"A0",{ids},"accountId":"A1"}}"#), false, true),
            // Wrong: a type (anywhere in an array too), no accountId, a
            // number not an UnsignedInt, two errors at once.
            (r#"{"accountId":"A1","ids":"Mb1"}"#.into(), false, false),
            (r#"{"accountId":"A1","ids":["Mb1",5,{"a":[1.5,null]},"Mc2"]}"#.into(), false, false),
            (r#"{"accountId":"A1","ids":{}}"#.into(), false, false),
            (r#"{"accountId":7,"ids":[]}"#.into(), false, false),
            (format!(r#"{{{ids},"fetchAllBodyValues":true}}"#), false, false),
            (r#"{}"#.into(), false, false),
            (format!(r#"{{"accountId":"A1",{ids},"maxBodyValueBytes":-1}}"#), false, false),
            (format!(r#"{{"accountId":"A1",{ids},"maxBodyValueBytes":1.0}}"#), false, false),
            (r#"{"fetchAllBodyValues":1,"ids":[1]}"#.into(), false, false),
        ];
        for (arguments, typed, valid) in cases {
            let body = format!(
                r#"{{"using":["urn:ietf:params:jmap:mail"],"methodCalls":[["Email/get",{arguments},"g"]]}}"#
            );
            let request = Request::parse(body.as_bytes(), 2).unwrap();
            let Invocation(_, read, _) = request.method_calls.into_iter().next().unwrap();
            let Invocation(_, map, _) = from_octets_as_maps(body.as_bytes())
                .unwrap()
                .method_calls
                .into_iter()
                .next()
                .unwrap();
            let read: Result<EmailGetArguments, MethodError> = match read {
                CallArguments::EmailGet(read) => {
                    assert!(typed, "{arguments}");
                    Ok(*read)
                }
                CallArguments::Map(read) => {
                    assert!(!typed, "{arguments}");
                    // The very `Map` the code before read.
                    assert_eq!(read, map, "{arguments}");
                    EmailGetArguments::from_map(read)
                }
            };
            // What the code before made of its `Map`, words and all.
            assert_eq!(read, EmailGetArguments::from_map(map), "{arguments}");
            assert_eq!(read.is_ok(), valid, "{arguments}: {read:?}");
        }
    }

    /// Read in their type, Email/get's arguments are the request's values.
    #[test]
    fn email_get_arguments_read_in_their_type_are_the_requests_values() {
        let Ok(CallArguments::EmailGet(read)) = serde_json::from_str::<Request<CallArguments>>(
            r#"{"using":[],"methodCalls":[["Email/get",{"accountId":"A\u0031","ids":["M\u0062\n1"],
            "maxBodyValueBytes":100,"fetchHTMLBodyValues":true},"g"]]}"#,
        )
        .map(|request| request.method_calls.into_iter().next().unwrap().1) else {
            panic!("not read in their type")
        };
        assert_eq!(
            *read,
            EmailGetArguments {
                account_id: "A1".into(),
                ids: Some(vec!["Mb\n1".into()]),
                fetch_html_body_values: true,
                max_body_value_bytes: 100,
                ..Default::default()
            }
        );
    }

    /// An Email/get call that is not a Request's has the words it had.
    #[test]
    fn an_email_get_call_that_is_not_a_requests_has_the_words_it_had() {
        for calls in [
            r#"[["Email/get",[],"g"]]"#,
            r#"[["Email/get",null,"g"]]"#,
            r#"[["Email/get",{"ids":[1,2}]]"#,
            r#"[["Email/get",{"ids":["a"]}]]"#,
            r#"[["Email/get",{"ids":["a"]},"g","h"]]"#,
        ] {
            let body = format!(r#"{{"using":[],"methodCalls":{calls}}}"#);
            let error = Request::parse(body.as_bytes(), 2).unwrap_err();
            assert_eq!(
                Err(error),
                from_octets_as_maps(body.as_bytes()).map(|_| ()),
                "{calls}"
            );
        }
    }
}

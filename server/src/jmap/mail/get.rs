//! Foo/get (RFC 8620 §5.1) scaffolding shared by Mailbox/get, Email/get,
//! Thread/get, Identity/get, EmailSubmission/get (and Email/parse, whose
//! `blobIds` behave like `ids`): [`ListGet`] for a type read as one list,
//! the requested ids, the split into found and `notFound`, the response.

use rustc_hash::FxHashSet;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::jmap::args;
use crate::jmap::call::CallContext;
use crate::jmap::error::MethodError;

/// The arguments of a Foo/get (RFC 8620 §5.1) with no others: `ids` and
/// `properties` null mean all.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetArgs {
    pub account_id: String,
    pub ids: Option<Vec<String>>,
    pub properties: Option<Vec<String>>,
}

args::account_arguments!(GetArgs);

/// A Foo/get over objects read as one list (Mailbox, Identity,
/// EmailSubmission, VacationResponse): the account, the properties asked
/// for (all of `all` when null), and the ids (`None`: all).
pub struct ListGet {
    pub account_id: String,
    pub properties: Vec<&'static str>,
    pub requested: Option<Vec<String>>,
}

impl ListGet {
    /// Reads a Foo/get's arguments for the account of `ctx`:
    /// `invalidArguments`, `accountNotFound`, `requestTooLarge` as RFC 8620
    /// §5.1 names them.
    pub fn read(
        ctx: &CallContext<'_>,
        arguments: Map<String, Value>,
        all: &'static [&'static str],
    ) -> Result<Self, MethodError> {
        let request: GetArgs = args::parse_for(ctx.account, arguments)?;
        let properties = named_properties(request.properties.as_deref(), all)?;
        let limit = ctx.jmap.limits.max_objects_in_get;
        let requested = request
            .ids
            .map(|ids| requested_ids(ids, limit))
            .transpose()?;
        Ok(Self {
            account_id: request.account_id,
            properties,
            requested,
        })
    }

    /// The response over `rows` (all the account has) at `state`: every
    /// row when no ids were asked for, else the rows whose id (`id_of`)
    /// each requested id parses to (`parse`), in request order.
    pub fn respond<R>(
        self,
        state: i64,
        rows: &[R],
        parse: impl Fn(&str) -> Option<i64>,
        id_of: impl Fn(&R) -> i64,
        render: impl Fn(&R, &[&'static str]) -> Value,
    ) -> Value {
        let properties = &self.properties;
        let (list, not_found) = match &self.requested {
            None => (
                rows.iter().map(|row| render(row, properties)).collect(),
                Vec::new(),
            ),
            Some(requested) => found(requested, |id| {
                let id = parse(id)?;
                let row = rows.iter().find(|row| id_of(row) == id)?;
                Some(render(row, properties))
            }),
        };
        get_response(self.account_id, state, list, not_found)
    }
}

/// The object of the requested `properties` (names already validated), each
/// valued by `value`, in the order they were asked for.
pub fn object_of(properties: &[&'static str], value: impl Fn(&str) -> Value) -> Value {
    let mut object = Map::new();
    for property in properties {
        object.insert(property.to_string(), value(property));
    }
    Value::Object(object)
}

/// The ids of a Foo/get in request order without repeats:
/// `requestTooLarge` when more than `limit` (`maxObjectsInGet`) were sent.
pub fn requested_ids(ids: Vec<String>, limit: u64) -> Result<Vec<String>, MethodError> {
    if ids.len() as u64 > limit {
        return Err(MethodError::RequestTooLarge(limit as usize));
    }
    let mut seen = FxHashSet::with_capacity_and_hasher(ids.len(), Default::default());
    let first: Vec<bool> = ids.iter().map(|id| seen.insert(id.as_str())).collect();
    drop(seen);
    let mut ids = ids;
    if first.contains(&false) {
        let mut first = first.into_iter();
        ids.retain(|_| first.next().unwrap_or(false));
    }
    Ok(ids)
}

/// Renders each requested id that `render` finds, in request order; the
/// others are `notFound`. Returns `(list, notFound)`.
pub fn found<T>(
    requested: &[String],
    mut render: impl FnMut(&str) -> Option<T>,
) -> (Vec<T>, Vec<String>) {
    let mut list = Vec::with_capacity(requested.len());
    let mut not_found = Vec::new();
    for id in requested {
        match render(id) {
            Some(object) => list.push(object),
            None => not_found.push(id.clone()),
        }
    }
    (list, not_found)
}

/// Parses property names; unknown or malformed ones are `invalidArguments` naming them.
pub fn parse_properties<T>(
    names: &[String],
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Vec<T>, MethodError> {
    let mut parsed = Vec::with_capacity(names.len());
    let mut invalid = Vec::new();
    for name in names {
        match parse(name) {
            Some(property) => parsed.push(property),
            None => invalid.push(name.as_str()),
        }
    }
    if invalid.is_empty() {
        Ok(parsed)
    } else {
        Err(MethodError::InvalidArguments(format!(
            "unknown or invalid properties: {}",
            invalid.join(", ")
        )))
    }
}

/// The properties a Foo/get asks for among `all` (every one when null),
/// with `id` always among them; unknown names are `invalidArguments`
/// ([`parse_properties`]).
pub fn named_properties(
    names: Option<&[String]>,
    all: &[&'static str],
) -> Result<Vec<&'static str>, MethodError> {
    let mut properties = match names {
        None => all.to_vec(),
        Some(names) => parse_properties(names, |name| all.iter().find(|p| **p == name).copied())?,
    };
    if !properties.contains(&"id") {
        properties.insert(0, "id");
    }
    Ok(properties)
}

/// The response of a Foo/get (RFC 8620 §5.1): `accountId`, `state` (the
/// type's state string), `list` (the objects, moved in, not copied) and
/// `notFound` (ids asked for that do not exist).
pub fn get_response(
    account_id: String,
    state: i64,
    list: Vec<Value>,
    not_found: Vec<String>,
) -> Value {
    let mut response = Map::new();
    response.insert("accountId".into(), Value::String(account_id));
    response.insert("state".into(), Value::String(state.to_string()));
    response.insert("list".into(), Value::Array(list));
    response.insert(
        "notFound".into(),
        Value::Array(not_found.into_iter().map(Value::String).collect()),
    );
    Value::Object(response)
}

/// [`get_response`] with objects already serialized (JSON text), as JSON
/// text: the same octets [`get_response`] of their values serializes to
/// (its members in the same, sorted, order). `objects` is the list's
/// objects written one after the other, comma-separated. (Email/get writes
/// its objects between [`get_response_head`] and [`get_response_tail`]
/// itself; this is their definition in one piece, for the tests.)
#[cfg(test)]
pub fn get_response_text(
    account_id: &str,
    state: i64,
    objects: &str,
    not_found: &[String],
) -> String {
    let mut out = String::with_capacity(objects.len() + 64 + 16 * not_found.len());
    get_response_head(account_id, &mut out);
    out.push_str(objects);
    get_response_tail(&mut out, state, not_found);
    out
}

/// Appends what [`get_response_text`] writes before the list's objects,
/// `{"accountId":…,"list":[`: a caller that writes its objects after it
/// and then [`get_response_tail`] has the response without copying them.
pub fn get_response_head(account_id: &str, out: &mut String) {
    out.push_str("{\"accountId\":");
    out.push_str(&json(account_id));
    out.push_str(",\"list\":[");
}

/// Appends what [`get_response_text`] writes after the list's objects.
pub fn get_response_tail(out: &mut String, state: i64, not_found: &[String]) {
    out.push_str("],\"notFound\":");
    out.push_str(&json(not_found));
    out.push_str(",\"state\":\"");
    out.push_str(itoa::Buffer::new().format(state));
    out.push_str("\"}");
}

/// A string or list of strings as JSON text (which cannot fail).
fn json<T: Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_string())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn requested_ids_keep_the_first_of_each_and_are_bounded_before_deduplication() {
        let ids = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            requested_ids(ids(&["b", "a", "b", "c", "a"]), 5).unwrap(),
            ids(&["b", "a", "c"])
        );
        assert_eq!(
            requested_ids(ids(&["a", "a", "a"]), 2),
            Err(MethodError::RequestTooLarge(2))
        );
        let (list, not_found) = found(&ids(&["x1", "y", "x2"]), |id| {
            id.starts_with('x').then(|| json!(id))
        });
        assert_eq!(list, vec![json!("x1"), json!("x2")]);
        assert_eq!(not_found, ids(&["y"]));
    }

    #[test]
    fn a_response_of_text_is_the_octets_of_the_response_of_values() {
        let list = vec![
            json!({"id": "M1", "bodyValues": {"1": {"value": "a \"quoted\"\nline ✓"}}}),
            json!({"id": "M2", "keywords": {}, "size": 1234}),
        ];
        let not_found = vec!["M3".to_string(), "M\"4".to_string()];
        let texts: Vec<String> = list
            .iter()
            .map(|value| serde_json::to_string(value).unwrap())
            .collect();
        let values = get_response("A\u{e9}".into(), 42, list, not_found.clone());
        let text = get_response_text("A\u{e9}", 42, &texts.join(","), &not_found);
        assert_eq!(text, serde_json::to_string(&values).unwrap());
        let empty = get_response_text("A1", 7, "", &[]);
        assert_eq!(
            empty,
            r#"{"accountId":"A1","list":[],"notFound":[],"state":"7"}"#
        );
    }
}

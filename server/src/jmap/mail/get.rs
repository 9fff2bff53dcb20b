//! Foo/get (RFC 8620 §5.1) scaffolding shared by Mailbox/get, Email/get,
//! Thread/get, Identity/get, EmailSubmission/get (and Email/parse, whose
//! `blobIds` behave like `ids`): [`list_get`], the Foo/get of a type read
//! as one list ([`ListedObject`]), the requested ids, the split into found
//! and `notFound`, the response.

use std::collections::HashMap;
use std::sync::Arc;

use rustc_hash::FxHashSet;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::jmap::Jmap;
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

/// A type whose Foo/get reads the account's objects as one list (Mailbox,
/// Identity, EmailSubmission, VacationResponse): [`list_get`] is its
/// Foo/get, over what the type says here.
pub trait ListedObject: Sized + Send + Sync + 'static {
    /// Every property, the order `properties: null` renders them in.
    const PROPERTIES: &'static [&'static str];

    /// The object with `properties` only (names already validated).
    fn to_json(&self, properties: &[&'static str]) -> Value;

    /// The object's id as JMAP writes it (`ids` names an object by this
    /// text: the ids are canonical, one text a number).
    fn jmap_id(&self) -> String;

    /// The type's state and every object of `account`.
    fn read_all(
        jmap: &Jmap,
        account: i64,
    ) -> impl Future<Output = Result<(i64, Arc<Vec<Self>>), MethodError>> + Send;
}

/// Handles one Foo/get call of a [`ListedObject`] type: every object when
/// `ids` is null, else those the ids name, in request order; `invalidArguments`,
/// `accountNotFound`, `requestTooLarge` as RFC 8620 §5.1 names them.
#[tracing::instrument(level = "debug", skip_all, fields(account = ctx.account.id, data_type = std::any::type_name::<T>()))]
pub async fn list_get<T: ListedObject>(
    ctx: &mut CallContext<'_>,
    arguments: Map<String, Value>,
) -> Result<Value, MethodError> {
    let request: GetArgs = args::parse_for(ctx.account, arguments)?;
    let properties = named_properties(request.properties.as_deref(), T::PROPERTIES)?;
    let limit = ctx.jmap.limits.max_objects_in_get;
    let requested = request
        .ids
        .map(|ids| requested_ids(ids, limit))
        .transpose()?;
    let (state, rows) = T::read_all(ctx.jmap, ctx.account.id).await?;
    let render = |row: &T| row.to_json(&properties);
    let (list, not_found) = match &requested {
        None => (rows.iter().map(render).collect(), Vec::new()),
        Some(requested) => {
            let by_id: HashMap<String, &T> = rows.iter().map(|row| (row.jmap_id(), row)).collect();
            found(requested, |id| by_id.get(id).map(|row| render(row)))
        }
    };
    Ok(get_response(request.account_id, state, list, not_found))
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
    let (parsed, invalid) = found(names, parse);
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

//! Result references (RFC 8620 §3.7): an argument `#name` whose value is
//! `{resultOf, name, path}` is replaced by the JSON Pointer `path` (with the
//! `*` array wildcard) evaluated on an earlier response of the same request.

use serde_json::{Map, Value};

use super::budget::{OverBudget, RequestBudget, json_size_within};
use super::error::MethodError;
use super::request::Arguments;

/// Why the references of a call did not resolve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReferenceError {
    /// The call's own error: `invalidResultReference`, `invalidArguments`.
    Method(MethodError),
    /// The resolved values would not fit in the request's byte budget
    /// ([`OverBudget::Request`]) or in what the server holds for requests in
    /// flight ([`OverBudget::Server`]).
    OverBudget(OverBudget),
}

impl From<MethodError> for ReferenceError {
    fn from(error: MethodError) -> Self {
        ReferenceError::Method(error)
    }
}

impl From<OverBudget> for ReferenceError {
    fn from(over: OverBudget) -> Self {
        ReferenceError::OverBudget(over)
    }
}

/// Replaces every `#argument` in `arguments` by the value it references in
/// `responses` (earlier `[name, arguments, callId]` responses of this
/// request). Each value is measured (its JSON size) before it is copied and
/// taken from `budget`: a reference that would not fit copies nothing.
pub fn resolve(
    arguments: &mut Map<String, Value>,
    responses: &[(String, Arguments, String)],
    budget: &mut RequestBudget,
) -> Result<(), ReferenceError> {
    let references: Vec<String> = arguments
        .keys()
        .filter(|k| k.starts_with('#'))
        .cloned()
        .collect();
    for key in references {
        let name = &key[1..];
        if arguments.contains_key(name) {
            return Err(MethodError::InvalidArguments(format!(
                "both {name} and #{name} are given"
            ))
            .into());
        }
        let reference = arguments.remove(&key).unwrap_or(Value::Null);
        let value = evaluate(&reference, responses, budget)?;
        arguments.insert(name.to_string(), value);
    }
    Ok(())
}

fn evaluate(
    reference: &Value,
    responses: &[(String, Arguments, String)],
    budget: &mut RequestBudget,
) -> Result<Value, ReferenceError> {
    let invalid = |why: &str| MethodError::InvalidResultReference(why.to_string());
    let field = |name: &str| {
        reference
            .get(name)
            .and_then(Value::as_str)
            .ok_or_else(|| invalid(&format!("a ResultReference needs a string {name}")))
    };
    let (result_of, name, path) = (field("resultOf")?, field("name")?, field("path")?);
    let (response_name, arguments, _) = responses
        .iter()
        .find(|(_, _, call_id)| call_id == result_of)
        .ok_or_else(|| invalid(&format!("no earlier method call has id {result_of}")))?;
    if response_name != name {
        return Err(invalid(&format!(
            "the response to {result_of} is {response_name}, not {name}"
        ))
        .into());
    }
    let selected = select(arguments.value(), path)
        .ok_or_else(|| invalid(&format!("the path {path} does not resolve")))?;
    // Measure before copying: the copy is what a hostile request multiplies.
    let mut size = 2;
    for value in selected.values() {
        let left = budget.bytes_left().saturating_sub(size);
        size += json_size_within(value, left).ok_or(OverBudget::Request)? + 1;
    }
    budget.charge_bytes(size)?;
    Ok(selected.into_value())
}

/// What a path selects, borrowed from the response: one value, or the
/// flattened list a `*` built.
enum Selected<'v> {
    One(&'v Value),
    Many(Vec<&'v Value>),
}

impl<'v> Selected<'v> {
    fn values(&self) -> &[&'v Value] {
        match self {
            Selected::One(value) => std::slice::from_ref(value),
            Selected::Many(values) => values,
        }
    }

    fn into_value(self) -> Value {
        match self {
            Selected::One(value) => value.clone(),
            Selected::Many(values) => Value::Array(values.into_iter().cloned().collect()),
        }
    }
}

/// Evaluates a JSON Pointer (RFC 6901) with the RFC 8620 §3.7 `*` extension:
/// `*` on an array maps the rest of the path over its items, flattening arrays.
pub fn pointer(value: &Value, path: &str) -> Option<Value> {
    select(value, path).map(Selected::into_value)
}

/// [`pointer`] without copying: what the path selects, by reference.
fn select<'v>(value: &'v Value, path: &str) -> Option<Selected<'v>> {
    if path.is_empty() {
        return Some(Selected::One(value));
    }
    let rest = path.strip_prefix('/')?;
    let (token, tail) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let token = token.replace("~1", "/").replace("~0", "~");
    match value {
        Value::Array(items) if token == "*" => {
            let mut out = Vec::new();
            for item in items {
                match select(item, tail)? {
                    Selected::One(Value::Array(inner)) => out.extend(inner),
                    Selected::One(other) => out.push(other),
                    Selected::Many(inner) => out.extend(inner),
                }
            }
            Some(Selected::Many(out))
        }
        Value::Array(items) => {
            let index: usize = token.parse().ok()?;
            select(items.get(index)?, tail)
        }
        Value::Object(map) => select(map.get(&token)?, tail),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// An Email/query answered as a value and an Email/get answered as
    /// text (as a heavy one is): references read both alike.
    fn responses() -> Vec<(String, Arguments, String)> {
        let get =
            json!({"list": [{"threadId": "t1", "x": ["a"]}, {"threadId": "t2", "x": ["b", "c"]}]});
        vec![
            (
                "Email/query".into(),
                json!({"ids": ["e1", "e2"], "total": 2}).into(),
                "q".into(),
            ),
            (
                "Email/get".into(),
                Arguments::text(serde_json::to_string(&get).unwrap(), None),
                "g".into(),
            ),
        ]
    }

    fn check(arguments: Value, expected: Result<Value, &str>) {
        let mut arguments = arguments.as_object().cloned().unwrap();
        let mut budget = RequestBudget::new(&crate::jmap::Limits::default());
        let got =
            resolve(&mut arguments, &responses(), &mut budget).map(|_| Value::Object(arguments));
        match (got, expected) {
            (Ok(got), Ok(expected)) => assert_eq!(got, expected),
            (Err(ReferenceError::Method(error)), Err(kind)) => {
                assert_eq!(error.type_name(), kind)
            }
            (got, expected) => panic!("got {got:?}, expected {expected:?}"),
        }
    }

    #[test]
    fn references_resolve_with_wildcards_and_fail_by_name() {
        check(
            json!({"#ids": {"resultOf": "q", "name": "Email/query", "path": "/ids"}}),
            Ok(json!({"ids": ["e1", "e2"]})),
        );
        check(
            json!({"#ids": {"resultOf": "g", "name": "Email/get", "path": "/list/*/threadId"}}),
            Ok(json!({"ids": ["t1", "t2"]})),
        );
        check(
            json!({"#ids": {"resultOf": "g", "name": "Email/get", "path": "/list/*/x"}}),
            Ok(json!({"ids": ["a", "b", "c"]})),
        );
        check(
            json!({"#ids": {"resultOf": "zz", "name": "Email/query", "path": "/ids"}}),
            Err("invalidResultReference"),
        );
        check(
            json!({"#ids": {"resultOf": "q", "name": "Email/get", "path": "/ids"}}),
            Err("invalidResultReference"),
        );
        check(
            json!({"#ids": {"resultOf": "q", "name": "Email/query", "path": "/nope"}}),
            Err("invalidResultReference"),
        );
        check(json!({"#ids": 3}), Err("invalidResultReference"));
        check(
            json!({"ids": [], "#ids": {"resultOf": "q", "name": "Email/query", "path": "/ids"}}),
            Err("invalidArguments"),
        );
    }

    #[test]
    fn a_reference_is_measured_and_charged_before_it_is_copied() {
        let limits = crate::jmap::Limits::default();
        let whole = serde_json::to_vec(&responses()[1].1).unwrap().len() as u64;
        let reference = json!({"#a": {"resultOf": "g", "name": "Email/get", "path": ""}});
        let mut arguments = reference.as_object().cloned().unwrap();
        let mut budget = RequestBudget::new(&limits);
        resolve(&mut arguments, &responses(), &mut budget).unwrap();
        let charged = limits.max_size_built() - budget.bytes_left();
        assert!(
            (whole..whole + 4).contains(&charged),
            "{charged} for {whole}"
        );
        // A budget smaller than the value: refused, nothing copied, nothing charged.
        let mut arguments = reference.as_object().cloned().unwrap();
        let mut small = RequestBudget::new(&limits);
        small.charge_bytes(limits.max_size_built() - whole).unwrap();
        assert_eq!(
            resolve(&mut arguments, &responses(), &mut small),
            Err(ReferenceError::OverBudget(OverBudget::Request))
        );
        assert_eq!(small.bytes_left(), whole);
        assert!(!arguments.contains_key("a"));
    }
}

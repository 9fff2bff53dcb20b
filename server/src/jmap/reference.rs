//! Result references (RFC 8620 §3.7): an argument `#name` whose value is
//! `{resultOf, name, path}` is replaced by the JSON Pointer `path` (with the
//! `*` array wildcard) evaluated on an earlier response of the same request.

use serde_json::{Map, Value};

use super::error::MethodError;

/// Replaces every `#argument` in `arguments` by the value it references in
/// `responses` (earlier `[name, arguments, callId]` responses of this request).
pub fn resolve(
    arguments: &mut Map<String, Value>,
    responses: &[(String, Value, String)],
) -> Result<(), MethodError> {
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
            )));
        }
        let reference = arguments.remove(&key).unwrap_or(Value::Null);
        let value = evaluate(&reference, responses)?;
        arguments.insert(name.to_string(), value);
    }
    Ok(())
}

fn evaluate(
    reference: &Value,
    responses: &[(String, Value, String)],
) -> Result<Value, MethodError> {
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
        )));
    }
    pointer(arguments, path).ok_or_else(|| invalid(&format!("the path {path} does not resolve")))
}

/// Evaluates a JSON Pointer (RFC 6901) with the RFC 8620 §3.7 `*` extension:
/// `*` on an array maps the rest of the path over its items, flattening arrays.
pub fn pointer(value: &Value, path: &str) -> Option<Value> {
    if path.is_empty() {
        return Some(value.clone());
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
                match pointer(item, tail)? {
                    Value::Array(inner) => out.extend(inner),
                    other => out.push(other),
                }
            }
            Some(Value::Array(out))
        }
        Value::Array(items) => {
            let index: usize = token.parse().ok()?;
            pointer(items.get(index)?, tail)
        }
        Value::Object(map) => pointer(map.get(&token)?, tail),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn responses() -> Vec<(String, Value, String)> {
        vec![
            (
                "Email/query".into(),
                json!({"ids": ["e1", "e2"], "total": 2}),
                "q".into(),
            ),
            (
                "Email/get".into(),
                json!({"list": [{"threadId": "t1", "x": ["a"]}, {"threadId": "t2", "x": ["b", "c"]}]}),
                "g".into(),
            ),
        ]
    }

    fn check(arguments: Value, expected: Result<Value, &str>) {
        let mut arguments = arguments.as_object().cloned().unwrap();
        let got = resolve(&mut arguments, &responses()).map(|_| Value::Object(arguments));
        match (got, expected) {
            (Ok(got), Ok(expected)) => assert_eq!(got, expected),
            (Err(error), Err(kind)) => assert_eq!(error.type_name(), kind),
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
}

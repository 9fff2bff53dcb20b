//! Core/echo (RFC 8620 §4.1).

use serde_json::{Map, Value};

/// Returns the arguments unchanged.
pub fn echo(arguments: Map<String, Value>) -> Value {
    Value::Object(arguments)
}

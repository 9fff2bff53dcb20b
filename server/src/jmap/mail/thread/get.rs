//! Thread/get (RFC 8621 §3.1).

use serde_json::{Map, Value};

use crate::jmap::dispatch::CallContext;
use crate::jmap::error::MethodError;

/// Handles one call.
pub async fn thread_get(ctx: &mut CallContext<'_>, arguments: Map<String, Value>) -> Result<Value, MethodError> {
    let _ = (ctx, arguments);
    Err(MethodError::UnknownMethod)
}

//! Foo/set (RFC 8620 §5.3) scaffolding shared by Mailbox/set and Email/set:
//! the checks before any write (`ifInState`, `maxObjectsInSet`) and the
//! response, assembled in a [`SetOutcome`] as the handler goes.

use serde_json::{Map, Value, json};

use crate::jmap::args;
use crate::jmap::error::{MethodError, SetError};

/// The checks of a Foo/set before it writes anything: `stateMismatch`
/// when `ifInState` is given and is not `state` (the type's current
/// state), `requestTooLarge` when it names more than `limit` objects.
pub fn check_request(
    if_in_state: Option<&str>,
    state: i64,
    objects: usize,
    limit: u64,
) -> Result<(), MethodError> {
    args::check_if_in_state(if_in_state, state)?;
    args::check_set_size(objects, limit)
}

/// What a Foo/set did to each object it was asked about.
#[derive(Debug, Default)]
pub struct SetOutcome {
    /// Creation id → the server-set properties of the created object.
    pub created: Map<String, Value>,
    pub not_created: Vec<(String, SetError)>,
    /// Id → null (no server-set property changed).
    pub updated: Map<String, Value>,
    pub not_updated: Vec<(String, SetError)>,
    pub destroyed: Vec<String>,
    pub not_destroyed: Vec<(String, SetError)>,
}

impl SetOutcome {
    /// The response (RFC 8620 §5.3): each of `created`, `updated`,
    /// `destroyed` and the `not…` maps is null when empty.
    pub fn into_response(self, account_id: String, old_state: i64, new_state: i64) -> Value {
        let object_or_null = |map: Map<String, Value>| {
            if map.is_empty() {
                Value::Null
            } else {
                Value::Object(map)
            }
        };
        json!({
            "accountId": account_id,
            "oldState": old_state.to_string(),
            "newState": new_state.to_string(),
            "created": object_or_null(self.created),
            "updated": object_or_null(self.updated),
            "destroyed": if self.destroyed.is_empty() { Value::Null } else { json!(self.destroyed) },
            "notCreated": set_error_map(self.not_created),
            "notUpdated": set_error_map(self.not_updated),
            "notDestroyed": set_error_map(self.not_destroyed),
        })
    }
}

/// `notCreated` / `notUpdated` / `notDestroyed` (RFC 8620 §5.3): id → SetError,
/// or null when there is none.
pub fn set_error_map(errors: Vec<(String, SetError)>) -> Value {
    if errors.is_empty() {
        Value::Null
    } else {
        Value::Object(
            errors
                .into_iter()
                .map(|(id, e)| (id, e.to_json()))
                .collect(),
        )
    }
}

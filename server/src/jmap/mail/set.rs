//! Foo/set (RFC 8620 §5.3) scaffolding shared by the /set methods: the
//! arguments every one takes ([`SetArgs`]), the checks before any write (`ifInState`, `maxObjectsInSet`) and the
//! response, assembled in a [`SetOutcome`] as the handler goes.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::jmap::args;
use crate::jmap::call::CallContext;
use crate::jmap::error::{MethodError, SetError};
use crate::store::States;

/// The arguments every Foo/set takes (RFC 8620 §5.3), a `create` entry
/// being a `C`; a type with arguments of its own flattens them in.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetArgs<C = Map<String, Value>> {
    pub account_id: String,
    pub if_in_state: Option<String>,
    pub create: Option<HashMap<String, C>>,
    pub update: Option<HashMap<String, Map<String, Value>>>,
    pub destroy: Option<Vec<String>>,
}

impl<C: serde::de::DeserializeOwned> args::AccountArguments for SetArgs<C> {
    fn account_id(&self) -> &str {
        &self.account_id
    }
}

impl<C: Sync> SetArgs<C> {
    /// [`check_request`] for this call: its `ifInState` and the objects it
    /// names, against the type's state (`state_of`); the old state.
    pub async fn check(
        &self,
        ctx: &CallContext<'_>,
        state_of: fn(&States) -> i64,
    ) -> Result<i64, MethodError> {
        let objects = object_count(&self.create, &self.update, &self.destroy);
        check_request(ctx, self.if_in_state.as_deref(), objects, state_of).await
    }
}

/// The checks of a Foo/set before it writes anything, against the type's
/// current state (`state_of` the account's states), which it returns for
/// the response's `oldState`: `stateMismatch` when `ifInState` is given and
/// is not that state, `requestTooLarge` when the call names more objects
/// than `maxObjectsInSet`.
pub async fn check_request(
    ctx: &CallContext<'_>,
    if_in_state: Option<&str>,
    objects: usize,
    state_of: fn(&States) -> i64,
) -> Result<i64, MethodError> {
    let state = state_of(&ctx.jmap.store.states(ctx.account.id).await?);
    args::check_if_in_state(if_in_state, state)?;
    args::check_set_size(objects, ctx.jmap.limits.max_objects_in_set)?;
    Ok(state)
}

/// How many objects a Foo/set names: its `create`, `update` and `destroy`
/// entries.
fn object_count<C, U>(
    create: &Option<HashMap<String, C>>,
    update: &Option<HashMap<String, U>>,
    destroy: &Option<Vec<String>>,
) -> usize {
    create.as_ref().map_or(0, HashMap::len)
        + update.as_ref().map_or(0, HashMap::len)
        + destroy.as_ref().map_or(0, Vec::len)
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

//! JMAP for Quotas (RFC 9425): `Quota/get` and `Quota/changes` under the
//! capability `urn:ietf:params:jmap:quota`.
//!
//! An account with a quota (`fastview account add|set --quota`) has one
//! Quota object, id [`QUOTA_ID`]: resource type `octets`, scope `account`,
//! `used` the octets of its messages and pending uploads (each distinct blob
//! once, [`crate::store::Quota`]), `hardLimit` its quota. An account without
//! a quota has none (no limit applies to it).
//!
//! The state string is the object's content — `none`, or `{used}.{hardLimit}`
//! — so it changes exactly when the object does, and Quota/changes compares
//! two states without a log: from any state it can parse, the one object is
//! created, updated or destroyed; a string that is no state of this form is
//! `cannotCalculateChanges`.

use serde_json::{Value, json};

use super::error::MethodError;
use super::mail::changes::ChangesArgs;
use super::mail::get::{GetArgs, parse_properties, requested_ids};
use crate::jmap::call::CallContext;
use crate::store::Quota;

/// The id of an account's one Quota object.
pub const QUOTA_ID: &str = "octets";

/// The properties of a Quota object (RFC 9425 §4.1) this server sets.
const PROPERTIES: &[&str] = &[
    "id",
    "resourceType",
    "used",
    "hardLimit",
    "scope",
    "name",
    "types",
    "description",
];

/// The state string of an account's quota (see the module doc).
pub fn quota_state(quota: &Quota) -> String {
    match quota.limit {
        None => "none".to_string(),
        Some(limit) => format!("{}.{limit}", quota.used),
    }
}

/// Whether a state string names a quota (`Some(true)`), no quota
/// (`Some(false)`), or is not a state of this server (`None`).
fn state_has_quota(state: &str) -> Option<bool> {
    if state == "none" {
        return Some(false);
    }
    let (used, limit) = state.split_once('.')?;
    let number = |text: &str| !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    (number(used) && number(limit)).then_some(true)
}

/// The Quota object of an account with a limit.
fn quota_object(quota: &Quota, limit: i64) -> Value {
    json!({
        "id": QUOTA_ID,
        "resourceType": "octets",
        "used": quota.used,
        "hardLimit": limit,
        "scope": "account",
        "name": "mail storage",
        "types": ["Email"],
        "description": "Octets of the account's messages and of uploads not yet used, each distinct content once.",
    })
}

/// Handles one Quota/get call (RFC 9425 §4.2; `ids: null` lists every quota).
#[tracing::instrument(level = "debug", skip_all, fields(account = ctx.account.id))]
pub async fn quota_get(ctx: &mut CallContext<'_>, request: GetArgs) -> Result<Value, MethodError> {
    // Plan.
    let requested = match request.ids {
        Some(ids) => Some(requested_ids(ids, ctx.jmap.limits.max_objects_in_get)?),
        None => None,
    };
    let properties = match &request.properties {
        Some(names) => Some(parse_properties(names, |name| {
            PROPERTIES.contains(&name).then(|| name.to_string())
        })?),
        None => None,
    };
    // Load.
    let quota = ctx.jmap.store.quota(ctx.account.id).await?;
    // Render.
    let object = quota.limit.map(|limit| quota_object(&quota, limit));
    let wanted = |id: &str| {
        requested
            .as_ref()
            .is_none_or(|ids| ids.iter().any(|i| i == id))
    };
    let list: Vec<Value> = object
        .filter(|_| wanted(QUOTA_ID))
        .map(|mut object| {
            if let (Some(names), Value::Object(fields)) = (&properties, &mut object) {
                fields.retain(|name, _| name == "id" || names.contains(name));
            }
            object
        })
        .into_iter()
        .collect();
    let not_found: Vec<String> = requested
        .unwrap_or_default()
        .into_iter()
        .filter(|id| !(id == QUOTA_ID && quota.limit.is_some()))
        .collect();
    Ok(json!({
        "accountId": request.account_id,
        "state": quota_state(&quota),
        "list": list,
        "notFound": not_found,
    }))
}

/// Handles one Quota/changes call (RFC 9425 §4.3, RFC 8620 §5.2).
#[tracing::instrument(level = "debug", skip_all, fields(account = ctx.account.id))]
pub async fn quota_changes(
    ctx: &mut CallContext<'_>,
    request: ChangesArgs,
) -> Result<Value, MethodError> {
    // Plan.
    if request.max_changes == Some(0) {
        return Err(MethodError::InvalidArguments(
            "maxChanges must be a positive integer".into(),
        ));
    }
    let had_quota = state_has_quota(&request.since_state).ok_or_else(|| {
        MethodError::CannotCalculateChanges("not a Quota state of this server; refetch".into())
    })?;
    // Load.
    let quota = ctx.jmap.store.quota(ctx.account.id).await?;
    // Render.
    let new_state = quota_state(&quota);
    let has_quota = quota.limit.is_some();
    let changed = new_state != request.since_state;
    let ids = |yes: bool| if yes { vec![QUOTA_ID] } else { Vec::new() };
    Ok(json!({
        "accountId": request.account_id,
        "oldState": request.since_state,
        "newState": new_state,
        "hasMoreChanges": false,
        "created": ids(changed && has_quota && !had_quota),
        "updated": ids(changed && has_quota && had_quota),
        "destroyed": ids(changed && !has_quota && had_quota),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quota_states_name_the_object_and_parse_back() {
        let unlimited = Quota {
            limit: None,
            used: 10,
        };
        let limited = Quota {
            limit: Some(100),
            used: 10,
        };
        assert_eq!(quota_state(&unlimited), "none");
        assert_eq!(quota_state(&limited), "10.100");
        assert_eq!(state_has_quota("none"), Some(false));
        assert_eq!(state_has_quota("10.100"), Some(true));
        for bad in ["", "10", "1.", ".1", "a.b", "1.2.3", "-1.5"] {
            assert_eq!(state_has_quota(bad), None, "{bad}");
        }
    }
}

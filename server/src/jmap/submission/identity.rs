//! Identity/get (a [`ListedObject`]), Identity/changes, Identity/set (RFC 8621 §6).
//!
//! An account may send as its own address (the identity it was made with,
//! `mayDelete: false`) and the aliases an operator granted it (`fastview
//! account alias add`; `*@domain` grants the domain). Creating an identity
//! for any other address is `forbiddenFrom`.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::jmap::Jmap;
use crate::jmap::call::CallContext;
use crate::jmap::error::{MethodError, SetError};
use crate::jmap::ids;
use crate::jmap::mail::get::{ListedObject, object_of};
use crate::jmap::mail::set::{SetArgs, SetOutcome};
use crate::store::{IdentityPatch, IdentityRow, StoreError};

/// Every Identity property (RFC 8621 §6).
const PROPERTIES: &[&str] = &[
    "id",
    "name",
    "email",
    "replyTo",
    "bcc",
    "textSignature",
    "htmlSignature",
    "mayDelete",
];

impl ListedObject for IdentityRow {
    const PROPERTIES: &'static [&'static str] = PROPERTIES;

    /// The Identity object of a stored row, with `properties` only.
    fn to_json(&self, properties: &[&'static str]) -> Value {
        let addresses = |stored: &Option<String>| {
            stored
                .as_deref()
                .and_then(|text| serde_json::from_str::<Value>(text).ok())
                .unwrap_or(Value::Null)
        };
        object_of(properties, |property| match property {
            "id" => json!(ids::identity_id(self.id)),
            "name" => json!(self.name),
            "email" => json!(self.email),
            "replyTo" => addresses(&self.reply_to),
            "bcc" => addresses(&self.bcc),
            "textSignature" => json!(self.text_signature),
            "htmlSignature" => json!(self.html_signature),
            _ => json!(self.may_delete),
        })
    }

    fn jmap_id(&self) -> String {
        ids::identity_id(self.id)
    }

    async fn read_all(jmap: &Jmap, account: i64) -> Result<(i64, Arc<Vec<Self>>), MethodError> {
        let state = jmap.store.states(account).await?.identity;
        Ok((state, Arc::new(jmap.store.identities(account).await?)))
    }
}

/// Whether an account whose own address is `own`, with `aliases`, may send
/// as `address` (case-insensitively; an alias `*@domain` grants the domain,
/// and an identity `*@domain` needs exactly that alias).
pub fn may_send_as(own: &str, aliases: &[String], address: &str) -> bool {
    // ASCII folding only: Unicode lowercasing would make a look-alike (the
    // Kelvin sign for `K`) the same address.
    if !plausible_address(address) {
        return false;
    }
    let address = address.to_ascii_lowercase();
    if address == own.to_ascii_lowercase() || aliases.contains(&address) {
        return true;
    }
    let domain = address.rsplit_once('@').map(|(_, domain)| domain);
    domain.is_some_and(|domain| {
        !domain.is_empty() && aliases.iter().any(|alias| *alias == format!("*@{domain}"))
    })
}

/// `EmailAddress[]|null` (RFC 8621 §4.1.2.3) as stored: JSON text or null.
fn addresses(name: &str, value: &Value) -> Result<Option<String>, SetError> {
    let invalid = || {
        SetError::invalid_properties(
            &[name],
            format!("{name} must be null or a list of {{name, email}} objects"),
        )
    };
    let list = match value {
        Value::Null => return Ok(None),
        Value::Array(list) => list,
        _ => return Err(invalid()),
    };
    let mut clean = Vec::with_capacity(list.len());
    for entry in list {
        let object = entry.as_object().ok_or_else(invalid)?;
        if object.keys().any(|key| key != "name" && key != "email") {
            return Err(invalid());
        }
        let email = object.get("email").and_then(Value::as_str);
        let name_value = object.get("name").unwrap_or(&Value::Null);
        match (email, name_value) {
            (Some(email), Value::Null | Value::String(_)) if plausible_address(email) => {
                clean.push(json!({"name": name_value, "email": email}));
            }
            _ => return Err(invalid()),
        }
    }
    Ok(Some(Value::Array(clean).to_string()))
}

/// One `local@domain` with no space, control character or angle bracket:
/// what a From or an envelope can carry.
pub fn plausible_address(address: &str) -> bool {
    let Some((local, domain)) = address.rsplit_once('@') else {
        return false;
    };
    !local.is_empty()
        && !domain.is_empty()
        && address.len() <= 254
        && !address
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '<' | '>' | ','))
}

/// A string property, or `invalidProperties`.
fn string(name: &str, value: &Value) -> Result<String, SetError> {
    value
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| SetError::invalid_properties(&[name], format!("{name} must be a string")))
}

/// The properties of a create or update, validated; `email` apart (it is
/// immutable: given on create, and on update only unchanged).
fn parse_patch(object: &Map<String, Value>) -> Result<(IdentityPatch, Option<String>), SetError> {
    let mut patch = IdentityPatch::default();
    let mut email = None;
    for (name, value) in object {
        match name.as_str() {
            "name" => patch.name = Some(string(name, value)?),
            "email" => email = Some(string(name, value)?),
            "replyTo" => patch.reply_to = Some(addresses(name, value)?),
            "bcc" => patch.bcc = Some(addresses(name, value)?),
            "textSignature" => patch.text_signature = Some(string(name, value)?),
            "htmlSignature" => patch.html_signature = Some(string(name, value)?),
            "id" | "mayDelete" => {
                return Err(SetError::invalid_properties(
                    &[name.as_str()],
                    "server-set property",
                ));
            }
            other => return Err(SetError::invalid_properties(&[other], "unknown property")),
        }
    }
    Ok((patch, email))
}

/// Handles one Identity/set call (RFC 8621 §6.3, the standard arguments):
/// creates, then updates, then destroys.
#[tracing::instrument(level = "debug", skip_all, fields(account = ctx.account.id))]
pub async fn identity_set(
    ctx: &mut CallContext<'_>,
    request: SetArgs,
) -> Result<Value, MethodError> {
    let old_state = request.check(ctx, |states| states.identity).await?;
    let store = ctx.jmap.store.clone();
    let account = ctx.account.id;
    let aliases = store.aliases(account).await?;
    let identities = store.identities(account).await?;
    let mut outcome = SetOutcome::default();
    let creates = request.create.unwrap_or_default();
    create_identities(ctx, creates, &aliases, &mut outcome).await?;
    let updates = request.update.unwrap_or_default();
    update_identities(ctx, updates, &identities, &mut outcome).await?;
    let destroys = request.destroy.unwrap_or_default();
    destroy_identities(ctx, destroys, &identities, &mut outcome).await?;
    let new_state = store.states(account).await?.identity;
    Ok(outcome.into_response(request.account_id, old_state, new_state))
}

/// Creates each identity asked for, in creation id order, recording each
/// one's id for later references (`#creationId`).
async fn create_identities(
    ctx: &mut CallContext<'_>,
    create: HashMap<String, Map<String, Value>>,
    aliases: &[String],
    outcome: &mut SetOutcome,
) -> Result<(), MethodError> {
    let mut creates: Vec<_> = create.into_iter().collect();
    creates.sort_by(|a, b| a.0.cmp(&b.0));
    for (creation_id, object) in creates {
        match plan_create(&ctx.account.email, aliases, &object) {
            Ok(row) => {
                let row_id = ctx.jmap.store.create_identity(ctx.account.id, &row).await?;
                let id = ids::identity_id(row_id);
                ctx.created_ids.insert(creation_id.clone(), id.clone());
                outcome
                    .created
                    .insert(creation_id, json!({"id": id, "mayDelete": true}));
            }
            Err(error) => outcome.not_created.push((creation_id, error)),
        }
    }
    Ok(())
}

/// The row of one identity to create: `email` required, and one the
/// account (own address `own`, with `aliases`) may send as.
fn plan_create(
    own: &str,
    aliases: &[String],
    object: &Map<String, Value>,
) -> Result<IdentityRow, SetError> {
    let (patch, email) = parse_patch(object)?;
    let email =
        email.ok_or_else(|| SetError::invalid_properties(&["email"], "email is required"))?;
    if !may_send_as(own, aliases, &email) {
        return Err(SetError::new(
            "forbiddenFrom",
            format!("this account may not send as {email}"),
        ));
    }
    Ok(IdentityRow {
        id: 0,
        name: patch.name.unwrap_or_default(),
        email,
        reply_to: patch.reply_to.flatten(),
        bcc: patch.bcc.flatten(),
        text_signature: patch.text_signature.unwrap_or_default(),
        html_signature: patch.html_signature.unwrap_or_default(),
        may_delete: true,
    })
}

/// The row an id names: an identity id, or `#creationId` of one created
/// earlier in the request.
fn identity_row_of(ctx: &CallContext<'_>, id: &str) -> Option<i64> {
    let id = match id.strip_prefix('#') {
        Some(creation) => ctx.created_ids.get(creation).cloned()?,
        None => id.to_string(),
    };
    ids::parse_identity_id(&id)
}

/// Updates each identity asked for; `email` may only be given unchanged
/// (`identities`: as they were before the call).
async fn update_identities(
    ctx: &mut CallContext<'_>,
    update: HashMap<String, Map<String, Value>>,
    identities: &[IdentityRow],
    outcome: &mut SetOutcome,
) -> Result<(), MethodError> {
    for (id, object) in update {
        let Some(row_id) = identity_row_of(ctx, &id) else {
            outcome.not_updated.push((id, SetError::not_found()));
            continue;
        };
        let stored = identities.iter().find(|row| row.id == row_id);
        let planned = parse_patch(&object).and_then(|(patch, email)| match (email, stored) {
            (Some(email), Some(row)) if email != row.email => Err(SetError::invalid_properties(
                &["email"],
                "email is immutable",
            )),
            _ => Ok(patch),
        });
        let patch = match planned {
            Ok(patch) => patch,
            Err(error) => {
                outcome.not_updated.push((id, error));
                continue;
            }
        };
        match ctx
            .jmap
            .store
            .update_identity(ctx.account.id, row_id, &patch)
            .await
        {
            Ok(()) => {
                outcome.updated.insert(id, Value::Null);
            }
            Err(StoreError::NotFound) => outcome.not_updated.push((id, SetError::not_found())),
            Err(error) => return Err(error.into()),
        }
    }
    Ok(())
}

/// Destroys each identity asked for but the account's own (`mayDelete:
/// false` in `identities`).
async fn destroy_identities(
    ctx: &mut CallContext<'_>,
    destroy: Vec<String>,
    identities: &[IdentityRow],
    outcome: &mut SetOutcome,
) -> Result<(), MethodError> {
    for id in destroy {
        let Some(row_id) = identity_row_of(ctx, &id) else {
            outcome.not_destroyed.push((id, SetError::not_found()));
            continue;
        };
        if identities
            .iter()
            .any(|row| row.id == row_id && !row.may_delete)
        {
            let error = SetError::new("forbidden", "the account's own identity cannot be deleted");
            outcome.not_destroyed.push((id, error));
            continue;
        }
        match ctx
            .jmap
            .store
            .destroy_identity(ctx.account.id, row_id)
            .await
        {
            Ok(()) => outcome.destroyed.push(id),
            Err(StoreError::NotFound) => outcome.not_destroyed.push((id, SetError::not_found())),
            Err(error) => return Err(error.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_account_sends_as_itself_and_its_aliases_only() {
        let aliases = vec!["sales@example.com".to_string(), "*@example.org".to_string()];
        assert!(may_send_as("Ann@Example.com", &aliases, "ann@example.COM"));
        assert!(may_send_as(
            "ann@example.com",
            &aliases,
            "SALES@example.com"
        ));
        assert!(may_send_as(
            "ann@example.com",
            &aliases,
            "anyone@example.org"
        ));
        assert!(may_send_as("ann@example.com", &aliases, "*@example.org"));
        assert!(!may_send_as("ann@example.com", &aliases, "bob@example.com"));
        assert!(!may_send_as(
            "ann@example.com",
            &aliases,
            "x@sub.example.org"
        ));
        assert!(!may_send_as("ann@example.com", &aliases, "*@example.com"));
        assert!(!may_send_as("ann@example.com", &aliases, "nobody"));
        assert!(!may_send_as(
            "kim@example.com",
            &[],
            "\u{212A}im@example.com"
        ));
        assert!(!may_send_as(
            "ann@example.com",
            &aliases,
            "a\r\nb@example.org"
        ));
        assert!(!may_send_as("ann@example.com", &aliases, "@example.org"));
    }

    #[test]
    fn addresses_are_checked_and_kept_as_json() {
        let value = json!([{"email": "a@example.com"}, {"name": "B", "email": "b@example.com"}]);
        assert_eq!(
            addresses("replyTo", &value).unwrap().as_deref(),
            Some(r#"[{"email":"a@example.com","name":null},{"email":"b@example.com","name":"B"}]"#)
        );
        assert_eq!(addresses("bcc", &Value::Null).unwrap(), None);
        for bad in [
            json!("a@example.com"),
            json!([{"email": "not an address"}]),
            json!([{"email": "a@example.com", "extra": 1}]),
            json!([{"name": 3, "email": "a@example.com"}]),
        ] {
            let error = addresses("bcc", &bad).unwrap_err();
            assert_eq!(
                (error.kind, error.properties),
                ("invalidProperties", vec!["bcc".into()])
            );
        }
    }
}

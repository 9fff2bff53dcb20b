//! Email/set (RFC 8621 §4.6, RFC 8620 §5.3): create (a draft: the Email
//! object as JSON, composed into a MIME message and stored like
//! Email/import, see [`super::create`]), update `keywords` and `mailboxIds`
//! (whole or by patch path such as `keywords/$seen`) and destroy, in that
//! order (RFC 8620 §5.3), so "replace a draft" is one call. Each created
//! email's creation id is recorded for the rest of the request: update and
//! destroy here, and later calls, may name it as `#creationId`.
//!
//! A patch is parsed into [`ListPatch`] operations that the store applies to
//! the current values inside its write transaction, so two concurrent
//! patches of different keywords both land; the store reports emails not
//! found or left in no mailbox, which become SetErrors here.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::super::mailbox::set::resolve_mailbox_id;
use super::create::create_email;
use super::members::{parse_keywords, parse_mailbox_ids, valid_keyword};
use crate::jmap::call::CallContext;
use crate::jmap::error::{MethodError, SetError};
use crate::jmap::mail::set::{SetOutcome, check_request};
use crate::jmap::{args, ids};
use crate::store::{EmailUpdate, ListPatch, UpdateOutcome};

/// Email/set arguments (RFC 8621 §4.6).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetRequest {
    account_id: String,
    if_in_state: Option<String>,
    create: Option<Map<String, Value>>,
    update: Option<HashMap<String, Map<String, Value>>>,
    destroy: Option<Vec<String>>,
}

args::account_arguments!(SetRequest);

/// Adds (`true`) or removes (`null`, `false`) one member by patch path.
fn patch_member<T>(
    list: &mut ListPatch<T>,
    path: &str,
    member: T,
    value: &Value,
) -> Result<(), SetError> {
    match value {
        Value::Bool(true) => list.add.push(member),
        Value::Null => list.remove.push(member),
        _ => {
            return Err(SetError::invalid_properties(
                &[path],
                "must be true or null",
            ));
        }
    }
    Ok(())
}

/// One JSON Pointer reference token (RFC 6901 §4: `~1` is `/`, `~0` is `~`);
/// `None` when the token holds a `/` (a path into a boolean, RFC 8620 §5.3)
/// or an invalid escape.
fn pointer_token(token: &str) -> Option<String> {
    if token.contains('/') {
        return None;
    }
    let mut out = String::with_capacity(token.len());
    let mut chars = token.chars();
    while let Some(c) = chars.next() {
        match c {
            '~' => match chars.next() {
                Some('0') => out.push('~'),
                Some('1') => out.push('/'),
                _ => return None,
            },
            c => out.push(c),
        }
    }
    Some(out)
}

/// Parses one update PatchObject into the operations the store applies.
/// Setting a whole list together with a path into it is `invalidPatch`
/// (RFC 8620 §5.3: no pointer may be a prefix of another).
fn parse_patch(
    id: i64,
    patch: &Map<String, Value>,
    created_ids: &HashMap<String, String>,
) -> Result<EmailUpdate, SetError> {
    let mut update = EmailUpdate {
        id,
        ..EmailUpdate::default()
    };
    for (path, value) in patch {
        if path == "keywords" {
            update.keywords.replace = Some(parse_keywords(value)?.into_iter().collect());
        } else if path == "mailboxIds" {
            let mailboxes = parse_mailbox_ids(value, created_ids)?;
            update.mailbox_ids.replace = Some(mailboxes.into_iter().collect());
        } else if let Some(token) = path.strip_prefix("keywords/") {
            let keyword = pointer_token(token).ok_or_else(|| {
                SetError::new("invalidPatch", format!("{path} is not a valid patch path"))
            })?;
            let keyword = valid_keyword(&keyword)
                .ok_or_else(|| SetError::invalid_properties(&[path.as_str()], "invalid keyword"))?;
            patch_member(&mut update.keywords, path, keyword, value)?;
        } else if let Some(token) = path.strip_prefix("mailboxIds/") {
            let mailbox = pointer_token(token).ok_or_else(|| {
                SetError::new("invalidPatch", format!("{path} is not a valid patch path"))
            })?;
            let mailbox = resolve_mailbox_id(&mailbox, created_ids).ok_or_else(|| {
                SetError::invalid_properties(&[path.as_str()], "invalid mailbox id")
            })?;
            patch_member(&mut update.mailbox_ids, path, mailbox, value)?;
        } else {
            return Err(SetError::invalid_properties(
                &[path.as_str()],
                "only keywords and mailboxIds can change",
            ));
        }
    }
    let whole_and_path = |list_replaced: bool, list_patched: bool| list_replaced && list_patched;
    if whole_and_path(
        update.keywords.replace.is_some(),
        !update.keywords.add.is_empty() || !update.keywords.remove.is_empty(),
    ) || whole_and_path(
        update.mailbox_ids.replace.is_some(),
        !update.mailbox_ids.add.is_empty() || !update.mailbox_ids.remove.is_empty(),
    ) {
        return Err(SetError::new(
            "invalidPatch",
            "a property and a path into it cannot both be patched",
        ));
    }
    Ok(update)
}

/// Handles one Email/set call: creates, then updates, then destroys.
#[tracing::instrument(level = "debug", skip_all, fields(account = ctx.account.id))]
pub async fn email_set(
    ctx: &mut CallContext<'_>,
    request: SetRequest,
) -> Result<Value, MethodError> {
    let store = ctx.jmap.store.clone();
    let account = ctx.account.id;
    let updates = request.update.unwrap_or_default();
    let destroy = request.destroy.unwrap_or_default();
    let creates = request.create.unwrap_or_default();
    let objects = updates.len() + destroy.len() + creates.len();
    let if_in_state = request.if_in_state.as_deref();
    let old_state = check_request(ctx, if_in_state, objects, |states| states.email).await?;
    let mut outcome = SetOutcome::default();
    create_emails(ctx, creates, &mut outcome).await?;
    update_emails(ctx, &updates, &mut outcome).await?;
    destroy_emails(ctx, destroy, &mut outcome).await?;
    let new_state = store.states(account).await?.email;
    Ok(outcome.into_response(request.account_id, old_state, new_state))
}

/// Creates each email in creation id order ([`create_email`]) and records
/// each creation id → email id for the rest of the request (RFC 8620 §5.3).
async fn create_emails(
    ctx: &mut CallContext<'_>,
    creates: Map<String, Value>,
    outcome: &mut SetOutcome,
) -> Result<(), MethodError> {
    if creates.is_empty() {
        return Ok(());
    }
    let owned_mailboxes = ctx.jmap.store.mailbox_ids(ctx.account.id).await?;
    for (creation_id, object) in creates {
        let Some(object) = object.as_object() else {
            outcome.not_created.push((
                creation_id,
                SetError::new("invalidProperties", "an Email to create must be an object"),
            ));
            continue;
        };
        match create_email(ctx, object, &owned_mailboxes).await? {
            Ok(created) => {
                if let Some(id) = created.get("id").and_then(Value::as_str) {
                    ctx.created_ids.insert(creation_id.clone(), id.to_string());
                }
                outcome.created.insert(creation_id, created);
            }
            Err(error) => outcome.not_created.push((creation_id, error)),
        }
    }
    Ok(())
}

/// An Email id, or `#creationId` of an email created earlier in the
/// request (RFC 8620 §5.3), as a row id.
fn resolve_email_id(id: &str, created_ids: &HashMap<String, String>) -> Option<i64> {
    match id.strip_prefix('#') {
        Some(creation_id) => created_ids
            .get(creation_id)
            .and_then(|id| ids::parse_email_id(id)),
        None => ids::parse_email_id(id),
    }
}

/// Parses every patch (one that does not parse is `notUpdated` at once),
/// has the store apply the rest in one transaction, and records each outcome.
async fn update_emails(
    ctx: &CallContext<'_>,
    updates: &HashMap<String, Map<String, Value>>,
    outcome: &mut SetOutcome,
) -> Result<(), MethodError> {
    let (mut valid, mut valid_ids) = (Vec::new(), Vec::new());
    for (id, patch) in updates {
        let parsed = resolve_email_id(id, ctx.created_ids)
            .ok_or_else(SetError::not_found)
            .and_then(|numeric| parse_patch(numeric, patch, ctx.created_ids));
        match parsed {
            Ok(update) => {
                // A `#creationId` is answered with the id it stands for.
                valid_ids.push(ids::email_id(update.id));
                valid.push(update);
            }
            Err(error) => outcome.not_updated.push((id.clone(), error)),
        }
    }
    // The writer's refusal of one email is that email's `forbidden`.
    let results = ctx
        .jmap
        .writer
        .update_emails(ctx.account.id, &valid)
        .await?;
    for (id, result) in valid_ids.into_iter().zip(results) {
        let Ok(result) = result else {
            let refusal = result.err().unwrap_or_default();
            let text = format!("the mail server behind this one refused: {refusal}");
            outcome
                .not_updated
                .push((id, SetError::new("forbidden", text)));
            continue;
        };
        let error = match result {
            UpdateOutcome::Updated => {
                outcome.updated.insert(id, Value::Null);
                continue;
            }
            UpdateOutcome::NotFound => SetError::not_found(),
            UpdateOutcome::NoMailbox => SetError::invalid_properties(
                &["mailboxIds"],
                "an email must be in at least one mailbox",
            ),
            UpdateOutcome::UnknownMailbox => {
                SetError::invalid_properties(&["mailboxIds"], "no such mailbox")
            }
        };
        outcome.not_updated.push((id, error));
    }
    Ok(())
}

/// Destroys the emails in one store call; ids it did not destroy are `notFound`.
async fn destroy_emails(
    ctx: &CallContext<'_>,
    destroy: Vec<String>,
    outcome: &mut SetOutcome,
) -> Result<(), MethodError> {
    let numeric: Vec<i64> = destroy
        .iter()
        .filter_map(|id| resolve_email_id(id, ctx.created_ids))
        .collect();
    let (gone, refused) = ctx
        .jmap
        .writer
        .destroy_emails(ctx.account.id, &numeric)
        .await?;
    for id in destroy {
        let numeric = resolve_email_id(&id, ctx.created_ids);
        if let Some(refusal) = numeric.and_then(|n| refused.get(&n)) {
            let text = format!("the mail server behind this one refused: {refusal}");
            outcome
                .not_destroyed
                .push((id, SetError::new("forbidden", text)));
            continue;
        }
        match numeric.filter(|n| gone.contains(n)) {
            Some(numeric) => outcome.destroyed.push(ids::email_id(numeric)),
            None => outcome.not_destroyed.push((id, SetError::not_found())),
        }
    }
    Ok(())
}

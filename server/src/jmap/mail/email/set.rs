//! Email/set (RFC 8621 §4.6, RFC 8620 §5.3): update `keywords` and
//! `mailboxIds` (whole or by patch path such as `keywords/$seen`) and
//! destroy. Creating an email from JSON is not offered: Email/import stores
//! a message from an uploaded blob.

use std::collections::{BTreeSet, HashMap};

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::super::mailbox::set::resolve_mailbox_id;
use crate::jmap::dispatch::CallContext;
use crate::jmap::error::{MethodError, SetError};
use crate::jmap::{args, ids};
use crate::store::{EmailMeta, EmailUpdate};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SetRequest {
    account_id: String,
    if_in_state: Option<String>,
    create: Option<Map<String, Value>>,
    update: Option<HashMap<String, Map<String, Value>>>,
    destroy: Option<Vec<String>>,
}

/// A keyword as RFC 8621 §4.1.1 allows it (IMAP atom characters), lowercased.
pub fn valid_keyword(keyword: &str) -> Option<String> {
    let ok = !keyword.is_empty()
        && keyword.len() <= 255
        && keyword
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && !b"(){]%*\"\\".contains(&b));
    ok.then(|| keyword.to_ascii_lowercase())
}

/// Parses `{"keyword": true, …}` into a set.
pub fn parse_keywords(value: &Value) -> Result<BTreeSet<String>, SetError> {
    let object = value
        .as_object()
        .ok_or_else(|| SetError::invalid_properties(&["keywords"], "keywords must be an object"))?;
    object
        .iter()
        .map(|(keyword, set)| match (valid_keyword(keyword), set) {
            (Some(keyword), Value::Bool(true)) => Ok(keyword),
            _ => Err(SetError::invalid_properties(
                &["keywords"],
                format!("invalid keyword {keyword}"),
            )),
        })
        .collect()
}

/// Parses `{"mailboxId": true, …}` into a set of mailbox row ids.
pub fn parse_mailbox_ids(
    value: &Value,
    created_ids: &HashMap<String, String>,
) -> Result<BTreeSet<i64>, SetError> {
    let object = value.as_object().ok_or_else(|| {
        SetError::invalid_properties(&["mailboxIds"], "mailboxIds must be an object")
    })?;
    object
        .iter()
        .map(
            |(id, set)| match (resolve_mailbox_id(id, created_ids), set) {
                (Some(id), Value::Bool(true)) => Ok(id),
                _ => Err(SetError::invalid_properties(
                    &["mailboxIds"],
                    format!("invalid mailbox id {id}"),
                )),
            },
        )
        .collect()
}

/// Applies one update patch to an email's current keywords and mailboxes.
fn apply_patch(
    meta: &EmailMeta,
    patch: &Map<String, Value>,
    created_ids: &HashMap<String, String>,
) -> Result<EmailUpdate, SetError> {
    let mut keywords: BTreeSet<String> = meta.keywords.iter().cloned().collect();
    let mut mailboxes: BTreeSet<i64> = meta.mailbox_ids.iter().copied().collect();
    let (mut keywords_changed, mut mailboxes_changed) = (false, false);
    for (path, value) in patch {
        if path == "keywords" {
            keywords = parse_keywords(value)?;
            keywords_changed = true;
        } else if path == "mailboxIds" {
            mailboxes = parse_mailbox_ids(value, created_ids)?;
            mailboxes_changed = true;
        } else if let Some(keyword) = path.strip_prefix("keywords/") {
            let keyword = valid_keyword(keyword)
                .ok_or_else(|| SetError::invalid_properties(&[path.as_str()], "invalid keyword"))?;
            match value {
                Value::Bool(true) => keywords.insert(keyword),
                Value::Null | Value::Bool(false) => keywords.remove(&keyword),
                _ => {
                    return Err(SetError::invalid_properties(
                        &[path.as_str()],
                        "must be true or null",
                    ));
                }
            };
            keywords_changed = true;
        } else if let Some(mailbox) = path.strip_prefix("mailboxIds/") {
            let mailbox = resolve_mailbox_id(mailbox, created_ids).ok_or_else(|| {
                SetError::invalid_properties(&[path.as_str()], "invalid mailbox id")
            })?;
            match value {
                Value::Bool(true) => mailboxes.insert(mailbox),
                Value::Null | Value::Bool(false) => mailboxes.remove(&mailbox),
                _ => {
                    return Err(SetError::invalid_properties(
                        &[path.as_str()],
                        "must be true or null",
                    ));
                }
            };
            mailboxes_changed = true;
        } else {
            return Err(SetError::invalid_properties(
                &[path.as_str()],
                "only keywords and mailboxIds can change",
            ));
        }
    }
    if mailboxes.is_empty() {
        return Err(SetError::invalid_properties(
            &["mailboxIds"],
            "an email must be in at least one mailbox",
        ));
    }
    Ok(EmailUpdate {
        id: meta.id,
        keywords: keywords_changed.then(|| keywords.into_iter().collect()),
        mailbox_ids: mailboxes_changed.then(|| mailboxes.into_iter().collect()),
    })
}

fn error_map(errors: Vec<(String, SetError)>) -> Value {
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

/// Handles one Email/set call.
#[tracing::instrument(skip_all, fields(account = ctx.account.id))]
pub async fn email_set(
    ctx: &mut CallContext<'_>,
    arguments: Map<String, Value>,
) -> Result<Value, MethodError> {
    let request: SetRequest = args::parse(arguments)?;
    args::check_account(ctx.account, &request.account_id)?;
    let store = ctx.jmap.store.clone();
    let account = ctx.account.id;
    let old_state = store.states(account).await?.email;
    if request
        .if_in_state
        .as_ref()
        .is_some_and(|s| *s != old_state.to_string())
    {
        return Err(MethodError::StateMismatch);
    }
    let updates = request.update.unwrap_or_default();
    let destroy = request.destroy.unwrap_or_default();
    let creates = request.create.unwrap_or_default();
    if (updates.len() + destroy.len() + creates.len()) as u64 > ctx.jmap.limits.max_objects_in_set {
        return Err(MethodError::RequestTooLarge(
            ctx.jmap.limits.max_objects_in_set as usize,
        ));
    }
    let not_created: Vec<(String, SetError)> = creates
        .keys()
        .map(|id| {
            (
                id.clone(),
                SetError::new(
                    "forbidden",
                    "creating emails from JSON is not supported; use Email/import",
                ),
            )
        })
        .collect();

    let wanted: Vec<i64> = updates
        .keys()
        .filter_map(|id| ids::parse_email_id(id))
        .collect();
    let metas = store.email_meta(account, &wanted).await?;
    let owned_mailboxes: Vec<i64> = store
        .mailboxes(account)
        .await?
        .iter()
        .map(|m| m.id)
        .collect();
    let (mut valid, mut updated, mut not_updated) = (Vec::new(), Map::new(), Vec::new());
    for (id, patch) in &updates {
        let Some(meta) = ids::parse_email_id(id).and_then(|n| metas.iter().find(|m| m.id == n))
        else {
            not_updated.push((id.clone(), SetError::not_found()));
            continue;
        };
        match apply_patch(meta, patch, ctx.created_ids) {
            Ok(update)
                if update
                    .mailbox_ids
                    .as_ref()
                    .is_some_and(|m| m.iter().any(|id| !owned_mailboxes.contains(id))) =>
            {
                not_updated.push((
                    id.clone(),
                    SetError::invalid_properties(&["mailboxIds"], "no such mailbox"),
                ));
            }
            Ok(update) => {
                valid.push(update);
                updated.insert(id.clone(), Value::Null);
            }
            Err(error) => not_updated.push((id.clone(), error)),
        }
    }
    store.update_emails(account, &valid).await?;

    let numeric: Vec<i64> = destroy
        .iter()
        .filter_map(|id| ids::parse_email_id(id))
        .collect();
    let gone = store.destroy_emails(account, &numeric).await?;
    let (mut destroyed, mut not_destroyed) = (Vec::new(), Vec::new());
    for id in destroy {
        if ids::parse_email_id(&id).is_some_and(|n| gone.contains(&n)) {
            destroyed.push(id);
        } else {
            not_destroyed.push((id, SetError::not_found()));
        }
    }
    let new_state = store.states(account).await?.email;
    Ok(json!({
        "accountId": request.account_id,
        "oldState": old_state.to_string(),
        "newState": new_state.to_string(),
        "created": Value::Null,
        "updated": if updated.is_empty() { Value::Null } else { Value::Object(updated) },
        "destroyed": if destroyed.is_empty() { Value::Null } else { json!(destroyed) },
        "notCreated": error_map(not_created),
        "notUpdated": error_map(not_updated),
        "notDestroyed": error_map(not_destroyed),
    }))
}

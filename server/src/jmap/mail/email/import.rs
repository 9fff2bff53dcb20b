//! Email/import (RFC 8621 §4.8): store uploaded blobs as emails, with
//! mailboxIds, keywords and receivedAt, through the same ingest path as
//! `fastview import` (projection row in the same transaction).

use std::collections::HashMap;

use chrono::DateTime;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::set::{parse_keywords, parse_mailbox_ids};
use crate::jmap::dispatch::CallContext;
use crate::jmap::error::{MethodError, SetError};
use crate::jmap::{args, ids};
use crate::mail::ingest::{prepare, store_batch};
use crate::store::Inserted;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ImportRequest {
    account_id: String,
    if_in_state: Option<String>,
    emails: HashMap<String, Map<String, Value>>,
}

/// Handles one Email/import call.
#[tracing::instrument(skip_all, fields(account = ctx.account.id))]
pub async fn email_import(
    ctx: &mut CallContext<'_>,
    arguments: Map<String, Value>,
) -> Result<Value, MethodError> {
    let request: ImportRequest = args::parse(arguments)?;
    args::check_account(ctx.account, &request.account_id)?;
    let jmap = ctx.jmap;
    let account = ctx.account.id;
    let old_state = jmap.store.states(account).await?.email;
    args::check_if_in_state(request.if_in_state.as_deref(), old_state)?;
    args::check_set_size(request.emails.len(), jmap.limits.max_objects_in_set)?;
    let owned_mailboxes: Vec<i64> = jmap
        .store
        .mailboxes(account)
        .await?
        .iter()
        .map(|m| m.id)
        .collect();
    let (mut created, mut not_created) = (Map::new(), Map::new());
    let mut emails: Vec<(String, Map<String, Value>)> = request.emails.into_iter().collect();
    emails.sort_by(|a, b| a.0.cmp(&b.0));
    for (creation_id, object) in emails {
        match import_one(ctx, account, &owned_mailboxes, &object).await? {
            Ok(value) => {
                if let Some(id) = value.get("id").and_then(Value::as_str) {
                    ctx.created_ids.insert(creation_id.clone(), id.to_string());
                }
                created.insert(creation_id, value);
            }
            Err(error) => {
                not_created.insert(creation_id, error.to_json());
            }
        }
    }
    let new_state = jmap.store.states(account).await?.email;
    Ok(json!({
        "accountId": request.account_id,
        "oldState": old_state.to_string(),
        "newState": new_state.to_string(),
        "created": if created.is_empty() { Value::Null } else { Value::Object(created) },
        "notCreated": if not_created.is_empty() { Value::Null } else { Value::Object(not_created) },
    }))
}

async fn import_one(
    ctx: &CallContext<'_>,
    account: i64,
    owned_mailboxes: &[i64],
    object: &Map<String, Value>,
) -> Result<Result<Value, SetError>, MethodError> {
    let jmap = ctx.jmap;
    let Some(blob_id) = object.get("blobId").and_then(Value::as_str) else {
        return Ok(Err(SetError::invalid_properties(
            &["blobId"],
            "blobId is required",
        )));
    };
    let mailbox_ids = match object
        .get("mailboxIds")
        .map(|v| parse_mailbox_ids(v, ctx.created_ids))
    {
        Some(Ok(set)) if !set.is_empty() && set.iter().all(|m| owned_mailboxes.contains(m)) => set,
        Some(Err(error)) => return Ok(Err(error)),
        _ => {
            return Ok(Err(SetError::invalid_properties(
                &["mailboxIds"],
                "at least one mailbox of this account is required",
            )));
        }
    };
    let keywords = match object.get("keywords").map(parse_keywords).transpose() {
        Ok(keywords) => keywords.unwrap_or_default(),
        Err(error) => return Ok(Err(error)),
    };
    let received_at = match object.get("receivedAt") {
        None | Some(Value::Null) => chrono::Utc::now().timestamp(),
        Some(value) => match value
            .as_str()
            .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        {
            Some(date) => date.timestamp(),
            None => {
                return Ok(Err(SetError::invalid_properties(
                    &["receivedAt"],
                    "receivedAt must be a UTCDate",
                )));
            }
        },
    };
    let whole_blob = ids::parse_blob_id(blob_id)
        .filter(|(_, part)| part.is_none())
        .map(|(b, _)| b.to_string());
    let raw = match whole_blob {
        Some(blob) if jmap.store.has_blob(account, &blob).await? => jmap
            .blobs
            .get(&blob)
            .await
            .map_err(|e| MethodError::server_fail(format_args!("reading blob {blob}"), e))?,
        _ => None,
    };
    let Some(raw) = raw else {
        return Ok(Err(SetError::new(
            "blobNotFound",
            format!("no blob {blob_id} in this account"),
        )));
    };
    let prepared = tokio::task::spawn_blocking(move || {
        prepare(
            raw,
            mailbox_ids.into_iter().collect(),
            keywords.into_iter().collect(),
            |_| received_at,
        )
    })
    .await
    .map_err(|e| MethodError::server_fail("preparing the message", e))?;
    let (blob, size) = (prepared.email.blob_id.clone(), prepared.email.size);
    let outcome = store_batch(jmap.store.as_ref(), &jmap.blobs, account, vec![prepared])
        .await
        .map_err(|e| MethodError::server_fail(format_args!("storing blob {blob}"), e))?;
    match outcome.first() {
        Some(Inserted::New(id)) => {
            let thread = jmap
                .store
                .email_meta(account, &[*id])
                .await?
                .first()
                .map(|m| m.thread_id)
                .unwrap_or(*id);
            Ok(Ok(
                json!({"id": ids::email_id(*id), "blobId": blob, "threadId": ids::thread_id(thread), "size": size}),
            ))
        }
        Some(Inserted::Duplicate(id)) => {
            let mut error =
                SetError::new("alreadyExists", "this message is already in the account");
            error.existing_id = Some(ids::email_id(*id));
            Ok(Err(error))
        }
        None => Err(MethodError::server_fail(
            format_args!("storing blob {blob}"),
            "the store reported no outcome",
        )),
    }
}

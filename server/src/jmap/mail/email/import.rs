//! Email/import (RFC 8621 §4.8): store uploaded blobs as emails, with
//! mailboxIds, keywords and receivedAt, through the same ingest path as
//! `fastview import` (projection row in the same transaction). Email/set
//! `create` stores the message it composes through the same [`ingest_one`].

use std::collections::{BTreeSet, HashMap};

use chrono::DateTime;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::members::{parse_keywords, parse_mailbox_ids};
use crate::jmap::call::CallContext;
use crate::jmap::error::{MethodError, SetError};
use crate::jmap::mail::set::{check_request, set_error_map};
use crate::jmap::{args, ids};
use crate::mail::import_source::top_received_time;
use crate::mail::ingest::{IngestError, prepare};
use crate::mail::message::opens_with_header_field;
use crate::mail::writer::WriteError;
use crate::store::{Inserted, StoreError};

/// Email/import arguments (RFC 8621 §4.8).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportRequest {
    account_id: String,
    if_in_state: Option<String>,
    emails: HashMap<String, Map<String, Value>>,
}

args::account_arguments!(ImportRequest);

/// One EmailImport object (RFC 8621 §4.8), checked.
struct EmailImport<'a> {
    blob_id: &'a str,
    mailbox_ids: BTreeSet<i64>,
    keywords: BTreeSet<String>,
    /// `None`: the message's top Received header, else now (§4.8).
    received_at: Option<i64>,
}

/// Handles one Email/import call: the emails in creation id order.
#[tracing::instrument(level = "debug", skip_all, fields(account = ctx.account.id))]
pub async fn email_import(
    ctx: &mut CallContext<'_>,
    request: ImportRequest,
) -> Result<Value, MethodError> {
    let if_in_state = request.if_in_state.as_deref();
    let objects = request.emails.len();
    let old_state = check_request(ctx, if_in_state, objects, |states| states.email).await?;
    let (store, account) = (&ctx.jmap.store, ctx.account.id);
    let owned_mailboxes = store.mailbox_ids(account).await?;
    let (mut created, mut not_created) = (Map::new(), Vec::new());
    let mut emails: Vec<(String, Map<String, Value>)> = request.emails.into_iter().collect();
    emails.sort_by(|a, b| a.0.cmp(&b.0));
    for (creation_id, object) in emails {
        let outcome = match parse_import(&object, &owned_mailboxes, ctx.created_ids) {
            Ok(import) => import_one(ctx, import).await?,
            Err(error) => Err(error),
        };
        match outcome {
            Ok(email) => {
                if let Some(id) = email.get("id").and_then(Value::as_str) {
                    ctx.created_ids.insert(creation_id.clone(), id.to_string());
                }
                created.insert(creation_id, email);
            }
            Err(error) => not_created.push((creation_id, error)),
        }
    }
    let new_state = ctx.jmap.store.states(account).await?.email;
    Ok(json!({
        "accountId": request.account_id,
        "oldState": old_state.to_string(),
        "newState": new_state.to_string(),
        "created": if created.is_empty() { Value::Null } else { Value::Object(created) },
        "notCreated": set_error_map(not_created),
    }))
}

/// Checks one EmailImport object: `blobId` given, `mailboxIds` of this
/// account (at least one), `keywords`, `receivedAt` (default: decided when
/// the message is read, [`store_message`]).
fn parse_import<'a>(
    object: &'a Map<String, Value>,
    owned_mailboxes: &[i64],
    created_ids: &HashMap<String, String>,
) -> Result<EmailImport<'a>, SetError> {
    let blob_id = object
        .get("blobId")
        .and_then(Value::as_str)
        .ok_or_else(|| SetError::invalid_properties(&["blobId"], "blobId is required"))?;
    let mailbox_ids = match object
        .get("mailboxIds")
        .map(|v| parse_mailbox_ids(v, created_ids))
    {
        Some(Ok(set)) if !set.is_empty() && set.iter().all(|m| owned_mailboxes.contains(m)) => set,
        Some(Err(error)) => return Err(error),
        _ => {
            return Err(SetError::invalid_properties(
                &["mailboxIds"],
                "at least one mailbox of this account is required",
            ));
        }
    };
    let keywords = object
        .get("keywords")
        .map(parse_keywords)
        .transpose()?
        .unwrap_or_default();
    let received_at = parse_received_at(object.get("receivedAt"))?;
    Ok(EmailImport {
        blob_id,
        mailbox_ids,
        keywords,
        received_at,
    })
}

/// `receivedAt` (RFC 8621 §4.1.1) as unix seconds: a UTCDate (RFC 8620
/// §1.4: its time-offset MUST be `Z`), or `None` when absent or null (the
/// caller's default).
pub(super) fn parse_received_at(value: Option<&Value>) -> Result<Option<i64>, SetError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(value) => Ok(Some(
            value
                .as_str()
                .filter(|s| s.ends_with(['Z', 'z']))
                .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
                .ok_or_else(|| {
                    SetError::invalid_properties(&["receivedAt"], "receivedAt must be a UTCDate")
                })?
                .timestamp(),
        )),
    }
}

/// Imports one checked EmailImport: its blob (the account's, whole
/// messages only) read and stored through [`ingest_one`].
async fn import_one(
    ctx: &CallContext<'_>,
    import: EmailImport<'_>,
) -> Result<Result<Value, SetError>, MethodError> {
    // Load. RFC 8621 §4.8: a blobId that is not found "MUST" be
    // invalidProperties (not blobNotFound, which Email/set uses).
    let Some(raw) = read_message_blob(ctx, import.blob_id).await? else {
        return Ok(Err(SetError::invalid_properties(
            &["blobId"],
            format!("no blob {} in this account", import.blob_id),
        )));
    };
    // RFC 8621 §4.8: a blob that is no RFC 5322 message MAY be refused
    // with invalidEmail; one that does not even open with a header field is.
    if !opens_with_header_field(&raw) {
        return Ok(Err(SetError::new(
            "invalidEmail",
            format!(
                "blob {} is not an RFC 5322 message: it does not open with a header field",
                import.blob_id
            ),
        )));
    }
    let EmailImport {
        mailbox_ids,
        keywords,
        received_at,
        ..
    } = import;
    ingest_one(ctx, raw, mailbox_ids, keywords, received_at).await
}

/// Stores one message as an email of the account, the path Email/import
/// and Email/set `create` share: stored as `fastview import` does, then its
/// `created` entry rendered (RFC 8621 §4.6, §4.8: `id`, `blobId`,
/// `threadId`, `size`), or `alreadyExists` naming the email with those
/// bytes, or `overQuota`.
pub(super) async fn ingest_one(
    ctx: &CallContext<'_>,
    raw: Vec<u8>,
    mailbox_ids: BTreeSet<i64>,
    keywords: BTreeSet<String>,
    received_at: Option<i64>,
) -> Result<Result<Value, SetError>, MethodError> {
    // Store.
    let stored = store_message(ctx, raw, mailbox_ids, keywords, received_at).await?;
    let (inserted, blob, size) = match stored {
        Ok(stored) => stored,
        Err(error) => return Ok(Err(error)),
    };
    // Render.
    let id = match inserted {
        Inserted::New(id) => id,
        Inserted::Duplicate(id) => {
            let mut error =
                SetError::new("alreadyExists", "this message is already in the account");
            error.existing_id = Some(ids::email_id(id));
            return Ok(Err(error));
        }
    };
    let store = &ctx.jmap.store;
    let metas = store.email_meta(ctx.account.id, &[id]).await?;
    let thread = metas.first().map_or(id, |m| m.thread_id);
    Ok(Ok(
        json!({"id": ids::email_id(id), "blobId": blob, "threadId": ids::thread_id(thread), "size": size}),
    ))
}

/// Stores a message as `fastview import` does (parsed once, off the async
/// threads; blob, then its rows in one transaction); without a `receivedAt`
/// it is the date of the message's most recent (topmost) Received header,
/// else now (RFC 8621 §4.8). Returns the outcome, the blob id and the size,
/// or `overQuota` (RFC 8621 §4.6, §4.8) when the
/// account would end over its quota.
async fn store_message(
    ctx: &CallContext<'_>,
    raw: Vec<u8>,
    mailbox_ids: BTreeSet<i64>,
    keywords: BTreeSet<String>,
    received_at: Option<i64>,
) -> Result<Result<(Inserted, String, i64), SetError>, MethodError> {
    let prepared = tokio::task::spawn_blocking(move || {
        prepare(
            raw,
            mailbox_ids.into_iter().collect(),
            keywords.into_iter().collect(),
            |parsed| {
                received_at
                    .or_else(|| parsed.and_then(top_received_time))
                    .unwrap_or_else(|| chrono::Utc::now().timestamp())
            },
        )
    })
    .await
    .map_err(|e| MethodError::server_fail("preparing the message", e))?;
    let storing = format!("storing blob {}", prepared.email.blob_id);
    match ctx.jmap.writer.import(ctx.account.id, prepared).await {
        Ok(Ok(imported)) => Ok(Ok((imported.inserted, imported.blob_id, imported.size))),
        Ok(Err(refusal)) => Ok(Err(SetError::new(
            "forbidden",
            format!("the mail server behind this one refused: {refusal}"),
        ))),
        Err(WriteError::Ingest(IngestError::Store(StoreError::OverQuota))) => {
            Ok(Err(SetError::new(
                "overQuota",
                "storing this message would take the account over its quota",
            )))
        }
        Err(WriteError::Ingest(IngestError::Store(full @ StoreError::StorageFull(_)))) => {
            Err(MethodError::from(full))
        }
        Err(WriteError::Ingest(error)) => Err(MethodError::server_fail(storing, error)),
        Err(WriteError::Internal(error)) => Err(MethodError::server_fail(storing, error)),
        Err(error) => Err(error.into()),
    }
}

/// The bytes of a whole-message blob the account may read, checked against
/// its id; `None` for a body-part blob id or a blob the account does not
/// hold (`serverFail` for one it holds that is missing or corrupt).
async fn read_message_blob(
    ctx: &CallContext<'_>,
    blob_id: &str,
) -> Result<Option<Vec<u8>>, MethodError> {
    let jmap = ctx.jmap;
    let Some((blob, None)) = ids::parse_blob_id(blob_id) else {
        return Ok(None);
    };
    if !jmap.store.has_blob(ctx.account.id, blob).await? {
        return Ok(None);
    }
    // The account holds the blob: missing or corrupt bytes are serverFail.
    jmap.blobs
        .read(blob)
        .await
        .map(Some)
        .map_err(|e| MethodError::server_fail(format_args!("reading blob {blob}"), e))
}

//! Email/parse (RFC 8621 §4.9): blobs parsed as messages and rendered as
//! Email objects through the same renderer as Email/get, typically an
//! attached message (`message/rfc822` part) whose blob id is
//! `{message blobId}_{partId}`. A blob the account may not read, or a part
//! that does not exist, is `notFound`; bytes in which no header field can be
//! found are `notParsable`. The parsed email is in no mailbox: `id`,
//! `mailboxIds`, `keywords`, `receivedAt` and `threadId` are null. Its body
//! parts' blob ids extend the parsed blob id (`{blobId}_{partId}_{partId}`)
//! and download like any part.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::get::{BodyValueArgs, EmailShape};
use super::render::{EmailSources, render_email};
use crate::jmap::call::CallContext;
use crate::jmap::error::MethodError;
use crate::jmap::mail::get::requested_ids;
use crate::jmap::{args, ids};
use crate::mail::body::resolve_part;
use crate::mail::message::opens_with_header_field;
use crate::mail::property::EmailProperty;
use crate::mail::work::WorkMeter;
use crate::store::EmailMeta;

/// Properties of an email in the store that a parsed email does not have.
const NULL_PROPERTIES: &[&str] = &["id", "mailboxIds", "keywords", "receivedAt", "threadId"];

/// Email/parse arguments (RFC 8621 §4.9).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParseRequest {
    account_id: String,
    blob_ids: Vec<String>,
    properties: Option<Vec<String>>,
    body_properties: Option<Vec<String>>,
    #[serde(flatten)]
    body_values: BodyValueArgs,
}

args::account_arguments!(ParseRequest);

/// What one blob id resolved to.
enum Parsed {
    Email(Map<String, Value>),
    NotParsable,
    NotFound,
    /// Rendering it would pass the request's render work budget.
    OverBudget,
}

/// Handles one Email/parse call.
#[tracing::instrument(level = "debug", skip_all, fields(account = ctx.account.id))]
pub async fn email_parse(
    ctx: &mut CallContext<'_>,
    request: ParseRequest,
) -> Result<Value, MethodError> {
    // Plan.
    let shape = Arc::new(request.shape()?);
    let blob_ids = requested_ids(request.blob_ids, ctx.jmap.limits.max_objects_in_get)?;
    // Load and render, one blob at a time.
    let mut response = ParseResponse::default();
    for blob_id in blob_ids {
        let outcome = match read_blob(ctx, &blob_id).await? {
            None => Parsed::NotFound,
            Some((raw, part)) => parse_blob(ctx, raw, part, &blob_id, &shape).await?,
        };
        if let Parsed::OverBudget = outcome {
            return Err(MethodError::OverBudget(format!(
                "rendering {blob_id} would pass the request's {} units of render work",
                ctx.jmap.limits.max_render_work
            )));
        }
        response.add(blob_id, outcome);
    }
    Ok(response.into_json(request.account_id))
}

impl ParseRequest {
    /// The properties (default: RFC 8621 §4.9's) and body value options.
    fn shape(&self) -> Result<EmailShape, MethodError> {
        let options = self.body_values.options();
        EmailShape::parse(
            self.properties.as_deref(),
            self.body_properties.as_deref(),
            EmailProperty::parse_default_list,
            options,
        )
    }
}

/// The bytes of the message a blob id names and the part path within it,
/// if the account may read that blob; `None` otherwise. Its stored size is
/// taken from the request's parse budget before it is read.
async fn read_blob(
    ctx: &mut CallContext<'_>,
    blob_id: &str,
) -> Result<Option<(Vec<u8>, Option<String>)>, MethodError> {
    let jmap = ctx.jmap;
    let Some((message, part)) = ids::parse_blob_id(blob_id) else {
        return Ok(None);
    };
    let Some(size) = jmap.store.blob_size(ctx.account.id, message).await? else {
        return Ok(None);
    };
    ctx.budget
        .charge_parse_or_refuse(size.max(0) as u64, &jmap.limits)?;
    // The account holds the blob: missing or corrupt bytes are the server's
    // fault (serverFail, cause logged), never parsed as an empty message.
    let raw = jmap
        .blobs
        .read(message)
        .await
        .map_err(|e| MethodError::server_fail(format_args!("reading blob {message}"), e))?;
    jmap.metrics.count_blob_read(raw.len());
    Ok(Some((raw, part.map(str::to_string))))
}

/// Parses the message (or the part at `part` within it) and renders it on
/// the work pool, charging the render work to the request's budget.
async fn parse_blob(
    ctx: &mut CallContext<'_>,
    raw: Vec<u8>,
    part: Option<String>,
    blob_id: &str,
    shape: &Arc<EmailShape>,
) -> Result<Parsed, MethodError> {
    let budget = &mut *ctx.budget;
    let (id, shape) = (blob_id.to_string(), shape.clone());
    let metrics = ctx.jmap.metrics.clone();
    let work = budget.work_left;
    let (parsed, work_left) = ctx
        .jmap
        .work
        .run(ctx.account.id, move || {
            let bytes = match part {
                None => raw,
                Some(path) => match resolve_part(&raw, &path) {
                    Some(content) => content.bytes,
                    None => return (Parsed::NotFound, work),
                },
            };
            metrics.count_parse("full");
            let meter = WorkMeter::new(work);
            (render(&bytes, &id, &shape, &meter), meter.left())
        })
        .await;
    ctx.budget.work_left = work_left;
    Ok(parsed)
}

/// The response of an Email/parse, assembled blob by blob.
#[derive(Default)]
struct ParseResponse {
    parsed: Map<String, Value>,
    not_parsable: Vec<String>,
    not_found: Vec<String>,
}

impl ParseResponse {
    fn add(&mut self, blob_id: String, outcome: Parsed) {
        match outcome {
            Parsed::Email(email) => {
                self.parsed.insert(blob_id, Value::Object(email));
            }
            Parsed::NotParsable => self.not_parsable.push(blob_id),
            Parsed::NotFound => self.not_found.push(blob_id),
            // The handler answers the call with requestTooLarge instead.
            Parsed::OverBudget => {}
        }
    }

    /// RFC 8621 §4.9: `parsed`, `notParsable` and `notFound`, each null when empty.
    fn into_json(self, account_id: String) -> Value {
        let list_or_null = |list: Vec<String>| {
            if list.is_empty() {
                Value::Null
            } else {
                json!(list)
            }
        };
        json!({
            "accountId": account_id,
            "parsed": if self.parsed.is_empty() { Value::Null } else { Value::Object(self.parsed) },
            "notParsable": list_or_null(self.not_parsable),
            "notFound": list_or_null(self.not_found),
        })
    }
}

/// Parses `bytes` as a message and renders the requested properties,
/// charging `meter`.
fn render(bytes: &[u8], blob_id: &str, shape: &EmailShape, meter: &WorkMeter) -> Parsed {
    if !opens_with_header_field(bytes) {
        return Parsed::NotParsable;
    }
    let Some(message) = mail_parser::MessageParser::default()
        .parse(bytes)
        .filter(|m| m.parts.first().is_some_and(|root| !root.headers.is_empty()))
    else {
        return Parsed::NotParsable;
    };
    let meta = EmailMeta {
        id: 0,
        blob_id: blob_id.to_string(),
        thread_id: 0,
        size: bytes.len() as i64,
        received_at: 0,
        mailbox_ids: Vec::new(),
        keywords: Vec::new(),
    };
    let sources = EmailSources {
        full: Some(&message),
        ..EmailSources::metadata(&meta)
    };
    let Ok(mut email) = render_email(
        &shape.properties,
        &shape.body_properties,
        &shape.options,
        &sources,
        meter,
    ) else {
        return Parsed::OverBudget;
    };
    for name in NULL_PROPERTIES {
        if let Some(value) = email.get_mut(*name) {
            *value = Value::Null;
        }
    }
    Parsed::Email(email)
}

//! Email/parse (RFC 8621 §4.9): blobs parsed as messages and rendered as
//! Email objects through the same renderer as Email/get, typically an
//! attached message (`message/rfc822` part) whose blob id is
//! `{message blobId}_{partId}`. A blob the account may not read, or a part
//! that does not exist, is `notFound`; bytes in which no header field can be
//! found are `notParsable`. The parsed email is in no mailbox: `id`,
//! `mailboxIds`, `keywords`, `receivedAt` and `threadId` are null. Its body
//! parts' blob ids extend the parsed blob id (`{blobId}_{partId}_{partId}`)
//! and download like any part.

use std::collections::HashSet;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::get::parse_properties;
use super::render::{BodyOptions, EmailSources, render_email};
use crate::jmap::dispatch::CallContext;
use crate::jmap::error::MethodError;
use crate::jmap::{args, ids};
use crate::mail::body::resolve_part;
use crate::mail::property::{BodyProperty, EmailProperty};
use crate::mail::read_level::BodyValueFlags;
use crate::store::EmailMeta;

/// Properties of an email in the store that a parsed email does not have.
const NULL_PROPERTIES: &[&str] = &["id", "mailboxIds", "keywords", "receivedAt", "threadId"];

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ParseRequest {
    account_id: String,
    blob_ids: Vec<String>,
    properties: Option<Vec<String>>,
    body_properties: Option<Vec<String>>,
    #[serde(default)]
    fetch_text_body_values: bool,
    #[serde(default, rename = "fetchHTMLBodyValues")]
    fetch_html_body_values: bool,
    #[serde(default)]
    fetch_all_body_values: bool,
    #[serde(default)]
    max_body_value_bytes: u64,
}

/// What one blob id resolved to.
enum Parsed {
    Email(Map<String, Value>),
    NotParsable,
    NotFound,
}

/// Handles one Email/parse call.
#[tracing::instrument(skip_all, fields(account = ctx.account.id))]
pub async fn email_parse(
    ctx: &mut CallContext<'_>,
    arguments: Map<String, Value>,
) -> Result<Value, MethodError> {
    let request: ParseRequest = args::parse(arguments)?;
    args::check_account(ctx.account, &request.account_id)?;
    let jmap = ctx.jmap;
    let properties = match &request.properties {
        Some(names) => parse_properties(names, EmailProperty::parse)?,
        None => EmailProperty::parse_default_list(),
    };
    let body_properties = match &request.body_properties {
        Some(names) => parse_properties(names, BodyProperty::parse)?,
        None => BodyProperty::default_list(),
    };
    if request.blob_ids.len() as u64 > jmap.limits.max_objects_in_get {
        return Err(MethodError::RequestTooLarge(
            jmap.limits.max_objects_in_get as usize,
        ));
    }
    let options = BodyOptions {
        flags: BodyValueFlags {
            fetch_text: request.fetch_text_body_values,
            fetch_html: request.fetch_html_body_values,
            fetch_all: request.fetch_all_body_values,
        },
        max_body_value_bytes: request.max_body_value_bytes as usize,
    };
    let (mut parsed, mut not_parsable, mut not_found) = (Map::new(), Vec::new(), Vec::new());
    let mut seen = HashSet::new();
    for blob_id in request
        .blob_ids
        .iter()
        .filter(|id| seen.insert(id.as_str()))
    {
        let bytes = match ids::parse_blob_id(blob_id) {
            Some((message, part)) if jmap.store.has_blob(ctx.account.id, message).await? => {
                let raw = jmap.blobs.get(message).await.map_err(|e| {
                    MethodError::server_fail(format_args!("reading blob {message}"), e)
                })?;
                raw.map(|raw| {
                    jmap.metrics.count_blob_read(raw.len());
                    (raw, part.map(str::to_string))
                })
            }
            _ => None,
        };
        let outcome = match bytes {
            None => Parsed::NotFound,
            Some((raw, part)) => {
                let (id, properties, body_properties) =
                    (blob_id.clone(), properties.clone(), body_properties.clone());
                let metrics = jmap.metrics.clone();
                tokio::task::spawn_blocking(move || {
                    let bytes = match part {
                        None => raw,
                        Some(path) => match resolve_part(&raw, &path) {
                            Some(content) => content.bytes,
                            None => return Parsed::NotFound,
                        },
                    };
                    metrics.count_parse("full");
                    render(&bytes, &id, &properties, &body_properties, &options)
                })
                .await
                .map_err(|e| MethodError::server_fail(format_args!("parsing blob {blob_id}"), e))?
            }
        };
        match outcome {
            Parsed::Email(email) => {
                parsed.insert(blob_id.clone(), Value::Object(email));
            }
            Parsed::NotParsable => not_parsable.push(blob_id.clone()),
            Parsed::NotFound => not_found.push(blob_id.clone()),
        }
    }
    let list_or_null = |list: Vec<String>| {
        if list.is_empty() {
            Value::Null
        } else {
            json!(list)
        }
    };
    Ok(json!({
        "accountId": request.account_id,
        "parsed": if parsed.is_empty() { Value::Null } else { Value::Object(parsed) },
        "notParsable": list_or_null(not_parsable),
        "notFound": list_or_null(not_found),
    }))
}

/// Whether `bytes` open with an RFC 5322 header field (`name:` with a name
/// of printable ASCII other than `:`), as a message does; mail-parser
/// itself reads almost anything as a message.
fn starts_with_header_field(bytes: &[u8]) -> bool {
    let line = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
    match line.iter().position(|b| *b == b':') {
        Some(colon) if colon > 0 => line[..colon].iter().all(|b| (33..=126).contains(b)),
        _ => false,
    }
}

/// Parses `bytes` as a message and renders the requested properties.
fn render(
    bytes: &[u8],
    blob_id: &str,
    properties: &[EmailProperty],
    body_properties: &[BodyProperty],
    options: &BodyOptions,
) -> Parsed {
    if !starts_with_header_field(bytes) {
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
        meta: &meta,
        header: None,
        fast_view: None,
        full: Some(&message),
    };
    let mut email = render_email(properties, body_properties, options, &sources);
    for name in NULL_PROPERTIES {
        if let Some(value) = email.get_mut(*name) {
            *value = Value::Null;
        }
    }
    Parsed::Email(email)
}

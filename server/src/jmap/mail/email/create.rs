//! Email/set `create` (RFC 8621 §4.6): one Email object given as JSON,
//! checked against the §4.6 rules, turned into a [`compose::Message`],
//! written as MIME and stored through the same ingest path as Email/import
//! ([`super::import::ingest_one`]).
//!
//! Plan ([`parse_draft`]: every property checked; what is wrong is one
//! `invalidProperties` naming each offending property, nested ones as JSON
//! Pointer paths such as `textBody/0/type`) → load ([`load_blobs`]: the
//! blobs the body parts name, `blobNotFound` with `notFound`) → compose (off
//! the async workers; `tooLarge` over `maxSizeUpload`) → store.
//!
//! Accepted: `mailboxIds` (required), `keywords`, `receivedAt`, the header
//! properties of §4.1.3 (`subject`, `from`, …, and `header:{name}[:as{Form}][:all]`
//! in every §4.1.2 form), and a body as `bodyStructure` or as `textBody` /
//! `htmlBody` / `attachments` (§4.1.4 EmailBodyPart objects whose content is
//! a `partId` of `bodyValues` or a `blobId`: an upload or a part of a
//! message of the account). Refused: server-set properties (`id`, `blobId`,
//! `threadId`, `size`, `hasAttachment`, `preview`), `headers` (§4.6: each
//! field is its own property), a field defined twice, `Content-*` fields on
//! the Email, a Content-Transfer-Encoding on a part, a truncated or
//! mis-decoded body value. A part's Content-Type, Content-Disposition,
//! Content-ID, Content-Language and Content-Location are written from its
//! `type`/`charset`/`name`, `disposition`, `cid`, `language` and `location`,
//! so `header:` properties for them are refused too.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::create_headers::{header_fields, is_token_like, optional_string};
pub use super::draft::{Draft, DraftBody, DraftPart, LoadedBlob, Source};
use super::draft::{Problems, path};
use super::import::{ingest_one, parse_received_at};
use super::members::{parse_keywords, parse_mailbox_ids};
use crate::jmap::budget::OverBudget;
use crate::jmap::call::CallContext;
use crate::jmap::error::{MethodError, SetError};
use crate::jmap::ids;
use crate::mail::body::resolve_part;
use crate::mail::compose::{self, ComposeError, Content, Part};
use crate::mail::property::{EmailProperty, HeaderProperty};

/// Creates one Email (RFC 8621 §4.6): parse, read the blobs it names,
/// compose, store. `Ok(Err(_))` is the SetError for `notCreated`; `Err` is a
/// method-level failure (the store or blob store).
pub async fn create_email(
    ctx: &mut CallContext<'_>,
    object: &Map<String, Value>,
    owned_mailboxes: &[i64],
) -> Result<Result<Value, SetError>, MethodError> {
    // Plan.
    let draft = match parse_draft(object, owned_mailboxes, ctx.created_ids) {
        Ok(draft) => draft,
        Err(error) => return Ok(Err(error)),
    };
    let max = ctx.jmap.limits.max_size_upload;
    // Load.
    let blobs = match load_blobs(ctx, draft.blob_ids(), max).await? {
        Ok(blobs) => blobs,
        Err(error) => return Ok(Err(error)),
    };
    let Draft {
        mailbox_ids,
        keywords,
        received_at,
        headers,
        body,
    } = draft;
    // Every part writes its content: a blob or text named by many parts is
    // counted each time, before any copy is made.
    if body.content_octets(&blobs) > max {
        return Ok(Err(too_large(max)));
    }
    let message = compose::Message {
        headers,
        body: body.into_part(&blobs),
    };
    drop(blobs);
    let raw = match compose_message(message, max).await? {
        Ok(raw) => raw,
        Err(error) => return Ok(Err(error)),
    };
    // Store and render.
    ingest_one(ctx, raw, mailbox_ids, keywords, Some(received_at)).await
}

/// Writes the message off the async workers (base64 of large blobs is CPU
/// work); `tooLarge` (RFC 8620 §5.3) when it is over `max` octets
/// (`maxSizeUpload`: no larger message could be uploaded and imported),
/// `invalidProperties` when a header field cannot be folded under 998 octets.
async fn compose_message(
    message: compose::Message,
    max: u64,
) -> Result<Result<Vec<u8>, SetError>, MethodError> {
    let composed =
        tokio::task::spawn_blocking(move || compose::compose(message, chrono::Utc::now()))
            .await
            .map_err(|e| MethodError::server_fail("composing the message", e))?;
    Ok(match composed {
        Ok(raw) if raw.len() as u64 > max => Err(too_large(max)),
        Ok(raw) => Ok(raw),
        Err(ComposeError::LineTooLong { field }) => Err(SetError::invalid_properties(
            &[format!("header:{field}").as_str()],
            format!("the {field} header field has a line over 998 octets that cannot be folded"),
        )),
    })
}

fn too_large(max: u64) -> SetError {
    SetError::new(
        "tooLarge",
        format!("the message would be larger than maxSizeUpload ({max} octets)"),
    )
}

/// The most distinct blob ids one created Email may name: each is a read
/// (they are looked up in one store query).
pub const MAX_BLOBS_PER_EMAIL: usize = 256;

/// Reads every blob the parts name (RFC 8621 §4.6): an upload or a message
/// of the account (`{blobId}`), or a part of one (`{blobId}_{partId}`,
/// decoded). `blobNotFound` with `notFound` listing each id the account does
/// not hold; `tooLarge` over [`MAX_BLOBS_PER_EMAIL`] ids, once their octets
/// pass `max`, or once the messages parsed for their parts pass the
/// request's octets parsed ([`crate::jmap::Limits::max_parse_bytes`]).
pub async fn load_blobs(
    ctx: &mut CallContext<'_>,
    blob_ids: BTreeSet<String>,
    max: u64,
) -> Result<Result<HashMap<String, LoadedBlob>, SetError>, MethodError> {
    if blob_ids.len() > MAX_BLOBS_PER_EMAIL {
        return Ok(Err(SetError::new(
            "tooLarge",
            format!("an Email may name at most {MAX_BLOBS_PER_EMAIL} blobs"),
        )));
    }
    let held = held_blobs(ctx, &blob_ids).await?;
    let mut not_found = Vec::new();
    let mut raw_blobs: HashMap<&str, Vec<u8>> = HashMap::new();
    let (mut loaded, mut total) = (HashMap::new(), 0u64);
    for id in &blob_ids {
        let Some((blob, part)) = ids::parse_blob_id(id).filter(|(blob, _)| held.contains(*blob))
        else {
            not_found.push(id.clone());
            continue;
        };
        if !raw_blobs.contains_key(blob) {
            raw_blobs.insert(blob, read_blob(ctx, blob).await?);
        }
        let raw = &raw_blobs[blob];
        let blob_loaded = match part {
            None => LoadedBlob {
                bytes: raw.clone(),
                media_type: None,
            },
            Some(path) => match load_part(ctx, raw, path).await? {
                Ok(Some(part)) => part,
                Ok(None) => {
                    not_found.push(id.clone());
                    continue;
                }
                Err(refused) => return Ok(Err(refused)),
            },
        };
        total = total.saturating_add(blob_loaded.bytes.len() as u64);
        if total > max {
            return Ok(Err(too_large(max)));
        }
        loaded.insert(id.clone(), blob_loaded);
    }
    if !not_found.is_empty() {
        return Ok(Err(blob_not_found(not_found)));
    }
    Ok(Ok(loaded))
}

/// Reads a message blob whole (counted as a blob read).
async fn read_blob(ctx: &CallContext<'_>, blob: &str) -> Result<Vec<u8>, MethodError> {
    let bytes = ctx
        .jmap
        .blobs
        .read(blob)
        .await
        .map_err(|e| MethodError::server_fail(format_args!("reading blob {blob}"), e))?;
    ctx.jmap.metrics.count_blob_read(bytes.len());
    Ok(bytes)
}

/// The part at `path` of the message `raw`, decoded (`None`: no such part),
/// its octets charged to the request's octets parsed first (`tooLarge` past
/// them).
async fn load_part(
    ctx: &mut CallContext<'_>,
    raw: &[u8],
    path: &str,
) -> Result<Result<Option<LoadedBlob>, SetError>, MethodError> {
    match ctx.budget.charge_parse(raw.len() as u64) {
        Ok(()) => {}
        Err(OverBudget::Request) => {
            return Ok(Err(SetError::new(
                "tooLarge",
                "parsing the messages its parts come from would pass the request's \
                 octets parsed",
            )));
        }
        Err(OverBudget::Server) => return Err(crate::jmap::budget::server_busy()),
    }
    let part = resolve_part_blocking(raw.to_vec(), path.to_string()).await?;
    Ok(Ok(part.map(|content| LoadedBlob {
        bytes: content.bytes,
        media_type: Some(content.content_type),
    })))
}

/// The message blob ids among `blob_ids` that the account holds (an upload
/// or a message of it), in one store query.
async fn held_blobs<'b>(
    ctx: &CallContext<'_>,
    blob_ids: &'b BTreeSet<String>,
) -> Result<BTreeSet<&'b str>, MethodError> {
    let distinct: BTreeSet<&str> = blob_ids
        .iter()
        .filter_map(|id| ids::parse_blob_id(id).map(|(blob, _)| blob))
        .collect();
    let asked: Vec<String> = distinct.iter().map(|blob| blob.to_string()).collect();
    let held = ctx.jmap.store.held_blobs(ctx.account.id, &asked).await?;
    Ok(distinct
        .into_iter()
        .filter(|blob| held.contains(*blob))
        .collect())
}

/// A part of a message, decoded, on the blocking pool (a whole parse).
async fn resolve_part_blocking(
    raw: Vec<u8>,
    path: String,
) -> Result<Option<crate::mail::body::PartContent>, MethodError> {
    tokio::task::spawn_blocking(move || resolve_part(&raw, &path))
        .await
        .map_err(|e| MethodError::server_fail("reading a body part", e))
}

fn blob_not_found(not_found: Vec<String>) -> SetError {
    SetError::new(
        "blobNotFound",
        "a blobId of a body part is not a blob of this account",
    )
    .with("notFound", json!(not_found))
}

/// Email properties the server sets (RFC 8621 §4.1.1, §4.1.4): never given
/// on create.
const SERVER_SET: &[&str] = &[
    "id",
    "blobId",
    "threadId",
    "size",
    "hasAttachment",
    "preview",
];

/// Body properties of the Email (RFC 8621 §4.1.4), read by [`parse_body`].
const BODY: &[&str] = &[
    "bodyStructure",
    "bodyValues",
    "textBody",
    "htmlBody",
    "attachments",
];

/// Checks one create object against RFC 8621 §4.6 and plans what to write.
pub fn parse_draft(
    object: &Map<String, Value>,
    owned_mailboxes: &[i64],
    created_ids: &HashMap<String, String>,
) -> Result<Draft, SetError> {
    let mut problems = Problems::default();
    let mut definitions = Vec::new();
    for (key, value) in object {
        match key.as_str() {
            "mailboxIds" | "keywords" | "receivedAt" => {}
            key if BODY.contains(&key) => {}
            key if SERVER_SET.contains(&key) => problems.add(key, "set by the server"),
            "headers" => {
                if !is_empty_list(value) {
                    problems.add(
                        "headers",
                        "set each header field as its own property (RFC 8621 §4.6)",
                    );
                }
            }
            key => match EmailProperty::parse(key) {
                Some(EmailProperty::Header(header)) => definitions.push((key, header, value)),
                Some(property) => match property.header_property() {
                    Some(header) => definitions.push((key, header, value)),
                    None => problems.add(key, "not settable"),
                },
                None => problems.add(
                    key,
                    "unknown property, or a header form not allowed for that field",
                ),
            },
        }
    }
    for (key, header, _) in &definitions {
        if header.name.starts_with("content-") {
            problems.add(
                *key,
                "Content-* header fields belong on body parts (RFC 8621 §4.6)",
            );
        }
    }
    let headers = header_fields("", &definitions, &mut problems);
    let mailbox_ids = match object
        .get("mailboxIds")
        .map(|v| parse_mailbox_ids(v, created_ids))
    {
        Some(Ok(set)) if !set.is_empty() && set.iter().all(|m| owned_mailboxes.contains(m)) => set,
        Some(Err(error)) => {
            problems.add_error(error);
            BTreeSet::new()
        }
        _ => {
            problems.add(
                "mailboxIds",
                "at least one mailbox of this account is required",
            );
            BTreeSet::new()
        }
    };
    let keywords = match object.get("keywords").map(parse_keywords).transpose() {
        Ok(keywords) => keywords.unwrap_or_default(),
        Err(error) => {
            problems.add_error(error);
            BTreeSet::new()
        }
    };
    let received_at = parse_received_at(object.get("receivedAt"))
        .map(|at| at.unwrap_or_else(|| chrono::Utc::now().timestamp()))
        .unwrap_or_else(|error| {
            problems.add_error(error);
            0
        });
    let top_level: BTreeSet<String> = definitions.iter().map(|(_, h, _)| h.name.clone()).collect();
    let body = parse_body(object, &top_level, &mut problems);
    problems.into_result(Draft {
        mailbox_ids,
        keywords,
        received_at,
        headers,
        body,
    })
}

fn is_empty_list(value: &Value) -> bool {
    value.is_null() || value.as_array().is_some_and(Vec::is_empty)
}

/// The body properties (RFC 8621 §4.6): `bodyStructure`, or `textBody` /
/// `htmlBody` / `attachments`, with `bodyValues`. `top_level` names the
/// fields the Email defines, which the root part must not define again.
fn parse_body(
    object: &Map<String, Value>,
    top_level: &BTreeSet<String>,
    problems: &mut Problems,
) -> DraftBody {
    let values = body_values(object.get("bodyValues"), problems);
    let mut parser = PartParser {
        values: &values,
        problems,
    };
    let lists = ["textBody", "htmlBody", "attachments"];
    if let Some(structure) = object.get("bodyStructure").filter(|v| !v.is_null()) {
        for list in lists
            .iter()
            .filter(|l| object.get(**l).is_some_and(|v| !v.is_null()))
        {
            parser.problems.add(
                *list,
                "not allowed together with bodyStructure (RFC 8621 §4.6)",
            );
        }
        let root = parser.part("bodyStructure", structure, true, Some(top_level));
        return DraftBody::Structure(Box::new(root));
    }
    let mut single = |key: &str, media_type: &str| -> Option<Box<DraftPart>> {
        let list = object.get(key).filter(|v| !v.is_null())?;
        match list.as_array().map(Vec::as_slice) {
            Some([one]) => {
                let part = parser.part(&path(key, "0"), one, false, None);
                if part.part.media_type != media_type {
                    parser.problems.add(
                        path(&path(key, "0"), "type"),
                        format!("must be {media_type} (RFC 8621 §4.6)"),
                    );
                }
                Some(Box::new(part))
            }
            _ => {
                parser
                    .problems
                    .add(key, "must hold exactly one body part (RFC 8621 §4.6)");
                None
            }
        }
    };
    let text = single("textBody", "text/plain");
    let html = single("htmlBody", "text/html");
    let attachments = match object.get("attachments") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(parts)) => parts
            .iter()
            .enumerate()
            .map(|(i, part)| parser.part(&path("attachments", &i.to_string()), part, false, None))
            .collect(),
        Some(_) => {
            parser
                .problems
                .add("attachments", "must be a list of body parts");
            Vec::new()
        }
    };
    DraftBody::Lists {
        text,
        html,
        attachments,
    }
}

/// `bodyValues`: partId → text. `isEncodingProblem` and `isTruncated` must
/// be false or absent (RFC 8621 §4.6).
fn body_values(value: Option<&Value>, problems: &mut Problems) -> HashMap<String, Arc<str>> {
    let mut values = HashMap::new();
    let Some(map) = value.filter(|v| !v.is_null()) else {
        return values;
    };
    let Some(map) = map.as_object() else {
        problems.add("bodyValues", "must be a map of partId to EmailBodyValue");
        return values;
    };
    for (part_id, body_value) in map {
        let here = path("bodyValues", part_id);
        let Some(text) = body_value.get("value").and_then(Value::as_str) else {
            problems.add(path(&here, "value"), "must be a String");
            continue;
        };
        for flag in ["isEncodingProblem", "isTruncated"] {
            match body_value.get(flag) {
                None | Some(Value::Bool(false)) => {}
                Some(_) => {
                    problems.add(path(&here, flag), "must be false or absent (RFC 8621 §4.6)")
                }
            }
        }
        values.insert(part_id.clone(), Arc::from(text));
    }
    values
}

/// The EmailBodyPart parser of one create object.
struct PartParser<'p> {
    values: &'p HashMap<String, Arc<str>>,
    problems: &'p mut Problems,
}

/// EmailBodyPart properties (RFC 8621 §4.1.4) a created part may have.
const PART_PROPERTIES: &[&str] = &[
    "partId",
    "blobId",
    "size",
    "type",
    "charset",
    "disposition",
    "name",
    "cid",
    "language",
    "location",
    "subParts",
    "headers",
];

/// Part header fields written from the part's own properties.
const PART_CONTENT_FIELDS: &[&str] = &[
    "content-type",
    "content-disposition",
    "content-id",
    "content-language",
    "content-location",
];

impl PartParser<'_> {
    /// One EmailBodyPart at `at`. `multipart_allowed` in `bodyStructure`
    /// only; `top_level`: the Email's fields, for the root part.
    fn part(
        &mut self,
        at: &str,
        value: &Value,
        multipart_allowed: bool,
        top_level: Option<&BTreeSet<String>>,
    ) -> DraftPart {
        let empty = DraftPart {
            part: Part::new("text/plain", Content::Text(String::new())),
            source: Source::Value(Arc::from("")),
        };
        let Some(object) = value.as_object() else {
            self.problems.add(at, "must be an EmailBodyPart object");
            return empty;
        };
        let mut definitions = Vec::new();
        for (key, value) in object {
            if PART_PROPERTIES.contains(&key.as_str()) {
                continue;
            }
            match HeaderProperty::parse(key) {
                Some(header) if header.name == "content-transfer-encoding" => self.problems.add(
                    path(at, key),
                    "the server chooses the Content-Transfer-Encoding (RFC 8621 §4.6)",
                ),
                Some(header) if PART_CONTENT_FIELDS.contains(&header.name.as_str()) => {
                    self.problems.add(
                        path(at, key),
                        "set with type, charset, name, disposition, cid, language or location",
                    )
                }
                Some(header) if top_level.is_some_and(|names| names.contains(&header.name)) => {
                    self.problems.add(
                        path(at, key),
                        "already defined on the Email (RFC 8621 §4.6)",
                    )
                }
                Some(header) => definitions.push((key.as_str(), header, value)),
                None => self.problems.add(
                    path(at, key),
                    "unknown EmailBodyPart property or header form",
                ),
            }
        }
        if !object.get("headers").is_none_or(is_empty_list) {
            self.problems.add(
                path(at, "headers"),
                "set each header field as its own property (RFC 8621 §4.6)",
            );
        }
        let mut part = Part::new("", Content::Multipart(Vec::new()));
        part.headers = header_fields(at, &definitions, self.problems);
        self.describe(at, object, &mut part);
        let source = self.source(at, object, &mut part, multipart_allowed);
        DraftPart { part, source }
    }

    /// `type`, `charset`, `disposition`, `name`, `cid`, `language`, `location`.
    fn describe(&mut self, at: &str, object: &Map<String, Value>, part: &mut Part) {
        let mut text = |key: &str, valid: fn(&str) -> bool| -> Option<String> {
            match optional_string(object.get(key)) {
                Ok(Some(value)) if valid(&value) => Some(value),
                Ok(None) => None,
                _ => {
                    self.problems.add(path(at, key), "invalid value");
                    None
                }
            }
        };
        part.media_type =
            text("type", is_media_type).map_or_else(String::new, |t| t.to_ascii_lowercase());
        part.charset = text("charset", is_mime_token);
        part.disposition = text("disposition", is_mime_token).map(|d| d.to_ascii_lowercase());
        part.name = text("name", |name| !name.chars().any(char::is_control));
        part.cid = text("cid", is_token_like);
        part.location = text("location", is_token_like);
        part.language = match object.get("language") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(tags))
                if tags.iter().all(|t| t.as_str().is_some_and(is_mime_token)) =>
            {
                tags.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            }
            Some(_) => {
                self.problems
                    .add(path(at, "language"), "must be a list of language tags");
                Vec::new()
            }
        };
    }

    /// Where the content comes from: `subParts` for a multipart, else
    /// exactly one of `partId` (a text of `bodyValues`; no `charset` or
    /// `size`) and `blobId`.
    fn source(
        &mut self,
        at: &str,
        object: &Map<String, Value>,
        part: &mut Part,
        multipart_allowed: bool,
    ) -> Source {
        let given = |key: &str| object.get(key).is_some_and(|v| !v.is_null());
        if part.media_type.starts_with("multipart/") {
            if !multipart_allowed {
                self.problems.add(
                    path(at, "type"),
                    "a multipart is allowed in bodyStructure only",
                );
            }
            for key in ["partId", "blobId", "charset"]
                .into_iter()
                .filter(|k| given(k))
            {
                self.problems
                    .add(path(at, key), "not allowed on a multipart part");
            }
            let Some(children) = object.get("subParts").and_then(Value::as_array) else {
                self.problems
                    .add(path(at, "subParts"), "a multipart part needs subParts");
                return Source::Children(Vec::new());
            };
            let at_children = path(at, "subParts");
            return Source::Children(
                children
                    .iter()
                    .enumerate()
                    .map(|(i, child)| {
                        self.part(&path(&at_children, &i.to_string()), child, true, None)
                    })
                    .collect(),
            );
        }
        if given("subParts") {
            self.problems
                .add(path(at, "subParts"), "only a multipart part has subParts");
        }
        match (
            object.get("partId").and_then(Value::as_str),
            object.get("blobId").and_then(Value::as_str),
        ) {
            (Some(part_id), None) => {
                for key in ["charset", "size"].into_iter().filter(|k| given(k)) {
                    self.problems.add(
                        path(at, key),
                        "must be omitted when partId is given (RFC 8621 §4.6)",
                    );
                }
                if part.media_type.is_empty() {
                    part.media_type = "text/plain".to_string();
                }
                if !part.media_type.starts_with("text/") {
                    self.problems
                        .add(path(at, "type"), "a part from bodyValues must be text/*");
                }
                match self.values.get(part_id) {
                    Some(text) => Source::Value(Arc::clone(text)),
                    None => {
                        self.problems
                            .add(path(at, "partId"), "not in bodyValues (RFC 8621 §4.6)");
                        Source::Value(Arc::from(""))
                    }
                }
            }
            (None, Some(blob_id)) => Source::Blob(blob_id.to_string()),
            (Some(_), Some(_)) => {
                self.problems.add(
                    path(at, "partId"),
                    "partId or blobId, not both (RFC 8621 §4.6)",
                );
                Source::Value(Arc::from(""))
            }
            (None, None) => {
                self.problems.add(
                    path(at, "partId"),
                    "a part needs a partId or a blobId (RFC 8621 §4.6)",
                );
                Source::Value(Arc::from(""))
            }
        }
    }
}

/// `type/subtype` of RFC 2045 tokens.
fn is_media_type(value: &str) -> bool {
    value
        .split_once('/')
        .is_some_and(|(kind, sub)| is_mime_token(kind) && is_mime_token(sub))
}

/// An RFC 2045 §5.1 token.
fn is_mime_token(value: &str) -> bool {
    !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_graphic() && !b"()<>@,;:\\\"/[]?=".contains(&b))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(object: Value) -> Result<Draft, SetError> {
        parse_draft(object.as_object().unwrap(), &[1], &HashMap::new())
    }

    fn invalid(object: Value) -> Vec<String> {
        let error = parse(object).expect_err("invalid");
        assert_eq!(error.kind, "invalidProperties");
        error.properties
    }

    #[test]
    fn content_is_counted_per_part_and_a_text_is_held_once() {
        let parts: Vec<Value> = (0..100).map(|_| json!({"partId": "1"})).collect();
        let draft = parse(json!({"mailboxIds": {"m1": true},
            "bodyValues": {"1": {"value": "x".repeat(1000)}},
            "bodyStructure": {"type": "multipart/mixed", "subParts": parts}}))
        .unwrap();
        // A hundred parts name one text: counted a hundred times, held once.
        assert_eq!(draft.body.content_octets(&HashMap::new()), 100_000);
        let DraftBody::Structure(root) = &draft.body else {
            panic!("a bodyStructure draft");
        };
        let Source::Children(children) = &root.source else {
            panic!("a multipart root");
        };
        let Source::Value(text) = &children[0].source else {
            panic!("a text part");
        };
        assert_eq!(Arc::strong_count(text), 100);
    }

    #[test]
    fn a_draft_plans_its_fields_and_parts() {
        let draft = parse(json!({
            "mailboxIds": {"m1": true},
            "keywords": {"$draft": true},
            "subject": "Grüße",
            "from": [{"name": "Ann", "email": "ann@example.com"}],
            "header:X-Mailer:asText": "test",
            "header:Comments:all": ["one", "two"],
            "bodyValues": {"t": {"value": "hi"}},
            "textBody": [{"partId": "t"}],
            "attachments": [{"blobId": "b", "type": "image/png", "disposition": "inline", "cid": "c@x"}],
        }))
        .unwrap();
        assert_eq!(draft.mailbox_ids, BTreeSet::from([1]));
        assert_eq!(draft.keywords, BTreeSet::from(["$draft".to_string()]));
        let names: Vec<&str> = draft.headers.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            ["From", "Comments", "Comments", "X-Mailer", "Subject"]
        );
        assert_eq!(draft.blob_ids(), BTreeSet::from(["b".to_string()]));
    }

    #[test]
    fn every_rule_of_rfc_8621_section_4_6_names_its_property() {
        let check = |object: Value, expected: &[&str]| {
            let mut object = object;
            object["mailboxIds"] = json!({"m1": true});
            assert_eq!(invalid(object.clone()), expected, "{object}");
        };
        check(json!({"id": "e1", "size": 3}), &["id", "size"]);
        check(
            json!({"headers": [{"name": "X", "value": "y"}]}),
            &["headers"],
        );
        check(
            json!({"from": [], "header:From:asAddresses": []}),
            &["from", "header:From:asAddresses"],
        );
        check(
            json!({"header:Content-Type": "text/plain"}),
            &["header:Content-Type"],
        );
        check(
            json!({"header:Subject:asURLs": "x"}),
            &["header:Subject:asURLs"],
        );
        check(
            json!({"header:X:asRaw": "a\r\nBcc: evil@example.com"}),
            &["header:X:asRaw"],
        );
        check(json!({"sentAt": "yesterday"}), &["sentAt"]);
        check(json!({"to": [{"email": "a b@example.com"}]}), &["to"]);
        check(
            json!({"bodyStructure": {"partId": "1"}, "bodyValues": {"1": {"value": "x"}}, "textBody": []}),
            &["textBody"],
        );
        check(
            json!({"bodyValues": {"1": {"value": "x", "isTruncated": true}}, "textBody": [{"partId": "1"}]}),
            &["bodyValues/1/isTruncated"],
        );
        check(
            json!({"textBody": [{"partId": "1", "type": "text/html"}], "bodyValues": {"1": {"value": "x"}}}),
            &["textBody/0/type"],
        );
        check(
            json!({"htmlBody": [{"partId": "1"}, {"partId": "1"}], "bodyValues": {"1": {"value": "x"}}}),
            &["htmlBody"],
        );
        check(
            json!({"textBody": [{"partId": "nope"}]}),
            &["textBody/0/partId"],
        );
        check(
            json!({"attachments": [{"blobId": "b", "header:Content-Transfer-Encoding": "base64"}]}),
            &["attachments/0/header:Content-Transfer-Encoding"],
        );
        check(
            json!({"textBody": [{"partId": "1", "charset": "utf-8", "size": 1}], "bodyValues": {"1": {"value": "x"}}}),
            &["textBody/0/charset", "textBody/0/size"],
        );
        check(
            json!({"subject": "s", "bodyStructure": {"partId": "1", "header:Subject:asText": "t"}, "bodyValues": {"1": {"value": "x"}}}),
            &["bodyStructure/header:Subject:asText"],
        );
        check(
            json!({"bodyStructure": {"type": "multipart/mixed", "subParts": [{"blobId": "b", "partId": "1"}]}}),
            &["bodyStructure/subParts/0/partId"],
        );
        let mut no_mailbox = json!({"subject": "x"});
        no_mailbox["mailboxIds"] = json!({"m2": true});
        assert_eq!(invalid(no_mailbox), ["mailboxIds"]);
        assert_eq!(invalid(json!({"subject": "x"})), ["mailboxIds"]);
    }
}

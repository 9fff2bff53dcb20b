//! What an Email/set `create` plans to write ([`super::create`]): the
//! checked Email and its body parts, where each part's content comes from,
//! and the `invalidProperties` problems gathered while checking it.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crate::jmap::error::SetError;
use crate::mail::compose::{self, Content, Field, Part};

/// An Email to create, checked: where it goes and the message to write,
/// with the blobs its parts name not yet read.
#[derive(Debug)]
pub struct Draft {
    pub mailbox_ids: BTreeSet<i64>,
    pub keywords: BTreeSet<String>,
    /// Unix seconds.
    pub received_at: i64,
    pub headers: Vec<Field>,
    pub body: DraftBody,
}

/// The body as the client gave it (RFC 8621 §4.6: one or the other).
#[derive(Debug)]
pub enum DraftBody {
    Structure(Box<DraftPart>),
    Lists {
        text: Option<Box<DraftPart>>,
        html: Option<Box<DraftPart>>,
        attachments: Vec<DraftPart>,
    },
}

/// One EmailBodyPart to write: its fields (a leaf's `media_type` is empty
/// when the client gave no `type` for a blob; the blob's own type is used)
/// and where its content comes from.
#[derive(Debug)]
pub struct DraftPart {
    pub part: Part,
    pub source: Source,
}

/// Where a part's content comes from.
#[derive(Debug)]
pub enum Source {
    /// A `bodyValues` text, shared by every part that names its partId
    /// (a text named 100 times is held once until the size is checked).
    Value(Arc<str>),
    /// A blob id as the client gave it.
    Blob(String),
    /// The sub-parts of a `multipart/*` part.
    Children(Vec<DraftPart>),
}

/// A blob read for a part: its octets and, for a part of a stored message,
/// its type.
#[derive(Debug)]
pub struct LoadedBlob {
    pub bytes: Vec<u8>,
    pub media_type: Option<String>,
}

/// The `invalidProperties` problems of one create object, gathered so that
/// one answer names every property at fault.
#[derive(Debug, Default)]
pub(super) struct Problems {
    properties: Vec<String>,
    reasons: Vec<String>,
}

impl Problems {
    pub(super) fn add(&mut self, path: impl Into<String>, reason: impl Into<String>) {
        let path = path.into();
        let reason = reason.into();
        self.reasons.push(format!("{path}: {reason}"));
        self.properties.push(path);
    }

    /// Adds the properties of a SetError from a shared parser.
    pub(super) fn add_error(&mut self, error: SetError) {
        self.reasons.push(error.description);
        self.properties.extend(error.properties);
    }

    pub(super) fn into_result<T>(self, value: T) -> Result<T, SetError> {
        if self.properties.is_empty() {
            return Ok(value);
        }
        let properties: Vec<&str> = self.properties.iter().map(String::as_str).collect();
        Err(SetError::invalid_properties(
            &properties,
            self.reasons.join("; "),
        ))
    }
}

/// A JSON Pointer path (RFC 6901): `parent/token`, `~` and `/` escaped.
pub(super) fn path(parent: &str, token: &str) -> String {
    let token = token.replace('~', "~0").replace('/', "~1");
    if parent.is_empty() {
        token
    } else {
        format!("{parent}/{token}")
    }
}

impl Draft {
    /// Every blob id the parts name.
    pub fn blob_ids(&self) -> BTreeSet<String> {
        self.body
            .leaves()
            .into_iter()
            .filter_map(|part| match &part.source {
                Source::Blob(id) => Some(id.clone()),
                _ => None,
            })
            .collect()
    }
}

impl DraftBody {
    /// The octets of content the body's leaf parts write, before transfer
    /// encoding: each part counted, however many name the same blob or text.
    pub(super) fn content_octets(&self, blobs: &HashMap<String, LoadedBlob>) -> u64 {
        self.leaves()
            .into_iter()
            .map(|part| match &part.source {
                Source::Value(text) => text.len() as u64,
                Source::Blob(id) => blobs.get(id).map_or(0, |blob| blob.bytes.len() as u64),
                Source::Children(_) => 0,
            })
            .fold(0u64, u64::saturating_add)
    }

    /// Every part with content (not `multipart/*`), in document order,
    /// found without recursion.
    pub(super) fn leaves(&self) -> Vec<&DraftPart> {
        let mut stack: Vec<&DraftPart> = match self {
            DraftBody::Structure(root) => vec![root],
            DraftBody::Lists {
                text,
                html,
                attachments,
            } => text
                .iter()
                .chain(html)
                .map(|part| &**part)
                .chain(attachments)
                .collect(),
        };
        stack.reverse();
        let mut leaves = Vec::new();
        while let Some(part) = stack.pop() {
            match &part.source {
                Source::Children(children) => stack.extend(children.iter().rev()),
                _ => leaves.push(part),
            }
        }
        leaves
    }

    /// The body to write, with the blobs read ([`load_blobs`] found each).
    pub(super) fn into_part(self, blobs: &HashMap<String, LoadedBlob>) -> Part {
        match self {
            DraftBody::Structure(root) => root.into_part(blobs),
            DraftBody::Lists {
                text,
                html,
                attachments,
            } => compose::body_from_lists(
                text.map(|part| part.into_part(blobs)),
                html.map(|part| part.into_part(blobs)),
                attachments
                    .into_iter()
                    .map(|part| part.into_part(blobs))
                    .collect(),
            ),
        }
    }
}

impl DraftPart {
    pub(super) fn into_part(self, blobs: &HashMap<String, LoadedBlob>) -> Part {
        let DraftPart { mut part, source } = self;
        part.content = match source {
            Source::Value(text) => Content::Text(text.to_string()),
            Source::Children(children) => {
                Content::Multipart(children.into_iter().map(|c| c.into_part(blobs)).collect())
            }
            Source::Blob(id) => {
                let blob = blobs.get(&id);
                if part.media_type.is_empty() {
                    part.media_type = blob
                        .and_then(|b| b.media_type.clone())
                        .unwrap_or_else(|| "application/octet-stream".to_string());
                }
                Content::Bytes(blob.map(|b| b.bytes.clone()).unwrap_or_default())
            }
        };
        part
    }
}

//! Body parts (RFC 8621 §4.1.4): bodyStructure, textBody, htmlBody,
//! attachments, bodyValues, and the decoded content of one part.
//!
//! mail-parser gives the MIME tree (which part is whose child) and each
//! part's header offsets and body octet range. Everything else is derived
//! here from the raw octets: the part's type and parameters (RFC 2045, RFC
//! 2231, RFC 2047), the transfer decoding (RFC 2045 §6.7, §6.8), the charset
//! decoding and the textBody/htmlBody/attachments partition, which follows
//! the RFC 8621 §4.1.4 algorithm exactly (mail-parser's own lists differ from
//! it: they ignore a Content-Disposition filename, and list every non-text
//! part as an attachment).

use mail_parser::{Message, PartType};
use serde_json::{Map, Value};

use super::header::{self, decode_owned, decode_words};
use super::mime_field::{MimeField, is_media_type, strip_comments};
use super::property::BodyProperty;
pub(crate) use super::transfer::TransferEncoding;
use super::transfer::{Count, transfer_decode};
use crate::mail::read_level::BodyValueFlags;

/// Blob id of one body part of a message: `{message blobId}_{partId}` (RFC 8621 §4.1.4).
pub fn part_blob_id(message_blob_id: &str, part_id: &str) -> String {
    format!("{message_blob_id}_{part_id}")
}

/// The decoded content of one body part, for blob download.
#[derive(Debug, Clone)]
pub struct PartContent {
    /// The part's octets after transfer decoding (RFC 8621 §4.1.4 `blobId`).
    pub bytes: Vec<u8>,
    /// Media type, lowercase, e.g. `application/pdf` (the part's `type`).
    pub content_type: String,
    /// File name, if the part has one (the part's `name`).
    pub name: Option<String>,
}

/// Finds a part by its partId (the decimal mail-parser part index) and
/// returns its content after transfer decoding. `None` when there is no such
/// part or it is a `multipart/*` part (which has no blob, RFC 8621 §4.1.4).
pub fn part_content(message: &mail_parser::Message<'_>, part_id: &str) -> Option<PartContent> {
    let index: usize = part_id.parse().ok()?;
    if index.to_string() != part_id {
        return None;
    }
    let tree = BodyPart::tree(message)?;
    let part = tree.find(index)?;
    if part.sub_parts.is_some() {
        return None;
    }
    Some(part.content(part.raw_body(&message.raw_message)))
}

/// Resolves a part path as blob ids carry it: `3` is part 3 of `raw`;
/// `3_2` is part 2 of the message attached as part 3 (the blob ids of the
/// parts of an Email/parse result). `None` when a step does not exist.
pub fn resolve_part(raw: &[u8], path: &str) -> Option<PartContent> {
    let mut steps = path.split('_');
    let first = steps.next()?;
    let mut content = part_content(&super::message::parse_message(raw), first)?;
    for step in steps {
        content = part_content(&super::message::parse_message(&content.bytes), step)?;
    }
    Some(content)
}

/// `hasAttachment` as RFC 8621 §4.1.4 suggests: the `attachments` list holds
/// a part whose Content-Disposition is not `inline`. For the fast-view
/// projection, so that it agrees with the `attachments` property.
pub fn has_attachment(message: &Message<'_>) -> bool {
    BodyPart::tree(message).is_some_and(|tree| tree.partition().has_attachment())
}

/// The decoded text of one `textBody` part (RFC 8621 §4.1.4), as bodyValues
/// would give it without truncation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyText {
    /// The part is `text/html` (else `text/plain`).
    pub html: bool,
    /// Transfer- and charset-decoded text, CRLF replaced by LF.
    pub text: String,
}

impl BodyText {
    /// The part's text as `preview` shows it and the index reads it:
    /// `text/html` turned into text.
    pub fn into_text(self) -> String {
        match self.html {
            true => mail_parser::decoders::html::html_to_text(&self.text),
            false => self.text,
        }
    }
}

/// The text of the `textBody` parts that are `text/*`, in order: what a
/// `preview` should be made of so that it agrees with `textBody` and
/// `bodyValues` (same partition, same charset handling).
pub fn text_body_texts(message: &Message<'_>) -> Vec<BodyText> {
    match BodyPart::tree(message) {
        Some(tree) => tree.partition().text_body_texts(&message.raw_message),
        None => Vec::new(),
    }
}

/// What ingest reads of a body, once, from one part tree: the fast view's
/// `preview` and `hasAttachment` (`mail/fast_view.rs`) and the full-text
/// index's body words (`mail/search.rs`) are all made from it, so the parts
/// are partitioned and decoded, and HTML turned into text, a single time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BodyReading {
    /// The text of each `textBody` part that is `text/*`, in order, as
    /// [`text_body_texts`] decodes it, `text/html` turned into text the way
    /// `preview` shows it.
    pub texts: Vec<String>,
    /// The names of the `attachments` parts that have one, in order.
    pub attachment_names: Vec<String>,
    /// [`has_attachment`].
    pub has_attachment: bool,
}

impl BodyReading {
    /// Reads `message` (no tree, as for a message mail-parser cannot split:
    /// no text, no attachment).
    pub fn of(message: &Message<'_>) -> Self {
        let Some(tree) = BodyPart::tree(message) else {
            return Self::default();
        };
        let partition = tree.partition();
        Self {
            texts: (partition.text_body_texts(&message.raw_message).into_iter())
                .map(BodyText::into_text)
                .collect(),
            attachment_names: partition
                .attachments
                .iter()
                .filter_map(|part| part.name().map(str::to_string))
                .collect(),
            has_attachment: partition.has_attachment(),
        }
    }
}

/// One EmailBodyPart, resolved from a mail-parser part into values of its
/// own: it holds no reference into the parse, only its header octets and
/// where its body lies in the raw message, so the tree stands on its own
/// (what the structure read level keeps; issue 15).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BodyPart {
    /// mail-parser's index of the part; the partId is its decimal form.
    pub(super) index: usize,
    /// The part's header fields as written: the octets from its first field
    /// to the end of its last (what [`header::fields`] splits).
    pub(super) header: Box<[u8]>,
    /// The octet range of its body in the raw message.
    pub(super) body: (usize, usize),
    /// `type`: lowercase, parameters stripped, with the MIME defaults.
    pub(super) content_type: String,
    pub(super) charset: Option<String>,
    pub(super) disposition: Option<String>,
    pub(super) name: Option<String>,
    pub(super) cid: Option<String>,
    pub(super) language: Option<Vec<String>>,
    pub(super) location: Option<String>,
    pub(super) encoding: TransferEncoding,
    /// `Some` exactly for `multipart/*` parts.
    pub(super) sub_parts: Option<Vec<BodyPart>>,
    /// `size`: octets after transfer decoding (for a multipart, its raw body).
    pub(super) size: usize,
    /// For a leaf of a stored tree ([`crate::mail::structure`]): the digest
    /// of its raw body octets taken at ingest, against which a range read of
    /// them is checked. `None` in a tree built from a parse.
    pub(super) digest: Option<[u8; 16]>,
}

/// The three flat lists of RFC 8621 §4.1.4, in order.
#[derive(Debug, Default)]
pub(crate) struct Partition<'t> {
    pub text_body: Vec<&'t BodyPart>,
    pub html_body: Vec<&'t BodyPart>,
    pub attachments: Vec<&'t BodyPart>,
}

impl Partition<'_> {
    /// The decoded `textBody` parts that are `text/*` of the message `raw`
    /// ([`text_body_texts`]).
    fn text_body_texts(&self, raw: &[u8]) -> Vec<BodyText> {
        self.text_body
            .iter()
            .filter(|part| part.content_type.starts_with("text/"))
            .map(|part| BodyText {
                html: part.content_type == "text/html",
                text: part.text(part.raw_body(raw)).0,
            })
            .collect()
    }

    /// [`has_attachment`]: an attachment that is not `inline`.
    fn has_attachment(&self) -> bool {
        self.attachments
            .iter()
            .any(|part| part.disposition.as_deref() != Some("inline"))
    }
}

/// The deepest `multipart/*` nesting rendered as a tree. mail-parser does
/// not bound multipart nesting (a 1000-deep message parses), and each level
/// adds two levels of JSON to `bodyStructure`: past this depth the rest of
/// the tree is flattened ([`leaves_below`]) so that the response stays well
/// within the 128 levels JSON parsers such as serde_json accept, and no part
/// is lost.
pub const MAX_DEPTH: usize = 32;

/// The non-multipart parts below multipart part `index`, in document order,
/// found without recursion (the nesting may be thousands deep).
fn leaves_below(message: &Message<'_>, index: usize) -> Vec<usize> {
    let mut leaves = Vec::new();
    let mut stack = vec![index];
    while let Some(current) = stack.pop() {
        match message.parts.get(current).map(|part| &part.body) {
            Some(PartType::Multipart(children)) => stack.extend(
                children
                    .iter()
                    .rev()
                    .map(|&child| child as usize)
                    // Children always follow their parent: no cycles.
                    .filter(|&child| child > current),
            ),
            Some(_) => leaves.push(current),
            None => {}
        }
    }
    leaves
}

/// The partId and `type` of each part of a message's `bodyStructure`, in
/// document order (each part before its sub-parts; partId `None` for a
/// multipart, RFC 8621 §4.1.4): what tells whether two servers split one
/// message alike, whatever each names its parts (the JMAP upstream's
/// mirror, issue 19, ADR 0009).
pub fn part_ids(message: &Message<'_>) -> Vec<(Option<String>, String)> {
    let tree = BodyPart::tree(message);
    let mut ids = Vec::new();
    let mut stack: Vec<&BodyPart> = tree.iter().collect();
    while let Some(part) = stack.pop() {
        ids.push((part.part_id(), part.content_type.clone()));
        if let Some(children) = &part.sub_parts {
            stack.extend(children.iter().rev());
        }
    }
    ids
}

/// A part's `type` (RFC 2045 §5.2, RFC 2046 §5.1): its declared media
/// type, checked against whether mail-parser split it as a multipart; none
/// declared is `message/rfc822` in a `multipart/digest`, else `text/plain`.
fn content_type_of(
    declared: Option<&str>,
    is_multipart: bool,
    parent_type: Option<&str>,
) -> String {
    let implicit = if parent_type == Some("multipart/digest") {
        "message/rfc822"
    } else {
        "text/plain"
    };
    match (declared, is_multipart) {
        (Some(declared), true) if declared.starts_with("multipart/") => declared.to_string(),
        // mail-parser saw a multipart our parameter parser did not: keep its type.
        (_, true) => "multipart/mixed".to_string(),
        // RFC 2046 §5.1.1: a multipart without a (found) boundary is not a
        // valid multipart; RFC 2045 §5.2 then defaults to text/plain.
        (Some(declared), false) if declared.starts_with("multipart/") => "text/plain".to_string(),
        (Some(declared), false) => declared.to_string(),
        (None, _) => implicit.to_string(),
    }
}

/// `cid`: a Content-ID without comments and angle brackets.
fn content_id(value: &str) -> String {
    let value = strip_comments(value);
    let value = value.trim();
    let value = value.strip_prefix('<').unwrap_or(value);
    let value = value.strip_suffix('>').unwrap_or(value);
    value.trim().to_string()
}

/// `language`: the tags of a Content-Language, without comments or spaces.
fn languages(value: &str) -> Vec<String> {
    strip_comments(value)
        .split(',')
        .map(|tag| tag.split_ascii_whitespace().collect::<String>())
        .filter(|tag| !tag.is_empty())
        .collect()
}

/// The Content-Transfer-Encoding a field value names (none: identity).
fn transfer_encoding(value: Option<&str>) -> TransferEncoding {
    match value
        .map(|value| strip_comments(value).trim().to_ascii_lowercase())
        .as_deref()
    {
        None | Some("" | "7bit" | "8bit" | "binary") => TransferEncoding::Identity,
        Some("base64") => TransferEncoding::Base64,
        Some("quoted-printable") => TransferEncoding::QuotedPrintable,
        Some(_) => TransferEncoding::Unknown,
    }
}

/// A part's header octets (from its first field to the end of its last)
/// and the octet range of its body, within `raw`.
fn spans(part: &mail_parser::MessagePart<'_>, raw: &[u8]) -> (Box<[u8]>, (usize, usize)) {
    let header = match (part.headers.first(), part.headers.last()) {
        (Some(first), Some(last)) => {
            let start = (first.offset_field as usize).min(raw.len());
            let end = (last.offset_end as usize).clamp(start, raw.len());
            raw[start..end].into()
        }
        _ => Box::default(),
    };
    let body_start = (part.offset_body as usize).min(raw.len());
    let body = (
        body_start,
        (part.offset_end as usize).clamp(body_start, raw.len()),
    );
    (header, body)
}

impl BodyPart {
    /// The `bodyStructure` tree of a fully parsed message.
    pub(crate) fn tree(message: &Message<'_>) -> Option<Self> {
        Self::build(message, 0, None, 0)
    }

    fn build(
        message: &Message<'_>,
        index: usize,
        parent_type: Option<&str>,
        depth: usize,
    ) -> Option<Self> {
        let part = message.parts.get(index)?;
        let raw: &[u8] = &message.raw_message;
        let field = |name| header::last_raw_value(&part.headers, raw, name);

        let content_type_field = field("content-type").map(|value| MimeField::parse(&value));
        let declared = content_type_field
            .as_ref()
            .map(|field| field.value.as_str())
            .filter(|value| is_media_type(value));
        let multipart_children = match &part.body {
            PartType::Multipart(children) => Some(children),
            PartType::Text(_)
            | PartType::Html(_)
            | PartType::Binary(_)
            | PartType::InlineBinary(_)
            | PartType::Message(_) => None,
        };
        let content_type = content_type_of(declared, multipart_children.is_some(), parent_type);
        let sub_parts = multipart_children
            .map(|children| Self::build_children(message, index, children, &content_type, depth));

        let params = content_type_field.as_ref().filter(|_| declared.is_some());
        let charset = params
            .and_then(|field| field.param("charset"))
            .map(|charset| charset.trim().to_string())
            .filter(|charset| !charset.is_empty())
            .or_else(|| {
                content_type
                    .starts_with("text/")
                    .then(|| "us-ascii".to_string())
            });
        let disposition_field = field("content-disposition").map(|value| MimeField::parse(&value));
        let disposition = disposition_field
            .as_ref()
            .map(|field| field.value.clone())
            .filter(|value| !value.is_empty());
        let name = disposition_field
            .as_ref()
            .and_then(|field| field.param("filename"))
            .or_else(|| {
                content_type_field
                    .as_ref()
                    .and_then(|field| field.param("name"))
            })
            .map(|name| decode_words(&name))
            .filter(|name| !name.is_empty());
        let cid = field("content-id").map(|value| content_id(&value));
        let language = field("content-language").map(|value| languages(&value));
        let location = field("content-location")
            .map(|value| value.split_ascii_whitespace().collect::<String>());
        let encoding = transfer_encoding(field("content-transfer-encoding").as_deref());
        let (header, body) = spans(part, raw);
        let size = if sub_parts.is_some() {
            body.1 - body.0
        } else {
            let mut count = Count(0);
            transfer_decode(encoding, &raw[body.0..body.1], &mut count);
            count.0
        };
        Some(Self {
            index,
            header,
            body,
            content_type,
            charset,
            disposition,
            name,
            cid,
            language,
            location,
            encoding,
            sub_parts,
            size,
            digest: None,
        })
    }

    /// The sub-parts of multipart part `index` (`children`, as mail-parser
    /// lists them), built one level deeper; at [`MAX_DEPTH`], every leaf
    /// below becomes a child of this part.
    fn build_children(
        message: &Message<'_>,
        index: usize,
        children: &[u32],
        content_type: &str,
        depth: usize,
    ) -> Vec<Self> {
        let build = |child| Self::build(message, child, Some(content_type), depth + 1);
        match depth < MAX_DEPTH {
            true => children
                .iter()
                .map(|&child| child as usize)
                // Children always follow their parent; this also rules out cycles.
                .filter(|&child| child > index)
                .filter_map(build)
                .collect(),
            false => leaves_below(message, index)
                .into_iter()
                .filter_map(build)
                .collect(),
        }
    }

    /// The part with this index, searching the tree depth-first.
    pub(super) fn find(&self, index: usize) -> Option<&Self> {
        if self.index == index {
            return Some(self);
        }
        self.sub_parts
            .iter()
            .flatten()
            .find_map(|child| child.find(index))
    }

    /// Every part of the tree, depth-first, parents before children.
    pub(super) fn walk<'t>(&'t self, out: &mut Vec<&'t Self>) {
        out.push(self);
        for child in self.sub_parts.iter().flatten() {
            child.walk(out);
        }
    }

    /// The part's `name` (RFC 8621 §4.1.4), decoded.
    pub(crate) fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// mail-parser's index of the part (its partId, for a leaf).
    pub(crate) fn index(&self) -> usize {
        self.index
    }

    /// The partId (`null` for multipart parts, RFC 8621 §4.1.4).
    pub(crate) fn part_id(&self) -> Option<String> {
        self.sub_parts.is_none().then(|| self.index.to_string())
    }

    /// The part's raw body octets (before transfer decoding) in the whole
    /// message `raw`.
    fn raw_body<'r>(&self, raw: &'r [u8]) -> &'r [u8] {
        raw.get(self.body.0..self.body.1).unwrap_or_default()
    }

    /// The octet range of the part's raw body in the message, and the digest
    /// it is checked against: `Some` for a leaf of a stored tree, what a
    /// range read of its body value or download asks the blob store for.
    pub(crate) fn stored_range(&self) -> Option<(std::ops::Range<u64>, [u8; 16])> {
        let digest = self.digest?;
        Some((self.body.0 as u64..self.body.1 as u64, digest))
    }

    /// The body octets `body` (this part's raw body) after transfer
    /// decoding, and whether the encoding was unknown or the encoded data
    /// malformed.
    fn decoded(&self, body: &[u8]) -> (Vec<u8>, bool) {
        let mut out = Vec::with_capacity(match self.encoding {
            // Base64 decodes 4 octets into 3; the others at most 1 into 1.
            TransferEncoding::Base64 => body.len() / 4 * 3 + 3,
            _ => body.len(),
        });
        let problem = transfer_decode(self.encoding, body, &mut out);
        (out, problem)
    }

    /// The part's content for download: its raw body `body` after transfer
    /// decoding, with its type and name.
    pub(crate) fn content(&self, body: &[u8]) -> PartContent {
        PartContent {
            bytes: self.decoded(body).0,
            content_type: self.content_type.clone(),
            name: self.name.clone(),
        }
    }

    /// The RFC 8621 §4.1.4 partition of this tree (called on the root).
    pub(crate) fn partition(&self) -> Partition<'_> {
        let mut lists = Partition::default();
        parse_structure(&[self], "mixed", false, true, true, &mut lists);
        lists
    }

    /// The EmailBodyPart object with the requested properties.
    pub(crate) fn render(&self, properties: &[BodyProperty], blob_id: &str) -> Value {
        self.render_part(properties, blob_id, false)
    }

    /// The `bodyStructure` of a message rooted at this part: "the full MIME
    /// structure of the message body" (RFC 8621 §4.1.4), so every multipart
    /// part carries its `subParts` whether or not `bodyProperties` names it
    /// (a client walks the tree through them); the other properties are the
    /// requested ones.
    pub(crate) fn render_structure(&self, properties: &[BodyProperty], blob_id: &str) -> Value {
        self.render_part(properties, blob_id, true)
    }

    fn render_part(&self, properties: &[BodyProperty], blob_id: &str, whole_tree: bool) -> Value {
        let mut object = Map::new();
        let string = |value: &Option<String>| value.clone().map_or(Value::Null, Value::String);
        for property in properties {
            let value = match property {
                BodyProperty::PartId => string(&self.part_id()),
                BodyProperty::BlobId => {
                    string(&self.part_id().map(|id| part_blob_id(blob_id, &id)))
                }
                BodyProperty::Size => Value::from(self.size),
                BodyProperty::Headers => header::list_in(&header::block_fields(&self.header)),
                BodyProperty::Header(header) => {
                    header::value_in(&header::block_fields(&self.header), header)
                }
                BodyProperty::Name => string(&self.name),
                BodyProperty::Type => Value::String(self.content_type.clone()),
                BodyProperty::Charset => string(&self.charset),
                BodyProperty::Disposition => string(&self.disposition),
                BodyProperty::Cid => string(&self.cid),
                BodyProperty::Language => self.language.as_ref().map_or(Value::Null, |tags| {
                    Value::Array(tags.iter().cloned().map(Value::String).collect())
                }),
                BodyProperty::Location => string(&self.location),
                BodyProperty::SubParts => self.render_sub_parts(properties, blob_id, whole_tree),
            };
            object.insert(property.name().to_string(), value);
        }
        if whole_tree && self.sub_parts.is_some() && !properties.contains(&BodyProperty::SubParts) {
            let sub_parts = self.render_sub_parts(properties, blob_id, whole_tree);
            object.insert(BodyProperty::SubParts.name().to_string(), sub_parts);
        }
        Value::Object(object)
    }

    /// `subParts`: each child rendered alike; `null` for a leaf part.
    fn render_sub_parts(
        &self,
        properties: &[BodyProperty],
        blob_id: &str,
        whole_tree: bool,
    ) -> Value {
        self.sub_parts.as_ref().map_or(Value::Null, |parts| {
            Value::Array(
                parts
                    .iter()
                    .map(|part| part.render_part(properties, blob_id, whole_tree))
                    .collect(),
            )
        })
    }

    /// The text of a text part: transfer- and charset-decoded, CRLF replaced
    /// by LF (RFC 8621 §4.1.4 EmailBodyValue `value`), and whether there was
    /// an encoding problem (`isEncodingProblem`).
    /// The part's text from its raw body octets `body`: transfer and
    /// charset decoded, CRLF as LF; and whether that met an encoding problem.
    fn text(&self, body: &[u8]) -> (String, bool) {
        let (bytes, transfer_problem) = self.decoded(body);
        let (text, charset_problem) = decode_owned(self.charset.as_deref(), bytes);
        let text = lf_line_ends(text);
        let problem =
            transfer_problem || charset_problem || self.encoding == TransferEncoding::Unknown;
        (text, problem)
    }

    /// The EmailBodyValue object of a text part (RFC 8621 §4.1.4 bodyValues).
    fn body_value(&self, body: &[u8], max_bytes: usize) -> Value {
        let (mut text, problem) = self.text(body);
        let (value, truncated) = truncate(&text, max_bytes, self.content_type == "text/html");
        let kept = value.len();
        // The text is the value: cut in place rather than copied, and what
        // was cut off given back.
        if truncated {
            text.truncate(kept);
            text.shrink_to_fit();
        }
        let mut object = Map::new();
        object.insert("value".into(), Value::String(text));
        object.insert("isEncodingProblem".into(), Value::Bool(problem));
        object.insert("isTruncated".into(), Value::Bool(truncated));
        Value::Object(object)
    }
}

/// The parts whose values `bodyValues` holds (RFC 8621 §4.1.4, §4.2): the
/// `text/*` leaves the flags select, each once, in order. What a body-values
/// read reads (their ranges) and what [`body_values`] renders are this one
/// list.
pub(crate) fn value_parts<'t>(
    tree: &'t BodyPart,
    lists: &Partition<'t>,
    flags: BodyValueFlags,
) -> Vec<&'t BodyPart> {
    let mut selected: Vec<&BodyPart> = Vec::new();
    if flags.fetch_all {
        tree.walk(&mut selected);
    } else {
        if flags.fetch_text {
            selected.extend(&lists.text_body);
        }
        if flags.fetch_html {
            selected.extend(&lists.html_body);
        }
    }
    let mut seen = std::collections::HashSet::new();
    selected
        .into_iter()
        .filter(|part| part.content_type.starts_with("text/") && part.sub_parts.is_none())
        .filter(|part| seen.insert(part.index))
        .collect()
}

/// Where the raw body octets of a message's parts come from.
#[derive(Debug, Clone, Copy)]
pub(crate) enum BodyOctets<'a> {
    /// The whole message (the full read level, Email/parse).
    Message(&'a [u8]),
    /// The bodies of the parts read by range ([`PartBodies`]).
    Parts(&'a PartBodies),
}

impl<'a> BodyOctets<'a> {
    /// The raw body octets of `part`; empty when they were not read.
    fn of(self, part: &BodyPart) -> &'a [u8] {
        match self {
            BodyOctets::Message(raw) => part.raw_body(raw),
            BodyOctets::Parts(bodies) => bodies.get(part.index),
        }
    }
}

/// The raw body octets of some leaves of one message, read by range and
/// checked ([`BodyPart::stored_range`]), by part index.
#[derive(Debug, Default, Clone)]
pub struct PartBodies {
    bodies: std::collections::HashMap<usize, bytes::Bytes>,
}

impl PartBodies {
    /// Keeps the body octets of the part with index `index`.
    pub(crate) fn insert(&mut self, index: usize, body: bytes::Bytes) {
        self.bodies.insert(index, body);
    }

    fn get(&self, index: usize) -> &[u8] {
        self.bodies.get(&index).map_or(&[], |body| &body[..])
    }

    /// Octets held.
    pub fn octets(&self) -> usize {
        self.bodies.values().map(bytes::Bytes::len).sum()
    }
}

/// The decoded text of each of `parts` (from [`value_parts`]), as
/// `bodyValues` gives it untruncated, and whether it is HTML.
pub(crate) fn part_texts(parts: &[&BodyPart], octets: BodyOctets<'_>) -> Vec<BodyText> {
    parts
        .iter()
        .map(|part| BodyText {
            html: part.content_type == "text/html",
            text: part.text(octets.of(part)).0,
        })
        .collect()
}

/// `bodyValues` (RFC 8621 §4.1.4, §4.2): the values of `parts` (from
/// [`value_parts`]) by partId, each truncated to `max_bytes` (0: whole).
pub(crate) fn body_values(parts: &[&BodyPart], octets: BodyOctets<'_>, max_bytes: usize) -> Value {
    let mut values = Map::new();
    for part in parts {
        if let Some(part_id) = part.part_id() {
            values.insert(part_id, part.body_value(octets.of(part), max_bytes));
        }
    }
    Value::Object(values)
}

/// `text` with each CRLF replaced by LF, in place.
fn lf_line_ends(text: String) -> String {
    if !text.contains("\r\n") {
        return text;
    }
    let mut bytes = text.into_bytes();
    let mut kept = 0;
    for read in 0..bytes.len() {
        let byte = bytes[read];
        if byte == b'\r' && bytes.get(read + 1) == Some(&b'\n') {
            continue;
        }
        bytes[kept] = byte;
        kept += 1;
    }
    bytes.truncate(kept);
    // Only ASCII CRs were taken out: the rest is the same UTF-8.
    String::from_utf8(bytes)
        .unwrap_or_else(|error| String::from_utf8_lossy(error.as_bytes()).into_owned())
}

/// Cuts `text` to at most `max_bytes` octets (0: no limit) on a character
/// boundary and, for HTML, not inside a tag (RFC 8621 §4.2 maxBodyValueBytes).
fn truncate(text: &str, max_bytes: usize, html: bool) -> (&str, bool) {
    if max_bytes == 0 || text.len() <= max_bytes {
        return (text, false);
    }
    let mut cut = max_bytes;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    if html
        && let Some(open) = text[..cut].rfind('<')
        && !text[open..cut].contains('>')
    {
        cut = open;
    }
    (&text[..cut], true)
}

fn is_inline_media_type(content_type: &str) -> bool {
    content_type.starts_with("image/")
        || content_type.starts_with("audio/")
        || content_type.starts_with("video/")
}

/// The RFC 8621 §4.1.4 `parseStructure` function, transcribed. `text_on` and
/// `html_on` are the function's local `textBody`/`htmlBody` being non-null;
/// the lists themselves are shared, as the JavaScript arrays are.
fn parse_structure<'t>(
    parts: &[&'t BodyPart],
    multipart_type: &str,
    in_alternative: bool,
    mut html_on: bool,
    mut text_on: bool,
    lists: &mut Partition<'t>,
) {
    let text_length = text_on.then_some(lists.text_body.len());
    let html_length = html_on.then_some(lists.html_body.len());
    for (i, &part) in parts.iter().enumerate() {
        let content_type = part.content_type.as_str();
        let is_inline = part.disposition.as_deref() != Some("attachment")
            && (content_type == "text/plain"
                || content_type == "text/html"
                || is_inline_media_type(content_type))
            && (i == 0
                || (multipart_type != "related"
                    && (is_inline_media_type(content_type)
                        || part.name.as_deref().is_none_or(str::is_empty))));
        if let Some(sub_parts) = &part.sub_parts {
            let sub_multi_type = content_type.split('/').nth(1).unwrap_or_default();
            let children: Vec<&'t BodyPart> = sub_parts.iter().collect();
            parse_structure(
                &children,
                sub_multi_type,
                in_alternative || sub_multi_type == "alternative",
                html_on,
                text_on,
                lists,
            );
        } else if is_inline {
            if multipart_type == "alternative" {
                match content_type {
                    "text/plain" => lists.text_body.push(part),
                    "text/html" => lists.html_body.push(part),
                    _ => lists.attachments.push(part),
                }
                continue;
            } else if in_alternative {
                if content_type == "text/plain" {
                    html_on = false;
                }
                if content_type == "text/html" {
                    text_on = false;
                }
            }
            if text_on {
                lists.text_body.push(part);
            }
            if html_on {
                lists.html_body.push(part);
            }
            if (!text_on || !html_on) && is_inline_media_type(content_type) {
                lists.attachments.push(part);
            }
        } else {
            lists.attachments.push(part);
        }
    }
    if multipart_type == "alternative" && text_on && html_on {
        let (text_length, html_length) = (
            text_length.unwrap_or_default(),
            html_length.unwrap_or_default(),
        );
        // Found HTML part only.
        if text_length == lists.text_body.len() && html_length != lists.html_body.len() {
            let html: Vec<_> = lists.html_body[html_length..].to_vec();
            lists.text_body.extend(html);
        }
        // Found plaintext part only.
        if html_length == lists.html_body.len() && text_length != lists.text_body.len() {
            let text: Vec<_> = lists.text_body[text_length..].to_vec();
            lists.html_body.extend(text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crlf_becomes_lf_in_place_and_lone_crs_stay() {
        for (text, expected) in [
            ("", ""),
            ("no line ends", "no line ends"),
            ("a\r\nb\r\n", "a\nb\n"),
            ("lone\rcr\r\r\n\n", "lone\rcr\r\n\n"),
            (
                "caf\u{e9}\r\n\u{65e5}\u{672c}\r",
                "caf\u{e9}\n\u{65e5}\u{672c}\r",
            ),
        ] {
            assert_eq!(lf_line_ends(text.to_string()), expected, "{text:?}");
            assert_eq!(lf_line_ends(text.to_string()), text.replace("\r\n", "\n"));
        }
    }

    fn decode(encoding: TransferEncoding, input: &[u8]) -> (Vec<u8>, bool) {
        let mut out = Vec::new();
        let problem = transfer_decode(encoding, input, &mut out);
        let mut count = Count(0);
        transfer_decode(encoding, input, &mut count);
        assert_eq!(count.0, out.len());
        (out, problem)
    }

    #[test]
    fn transfer_decoding_follows_rfc2045() {
        use TransferEncoding::*;
        assert_eq!(
            decode(Base64, b"aGVs\r\nbG8=\r\n"),
            (b"hello".to_vec(), false)
        );
        assert_eq!(decode(Base64, b"aGVsbG8"), (b"hello".to_vec(), false));
        assert_eq!(decode(Base64, b"aGVs!bG8="), (b"hello".to_vec(), true));
        assert_eq!(decode(Base64, b"aGk=aGk="), (b"hihi".to_vec(), false));
        // A quantum split by a line break, and one by an octet outside the alphabet.
        assert_eq!(decode(Base64, b"aGV\r\nsbG8="), (b"hello".to_vec(), false));
        assert_eq!(decode(Base64, b"aG\x80VsbG8="), (b"hello".to_vec(), true));
        // Every octet value, encoded as mail is (lines of 76), decodes back.
        let octets: Vec<u8> = (0..=255u8).cycle().take(3000).collect();
        let encoded = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &octets);
        let lines: Vec<&[u8]> = encoded.as_bytes().chunks(76).collect();
        assert_eq!(decode(Base64, &lines.join(&b"\r\n"[..])), (octets, false));
        assert_eq!(
            decode(QuotedPrintable, b"caf=C3=a9 =\r\nau lait  \r\nx=\nend=4"),
            (b"caf\xc3\xa9 au lait\r\nxend=4".to_vec(), true)
        );
        assert_eq!(decode(Unknown, b"x-uue"), (b"x-uue".to_vec(), false));
    }

    #[test]
    fn mime_fields_join_rfc2231_sections_and_decode_rfc2047() {
        let field = MimeField::parse(
            " Attachment;\r\n filename*0*=utf-8''%E2%82;\r\n filename*1*=%AC%20a.txt; size=3 (bytes)",
        );
        assert_eq!(field.value, "attachment");
        assert_eq!(field.param("filename").as_deref(), Some("€ a.txt"));
        assert_eq!(field.param("size").as_deref(), Some("3"));
        let field = MimeField::parse(
            " text/plain (c) ; charset = \"ISO-8859-1\" ; name*=iso-8859-1'fr'caf%E9.txt",
        );
        assert_eq!(field.value, "text/plain");
        assert_eq!(field.param("charset").as_deref(), Some("ISO-8859-1"));
        assert_eq!(field.param("name").as_deref(), Some("café.txt"));
        let field = MimeField::parse(" image/png; name=\"a;b.png\"; name*0=x; name*1=y");
        assert_eq!(field.param("name").as_deref(), Some("xy"));
    }

    #[test]
    fn truncation_respects_characters_and_tags() {
        assert_eq!(truncate("héllo", 2, false), ("h", true));
        assert_eq!(truncate("héllo", 0, false), ("héllo", false));
        assert_eq!(truncate("ab<a href=\"x\">c</a>", 8, true), ("ab", true));
        assert_eq!(truncate("ab<b>cd</b>", 7, true), ("ab<b>cd", true));
    }
}

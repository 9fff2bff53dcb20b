//! Header field values in the parsed forms of RFC 8621 §4.1.2, for any field
//! name, plus the RFC 2047 and charset decoding the forms share with body parts.
//!
//! mail-parser splits the header block into fields and gives each field's
//! offsets; every parsed form is computed here from the field's raw octets,
//! because mail-parser's own field parsers collapse white space, decode RFC
//! 2047 words where RFC 2047 forbids it and lose a character split over two
//! encoded words (see the tests at the end of this file).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use mail_parser::Header;
use mail_parser::decoders::charsets::map::charset_decoder;
use serde_json::{Map, Value};

use super::lexical::{base64_value, hex_value, read_quoted};
use super::property::{HeaderForm, HeaderProperty};

/// The value of a `header:{name}:as{Form}[:all]` property over one header
/// list (of a message or of a body part). `raw` is the bytes the headers'
/// offsets point into. Absent field: `null` (`[]` with `:all`); otherwise the
/// last instance (every instance in order with `:all`), RFC 8621 §4.1.3.
pub fn header_value(headers: &[Header<'_>], raw: &[u8], property: &HeaderProperty) -> Value {
    value_in(&fields(headers, raw), property)
}

/// [`header_value`] over fields already split ([`HeaderFields::fields`],
/// [`top_level_fields`]).
pub(crate) fn value_in(fields: &[Field<'_>], property: &HeaderProperty) -> Value {
    value_of(
        fields
            .iter()
            .copied()
            .filter(|field| field.is(&property.name)),
        property,
    )
}

/// A header property's value from the instances of its field, in order.
fn value_of<'r>(
    mut instances: impl DoubleEndedIterator<Item = Field<'r>>,
    property: &HeaderProperty,
) -> Value {
    if property.all {
        Value::Array(
            instances
                .map(|field| parsed_form(&field.raw_value(), property.form))
                .collect(),
        )
    } else {
        instances.next_back().map_or(Value::Null, |field| {
            parsed_form(&field.raw_value(), property.form)
        })
    }
}

/// How many header fields a list holds before lookups by name go through a
/// [`FieldIndex`] instead of a scan: real mail has 10–60 fields, for which a
/// scan is cheaper than building an index; a message with 100,000 fields and
/// a request for 30,000 `header:` properties would otherwise scan every field
/// once per property.
const INDEX_FROM_FIELDS: usize = 64;

/// The positions of a header list's fields by ASCII-lowercased name, built
/// once per list (lazily, for a list of more than [`INDEX_FROM_FIELDS`]): N
/// header properties then cost N lookups, not N scans.
#[derive(Debug, Default)]
pub(crate) struct FieldIndex {
    by_name: HashMap<Box<[u8]>, Vec<u32>>,
}

impl FieldIndex {
    fn new<'n>(names: impl Iterator<Item = &'n [u8]>) -> Self {
        let mut by_name: HashMap<Box<[u8]>, Vec<u32>> = HashMap::new();
        for (position, name) in names.enumerate() {
            let key = name.to_ascii_lowercase().into_boxed_slice();
            by_name.entry(key).or_default().push(position as u32);
        }
        Self { by_name }
    }

    /// About how many octets an index over fields of `names` holds.
    fn weight<'n>(names: impl Iterator<Item = &'n [u8]>) -> usize {
        names.map(|name| name.len() + 48).sum()
    }
}

/// The positions, in order, of the fields named `lowercase_name` among
/// `names` (`len` of them): by `index` (built on first use) for a long list,
/// by a scan for a short one.
fn positions_named<'i, 'n>(
    names: impl Iterator<Item = &'n [u8]> + Clone,
    len: usize,
    index: &'i OnceLock<FieldIndex>,
    lowercase_name: &str,
) -> Cow<'i, [u32]> {
    if len <= INDEX_FROM_FIELDS {
        let wanted = lowercase_name.as_bytes();
        return Cow::Owned(
            names
                .enumerate()
                .filter(|(_, name)| name.eq_ignore_ascii_case(wanted))
                .map(|(position, _)| position as u32)
                .collect(),
        );
    }
    let index = index.get_or_init(|| FieldIndex::new(names));
    Cow::Borrowed(
        index
            .by_name
            .get(lowercase_name.as_bytes())
            .map_or(&[][..], Vec::as_slice),
    )
}

/// A message's top-level fields, looked up by name through a [`FieldIndex`]
/// when there are many: what the full read level renders header properties from.
pub(crate) struct FieldList<'r> {
    fields: Vec<Field<'r>>,
    index: OnceLock<FieldIndex>,
}

impl<'r> FieldList<'r> {
    /// The list over fields already split.
    pub(crate) fn new(fields: Vec<Field<'r>>) -> Self {
        Self {
            fields,
            index: OnceLock::new(),
        }
    }

    /// The fields in message order.
    pub(crate) fn fields(&self) -> &[Field<'r>] {
        &self.fields
    }

    fn positions(&self, lowercase_name: &str) -> Cow<'_, [u32]> {
        let names = self.fields.iter().map(|field| field.name);
        positions_named(names, self.fields.len(), &self.index, lowercase_name)
    }

    /// How many fields have this (lowercase) name.
    pub(crate) fn count(&self, lowercase_name: &str) -> usize {
        self.positions(lowercase_name).len()
    }

    /// A header property's value ([`header_value`]'s rules).
    pub(crate) fn value(&self, property: &HeaderProperty) -> Value {
        let positions = self.positions(&property.name);
        value_of(
            positions.iter().map(|&at| self.fields[at as usize]),
            property,
        )
    }
}

/// The `headers` property (RFC 8621 §4.1.3): every field in message order as
/// `{"name": …, "value": …}`, the name capitalised as in the message and the
/// value in Raw form.
pub fn header_list(headers: &[Header<'_>], raw: &[u8]) -> Value {
    list_in(&fields(headers, raw))
}

/// [`header_list`] over fields already split.
pub(crate) fn list_in(fields: &[Field<'_>]) -> Value {
    Value::Array(
        fields
            .iter()
            .map(|field| {
                let mut object = Map::new();
                object.insert("name".into(), Value::String(field.name()));
                object.insert("value".into(), Value::String(field.raw_value()));
                Value::Object(object)
            })
            .collect(),
    )
}

/// The fields of a message's top-level header: its header block (the octets
/// before the root part's body, as stored for the header read level) split
/// by [`split_fields`], so the header and full read levels see the same
/// fields by construction.
pub(crate) fn top_level_fields<'r>(message: &'r mail_parser::Message<'_>) -> Vec<Field<'r>> {
    let raw: &'r [u8] = &message.raw_message;
    let end = message
        .parts
        .first()
        .map_or(0, |root| root.offset_body as usize)
        .min(raw.len());
    split_fields(raw, 0, end)
}

/// The fields of a header block (the octets up to and including the blank
/// line, as stored for the header read level), borrowed: the split
/// [`HeaderFields`] keeps, without copying the block. Ingest indexes these.
pub(crate) fn block_fields(block: &[u8]) -> Vec<Field<'_>> {
    split_fields(block, 0, block.len())
}

/// A stored header block split into fields once, without mail-parser: what
/// the header read level caches and renders from (ADR 0002). About the size
/// of the block plus 16 octets per field, plus the values rendered from it.
#[derive(Debug)]
pub struct HeaderFields {
    block: Box<[u8]>,
    /// `(name start, name end, value start, value end)` in `block`.
    spans: Vec<[u32; 4]>,
    /// Values already rendered ([`HeaderFields::value`]) and the bytes they
    /// hold: at most [`MEMO_ENTRIES`] values and [`MEMO_BYTES`] bytes. The
    /// block never changes, so neither do they.
    memo: Mutex<(Vec<Memo>, usize)>,
    /// Field positions by name, for a block of more than
    /// [`INDEX_FROM_FIELDS`] fields, built on the first lookup.
    index: OnceLock<FieldIndex>,
    /// The octets the index holds or will hold (0 for a short block).
    index_weight: usize,
}

/// One rendered value of a [`HeaderFields`]: the property (without its
/// key) and the value as compact JSON text (what serde_json writes for it).
type Memo = (HeaderProperty, Arc<str>);

/// How many rendered values one [`HeaderFields`] keeps: enough for a list
/// view's from, to, cc, subject, sentAt and a few more, bounded whatever
/// header names clients ask for.
const MEMO_ENTRIES: usize = 8;

/// How many bytes of rendered values one [`HeaderFields`] keeps (each its
/// text, field name and [`MEMO_ENTRY`]), included in its cache weight: a
/// list view's values fit; a larger value is rendered again at each use
/// instead.
const MEMO_BYTES: usize = 1024;

/// Whether two header properties render the same value (their keys aside).
fn same_value(known: &HeaderProperty, property: &HeaderProperty) -> bool {
    known.name == property.name && known.form == property.form && known.all == property.all
}

/// What one memo entry holds besides its text and field name: the
/// property's strings and form, the `Arc` and its counts.
const MEMO_ENTRY: usize = 88;

/// A value as compact JSON text (serializing a `Value` cannot fail).
fn text_of(value: &Value) -> Arc<str> {
    serde_json::to_string(value)
        .unwrap_or_else(|_| "null".to_string())
        .into()
}

impl HeaderFields {
    /// Splits a header block (the octets up to and including the blank line,
    /// [`crate::store::NewEmail::header_block`]); any bytes are accepted, a
    /// line that is not a field is skipped.
    pub fn parse(mut block: Vec<u8>) -> Self {
        // Offsets are u32: no stored message comes near 4 GiB of header.
        block.truncate(u32::MAX as usize);
        let block = block.into_boxed_slice();
        let base = block.as_ptr() as usize;
        let offset = |slice: &[u8]| (slice.as_ptr() as usize - base) as u32;
        let spans = split_fields(&block, 0, block.len())
            .iter()
            .map(|field| {
                let (name, value) = (offset(field.name), offset(field.value));
                [
                    name,
                    name + field.name.len() as u32,
                    value,
                    value + field.value.len() as u32,
                ]
            })
            .collect();
        let mut fields = Self {
            block,
            spans,
            memo: Mutex::new((Vec::new(), 0)),
            index: OnceLock::new(),
            index_weight: 0,
        };
        if fields.spans.len() > INDEX_FROM_FIELDS {
            fields.index_weight = FieldIndex::weight(fields.names());
        }
        fields
    }

    /// The field names in message order.
    fn names(&self) -> impl Iterator<Item = &[u8]> + Clone {
        self.spans
            .iter()
            .map(|[from, to, _, _]| &self.block[*from as usize..*to as usize])
    }

    /// The field at a position.
    fn field(&self, position: u32) -> Field<'_> {
        let [name_from, name_to, value_from, value_to] = self.spans[position as usize];
        let slice = |from: u32, to: u32| &self.block[from as usize..to as usize];
        Field {
            name: slice(name_from, name_to),
            value: slice(value_from, value_to),
        }
    }

    fn positions(&self, lowercase_name: &str) -> Cow<'_, [u32]> {
        positions_named(self.names(), self.spans.len(), &self.index, lowercase_name)
    }

    /// How many fields have this (lowercase) name: what rendering an
    /// `…:all` property of it costs.
    pub fn count(&self, lowercase_name: &str) -> usize {
        self.positions(lowercase_name).len()
    }

    /// How many fields the block holds: what the `headers` property costs.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// The block as stored (the message's header octets).
    pub fn block(&self) -> &[u8] {
        &self.block
    }

    /// How many octets the block holds.
    pub fn octets(&self) -> usize {
        self.block.len()
    }

    /// Whether the block holds no field.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// A header property's value ([`header_value`]'s rules), rendered from
    /// the fields without keeping it.
    pub fn render(&self, property: &HeaderProperty) -> Value {
        let positions = self.positions(&property.name);
        value_of(positions.iter().map(|&at| self.field(at)), property)
    }

    /// The value of a header property ([`header_value`]'s rules), rendered
    /// once and then served from memory (its text, parsed): views ask for
    /// the same from, to and subject of the same emails again and again.
    pub fn value(&self, property: &HeaderProperty) -> Value {
        if let Some(text) = self.remembered(property)
            && let Ok(value) = serde_json::from_str(&text)
        {
            return value;
        }
        let value = self.render(property);
        self.remember(property, text_of(&value));
        value
    }

    /// [`HeaderFields::value`] as compact JSON text, served from memory as
    /// it is: the list view's render copies it into the response (issue 20).
    pub fn value_text(&self, property: &HeaderProperty) -> Arc<str> {
        if let Some(text) = self.remembered(property) {
            return text;
        }
        let text = text_of(&self.render(property));
        self.remember(property, text.clone());
        text
    }

    /// The memo's text for `property`, if it holds it.
    fn remembered(&self, property: &HeaderProperty) -> Option<Arc<str>> {
        let memo = self.memo.lock().unwrap_or_else(PoisonError::into_inner);
        memo.0
            .iter()
            .find(|(known, _)| same_value(known, property))
            .map(|(_, text)| text.clone())
    }

    /// Keeps `text` as the value of `property` while the memo has room.
    fn remember(&self, property: &HeaderProperty, text: Arc<str>) {
        let bytes = MEMO_ENTRY + text.len() + property.name.len();
        let mut memo = self.memo.lock().unwrap_or_else(PoisonError::into_inner);
        let (values, held) = &mut *memo;
        if values.len() < MEMO_ENTRIES
            && *held + bytes <= MEMO_BYTES
            && !values.iter().any(|(known, _)| same_value(known, property))
        {
            let key = HeaderProperty {
                key: String::new(),
                ..property.clone()
            };
            values.push((key, text));
            *held += bytes;
        }
    }

    /// The fields in message order.
    pub(crate) fn fields(&self) -> Vec<Field<'_>> {
        (0..self.spans.len() as u32)
            .map(|position| self.field(position))
            .collect()
    }

    /// Octets held, for cache weights: the block, the spans, the index of a
    /// long block (counted whether built yet or not), and the most the memo
    /// of rendered values may hold.
    pub fn weight(&self) -> usize {
        self.block.len() + self.spans.len() * 16 + self.index_weight + 48 + MEMO_BYTES
    }
}

/// One header field as written in the message.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Field<'r> {
    /// The field name octets (before the colon, white space trimmed).
    name: &'r [u8],
    /// The octets after the colon up to but excluding the terminating CRLF.
    value: &'r [u8],
}

impl Field<'_> {
    /// The field name exactly as written (RFC 8621 §4.1.3: "with the same
    /// capitalization that it has in the message").
    pub(crate) fn name(&self) -> String {
        lossy_without_nul(self.name)
    }

    /// Whether the field has this (lowercase) name; names are case-insensitive.
    pub(crate) fn is(&self, lowercase_name: &str) -> bool {
        self.name.eq_ignore_ascii_case(lowercase_name.as_bytes())
    }

    /// The Raw form (RFC 8621 §4.1.2.1): not unfolded; invalid UTF-8 runs
    /// become U+FFFD and NUL octets are dropped.
    pub(crate) fn raw_value(&self) -> String {
        lossy_without_nul(self.value)
    }
}

/// Splits the span of the given header list into fields (RFC 5322 §2.2): a
/// line starting with white space continues the previous field, any other
/// line is `name ":" value`; a line without a colon, or whose name is empty
/// or holds white space or control characters (RFC 5322 §3.6.8 `ftext`, e.g.
/// an mbox `From ` line), is not a field.
///
/// mail-parser's list gives the span (first field to end of last); its own
/// field boundaries are not used, because some of its field parsers run past
/// the end of a field (e.g. a Date ending in `UT` or `AM` swallows the next
/// line, which then disappears from its list).
pub(crate) fn fields<'r>(headers: &[Header<'_>], raw: &'r [u8]) -> Vec<Field<'r>> {
    let (Some(first), Some(last)) = (headers.first(), headers.last()) else {
        return Vec::new();
    };
    let start = (first.offset_field as usize).min(raw.len());
    let end = (last.offset_end as usize).clamp(start, raw.len());
    split_fields(raw, start, end)
}

/// Splits `raw[start..end]` into fields by the rule of [`fields`]; reading
/// stops at the first empty line.
fn split_fields(raw: &[u8], start: usize, end: usize) -> Vec<Field<'_>> {
    let mut fields = Vec::new();
    // (name, value start) of the field being read, and its value end so far.
    let mut current: Option<(&[u8], usize)> = None;
    let mut value_end = 0;
    let mut position = start;
    for line in raw[start..end].split_inclusive(|&b| b == b'\n') {
        let line_start = position;
        position += line.len();
        let content = line.strip_suffix(b"\n").unwrap_or(line);
        let content = content.strip_suffix(b"\r").unwrap_or(content);
        if matches!(content.first(), Some(b' ' | b'\t')) {
            if current.is_some() {
                value_end = line_start + content.len();
            }
            continue;
        }
        if let Some((name, value_start)) = current.take() {
            fields.push(Field {
                name,
                value: &raw[value_start..value_end],
            });
        }
        if content.is_empty() {
            break;
        }
        if let Some(colon) = content.iter().position(|&b| b == b':') {
            let name = content[..colon].trim_ascii();
            if !name.is_empty() && name.iter().all(|&b| b > b' ' && b != 0x7f) {
                current = Some((name, line_start + colon + 1));
                value_end = line_start + content.len();
            }
        }
    }
    if let Some((name, value_start)) = current {
        fields.push(Field {
            name,
            value: &raw[value_start..value_end],
        });
    }
    fields
}

/// The Raw value of the last field with this (lowercase) name.
pub(crate) fn last_raw_value(
    headers: &[Header<'_>],
    raw: &[u8],
    lowercase_name: &str,
) -> Option<String> {
    fields(headers, raw)
        .iter()
        .rev()
        .find(|field| field.is(lowercase_name))
        .map(Field::raw_value)
}

/// UTF-8 with invalid runs replaced by U+FFFD and NUL dropped.
pub(crate) fn lossy_without_nul(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    if text.contains('\0') {
        text.replace('\0', "")
    } else {
        text.into_owned()
    }
}

/// Parses one Raw-form value into the requested form (RFC 8621 §4.1.2.1–7).
pub fn parsed_form(raw: &str, form: HeaderForm) -> Value {
    match form {
        HeaderForm::Raw => Value::String(raw.to_string()),
        HeaderForm::Text => Value::String(text_form(raw)),
        HeaderForm::Addresses => addresses_json(
            &address_list(raw)
                .into_iter()
                .flat_map(|g| g.addresses)
                .collect::<Vec<_>>(),
        ),
        HeaderForm::GroupedAddresses => Value::Array(
            address_list(raw)
                .into_iter()
                .map(|group| {
                    let mut object = Map::new();
                    object.insert("name".into(), group.name.map_or(Value::Null, Value::String));
                    object.insert("addresses".into(), addresses_json(&group.addresses));
                    Value::Object(object)
                })
                .collect(),
        ),
        HeaderForm::MessageIds => string_list(message_ids(raw)),
        HeaderForm::Date => date_form(raw).map_or(Value::Null, Value::String),
        HeaderForm::Urls => string_list(urls(raw)),
    }
}

fn string_list(list: Option<Vec<String>>) -> Value {
    list.map_or(Value::Null, |list| {
        Value::Array(list.into_iter().map(Value::String).collect())
    })
}

fn addresses_json(addresses: &[EmailAddress]) -> Value {
    Value::Array(
        addresses
            .iter()
            .map(|address| {
                let mut object = Map::new();
                object.insert(
                    "name".into(),
                    address.name.clone().map_or(Value::Null, Value::String),
                );
                object.insert("email".into(), Value::String(address.email.clone()));
                Value::Object(object)
            })
            .collect(),
    )
}

// ---------------------------------------------------------------------------
// Text form and RFC 2047

/// RFC 5322 §2.2.3 unfolding: every CRLF (or bare LF) inside a field value is
/// a fold and is removed; the white space after it stays.
fn unfold(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars().peekable();
    while let Some(ch) = chars.next() {
        match ch {
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' => {}
            _ => out.push(ch),
        }
    }
    out
}

/// The Text form (RFC 8621 §4.1.2.2): unfolded, leading white space removed,
/// RFC 2047 encoded words with a known charset decoded where RFC 2047 §5(1)
/// allows them (whole white-space-delimited words). Trailing white space is
/// kept, as the RFC only removes leading SP.
///
/// NFC normalisation (step 5) is not applied: it needs a Unicode
/// normalisation table the crate does not depend on yet.
pub fn text_form(raw: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    let unfolded = unfold(raw);
    // RFC 8621 §4.1.2.2 step 5: the result in Normalization Form C.
    decode_words(unfolded.trim_start_matches([' ', '\t']))
        .nfc()
        .collect()
}

/// A parsed RFC 2047 encoded word: the charset label (RFC 2231 §5 language
/// suffix removed) and the decoded octets.
struct EncodedWord {
    charset: String,
    bytes: Vec<u8>,
}

/// Parses `=?charset?B|Q?text?=` (RFC 2047 §2, §4); `None` when the word is not
/// syntactically an encoded word or names an unknown charset.
fn encoded_word(word: &str) -> Option<EncodedWord> {
    let inner = word.strip_prefix("=?")?.strip_suffix("?=")?;
    let mut fields = inner.split('?');
    let (charset, encoding, text) = (fields.next()?, fields.next()?, fields.next()?);
    if fields.next().is_some() {
        return None;
    }
    let charset = charset
        .split_once('*')
        .map_or(charset, |(charset, _language)| charset);
    const ESPECIALS: &[u8] = b"()<>@,;:\"/[]?.=";
    if charset.is_empty()
        || !charset
            .bytes()
            .all(|b| b.is_ascii_graphic() && !ESPECIALS.contains(&b))
    {
        return None;
    }
    lookup_charset(charset)?;
    let bytes = match encoding {
        "B" | "b" => decode_b(text)?,
        "Q" | "q" => decode_q(text)?,
        _ => return None,
    };
    Some(EncodedWord {
        charset: charset.to_ascii_lowercase(),
        bytes,
    })
}

/// RFC 2047 §4.1 "B" encoding: base64 exactly as RFC 2045 §6.8 writes it,
/// in whole 4-character groups with at most two `=` of padding at the end;
/// anything else is not an encoded word (it stays literal text).
fn decode_b(text: &str) -> Option<Vec<u8>> {
    if text.is_empty() || !text.len().is_multiple_of(4) {
        return None;
    }
    let data = text.trim_end_matches('=');
    if text.len() - data.len() > 2 {
        return None;
    }
    let mut out = Vec::with_capacity(data.len() * 3 / 4);
    let mut acc: u32 = 0;
    let mut bits = 0;
    for byte in data.bytes() {
        acc = (acc << 6) | u32::from(base64_value(byte)?);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// RFC 2047 §4.2 "Q" encoding: `_` is SP, `=XX` an octet, other printable
/// ASCII itself; the encoded text is at least one character (§2).
fn decode_q(text: &str) -> Option<Vec<u8>> {
    if text.is_empty() {
        return None;
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'_' => out.push(b' '),
            b'=' => {
                let high = hex_value(*bytes.get(i + 1)?)?;
                let low = hex_value(*bytes.get(i + 2)?)?;
                out.push(high << 4 | low);
                i += 2;
            }
            byte if byte.is_ascii_graphic() => out.push(byte),
            _ => return None,
        }
        i += 1;
    }
    Some(out)
}

/// Collects the decoded octets of consecutive encoded words so that a
/// character split over two words (same charset) is decoded whole.
#[derive(Default)]
struct WordRun {
    pending: Option<EncodedWord>,
}

impl WordRun {
    fn push(&mut self, word: EncodedWord, out: &mut String) {
        match &mut self.pending {
            // Stateful ISO-2022 words each end back in ASCII (RFC 1468), so a
            // character never spans two of them; joined, the escape pair at the
            // seam would decode as U+FFFD (WHATWG decoder), so they stay apart.
            Some(pending)
                if pending.charset == word.charset
                    && !word.charset.to_ascii_lowercase().starts_with("iso-2022") =>
            {
                pending.bytes.extend(word.bytes)
            }
            _ => {
                self.flush(out);
                self.pending = Some(word);
            }
        }
    }

    fn flush(&mut self, out: &mut String) {
        if let Some(word) = self.pending.take() {
            let (text, _problem) = decode_bytes(Some(&word.charset), &word.bytes);
            // RFC 8621 §4.1.2.2: NUL and control characters from encoded words are dropped.
            out.extend(text.chars().filter(|c| !c.is_control()));
        }
    }
}

/// Decodes the encoded words of unstructured text (RFC 2047 §5(1), §6.2):
/// only a whole word delimited by white space (or the ends) is decoded, and
/// white space between two encoded words is removed.
pub(crate) fn decode_words(text: &str) -> String {
    if !text.contains("=?") {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut run = WordRun::default();
    let mut pending_space = "";
    let mut last_encoded = false;
    let mut rest = text;
    while !rest.is_empty() {
        let space_len = rest.len() - rest.trim_start_matches([' ', '\t']).len();
        if space_len > 0 {
            pending_space = &rest[..space_len];
            rest = &rest[space_len..];
            continue;
        }
        let word_len = rest.find([' ', '\t']).unwrap_or(rest.len());
        let word = &rest[..word_len];
        rest = &rest[word_len..];
        if let Some(encoded) = encoded_word(word) {
            if !last_encoded {
                out.push_str(pending_space);
            }
            run.push(encoded, &mut out);
            last_encoded = true;
        } else {
            run.flush(&mut out);
            out.push_str(pending_space);
            out.push_str(word);
            last_encoded = false;
        }
        pending_space = "";
    }
    run.flush(&mut out);
    out.push_str(pending_space);
    out
}

// ---------------------------------------------------------------------------
// Charsets

/// A charset label resolved to a decoder.
#[derive(Clone, Copy)]
pub(crate) enum Charset {
    /// UTF-8 (and its aliases).
    Utf8,
    /// US-ASCII (and its aliases): octets above 127 are malformed.
    Ascii,
    /// Any other charset mail-parser (with `full_encoding`) knows.
    Other(fn(&[u8]) -> String),
}

/// Resolves a charset label (case-insensitive); `None` when unknown.
pub(crate) fn lookup_charset(label: &str) -> Option<Charset> {
    let label = label.trim().trim_matches('"').to_ascii_lowercase();
    match label.as_str() {
        // Python's email package alias for GB2312, seen in list mail.
        "eucgb2312_cn" => charset_decoder(b"gb2312").map(Charset::Other),
        "utf-8" | "utf8" | "unicode-1-1-utf-8" | "unicode11utf8" | "unicode20utf8"
        | "x-unicode20utf8" => Some(Charset::Utf8),
        "us-ascii" | "ascii" | "us" | "ansi_x3.4-1968" | "ansi_x3.4-1986" | "iso646-us"
        | "iso-ir-6" | "iso_646.irv:1991" | "cp367" | "ibm367" | "csascii" => Some(Charset::Ascii),
        _ => charset_decoder(label.as_bytes()).map(Charset::Other),
    }
}

/// Decodes octets in the labelled charset (`None`: the MIME default US-ASCII).
/// Returns the text and whether there was an encoding problem (RFC 8621
/// §4.1.4 `isEncodingProblem`): unknown charset, or malformed octets for it.
///
/// Heuristics (allowed by RFC 8621 §4.1.4 bodyValues `value`): octets that
/// are not valid for an ASCII label or an unknown charset are decoded as
/// UTF-8 when they are valid UTF-8, else as windows-1252, so no octet is lost.
pub(crate) fn decode_bytes(label: Option<&str>, bytes: &[u8]) -> (String, bool) {
    decode_text(label, Cow::Borrowed(bytes))
}

/// [`decode_bytes`] of octets the caller owns: ASCII and valid UTF-8 become
/// the text without a copy.
pub(crate) fn decode_owned(label: Option<&str>, bytes: Vec<u8>) -> (String, bool) {
    decode_text(label, Cow::Owned(bytes))
}

/// What [`decode_bytes`] and [`decode_owned`] do: borrowed octets are
/// copied once, owned ones are not copied when they are the text.
fn decode_text(label: Option<&str>, bytes: Cow<'_, [u8]>) -> (String, bool) {
    let charset = match label {
        None => Some(Charset::Ascii),
        Some(label) => lookup_charset(label),
    };
    match charset {
        Some(Charset::Other(decoder)) => {
            let text = decoder(&bytes);
            let problem = text.contains('\u{FFFD}');
            (text, problem)
        }
        // UTF-8, ASCII, or a charset not known.
        _ => {
            let utf8 = matches!(charset, Some(Charset::Utf8));
            let clean = utf8 || (matches!(charset, Some(Charset::Ascii)) && bytes.is_ascii());
            match String::from_utf8(bytes.into_owned()) {
                Ok(text) => (text, !clean),
                Err(error) if utf8 => {
                    (String::from_utf8_lossy(error.as_bytes()).into_owned(), true)
                }
                Err(error) => (guess_utf8_or_1252(error.as_bytes()), true),
            }
        }
    }
}

fn guess_utf8_or_1252(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => text.to_string(),
        Err(_) => match charset_decoder(b"windows-1252") {
            Some(decoder) => decoder(bytes),
            None => String::from_utf8_lossy(bytes).into_owned(),
        },
    }
}

// ---------------------------------------------------------------------------
// Structured-field lexer (RFC 5322 §3.2)

/// One lexical token of a structured field.
#[derive(Debug, Clone, PartialEq)]
enum Token {
    /// An atom or dot-atom (`.` is kept inside atoms, as obs-phrase allows it).
    Atom(String),
    /// A quoted-string's content, quoted-pairs decoded and unfolded.
    Quoted(String),
    /// A comment's content (nested comments kept with their parentheses).
    Comment(String),
    /// `<…>` content with CFWS removed.
    Angle(String),
    /// One of `, ; : @`.
    Special(char),
}

/// A token and whether white space or a comment preceded it.
type Lexed = (Token, bool);

fn lex(value: &str) -> Vec<Lexed> {
    let chars: Vec<char> = value.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    let mut space = false;
    while i < chars.len() {
        let ch = chars[i];
        match ch {
            ' ' | '\t' | '\r' | '\n' => {
                space = true;
                i += 1;
            }
            '(' => {
                let (comment, next) = read_comment(&chars, i);
                tokens.push((Token::Comment(comment), space));
                space = true;
                i = next;
            }
            '"' => {
                let (quoted, next) = read_quoted(&chars, i);
                tokens.push((Token::Quoted(quoted), space));
                space = false;
                i = next;
            }
            '<' => {
                let (angle, next) = read_angle(&chars, i);
                tokens.push((Token::Angle(angle), space));
                space = false;
                i = next;
            }
            ',' | ';' | ':' | '@' => {
                tokens.push((Token::Special(ch), space));
                space = false;
                i += 1;
            }
            '>' | ')' => {
                // Stray closers: best effort, treat as white space.
                space = true;
                i += 1;
            }
            '[' => {
                let start = i;
                while i < chars.len() && chars[i] != ']' {
                    i += 1;
                }
                i = (i + 1).min(chars.len());
                tokens.push((Token::Atom(chars[start..i].iter().collect()), space));
                space = false;
            }
            _ => {
                let start = i;
                while i < chars.len() && !" \t\r\n()\"<>,;:@[".contains(chars[i]) {
                    i += 1;
                }
                tokens.push((Token::Atom(chars[start..i].iter().collect()), space));
                space = false;
            }
        }
    }
    tokens
}

/// Reads a comment starting at `(`; returns its content and the index after it.
fn read_comment(chars: &[char], start: usize) -> (String, usize) {
    let mut depth = 0;
    let mut out = String::new();
    let mut i = start;
    while i < chars.len() {
        let ch = chars[i];
        match ch {
            '\\' if i + 1 < chars.len() => {
                out.push(chars[i + 1]);
                i += 2;
                continue;
            }
            '(' => {
                depth += 1;
                if depth > 1 {
                    out.push(ch);
                }
            }
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return (out, i + 1);
                }
                out.push(ch);
            }
            '\r' | '\n' => {}
            _ => out.push(ch),
        }
        i += 1;
    }
    (out, i)
}

/// Reads `<…>` starting at `<`; returns the content with white space and
/// comments removed (quoted local parts kept with their quotes).
fn read_angle(chars: &[char], start: usize) -> (String, usize) {
    let mut out = String::new();
    let mut i = start + 1;
    while i < chars.len() {
        match chars[i] {
            '>' => return (out, i + 1),
            ' ' | '\t' | '\r' | '\n' => i += 1,
            '(' => i = read_comment(chars, i).1,
            '"' => {
                let (quoted, next) = read_quoted(chars, i);
                out.push('"');
                out.push_str(&quoted);
                out.push('"');
                i = next;
            }
            ch => {
                out.push(ch);
                i += 1;
            }
        }
    }
    (out, i)
}

// ---------------------------------------------------------------------------
// Addresses (RFC 8621 §4.1.2.3, §4.1.2.4; RFC 5322 §3.4)

/// An EmailAddress object.
#[derive(Debug, Clone, PartialEq)]
struct EmailAddress {
    name: Option<String>,
    email: String,
}

/// An EmailAddressGroup object; `name` is `None` for mailboxes outside a group.
#[derive(Debug, Clone, PartialEq)]
struct AddressGroup {
    name: Option<String>,
    addresses: Vec<EmailAddress>,
}

/// Builds a display name from phrase tokens (RFC 8621 §4.1.2.3): quoted
/// strings unquoted, encoded words decoded (not inside quoted strings, RFC
/// 2047 §5(3)), white space between words one SP, trimmed. `None` when empty.
fn phrase(tokens: &[Lexed]) -> Option<String> {
    let mut out = String::new();
    let mut run = WordRun::default();
    let mut last_encoded = false;
    let mut first = true;
    let mut comment_between = false;
    for (token, space) in tokens {
        let space = (*space || comment_between) && !first;
        comment_between = false;
        let text = match token {
            Token::Atom(atom) => {
                if let Some(word) = encoded_word(atom) {
                    if space && !last_encoded {
                        out.push(' ');
                    }
                    run.push(word, &mut out);
                    last_encoded = true;
                    first = false;
                    continue;
                }
                atom.as_str()
            }
            Token::Quoted(quoted) => quoted.as_str(),
            Token::Special(ch) => {
                // A stray `@` or `:` inside a phrase: keep it as text.
                run.flush(&mut out);
                out.push(*ch);
                last_encoded = false;
                first = false;
                continue;
            }
            Token::Comment(_) => {
                comment_between = true;
                continue;
            }
            Token::Angle(_) => continue,
        };
        run.flush(&mut out);
        if space {
            out.push(' ');
        }
        out.push_str(text);
        last_encoded = false;
        first = false;
    }
    run.flush(&mut out);
    let trimmed = out.trim();
    (!trimmed.is_empty()).then(|| trimmed.to_string())
}

/// A name taken from a comment (RFC 8621 §4.1.2.3: "a comment immediately
/// following the addr-spec"); encoded words in comments are allowed (RFC 2047 §5(2)).
fn comment_name(comment: &str) -> Option<String> {
    let decoded = decode_words(comment.trim());
    let trimmed = decoded.trim();
    (!trimmed.is_empty()).then(|| trimmed.to_string())
}

/// Turns the tokens of one address (between separators) into a mailbox.
fn mailbox(tokens: &[Lexed]) -> Option<EmailAddress> {
    if let Some(angle) = tokens
        .iter()
        .position(|(t, _)| matches!(t, Token::Angle(_)))
    {
        let Token::Angle(addr) = &tokens[angle].0 else {
            return None;
        };
        // obs-route: `<@a,@b:user@host>`.
        let email = match addr.strip_prefix('@').and_then(|_| addr.split_once(':')) {
            Some((_route, email)) => email.to_string(),
            None => addr.clone(),
        };
        let name = phrase(&tokens[..angle]).or_else(|| match tokens.get(angle + 1) {
            Some((Token::Comment(comment), _)) => comment_name(comment),
            _ => None,
        });
        return Some(EmailAddress { name, email });
    }
    let mut email = String::new();
    let mut name = None;
    let mut seen = false;
    for (token, space) in tokens {
        match token {
            Token::Comment(comment) => {
                if seen && name.is_none() {
                    name = comment_name(comment);
                }
                continue;
            }
            Token::Atom(text) => {
                if *space
                    && seen
                    && !email.ends_with('@')
                    && !email.ends_with('.')
                    && !text.starts_with('.')
                {
                    email.push(' ');
                }
                email.push_str(text);
            }
            Token::Quoted(text) => {
                if *space && seen && !email.ends_with('@') {
                    email.push(' ');
                }
                email.push('"');
                email.push_str(text);
                email.push('"');
            }
            Token::Special(ch) => email.push(*ch),
            Token::Angle(_) => {}
        }
        seen = true;
    }
    let email = email.trim().to_string();
    (!email.is_empty()).then_some(EmailAddress { name, email })
}

/// Parses an address-list (RFC 5322 §3.4, best effort) into groups; mailboxes
/// outside a group are collected in groups without a name, consecutive ones
/// together (RFC 8621 §4.1.2.4).
fn address_list(raw: &str) -> Vec<AddressGroup> {
    let tokens = lex(raw);
    let mut groups: Vec<AddressGroup> = Vec::new();
    let mut current: Vec<Lexed> = Vec::new();
    // The open group's name, once its `:` was seen.
    let mut group: Option<AddressGroup> = None;

    fn push_ungrouped(groups: &mut Vec<AddressGroup>, address: EmailAddress) {
        match groups.last_mut() {
            Some(last) if last.name.is_none() => last.addresses.push(address),
            _ => groups.push(AddressGroup {
                name: None,
                addresses: vec![address],
            }),
        }
    }

    let finish = |current: &mut Vec<Lexed>,
                  group: &mut Option<AddressGroup>,
                  groups: &mut Vec<AddressGroup>| {
        if let Some(address) = mailbox(current) {
            match group {
                Some(group) => group.addresses.push(address),
                None => push_ungrouped(groups, address),
            }
        }
        current.clear();
    };

    for lexed in tokens {
        match lexed.0 {
            Token::Special(',') => finish(&mut current, &mut group, &mut groups),
            Token::Special(';') => {
                finish(&mut current, &mut group, &mut groups);
                if let Some(group) = group.take() {
                    groups.push(group);
                }
            }
            Token::Special(':')
                if group.is_none()
                    && !current
                        .iter()
                        .any(|(t, _)| matches!(t, Token::Angle(_) | Token::Special('@'))) =>
            {
                group = Some(AddressGroup {
                    name: phrase(&current),
                    addresses: Vec::new(),
                });
                current.clear();
            }
            _ => current.push(lexed),
        }
    }
    finish(&mut current, &mut group, &mut groups);
    if let Some(group) = group.take() {
        groups.push(group);
    }
    groups
}

// ---------------------------------------------------------------------------
// MessageIds and URLs

/// The `<…>` items of a field, comments and quoted strings outside them
/// skipped, white space inside removed; empty items dropped.
fn angle_items(raw: &str) -> Vec<String> {
    lex(raw)
        .into_iter()
        .filter_map(|(token, _)| match token {
            Token::Angle(item) if !item.is_empty() => Some(item),
            _ => None,
        })
        .collect()
}

/// The MessageIds form (RFC 8621 §4.1.2.5; RFC 5322 §3.6.4): every msg-id
/// without its angle brackets. Words between ids (obs-in-reply-to,
/// obs-references) are ignored; `None` when the field holds no msg-id.
fn message_ids(raw: &str) -> Option<Vec<String>> {
    let ids = angle_items(raw);
    (!ids.is_empty()).then_some(ids)
}

/// The URLs form (RFC 8621 §4.1.2.7; RFC 2369 §2): the `<…>` URLs without
/// brackets, comments and folding white space removed; `None` when the field
/// holds no URL (e.g. `List-Post: NO`).
fn urls(raw: &str) -> Option<Vec<String>> {
    let urls = angle_items(raw);
    (!urls.is_empty()).then_some(urls)
}

// ---------------------------------------------------------------------------
// Date (RFC 8621 §4.1.2.6; RFC 5322 §3.3, §4.3)

/// Parses a date-time into RFC 3339 with the field's own offset
/// (`2002-09-04T12:34:56+02:00`; `+0000` and UT/GMT as `Z`; `-0000`, unknown
/// zones and a missing zone as `-00:00`, "local time unknown" in both RFCs).
/// `None` when the field is not a date.
///
/// Best effort beyond RFC 5322 §3.3 and the obsolete syntax of §4.3, for
/// forms common in old mail whose meaning is unambiguous: one-digit hour,
/// minute or second; a year below 1900 written with four digits (`0102`, the
/// "year minus 1900" bug) read like the obsolete short years (below 50: add
/// 2000, else add 1900: `102` and `0102` are 2002); an AM/PM suffix; a zone
/// without sign or with a doubled one (`0530`, `+-0500`); `GMT+1`; a zone
/// spelled in words (`Eastern Daylight Time`: unknown, `-00:00`).
pub fn date_form(raw: &str) -> Option<String> {
    // Drop comments, then split into words on white space and commas.
    let mut text = String::new();
    for (token, _) in lex(raw) {
        match token {
            Token::Atom(atom) => {
                text.push_str(&atom);
                text.push(' ');
            }
            Token::Special(':') => {
                // Time parts were split by the lexer: glue them back.
                if text.ends_with(' ') {
                    text.pop();
                }
                text.push(':');
            }
            Token::Special(',') => text.push(' '),
            Token::Comment(_) => {}
            Token::Quoted(_) | Token::Angle(_) | Token::Special(_) => return None,
        }
    }
    let text = text.replace(": ", ":");
    let mut words = text.split_ascii_whitespace().peekable();
    const DAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
    if words
        .peek()
        .is_some_and(|word| name_index(word, &DAYS).is_some())
    {
        words.next();
    }
    let day: u32 = parse_digits(words.next()?, 1, 2)?;
    const MONTHS: [&str; 12] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    let month = name_index(words.next()?, &MONTHS)? as u32 + 1;
    let year_word = words.next()?;
    let year: i32 = parse_digits(year_word, 2, 4)?;
    let year = match year {
        1900.. if year_word.len() == 4 => year,
        ..50 => year + 2000,
        50..1000 => year + 1900,
        _ => return None,
    };
    chrono::NaiveDate::from_ymd_opt(year, month, day)?;
    let mut time = words.next()?.split(':');
    let mut hour: u32 = parse_digits(time.next()?, 1, 2)?;
    let minute: u32 = parse_digits(time.next()?, 1, 2)?;
    let second: u32 = match time.next() {
        Some(second) => parse_digits(second, 1, 2)?,
        None => 0,
    };
    if time.next().is_some() || minute > 59 || second > 60 {
        return None;
    }
    let rest: Vec<&str> = words.collect();
    let rest = match rest.split_first() {
        Some((meridiem, rest))
            if meridiem.eq_ignore_ascii_case("am") || meridiem.eq_ignore_ascii_case("pm") =>
        {
            if !(1..=12).contains(&hour) {
                return None;
            }
            hour = hour % 12
                + if meridiem.eq_ignore_ascii_case("pm") {
                    12
                } else {
                    0
                };
            rest
        }
        _ => &rest[..],
    };
    if hour > 23 {
        return None;
    }
    let offset = match rest {
        [] => None,
        [zone] => zone_offset(zone)?,
        words
            if words
                .iter()
                .all(|w| w.bytes().all(|b| b.is_ascii_alphabetic())) =>
        {
            None
        }
        _ => return None,
    };
    let zone = match offset {
        None => "-00:00".to_string(),
        Some(0) => "Z".to_string(),
        Some(minutes) => {
            let sign = if minutes < 0 { '-' } else { '+' };
            let minutes = minutes.unsigned_abs();
            format!("{sign}{:02}:{:02}", minutes / 60, minutes % 60)
        }
    };
    Some(format!(
        "{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}{zone}"
    ))
}

/// The index of the name a word abbreviates or spells out (`Sep`, `Sept`,
/// `September`, any case).
fn name_index(word: &str, names: &[&str]) -> Option<usize> {
    let word = word.to_ascii_lowercase();
    if word.len() < 3 || !word.bytes().all(|b| b.is_ascii_alphabetic()) {
        return None;
    }
    names.iter().position(|name| word.starts_with(name))
}

/// A number of `min..=max` ASCII digits.
fn parse_digits<T: std::str::FromStr>(word: &str, min: usize, max: usize) -> Option<T> {
    (word.len() >= min && word.len() <= max && word.bytes().all(|b| b.is_ascii_digit()))
        .then(|| word.parse().ok())
        .flatten()
}

/// A zone's offset in minutes: `Some(None)` for "unknown local time"
/// (`-0000`, military and unknown alphabetic zones, RFC 5322 §4.3), `None`
/// when the zone is malformed or outside what RFC 3339 can express.
fn zone_offset(zone: &str) -> Option<Option<i32>> {
    let upper = zone.to_ascii_uppercase();
    // `GMT+1`, `UTC-0530`: a named UTC with an offset.
    let numeric = ["GMT", "UTC", "UT"].iter().find_map(|prefix| {
        upper
            .strip_prefix(prefix)
            .filter(|rest| rest.starts_with(['+', '-']))
    });
    if let Some(rest) = numeric {
        let digits = rest.trim_start_matches(['+', '-']);
        let negative = rest.starts_with('-');
        let minutes = match digits.len() {
            1 | 2 => parse_digits::<i32>(digits, 1, 2)? * 60,
            4 => numeric_offset(digits)?,
            _ => return None,
        };
        return Some(Some(if negative { -minutes } else { minutes }));
    }
    let signs = zone.len() - zone.trim_start_matches(['+', '-']).len();
    if signs <= 2 && zone.len() - signs == 4 && zone[signs..].bytes().all(|b| b.is_ascii_digit()) {
        let digits = &zone[signs..];
        let minutes = numeric_offset(digits)?;
        // `+-0500` seen in old mail: the last sign counts.
        let negative = signs > 0 && zone[..signs].ends_with('-');
        return Some(match (negative, minutes) {
            (true, 0) => None,
            (true, minutes) => Some(-minutes),
            (false, minutes) => Some(minutes),
        });
    }
    if !zone.bytes().all(|b| b.is_ascii_alphabetic()) {
        return None;
    }
    Some(match upper.as_str() {
        "UT" | "UTC" | "GMT" | "Z" => Some(0),
        "EDT" => Some(-4 * 60),
        "EST" | "CDT" => Some(-5 * 60),
        "CST" | "MDT" => Some(-6 * 60),
        "MST" | "PDT" => Some(-7 * 60),
        "PST" => Some(-8 * 60),
        _ => None,
    })
}

/// `HHMM` as minutes; `None` beyond RFC 3339's range (hours 0–23, minutes 0–59).
fn numeric_offset(digits: &str) -> Option<i32> {
    let value: i32 = parse_digits(digits, 4, 4)?;
    let (hours, minutes) = (value / 100, value % 100);
    (hours <= 23 && minutes <= 59).then_some(hours * 60 + minutes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoding_owned_octets_is_decoding_borrowed_ones() {
        let inputs: [&[u8]; 5] = [
            b"plain ascii",
            "caf\u{e9} \u{65e5}\u{672c}".as_bytes(),
            b"caf\xe9 latin-1",
            b"\xff\xfe broken utf-8",
            b"",
        ];
        let labels = [
            None,
            Some("us-ascii"),
            Some("UTF-8"),
            Some("iso-8859-1"),
            Some("windows-1252"),
            Some("x-unknown-charset"),
        ];
        for label in labels {
            for bytes in inputs {
                assert_eq!(
                    decode_owned(label, bytes.to_vec()),
                    decode_bytes(label, bytes),
                    "{label:?} {bytes:?}"
                );
            }
        }
    }
    use mail_parser::MessageParser;

    #[test]
    fn adjacent_iso_2022_jp_words_decode_without_a_replacement_character() {
        let raw = " =?ISO-2022-JP?B?GyRCTWg9NSROQkckQTlnGyhC?=\r\n =?ISO-2022-JP?B?GyRCJG8kOyRLJEQkJCRGGyhC?=";
        assert_eq!(text_form(raw), "来週の打ち合わせについて");
    }

    #[test]
    fn text_form_is_nfc() {
        // "e" + COMBINING ACUTE ACCENT, raw and encoded, becomes U+00E9.
        assert_eq!(text_form(" Cafe\u{301}"), "Caf\u{e9}");
        assert_eq!(text_form(" =?utf-8?q?Cafe=CC=81?="), "Caf\u{e9}");
    }
    use serde_json::json;

    fn form(raw: &str, form: HeaderForm) -> Value {
        parsed_form(raw, form)
    }

    #[test]
    fn text_form_unfolds_and_decodes_only_well_placed_words() {
        assert_eq!(text_form(" Hello\r\n  world  "), "Hello  world  ");
        // Only what matches RFC 2047's grammar exactly is decoded; the rest
        // stays literal text: empty encoded text, base64 not in whole groups
        // or with stray padding, an unknown encoding, a word glued to text.
        for literal in [
            "=?utf-8?q??=",
            "=?utf-8?b??=",
            "=?utf-8?b?Y2Fmw6k?=",
            "=?utf-8?b?Y2Fm===?=",
            "=?utf-8?b?Y2=mw6k=?=",
            "=?utf-8?x?abc?=",
            "=?utf-8?q?caf=C3=A9?=s",
            "x=?utf-8?q?caf=C3=A9?=",
            "=?utf-8?q?a b?=",
        ] {
            assert_eq!(text_form(&format!(" {literal}")), literal, "{literal}");
        }
        assert_eq!(text_form(" =?utf-8?b?Y2Fmw6k=?="), "café");
        assert_eq!(text_form(" =?utf-8?B?Y2Fmw6lz?="), "cafés");
        // Adjacent encoded words are joined; a character split over two words survives.
        assert_eq!(text_form(" =?utf-8?q?=E2=82?= =?utf-8?q?=AC?= x"), "€ x");
        assert_eq!(
            text_form(" a =?utf-8?B?w6k=?=\r\n =?UTF-8?B?4oKs?= b"),
            "a é€ b"
        );
        // Not separated by white space: RFC 2047 §5(1) forbids decoding.
        assert_eq!(text_form(" x=?utf-8?q?a?="), "x=?utf-8?q?a?=");
        assert_eq!(
            text_form(" =?utf-8?q?a?==?utf-8?q?b?="),
            "=?utf-8?q?a?==?utf-8?q?b?="
        );
        // Unknown charset, bad Q escape: left as is.
        assert_eq!(text_form(" =?x-klingon?q?a?="), "=?x-klingon?q?a?=");
        assert_eq!(text_form(" =?utf-8?q?a=ZZ?="), "=?utf-8?q?a=ZZ?=");
        // Control characters from encoded words are dropped; language suffix ignored.
        assert_eq!(text_form(" =?utf-8*en?q?a=00b=09c?="), "abc");
        assert_eq!(text_form(" =?iso-8859-1?q?caf=E9?="), "café");
        assert_eq!(text_form(" =?eucgb2312_cn?q?=D6=D0?="), "中");
    }

    #[test]
    fn addresses_follow_the_rfc8621_example() {
        let raw = " \"  James Smythe\" <james@example.com>, Friends:\r\n  jane@example.com, =?UTF-8?Q?John_Sm=C3=AEth?=\r\n  <john@example.com>;";
        assert_eq!(
            form(raw, HeaderForm::Addresses),
            json!([
                {"name": "James Smythe", "email": "james@example.com"},
                {"name": null, "email": "jane@example.com"},
                {"name": "John Smîth", "email": "john@example.com"},
            ])
        );
        assert_eq!(
            form(raw, HeaderForm::GroupedAddresses),
            json!([
                {"name": null, "addresses": [{"name": "James Smythe", "email": "james@example.com"}]},
                {"name": "Friends", "addresses": [
                    {"name": null, "email": "jane@example.com"},
                    {"name": "John Smîth", "email": "john@example.com"},
                ]},
            ])
        );
    }

    #[test]
    fn address_edge_cases() {
        assert_eq!(
            form(
                " a@b.example (Ann \"the\" Bee), <@route.example:c@d.example>",
                HeaderForm::Addresses
            ),
            json!([
                {"name": "Ann \"the\" Bee", "email": "a@b.example"},
                {"name": null, "email": "c@d.example"},
            ])
        );
        // Encoded words inside a quoted string are not decoded (RFC 2047 §5(3)).
        assert_eq!(
            form(" \"=?utf-8?q?X?=\" <x@y.example>", HeaderForm::Addresses),
            json!([{"name": "=?utf-8?q?X?=", "email": "x@y.example"}])
        );
        assert_eq!(
            form(" undisclosed-recipients:;", HeaderForm::GroupedAddresses),
            json!([{"name": "undisclosed-recipients", "addresses": []}])
        );
        assert_eq!(
            form(" undisclosed-recipients:;", HeaderForm::Addresses),
            json!([])
        );
        assert_eq!(
            form(" John Q. Public <jqp@example.com>,,", HeaderForm::Addresses),
            json!([{"name": "John Q. Public", "email": "jqp@example.com"}])
        );
        assert_eq!(form(" ", HeaderForm::Addresses), json!([]));
    }

    #[test]
    fn message_ids_urls_and_dates() {
        assert_eq!(
            form(
                " <a@b> (comment)\r\n <c@d> \"<not@id>\" <e\r\n @f>",
                HeaderForm::MessageIds
            ),
            json!(["a@b", "c@d", "e@f"])
        );
        assert_eq!(form(" no ids here", HeaderForm::MessageIds), Value::Null);
        assert_eq!(
            form(
                " <mailto:l@example.com?subject=help> (List Instructions),\r\n <https://example.com/x>",
                HeaderForm::Urls
            ),
            json!(["mailto:l@example.com?subject=help", "https://example.com/x"])
        );
        assert_eq!(
            form(" NO (posting not allowed)", HeaderForm::Urls),
            Value::Null
        );
        let date = |raw: &str| date_form(raw);
        assert_eq!(
            date(" Wed, 4 Sep 2002 12:34:56 +0200").as_deref(),
            Some("2002-09-04T12:34:56+02:00")
        );
        assert_eq!(
            date(" 4 Sep 102 12:34 -0000 (odd)").as_deref(),
            Some("2002-09-04T12:34:00-00:00")
        );
        assert_eq!(
            date(" Thu, 13 Feb 69 23:32:54 GMT").as_deref(),
            Some("1969-02-13T23:32:54Z")
        );
        assert_eq!(
            date(" Thu, 13 Feb 2003 23:32:54 PDT").as_deref(),
            Some("2003-02-13T23:32:54-07:00")
        );
        assert_eq!(
            date(" Thu, 13 Feb 2003 23:32 -0330").as_deref(),
            Some("2003-02-13T23:32:00-03:30")
        );
        assert_eq!(date(" 31 Feb 2003 10:00:00 +0000"), None);
        assert_eq!(date(" Someday"), None);
        assert_eq!(date(" 1 Jan 2003 25:00:00 +0000"), None);
        assert_eq!(date(" 1 Jan 1899 10:00:00 +0000"), None);
        assert_eq!(date(" 3 Sep 2002 12:00:00 +2400"), None);
        assert_eq!(date(" 3 Sep 2002 12:00:00 01800"), None);
        // Best effort for forms seen in old mail.
        assert_eq!(
            date(" Thu, 22 Aug 0102 12:07:35 +0800").as_deref(),
            Some("2002-08-22T12:07:35+08:00")
        );
        assert_eq!(
            date(" Tue, 7 May 2002 9:38:7 -0600").as_deref(),
            Some("2002-05-07T09:38:07-06:00")
        );
        assert_eq!(
            date(" 03 Jul 01 4:12:06 PM").as_deref(),
            Some("2001-07-03T16:12:06-00:00")
        );
        assert_eq!(
            date(" 03 Jul 01 12:12:06 AM").as_deref(),
            Some("2001-07-03T00:12:06-00:00")
        );
        assert_eq!(
            date(" Thu, 29 Aug 2002 15:36:58 +-0500").as_deref(),
            Some("2002-08-29T15:36:58-05:00")
        );
        assert_eq!(
            date(" Fri, 02 Aug 2002 23:37:59 0530").as_deref(),
            Some("2002-08-02T23:37:59+05:30")
        );
        assert_eq!(
            date(" Fri, 23 Aug 2002 22:46:34 GMT+1").as_deref(),
            Some("2002-08-23T22:46:34+01:00")
        );
        assert_eq!(
            date(" Fri, 30 Aug 02 21:48:08 Eastern Daylight Time").as_deref(),
            Some("2002-08-30T21:48:08-00:00")
        );
        assert_eq!(
            date(" Tuesday, 3 September 2002 12:00:00 UTC").as_deref(),
            Some("2002-09-03T12:00:00Z")
        );
    }

    #[test]
    fn header_value_uses_last_instance_and_names_as_written() {
        let raw = b"X-Foo: a@b.example\r\nx-foo: \"C\" <c@d.example>\r\nMessage-Id: <1@x>\r\n\r\n";
        let message = MessageParser::default()
            .parse_headers(&raw[..])
            .expect("parses");
        let headers = &message.parts[0].headers;
        let property = HeaderProperty::parse("header:X-FOO:asAddresses").expect("valid");
        assert_eq!(
            header_value(headers, &message.raw_message, &property),
            json!([{"name": "C", "email": "c@d.example"}])
        );
        let property = HeaderProperty::parse("header:x-foo:all").expect("valid");
        assert_eq!(
            header_value(headers, &message.raw_message, &property),
            json!([" a@b.example", " \"C\" <c@d.example>"])
        );
        let top = top_level_fields(&message);
        let property = HeaderProperty::parse("header:X-Bar:asMessageIds").expect("valid");
        assert_eq!(value_in(&top, &property), Value::Null);
        let property = HeaderProperty::parse("header:Message-ID:asMessageIds").expect("valid");
        assert_eq!(value_in(&top, &property), json!(["1@x"]));
        let property = HeaderProperty::parse("header:X-Bar:asText:all").expect("valid");
        assert_eq!(
            header_value(headers, &message.raw_message, &property),
            json!([])
        );
        assert_eq!(
            header_list(headers, &message.raw_message)[2],
            json!({"name": "Message-Id", "value": " <1@x>"})
        );
    }

    #[test]
    fn long_header_lists_are_looked_up_by_index_with_the_scan_s_answers() {
        // 3 × 100 fields: past INDEX_FROM_FIELDS, names in mixed case.
        let mut block = String::new();
        for n in 0..100 {
            block.push_str(&format!(
                "X-Many: {n}\r\nx-MANY-other: o{n}\r\nReceived: r{n}\r\n"
            ));
        }
        block.push_str("Subject: last\r\n\r\n");
        let fields = HeaderFields::parse(block.clone().into_bytes());
        assert_eq!(fields.len(), 301);
        assert!(fields.index_weight > 0);
        let split = split_fields(block.as_bytes(), 0, block.len());
        let list = FieldList::new(split.clone());
        for name in ["x-many", "x-many-other", "received", "subject", "absent"] {
            for suffix in ["", ":all", ":asRaw:all"] {
                let property = HeaderProperty::parse(&format!("header:{name}{suffix}")).unwrap();
                let scanned = value_in(&split, &property);
                assert_eq!(fields.render(&property), scanned, "{name}{suffix}");
                assert_eq!(list.value(&property), scanned, "{name}{suffix}");
            }
            let count = split.iter().filter(|field| field.is(name)).count();
            assert_eq!(
                (fields.count(name), list.count(name)),
                (count, count),
                "{name}"
            );
        }
        assert_eq!(fields.count("x-many"), 100);
        assert!(fields.index.get().is_some());
        // A short block is scanned: no index is built.
        let short = HeaderFields::parse(b"X-A: 1\r\nx-a: 2\r\n\r\n".to_vec());
        assert_eq!(short.count("x-a"), 2);
        assert!(short.index.get().is_none() && short.index_weight == 0);
    }

    #[test]
    fn header_fields_render_as_the_parsed_message_and_keep_a_bounded_memo() {
        let block = b"From: Ann <ann@example.com>\r\nSubject: =?UTF-8?Q?caf=C3=A9?=\r\nX-N: 1\r\n X-continued\r\nbad line\r\nX-N: 2\r\n\r\n";
        let fields = HeaderFields::parse(block.to_vec());
        let message = MessageParser::default().parse_headers(&block[..]).unwrap();
        let names: Vec<String> = fields.fields().iter().map(Field::name).collect();
        assert_eq!(names, ["From", "Subject", "X-N", "X-N"]);
        let mut properties: Vec<HeaderProperty> = [
            "header:From:asAddresses",
            "header:Subject:asText",
            "header:X-N:all",
            "header:x-n:asText",
        ]
        .iter()
        .map(|p| HeaderProperty::parse(p).expect(p))
        .collect();
        for n in 0..MEMO_ENTRIES {
            properties.push(HeaderProperty::parse(&format!("header:X-Other-{n}")).unwrap());
        }
        // Twice: the first round fills the memo, the second reads it.
        for _ in 0..2 {
            for property in &properties {
                assert_eq!(
                    fields.value(property),
                    header_value(&message.parts[0].headers, block, property),
                    "{}",
                    property.key
                );
            }
        }
        assert_eq!(
            fields.value(&properties[0]),
            json!([{"name": "Ann", "email": "ann@example.com"}])
        );
        assert_eq!(fields.value(&properties[1]), json!("café"));
        assert_eq!(
            fields.value(&properties[2]),
            json!([" 1\r\n X-continued", " 2"])
        );
        assert_eq!(fields.memo.lock().unwrap().0.len(), MEMO_ENTRIES);
    }

    #[test]
    fn large_values_are_rendered_each_time_not_kept() {
        let mut block = b"X-To: ".to_vec();
        for i in 0..2_000 {
            block.extend_from_slice(format!("a{i}@b.c,").as_bytes());
        }
        block.extend_from_slice(b"\r\nSubject: hi\r\n\r\n");
        let fields = HeaderFields::parse(block);
        let large = HeaderProperty::parse("header:X-To:asAddresses").unwrap();
        let small = HeaderProperty::parse("header:Subject:asText").unwrap();
        for _ in 0..2 {
            assert_eq!(fields.value(&large).as_array().map(Vec::len), Some(2_000));
            assert_eq!(fields.value(&small), json!("hi"));
        }
        let memo = fields.memo.lock().unwrap();
        assert_eq!(memo.0.len(), 1);
        assert!(memo.1 <= MEMO_BYTES, "{}", memo.1);
        assert!(fields.weight() >= MEMO_BYTES);
    }

    #[test]
    fn lines_without_a_valid_field_name_are_not_fields() {
        let block = b": empty\r\nFrom ann@example.com Mon Jan  1 10:00:00 2024\r\nX A: b\r\nX\x01: c\r\nSubject : ok\r\n\r\n";
        let fields = HeaderFields::parse(block.to_vec());
        let found: Vec<(String, String)> = fields
            .fields()
            .iter()
            .map(|field| (field.name(), field.raw_value()))
            .collect();
        assert_eq!(found, [("Subject".to_string(), " ok".to_string())]);
    }
}

//! Header field values in the parsed forms of RFC 8621 §4.1.2, for any field
//! name, plus the RFC 2047 and charset decoding the forms share with body parts.
//!
//! mail-parser splits the header block into fields and gives each field's
//! offsets; every parsed form is computed here from the field's raw octets,
//! because mail-parser's own field parsers collapse white space, decode RFC
//! 2047 words where RFC 2047 forbids it and lose a character split over two
//! encoded words (see the tests at the end of this file).
//!
//! The forms are parsed beside this file: `header_text.rs` (Text, RFC 2047
//! words, charsets), `header_address.rs` (the structured-field lexer,
//! addresses, message ids, URLs) and `header_date.rs` (Date); this file
//! renders them and re-exports what the rest of the crate uses.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use mail_parser::Header;
use serde_json::{Map, Value};

use super::header_address::{EmailAddress, address_list, message_ids, urls};
pub use super::header_date::date_form;
pub use super::header_text::text_form;
pub(crate) use super::header_text::{decode_bytes, decode_owned, decode_words, lookup_charset};
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

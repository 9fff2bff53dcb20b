//! The list view's Email objects written straight as JSON text (issue 20,
//! ADR 0003): the same octets [`super::render::render_email`] gives once
//! serialized, without building a `serde_json::Value` per property and per
//! email and then walking it again to serialize it.
//!
//! Only the properties a list view asks for render this way: the metadata
//! (`id`, `blobId`, `threadId`, `mailboxIds`, `keywords`, `size`,
//! `receivedAt`), the header properties (RFC 8621 §4.1.2–§4.1.3, from the
//! cached header fields, whose memo keeps each value's text beside the value:
//! [`crate::mail::header::HeaderFields::value_text`]) and the projection (`preview`,
//! `hasAttachment`). A call that asks for anything else (`headers`, body
//! parts, body values) renders through the `Value` tree as before.
//!
//! serde_json's `Map` orders keys by their octets (it is a `BTreeMap`): the
//! keys here are written in that order, each once, and `mailboxIds` and
//! `keywords` likewise, so the text is the one the tree serializes to
//! (`tests/api/email_get.rs` compares both on every property and corpus
//! message).

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::render::EmailSources;
use crate::mail::property::{EmailProperty, HeaderProperty};
use crate::mail::work::{WorkExceeded, WorkMeter};
use crate::store::EmailMeta;

/// One property of a [`TextShape`].
enum Slot {
    Id,
    BlobId,
    ThreadId,
    MailboxIds,
    Keywords,
    Size,
    ReceivedAt,
    /// A header property (the convenience ones resolved to theirs once per
    /// call, not once per email).
    Header(HeaderProperty),
    HasAttachment,
    Preview,
}

/// The properties of one call, each once, in the order their keys are
/// written, with each key already written as JSON with what goes before
/// it and what starts its value, where that is fixed: `{"id":"e` first,
/// `,"size":` after (issue 20: an object is a handful of copies).
pub struct TextShape {
    slots: Vec<(String, Slot)>,
    /// The work units of one object when no property counts its header
    /// fields ([`TextShape::counts_fields`]): one per property.
    units: u64,
    /// Whether some property is a `header:…:all`, charged one unit more
    /// per field it renders.
    counts_fields: bool,
    /// [`TextShape::name`], made once.
    name: String,
    /// Whether some property reads the header fields.
    pub needs_header: bool,
    /// Whether some property reads the projection.
    pub needs_fast_view: bool,
}

impl TextShape {
    /// The shape of `properties` when every one renders as text; `None`
    /// when one does not (module doc).
    pub fn new(properties: &[EmailProperty]) -> Option<Self> {
        use EmailProperty::*;
        let mut slots: Vec<(&str, Slot)> = Vec::with_capacity(properties.len());
        for property in properties {
            let slot = match property {
                Id => Slot::Id,
                BlobId => Slot::BlobId,
                ThreadId => Slot::ThreadId,
                MailboxIds => Slot::MailboxIds,
                Keywords => Slot::Keywords,
                Size => Slot::Size,
                ReceivedAt => Slot::ReceivedAt,
                MessageId | InReplyTo | References | Sender | From | To | Cc | Bcc | ReplyTo
                | Subject | SentAt => Slot::Header(property.header_property()?),
                Header(header) => Slot::Header(header.clone()),
                HasAttachment => Slot::HasAttachment,
                Preview => Slot::Preview,
                Headers | BodyStructure | BodyValues | TextBody | HtmlBody | Attachments => {
                    return None;
                }
            };
            slots.push((property.name(), slot));
        }
        slots.sort_by(|(a, _), (b, _)| a.as_bytes().cmp(b.as_bytes()));
        slots.dedup_by(|(a, _), (b, _)| a == b);
        let needs_header = slots.iter().any(|(_, s)| matches!(s, Slot::Header(_)));
        let needs_fast_view = slots
            .iter()
            .any(|(_, s)| matches!(s, Slot::HasAttachment | Slot::Preview));
        let mut name = String::new();
        for (key, _) in &slots {
            push_str(&mut name, key);
            name.push(':');
        }
        let counts_fields = slots
            .iter()
            .any(|(_, s)| matches!(s, Slot::Header(header) if header.all));
        let slots: Vec<(String, Slot)> = slots
            .into_iter()
            .enumerate()
            .map(|(position, (name, slot))| {
                let mut key = String::with_capacity(name.len() + 6);
                key.push(if position == 0 { '{' } else { ',' });
                push_str(&mut key, name);
                key.push(':');
                match slot {
                    Slot::Id => key.push_str("\"e"),
                    Slot::ThreadId => key.push_str("\"t"),
                    _ => {}
                }
                (key, slot)
            })
            .collect();
        Some(Self {
            units: slots.len() as u64,
            counts_fields,
            slots,
            name,
            needs_header,
            needs_fast_view,
        })
    }

    /// The shape's identity: its keys in the order they are written (two
    /// calls with the same properties, in any order, have the same).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The Email state a text rendered at this shape from metadata read at
    /// `state` stays right for: `None` (every state) when it reads header
    /// fields or the projection, whose texts leave `mailboxIds` and
    /// `keywords` out (the only properties that change, RFC 8621 §4.1.1);
    /// `state` for a shape of metadata alone, whose texts are written
    /// whole, holes filled, and are right while the account's Email state
    /// is the one its metadata was read at (RFC 8620 §1.6: the state
    /// changes whenever any of it does). Texts of a shape of metadata
    /// alone spare no reads but the writing: a metadata call was mostly
    /// that, 480 instructions per email (issue 20).
    pub fn kept_at(&self, state: i64) -> Option<i64> {
        self.keeps_whole().then_some(state)
    }

    /// Whether its texts are kept whole: it reads neither header fields
    /// nor the projection ([`TextShape::kept_at`]).
    pub fn keeps_whole(&self) -> bool {
        !self.needs_header && !self.needs_fast_view
    }

    /// Whether `sources` holds everything this shape reads: only then is
    /// its [`FixedText`] worth keeping (a missing header block or
    /// projection row renders `null`, which a later read could fill).
    pub fn has_all(&self, sources: &EmailSources<'_>) -> bool {
        (!self.needs_header || sources.header.is_some())
            && (!self.needs_fast_view || sources.fast_view.is_some())
    }

    /// The object of `sources` with its `mailboxIds` and `keywords` left
    /// out (the properties that change: [`FixedText`]), or whole when the
    /// shape reads metadata alone ([`TextShape::kept_at`]), charging `meter` as
    /// [`super::render::render_email`] does: one unit per property, plus
    /// one per field a `header:…:all` property renders ([`WorkExceeded`]
    /// when the meter cannot pay). A missing source (header fields when
    /// [`TextShape::needs_header`], the projection when
    /// [`TextShape::needs_fast_view`]) writes `null`, as the tree does.
    pub fn fixed(
        &self,
        sources: &EmailSources<'_>,
        meter: &WorkMeter,
    ) -> Result<FixedText, WorkExceeded> {
        let whole = self.keeps_whole();
        let mut out = String::with_capacity(if whole { 128 } else { 768 });
        let mut holes = Vec::new();
        let units = self.write_object(sources, meter, &mut out, (!whole).then_some(&mut holes))?;
        Ok(FixedText {
            text: out.into_boxed_str(),
            holes: holes.into_boxed_slice(),
            units,
        })
    }

    /// Appends the whole object of `sources` to `out`, `mailboxIds` and
    /// `keywords` included, charged as [`TextShape::fixed`] is: what the
    /// tests hold a spliced [`FixedText`] to (Email/get keeps every text it
    /// renders at a shape, so it writes through `fixed`).
    #[cfg(test)]
    pub fn write(
        &self,
        sources: &EmailSources<'_>,
        meter: &WorkMeter,
        out: &mut String,
    ) -> Result<(), WorkExceeded> {
        self.write_object(sources, meter, out, None).map(|_| ())
    }

    /// Appends the object to `out`; with `holes`, the values of
    /// `mailboxIds` and `keywords` are left out and where they go noted
    /// (offsets from where the object starts). Returns the units charged.
    fn write_object(
        &self,
        sources: &EmailSources<'_>,
        meter: &WorkMeter,
        out: &mut String,
        mut holes: Option<&mut Vec<(usize, Hole)>>,
    ) -> Result<u64, WorkExceeded> {
        let meta = sources.meta;
        let start = out.len();
        // Charged for the whole object at once: a meter that cannot pay is
        // left spent, as when charged per property.
        let mut charged = self.units;
        if self.counts_fields {
            for (_, slot) in &self.slots {
                if let Slot::Header(header) = slot
                    && header.all
                {
                    charged += sources
                        .header
                        .map_or(0, |fields| fields.count(&header.name))
                        as u64;
                }
            }
        }
        meter.charge(charged)?;
        if self.slots.is_empty() {
            out.push('{');
        }
        for (key, slot) in &self.slots {
            out.push_str(key);
            match slot {
                Slot::Id => {
                    push_int(out, meta.id);
                    out.push('"');
                }
                Slot::BlobId => push_str(out, &meta.blob_id),
                Slot::ThreadId => {
                    push_int(out, meta.thread_id);
                    out.push('"');
                }
                Slot::MailboxIds | Slot::Keywords => {
                    let hole = match slot {
                        Slot::MailboxIds => Hole::MailboxIds,
                        _ => Hole::Keywords,
                    };
                    match holes.as_deref_mut() {
                        Some(holes) => holes.push((out.len() - start, hole)),
                        None => hole.write(out, meta),
                    }
                }
                Slot::Size => push_int(out, meta.size),
                Slot::ReceivedAt => push_utc_date(out, meta.received_at),
                Slot::Header(header) => match sources.header {
                    Some(fields) => out.push_str(&fields.value_text(header)),
                    None => out.push_str("null"),
                },
                Slot::HasAttachment => match sources.fast_view {
                    Some(view) => out.push_str(if view.has_attachment { "true" } else { "false" }),
                    None => out.push_str("null"),
                },
                Slot::Preview => match sources.fast_view {
                    Some(view) => push_str(out, &view.preview),
                    None => out.push_str("null"),
                },
            }
        }
        out.push('}');
        Ok(charged)
    }
}

/// The [`TextShape`]s of the property lists calls asked for, made once
/// each: a list view asks for the same properties on every call, and
/// making its shape (header properties resolved, keys written and sorted)
/// was a few percent of the call (issue 20). At most [`TEXT_SHAPES`]
/// lists of at most [`TEXT_SHAPE_OCTETS`] of keys each; one more starts the
/// memo afresh.
#[derive(Default)]
pub struct TextShapes {
    shapes: std::sync::RwLock<Vec<ShapeOf>>,
}

/// A property list and its shape (`None`: it does not render as text).
type ShapeOf = (Vec<EmailProperty>, Option<Arc<TextShape>>);

/// The most property lists [`TextShapes`] holds.
pub const TEXT_SHAPES: usize = 32;

/// The longest [`TextShape::name`] (its keys written out) of a list that
/// [`TextShapes`] keeps; a longer one is made for its call alone.
pub const TEXT_SHAPE_OCTETS: usize = 4096;

impl TextShapes {
    /// [`TextShape::new`] of `properties`, from the memo when it has them.
    pub fn of(&self, properties: &[EmailProperty]) -> Option<Arc<TextShape>> {
        // A poisoned lock held a consistent list (pushes and clears only).
        let held = self
            .shapes
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .find(|(listed, _)| listed.as_slice() == properties)
            .map(|(_, shape)| shape.clone());
        if let Some(shape) = held {
            return shape;
        }
        let shape = TextShape::new(properties).map(Arc::new);
        // A list of long names (`header:` properties are the client's) is
        // not kept: the memo stays a few hundred KiB at most.
        if shape
            .as_ref()
            .is_some_and(|shape| shape.name().len() > TEXT_SHAPE_OCTETS)
        {
            return shape;
        }
        let mut shapes = self
            .shapes
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if shapes.len() >= TEXT_SHAPES {
            shapes.clear();
        }
        shapes.push((properties.to_vec(), shape.clone()));
        shape
    }
}

/// A property a [`FixedText`] leaves out.
#[derive(Debug, Clone, Copy)]
enum Hole {
    MailboxIds,
    Keywords,
}

impl Hole {
    /// Appends the property's value of `meta`.
    fn write(self, out: &mut String, meta: &EmailMeta) {
        match self {
            Hole::MailboxIds => push_mailbox_ids(out, meta),
            Hole::Keywords => push_keywords(out, meta),
        }
    }
}

/// One email's object at one [`TextShape`] as JSON text, but for the
/// values of `mailboxIds` and `keywords`, which change (RFC 8621 §4.1.1)
/// and are written in from the email's metadata at each call
/// ([`FixedText::splice`]): everything else of it (metadata that never
/// changes, header values, the projection) is immutable, so the text can
/// be kept ([`ListTexts`]).
#[derive(Debug)]
pub struct FixedText {
    text: Box<str>,
    /// Octet offsets into `text` (ascending) where a value goes.
    holes: Box<[(usize, Hole)]>,
    /// The render work the object cost: charged again for each use.
    units: u64,
}

impl FixedText {
    /// Octets of its text (the values spliced in not counted).
    pub fn text_len(&self) -> usize {
        self.text.len()
    }

    /// The render work units one use of it costs ([`TextShape::fixed`]'s).
    pub fn units(&self) -> u64 {
        self.units
    }

    /// Its text when it has no holes (a shape of metadata alone,
    /// [`TextShape::kept_at`]): the whole object, for any metadata of the
    /// state it was kept at.
    pub fn whole(&self) -> Option<&str> {
        self.holes.is_empty().then_some(&*self.text)
    }

    /// Appends the object with `meta`'s `mailboxIds` and `keywords`
    /// written in: the octets of the whole object.
    pub fn splice(&self, meta: &EmailMeta, out: &mut String) {
        let mut from = 0;
        for &(at, hole) in &self.holes {
            out.push_str(&self.text[from..at]);
            hole.write(out, meta);
            from = at;
        }
        out.push_str(&self.text[from..]);
    }

    /// Octets it holds with its slot in a map, for a cache's weigher.
    fn weight(&self) -> usize {
        self.text.len() + 16 * self.holes.len() + 112
    }

    /// Its share of Email/get's bound on a render's work (`render_bound`:
    /// the units, and one per 256 octets of text), which decides whether
    /// a call renders inline or on the work pool, as the email's loaded
    /// sources would have.
    pub fn bound(&self) -> u64 {
        self.units + self.text.len() as u64 / 256
    }
}

/// `mailboxIds` as JSON: `{"m1":true,…}` in key order.
fn push_mailbox_ids(out: &mut String, meta: &EmailMeta) {
    let ids = &meta.mailbox_ids[..];
    // Ascending ids of as many digits each are in key order already (the
    // store keeps them ascending): nothing to sort.
    let digits = |id: i64| (id >= 0).then(|| id.checked_ilog10().unwrap_or(0));
    if ids.windows(2).all(|pair| {
        pair[0] < pair[1] && digits(pair[0]).is_some() && digits(pair[0]) == digits(pair[1])
    }) {
        out.push('{');
        for (position, id) in ids.iter().enumerate() {
            if position > 0 {
                out.push(',');
            }
            out.push_str("\"m");
            push_int(out, *id);
            out.push_str("\":true");
        }
        out.push('}');
        return;
    }
    let mut keys: Vec<String> = ids.iter().map(|id| format!("m{id}")).collect();
    keys.sort_unstable();
    keys.dedup();
    push_true_set(out, keys.iter().map(String::as_str));
}

/// `keywords` as JSON: lowercase, each once, in key order.
fn push_keywords(out: &mut String, meta: &EmailMeta) {
    let keywords = &meta.keywords;
    // Lowercase and strictly ascending already (as the store keeps them):
    // written as they are.
    if keywords
        .windows(2)
        .all(|pair| pair[0].as_bytes() < pair[1].as_bytes())
        && keywords
            .iter()
            .all(|keyword| !keyword.bytes().any(|b| b.is_ascii_uppercase()))
    {
        push_true_set(out, keywords.iter().map(String::as_str));
        return;
    }
    let mut keys: Vec<String> = keywords
        .iter()
        .map(|keyword| keyword.to_ascii_lowercase())
        .collect();
    keys.sort_unstable();
    keys.dedup();
    push_true_set(out, keys.iter().map(String::as_str));
}

/// The list view's texts kept per account (ADR 0003, issue 20): for each
/// account, the [`FixedText`]s of the emails its calls rendered at one
/// [`TextShape`] (at most [`LIST_TEXT_EMAILS`]), so that a call asking for
/// the same properties of emails already rendered looks up one entry and
/// copies their text, instead of two cache entries per email (header
/// fields, projection) and rendering them again. An account has two
/// entries: texts with holes, right at every Email state, and whole texts
/// of a shape of metadata alone, right at the one state they name
/// ([`TextShape::kept_at`]); so a client asking for both shapes keeps
/// both. Holds only immutable text (a text kept for a state is the one
/// that state's metadata gives); bounded in octets.
pub struct ListTexts {
    /// (account, whether the entry's texts are whole) → its entry.
    accounts: moka::future::Cache<(i64, bool), Arc<AccountTexts>>,
}

/// The most emails an account's entry of [`ListTexts`] holds: a few pages
/// of a list view; a call that would add more starts a new entry.
pub const LIST_TEXT_EMAILS: usize = 1_000;

/// One account's entry of [`ListTexts`].
struct AccountTexts {
    /// [`TextShape::name`] of the shape the texts were rendered at.
    shape: String,
    /// [`TextShape::kept_at`]: the Email state whole texts are right at.
    state: Option<i64>,
    texts: FxHashMap<i64, Arc<FixedText>>,
    weight: u32,
}

/// An account's kept texts at one shape ([`ListTexts::all_of`]).
pub struct KeptTexts(Arc<AccountTexts>);

impl KeptTexts {
    /// The kept text of email `id`.
    pub fn get(&self, id: i64) -> Option<&Arc<FixedText>> {
        self.0.texts.get(&id)
    }
}

impl ListTexts {
    /// An empty cache of at most `bytes` octets.
    pub fn new(bytes: u64) -> Self {
        Self {
            accounts: moka::future::Cache::builder()
                .max_capacity(bytes)
                .weigher(|_: &(i64, bool), entry: &Arc<AccountTexts>| entry.weight)
                .build(),
        }
    }

    /// The account's texts at `shape` and `state` ([`TextShape::kept_at`]),
    /// when its entry holds one for every one of `ids` (else `None`): the
    /// entry itself, shared, not a copy.
    pub async fn all_of(
        &self,
        account: i64,
        shape: &str,
        state: Option<i64>,
        mut ids: impl Iterator<Item = i64>,
    ) -> Option<KeptTexts> {
        let entry = self.accounts.get(&(account, state.is_some())).await?;
        (entry.shape == shape
            && entry.state == state
            && ids.all(|id| entry.texts.contains_key(&id)))
        .then_some(KeptTexts(entry))
    }

    /// The account's whole texts at `shape` ([`TextShape::kept_at`]) and
    /// the Email state they are right at, when its entry holds one for
    /// every one of `rows`: a call whose state is still that one needs
    /// nothing else (not even the metadata).
    pub async fn whole_of(
        &self,
        account: i64,
        shape: &str,
        mut rows: impl Iterator<Item = i64>,
    ) -> Option<(KeptTexts, i64)> {
        let entry = self.accounts.get(&(account, true)).await?;
        let state = entry.state?;
        let whole = |row| {
            entry
                .texts
                .get(&row)
                .is_some_and(|text| text.whole().is_some())
        };
        (entry.shape == shape && rows.all(whole)).then_some((KeptTexts(entry), state))
    }

    /// Adds `made` (texts rendered at `shape`, right at `state`) to the
    /// account's entry, or starts a new one when the shape or the state
    /// differs or the entry is full.
    pub async fn keep(
        &self,
        account: i64,
        shape: &str,
        state: Option<i64>,
        made: Vec<(i64, Arc<FixedText>)>,
    ) {
        if made.is_empty() || made.len() > LIST_TEXT_EMAILS {
            return;
        }
        let key = (account, state.is_some());
        // Two calls keeping at once: one's texts may be lost (a later call
        // renders them again), never mixed, as entries are immutable.
        let mut texts = match self.accounts.get(&key).await {
            Some(entry) if entry.shape == shape && entry.state == state => {
                let new = made
                    .iter()
                    .filter(|(id, _)| !entry.texts.contains_key(id))
                    .count();
                if new == 0 {
                    return;
                }
                match entry.texts.len() + new <= LIST_TEXT_EMAILS {
                    true => entry.texts.clone(),
                    false => FxHashMap::with_capacity_and_hasher(made.len(), Default::default()),
                }
            }
            _ => FxHashMap::with_capacity_and_hasher(made.len(), Default::default()),
        };
        texts.extend(made);
        let weight = texts.values().map(|text| text.weight()).sum::<usize>() + shape.len() + 256;
        let entry = AccountTexts {
            shape: shape.to_string(),
            state,
            texts,
            weight: weight.min(u32::MAX as usize) as u32,
        };
        self.accounts.insert(key, Arc::new(entry)).await;
    }

    /// Sets its gauges in `metrics` (`cache="list_text"`).
    pub async fn report(&self, metrics: &crate::metrics::Metrics) {
        metrics.report_cache("list_text", &self.accounts).await;
    }
}

/// Appends `{"a":true,"b":true}` for keys already in octet order.
fn push_true_set<'a>(out: &mut String, keys: impl Iterator<Item = &'a str>) {
    out.push('{');
    for (position, key) in keys.enumerate() {
        if position > 0 {
            out.push(',');
        }
        push_str(out, key);
        out.push_str(":true");
    }
    out.push('}');
}

/// Appends `text` as a JSON string, escaped as serde_json escapes it: `"`
/// and `\\` with a backslash, `\b \t \n \f \r` as such, the other control
/// characters as `\u00xx` (lowercase hex); everything else as it is.
fn push_str(out: &mut String, text: &str) {
    out.reserve(text.len() + 2);
    out.push('"');
    // Most text has nothing to escape: one pass without early exit (which
    // the compiler vectorizes), then one copy.
    let plain = !text.bytes().fold(false, |escape, byte| {
        escape | (byte < 0x20) | (byte == b'"') | (byte == b'\\')
    });
    if plain {
        out.push_str(text);
        out.push('"');
        return;
    }
    let bytes = text.as_bytes();
    let mut start = 0;
    for (at, &byte) in bytes.iter().enumerate() {
        let escape = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0x00..=0x1f => "",
            _ => continue,
        };
        // `at` is at an ASCII byte: a char boundary.
        out.push_str(&text[start..at]);
        if escape.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.push_str("\\u00");
            out.push(HEX[(byte >> 4) as usize] as char);
            out.push(HEX[(byte & 0xf) as usize] as char);
        } else {
            out.push_str(escape);
        }
        start = at + 1;
    }
    out.push_str(&text[start..]);
    out.push('"');
}

/// Appends an integer as JSON writes it.
fn push_int(out: &mut String, value: i64) {
    out.push_str(itoa::Buffer::new().format(value));
}

/// Appends a UTCDate (RFC 8620 §1.4) of Unix seconds as a JSON string,
/// `"2024-01-02T03:04:05Z"`: [`crate::jmap::args::utc_date`]'s text,
/// written without a format parser for the years 0–9999 (every date mail
/// carries), through it otherwise.
fn push_utc_date(out: &mut String, seconds: i64) {
    use chrono::{Datelike, Timelike};
    let date = chrono::DateTime::from_timestamp(seconds, 0).unwrap_or_default();
    if !(0..=9999).contains(&date.year()) {
        push_str(out, &crate::jmap::args::utc_date(seconds));
        return;
    }
    let digits = |out: &mut String, value: u32, width: u32| {
        for place in (0..width).rev() {
            out.push(char::from(b'0' + (value / 10u32.pow(place) % 10) as u8));
        }
    };
    out.push('"');
    digits(out, date.year() as u32, 4);
    for (separator, value) in [
        ('-', date.month()),
        ('-', date.day()),
        ('T', date.hour()),
        (':', date.minute()),
        (':', date.second()),
    ] {
        out.push(separator);
        digits(out, value, 2);
    }
    out.push_str("Z\"");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::FastView;

    #[test]
    fn dates_are_utc_date_text_in_and_out_of_the_four_digit_years() {
        for seconds in [
            0,
            1_704_164_645,
            -1,
            -62_167_219_200,
            -62_167_219_201,
            253_402_300_799,
            253_402_300_800,
            i64::MAX,
            i64::MIN,
        ] {
            let mut out = String::new();
            push_utc_date(&mut out, seconds);
            assert_eq!(
                out,
                serde_json::to_string(&crate::jmap::args::utc_date(seconds)).unwrap(),
                "{seconds}"
            );
        }
    }

    #[test]
    fn strings_escape_as_serde_json_escapes_them() {
        for text in [
            "plain",
            "quote \" and \\ back",
            "ctl \u{1}\n\t",
            "é 日本 \u{2028}",
        ] {
            let mut out = String::from("x");
            push_str(&mut out, text);
            assert_eq!(out, format!("x{}", serde_json::to_string(text).unwrap()));
        }
    }

    /// Parsed property names.
    fn properties(names: &[&str]) -> Vec<EmailProperty> {
        names
            .iter()
            .map(|name| EmailProperty::parse(name).unwrap())
            .collect()
    }

    fn meta(mailbox_ids: &[i64], keywords: &[&str]) -> EmailMeta {
        EmailMeta {
            id: 7,
            blob_id: "ab12".into(),
            thread_id: 3,
            size: 1234,
            received_at: 1_704_164_645,
            mailbox_ids: mailbox_ids.to_vec(),
            keywords: keywords.iter().map(|k| k.to_string()).collect(),
        }
    }

    /// What the `Value` tree writes for a set: a map, keys in octet order.
    fn tree_set(keys: impl Iterator<Item = String>) -> String {
        let map: serde_json::Map<String, serde_json::Value> = keys
            .map(|key| (key, serde_json::Value::Bool(true)))
            .collect();
        serde_json::to_string(&map).unwrap()
    }

    #[test]
    fn mailbox_ids_and_keywords_are_written_in_key_order_in_any_stored_order() {
        for ids in [
            &[5][..],
            &[][..],
            &[1, 2, 3],
            &[3, 10],
            &[10, 3],
            &[9, 10, 11],
            &[2, 2],
            &[-5, -3],
            &[0, 7],
        ] {
            let mut out = String::new();
            push_mailbox_ids(&mut out, &meta(ids, &[]));
            assert_eq!(
                out,
                tree_set(ids.iter().map(|id| format!("m{id}"))),
                "{ids:?}"
            );
        }
        for keywords in [
            &[][..],
            &["$seen"][..],
            &["$draft", "$seen"],
            &["$seen", "$draft"],
            &["$Seen", "Flagged"],
            &["a", "a"],
            &["$flagged", "$seen", "work"],
        ] {
            let mut out = String::new();
            push_keywords(&mut out, &meta(&[], keywords));
            assert_eq!(
                out,
                tree_set(keywords.iter().map(|k| k.to_ascii_lowercase())),
                "{keywords:?}"
            );
        }
    }

    #[test]
    fn an_object_written_whole_is_the_fixed_text_spliced() {
        let shape = TextShape::new(&properties(&[
            "id",
            "threadId",
            "mailboxIds",
            "keywords",
            "hasAttachment",
            "preview",
            "size",
            "receivedAt",
            "blobId",
        ]))
        .unwrap();
        let meta = meta(&[10, 3], &["$seen", "$Flagged"]);
        let view = FastView {
            preview: "a \"quoted\" preview".into(),
            has_attachment: true,
        };
        let sources = EmailSources {
            fast_view: Some(&view),
            ..EmailSources::metadata(&meta)
        };
        let meter = WorkMeter::new(100);
        let fixed = shape.fixed(&sources, &meter).unwrap();
        let mut spliced = String::from("[");
        fixed.splice(&meta, &mut spliced);
        let mut whole = String::from("[");
        shape.write(&sources, &meter, &mut whole).unwrap();
        assert_eq!(whole, spliced);
        assert_eq!(
            whole,
            "[{\"blobId\":\"ab12\",\"hasAttachment\":true,\"id\":\"e7\",\
             \"keywords\":{\"$flagged\":true,\"$seen\":true},\"mailboxIds\":{\"m10\":true,\"m3\":true},\
             \"preview\":\"a \\\"quoted\\\" preview\",\"receivedAt\":\"2024-01-02T03:04:05Z\",\
             \"size\":1234,\"threadId\":\"t3\"}"
        );
        // Both charged one unit per property.
        assert_eq!(meter.left(), 100 - 2 * 9);
    }

    #[test]
    fn a_shape_of_metadata_alone_keeps_whole_texts_for_one_state() {
        let meta = meta(&[10, 3], &["$seen"]);
        let sources = EmailSources::metadata(&meta);
        let metadata = TextShape::new(&properties(&["mailboxIds", "id", "keywords"])).unwrap();
        assert!(metadata.keeps_whole());
        assert_eq!(metadata.kept_at(42), Some(42));
        let meter = WorkMeter::new(10);
        let fixed = metadata.fixed(&sources, &meter).unwrap();
        let mut written = String::new();
        metadata.write(&sources, &meter, &mut written).unwrap();
        assert_eq!(
            fixed.whole(),
            Some(
                "{\"id\":\"e7\",\"keywords\":{\"$seen\":true},\"mailboxIds\":{\"m10\":true,\"m3\":true}}"
            )
        );
        assert_eq!(fixed.whole(), Some(written.as_str()));
        assert_eq!(meter.left(), 10 - 2 * 3);
        // A shape that reads the projection leaves holes, kept at every state.
        let list = TextShape::new(&properties(&["id", "keywords", "preview"])).unwrap();
        assert!(!list.keeps_whole());
        assert_eq!(list.kept_at(42), None);
        assert_eq!(list.fixed(&sources, &meter).unwrap().whole(), None);
        // No properties: an empty object, as the tree writes it.
        let empty = TextShape::new(&[]).unwrap();
        let mut out = String::new();
        empty.write(&sources, &meter, &mut out).unwrap();
        assert_eq!(out, "{}");
        // A meter that cannot pay the whole object is left spent.
        let poor = WorkMeter::new(2);
        assert!(metadata.write(&sources, &poor, &mut String::new()).is_err());
        assert_eq!(poor.left(), 0);
    }

    #[test]
    fn text_shapes_are_made_once_per_property_list_and_stay_right_past_the_bound() {
        let shapes = TextShapes::default();
        let list = properties(&["id", "subject", "mailboxIds"]);
        let first = shapes.of(&list).unwrap();
        assert!(Arc::ptr_eq(&first, &shapes.of(&list).unwrap()));
        assert_eq!(first.name(), TextShape::new(&list).unwrap().name());
        // A list that does not render as text is remembered as such.
        assert!(shapes.of(&properties(&["id", "textBody"])).is_none());
        // More lists than the memo holds: each still gets its own shape.
        for size in 1..=(TEXT_SHAPES + 4) {
            let list: Vec<EmailProperty> = (0..size)
                .map(|n| EmailProperty::parse(&format!("header:X-{n}")).unwrap())
                .collect();
            let shape = shapes.of(&list).unwrap();
            assert_eq!(shape.name(), TextShape::new(&list).unwrap().name());
        }
        assert!(shapes.shapes.read().unwrap().len() <= TEXT_SHAPES);
        // A list of long names is answered but not kept.
        let long = vec![EmailProperty::parse(&format!("header:X-{}", "a".repeat(5000))).unwrap()];
        let kept = shapes.shapes.read().unwrap().len();
        assert!(shapes.of(&long).is_some());
        assert_eq!(shapes.shapes.read().unwrap().len(), kept);
        assert_eq!(
            shapes.of(&list).unwrap().name(),
            "\"id\":\"mailboxIds\":\"subject\":"
        );
    }
}

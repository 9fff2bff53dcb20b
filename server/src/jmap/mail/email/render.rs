//! Rendering Email objects (RFC 8621 §4.1) from the sources the read-level
//! planner loaded. The renderer does no I/O: a source the plan did not load
//! renders as `null` (and trips a debug assertion, as it is a planner bug).
//!
//! Tested against golden files: `server/tests/fixtures/golden/NAME.eml` is
//! rendered with every property and compared with `NAME.json`; run the tests
//! with `UPDATE_GOLDEN=1` to rewrite the JSON files, then review each change
//! against the RFC before keeping it.

use std::cell::OnceCell;

use serde_json::{Map, Value};

use crate::jmap::args::utc_date;
use crate::jmap::ids;
use crate::mail::body::{self, BodyOctets, BodyPart, PartBodies};
use crate::mail::fast_view::FastView;
use crate::mail::header::{self, FieldList, HeaderFields};
use crate::mail::property::{BodyProperty, EmailProperty, HeaderProperty};
use crate::mail::read_level::BodyValueFlags;
use crate::mail::structure::BodyStructure;
use crate::mail::work::{WorkExceeded, WorkMeter};
use crate::store::EmailMeta;

/// What was loaded for one email. A source the plan did not ask for is `None`;
/// the renderer never reads anything itself.
pub struct EmailSources<'a> {
    /// The metadata row (always loaded): id, blobId, threadId, mailboxIds,
    /// keywords, size, receivedAt (RFC 8621 §4.1.1).
    pub meta: &'a EmailMeta,
    /// The stored header block split into fields (header read level).
    pub header: Option<&'a HeaderFields>,
    /// The projection row (fast-view read level).
    pub fast_view: Option<&'a FastView>,
    /// The stored part tree (structure read level).
    pub structure: Option<&'a BodyStructure>,
    /// The raw bodies of the parts whose values are asked (body-values level).
    pub bodies: Option<&'a PartBodies>,
    /// The whole message, parsed (full read level).
    pub full: Option<&'a mail_parser::Message<'a>>,
}

impl<'a> EmailSources<'a> {
    /// The sources of the metadata read level: the row alone. Another level
    /// names what it adds (`EmailSources { header, ..EmailSources::metadata(meta) }`).
    pub fn metadata(meta: &'a EmailMeta) -> Self {
        EmailSources {
            meta,
            header: None,
            fast_view: None,
            structure: None,
            bodies: None,
            full: None,
        }
    }
}

/// Email/get arguments that shape body values (RFC 8621 §4.2).
#[derive(Debug, Clone, Copy, Default)]
pub struct BodyOptions {
    /// `fetchTextBodyValues`, `fetchHTMLBodyValues`, `fetchAllBodyValues`.
    pub flags: BodyValueFlags,
    /// `maxBodyValueBytes`; 0 means no limit.
    pub max_body_value_bytes: usize,
}

/// Renders one Email object with exactly the requested properties: one key per
/// property, named by [`EmailProperty::name`]. Shapes follow RFC 8621 §4.1:
/// ids as in [`crate::jmap::ids`], `receivedAt` as a UTC RFC 3339 date
/// (`2024-01-02T03:04:05Z`), `size` in octets, header properties per
/// §4.1.2–§4.1.3 from `full` (else `header`), `preview`/`hasAttachment` from
/// the fast view (under `--fast-view off`, when only `full` is loaded, from
/// [`FastView::compute`], the projection's own code), body properties
/// (§4.1.4) from `full`, else from `structure` with body values from
/// `bodies`: the same tree, partition and decoding either way
/// ([`crate::mail::body`]); `bodyValues` is `{}` when no fetch flag is set.
///
/// Each property is charged to `meter` before it is rendered: one unit,
/// plus one per field for `headers` and for a `header:…:all` property (the
/// instances it renders). [`WorkExceeded`] when the meter cannot pay: the
/// render stops there.
pub fn render_email(
    properties: &[EmailProperty],
    body_properties: &[BodyProperty],
    options: &BodyOptions,
    sources: &EmailSources<'_>,
    meter: &WorkMeter,
) -> Result<Map<String, Value>, WorkExceeded> {
    let views = Views::default();
    let render = EmailRender {
        sources,
        body_properties,
        options,
        views: &views,
    };
    let mut object = Map::new();
    for property in properties {
        meter.charge(render.units(property))?;
        object.insert(property.name().to_string(), render.value(property));
    }
    Ok(object)
}

/// What a render of one email works out once and reads for several
/// properties: the part tree of the whole message and the partition of
/// either tree, the projection computed from the whole message, the
/// top-level header fields.
#[derive(Default)]
struct Views<'t> {
    tree: OnceCell<Option<BodyPart>>,
    partition: OnceCell<body::Partition<'t>>,
    fast_view: OnceCell<FastView>,
    top: OnceCell<Option<FieldList<'t>>>,
}

/// One email's render: its sources, what shapes its body properties, and
/// the views worked out from them as they are first needed.
struct EmailRender<'t, 'a> {
    sources: &'t EmailSources<'a>,
    body_properties: &'t [BodyProperty],
    options: &'t BodyOptions,
    views: &'t Views<'t>,
}

impl<'t, 'a: 't> EmailRender<'t, 'a> {
    /// The value of one property (RFC 8621 §4.1).
    fn value(&self, property: &EmailProperty) -> Value {
        use EmailProperty::*;
        let meta = self.sources.meta;
        match property {
            Id => Value::String(ids::email_id(meta.id)),
            BlobId => Value::String(meta.blob_id.clone()),
            ThreadId => Value::String(ids::thread_id(meta.thread_id)),
            MailboxIds => Value::Object(
                meta.mailbox_ids
                    .iter()
                    .map(|&id| (ids::mailbox_id(id), Value::Bool(true)))
                    .collect(),
            ),
            Keywords => Value::Object(
                meta.keywords
                    .iter()
                    .map(|keyword| (keyword.to_ascii_lowercase(), Value::Bool(true)))
                    .collect(),
            ),
            Size => Value::from(meta.size),
            ReceivedAt => Value::String(utc_date(meta.received_at)),
            // RFC 8621 §4.1.3: each is identical to a `header:…:as…` property
            // (`header_property` is `Some` for each of them).
            MessageId | InReplyTo | References | Sender | From | To | Cc | Bcc | ReplyTo
            | Subject | SentAt => property
                .header_property()
                .map_or(Value::Null, |header| self.header_property(&header)),
            Headers => self
                .top()
                .map_or_else(|| missing(property), |list| header::list_in(list.fields())),
            Header(header) => self.header_property(header),
            HasAttachment => self.fast_view().map_or_else(
                || missing(property),
                |view| Value::Bool(view.has_attachment),
            ),
            Preview => self.fast_view().map_or_else(
                || missing(property),
                |view| Value::String(view.preview.clone()),
            ),
            BodyValues if !flags_any(self.options.flags) => Value::Object(Map::new()),
            BodyValues => match self.body() {
                Some((Some(octets), tree, lists)) => body::body_values(
                    &body::value_parts(tree, lists, self.options.flags),
                    octets,
                    self.options.max_body_value_bytes,
                ),
                _ => missing(property),
            },
            BodyStructure => self.body().map_or_else(
                || missing(property),
                |(_, tree, _)| tree.render_structure(self.body_properties, &meta.blob_id),
            ),
            TextBody => self.list(property, |lists| &lists.text_body),
            HtmlBody => self.list(property, |lists| &lists.html_body),
            Attachments => self.list(property, |lists| &lists.attachments),
        }
    }

    /// The part tree, its partition and where part bodies come from: the
    /// whole message at the full level, else the stored tree and the ranges
    /// read.
    fn body(
        &self,
    ) -> Option<(
        Option<BodyOctets<'t>>,
        &'t BodyPart,
        &'t body::Partition<'t>,
    )> {
        let sources = self.sources;
        let (tree, octets) = match (sources.full, sources.structure) {
            (Some(full), _) => (
                self.views
                    .tree
                    .get_or_init(|| BodyPart::tree(full))
                    .as_ref()?,
                Some(BodyOctets::Message(&full.raw_message)),
            ),
            (None, Some(stored)) => (stored.root()?, sources.bodies.map(BodyOctets::Parts)),
            (None, None) => return None,
        };
        let lists = self
            .views
            .partition
            .get_or_init(|| match (sources.full, sources.structure) {
                (None, Some(stored)) => stored.partition(),
                _ => tree.partition(),
            });
        Some((octets, tree, lists))
    }

    /// The projection: loaded, else computed from the whole message.
    fn fast_view(&self) -> Option<&'t FastView> {
        match (self.sources.fast_view, self.sources.full) {
            (Some(view), _) => Some(view),
            (None, Some(full)) => {
                Some(self.views.fast_view.get_or_init(|| FastView::compute(full)))
            }
            (None, None) => None,
        }
    }

    /// The top-level header fields, split once per email (indexed by name
    /// when there are many).
    fn top(&self) -> Option<&'t FieldList<'t>> {
        self.views
            .top
            .get_or_init(|| match (self.sources.full, self.sources.header) {
                (Some(full), _) => Some(FieldList::new(header::top_level_fields(full))),
                (None, Some(fields)) => Some(FieldList::new(fields.fields())),
                (None, None) => None,
            })
            .as_ref()
    }

    /// A header property: memoized by the cached header fields at the
    /// header level, computed from the whole message at the full level.
    fn header_property(&self, property: &HeaderProperty) -> Value {
        match (self.sources.full, self.sources.header) {
            (None, Some(fields)) => fields.value(property),
            _ => render_header(self.top(), property),
        }
    }

    /// What a property costs: one unit, plus the field values it renders.
    fn units(&self, property: &EmailProperty) -> u64 {
        let fields = match property {
            EmailProperty::Header(header) if header.all => {
                match (self.sources.full, self.sources.header) {
                    (None, Some(fields)) => fields.count(&header.name),
                    _ => self.top().map_or(0, |list| list.count(&header.name)),
                }
            }
            EmailProperty::Headers => match (self.sources.full, self.sources.header) {
                (None, Some(fields)) => fields.len(),
                _ => self.top().map_or(0, |list| list.fields().len()),
            },
            _ => 0,
        };
        1 + fields as u64
    }

    /// `textBody`, `htmlBody` or `attachments`: the parts `pick` takes of
    /// the partition.
    fn list(
        &self,
        property: &EmailProperty,
        pick: for<'p> fn(&'p body::Partition<'p>) -> &'p [&'p BodyPart],
    ) -> Value {
        self.body().map_or_else(
            || missing(property),
            |(_, _, lists)| {
                Value::Array(
                    pick(lists)
                        .iter()
                        .map(|part| part.render(self.body_properties, &self.sources.meta.blob_id))
                        .collect(),
                )
            },
        )
    }
}

/// The value of a property whose source the planner did not load: a planner
/// bug, so it asserts in debug builds; `null` otherwise.
fn missing(property: &EmailProperty) -> Value {
    debug_assert!(false, "the read plan did not load the source of {property}");
    Value::Null
}

fn flags_any(flags: BodyValueFlags) -> bool {
    flags.fetch_text || flags.fetch_html || flags.fetch_all
}

/// A header property (RFC 8621 §4.1.2, §4.1.3) of the message's top-level
/// header, given its fields (`None`: the plan loaded no header).
fn render_header(fields: Option<&FieldList<'_>>, property: &HeaderProperty) -> Value {
    match fields {
        Some(fields) => fields.value(property),
        None => {
            debug_assert!(
                false,
                "the read plan did not load the header for {}",
                property.key
            );
            Value::Null
        }
    }
}

#[cfg(test)]
mod tests;

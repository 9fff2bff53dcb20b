//! Rendering Email objects (RFC 8621 §4.1) from the sources the read-level
//! planner loaded (being written).

use serde_json::{Map, Value};

use super::property::{BodyProperty, EmailProperty};
use crate::mail::fast_view::FastView;
use crate::mail::read_level::BodyValueFlags;
use crate::store::EmailMeta;

/// What was loaded for one email. A source the plan did not ask for is `None`;
/// the renderer never reads anything itself.
pub struct EmailSources<'a> {
    pub meta: &'a EmailMeta,
    /// The stored header block parsed without a body (header read level).
    pub header: Option<&'a mail_parser::Message<'a>>,
    /// The projection row (fast-view read level).
    pub fast_view: Option<&'a FastView>,
    /// The whole message, parsed (full read level).
    pub full: Option<&'a mail_parser::Message<'a>>,
}

/// Email/get arguments that shape body values (RFC 8621 §4.2).
#[derive(Debug, Clone, Copy, Default)]
pub struct BodyOptions {
    pub flags: BodyValueFlags,
    /// `maxBodyValueBytes`; 0 means no limit.
    pub max_body_value_bytes: usize,
}

/// Renders one Email object with exactly the requested properties.
pub fn render_email(
    properties: &[EmailProperty],
    body_properties: &[BodyProperty],
    options: &BodyOptions,
    sources: &EmailSources<'_>,
) -> Map<String, Value> {
    let _ = (body_properties, options);
    let mut object = Map::new();
    for property in properties {
        object.insert(property.name().to_string(), Value::Null);
    }
    let _ = sources;
    object
}

//! Body parts (RFC 8621 §4.1.4): bodyStructure, textBody, htmlBody,
//! attachments, bodyValues, and the decoded content of one part (being written).

/// The decoded content of one body part, for blob download.
#[derive(Debug, Clone)]
pub struct PartContent {
    pub bytes: Vec<u8>,
    /// Media type, e.g. `application/pdf`.
    pub content_type: String,
    /// File name, if the part has one.
    pub name: Option<String>,
}

/// Finds a part by its partId and returns its content after transfer decoding.
pub fn part_content(message: &mail_parser::Message<'_>, part_id: &str) -> Option<PartContent> {
    let _ = (message, part_id);
    None
}

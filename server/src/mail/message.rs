//! Parsing raw messages without ever failing. mail-parser returns `None` for
//! input in which it finds no header field (an empty message, a body without
//! a header, some binary garbage); such a message is still stored and served
//! (RFC 8621 requires nothing of its content), so it is read as RFC 5322
//! reads a message without header fields: one `text/plain` body (the RFC 2045
//! §5.2 default) made of every octet.
//!
//! Every reader of a whole message (ingest, the fast-view projection,
//! Email/get at the full level, blob download, `reproject`) goes through
//! here, so they all see the same structure. The header level reads only the
//! stored header block, split by [`crate::mail::header::HeaderFields`].

use std::borrow::Cow;

use mail_parser::{Encoding, Message, MessageParser, MessagePart, PartType};

/// Whether `bytes` open with an RFC 5322 header field (`name:` with a name
/// of printable ASCII other than `:`), as a message does; mail-parser
/// itself reads almost anything as a message. What Email/parse calls
/// `notParsable` and Email/import refuses as `invalidEmail` (RFC 8621 §4.8,
/// §4.9): a JMAP client gets a clear error for a blob that is no message,
/// while `fastview import` still stores such a file as one text part.
pub fn opens_with_header_field(bytes: &[u8]) -> bool {
    let line = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
    match line.iter().position(|b| *b == b':') {
        Some(colon) if colon > 0 => line[..colon].iter().all(|b| (33..=126).contains(b)),
        _ => false,
    }
}

/// Parses a whole message; a message mail-parser cannot read is one
/// `text/plain` part with no header field whose body is all of `raw`.
pub fn parse_message(raw: &[u8]) -> Message<'_> {
    contained(raw, |parser| parser.parse(raw)).unwrap_or_else(|| headerless(raw, 0))
}

/// Runs mail-parser, treating a panic inside it as "cannot read" (logged):
/// mail-parser 0.11.9 has a `debug_assert!` that fires on some malformed
/// multiparts ("Invalid part ID, could not find multipart", found by
/// `fuzz/`'s ingest target; it panics in builds with debug assertions), and
/// one bad message must not fail an import or an Email/get for every other
/// message.
fn contained<'x>(
    raw: &'x [u8],
    parse: impl FnOnce(&MessageParser) -> Option<Message<'x>>,
) -> Option<Message<'x>> {
    let parser = MessageParser::default();
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| parse(&parser))) {
        Ok(message) => message.filter(|message| !message.parts.is_empty()),
        Err(_) => {
            tracing::warn!(
                blob_id = %crate::blob::blob_id_of(raw),
                "mail-parser panicked; the message is read as one header-less part"
            );
            None
        }
    }
}

/// A message of one part without header fields whose body starts at `body`.
fn headerless(raw: &[u8], body: usize) -> Message<'_> {
    let end = raw.len().min(u32::MAX as usize);
    let body = body.min(end);
    Message {
        html_body: vec![0],
        text_body: vec![0],
        attachments: Vec::new(),
        parts: vec![MessagePart {
            headers: Vec::new(),
            is_encoding_problem: false,
            body: PartType::Text(String::from_utf8_lossy(&raw[body..end])),
            encoding: Encoding::None,
            offset_header: 0,
            offset_body: body as u32,
            offset_end: end as u32,
        }],
        raw_message: Cow::Borrowed(raw),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mail::header::HeaderFields;

    #[test]
    fn unreadable_messages_become_one_headerless_text_part() {
        for raw in [
            b"".as_slice(),
            b"\r\n",
            b"\r\n\r\nbody only",
            b"\x00\xff\xfe binary",
        ] {
            let message = parse_message(raw);
            assert_eq!(message.parts.len(), 1, "{raw:?}");
            let root = &message.parts[0];
            assert!(root.offset_body as usize <= raw.len());
            assert_eq!(root.offset_end as usize, raw.len());
            let header = HeaderFields::parse(raw[..root.offset_body as usize].to_vec());
            assert!(header.fields().is_empty() || !root.headers.is_empty());
        }
        let message = parse_message(b"\r\n\r\nbody only");
        assert_eq!(
            crate::mail::fast_view::FastView::compute(&message).preview,
            "body only"
        );
    }

    /// Regression (fuzz/ ingest target): mail-parser panics on this message
    /// where debug assertions are on; it is read and prepared all the same.
    #[test]
    fn a_message_mail_parser_panics_on_is_still_read() {
        let raw = include_bytes!("../../tests/fixtures/fuzz/mail_parser_invalid_part_id.eml");
        let message = parse_message(raw);
        assert!(!message.parts.is_empty());
        let prepared = crate::mail::ingest::prepare(raw.to_vec(), vec![1], Vec::new(), |_| 0);
        assert_eq!(prepared.email.size as usize, raw.len());
        let header = HeaderFields::parse(prepared.email.header_block);
        assert_eq!(header.fields().len(), message.parts[0].headers.len());
    }

    #[test]
    fn readable_messages_parse_as_mail_parser_parses_them() {
        let raw = b"Subject: hi\r\n\r\nbody";
        let message = parse_message(raw);
        assert_eq!(message.subject(), Some("hi"));
        assert_eq!(message.parts[0].offset_body, 15);
        let header = HeaderFields::parse(raw[..15].to_vec());
        assert_eq!(header.fields()[0].raw_value(), " hi");
    }
}

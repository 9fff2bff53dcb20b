//! The fast-view projection (ADR 0003): `preview` and `hasAttachment`,
//! computed once from the parsed message at ingest and stored beside the
//! metadata, so listing mail never parses a body.
//!
//! Both values come from this module alone, whether they are computed at
//! ingest, on a projection miss, by `fastview reproject`, or at read time under
//! `--fast-view off`; the projection and a full read can therefore never disagree.

use mail_parser::Message;

use super::body::BodyReading;

/// Maximum length of `preview` in characters (RFC 8621 §4.1.4: "up to 256 characters").
pub const PREVIEW_CHARS: usize = 256;

/// One projection row; the type is the store's row, computed here.
pub use crate::store::FastView;

impl FastView {
    /// Computes the projection of a fully parsed message.
    pub fn compute(message: &Message<'_>) -> Self {
        Self::of_reading(&BodyReading::of(message))
    }

    /// The projection of a body already read (ingest reads it once for this
    /// and the full-text index).
    pub fn of_reading(reading: &BodyReading) -> Self {
        Self {
            preview: preview_of(&reading.texts),
            has_attachment: reading.has_attachment,
        }
    }
}

/// `preview` (RFC 8621 §4.1.4) of the `textBody` texts
/// ([`BodyReading::texts`]: as bodyValues decodes them, HTML parts converted
/// to text): whitespace runs collapsed to one space, trimmed, cut to
/// [`PREVIEW_CHARS`] characters on a character boundary.
fn preview_of(texts: &[String]) -> String {
    let mut out = String::new();
    let mut chars = 0;
    let mut pending_space = false;
    for text in texts {
        for ch in text.chars() {
            if ch.is_whitespace() || ch.is_control() {
                pending_space = !out.is_empty();
                continue;
            }
            if pending_space {
                if chars + 1 >= PREVIEW_CHARS {
                    return out;
                }
                out.push(' ');
                chars += 1;
                pending_space = false;
            }
            out.push(ch);
            chars += 1;
            if chars == PREVIEW_CHARS {
                return out;
            }
        }
        pending_space = !out.is_empty();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use mail_parser::MessageParser;

    fn fast_view_of(raw: &str) -> FastView {
        FastView::compute(
            &MessageParser::default()
                .parse(raw.as_bytes())
                .expect("parses"),
        )
    }

    #[test]
    fn preview_collapses_whitespace_and_counts_characters() {
        let view = fast_view_of("Subject: x\r\n\r\n  Hello,\r\n\r\n\tworld  again \r\n");
        assert_eq!(view.preview, "Hello, world again");
        assert!(!view.has_attachment);

        let body = "é".repeat(300);
        let view = fast_view_of(&format!(
            "Subject: x\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n{body}"
        ));
        assert_eq!(view.preview.chars().count(), PREVIEW_CHARS);
        assert!(view.preview.chars().all(|c| c == 'é'));
    }

    #[test]
    fn html_only_mail_previews_its_text_and_attachments_are_seen() {
        let view = fast_view_of(
            "Content-Type: text/html\r\n\r\n<html><body><p>Hi <b>there</b></p><p>Bye</p></body></html>",
        );
        assert_eq!(view.preview, "Hi there Bye");

        let view = fast_view_of(concat!(
            "Content-Type: multipart/mixed; boundary=\"b\"\r\n\r\n",
            "--b\r\nContent-Type: text/plain\r\n\r\nSee attached.\r\n",
            "--b\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename=a.pdf\r\n",
            "Content-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQK\r\n--b--\r\n"
        ));
        assert_eq!(view.preview, "See attached.");
        assert!(view.has_attachment);
    }
}

//! MIME composition: a typed description of a message ([`Message`]: header
//! fields in the RFC 8621 §4.1.2 parsed forms, and a tree of [`Part`]s) →
//! its RFC 5322 / MIME octets. What Email/set `create` (RFC 8621 §4.6)
//! stores; the JMAP side (`jmap/mail/email/create.rs`) decides what to build
//! from the JSON, this module only how to write it.
//!
//! The writing is the `mail-builder` crate's: RFC 2047 encoded words for
//! non-ASCII header text and display names, folding at 78 characters (RFC
//! 5322 §2.1.1, §2.2.3), RFC 2231 parameters for non-ASCII file names, a
//! unique boundary per multipart, and per text part the cheapest of `7bit`,
//! `quoted-printable` and `base64` (RFC 2045 §6); non-text parts are base64.
//! Text from body values is written as UTF-8 (`charset=utf-8`) with CRLF line
//! ends (RFC 2046 §4.1.1). Added here: `Date` and `Message-ID` when the
//! description has none (RFC 8621 §4.6, RFC 5322 §3.6.1, §3.6.4),
//! `MIME-Version: 1.0` (RFC 2045 §4), the `type` parameter of
//! `multipart/related` (RFC 2387 §3.1), and a final check that no line is
//! longer than 998 octets (RFC 5322 §2.1.1).

use chrono::{DateTime, FixedOffset, Utc};
use mail_builder::headers::Header as _;
use mail_builder::headers::HeaderType;
use mail_builder::headers::address::Address as BuilderAddress;
use mail_builder::headers::content_type::ContentType;
use mail_builder::headers::message_id::MessageId;
use mail_builder::headers::raw::Raw;
use mail_builder::headers::text::Text;
use mail_builder::headers::url::URL;
use mail_builder::mime::{BodyPart as BuilderBody, MimePart};

/// The longest line RFC 5322 §2.1.1 allows, without its CRLF.
pub const MAX_LINE_OCTETS: usize = 998;

/// A message to write: its top-level header fields, in order, and its body.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub headers: Vec<Field>,
    pub body: Part,
}

/// One header field instance: its name as it is to be written (a known
/// field's name is written in its usual spelling, e.g. `Message-ID`) and its
/// value in one of the RFC 8621 §4.1.2 forms.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub name: String,
    pub value: FieldValue,
}

/// A header field value in an RFC 8621 §4.1.2 form.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldValue {
    /// §4.1.2.1: written as given, only folded (the caller checked that any
    /// CR or LF in it is folding).
    Raw(String),
    /// §4.1.2.2: unstructured text, RFC 2047 encoded where needed.
    Text(String),
    /// §4.1.2.3: a list of mailboxes.
    Addresses(Vec<Mailbox>),
    /// §4.1.2.4: groups (a group without a name is its mailboxes, ungrouped).
    GroupedAddresses(Vec<Group>),
    /// §4.1.2.5: message ids without angle brackets.
    MessageIds(Vec<String>),
    /// §4.1.2.6: written as RFC 5322 §3.3 date-time with its own offset.
    Date(DateTime<FixedOffset>),
    /// §4.1.2.7: URLs, each written in angle brackets.
    Urls(Vec<String>),
}

/// An RFC 8621 §4.1.2.3 EmailAddress: a display name (RFC 2047 encoded when
/// not ASCII) and an addr-spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mailbox {
    pub name: Option<String>,
    pub email: String,
}

/// An RFC 8621 §4.1.2.4 EmailAddressGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub name: Option<String>,
    pub addresses: Vec<Mailbox>,
}

/// One MIME entity: what its `Content-*` fields say (RFC 8621 §4.1.4 names)
/// and its content.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    /// `type`: a lowercase media type, e.g. `text/plain`, `multipart/mixed`.
    pub media_type: String,
    /// `charset` of a [`Content::Bytes`] text part; a [`Content::Text`] part
    /// is always `utf-8`, a multipart has none.
    pub charset: Option<String>,
    /// `disposition`, lowercase (`inline`, `attachment`).
    pub disposition: Option<String>,
    /// `name`: the Content-Disposition `filename` (when there is a
    /// disposition) and the Content-Type `name` parameter.
    pub name: Option<String>,
    /// `cid`, without angle brackets.
    pub cid: Option<String>,
    /// `language` tags (Content-Language).
    pub language: Vec<String>,
    /// `location` (Content-Location).
    pub location: Option<String>,
    /// Other header fields of the part (never Content-Transfer-Encoding:
    /// the writer chooses it).
    pub headers: Vec<Field>,
    pub content: Content,
}

/// The content of a [`Part`].
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    /// Text (a body value), written as UTF-8 with CRLF line ends.
    Text(String),
    /// Octets (a blob), written as they are after transfer decoding.
    Bytes(Vec<u8>),
    /// The children of a `multipart/*` part.
    Multipart(Vec<Part>),
}

impl Part {
    /// A part with `media_type` and `content` and no other field.
    pub fn new(media_type: impl Into<String>, content: Content) -> Self {
        Part {
            media_type: media_type.into(),
            charset: None,
            disposition: None,
            name: None,
            cid: None,
            language: Vec::new(),
            location: None,
            headers: Vec::new(),
            content,
        }
    }

    /// A `multipart/{subtype}` part of `parts`.
    pub fn multipart(subtype: &str, parts: Vec<Part>) -> Self {
        Part::new(format!("multipart/{subtype}"), Content::Multipart(parts))
    }

    /// An inline part with a Content-ID: what an HTML body refers to with a
    /// `cid:` URL (RFC 2392), so it belongs in its `multipart/related`.
    fn is_related_to_html(&self) -> bool {
        self.cid.is_some() && self.disposition.as_deref() == Some("inline")
    }
}

/// The body made from RFC 8621 §4.6 `textBody`, `htmlBody` and `attachments`,
/// in the structure §4.1.4's partition reads back as the same three lists:
/// `multipart/alternative` of the text and HTML parts when both are given;
/// the HTML part in a `multipart/related` (RFC 2387) with the inline parts
/// that have a `cid` when there is an HTML part; and a `multipart/mixed` of
/// that body and the other attachments when there are any. No part at all
/// is an empty `text/plain` part.
pub fn body_from_lists(text: Option<Part>, html: Option<Part>, attachments: Vec<Part>) -> Part {
    let (related, mixed): (Vec<Part>, Vec<Part>) = if html.is_some() {
        attachments.into_iter().partition(Part::is_related_to_html)
    } else {
        (Vec::new(), attachments)
    };
    let html = html.map(|html| {
        if related.is_empty() {
            html
        } else {
            Part::multipart("related", std::iter::once(html).chain(related).collect())
        }
    });
    let body = match (text, html) {
        (Some(text), Some(html)) => Some(Part::multipart("alternative", vec![text, html])),
        (text, html) => text.or(html),
    };
    match (body, mixed.is_empty()) {
        (Some(body), true) => body,
        (None, true) => Part::new("text/plain", Content::Text(String::new())),
        (body, false) => Part::multipart("mixed", body.into_iter().chain(mixed).collect()),
    }
}

/// Why a message could not be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ComposeError {
    /// A line of the written message is over [`MAX_LINE_OCTETS`] (a value
    /// with no white space to fold at): the field it is in, lowercase.
    #[error("a line of the {field} header field is longer than 998 octets")]
    LineTooLong { field: String },
}

/// Writes `message` as RFC 5322 / MIME octets with CRLF line ends: its
/// header fields in order, `Message-ID` and `Date` (`now`) when it has none,
/// `MIME-Version: 1.0`, then the body's entity. The Message-ID generated is
/// `<random@domain>` with the domain of the first From address (RFC 5322
/// §3.6.4 suggests a domain of the generating host; the sender's is what
/// mail clients use), `localhost` when there is none.
pub fn compose(message: Message, now: DateTime<Utc>) -> Result<Vec<u8>, ComposeError> {
    let has = |name: &str| {
        message
            .headers
            .iter()
            .any(|field| field.name.eq_ignore_ascii_case(name))
    };
    let mut generated = Vec::new();
    if !has("message-id") {
        let id = generated_message_id(&message.headers);
        generated.push(("Message-ID", HeaderType::from(MessageId::new(id))));
    }
    if !has("date") {
        generated.push(("Date", Raw::new(now.to_rfc2822()).into()));
    }
    if !has("mime-version") {
        generated.push(("MIME-Version", Raw::new("1.0").into()));
    }
    let mut output = Vec::with_capacity(4096);
    for field in message.headers {
        write_field(&field.name, &builder_value(field.value), &mut output);
    }
    for (name, value) in &generated {
        write_field(name, value, &mut output);
    }
    builder_part(message.body).write_part(&mut output);
    check_line_lengths(&output)?;
    Ok(output)
}

/// `Name: value` with the value folded from the column after the colon.
fn write_field(name: &str, value: &HeaderType<'_>, output: &mut Vec<u8>) {
    output.extend_from_slice(name.as_bytes());
    output.extend_from_slice(b": ");
    value.write_header(output, name.len() + 2);
}

/// A Message-ID right side: the first From address's domain when it is a
/// plain dot-atom, else `localhost`; the left side 128 random bits in hex.
fn generated_message_id(headers: &[Field]) -> String {
    let domain = headers
        .iter()
        .filter(|field| field.name.eq_ignore_ascii_case("from"))
        .find_map(|field| match &field.value {
            FieldValue::Addresses(list) => list.first().map(|m| m.email.clone()),
            FieldValue::GroupedAddresses(groups) => groups
                .iter()
                .flat_map(|g| &g.addresses)
                .next()
                .map(|m| m.email.clone()),
            _ => None,
        })
        .and_then(|email| email.rsplit_once('@').map(|(_, d)| d.to_ascii_lowercase()))
        .filter(|domain| {
            !domain.is_empty()
                && domain
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
        })
        .unwrap_or_else(|| "localhost".to_string());
    format!("{:032x}@{domain}", rand::random::<u128>())
}

/// The mail-builder entity of a part: Content-Type with its parameters,
/// then Content-Disposition, Content-ID, Content-Language,
/// Content-Location and the other fields; the transfer encoding is
/// mail-builder's choice.
fn builder_part(part: Part) -> MimePart<'static> {
    let mut content_type = ContentType::new(part.media_type.clone());
    if matches!(part.content, Content::Text(_)) {
        content_type = content_type.attribute("charset", "utf-8");
    } else if let Some(charset) = part.charset {
        content_type = content_type.attribute("charset", charset);
    }
    if let Content::Multipart(children) = &part.content
        && part.media_type == "multipart/related"
        && let Some(first) = children.first()
    {
        content_type = content_type.attribute("type", first.media_type.clone());
    }
    if let Some(name) = &part.name {
        content_type = content_type.attribute("name", name.clone());
    }
    let contents = match part.content {
        Content::Text(text) => BuilderBody::Text(crlf(&text).into()),
        Content::Bytes(bytes) => BuilderBody::Binary(bytes.into()),
        Content::Multipart(children) => {
            BuilderBody::Multipart(children.into_iter().map(builder_part).collect())
        }
    };
    let mut mime = MimePart::raw(contents).header("Content-Type", content_type);
    if let Some(disposition) = part.disposition {
        let mut value = ContentType::new(disposition);
        if let Some(name) = part.name {
            value = value.attribute("filename", name);
        }
        mime = mime.header("Content-Disposition", value);
    }
    if let Some(cid) = part.cid {
        mime = mime.header("Content-ID", MessageId::new(cid));
    }
    if !part.language.is_empty() {
        mime = mime.header("Content-Language", Raw::new(part.language.join(", ")));
    }
    if let Some(location) = part.location {
        mime = mime.header("Content-Location", Raw::new(location));
    }
    for field in part.headers {
        let value = builder_value(field.value);
        mime = mime.header(field.name, value);
    }
    mime
}

/// The mail-builder value of a field: a Raw value without the white space
/// after the colon (the writer puts one space there).
fn builder_value(value: FieldValue) -> HeaderType<'static> {
    match value {
        FieldValue::Raw(raw) => Raw::new(raw.trim_start_matches([' ', '\t']).to_string()).into(),
        FieldValue::Text(text) => Text::new(text).into(),
        FieldValue::Date(date) => Raw::new(date.to_rfc2822()).into(),
        FieldValue::MessageIds(ids) => MessageId::new_list(ids.into_iter()).into(),
        FieldValue::Urls(urls) => URL::new_list(urls.into_iter()).into(),
        FieldValue::Addresses(list) => BuilderAddress::new_list(
            list.into_iter()
                .map(|m| BuilderAddress::new_address(m.name.filter(|n| !n.is_empty()), m.email))
                .collect(),
        )
        .into(),
        FieldValue::GroupedAddresses(groups) => BuilderAddress::new_list(
            groups
                .into_iter()
                .flat_map(|group| {
                    let members: Vec<BuilderAddress<'static>> = group
                        .addresses
                        .into_iter()
                        .map(|m| {
                            BuilderAddress::new_address(m.name.filter(|n| !n.is_empty()), m.email)
                        })
                        .collect();
                    match group.name {
                        Some(name) => vec![BuilderAddress::new_group(Some(name), members)],
                        None => members,
                    }
                })
                .collect(),
        )
        .into(),
    }
}

/// Text with every line end as CRLF (RFC 2046 §4.1.1): LF, CR and CRLF alike.
fn crlf(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 32);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => {
                chars.next_if_eq(&'\n');
                out.push_str("\r\n");
            }
            '\n' => out.push_str("\r\n"),
            c => out.push(c),
        }
    }
    out
}

/// Every line at most [`MAX_LINE_OCTETS`] (RFC 5322 §2.1.1); a longer one is
/// blamed on the header field it continues.
fn check_line_lengths(output: &[u8]) -> Result<(), ComposeError> {
    let mut field = String::new();
    for line in output.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if let Some(colon) = line.iter().position(|&b| b == b':')
            && !line.starts_with(b" ")
            && !line.starts_with(b"\t")
        {
            field = String::from_utf8_lossy(&line[..colon]).to_ascii_lowercase();
        }
        if line.len() > MAX_LINE_OCTETS {
            return Err(ComposeError::LineTooLong { field });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use mail_parser::{MessageParser, MimeHeaders};

    use super::*;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR fake image octets \xff\xfe";
    const PDF: &[u8] = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\nbinary \0 octets\n";

    fn mailbox(name: Option<&str>, email: &str) -> Mailbox {
        Mailbox {
            name: name.map(str::to_string),
            email: email.to_string(),
        }
    }

    fn field(name: &str, value: FieldValue) -> Field {
        Field {
            name: name.to_string(),
            value,
        }
    }

    fn attachment(media_type: &str, bytes: &[u8], disposition: &str, name: &str) -> Part {
        Part {
            disposition: Some(disposition.to_string()),
            name: Some(name.to_string()),
            ..Part::new(media_type, Content::Bytes(bytes.to_vec()))
        }
    }

    /// A draft with every kind of part: text, HTML, an inline image the
    /// HTML refers to by cid, and an attachment; non-ASCII subject and names.
    fn full_draft() -> Message {
        let image = Part {
            cid: Some("logo@example.com".into()),
            ..attachment("image/png", PNG, "inline", "logo.png")
        };
        let body = body_from_lists(
            Some(Part::new(
                "text/plain",
                Content::Text("Grüße aus Köln,\nJosé\n".into()),
            )),
            Some(Part::new(
                "text/html",
                Content::Text("<p>Grüße <img src=\"cid:logo@example.com\"></p>\n".into()),
            )),
            vec![
                image,
                attachment("application/pdf", PDF, "attachment", "Résumé 2024.pdf"),
            ],
        );
        Message {
            headers: vec![
                field(
                    "From",
                    FieldValue::Addresses(vec![mailbox(Some("José Müller"), "jose@example.com")]),
                ),
                field(
                    "To",
                    FieldValue::Addresses(vec![
                        mailbox(Some("Ann Example"), "ann@example.org"),
                        mailbox(None, "bob@example.org"),
                    ]),
                ),
                field("Subject", FieldValue::Text("Café ☕ plans for Köln".into())),
            ],
            body,
        }
    }

    fn composed(message: Message) -> Vec<u8> {
        compose(message, Utc::now()).expect("composes")
    }

    #[test]
    fn a_full_draft_parses_back_to_its_parts() {
        let raw = composed(full_draft());
        let text = String::from_utf8(raw.clone()).expect("7-bit clean output");
        let parsed = MessageParser::default().parse(&raw).expect("parses");
        // Structure, depth first.
        let types: Vec<String> = parsed
            .parts
            .iter()
            .map(|part| {
                let ct = part.content_type().expect("every part has a Content-Type");
                format!("{}/{}", ct.ctype(), ct.subtype().unwrap_or_default())
            })
            .collect();
        assert_eq!(
            types,
            [
                "multipart/mixed",
                "multipart/alternative",
                "text/plain",
                "multipart/related",
                "text/html",
                "image/png",
                "application/pdf"
            ]
        );
        let part = |index: usize| &parsed.parts[index];
        // Text: utf-8, decoded content with CRLF line ends.
        for index in [2, 4] {
            let ct = part(index).content_type().unwrap();
            assert_eq!(ct.attribute("charset"), Some("utf-8"));
        }
        assert_eq!(part(2).text_contents(), Some("Grüße aus Köln,\r\nJosé\r\n"));
        assert_eq!(
            part(4).text_contents(),
            Some("<p>Grüße <img src=\"cid:logo@example.com\"></p>\r\n")
        );
        // The related part names its root's type (RFC 2387).
        assert_eq!(
            part(3).content_type().unwrap().attribute("type"),
            Some("text/html")
        );
        // Inline image: cid, disposition, octets.
        assert_eq!(part(5).content_id(), Some("logo@example.com"));
        assert_eq!(part(5).content_disposition().unwrap().ctype(), "inline");
        assert_eq!(part(5).contents(), PNG);
        // Attachment: RFC 2231 file name, octets, base64.
        assert_eq!(part(6).attachment_name(), Some("Résumé 2024.pdf"));
        assert_eq!(part(6).content_disposition().unwrap().ctype(), "attachment");
        assert_eq!(part(6).contents(), PDF);
        assert_eq!(part(6).content_transfer_encoding(), Some("base64"));
        // Headers: encoded words for non-ASCII, decoded back.
        assert_eq!(parsed.subject(), Some("Café ☕ plans for Köln"));
        let from = parsed.from().unwrap().first().unwrap();
        assert_eq!(from.name(), Some("José Müller"));
        assert_eq!(from.address(), Some("jose@example.com"));
        assert_eq!(parsed.to().unwrap().iter().count(), 2);
        let header_line = |name: &str| {
            text.lines()
                .find(|line| line.starts_with(name))
                .unwrap_or_else(|| panic!("no {name} in {text}"))
        };
        assert!(header_line("Subject: ").contains("=?utf-8?"), "{text}");
        assert!(header_line("From: ").contains("=?utf-8?"), "{text}");
        assert!(
            header_line("From: ").ends_with("<jose@example.com>"),
            "{text}"
        );
        assert_eq!(header_line("MIME-Version: "), "MIME-Version: 1.0");
        assert!(header_line("Date: ").len() > "Date: ".len());
        assert!(
            parsed.message_id().unwrap().ends_with("@example.com"),
            "{text}"
        );
        // Three multiparts, three distinct boundaries.
        let boundaries: HashSet<&str> = parsed
            .parts
            .iter()
            .filter_map(|p| p.content_type().and_then(|ct| ct.attribute("boundary")))
            .collect();
        assert_eq!(boundaries.len(), 3, "{text}");
        // Lines: CRLF only, none over 78 characters here.
        assert!(!text.replace("\r\n", "").contains('\n'), "bare LF: {text}");
        for line in text.split("\r\n") {
            assert!(line.len() <= 78, "{line:?}");
        }
    }

    #[test]
    fn transfer_encoding_is_chosen_by_content() {
        let encoding_of = |content: Content, media_type: &str| {
            let raw = composed(Message {
                headers: Vec::new(),
                body: Part::new(media_type, content),
            });
            let parsed = MessageParser::default().parse(&raw).unwrap();
            parsed.parts[0]
                .content_transfer_encoding()
                .map(str::to_string)
        };
        let ascii = Content::Text("plain ASCII\nlines\n".into());
        assert_eq!(encoding_of(ascii, "text/plain").as_deref(), Some("7bit"));
        let latin = Content::Text("Grüße, a mostly ASCII line with one umlaut\n".into());
        assert_eq!(
            encoding_of(latin, "text/plain").as_deref(),
            Some("quoted-printable")
        );
        let long_line = Content::Text("word ".repeat(400));
        assert_eq!(
            encoding_of(long_line, "text/plain").as_deref(),
            Some("quoted-printable")
        );
        let binary = Content::Bytes(PNG.to_vec());
        assert_eq!(encoding_of(binary, "image/png").as_deref(), Some("base64"));
    }

    #[test]
    fn bodies_from_lists_take_the_rfc_8621_shapes() {
        let shape = |part: &Part| -> String {
            fn walk(part: &Part, out: &mut String) {
                out.push_str(&part.media_type);
                if let Content::Multipart(children) = &part.content {
                    out.push('[');
                    for (i, child) in children.iter().enumerate() {
                        if i > 0 {
                            out.push(' ');
                        }
                        walk(child, out);
                    }
                    out.push(']');
                }
            }
            let mut out = String::new();
            walk(part, &mut out);
            out
        };
        let text = || Some(Part::new("text/plain", Content::Text("t".into())));
        let html = || Some(Part::new("text/html", Content::Text("h".into())));
        let inline = || Part {
            cid: Some("c@x".into()),
            ..attachment("image/png", PNG, "inline", "i.png")
        };
        let file = || attachment("application/pdf", PDF, "attachment", "f.pdf");
        let check = |body: Part, expected: &str| assert_eq!(shape(&body), expected);
        check(body_from_lists(text(), None, vec![]), "text/plain");
        check(body_from_lists(None, html(), vec![]), "text/html");
        check(body_from_lists(None, None, vec![]), "text/plain");
        check(
            body_from_lists(text(), html(), vec![]),
            "multipart/alternative[text/plain text/html]",
        );
        check(
            body_from_lists(None, html(), vec![inline()]),
            "multipart/related[text/html image/png]",
        );
        // No HTML to refer to it: an inline image is one more part of the mix.
        check(
            body_from_lists(text(), None, vec![inline(), file()]),
            "multipart/mixed[text/plain image/png application/pdf]",
        );
        check(
            body_from_lists(None, None, vec![file()]),
            "multipart/mixed[application/pdf]",
        );
    }

    #[test]
    fn date_and_message_id_given_are_kept_and_not_added_twice() {
        let date = DateTime::parse_from_rfc3339("2024-05-01T10:00:00+02:00").unwrap();
        let raw = composed(Message {
            headers: vec![
                field("Date", FieldValue::Date(date)),
                field(
                    "Message-ID",
                    FieldValue::MessageIds(vec!["m1@example.com".into()]),
                ),
            ],
            body: Part::new("text/plain", Content::Text("x".into())),
        });
        let text = String::from_utf8(raw).unwrap();
        assert_eq!(text.matches("Date: ").count(), 1, "{text}");
        assert_eq!(text.matches("Message-ID: ").count(), 1, "{text}");
        assert!(
            text.contains("Date: Wed, 1 May 2024 10:00:00 +0200\r\n"),
            "{text}"
        );
        assert!(text.contains("Message-ID: <m1@example.com>\r\n"), "{text}");
    }

    #[test]
    fn long_header_text_is_folded_and_an_unfoldable_line_is_refused() {
        let subject = "many words ".repeat(60);
        let raw = composed(Message {
            headers: vec![field("Subject", FieldValue::Text(subject.clone()))],
            body: Part::new("text/plain", Content::Text(String::new())),
        });
        let text = String::from_utf8(raw.clone()).unwrap();
        for line in text.split("\r\n") {
            assert!(line.len() <= 78, "{line:?}");
        }
        let parsed = MessageParser::default().parse(&raw).unwrap();
        assert_eq!(parsed.subject(), Some(subject.as_str()));
        let error = compose(
            Message {
                headers: vec![field("X-Token", FieldValue::Raw("x".repeat(1200)))],
                body: Part::new("text/plain", Content::Text(String::new())),
            },
            Utc::now(),
        );
        assert_eq!(
            error,
            Err(ComposeError::LineTooLong {
                field: "x-token".into()
            })
        );
    }
}

//! Email and EmailBodyPart property names (RFC 8621 §4.1), parsed from the
//! strings a client sends in `properties` and `bodyProperties`.
//!
//! Parsing happens once per Email/get; everything downstream (the read-level
//! planner in [`crate::mail::read_level`], the renderer) matches on these
//! enums exhaustively, so a new property cannot be forgotten anywhere.

use std::fmt;

/// The parsed form requested for a header field (RFC 8621 §4.1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HeaderForm {
    /// `asRaw` (the default): the raw octets after the colon, unfolded nothing.
    Raw,
    /// `asText`: unfolded, RFC 2047 decoded, whitespace-trimmed text.
    Text,
    /// `asAddresses`: a flat list of EmailAddress objects.
    Addresses,
    /// `asGroupedAddresses`: a list of EmailAddressGroup objects.
    GroupedAddresses,
    /// `asMessageIds`: message ids without angle brackets.
    MessageIds,
    /// `asDate`: an RFC 3339 date with the header's own offset.
    Date,
    /// `asURLs`: the URLs of a List-* header.
    Urls,
}

impl HeaderForm {
    fn parse(suffix: &str) -> Option<Self> {
        Some(match suffix {
            "asRaw" => Self::Raw,
            "asText" => Self::Text,
            "asAddresses" => Self::Addresses,
            "asGroupedAddresses" => Self::GroupedAddresses,
            "asMessageIds" => Self::MessageIds,
            "asDate" => Self::Date,
            "asURLs" => Self::Urls,
            _ => return None,
        })
    }
}

/// Header fields defined by RFC 5322 or RFC 2369, lowercase, with the forms
/// RFC 8621 §4.1.2.1–§4.1.2.7 allow for each. Any other field allows every form.
const KNOWN_FIELDS: &[(&str, &[HeaderForm])] = {
    use HeaderForm::*;
    const ADDR: &[HeaderForm] = &[Raw, Addresses, GroupedAddresses];
    const IDS: &[HeaderForm] = &[Raw, MessageIds];
    const DATE: &[HeaderForm] = &[Raw, Date];
    const TEXT: &[HeaderForm] = &[Raw, Text];
    const URLS: &[HeaderForm] = &[Raw, Urls];
    const RAW: &[HeaderForm] = &[Raw];
    &[
        ("from", ADDR),
        ("sender", ADDR),
        ("reply-to", ADDR),
        ("to", ADDR),
        ("cc", ADDR),
        ("bcc", ADDR),
        ("resent-from", ADDR),
        ("resent-sender", ADDR),
        ("resent-reply-to", ADDR),
        ("resent-to", ADDR),
        ("resent-cc", ADDR),
        ("resent-bcc", ADDR),
        ("message-id", IDS),
        ("in-reply-to", IDS),
        ("references", IDS),
        ("resent-message-id", IDS),
        ("date", DATE),
        ("resent-date", DATE),
        ("subject", TEXT),
        ("comments", TEXT),
        ("keywords", TEXT),
        ("list-help", URLS),
        ("list-unsubscribe", URLS),
        ("list-subscribe", URLS),
        ("list-post", URLS),
        ("list-owner", URLS),
        ("list-archive", URLS),
        ("return-path", RAW),
        ("received", RAW),
    ]
};

/// One `header:{name}[:as{Form}][:all]` property (RFC 8621 §4.1.3).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HeaderProperty {
    /// The property string exactly as requested; the response uses it as the key.
    pub key: String,
    /// The header field name, lowercased for matching (field names are case-insensitive).
    pub name: String,
    /// The parsed form asked for.
    pub form: HeaderForm,
    /// `:all`: every instance in order, instead of the last one.
    pub all: bool,
}

impl HeaderProperty {
    /// Parses `header:…`; `None` when malformed or when the form is not allowed
    /// for that field (both are `invalidArguments`, RFC 8621 §4.1.2).
    pub fn parse(property: &str) -> Option<Self> {
        let rest = property.strip_prefix("header:")?;
        let mut parts = rest.split(':');
        let name = parts.next()?;
        // RFC 5322 §3.6.8 field-name: printable US-ASCII except colon.
        if name.is_empty() || !name.bytes().all(|b| (33..=126).contains(&b)) {
            return None;
        }
        let mut form = HeaderForm::Raw;
        let mut all = false;
        match (parts.next(), parts.next(), parts.next()) {
            (None, _, _) => {}
            (Some("all"), None, _) => all = true,
            (Some(suffix), None, _) => form = HeaderForm::parse(suffix)?,
            (Some(suffix), Some("all"), None) => {
                form = HeaderForm::parse(suffix)?;
                all = true;
            }
            _ => return None,
        }
        let name = name.to_ascii_lowercase();
        let allowed = KNOWN_FIELDS
            .iter()
            .find(|(known, _)| *known == name)
            .is_none_or(|(_, forms)| forms.contains(&form));
        allowed.then(|| Self {
            key: property.to_string(),
            name,
            form,
            all,
        })
    }
}

/// Declares a property enum from one table: each unit variant with its
/// wire name, then `Header` for a `header:` property, with `parse` and
/// `name`, so the two directions cannot disagree.
macro_rules! property_enum {
    ($(#[$meta:meta])* $enum:ident { $($variant:ident => $wire:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum $enum {
            $($variant,)+
            /// A `header:` property (RFC 8621 §4.1.3).
            Header(HeaderProperty),
        }

        impl $enum {
            /// Parses one property string; `None` for an unknown or malformed one.
            pub fn parse(property: &str) -> Option<Self> {
                Some(match property {
                    $($wire => Self::$variant,)+
                    other => Self::Header(HeaderProperty::parse(other)?),
                })
            }

            /// The property name as it appears in the response object.
            pub fn name(&self) -> &str {
                match self {
                    $(Self::$variant => $wire,)+
                    Self::Header(header) => &header.key,
                }
            }
        }
    };
}

property_enum! {
    /// A property of the Email object (RFC 8621 §4.1).
    EmailProperty {
        Id => "id",
        BlobId => "blobId",
        ThreadId => "threadId",
        MailboxIds => "mailboxIds",
        Keywords => "keywords",
        Size => "size",
        ReceivedAt => "receivedAt",
        MessageId => "messageId",
        InReplyTo => "inReplyTo",
        References => "references",
        Sender => "sender",
        From => "from",
        To => "to",
        Cc => "cc",
        Bcc => "bcc",
        ReplyTo => "replyTo",
        Subject => "subject",
        SentAt => "sentAt",
        Headers => "headers",
        BodyStructure => "bodyStructure",
        BodyValues => "bodyValues",
        TextBody => "textBody",
        HtmlBody => "htmlBody",
        Attachments => "attachments",
        HasAttachment => "hasAttachment",
        Preview => "preview",
    }
}

impl EmailProperty {
    /// The header property this Email property is identical to (RFC 8621
    /// §4.1.3: `messageId` is `header:Message-ID:asMessageIds`, `from` is
    /// `header:From:asAddresses`, `subject` is `header:Subject:asText`,
    /// `sentAt` is `header:Date:asDate`, …); `None` for the others. Email/get
    /// renders these properties through it, and ingest indexes the same
    /// values for Email/query, so the two cannot disagree. (A `header:`
    /// property is its own header property.)
    pub fn header_property(&self) -> Option<HeaderProperty> {
        use EmailProperty::*;
        use HeaderForm::{Addresses, Date, MessageIds, Text};
        let (name, form) = match self {
            MessageId => ("message-id", MessageIds),
            InReplyTo => ("in-reply-to", MessageIds),
            References => ("references", MessageIds),
            Sender => ("sender", Addresses),
            From => ("from", Addresses),
            To => ("to", Addresses),
            Cc => ("cc", Addresses),
            Bcc => ("bcc", Addresses),
            ReplyTo => ("reply-to", Addresses),
            Subject => ("subject", Text),
            SentAt => ("date", Date),
            Id | BlobId | ThreadId | MailboxIds | Keywords | Size | ReceivedAt | Headers
            | Header(_) | BodyStructure | BodyValues | TextBody | HtmlBody | Attachments
            | HasAttachment | Preview => return None,
        };
        Some(HeaderProperty {
            key: String::new(),
            name: name.to_string(),
            form,
            all: false,
        })
    }

    /// The list Email/parse returns when `properties` is null (RFC 8621 §4.9):
    /// Email/get's default without the metadata a parsed blob does not have.
    pub fn parse_default_list() -> Vec<Self> {
        use EmailProperty::*;
        Self::default_list()
            .into_iter()
            .filter(|p| {
                !matches!(
                    p,
                    Id | BlobId | ThreadId | MailboxIds | Keywords | Size | ReceivedAt
                )
            })
            .collect()
    }

    /// The list Email/get returns when `properties` is null (RFC 8621 §4.2).
    pub fn default_list() -> Vec<Self> {
        use EmailProperty::*;
        vec![
            Id,
            BlobId,
            ThreadId,
            MailboxIds,
            Keywords,
            Size,
            ReceivedAt,
            MessageId,
            InReplyTo,
            References,
            Sender,
            From,
            To,
            Cc,
            Bcc,
            ReplyTo,
            Subject,
            SentAt,
            HasAttachment,
            Preview,
            BodyValues,
            TextBody,
            HtmlBody,
            Attachments,
        ]
    }
}

impl fmt::Display for EmailProperty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

property_enum! {
    /// A property of the EmailBodyPart object (RFC 8621 §4.1.4).
    BodyProperty {
        PartId => "partId",
        BlobId => "blobId",
        Size => "size",
        Headers => "headers",
        Name => "name",
        Type => "type",
        Charset => "charset",
        Disposition => "disposition",
        Cid => "cid",
        Language => "language",
        Location => "location",
        SubParts => "subParts",
    }
}

impl BodyProperty {
    /// The list used when `bodyProperties` is absent (RFC 8621 §4.2).
    pub fn default_list() -> Vec<Self> {
        use BodyProperty::*;
        vec![
            PartId,
            BlobId,
            Size,
            Name,
            Type,
            Charset,
            Disposition,
            Cid,
            Language,
            Location,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_header(input: &str, expected: Option<(&str, HeaderForm, bool)>) {
        let parsed = HeaderProperty::parse(input).map(|h| (h.name, h.form, h.all));
        let expected = expected.map(|(n, f, a)| (n.to_string(), f, a));
        assert_eq!(parsed, expected, "{input}");
    }

    #[test]
    fn header_properties_follow_rfc8621_section_4_1_2() {
        use HeaderForm::*;
        check_header("header:From", Some(("from", Raw, false)));
        check_header("header:From:asAddresses", Some(("from", Addresses, false)));
        check_header(
            "header:from:asGroupedAddresses:all",
            Some(("from", GroupedAddresses, true)),
        );
        check_header("header:X-Foo:all", Some(("x-foo", Raw, true)));
        check_header("header:X-Foo:asDate", Some(("x-foo", Date, false)));
        check_header("header:List-Post:asURLs", Some(("list-post", Urls, false)));
        check_header("header:Subject:asText", Some(("subject", Text, false)));
        // Forms the RFC forbids for a known field.
        check_header("header:From:asDate", None);
        check_header("header:Subject:asAddresses", None);
        check_header("header:Received:asText", None);
        // Malformed.
        check_header("header:", None);
        check_header("header:From:asNothing", None);
        check_header("header:From:all:asRaw", None);
        check_header("header:From:asRaw:all:all", None);
        check_header("header:Fr om", None);
    }

    #[test]
    fn email_parse_default_is_the_rfc8621_section_4_9_list() {
        let names: Vec<String> = EmailProperty::parse_default_list()
            .iter()
            .map(|p| p.name().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "messageId",
                "inReplyTo",
                "references",
                "sender",
                "from",
                "to",
                "cc",
                "bcc",
                "replyTo",
                "subject",
                "sentAt",
                "hasAttachment",
                "preview",
                "bodyValues",
                "textBody",
                "htmlBody",
                "attachments",
            ]
        );
    }

    #[test]
    fn convenience_properties_are_the_rfc8621_section_4_1_3_header_properties() {
        let table = [
            ("messageId", Some("header:Message-ID:asMessageIds")),
            ("inReplyTo", Some("header:In-Reply-To:asMessageIds")),
            ("references", Some("header:References:asMessageIds")),
            ("sender", Some("header:Sender:asAddresses")),
            ("from", Some("header:From:asAddresses")),
            ("to", Some("header:To:asAddresses")),
            ("cc", Some("header:Cc:asAddresses")),
            ("bcc", Some("header:Bcc:asAddresses")),
            ("replyTo", Some("header:Reply-To:asAddresses")),
            ("subject", Some("header:Subject:asText")),
            ("sentAt", Some("header:Date:asDate")),
            ("size", None),
            ("preview", None),
            ("headers", None),
            ("header:From:asAddresses", None),
        ];
        let shape = |h: HeaderProperty| (h.name, h.form, h.all);
        for (property, header) in table {
            let got = EmailProperty::parse(property)
                .expect(property)
                .header_property()
                .map(shape);
            let expected = header.map(|h| shape(HeaderProperty::parse(h).expect(h)));
            assert_eq!(got, expected, "{property}");
        }
    }

    #[test]
    fn every_email_property_name_round_trips() {
        for property in EmailProperty::default_list()
            .into_iter()
            .chain([EmailProperty::Headers, EmailProperty::BodyStructure])
        {
            assert_eq!(
                EmailProperty::parse(property.name()),
                Some(property.clone())
            );
        }
        assert_eq!(EmailProperty::parse("nope"), None);
        assert_eq!(
            EmailProperty::parse("header:To:asAddresses").map(|p| p.name().to_string()),
            Some("header:To:asAddresses".to_string())
        );
    }
}

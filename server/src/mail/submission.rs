//! A message on its way out (issue 17, RFC 8621 §7.5): the envelope a
//! submission without one gets, the message as it leaves (no Bcc field),
//! and the trace field a copy delivered on this server carries. Pure: no
//! I/O.

use serde_json::Value;

use super::header::HeaderFields;
use super::lexical::{is_atext, read_closed_quoted, skip_closed_comment};
use super::property::HeaderProperty;

/// Why no envelope can be derived from a message (§7.5: the server SHOULD
/// reject a submission whose Sender or From is ambiguous).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    #[error("the message has more than one {0} field")]
    ManyFields(&'static str),
    #[error("the {0} field has more than one address")]
    ManyAddresses(&'static str),
}

/// The addresses of every `name` field of a header block, field by field,
/// as Email/get's `header:{name}:asAddresses:all` reads them.
fn addresses_by_field(fields: &HeaderFields, name: &str) -> Vec<Vec<String>> {
    let Some(property) = HeaderProperty::parse(&format!("header:{name}:asAddresses:all")) else {
        return Vec::new();
    };
    let Value::Array(per_field) = fields.render(&property) else {
        return Vec::new();
    };
    per_field
        .iter()
        .map(|field| {
            field
                .as_array()
                .map(|list| {
                    list.iter()
                        .filter_map(|address| address["email"].as_str())
                        .filter(|email| !email.is_empty())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        })
        .collect()
}

/// Every From address of a message's header fields.
pub fn from_addresses(fields: &HeaderFields) -> Vec<String> {
    addresses_by_field(fields, "From").concat()
}

/// Every Sender address of a message's header fields.
pub fn sender_addresses(fields: &HeaderFields) -> Vec<String> {
    addresses_by_field(fields, "Sender").concat()
}

/// The recipient addresses of a message's header block: To, Cc,
/// Resent-To and Resent-Cc (what RFC 3834 §2 asks an auto-reply to look
/// for).
pub fn addressed_to(header_block: &[u8]) -> Vec<String> {
    let fields = HeaderFields::parse(header_block.to_vec());
    ["To", "Cc", "Resent-To", "Resent-Cc"]
        .iter()
        .flat_map(|name| addresses_by_field(&fields, name).concat())
        .collect()
}

/// The envelope of a submission that gives none (RFC 8621 §7.5): MAIL FROM
/// the address of the Sender field, else of the From field (`None` when
/// there is neither); RCPT TO the To, Cc and Bcc addresses, each once
/// (compared case-insensitively), in that order.
pub fn derived_envelope(
    fields: &HeaderFields,
) -> Result<(Option<String>, Vec<String>), EnvelopeError> {
    let mut mail_from = None;
    for name in ["Sender", "From"] {
        let found = addresses_by_field(fields, name);
        match found.as_slice() {
            [] => continue,
            [one] if one.len() > 1 => return Err(EnvelopeError::ManyAddresses(name)),
            [one] => {
                mail_from = one.first().cloned();
                break;
            }
            _ => return Err(EnvelopeError::ManyFields(name)),
        }
    }
    let mut recipients: Vec<String> = Vec::new();
    for name in ["To", "Cc", "Bcc"] {
        for address in addresses_by_field(fields, name).concat() {
            if !recipients.iter().any(|r| r.eq_ignore_ascii_case(&address)) {
                recipients.push(address);
            }
        }
    }
    Ok((mail_from, recipients))
}

/// Where a message's header block ends: after the first empty line, or
/// the whole message when there is none.
pub fn header_end(raw: &[u8]) -> usize {
    let mut at = 0;
    while at < raw.len() {
        let end = raw[at..]
            .iter()
            .position(|b| *b == b'\n')
            .map_or(raw.len(), |n| at + n + 1);
        let line = &raw[at..end];
        if line == b"\r\n" || line == b"\n" {
            return end;
        }
        at = end;
    }
    raw.len()
}

/// Why a message cannot leave as it is (EmailSubmission/set answers
/// `invalidEmail`): its header block holds a line that mail software reads
/// in more than one way, so what a relay or recipient takes for its fields
/// could differ from what the send-as check read (issue 43).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutgoingError {
    /// A control character (NUL, a lone CR made a line end, ESC, …) other
    /// than a tab in header line `line` (1-based).
    #[error("header line {line} holds a control character")]
    ControlCharacter { line: usize },
    /// Header line `line` is neither `name: value` nor the continuation of
    /// a field (RFC 5322 §2.2).
    #[error("header line {line} is not a header field")]
    NotAField { line: usize },
    /// Header line `line` holds only white space: some software ends the
    /// header there, some reads it as folding.
    #[error("header line {line} holds only white space")]
    BlankLine { line: usize },
    /// Header line `line` is longer than RFC 5322 §2.1.1's 998 octets.
    #[error("header line {line} is longer than 998 octets")]
    LineTooLong { line: usize },
    /// An originator field (From, Sender, Resent-From, Resent-Sender) that
    /// is not a plain RFC 5322 §3.4 mailbox list, so that mail programs may
    /// read different addresses in it (`bob@x <ann@y>`, `<a> <b>`, `<>`).
    #[error("the {0} field is not a list of addresses every mail program reads alike")]
    AmbiguousAddress(&'static str),
    /// Not exactly one From field, or more than one Sender (RFC 5322 §3.6).
    #[error("a message has exactly one From field and at most one Sender field")]
    FieldCount,
}

/// A message as it leaves (RFC 8621 §7.5), made once so that what is
/// checked is what is sent: every line ends CRLF (the octets the relay
/// puts on the wire, RFC 5321 §2.3.8), every header line is a field or
/// its continuation, and the Bcc fields are gone from `message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    /// The header block the checks read (Bcc still in it: the derived
    /// envelope needs its addresses), CRLF line ends, up to and including
    /// the empty line.
    pub header: Vec<u8>,
    /// The octets every recipient gets: `header` without its Bcc fields,
    /// then the body, CRLF line ends throughout.
    pub message: Vec<u8>,
}

impl Outgoing {
    /// Reads `raw` (a stored message, any line ends) into the message that
    /// leaves, or says why it cannot leave. One splitter decides the
    /// fields: a line is a field or a continuation by [`header_line`], and
    /// [`HeaderFields`] reads the same CRLF lines the same way.
    pub fn prepare(raw: &[u8]) -> Result<Self, OutgoingError> {
        let wire = super::relay::with_crlf(raw);
        let end = header_end(&wire);
        let (header, body) = wire.split_at(end);
        let mut message = Vec::with_capacity(wire.len());
        let mut dropping = false;
        for (index, line) in header.split_inclusive(|b| *b == b'\n').enumerate() {
            let content = line.strip_suffix(b"\r\n").unwrap_or(line);
            let kind = header_line(content, index + 1)?;
            match kind {
                HeaderLine::Field(name) => {
                    dropping = name.eq_ignore_ascii_case(b"bcc")
                        || name.eq_ignore_ascii_case(b"resent-bcc");
                }
                HeaderLine::Continuation if index == 0 => {
                    return Err(OutgoingError::NotAField { line: 1 });
                }
                HeaderLine::Continuation => {}
                HeaderLine::End => dropping = false,
            }
            if !dropping {
                message.extend_from_slice(line);
            }
        }
        message.extend_from_slice(body);
        Ok(Self {
            header: header.to_vec(),
            message,
        })
    }

    /// The header block as fields, read as Email/get reads them: parsed
    /// once, then every check reads them.
    pub fn fields(&self) -> HeaderFields {
        HeaderFields::parse(self.header.clone())
    }
}

/// Every address of the originator fields (From, Sender, Resent-From,
/// Resent-Sender) of `fields`, each field read by the strict RFC 5322 §3.4
/// grammar ([`strict_mailbox_list`]) so that no mail program reads another
/// address in it; exactly one From and at most one Sender.
pub fn originators(fields: &HeaderFields) -> Result<Vec<String>, OutgoingError> {
    if fields.count("from") != 1 || fields.count("sender") > 1 {
        return Err(OutgoingError::FieldCount);
    }
    let mut addresses = Vec::new();
    for name in ["From", "Sender", "Resent-From", "Resent-Sender"] {
        for value in raw_values(fields, name) {
            let list = strict_mailbox_list(&value).ok_or(OutgoingError::AmbiguousAddress(name))?;
            addresses.extend(list);
        }
    }
    Ok(addresses)
}

/// The raw values (RFC 8621 §4.1.2.1) of every `name` field.
fn raw_values(fields: &HeaderFields, name: &str) -> Vec<String> {
    let Some(property) = HeaderProperty::parse(&format!("header:{name}:all")) else {
        return Vec::new();
    };
    match fields.render(&property) {
        Value::Array(values) => values
            .iter()
            .filter_map(|value| value.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

/// One token of an address list, comments and white space skipped.
#[derive(Debug, PartialEq)]
enum AddressToken {
    /// A run of atext, `.`, `@`, `[` and `]`.
    Word(String),
    /// A quoted string, unescaped.
    Quoted(String),
    /// What `<…>` holds.
    Angle(String),
    Comma,
}

/// The tokens of an address field's value, or `None` for anything
/// outside the plain grammar (an unclosed comment or quote, `:`, `;`, a
/// stray `>`, a control character).
fn address_tokens(value: &str) -> Option<Vec<AddressToken>> {
    let chars: Vec<char> = value.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            ' ' | '\t' | '\r' | '\n' => i += 1,
            // Unclosed: not the plain grammar.
            '(' => i = skip_closed_comment(&chars, i)?,
            '"' => {
                // Unclosed: not the plain grammar.
                let (text, next) = read_closed_quoted(&chars, i)?;
                tokens.push(AddressToken::Quoted(text));
                i = next;
            }
            '<' => {
                let end = chars[i..].iter().position(|c| *c == '>')? + i;
                tokens.push(AddressToken::Angle(chars[i + 1..end].iter().collect()));
                i = end + 1;
            }
            ',' => {
                tokens.push(AddressToken::Comma);
                i += 1;
            }
            c if is_atext(c) || matches!(c, '.' | '@' | '[' | ']') => {
                let start = i;
                while i < chars.len()
                    && (is_atext(chars[i]) || matches!(chars[i], '.' | '@' | '[' | ']'))
                {
                    i += 1;
                }
                tokens.push(AddressToken::Word(chars[start..i].iter().collect()));
            }
            _ => return None,
        }
    }
    Some(tokens)
}

/// Whether `text` is a plain addr-spec (RFC 5322 §3.4.1): a dot-atom
/// local part, one `@`, a dot-atom domain or a domain literal; nothing
/// else (no quotes, white space or second `@`).
fn is_plain_addr_spec(text: &str) -> bool {
    let dot_atom = |part: &str| {
        !part.is_empty()
            && part
                .split('.')
                .all(|atom| !atom.is_empty() && atom.chars().all(is_atext))
    };
    let Some((local, domain)) = text.split_once('@') else {
        return false;
    };
    let literal = domain.starts_with('[')
        && domain.ends_with(']')
        && domain[1..domain.len() - 1]
            .chars()
            .all(|c| c.is_ascii_graphic() && !matches!(c, '[' | ']' | '\\'));
    dot_atom(local) && (dot_atom(domain) || literal)
}

/// The addresses of an originator field's raw `value` when it is a plain
/// RFC 5322 §3.4 `mailbox-list` (each mailbox an addr-spec, or a display
/// name of atoms and quoted strings followed by one `<addr-spec>`, commas
/// between, comments anywhere), else `None`: a value that mail programs
/// read differently (an `@` or `:` in an unquoted display name, two
/// angle addresses, an empty `<>`, groups, routes) is not read at all.
pub fn strict_mailbox_list(value: &str) -> Option<Vec<String>> {
    let tokens = address_tokens(value)?;
    let mut addresses = Vec::new();
    for mailbox in tokens.split(|token| *token == AddressToken::Comma) {
        let address = match mailbox {
            [AddressToken::Word(spec)] if is_plain_addr_spec(spec) => spec.clone(),
            [name @ .., AddressToken::Angle(spec)] if is_plain_addr_spec(spec) => {
                let plain_name = name.iter().all(|word| match word {
                    AddressToken::Word(word) => {
                        !word.contains(['@', '[', ']']) && !word.starts_with('.')
                    }
                    AddressToken::Quoted(_) => true,
                    _ => false,
                });
                if !plain_name {
                    return None;
                }
                spec.clone()
            }
            _ => return None,
        };
        addresses.push(address);
    }
    Some(addresses)
}

/// What one header line (without its CRLF) is.
enum HeaderLine<'a> {
    /// The start of a field, with its name.
    Field(&'a [u8]),
    /// Folded white space continuing the field before.
    Continuation,
    /// The empty line that ends the header.
    End,
}

/// Classifies header line number `number` (1-based) strictly: a field
/// name is printable ASCII without a colon (RFC 5322 §3.6.8, white space
/// before the colon allowed as §4.5.3's obsolete form), and no line holds
/// a control character other than a tab.
fn header_line(content: &[u8], number: usize) -> Result<HeaderLine<'_>, OutgoingError> {
    if content.is_empty() {
        return Ok(HeaderLine::End);
    }
    if content
        .iter()
        .any(|b| (*b < b' ' && *b != b'\t') || *b == 0x7f)
    {
        return Err(OutgoingError::ControlCharacter { line: number });
    }
    if content.len() > 998 {
        return Err(OutgoingError::LineTooLong { line: number });
    }
    if matches!(content[0], b' ' | b'\t') {
        return match content.iter().all(|b| matches!(b, b' ' | b'\t')) {
            true => Err(OutgoingError::BlankLine { line: number }),
            false => Ok(HeaderLine::Continuation),
        };
    }
    let colon = content.iter().position(|b| *b == b':');
    let name = colon.map(|colon| content[..colon].trim_ascii_end());
    match name {
        Some(name) if !name.is_empty() && name.iter().all(|b| (b'!'..=b'~').contains(b)) => {
            Ok(HeaderLine::Field(name))
        }
        _ => Err(OutgoingError::NotAField { line: number }),
    }
}

/// The message without its Bcc fields (RFC 8621 §7.5: the server MUST
/// remove them during delivery), as it leaves: [`Outgoing::message`].
pub fn without_bcc(raw: &[u8]) -> Result<Vec<u8>, OutgoingError> {
    Outgoing::prepare(raw).map(|outgoing| outgoing.message)
}

/// The copy of `raw` delivered to the recipients on this server: a
/// Received field (RFC 5321 §4.4) on top, naming the submission and stamped
/// with its sendAt (`at`, Unix seconds), so that a retried delivery makes
/// the same octets (and the store recognises the copy it already has). It
/// names no recipient (no `for` clause, as RFC 5321 §7.2 advises for mail
/// to several): every local recipient of a submission gets the same
/// octets, which the blob store keeps once, and a Bcc recipient is not
/// named in anyone's copy.
pub fn received_copy(raw: &[u8], host: &str, submission: &str, at: i64) -> Vec<u8> {
    let date = chrono::DateTime::from_timestamp(at, 0)
        .unwrap_or_default()
        .to_rfc2822();
    let clean = |text: &str| text.replace(['\r', '\n'], "");
    let field = format!(
        "Received: by {} (Fastview) with JMAP id {};\r\n\t{}\r\n",
        clean(host),
        clean(submission),
        date
    );
    let mut out = Vec::with_capacity(field.len() + raw.len());
    out.extend_from_slice(field.as_bytes());
    out.extend_from_slice(raw);
    out
}

/// A delivery status notification (RFC 3464) telling `sender` that
/// `message` could not be delivered to `recipient`, the relay having said
/// `reply`: a `multipart/report` with a human-readable part, the
/// `message/delivery-status` fields and the message's header. Made from
/// the submission (`submission`, `at` its sendAt in Unix seconds) alone, so
/// the same failure makes the same octets.
pub fn bounce(
    host: &str,
    submission: &str,
    sender: &str,
    recipient: &str,
    reply: &str,
    message: &[u8],
    at: i64,
) -> Vec<u8> {
    let clean = |text: &str| text.replace(['\r', '\n'], " ");
    let (host, sender, recipient, reply) =
        (clean(host), clean(sender), clean(recipient), clean(reply));
    let date = chrono::DateTime::from_timestamp(at, 0)
        .unwrap_or_default()
        .to_rfc2822();
    // The enhanced status code of the reply (`550 5.1.1 …`), else a
    // generic permanent failure.
    let status = reply
        .split_whitespace()
        .nth(1)
        .filter(|code| code.starts_with('5') && code.matches('.').count() == 2)
        .unwrap_or("5.0.0");
    let boundary = format!(
        "dsn-{}",
        clean(submission).replace(|c: char| !c.is_ascii_alphanumeric(), "")
    );
    let header = &message[..header_end(message)];
    let mut out = format!(
        "From: Mail Delivery System <mailer-daemon@{host}>\r\n\
         To: <{sender}>\r\n\
         Subject: Undelivered Mail Returned to Sender\r\n\
         Date: {date}\r\n\
         Message-ID: <{boundary}.{}@{host}>\r\n\
         Auto-Submitted: auto-replied\r\n\
         MIME-Version: 1.0\r\n\
         Content-Type: multipart/report; report-type=delivery-status;\r\n\
         \tboundary=\"{boundary}\"\r\n\r\n\
         --{boundary}\r\n\
         Content-Type: text/plain; charset=utf-8\r\n\r\n\
         Your message could not be delivered to <{recipient}>.\r\n\
         The receiving server said: {reply}\r\n\r\n\
         --{boundary}\r\n\
         Content-Type: message/delivery-status\r\n\r\n\
         Reporting-MTA: dns; {host}\r\n\r\n\
         Final-Recipient: rfc822; {recipient}\r\n\
         Action: failed\r\n\
         Status: {status}\r\n\
         Diagnostic-Code: smtp; {reply}\r\n\r\n\
         --{boundary}\r\n\
         Content-Type: text/rfc822-headers\r\n\r\n",
        blob_safe(&recipient)
    )
    .into_bytes();
    out.extend_from_slice(header);
    out.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    out
}

/// `text` with only the characters a Message-ID's left part may hold.
fn blob_safe(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '.' })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MESSAGE: &[u8] = b"From: Ann <ann@example.com>\r\nTo: Bob <bob@example.com>, carol@example.org\r\n\
Cc: BOB@example.com\r\nBcc: secret@example.net,\r\n  other@example.net\r\nSubject: Hi\r\n\r\nBcc: stays in the body\r\n";

    #[test]
    fn the_envelope_comes_from_sender_or_from_and_the_recipients() {
        assert_eq!(
            derived_envelope(&HeaderFields::parse(MESSAGE.to_vec())).unwrap(),
            (
                Some("ann@example.com".into()),
                vec![
                    "bob@example.com".to_string(),
                    "carol@example.org".into(),
                    "secret@example.net".into(),
                    "other@example.net".into()
                ]
            )
        );
        let sender = b"Sender: desk@example.com\r\nFrom: a@example.com, b@example.com\r\n\r\n";
        assert_eq!(
            derived_envelope(&HeaderFields::parse(sender.to_vec())).unwrap(),
            (Some("desk@example.com".into()), vec![])
        );
        let two = b"From: a@example.com, b@example.com\r\n\r\n";
        assert_eq!(
            derived_envelope(&HeaderFields::parse(two.to_vec())),
            Err(EnvelopeError::ManyAddresses("From"))
        );
        let twice = b"From: a@example.com\r\nFrom: b@example.com\r\n\r\n";
        assert_eq!(
            derived_envelope(&HeaderFields::parse(twice.to_vec())),
            Err(EnvelopeError::ManyFields("From"))
        );
        assert_eq!(
            derived_envelope(&HeaderFields::parse(b"Subject: x\r\n\r\n".to_vec())).unwrap(),
            (None, vec![])
        );
        assert_eq!(
            from_addresses(&HeaderFields::parse(MESSAGE.to_vec())),
            vec!["ann@example.com".to_string()]
        );
    }

    #[test]
    fn bcc_fields_go_and_nothing_else_changes() {
        assert_eq!(
            without_bcc(MESSAGE).unwrap(),
            b"From: Ann <ann@example.com>\r\nTo: Bob <bob@example.com>, carol@example.org\r\n\
Cc: BOB@example.com\r\nSubject: Hi\r\n\r\nBcc: stays in the body\r\n"
                .to_vec()
        );
        let plain = b"Subject: x\nbcc : a@b.c\n\nbody".to_vec();
        assert_eq!(
            without_bcc(&plain).unwrap(),
            b"Subject: x\r\n\r\nbody".to_vec()
        );
        assert_eq!(
            without_bcc(b"Subject: no header end").unwrap(),
            b"Subject: no header end".to_vec()
        );
    }

    /// `check(raw, expected)`: what [`Outgoing::prepare`] makes of `raw`,
    /// the header the checks read and the message that leaves, or its
    /// error.
    fn check(raw: &[u8], expected: Result<(&str, &str), OutgoingError>) {
        let got = Outgoing::prepare(raw).map(|outgoing| {
            (
                String::from_utf8(outgoing.header).unwrap(),
                String::from_utf8(outgoing.message).unwrap(),
            )
        });
        let expected = expected.map(|(header, message)| (header.to_string(), message.to_string()));
        assert_eq!(got, expected, "{:?}", String::from_utf8_lossy(raw));
    }

    #[test]
    fn a_message_leaves_as_the_checks_read_it() {
        // A bare CR is a line end for the checks as for the relay.
        check(
            b"To: v@x.example\nSubject: t\rFrom: bob@example.com\r\r\nFrom: ann@example.com\n\nhi\n",
            Ok((
                "To: v@x.example\r\nSubject: t\r\nFrom: bob@example.com\r\n\r\n",
                "To: v@x.example\r\nSubject: t\r\nFrom: bob@example.com\r\n\r\nFrom: ann@example.com\r\n\r\nhi\r\n",
            )),
        );
        // A Bcc behind a bare CR is a Bcc, and goes.
        check(
            b"From: a@x.example\nSubject: t\rBcc: h@x.example,\r\n\tg@x.example\nTo: v@x.example\n\nhi",
            Ok((
                "From: a@x.example\r\nSubject: t\r\nBcc: h@x.example,\r\n\tg@x.example\r\nTo: v@x.example\r\n\r\n",
                "From: a@x.example\r\nSubject: t\r\nTo: v@x.example\r\n\r\nhi",
            )),
        );
        let fields = Outgoing::prepare(b"From: a@x.example,\r\n b@x.example\r\n\r\n").unwrap();
        assert_eq!(
            from_addresses(&fields.fields()),
            ["a@x.example".to_string(), "b@x.example".to_string()]
        );
        check(
            b"From: a@x.example\r\nFr\0om: b@x.example\r\n\r\n",
            Err(OutgoingError::ControlCharacter { line: 2 }),
        );
        check(
            b"From: a@x.example\x1b\r\n\r\n",
            Err(OutgoingError::ControlCharacter { line: 1 }),
        );
        check(
            b"From: a@x.example\r\n \t\r\nFrom: b@x.example\r\n\r\n",
            Err(OutgoingError::BlankLine { line: 2 }),
        );
        check(
            b"From: a@x.example\r\nno colon\r\nFrom: b@x.example\r\n\r\n",
            Err(OutgoingError::NotAField { line: 2 }),
        );
        check(
            b" From: b@x.example\r\n\r\n",
            Err(OutgoingError::NotAField { line: 1 }),
        );
        check(b": x\r\n\r\n", Err(OutgoingError::NotAField { line: 1 }));
        // The body is not a header: anything goes there, CRLF made.
        check(
            b"Subject: x\r\n\r\n\0 not a field\n",
            Ok(("Subject: x\r\n\r\n", "Subject: x\r\n\r\n\0 not a field\r\n")),
        );
    }

    #[test]
    fn resent_bcc_goes_and_overlong_header_lines_are_refused() {
        check(
            b"From: a@x.example\r\nResent-Bcc: h@x.example\r\nTo: v@x.example\r\n\r\nhi",
            Ok((
                "From: a@x.example\r\nResent-Bcc: h@x.example\r\nTo: v@x.example\r\n\r\n",
                "From: a@x.example\r\nTo: v@x.example\r\n\r\nhi",
            )),
        );
        let long = format!("From: a@x.example\r\nSubject: {}\r\n\r\n", "x".repeat(990));
        check(long.as_bytes(), Err(OutgoingError::LineTooLong { line: 2 }));
    }

    #[test]
    fn originators_are_read_only_when_every_reader_reads_them_alike() {
        let read = |value: &str| strict_mailbox_list(value);
        let one = |address: &str| Some(vec![address.to_string()]);
        assert_eq!(read("ann@example.com"), one("ann@example.com"));
        assert_eq!(read("Ann <ann@example.com>"), one("ann@example.com"));
        assert_eq!(read("John Q. Public <j@x.example>"), one("j@x.example"));
        assert_eq!(read("\"Smith, Ann\" <ann@x.example>"), one("ann@x.example"));
        assert_eq!(
            read("=?utf-8?q?Zo=C3=AB?= <z@x.example>"),
            one("z@x.example")
        );
        assert_eq!(read("ann@x.example (Ann (at work))"), one("ann@x.example"));
        assert_eq!(read("Zoë <zoë@x.example>"), one("zoë@x.example"));
        assert_eq!(read("a <a@[192.0.2.1]>"), one("a@[192.0.2.1]"));
        assert_eq!(
            read("a@x.example, B <b@x.example>"),
            Some(vec!["a@x.example".to_string(), "b@x.example".to_string()])
        );
        for ambiguous in [
            "bob@victim.example <ann@example.com>",
            "x:bob@victim.example <ann@example.com>",
            "<ann@example.com> <bob@victim.example>",
            "bob@victim.example <>",
            "friends: ann@example.com;",
            "<@route.example:ann@example.com>",
            "ann@example.com bob@victim.example",
            "\"ann@example.com\"@victim.example",
            "ann@example.com,",
            ", ann@example.com",
            "Ann <ann@example.com",
            "Ann (unclosed <ann@example.com>",
            "< ann@example.com >",
            "ann@@example.com",
            ".ann@example.com",
            "",
        ] {
            assert_eq!(read(ambiguous), None, "{ambiguous}");
        }
    }

    #[test]
    fn a_bounce_is_a_delivery_status_report() {
        let dsn = bounce(
            "mail.test",
            "7",
            "ann@example.com",
            "zed@far.example",
            "550 5.1.1 No such user",
            MESSAGE,
            0,
        );
        let text = String::from_utf8(dsn.clone()).unwrap();
        assert!(text.contains("Content-Type: multipart/report; report-type=delivery-status;"));
        assert!(text.contains(
            "Final-Recipient: rfc822; zed@far.example\r\nAction: failed\r\nStatus: 5.1.1\r\n"
        ));
        assert!(
            text.contains("Content-Type: text/rfc822-headers\r\n\r\nFrom: Ann <ann@example.com>")
        );
        assert!(
            text.ends_with("Subject: Hi\r\n\r\n\r\n--dsn-7--\r\n"),
            "{text}"
        );
        assert_eq!(
            dsn,
            bounce(
                "mail.test",
                "7",
                "ann@example.com",
                "zed@far.example",
                "550 5.1.1 No such user",
                MESSAGE,
                0
            )
        );
        let parsed = crate::mail::message::parse_message(&dsn);
        assert_eq!(
            parsed.subject(),
            Some("Undelivered Mail Returned to Sender")
        );
    }

    #[test]
    fn a_local_copy_is_the_same_octets_every_time() {
        let one = received_copy(b"Subject: x\r\n\r\nhi", "mail.test", "s1", 0);
        let two = received_copy(b"Subject: x\r\n\r\nhi", "mail.test", "s1", 0);
        assert_eq!(one, two);
        assert_eq!(
            String::from_utf8(one).unwrap(),
            "Received: by mail.test (Fastview) with JMAP id s1;\r\n\t\
             Thu, 1 Jan 1970 00:00:00 +0000\r\nSubject: x\r\n\r\nhi"
        );
    }
}

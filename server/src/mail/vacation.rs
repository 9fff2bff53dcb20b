//! Vacation auto-replies (issue 17, RFC 8621 §8, RFC 3834): when mail is
//! delivered to an account whose VacationResponse is enabled and within its
//! dates, the sender gets one reply per [`PERIOD`] — never for mail that is
//! itself automatic, from a list or bulk, from a system address, or from
//! the account itself. The reply says `Auto-Submitted: auto-replied` and
//! answers the message (In-Reply-To, References).

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::compose::{
    Content, Field, FieldValue, Mailbox, Message, Part, body_from_lists, compose,
};
use super::header::HeaderFields;
use super::property::HeaderProperty;
use crate::store::VacationResponse;

/// How long after answering a sender the account answers them again:
/// 7 days (RFC 3834 §4.2 suggests it).
pub const PERIOD: i64 = 7 * 86_400;

/// The last value of a header field as text, if any.
fn field(fields: &HeaderFields, name: &str) -> Option<String> {
    let property = HeaderProperty::parse(&format!("header:{name}:asText"))
        .or_else(|| HeaderProperty::parse(&format!("header:{name}")))?;
    match fields.render(&property) {
        Value::String(text) => Some(text.trim().to_string()),
        _ => None,
    }
}

/// Whether the response is on at `now` (Unix seconds): enabled, from
/// `fromDate` on (inclusive), before `toDate`.
pub fn active(response: &VacationResponse, now: i64) -> bool {
    response.is_enabled
        && response.from_date.is_none_or(|from| from <= now)
        && response.to_date.is_none_or(|to| now < to)
}

/// Whether a message from `sender` to `recipient` with `header_block` may
/// be answered automatically (RFC 3834 §2): not auto-submitted (any
/// `Auto-Submitted` but `no`), no list fields (`List-Id`, `List-Post`,
/// `List-Unsubscribe`, …), no `Precedence: bulk|list|junk`, a sender that is
/// not empty, not the recipient, and not a system address (`mailer-daemon`,
/// `postmaster`, `owner-…`, `…-request`, `noreply`/`no-reply`).
pub fn answerable(header_block: &[u8], sender: &str, recipient: &str) -> bool {
    let sender = sender.to_lowercase();
    let Some((local, _)) = sender.rsplit_once('@') else {
        return false;
    };
    let system = [
        "mailer-daemon",
        "postmaster",
        "noreply",
        "no-reply",
        "do-not-reply",
    ]
    .contains(&local)
        || local.starts_with("owner-")
        || local.ends_with("-request");
    if system || sender == recipient.to_lowercase() {
        return false;
    }
    let fields = HeaderFields::parse(header_block.to_vec());
    let auto = field(&fields, "Auto-Submitted").is_some_and(|value| {
        !value
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .eq_ignore_ascii_case("no")
    });
    let list = [
        "List-Id",
        "List-Post",
        "List-Unsubscribe",
        "List-Help",
        "List-Subscribe",
        "List-Owner",
        "List-Archive",
    ]
    .iter()
    .any(|name| fields.count(&name.to_lowercase()) > 0);
    let bulk = field(&fields, "Precedence").is_some_and(|value| {
        let first = value.split(|c: char| c.is_whitespace() || c == '(').next();
        ["bulk", "list", "junk"].contains(&first.unwrap_or_default().to_lowercase().as_str())
    });
    // Only mail addressed to the recipient in To or Cc: a Bcc recipient's
    // reply would tell the sender who else got it (RFC 3834 §2).
    let addressed = super::submission::addressed_to(header_block)
        .iter()
        .any(|address| address.eq_ignore_ascii_case(recipient));
    !auto && !list && !bulk && addressed
}

/// The reply `recipient` sends `sender` for a message with `header_block`:
/// the response's subject (else "Auto: " and the message's), its text
/// and/or HTML body (a short default text when it has neither). `None`
/// only when the message cannot be composed.
pub fn reply(
    response: &VacationResponse,
    recipient: &str,
    sender: &str,
    header_block: &[u8],
    now: DateTime<Utc>,
) -> Option<Vec<u8>> {
    let fields = HeaderFields::parse(header_block.to_vec());
    let subject = response.subject.clone().unwrap_or_else(|| {
        let original = field(&fields, "Subject").unwrap_or_default();
        format!("Auto: {original}")
    });
    let text = response
        .text_body
        .clone()
        .map(|text| Part::new("text/plain", Content::Text(text)));
    let html = response
        .html_body
        .clone()
        .map(|html| Part::new("text/html", Content::Text(html)));
    // RFC 8621 §8: with neither body, the server makes one.
    let text = match (text, &html) {
        (None, None) => Some(Part::new(
            "text/plain",
            Content::Text(format!(
                "This is an automatic reply: {recipient} is away and will read your message later."
            )),
        )),
        (text, _) => text,
    };
    let mailbox = |email: &str| Mailbox {
        name: None,
        email: email.to_string(),
    };
    let mut headers = vec![
        Field {
            name: "From".into(),
            value: FieldValue::Addresses(vec![mailbox(recipient)]),
        },
        Field {
            name: "To".into(),
            value: FieldValue::Addresses(vec![mailbox(sender)]),
        },
        Field {
            name: "Subject".into(),
            value: FieldValue::Text(subject),
        },
        Field {
            name: "Auto-Submitted".into(),
            value: FieldValue::Raw(" auto-replied".into()),
        },
    ];
    let id = HeaderProperty::parse("header:Message-ID:asMessageIds")
        .map(|property| fields.render(&property));
    if let Some(Value::Array(ids)) = id {
        let ids: Vec<String> = ids
            .iter()
            .filter_map(|id| id.as_str().map(str::to_string))
            .collect();
        if !ids.is_empty() {
            for name in ["In-Reply-To", "References"] {
                headers.push(Field {
                    name: name.into(),
                    value: FieldValue::MessageIds(ids.clone()),
                });
            }
        }
    }
    let body = body_from_lists(text, html, Vec::new());
    compose(Message { headers, body }, now).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_person_s_own_mail_is_answered() {
        let plain = b"From: ann@example.com\r\nTo: Bob@example.com\r\nSubject: hi\r\n\r\n";
        assert!(answerable(plain, "ann@example.com", "bob@example.com"));
        assert!(!answerable(plain, "bob@example.com", "Bob@Example.com"));
        assert!(!answerable(
            plain,
            "MAILER-DAEMON@example.com",
            "bob@example.com"
        ));
        assert!(!answerable(
            plain,
            "owner-team@example.com",
            "bob@example.com"
        ));
        assert!(!answerable(
            plain,
            "team-request@example.com",
            "bob@example.com"
        ));
        assert!(!answerable(plain, "", "bob@example.com"));
        for header in [
            "Auto-Submitted: auto-replied\r\n",
            "Auto-Submitted: auto-generated; type=x\r\n",
            "List-Id: Team <team.example.com>\r\n",
            "List-Unsubscribe: <mailto:leave@example.com>\r\n",
            "Precedence: bulk\r\n",
            "precedence: LIST\r\n",
            "Precedence: bulk (newsletter)\r\n",
        ] {
            let block = format!("From: ann@example.com\r\nTo: bob@example.com\r\n{header}\r\n");
            assert!(
                !answerable(block.as_bytes(), "ann@example.com", "bob@example.com"),
                "{header}"
            );
        }
        let no = b"Auto-Submitted: no\r\nCc: bob@example.com\r\n\r\n";
        assert!(answerable(no, "ann@example.com", "bob@example.com"));
        // Not addressed to bob (he was a Bcc recipient): no reply.
        let bcc = b"To: kim@example.com\r\n\r\n";
        assert!(!answerable(bcc, "ann@example.com", "bob@example.com"));
    }

    #[test]
    fn the_reply_answers_the_message_and_says_it_is_automatic() {
        let response = VacationResponse {
            is_enabled: true,
            from_date: None,
            to_date: Some(100),
            subject: None,
            text_body: Some("Back on Monday.".into()),
            html_body: None,
        };
        assert!(active(&response, 99) && !active(&response, 100));
        let block = b"Message-ID: <m1@example.com>\r\nSubject: Plans\r\n\r\n";
        let now = DateTime::from_timestamp(0, 0).unwrap();
        let reply = reply(&response, "bob@example.com", "ann@example.com", block, now).unwrap();
        let text = String::from_utf8(reply).unwrap();
        for line in [
            "From: <bob@example.com>\r\n",
            "To: <ann@example.com>\r\n",
            "Subject: Auto: Plans\r\n",
            "Auto-Submitted: auto-replied\r\n",
            "In-Reply-To: <m1@example.com>\r\n",
            "References: <m1@example.com>\r\n",
        ] {
            assert!(text.contains(line), "{line}: {text}");
        }
        assert!(text.contains("Back on Monday."), "{text}");
        let silent = VacationResponse {
            text_body: None,
            ..response
        };
        let default = super::reply(&silent, "b@x.y", "a@x.y", block, now).unwrap();
        let default = String::from_utf8(default).unwrap();
        assert!(default.contains("b@x.y is away"), "{default}");
    }
}

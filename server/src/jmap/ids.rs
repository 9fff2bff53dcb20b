//! JMAP Id strings (RFC 8620 §1.2) for the integer keys of the store.
//!
//! Every object id is a one-letter type prefix followed by the decimal row id
//! (`a7` account, `m3` mailbox, `e42` email, `t9` thread, `i2` identity, `s5` submission), so an id of one type
//! can never be mistaken for another. Blob ids are the hex SHA-256 of the bytes
//! (see [`crate::blob`]); body-part blob ids append `_` and the part id.

/// Renders an account row id as a JMAP accountId.
pub fn account_id(id: i64) -> String {
    format!("a{id}")
}

/// Renders a mailbox row id as a JMAP Mailbox id.
pub fn mailbox_id(id: i64) -> String {
    format!("m{id}")
}

/// Renders an email row id as a JMAP Email id.
pub fn email_id(id: i64) -> String {
    format!("e{id}")
}

/// Renders a thread row id as a JMAP Thread id.
pub fn thread_id(id: i64) -> String {
    format!("t{id}")
}

/// Renders an identity row id as a JMAP Identity id.
pub fn identity_id(id: i64) -> String {
    format!("i{id}")
}

/// Renders an EmailSubmission row id as a JMAP EmailSubmission id.
pub fn submission_id(id: i64) -> String {
    format!("s{id}")
}

/// Blob id of one body part of a message: `{message blobId}_{partId}` (RFC 8621 §4.1.4).
pub fn part_blob_id(message_blob_id: &str, part_id: &str) -> String {
    crate::mail::body::part_blob_id(message_blob_id, part_id)
}

fn parse_prefixed(prefix: char, id: &str) -> Option<i64> {
    let digits = id.strip_prefix(prefix)?.as_bytes();
    // No leading zeros: one row, one id string. At most 18 digits: no overflow.
    if digits.is_empty() || digits.len() > 18 || (digits.len() > 1 && digits[0] == b'0') {
        return None;
    }
    digits.iter().try_fold(0i64, |value, &digit| {
        digit
            .is_ascii_digit()
            .then(|| value * 10 + i64::from(digit - b'0'))
    })
}

/// Parses a JMAP accountId; `None` when it is not one of ours.
pub fn parse_account_id(id: &str) -> Option<i64> {
    parse_prefixed('a', id)
}

/// Parses a JMAP Mailbox id; `None` when it is not one of ours.
pub fn parse_mailbox_id(id: &str) -> Option<i64> {
    parse_prefixed('m', id)
}

/// Parses a JMAP Identity id; `None` when it is not one of ours.
pub fn parse_identity_id(id: &str) -> Option<i64> {
    parse_prefixed('i', id)
}

/// Parses a JMAP EmailSubmission id; `None` when it is not one of ours.
pub fn parse_submission_id(id: &str) -> Option<i64> {
    parse_prefixed('s', id)
}

/// Parses a JMAP Email id; `None` when it is not one of ours.
pub fn parse_email_id(id: &str) -> Option<i64> {
    parse_prefixed('e', id)
}

/// Parses a JMAP Thread id; `None` when it is not one of ours.
pub fn parse_thread_id(id: &str) -> Option<i64> {
    parse_prefixed('t', id)
}

/// Splits a blob id into the message blob id and, for a body part, its part
/// id (or `_`-separated path of part ids into attached messages).
/// Returns `None` when the message blob id is not 64 lowercase hex digits.
pub fn parse_blob_id(id: &str) -> Option<(&str, Option<&str>)> {
    let (message, part) = match id.split_once('_') {
        Some((message, part)) => (message, Some(part)),
        None => (id, None),
    };
    let is_hex = message.len() == 64
        && message
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    // A part id, or a path of part ids into attached messages (`3_2`).
    let valid_part = |part: &str| {
        part.split('_')
            .all(|step| !step.is_empty() && step.bytes().all(|b| b.is_ascii_digit()))
    };
    if !is_hex || part.is_some_and(|p| !valid_part(p)) {
        return None;
    }
    Some((message, part))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_reject_foreign_shapes() {
        assert_eq!(email_id(42), "e42");
        assert_eq!(parse_email_id("e42"), Some(42));
        assert_eq!(parse_email_id("m42"), None);
        assert_eq!(parse_email_id("e042"), None);
        assert_eq!(parse_email_id("e"), None);
        assert_eq!(parse_email_id("e1x"), None);
        assert_eq!(parse_email_id("e-1"), None);
        assert_eq!(parse_email_id("e+1"), None);
        assert_eq!(
            parse_email_id("e999999999999999999"),
            Some(999_999_999_999_999_999)
        );
        assert_eq!(parse_email_id("e1000000000000000000"), None);
        assert_eq!(parse_mailbox_id("m0"), Some(0));
        let hex = "ab".repeat(32);
        assert_eq!(parse_blob_id(&hex), Some((hex.as_str(), None)));
        let part = format!("{hex}_3");
        assert_eq!(parse_blob_id(&part), Some((hex.as_str(), Some("3"))));
        assert_eq!(parse_blob_id("abc"), None);
        assert_eq!(parse_blob_id(&format!("{hex}_")), None);
        let nested = format!("{hex}_3_2");
        assert_eq!(parse_blob_id(&nested), Some((hex.as_str(), Some("3_2"))));
        assert_eq!(parse_blob_id(&format!("{hex}_3_")), None);
    }
}

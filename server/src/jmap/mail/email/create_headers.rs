//! The header fields an Email/set `create` writes ([`super::create`]):
//! `header:{name}[:as{Form}]` and the §4.1.3 convenience properties, each
//! value checked in its form (RFC 8621 §4.1.2, §4.6).

use std::collections::BTreeMap;

use chrono::DateTime;
use serde_json::Value;

use super::draft::{Problems, path};
use crate::mail::compose::{Field, FieldValue, Group, Mailbox};
use crate::mail::property::{HeaderForm, HeaderProperty};

/// The fields written for header-defining properties (of the Email, or of a
/// part at `at`): each field name defined once (RFC 8621 §4.6), each value in
/// its property's form; a null value (or an empty list) writes nothing.
pub(super) fn header_fields(
    at: &str,
    definitions: &[(&str, HeaderProperty, &Value)],
    problems: &mut Problems,
) -> Vec<Field> {
    let mut by_name: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (key, header, _) in definitions {
        by_name.entry(header.name.as_str()).or_default().push(*key);
    }
    for keys in by_name.values().filter(|keys| keys.len() > 1) {
        for key in keys {
            problems.add(
                path(at, key),
                "the same header field is defined twice (RFC 8621 §4.6)",
            );
        }
    }
    let mut fields = Vec::new();
    for (key, header, value) in definitions {
        let name = field_name(key, &header.name);
        let here = path(at, key);
        let values: Vec<(String, &Value)> = match (header.all, value) {
            (_, Value::Null) => Vec::new(),
            (true, Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, item)| (path(&here, &i.to_string()), item))
                .collect(),
            (true, _) => {
                problems.add(here, "an :all header property takes a list of values");
                continue;
            }
            (false, value) => vec![(here, *value)],
        };
        for (here, value) in values {
            match field_value(value, header.form) {
                Ok(Some(value)) => fields.push(Field {
                    name: name.clone(),
                    value,
                }),
                Ok(None) => {}
                Err(reason) => problems.add(here, reason),
            }
        }
    }
    fields
}

/// The name to write: a known field in its usual spelling, any other as the
/// client spelled it in `header:{name}`.
fn field_name(key: &str, lowercase: &str) -> String {
    const KNOWN: &[&str] = &[
        "From",
        "Sender",
        "Reply-To",
        "To",
        "Cc",
        "Bcc",
        "Message-ID",
        "In-Reply-To",
        "References",
        "Subject",
        "Date",
        "MIME-Version",
        "Comments",
        "Keywords",
        "List-Help",
        "List-Unsubscribe",
        "List-Subscribe",
        "List-Post",
        "List-Owner",
        "List-Archive",
        "Content-Description",
    ];
    if let Some(known) = KNOWN.iter().find(|k| k.eq_ignore_ascii_case(lowercase)) {
        return known.to_string();
    }
    key.strip_prefix("header:")
        .and_then(|rest| rest.split(':').next())
        .unwrap_or(lowercase)
        .to_string()
}

/// One header value in `form` (RFC 8621 §4.1.2); `None` writes no field.
fn field_value(value: &Value, form: HeaderForm) -> Result<Option<FieldValue>, String> {
    if value.is_null() {
        return Ok(None);
    }
    let string = || value.as_str().ok_or_else(|| "must be a String".to_string());
    let field = match form {
        HeaderForm::Raw => {
            let raw = string()?;
            if !is_folded_raw(raw) {
                return Err(
                    "a raw value may hold CR and LF only as folding (CRLF then a space or tab)"
                        .into(),
                );
            }
            Some(FieldValue::Raw(raw.to_string()))
        }
        HeaderForm::Text => Some(FieldValue::Text(string()?.to_string())),
        HeaderForm::Addresses => {
            items(value, "EmailAddress objects", mailbox)?.map(FieldValue::Addresses)
        }
        HeaderForm::GroupedAddresses => {
            items(value, "EmailAddressGroup objects", group)?.map(FieldValue::GroupedAddresses)
        }
        HeaderForm::MessageIds | HeaderForm::Urls => {
            let items = items(value, "Strings", |item| {
                match item.as_str() {
                Some(item) if form == HeaderForm::MessageIds && is_msg_id(item) => Ok(item.to_string()),
                Some(item) if form == HeaderForm::Urls && is_token_like(item) => Ok(item.to_string()),
                Some(_) if form == HeaderForm::MessageIds => Err("each must be a msg-id without its angle brackets: id-left@id-right, dot-separated atoms (RFC 5322 §3.6.4)".to_string()),
                _ => Err("each must be a String without white space, control characters or angle brackets".to_string()),
            }
            })?;
            match form {
                HeaderForm::MessageIds => items.map(FieldValue::MessageIds),
                _ => items.map(FieldValue::Urls),
            }
        }
        HeaderForm::Date => Some(FieldValue::Date(
            DateTime::parse_from_rfc3339(string()?)
                .map_err(|_| "must be an RFC 3339 date".to_string())?,
        )),
    };
    Ok(field)
}

/// A list of `what`, each read by `item`; `None` when it is empty (an empty
/// list writes no field).
fn items<T>(
    value: &Value,
    what: &str,
    item: impl Fn(&Value) -> Result<T, String>,
) -> Result<Option<Vec<T>>, String> {
    let list = value
        .as_array()
        .ok_or_else(|| format!("must be a list of {what}"))?;
    let items = list.iter().map(item).collect::<Result<Vec<_>, _>>()?;
    Ok((!items.is_empty()).then_some(items))
}

/// An EmailAddress object (RFC 8621 §4.1.2.3): `email` a String, `name` a
/// String or null.
fn mailbox(value: &Value) -> Result<Mailbox, String> {
    let object = value
        .as_object()
        .ok_or_else(|| "each address must be an EmailAddress object".to_string())?;
    let email = match object.get("email").and_then(Value::as_str) {
        Some(email) if is_addr_spec(email) => email.to_string(),
        _ => return Err("an address's email must be an addr-spec: local-part@domain, each dot-separated atoms (RFC 5322 §3.4.1; UTF-8 allowed, RFC 6532)".into()),
    };
    let name = optional_string(object.get("name"))
        .map_err(|_| "an address's name must be a String or null".to_string())?;
    Ok(Mailbox { name, email })
}

/// An EmailAddressGroup object (RFC 8621 §4.1.2.4).
fn group(value: &Value) -> Result<Group, String> {
    let object = value
        .as_object()
        .ok_or_else(|| "each group must be an EmailAddressGroup object".to_string())?;
    let name = optional_string(object.get("name"))
        .map_err(|_| "a group's name must be a String or null".to_string())?;
    let addresses = object
        .get("addresses")
        .and_then(Value::as_array)
        .ok_or_else(|| "a group's addresses must be a list".to_string())?
        .iter()
        .map(mailbox)
        .collect::<Result<_, _>>()?;
    Ok(Group { name, addresses })
}

/// A String or null (absent is null).
pub(super) fn optional_string(value: Option<&Value>) -> Result<Option<String>, ()> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(()),
    }
}

/// RFC 5322 `atext`, with any non-ASCII character (RFC 6532 §3.2).
fn is_atext(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-/=?^_`{|}~".contains(c) || !c.is_ascii()
}

/// A dot-atom: atoms of [`is_atext`] joined by single dots (RFC 5322 §3.2.3).
fn is_dot_atom(text: &str) -> bool {
    !text.is_empty()
        && text
            .split('.')
            .all(|atom| !atom.is_empty() && atom.chars().all(|c| is_atext(c) && !c.is_control()))
}

/// An addr-spec written as a dot-atom on both sides of one `@` (RFC 5322
/// §3.4.1): what Email/get reads back as the same `email`. Quoted local
/// parts and domain literals are not accepted.
fn is_addr_spec(email: &str) -> bool {
    email
        .rsplit_once('@')
        .is_some_and(|(local, domain)| is_dot_atom(local) && is_dot_atom(domain))
}

/// A msg-id's inside (RFC 5322 §3.6.4: `id-left "@" id-right`, written
/// here as dot-atoms): what Email/get reads back as the same id.
fn is_msg_id(id: &str) -> bool {
    is_addr_spec(id)
}

/// Non-empty, and no white space, control character or angle bracket: what
/// an addr-spec, msg-id, URL, Content-ID or Content-Location can be written
/// as without changing the field's structure.
pub(super) fn is_token_like(value: &str) -> bool {
    !value.is_empty()
        && !value
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '<' || c == '>')
}

/// A Raw value (RFC 8621 §4.1.2.1) is written as given: a CR or LF in it
/// must be folding white space (CRLF then a space or tab), never a line of
/// its own, which would start a new field.
fn is_folded_raw(raw: &str) -> bool {
    let bytes = raw.as_bytes();
    bytes.iter().enumerate().all(|(i, &b)| match b {
        b'\r' => bytes.get(i + 1) == Some(&b'\n') && matches!(bytes.get(i + 2), Some(b' ' | b'\t')),
        b'\n' => i > 0 && bytes[i - 1] == b'\r',
        0 => false,
        _ => true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_values_may_fold_but_not_start_a_line() {
        assert!(is_folded_raw(" a\r\n b"));
        assert!(is_folded_raw("a\r\n\tb"));
        assert!(!is_folded_raw("a\r\nb"));
        assert!(!is_folded_raw("a\nb"));
        assert!(!is_folded_raw("a\rb"));
        assert!(!is_folded_raw("a\r\n"));
    }
}

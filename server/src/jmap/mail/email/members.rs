//! The members an Email names by id (RFC 8621 §4.1.1 `keywords`, §4.1.1
//! `mailboxIds`) as Email/set (create and update) and Email/import read
//! them from JSON: one reader for the three.

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use super::super::mailbox::set::resolve_mailbox_id;
use crate::jmap::error::SetError;

/// A keyword as RFC 8621 §4.1.1 allows it (IMAP atom characters), lowercased.
pub fn valid_keyword(keyword: &str) -> Option<String> {
    let ok = !keyword.is_empty()
        && keyword.len() <= 255
        && keyword
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && !b"(){]%*\"\\".contains(&b));
    ok.then(|| keyword.to_ascii_lowercase())
}

/// Parses `{"keyword": true, …}` into a set.
pub fn parse_keywords(value: &Value) -> Result<BTreeSet<String>, SetError> {
    let object = value
        .as_object()
        .ok_or_else(|| SetError::invalid_properties(&["keywords"], "keywords must be an object"))?;
    object
        .iter()
        .map(|(keyword, set)| match (valid_keyword(keyword), set) {
            (Some(keyword), Value::Bool(true)) => Ok(keyword),
            _ => Err(SetError::invalid_properties(
                &["keywords"],
                format!("invalid keyword {keyword}"),
            )),
        })
        .collect()
}

/// Parses `{"mailboxId": true, …}` into a set of mailbox row ids.
pub fn parse_mailbox_ids(
    value: &Value,
    created_ids: &HashMap<String, String>,
) -> Result<BTreeSet<i64>, SetError> {
    let object = value.as_object().ok_or_else(|| {
        SetError::invalid_properties(&["mailboxIds"], "mailboxIds must be an object")
    })?;
    object
        .iter()
        .map(
            |(id, set)| match (resolve_mailbox_id(id, created_ids), set) {
                (Some(id), Value::Bool(true)) => Ok(id),
                _ => Err(SetError::invalid_properties(
                    &["mailboxIds"],
                    format!("invalid mailbox id {id}"),
                )),
            },
        )
        .collect()
}

//! A local answer in the upstream's terms: its accountId, Email ids,
//! threadIds, blobIds and Mailbox ids, and its state strings.

use std::collections::HashMap;

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::jmap::ids;
use crate::jmap::request::write_value;

/// Local names → the upstream's, for one Email/get answer.
pub(super) struct Translation<'a> {
    pub(super) emails: &'a HashMap<String, &'a crate::store::MirroredEmail>,
    /// Local mailbox row id → upstream Mailbox id.
    pub(super) mailboxes: &'a HashMap<i64, String>,
}

/// An object member's name as JSON text has it: borrowed unless escaped.
#[derive(Debug, serde::Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Key<'a>(#[serde(borrow)] std::borrow::Cow<'a, str>);

/// An object's members as JSON text, in serde_json's map order (the order
/// its `Map` writes them, which is how this server writes its answers).
type Members<'a> = std::collections::BTreeMap<Key<'a>, &'a RawValue>;

impl Translation<'_> {
    pub(super) fn email_id(&self, id: &mut Value) {
        if let Some(mapped) = id.as_str().and_then(|local| self.emails.get(local)) {
            *id = Value::String(mapped.upstream_id.clone());
        }
    }

    /// A local Email/get answer (its JSON text) as the upstream names it:
    /// `accountId` and `state` the upstream's, each email as
    /// [`Translation::email`] writes it, `notFound` ids the upstream's.
    /// Written in serde_json's map order, as the answer was: what a
    /// Value of it would serialize to, without building one (issue 19:
    /// the parse and the second serialization were a tenth of the proxy's
    /// core). `None` when the text is not such an answer.
    pub(super) fn answer(&self, local: &str, account_id: &str, state: &str) -> Option<String> {
        // One pass over the text: each email's members found, not parsed.
        #[derive(serde::Deserialize)]
        struct LocalGet<'a> {
            #[serde(borrow)]
            list: Vec<Members<'a>>,
            #[serde(rename = "notFound")]
            not_found: Vec<Value>,
        }
        let LocalGet { list, not_found } = serde_json::from_str(local).ok()?;
        let mut out = Vec::with_capacity(local.len() + 256);
        out.extend_from_slice(b"{\"accountId\":");
        write_value(&mut out, account_id);
        out.extend_from_slice(b",\"list\":[");
        for (position, email) in list.iter().enumerate() {
            if position > 0 {
                out.push(b',');
            }
            self.email(email, &mut out)?;
        }
        out.extend_from_slice(b"],\"notFound\":[");
        for (position, id) in not_found.into_iter().enumerate() {
            if position > 0 {
                out.push(b',');
            }
            let mut id = id;
            self.email_id(&mut id);
            write_value(&mut out, &id);
        }
        out.extend_from_slice(b"],\"state\":");
        write_value(&mut out, state);
        out.push(b'}');
        String::from_utf8(out).ok()
    }

    /// Appends local Email object `email` (JSON text) to `out` as the
    /// upstream names it: `id`, `threadId`, `blobId` and each part's
    /// `blobId` the upstream's, `mailboxIds` keyed by upstream Mailbox ids
    /// (one the mirror does not map left out); every other member as it
    /// was written. An email the translation does not know is written as
    /// it was. `None` when a member to translate is not what it should be.
    pub(super) fn email(&self, members: &Members, out: &mut Vec<u8>) -> Option<()> {
        let mapped = members
            .get(&Key("id".into()))
            .and_then(|id| serde_json::from_str::<&str>(id.get()).ok())
            .and_then(|local| self.emails.get(local));
        const PART_LISTS: [&str; 3] = ["textBody", "htmlBody", "attachments"];
        // The part map is read only for an answer that has parts (a list
        // view's has none).
        let has_parts = members.keys().any(|Key(name)| {
            name == "bodyStructure" || name == "bodyValues" || PART_LISTS.contains(&name.as_ref())
        });
        let parts: Map<String, Value> = mapped
            .and_then(|mapped| mapped.parts.as_deref())
            .filter(|_| has_parts)
            .and_then(|parts| serde_json::from_str(parts).ok())
            .unwrap_or_default();
        out.push(b'{');
        for (position, (Key(name), raw)) in members.iter().enumerate() {
            if position > 0 {
                out.push(b',');
            }
            write_value(out, name.as_ref());
            out.push(b':');
            let Some(mapped) = mapped else {
                out.extend_from_slice(raw.get().as_bytes());
                continue;
            };
            match name.as_ref() {
                "id" => write_value(out, &mapped.upstream_id),
                "threadId" => write_value(out, &mapped.thread_id),
                "blobId" => write_value(out, &mapped.blob_id),
                "mailboxIds" => {
                    let local: Map<String, Value> = serde_json::from_str(raw.get()).ok()?;
                    let translated: Map<String, Value> = local
                        .into_iter()
                        .filter_map(|(local, value)| {
                            let local = ids::parse_mailbox_id(&local)?;
                            Some((self.mailboxes.get(&local)?.clone(), value))
                        })
                        .collect();
                    write_value(out, &translated);
                }
                "bodyStructure" => {
                    let mut structure: Value = serde_json::from_str(raw.get()).ok()?;
                    Self::part(&mut structure, &parts);
                    write_value(out, &structure);
                }
                "bodyValues" => write_value(out, &Self::body_values(raw.get(), &parts)?),
                list if PART_LISTS.contains(&list) => {
                    let mut list: Value = serde_json::from_str(raw.get()).ok()?;
                    if let Value::Array(list) = &mut list {
                        for part in list {
                            Self::part(part, &parts);
                        }
                    }
                    write_value(out, &list);
                }
                _ => out.extend_from_slice(raw.get().as_bytes()),
            }
        }
        out.push(b'}');
        Some(())
    }
}

impl Translation<'_> {
    /// An Email's `bodyValues` (JSON text) keyed by the upstream's partIds
    /// where the email's part map renames parts (`[upstream partId,
    /// blobId]` entries); `None` when it is not an object.
    fn body_values(raw: &str, parts: &Map<String, Value>) -> Option<Map<String, Value>> {
        let local: Map<String, Value> = serde_json::from_str(raw).ok()?;
        Some(
            local
                .into_iter()
                .map(|(part_id, value)| {
                    let renamed = match parts.get(&part_id) {
                        Some(Value::Array(named)) => named.first().and_then(Value::as_str),
                        _ => None,
                    };
                    (renamed.map_or(part_id.clone(), str::to_string), value)
                })
                .collect(),
        )
    }

    /// A body part (and its sub-parts) as the upstream names it, by the
    /// email's part map (`mirror/apply.rs`, `part_map`): its blobId the
    /// upstream's, and its partId too where the upstream numbers parts
    /// otherwise. The part is found by its partId, or by the one a local
    /// part blobId ends in (`{blobId}_{partId}`) when `partId` was not
    /// asked for.
    pub(super) fn part(part: &mut Value, parts: &Map<String, Value>) {
        let Some(object) = part.as_object_mut() else {
            return;
        };
        if let Some(Value::String(local)) = object.get("blobId") {
            let part_id = object
                .get("partId")
                .and_then(Value::as_str)
                .or_else(|| local.split_once('_').map(|(_, part_id)| part_id));
            match part_id.and_then(|part_id| parts.get(part_id)).cloned() {
                Some(Value::Array(named)) => {
                    let mut named = named.into_iter();
                    let (upstream_id, blob) = (named.next(), named.next());
                    if let Some(upstream_id) = upstream_id.filter(|_| object.contains_key("partId"))
                    {
                        object.insert("partId".into(), upstream_id);
                    }
                    object.insert("blobId".into(), blob.unwrap_or(Value::Null));
                }
                Some(blob) => {
                    object.insert("blobId".into(), blob);
                }
                None => {}
            }
        }
        if let Some(Value::Array(children)) = object.get_mut("subParts") {
            for child in children {
                Self::part(child, parts);
            }
        }
    }
}

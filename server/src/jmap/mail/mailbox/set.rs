//! Mailbox/set (RFC 8621 §2.5, RFC 8620 §5.3): create, update (rename,
//! move, subscribe) and destroy (with `onDestroyRemoveEmails`).

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::my_rights;
use crate::jmap::dispatch::CallContext;
use crate::jmap::error::{MethodError, SetError};
use crate::jmap::{args, ids};
use crate::store::{MailboxPatch, MailboxRow, NewMailbox, StoreError};

/// Roles a mailbox may have (IANA "IMAP Mailbox Name Attributes", RFC 8621 §2).
const ROLES: &[&str] = &[
    "all",
    "archive",
    "drafts",
    "flagged",
    "important",
    "inbox",
    "junk",
    "sent",
    "subscribed",
    "trash",
];

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SetRequest {
    account_id: String,
    if_in_state: Option<String>,
    create: Option<HashMap<String, Map<String, Value>>>,
    update: Option<HashMap<String, Map<String, Value>>>,
    destroy: Option<Vec<String>>,
    #[serde(default)]
    on_destroy_remove_emails: bool,
}

/// Resolves a mailbox id or `#creationId` reference (RFC 8620 §5.3).
pub fn resolve_mailbox_id(id: &str, created_ids: &HashMap<String, String>) -> Option<i64> {
    match id.strip_prefix('#') {
        Some(creation_id) => created_ids
            .get(creation_id)
            .and_then(|id| ids::parse_mailbox_id(id)),
        None => ids::parse_mailbox_id(id),
    }
}

/// The writable properties of a create or update, validated.
fn parse_properties(
    object: &Map<String, Value>,
    created_ids: &HashMap<String, String>,
    max_name: u64,
) -> Result<MailboxPatch, SetError> {
    let mut patch = MailboxPatch::default();
    for (name, value) in object {
        match name.as_str() {
            "name" => match value.as_str() {
                Some(n)
                    if !n.trim().is_empty()
                        && n.chars().count() as u64 <= max_name
                        && !n.contains(char::is_control) =>
                {
                    patch.name = Some(n.to_string())
                }
                _ => {
                    return Err(SetError::invalid_properties(
                        &["name"],
                        "name must be 1 to 255 printable characters",
                    ));
                }
            },
            "parentId" => match value {
                Value::Null => patch.parent_id = Some(None),
                Value::String(id) => match resolve_mailbox_id(id, created_ids) {
                    Some(parent) => patch.parent_id = Some(Some(parent)),
                    None => {
                        return Err(SetError::invalid_properties(
                            &["parentId"],
                            "no such parent mailbox",
                        ));
                    }
                },
                _ => {
                    return Err(SetError::invalid_properties(
                        &["parentId"],
                        "parentId must be an id or null",
                    ));
                }
            },
            "role" => match value {
                Value::Null => patch.role = Some(None),
                Value::String(role) if ROLES.contains(&role.to_lowercase().as_str()) => {
                    patch.role = Some(Some(role.to_lowercase()))
                }
                _ => return Err(SetError::invalid_properties(&["role"], "unknown role")),
            },
            "sortOrder" => match value.as_u64() {
                Some(order) if order <= u32::MAX as u64 => patch.sort_order = Some(order as i64),
                _ => {
                    return Err(SetError::invalid_properties(
                        &["sortOrder"],
                        "sortOrder must be an UnsignedInt",
                    ));
                }
            },
            "isSubscribed" => match value.as_bool() {
                Some(subscribed) => patch.is_subscribed = Some(subscribed),
                None => {
                    return Err(SetError::invalid_properties(
                        &["isSubscribed"],
                        "isSubscribed must be a boolean",
                    ));
                }
            },
            "id" | "totalEmails" | "unreadEmails" | "totalThreads" | "unreadThreads"
            | "myRights" => {
                return Err(SetError::invalid_properties(
                    &[name.as_str()],
                    "server-set property",
                ));
            }
            other => return Err(SetError::invalid_properties(&[other], "unknown property")),
        }
    }
    Ok(patch)
}

/// Levels below mailbox `id` (0 for a leaf).
fn height_below(mailboxes: &[MailboxRow], id: i64, limit: u64) -> u64 {
    if limit == 0 {
        return 0;
    }
    mailboxes
        .iter()
        .filter(|m| m.parent_id == Some(id))
        .map(|child| 1 + height_below(mailboxes, child.id, limit - 1))
        .max()
        .unwrap_or(0)
}

/// Checks sibling-name uniqueness, role uniqueness, parent existence, cycles
/// and `maxMailboxDepth` (RFC 8621 §1.3.1: a top-level mailbox is depth 1).
fn check_tree(
    mailboxes: &[MailboxRow],
    id: Option<i64>,
    parent: Option<i64>,
    name: &str,
    role: Option<&str>,
    max_depth: u64,
) -> Result<(), SetError> {
    let mut ancestors = 0u64;
    let mut cursor = parent;
    while let Some(current) = cursor {
        ancestors += 1;
        if ancestors > max_depth + 1 {
            break;
        }
        cursor = mailboxes
            .iter()
            .find(|m| m.id == current)
            .and_then(|m| m.parent_id);
    }
    let below = id.map_or(0, |id| height_below(mailboxes, id, max_depth + 1));
    if ancestors + 1 + below > max_depth {
        return Err(SetError::invalid_properties(
            &["parentId"],
            format!("mailboxes nest at most {max_depth} deep"),
        ));
    }
    if let Some(parent) = parent {
        if !mailboxes.iter().any(|m| m.id == parent) {
            return Err(SetError::invalid_properties(
                &["parentId"],
                "no such parent mailbox",
            ));
        }
        let mut cursor = Some(parent);
        while let Some(current) = cursor {
            if Some(current) == id {
                return Err(SetError::invalid_properties(
                    &["parentId"],
                    "a mailbox cannot be its own ancestor",
                ));
            }
            cursor = mailboxes
                .iter()
                .find(|m| m.id == current)
                .and_then(|m| m.parent_id);
        }
    }
    if mailboxes
        .iter()
        .any(|m| Some(m.id) != id && m.parent_id == parent && m.name.eq_ignore_ascii_case(name))
    {
        return Err(SetError::invalid_properties(
            &["name"],
            "a sibling mailbox has this name",
        ));
    }
    if let Some(role) = role
        && mailboxes
            .iter()
            .any(|m| Some(m.id) != id && m.role.as_deref() == Some(role))
    {
        return Err(SetError::invalid_properties(
            &["role"],
            "another mailbox has this role",
        ));
    }
    Ok(())
}

/// Orders creations so that a mailbox whose `parentId` is `#creationId` of
/// another creation in the same call comes after it (ties by creation id).
fn creation_order(
    creates: HashMap<String, Map<String, Value>>,
) -> Vec<(String, Map<String, Value>)> {
    let mut pending: Vec<(String, Map<String, Value>)> = creates.into_iter().collect();
    pending.sort_by(|a, b| a.0.cmp(&b.0));
    let mut ordered = Vec::with_capacity(pending.len());
    while !pending.is_empty() {
        let waiting_on = |object: &Map<String, Value>, pending: &[(String, Map<String, Value>)]| {
            object
                .get("parentId")
                .and_then(Value::as_str)
                .and_then(|p| p.strip_prefix('#'))
                .is_some_and(|parent| pending.iter().any(|(id, _)| id == parent))
        };
        let ready = pending
            .iter()
            .position(|(_, object)| !waiting_on(object, &pending))
            .unwrap_or(0);
        ordered.push(pending.remove(ready));
    }
    ordered
}

/// Handles one Mailbox/set call: creates, then updates, then destroys.
#[tracing::instrument(skip_all, fields(account = ctx.account.id))]
pub async fn mailbox_set(
    ctx: &mut CallContext<'_>,
    arguments: Map<String, Value>,
) -> Result<Value, MethodError> {
    let request: SetRequest = args::parse(arguments)?;
    args::check_account(ctx.account, &request.account_id)?;
    let store = ctx.jmap.store.clone();
    let account = ctx.account.id;
    let old_state = store.states(account).await?.mailbox;
    args::check_if_in_state(request.if_in_state.as_deref(), old_state)?;
    let total = request.create.as_ref().map_or(0, HashMap::len)
        + request.update.as_ref().map_or(0, HashMap::len)
        + request.destroy.as_ref().map_or(0, Vec::len);
    args::check_set_size(total, ctx.jmap.limits.max_objects_in_set)?;
    let max_name = ctx.jmap.limits.max_size_mailbox_name;
    let (mut created, mut not_created) = (Map::new(), Vec::new());
    let max_depth = ctx.jmap.limits.max_mailbox_depth;
    // Read once; kept up to date below as each change is made.
    let mut mailboxes = store.mailboxes(account).await?;
    let creates = creation_order(request.create.unwrap_or_default());
    for (creation_id, object) in creates {
        let outcome = match parse_properties(&object, ctx.created_ids, max_name) {
            Err(error) => Err(error),
            Ok(patch) => match patch.name.clone() {
                None => Err(SetError::invalid_properties(&["name"], "name is required")),
                Some(name) => {
                    let parent = patch.parent_id.flatten();
                    let role = patch.role.clone().flatten();
                    match check_tree(&mailboxes, None, parent, &name, role.as_deref(), max_depth) {
                        Err(error) => Err(error),
                        Ok(()) => {
                            let new = NewMailbox {
                                parent_id: parent,
                                name,
                                role,
                                sort_order: patch.sort_order.unwrap_or(0),
                                is_subscribed: patch.is_subscribed.unwrap_or(true),
                            };
                            let id = store.create_mailbox(account, &new).await?;
                            mailboxes.push(MailboxRow {
                                id,
                                parent_id: new.parent_id,
                                name: new.name,
                                role: new.role,
                                sort_order: new.sort_order,
                                is_subscribed: new.is_subscribed,
                                total_emails: 0,
                                unread_emails: 0,
                                total_threads: 0,
                                unread_threads: 0,
                            });
                            Ok(id)
                        }
                    }
                }
            },
        };
        match outcome {
            Ok(id) => {
                let jmap_id = ids::mailbox_id(id);
                ctx.created_ids.insert(creation_id.clone(), jmap_id.clone());
                created.insert(
                    creation_id,
                    json!({"id": jmap_id, "totalEmails": 0, "unreadEmails": 0, "totalThreads": 0, "unreadThreads": 0, "myRights": my_rights()}),
                );
            }
            Err(error) => not_created.push((creation_id, error)),
        }
    }
    let (mut updated, mut not_updated) = (Map::new(), Vec::new());
    for (id, object) in request.update.unwrap_or_default() {
        let Some(current) = resolve_mailbox_id(&id, ctx.created_ids)
            .and_then(|n| mailboxes.iter().find(|m| m.id == n))
            .cloned()
        else {
            not_updated.push((id, SetError::not_found()));
            continue;
        };
        let outcome = parse_properties(&object, ctx.created_ids, max_name).and_then(|patch| {
            let name = patch.name.clone().unwrap_or_else(|| current.name.clone());
            let parent = patch.parent_id.unwrap_or(current.parent_id);
            let role = patch.role.clone().unwrap_or_else(|| current.role.clone());
            check_tree(
                &mailboxes,
                Some(current.id),
                parent,
                &name,
                role.as_deref(),
                max_depth,
            )
            .map(|()| patch)
        });
        match outcome {
            Ok(patch) => {
                store.update_mailbox(account, current.id, &patch).await?;
                if let Some(row) = mailboxes.iter_mut().find(|m| m.id == current.id) {
                    if let Some(name) = patch.name {
                        row.name = name;
                    }
                    if let Some(parent) = patch.parent_id {
                        row.parent_id = parent;
                    }
                    if let Some(role) = patch.role {
                        row.role = role;
                    }
                    if let Some(order) = patch.sort_order {
                        row.sort_order = order;
                    }
                    if let Some(subscribed) = patch.is_subscribed {
                        row.is_subscribed = subscribed;
                    }
                }
                updated.insert(id, Value::Null);
            }
            Err(error) => not_updated.push((id, error)),
        }
    }
    let (mut destroyed, mut not_destroyed) = (Vec::new(), Vec::new());
    for id in request.destroy.unwrap_or_default() {
        let Some(current) = resolve_mailbox_id(&id, ctx.created_ids)
            .and_then(|n| mailboxes.iter().find(|m| m.id == n))
            .cloned()
        else {
            not_destroyed.push((id, SetError::not_found()));
            continue;
        };
        if current.role.as_deref() == Some("inbox") {
            not_destroyed.push((
                id,
                SetError::new("forbidden", "the inbox cannot be destroyed"),
            ));
            continue;
        }
        match store
            .destroy_mailbox(account, current.id, request.on_destroy_remove_emails)
            .await
        {
            Ok(()) => {
                mailboxes.retain(|m| m.id != current.id);
                destroyed.push(id);
            }
            Err(StoreError::MailboxHasChild) => not_destroyed.push((
                id,
                SetError::new("mailboxHasChild", "the mailbox has child mailboxes"),
            )),
            Err(StoreError::MailboxHasEmail) => not_destroyed.push((
                id,
                SetError::new("mailboxHasEmail", "the mailbox has emails"),
            )),
            Err(StoreError::NotFound) => not_destroyed.push((id, SetError::not_found())),
            Err(error) => return Err(error.into()),
        }
    }
    let new_state = store.states(account).await?.mailbox;
    Ok(json!({
        "accountId": request.account_id,
        "oldState": old_state.to_string(),
        "newState": new_state.to_string(),
        "created": if created.is_empty() { Value::Null } else { Value::Object(created) },
        "updated": if updated.is_empty() { Value::Null } else { Value::Object(updated) },
        "destroyed": if destroyed.is_empty() { Value::Null } else { json!(destroyed) },
        "notCreated": args::set_error_map(not_created),
        "notUpdated": args::set_error_map(not_updated),
        "notDestroyed": args::set_error_map(not_destroyed),
    }))
}

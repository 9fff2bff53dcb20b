//! Mailbox/set (RFC 8621 §2.5, RFC 8620 §5.3): create, update (rename,
//! move, subscribe) and destroy (with `onDestroyRemoveEmails`).

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::my_rights;
use crate::jmap::call::CallContext;
use crate::jmap::error::{MethodError, SetError};
use crate::jmap::mail::set::{SetArgs, SetOutcome};
use crate::jmap::{args, ids};
use crate::mail::writer::WriteError;
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

/// Mailbox/set arguments (RFC 8621 §2.5).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetRequest {
    #[serde(flatten)]
    set: SetArgs,
    #[serde(default)]
    on_destroy_remove_emails: bool,
}

args::account_arguments!(SetRequest, set.account_id);

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
        let invalid = |why: &str| SetError::invalid_properties(&[name.as_str()], why);
        match name.as_str() {
            "name" => match value.as_str() {
                Some(n)
                    if !n.trim().is_empty()
                        && n.chars().count() as u64 <= max_name
                        && !n.contains(char::is_control) =>
                {
                    patch.name = Some(n.to_string())
                }
                _ => return Err(invalid("name must be 1 to 255 printable characters")),
            },
            "parentId" => match value {
                Value::Null => patch.parent_id = Some(None),
                Value::String(id) => match resolve_mailbox_id(id, created_ids) {
                    Some(parent) => patch.parent_id = Some(Some(parent)),
                    None => return Err(invalid("no such parent mailbox")),
                },
                _ => return Err(invalid("parentId must be an id or null")),
            },
            "role" => match value {
                Value::Null => patch.role = Some(None),
                Value::String(role) if ROLES.contains(&role.to_lowercase().as_str()) => {
                    patch.role = Some(Some(role.to_lowercase()))
                }
                _ => return Err(invalid("unknown role")),
            },
            "sortOrder" => match value.as_u64() {
                Some(order) if order <= u32::MAX as u64 => patch.sort_order = Some(order as i64),
                _ => return Err(invalid("sortOrder must be an UnsignedInt")),
            },
            "isSubscribed" => match value.as_bool() {
                Some(subscribed) => patch.is_subscribed = Some(subscribed),
                None => return Err(invalid("isSubscribed must be a boolean")),
            },
            "id" | "totalEmails" | "unreadEmails" | "totalThreads" | "unreadThreads"
            | "myRights" => return Err(invalid("server-set property")),
            _ => return Err(invalid("unknown property")),
        }
    }
    Ok(patch)
}

/// Levels below mailbox `id` (0 for a leaf), at most `limit`: level by
/// level through a map of children made once, so a check costs one pass
/// over the account's mailboxes however many lie below (issue 43 review: a
/// scan of every mailbox per node below made renaming above 10,000 leaves
/// take 20 s).
fn height_below(mailboxes: &[MailboxRow], id: i64, limit: u64) -> u64 {
    let mut children: HashMap<i64, Vec<i64>> = HashMap::new();
    for mailbox in mailboxes {
        if let Some(parent) = mailbox.parent_id {
            children.entry(parent).or_default().push(mailbox.id);
        }
    }
    let mut level = vec![id];
    let mut height = 0;
    while height < limit {
        level = level
            .iter()
            .filter_map(|parent| children.get(parent))
            .flatten()
            .copied()
            .collect();
        if level.is_empty() {
            break;
        }
        height += 1;
    }
    height
}

/// The most mailboxes one account may have: a Mailbox/set create past it is
/// `overQuota` (RFC 8620 §5.3: a server-defined limit on the number of
/// objects of this type). Far more than people file mail into; few enough
/// that every check of the tree, one pass over them, stays cheap.
pub const MAX_MAILBOXES_PER_ACCOUNT: usize = 10_000;

/// Checks sibling-name uniqueness (`alreadyExists` with `existingId`), role uniqueness, parent existence, cycles
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
    // RFC 8620 §5.3 `alreadyExists`: the server forbids two siblings of one
    // name, and names the one there is.
    if let Some(sibling) = mailboxes
        .iter()
        .find(|m| Some(m.id) != id && m.parent_id == parent && m.name.eq_ignore_ascii_case(name))
    {
        let mut error = SetError::new("alreadyExists", "a sibling mailbox has this name");
        error.existing_id = Some(crate::jmap::ids::mailbox_id(sibling.id));
        return Err(error);
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
#[tracing::instrument(level = "debug", skip_all, fields(account = ctx.account.id))]
pub async fn mailbox_set(
    ctx: &mut CallContext<'_>,
    request: SetRequest,
) -> Result<Value, MethodError> {
    let old_state = request.set.check(ctx, |states| states.mailbox).await?;
    let store = ctx.jmap.store.clone();
    let account = ctx.account.id;
    let mut call = MailboxSet {
        mailboxes: store.mailboxes(account).await?,
        ctx,
        outcome: SetOutcome::default(),
    };
    call.create(request.set.create.unwrap_or_default()).await?;
    call.update(request.set.update.unwrap_or_default()).await?;
    let remove_emails = request.on_destroy_remove_emails;
    call.destroy(request.set.destroy.unwrap_or_default(), remove_emails)
        .await?;
    let new_state = store.states(account).await?.mailbox;
    Ok(call
        .outcome
        .into_response(request.set.account_id, old_state, new_state))
}

/// One Mailbox/set call under way: the account's mailboxes (read once,
/// kept up to date as each change is made, so that later checks see
/// earlier changes) and what was done so far.
struct MailboxSet<'c, 'a> {
    ctx: &'c mut CallContext<'a>,
    mailboxes: Vec<MailboxRow>,
    outcome: SetOutcome,
}

impl MailboxSet<'_, '_> {
    /// Creates, parents before the children that name them by `#creationId`.
    async fn create(
        &mut self,
        creates: HashMap<String, Map<String, Value>>,
    ) -> Result<(), MethodError> {
        for (creation_id, object) in creation_order(creates) {
            let new = match self.plan_create(&object) {
                Ok(new) => new,
                Err(error) => {
                    self.outcome.not_created.push((creation_id, error));
                    continue;
                }
            };
            let account = self.ctx.account.id;
            let id = match self.ctx.jmap.writer.create_mailbox(account, &new).await? {
                Ok(id) => id,
                Err(refusal) => {
                    self.outcome
                        .not_created
                        .push((creation_id, refused(refusal)));
                    continue;
                }
            };
            self.mailboxes.push(new_row(id, new));
            let jmap_id = ids::mailbox_id(id);
            self.ctx
                .created_ids
                .insert(creation_id.clone(), jmap_id.clone());
            self.outcome.created.insert(
                creation_id,
                json!({"id": jmap_id, "totalEmails": 0, "unreadEmails": 0, "totalThreads": 0, "unreadThreads": 0, "myRights": my_rights()}),
            );
        }
        Ok(())
    }

    /// The mailbox a create makes, checked against the tree as it stands.
    fn plan_create(&self, object: &Map<String, Value>) -> Result<NewMailbox, SetError> {
        if self.mailboxes.len() >= MAX_MAILBOXES_PER_ACCOUNT {
            return Err(SetError::new(
                "overQuota",
                format!("an account has at most {MAX_MAILBOXES_PER_ACCOUNT} mailboxes"),
            ));
        }
        let limits = &self.ctx.jmap.limits;
        let patch = parse_properties(object, self.ctx.created_ids, limits.max_size_mailbox_name)?;
        let name = patch
            .name
            .ok_or_else(|| SetError::invalid_properties(&["name"], "name is required"))?;
        let (parent, role) = (patch.parent_id.flatten(), patch.role.flatten());
        let depth = limits.max_mailbox_depth;
        check_tree(&self.mailboxes, None, parent, &name, role.as_deref(), depth)?;
        Ok(NewMailbox {
            parent_id: parent,
            name,
            role,
            sort_order: patch.sort_order.unwrap_or(0),
            is_subscribed: patch.is_subscribed.unwrap_or(true),
        })
    }

    /// Renames, moves, re-roles, reorders, (un)subscribes.
    async fn update(
        &mut self,
        updates: HashMap<String, Map<String, Value>>,
    ) -> Result<(), MethodError> {
        for (id, object) in updates {
            let (mailbox, patch) = match self.plan_update(&id, &object) {
                Ok(planned) => planned,
                Err(error) => {
                    self.outcome.not_updated.push((id, error));
                    continue;
                }
            };
            let (writer, account) = (&self.ctx.jmap.writer, self.ctx.account.id);
            if let Err(refusal) = writer.update_mailbox(account, mailbox, &patch).await? {
                self.outcome.not_updated.push((id, refused(refusal)));
                continue;
            }
            if let Some(row) = self.mailboxes.iter_mut().find(|m| m.id == mailbox) {
                apply_patch(row, patch);
            }
            self.outcome.updated.insert(id, Value::Null);
        }
        Ok(())
    }

    /// The mailbox an update changes and its patch, checked against the
    /// tree as it stands.
    fn plan_update(
        &self,
        id: &str,
        object: &Map<String, Value>,
    ) -> Result<(i64, MailboxPatch), SetError> {
        let current = self.find(id).ok_or_else(SetError::not_found)?;
        let limits = &self.ctx.jmap.limits;
        let patch = parse_properties(object, self.ctx.created_ids, limits.max_size_mailbox_name)?;
        let name = patch.name.as_deref().unwrap_or(&current.name);
        let parent = patch.parent_id.unwrap_or(current.parent_id);
        let role = patch.role.clone().unwrap_or_else(|| current.role.clone());
        let depth = limits.max_mailbox_depth;
        check_tree(
            &self.mailboxes,
            Some(current.id),
            parent,
            name,
            role.as_deref(),
            depth,
        )?;
        Ok((current.id, patch))
    }

    /// Destroys (not the inbox); a mailbox with children, or with emails
    /// unless `remove_emails`, stays.
    async fn destroy(
        &mut self,
        destroy: Vec<String>,
        remove_emails: bool,
    ) -> Result<(), MethodError> {
        for id in destroy {
            let result = match self.plan_destroy(&id) {
                Ok(mailbox) => self.destroy_one(mailbox, remove_emails).await?,
                Err(error) => Err(error),
            };
            match result {
                Ok(()) => self.outcome.destroyed.push(id),
                Err(error) => self.outcome.not_destroyed.push((id, error)),
            }
        }
        Ok(())
    }

    /// The mailbox a destroy removes: any but the inbox.
    fn plan_destroy(&self, id: &str) -> Result<i64, SetError> {
        match self.find(id) {
            None => Err(SetError::not_found()),
            Some(m) if m.role.as_deref() == Some("inbox") => {
                Err(SetError::new("forbidden", "the inbox cannot be destroyed"))
            }
            Some(m) => Ok(m.id),
        }
    }

    /// Has the store destroy `mailbox`; what it refuses is the SetError.
    async fn destroy_one(
        &mut self,
        mailbox: i64,
        remove_emails: bool,
    ) -> Result<Result<(), SetError>, MethodError> {
        let (writer, account) = (&self.ctx.jmap.writer, self.ctx.account.id);
        let destroyed = match writer
            .destroy_mailbox(account, mailbox, remove_emails)
            .await
        {
            Ok(Ok(())) => Ok(()),
            Ok(Err(refusal)) => return Ok(Err(refused(refusal))),
            Err(WriteError::Store(error)) => Err(error),
            Err(error) => return Err(error.into()),
        };
        let refused = match destroyed {
            Ok(()) => {
                self.mailboxes.retain(|m| m.id != mailbox);
                return Ok(Ok(()));
            }
            Err(StoreError::MailboxHasChild) => {
                SetError::new("mailboxHasChild", "the mailbox has child mailboxes")
            }
            Err(StoreError::MailboxHasEmail) => {
                SetError::new("mailboxHasEmail", "the mailbox has emails")
            }
            Err(StoreError::NotFound) => SetError::not_found(),
            Err(error) => return Err(error.into()),
        };
        Ok(Err(refused))
    }

    /// The mailbox an id or `#creationId` names, as it stands.
    fn find(&self, id: &str) -> Option<&MailboxRow> {
        let id = resolve_mailbox_id(id, self.ctx.created_ids)?;
        self.mailboxes.iter().find(|m| m.id == id)
    }
}

/// The SetError of a change the server holding the mail refused.
fn refused(refusal: String) -> SetError {
    SetError::new(
        "forbidden",
        format!("the mail server behind this one refused: {refusal}"),
    )
}

/// The row of a mailbox just created (no emails yet).
fn new_row(id: i64, new: NewMailbox) -> MailboxRow {
    MailboxRow {
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
    }
}

/// A row as an update leaves it.
fn apply_patch(row: &mut MailboxRow, patch: MailboxPatch) {
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

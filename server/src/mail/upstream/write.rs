//! Writes through to the upstream (issue 18): JMAP changes to an upstream
//! account are made on the upstream first, and the local store changes only
//! after the upstream accepted them, by a sync on the same connection, so
//! a write is recorded exactly as the same change by another IMAP client
//! would be (state strings, the change log and push as for any change).
//!
//! - keywords → UID STORE ±FLAGS on every copy of the email;
//! - mailboxIds → UID COPY to the mailboxes added beyond those left, UID
//!   MOVE (RFC 6851) from a mailbox left to one added, and `\Deleted` +
//!   UID EXPUNGE (RFC 4315) of the copies in the other mailboxes left;
//! - destroy → `\Deleted` + UID EXPUNGE of every copy;
//! - Email/import and Email/set `create` → APPEND (with flags and
//!   INTERNALDATE) to each mailbox, with CRLF line ends as IMAP carries them;
//! - Mailbox/set → CREATE (+ SUBSCRIBE), RENAME, SUBSCRIBE / UNSUBSCRIBE,
//!   DELETE. Roles are the upstream's special use and cannot be set here;
//!   `sortOrder` is Fastview's own.
//!
//! The account's writes and syncs take turns ([`super::link`]'s lock). An
//! object the upstream refuses (`NO`) is [`UpstreamError::Refused`] for that
//! object alone; an upstream that cannot be reached fails the call, and
//! nothing changes locally.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::imap::Connection;
use super::link::Upstream;
use super::{UpstreamError, flag_of_keyword, utf7};
use crate::blob::blob_id_of;
use crate::mail::ingest::PreparedEmail;
use crate::store::{
    EmailLists, EmailUpdate, Inserted, MailboxPatch, NewMailbox, StoreError, UpdateOutcome,
    UpstreamMailbox, apply_updates,
};

/// What the upstream said to one object of a write: its outcome, or its
/// refusal in the upstream's words.
pub type ObjectResult<T> = Result<T, String>;

/// Where an email's copies are: (mailbox id, UID) each.
type Copies = Vec<(i64, u32)>;

impl Upstream {
    /// Email/set `update` through the upstream: each update's outcome in
    /// order (as [`crate::store::Store::update_emails`] gives it), or the
    /// upstream's refusal of that email.
    pub async fn update_emails(
        &self,
        account: i64,
        updates: &[EmailUpdate],
    ) -> Result<Vec<ObjectResult<UpdateOutcome>>, UpstreamError> {
        let link = self.link(account)?;
        let mut slot = link.writer.lock().await;
        let store = self.store();
        let ids: Vec<i64> = updates.iter().map(|u| u.id).collect();
        let before: HashMap<i64, EmailLists> = store
            .email_meta(account, &ids)
            .await?
            .into_iter()
            .map(|meta| (meta.id, (meta.keywords, meta.mailbox_ids)))
            .collect();
        let owned: HashSet<i64> = store
            .mailboxes(account)
            .await?
            .iter()
            .map(|m| m.id)
            .collect();
        let (after, outcomes) = apply_updates(&before, &owned, updates);
        let names = self.mailbox_names(account).await?;
        let copies = self.copies(account, &ids).await?;
        let connection = self.writer(&link, &mut slot).await?;
        let mut refused: HashMap<i64, String> = HashMap::new();
        let mut changed: Vec<&i64> = after.keys().collect();
        changed.sort();
        for id in changed {
            let (from, to) = (&before[id], &after[id]);
            let result = self
                .change_email(
                    connection,
                    from,
                    to,
                    copies.get(id).map_or(&[][..], Vec::as_slice),
                    &names,
                )
                .await;
            match result {
                Ok(()) => {}
                Err(UpstreamError::Refused(text)) => {
                    refused.insert(*id, text);
                }
                Err(error) => {
                    *slot = None;
                    return Err(error);
                }
            }
        }
        self.finish(account, &mut slot).await?;
        Ok(updates
            .iter()
            .zip(outcomes)
            .map(
                |(update, outcome)| match (outcome, refused.get(&update.id)) {
                    (UpdateOutcome::Updated, Some(text)) => Err(text.clone()),
                    (outcome, _) => Ok(outcome),
                },
            )
            .collect())
    }

    /// Email/set `destroy` through the upstream: the ids destroyed, and the
    /// upstream's refusals by id; an id not in the account is in neither.
    pub async fn destroy_emails(
        &self,
        account: i64,
        ids: &[i64],
    ) -> Result<(Vec<i64>, HashMap<i64, String>), UpstreamError> {
        let link = self.link(account)?;
        let mut slot = link.writer.lock().await;
        let present: Vec<i64> = self
            .store()
            .email_meta(account, ids)
            .await?
            .into_iter()
            .map(|meta| meta.id)
            .collect();
        let names = self.mailbox_names(account).await?;
        let copies = self.copies(account, &present).await?;
        let connection = self.writer(&link, &mut slot).await?;
        let (mut destroyed, mut refused) = (Vec::new(), HashMap::new());
        for id in present {
            let mut result = Ok(());
            for (mailbox, uids) in by_mailbox(copies.get(&id).map_or(&[][..], Vec::as_slice)) {
                result = self.expunge(connection, &names, mailbox, &uids).await;
                if result.is_err() {
                    break;
                }
            }
            match result {
                Ok(()) => destroyed.push(id),
                Err(UpstreamError::Refused(text)) => {
                    refused.insert(id, text);
                }
                Err(error) => {
                    *slot = None;
                    return Err(error);
                }
            }
        }
        self.finish(account, &mut slot).await?;
        Ok((destroyed, refused))
    }

    /// Email/import and Email/set `create` through the upstream: APPENDs
    /// the message to each of its mailboxes, then syncs; the email it
    /// became (`Duplicate` when the account already had those bytes).
    pub async fn append(
        &self,
        account: i64,
        prepared: PreparedEmail,
    ) -> Result<ObjectResult<Inserted>, UpstreamError> {
        let link = self.link(account)?;
        let mut slot = link.writer.lock().await;
        let raw = crlf(&prepared.raw);
        let blob = blob_id_of(&raw);
        let store = self.store();
        if let Some((_, id)) = store
            .emails_of_blobs(account, &[blob.as_str()])
            .await?
            .first()
        {
            return Ok(Ok(Inserted::Duplicate(*id)));
        }
        let names = self.mailbox_names(account).await?;
        let flags: Vec<String> = prepared
            .email
            .keywords
            .iter()
            .map(|k| flag_of_keyword(k))
            .collect();
        let connection = self.writer(&link, &mut slot).await?;
        for mailbox in &prepared.email.mailbox_ids {
            let Some(name) = names.get(mailbox) else {
                return Ok(Err("the mailbox is not on the upstream".into()));
            };
            self.count("append");
            match connection
                .append(name, &flags, prepared.email.received_at, &raw)
                .await
            {
                Ok(()) => {}
                Err(UpstreamError::Refused(text)) => return Ok(Err(text)),
                Err(error) => {
                    *slot = None;
                    return Err(error);
                }
            }
        }
        self.finish(account, &mut slot).await?;
        match store
            .emails_of_blobs(account, &[blob.as_str()])
            .await?
            .first()
        {
            Some((_, id)) => Ok(Ok(Inserted::New(*id))),
            None => Ok(Err(
                "the upstream accepted the message but does not list it".into(),
            )),
        }
    }

    /// Mailbox/set `create` through the upstream (CREATE, SUBSCRIBE): the
    /// new mailbox's id once the sync has mirrored it.
    pub async fn create_mailbox(
        &self,
        account: i64,
        new: &NewMailbox,
    ) -> Result<ObjectResult<i64>, UpstreamError> {
        if new.role.is_some() {
            return Ok(Err(ROLE_REFUSAL.into()));
        }
        let link = self.link(account)?;
        let mut slot = link.writer.lock().await;
        let names = self.mailbox_names(account).await?;
        let connection = self.writer(&link, &mut slot).await?;
        let full = match full_name(connection, &names, new.parent_id, &new.name).await {
            Ok(full) => full,
            Err(error) => return self.fail(&mut slot, error).map(Err),
        };
        self.count("create");
        let created = async {
            connection.create(&full).await?;
            connection.subscribe(&full, new.is_subscribed).await
        }
        .await;
        if let Err(error) = created {
            return self.fail(&mut slot, error).map(Err);
        }
        self.finish(account, &mut slot).await?;
        let store = self.store();
        let Some(mirrored) = store
            .upstream_mailboxes(account)
            .await?
            .into_iter()
            .find(|m| m.name == full)
        else {
            return Ok(Err(
                "the upstream made the mailbox but does not list it".into()
            ));
        };
        if new.sort_order != 0 {
            let patch = MailboxPatch {
                sort_order: Some(new.sort_order),
                ..MailboxPatch::default()
            };
            store
                .update_mailbox(account, mirrored.mailbox_id, &patch)
                .await?;
        }
        Ok(Ok(mirrored.mailbox_id))
    }

    /// Mailbox/set `update` through the upstream: RENAME for a new name or
    /// parent (the mailbox and those under it keep their ids),
    /// SUBSCRIBE / UNSUBSCRIBE; `sortOrder` locally.
    pub async fn update_mailbox(
        &self,
        account: i64,
        id: i64,
        patch: &MailboxPatch,
    ) -> Result<ObjectResult<()>, UpstreamError> {
        let store = self.store();
        let Some(current) = store
            .mailboxes(account)
            .await?
            .into_iter()
            .find(|m| m.id == id)
        else {
            return Err(StoreError::NotFound.into());
        };
        if patch
            .role
            .as_ref()
            .is_some_and(|role| *role != current.role)
        {
            return Ok(Err(ROLE_REFUSAL.into()));
        }
        let link = self.link(account)?;
        let mut slot = link.writer.lock().await;
        let names = self.mailbox_names(account).await?;
        let Some(old) = names.get(&id).cloned() else {
            return Ok(Err("the mailbox is not on the upstream".into()));
        };
        let connection = self.writer(&link, &mut slot).await?;
        let moved = patch
            .name
            .as_ref()
            .is_some_and(|name| *name != current.name)
            || patch
                .parent_id
                .is_some_and(|parent| parent != current.parent_id);
        let renamed = async {
            let mut full = old.clone();
            if moved {
                let parent = patch.parent_id.unwrap_or(current.parent_id);
                let name = patch.name.as_deref().unwrap_or(&current.name);
                full = full_name(connection, &names, parent, name).await?;
                connection.unselect().await?;
                connection.rename(&old, &full).await?;
            }
            if let Some(subscribed) = patch.is_subscribed {
                connection.subscribe(&full, subscribed).await?;
            }
            Ok::<_, UpstreamError>(full)
        }
        .await;
        let full = match renamed {
            Ok(full) => full,
            Err(error) => return self.fail(&mut slot, error).map(Err),
        };
        self.count("rename");
        if full != old {
            self.rename_mapped(account, &old, &full).await?;
        }
        if let Some(order) = patch.sort_order {
            let local = MailboxPatch {
                sort_order: Some(order),
                ..MailboxPatch::default()
            };
            store.update_mailbox(account, id, &local).await?;
        }
        self.finish(account, &mut slot).await?;
        Ok(Ok(()))
    }

    /// Mailbox/set `destroy` through the upstream (DELETE, which removes
    /// its messages there): refused as the store would refuse it (children,
    /// emails without `remove_emails`).
    pub async fn destroy_mailbox(
        &self,
        account: i64,
        id: i64,
        remove_emails: bool,
    ) -> Result<ObjectResult<()>, UpstreamError> {
        let store = self.store();
        let mailboxes = store.mailboxes(account).await?;
        let Some(current) = mailboxes.iter().find(|m| m.id == id) else {
            return Err(StoreError::NotFound.into());
        };
        if mailboxes.iter().any(|m| m.parent_id == Some(id)) {
            return Err(StoreError::MailboxHasChild.into());
        }
        if current.total_emails > 0 && !remove_emails {
            return Err(StoreError::MailboxHasEmail.into());
        }
        let link = self.link(account)?;
        let mut slot = link.writer.lock().await;
        let names = self.mailbox_names(account).await?;
        let Some(name) = names.get(&id).cloned() else {
            return Ok(Err("the mailbox is not on the upstream".into()));
        };
        let connection = self.writer(&link, &mut slot).await?;
        self.count("delete");
        let deleted = async {
            connection.unselect().await?;
            connection.delete(&name).await
        }
        .await;
        if let Err(error) = deleted {
            return self.fail(&mut slot, error).map(Err);
        }
        self.finish(account, &mut slot).await?;
        Ok(Ok(()))
    }

    /// Makes one email's keyword and mailbox changes on the upstream.
    async fn change_email(
        &self,
        connection: &mut Connection,
        before: &EmailLists,
        after: &EmailLists,
        copies: &[(i64, u32)],
        names: &HashMap<i64, String>,
    ) -> Result<(), UpstreamError> {
        if copies.is_empty() {
            return Err(UpstreamError::Refused(
                "the email is not on the upstream".into(),
            ));
        }
        let flags = |from: &[String], to: &[String]| -> Vec<String> {
            to.iter()
                .filter(|k| !from.contains(k))
                .map(|k| flag_of_keyword(k))
                .collect()
        };
        let (added, removed) = (flags(&before.0, &after.0), flags(&after.0, &before.0));
        if !added.is_empty() || !removed.is_empty() {
            for (mailbox, uids) in by_mailbox(copies) {
                connection.select(name_of(names, mailbox)?).await?;
                self.count("store");
                connection.store_flags(&uids, true, &added).await?;
                connection.store_flags(&uids, false, &removed).await?;
            }
        }
        let targets: Vec<i64> = after
            .1
            .iter()
            .filter(|m| !before.1.contains(m))
            .copied()
            .collect();
        let mut leaving: Vec<(i64, u32)> = copies
            .iter()
            .filter(|(mailbox, _)| !after.1.contains(mailbox))
            .copied()
            .collect();
        // More mailboxes added than copies leaving: copy to the extra ones.
        let extra = targets.len().saturating_sub(leaving.len());
        if extra > 0 {
            let (mailbox, uid) = copies[0];
            connection.select(name_of(names, mailbox)?).await?;
            for target in &targets[..extra] {
                self.count("copy");
                connection.copy(&[uid], name_of(names, *target)?).await?;
            }
        }
        for target in &targets[extra..] {
            let Some((mailbox, uid)) = leaving.pop() else {
                break;
            };
            connection.select(name_of(names, mailbox)?).await?;
            self.count("move");
            connection.move_to(&[uid], name_of(names, *target)?).await?;
        }
        let leaving: Copies = leaving;
        for (mailbox, uids) in by_mailbox(&leaving) {
            self.expunge(connection, names, mailbox, &uids).await?;
        }
        Ok(())
    }

    /// `\Deleted` + UID EXPUNGE of `uids` in `mailbox`.
    async fn expunge(
        &self,
        connection: &mut Connection,
        names: &HashMap<i64, String>,
        mailbox: i64,
        uids: &[u32],
    ) -> Result<(), UpstreamError> {
        connection.select(name_of(names, mailbox)?).await?;
        self.count("expunge");
        connection.expunge(uids).await
    }

    /// The upstream name of each mirrored mailbox of the account.
    async fn mailbox_names(&self, account: i64) -> Result<HashMap<i64, String>, UpstreamError> {
        Ok(self
            .store()
            .upstream_mailboxes(account)
            .await?
            .into_iter()
            .map(|m| (m.mailbox_id, m.name))
            .collect())
    }

    /// Where each of `ids` has copies on the upstream.
    async fn copies(
        &self,
        account: i64,
        ids: &[i64],
    ) -> Result<HashMap<i64, Copies>, UpstreamError> {
        let mut copies: HashMap<i64, Copies> = HashMap::new();
        for (email, mailbox, uid) in self.store().upstream_locations(account, ids).await? {
            if let Ok(uid) = u32::try_from(uid) {
                copies.entry(email).or_default().push((mailbox, uid));
            }
        }
        Ok(copies)
    }

    /// After RENAME: the mapped names of the mailbox and those under it.
    async fn rename_mapped(&self, account: i64, old: &str, new: &str) -> Result<(), UpstreamError> {
        let store = self.store();
        for mapped in store.upstream_mailboxes(account).await? {
            let renamed = if mapped.name == old {
                new.to_string()
            } else if let Some(rest) = mapped.name.strip_prefix(old)
                && !rest.is_empty()
                && !rest.starts_with(|c: char| c.is_alphanumeric())
            {
                format!("{new}{rest}")
            } else {
                continue;
            };
            store
                .put_upstream_mailbox(
                    account,
                    &UpstreamMailbox {
                        name: renamed,
                        ..mapped
                    },
                )
                .await?;
        }
        Ok(())
    }

    /// Syncs after a write; a failure drops the writer connection.
    async fn finish(
        &self,
        account: i64,
        slot: &mut Option<Connection>,
    ) -> Result<(), UpstreamError> {
        let Some(connection) = slot.as_mut() else {
            return Ok(());
        };
        let synced = self.sync_after_write(account, connection).await;
        if synced.is_err() {
            *slot = None;
        }
        synced
    }

    /// A refusal is the object's (`Ok(text)`); anything else fails the call
    /// and drops the writer connection.
    fn fail(
        &self,
        slot: &mut Option<Connection>,
        error: UpstreamError,
    ) -> Result<String, UpstreamError> {
        match error {
            UpstreamError::Refused(text) => Ok(text),
            error => {
                *slot = None;
                Err(error)
            }
        }
    }
}

/// Why a role cannot be set through the upstream.
const ROLE_REFUSAL: &str =
    "roles come from the upstream's special-use attributes and cannot be set here";

/// The upstream name of a mailbox, or a refusal when it has none.
fn name_of(names: &HashMap<i64, String>, mailbox: i64) -> Result<&str, UpstreamError> {
    names
        .get(&mailbox)
        .map(String::as_str)
        .ok_or_else(|| UpstreamError::Refused("the mailbox is not on the upstream".into()))
}

/// Copies grouped by mailbox, UIDs ascending.
fn by_mailbox(copies: &[(i64, u32)]) -> Vec<(i64, Vec<u32>)> {
    let mut grouped: HashMap<i64, BTreeSet<u32>> = HashMap::new();
    for (mailbox, uid) in copies {
        grouped.entry(*mailbox).or_default().insert(*uid);
    }
    let mut grouped: Vec<(i64, Vec<u32>)> = grouped
        .into_iter()
        .map(|(mailbox, uids)| (mailbox, uids.into_iter().collect()))
        .collect();
    grouped.sort();
    grouped
}

/// The upstream's full name for `name` under `parent`: the parent's name,
/// the hierarchy delimiter the upstream lists, and `name` in modified UTF-7.
async fn full_name(
    connection: &mut Connection,
    names: &HashMap<i64, String>,
    parent: Option<i64>,
    name: &str,
) -> Result<String, UpstreamError> {
    let leaf = utf7::encode(name);
    let Some(parent) = parent else {
        return Ok(leaf);
    };
    let parent = name_of(names, parent)?.to_string();
    let delimiter = connection
        .list()
        .await?
        .into_iter()
        .find_map(|listed| listed.delimiter)
        .ok_or_else(|| UpstreamError::Refused("the upstream has no hierarchy".into()))?;
    Ok(format!("{parent}{delimiter}{leaf}"))
}

/// A message with CRLF line ends, as IMAP carries it (RFC 3501 §4.3): the
/// octets the upstream will hand back.
pub fn crlf(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len() + raw.len() / 32);
    for (i, &byte) in raw.iter().enumerate() {
        if byte == b'\n' && (i == 0 || raw[i - 1] != b'\r') {
            out.push(b'\r');
        }
        out.push(byte);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_line_feeds_become_crlf_and_crlf_stays() {
        assert_eq!(crlf(b"a\nb\r\nc\n"), b"a\r\nb\r\nc\r\n");
        assert_eq!(crlf(b"\n"), b"\r\n");
        assert_eq!(crlf(b"x\r\n"), b"x\r\n");
    }

    #[test]
    fn copies_group_by_mailbox() {
        assert_eq!(
            by_mailbox(&[(2, 9), (1, 4), (2, 3), (1, 4)]),
            [(1, vec![4]), (2, vec![3, 9])]
        );
    }
}

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
//! The account's writes and syncs take turns ([`super::link`]'s lock), and
//! a write first syncs, so it acts on the upstream's UIDs as they are (not
//! as they were before another client moved a message). What can be
//! checked first is checked before anything is sent (the mailboxes a
//! message goes to can hold messages; a mailbox name holds no hierarchy
//! delimiter); mailbox changes go before keyword changes, so a refused
//! move leaves the flags alone. An object the upstream refuses (`NO`) is
//! refused alone; an upstream that cannot be reached fails the call. Either
//! way the local store shows what the upstream holds after a sync: a change
//! the upstream made before it refused or dropped the connection stands.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::connection::{AppendUid, Connection};
use super::link::Upstream;
use super::{flag_of_keyword, utf7};
use crate::blob::blob_id_of;
use crate::mail::ingest::PreparedEmail;
use crate::mail::relay::with_crlf;
use crate::proxy::upstream::UpstreamError;
use crate::store::{
    EmailLists, EmailUpdate, Inserted, MailboxPatch, NewMailbox, StoreError, UpdateOutcome,
    UpstreamMailbox, apply_updates, default_sort_order,
};

/// What the upstream said to one object of a write: its outcome, or its
/// refusal in the upstream's words.
pub type ObjectResult<T> = Result<T, String>;

/// Where an email's copies are: (mailbox id, UID) each.
type Copies = Vec<(i64, u32)>;

/// What an Email/import through the upstream did before its sync.
enum Appending {
    /// Nothing: the account already holds the message (this email).
    Already(i64),
    /// APPENDed.
    Sent(Sent),
}

/// A message APPENDed: what finds the email it became after the sync.
struct Sent {
    /// The blob id of the octets sent (CRLF line ends).
    blob: String,
    /// Its Message-ID, as the store keeps it (no angle brackets).
    message_id: Option<String>,
    /// Octets sent.
    size: i64,
    /// Each mailbox it was APPENDed to, in order.
    copies: Vec<AppendedCopy>,
}

/// One APPEND of a message: the mailbox, what the upstream said of the new
/// copy (RFC 4315 APPENDUID), and, without UIDPLUS, UIDNEXT before it.
struct AppendedCopy {
    mailbox: i64,
    said: Option<AppendUid>,
    uid_next: Option<u32>,
}

impl Upstream {
    /// Email/set `update` through the upstream: each update's outcome in
    /// order (as [`crate::store::Store::update_emails`] gives it), or the
    /// upstream's refusal of that email.
    pub async fn update_emails(
        &self,
        account: i64,
        updates: &[EmailUpdate],
    ) -> Result<Vec<ObjectResult<UpdateOutcome>>, UpstreamError> {
        // Nothing to write is nothing to sync (an Email/set without updates).
        if updates.is_empty() {
            return Ok(Vec::new());
        }
        let link = self.link(account)?;
        let mut slot = link.writer.lock().await;
        let connection = self.writer(&link, &mut slot).await?;
        let result = self.update_on(connection, account, updates).await;
        self.settle(account, &mut slot, result, |text| {
            vec![Err(text); updates.len()]
        })
        .await
    }

    async fn update_on(
        &self,
        connection: &mut Connection,
        account: i64,
        updates: &[EmailUpdate],
    ) -> Result<Vec<ObjectResult<UpdateOutcome>>, UpstreamError> {
        self.sync_after_write(account, connection).await?;
        let store = self.store();
        let ids: Vec<i64> = updates.iter().map(|u| u.id).collect();
        let before: HashMap<i64, EmailLists> = store
            .email_meta(account, &ids)
            .await?
            .into_iter()
            .map(|meta| (meta.id, (meta.keywords, meta.mailbox_ids)))
            .collect();
        let owned: HashSet<i64> = store.mailbox_ids(account).await?.into_iter().collect();
        let (after, outcomes) = apply_updates(&before, &owned, updates);
        let names = self.mailbox_names(account).await?;
        let names = Mapped {
            account,
            names: &names,
        };
        let mut changed: Vec<i64> = after.keys().copied().collect();
        changed.sort();
        // Which mailboxes can hold mail (a LIST) only matters to a move.
        let holding = if changed.iter().any(|id| before[id].1 != after[id].1) {
            holding_mailboxes(connection).await?
        } else {
            HashSet::new()
        };
        let mut refused: HashMap<i64, String> = HashMap::new();
        // Mailboxes first: a refused move leaves the flags as they were.
        let copies = self.copies(account, &ids).await?;
        let mut moved = false;
        for id in &changed {
            let (from, to) = (&before[id], &after[id]);
            let copies = copies.get(id).map_or(&[][..], Vec::as_slice);
            match self
                .change_mailboxes(connection, from, to, copies, names, &holding)
                .await
            {
                Ok(changed) => moved |= changed,
                Err(UpstreamError::Refused(text)) => {
                    refused.insert(*id, text);
                }
                Err(error) => return Err(error),
            }
        }
        // The flags, on the copies as they are after the moves.
        let copies = if moved {
            self.sync_after_write(account, connection).await?;
            self.copies(account, &ids).await?
        } else {
            copies
        };
        for id in &changed {
            if refused.contains_key(id) {
                continue;
            }
            let (from, to) = (&before[id], &after[id]);
            let copies = copies.get(id).map_or(&[][..], Vec::as_slice);
            match self
                .change_keywords(connection, from, to, copies, names)
                .await
            {
                Ok(()) => {}
                Err(UpstreamError::Refused(text)) => {
                    refused.insert(*id, text);
                }
                Err(error) => return Err(error),
            }
        }
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
        if ids.is_empty() {
            return Ok((Vec::new(), HashMap::new()));
        }
        let link = self.link(account)?;
        let mut slot = link.writer.lock().await;
        let connection = self.writer(&link, &mut slot).await?;
        let result = self.destroy_on(connection, account, ids).await;
        self.settle(account, &mut slot, result, |text| {
            (
                Vec::new(),
                ids.iter().map(|id| (*id, text.clone())).collect(),
            )
        })
        .await
    }

    async fn destroy_on(
        &self,
        connection: &mut Connection,
        account: i64,
        ids: &[i64],
    ) -> Result<(Vec<i64>, HashMap<i64, String>), UpstreamError> {
        self.sync_after_write(account, connection).await?;
        let present: Vec<i64> = self
            .store()
            .email_meta(account, ids)
            .await?
            .into_iter()
            .map(|meta| meta.id)
            .collect();
        let names = self.mailbox_names(account).await?;
        let names = Mapped {
            account,
            names: &names,
        };
        let copies = self.copies(account, &present).await?;
        let (mut destroyed, mut refused) = (Vec::new(), HashMap::new());
        for id in present {
            let mut result = Ok(());
            for (mailbox, uids) in by_mailbox(copies.get(&id).map_or(&[][..], Vec::as_slice)) {
                result = self.expunge(connection, names, mailbox, &uids).await;
                if result.is_err() {
                    break;
                }
            }
            match result {
                Ok(()) => destroyed.push(id),
                Err(UpstreamError::Refused(text)) => {
                    refused.insert(id, text);
                }
                Err(error) => return Err(error),
            }
        }
        Ok((destroyed, refused))
    }

    /// Email/import and Email/set `create` through the upstream: APPENDs
    /// the message to each of its mailboxes, then syncs; the email it
    /// became, as the upstream stored it (`Duplicate` when the account
    /// already had it: [`Upstream::already_appended`]). The email is found
    /// by what the upstream said ([`Upstream::appended_email`]), since the
    /// upstream may store other octets than those sent.
    pub async fn append(
        &self,
        account: i64,
        prepared: PreparedEmail,
    ) -> Result<ObjectResult<Inserted>, UpstreamError> {
        let link = self.link(account)?;
        let mut slot = link.writer.lock().await;
        let connection = self.writer(&link, &mut slot).await?;
        let result = self.append_on(connection, account, prepared).await;
        let sent = match self.settle(account, &mut slot, result, Err).await? {
            Ok(Appending::Already(id)) => return Ok(Ok(Inserted::Duplicate(id))),
            Ok(Appending::Sent(sent)) => sent,
            Err(refusal) => return Ok(Err(refusal)),
        };
        let Some(id) = self.appended_email(account, &sent).await? else {
            return Ok(Err(
                "the upstream accepted the message but does not list it".into(),
            ));
        };
        // The upstream rewrote it: a retry of the same octets is this email.
        let store = self.store();
        let stored = store.email_meta(account, &[id]).await?;
        if stored.first().is_some_and(|meta| meta.blob_id != sent.blob) {
            store
                .record_upstream_append(account, &sent.blob, id)
                .await?;
        }
        Ok(Ok(Inserted::New(id)))
    }

    async fn append_on(
        &self,
        connection: &mut Connection,
        account: i64,
        prepared: PreparedEmail,
    ) -> Result<ObjectResult<Appending>, UpstreamError> {
        // CRLF line ends, as IMAP carries a message (RFC 3501 §4.3), made
        // as the relay makes them: the octets the upstream hands back.
        let raw = with_crlf(&prepared.raw).into_owned();
        let blob = blob_id_of(&raw);
        if let Some(id) = self.already_appended(account, &blob).await? {
            return Ok(Ok(Appending::Already(id)));
        }
        let names = self.mailbox_names(account).await?;
        let holding = holding_mailboxes(connection).await?;
        let mut targets = Vec::new();
        for mailbox in &prepared.email.mailbox_ids {
            match name_of(&names, *mailbox).and_then(|name| holds(&holding, name)) {
                Ok(name) => targets.push((*mailbox, name.to_string())),
                Err(UpstreamError::Refused(text)) => return Ok(Err(text)),
                Err(error) => return Err(error),
            }
        }
        let flags: Vec<String> = prepared
            .email
            .keywords
            .iter()
            .map(|k| flag_of_keyword(k))
            .collect();
        let mut copies = Vec::new();
        for (mailbox, name) in &targets {
            // Without UIDPLUS, the new copy's UID is UIDNEXT or above.
            let uid_next = if connection.has("UIDPLUS") {
                None
            } else {
                connection.examine(name).await?.uid_next
            };
            self.count("append");
            self.count_bytes(raw.len());
            match connection
                .append(name, &flags, prepared.email.received_at, &raw)
                .await
            {
                Ok(said) => copies.push(AppendedCopy {
                    mailbox: *mailbox,
                    said,
                    uid_next,
                }),
                Err(UpstreamError::Refused(text)) => return Ok(Err(text)),
                Err(error) => return Err(error),
            }
        }
        Ok(Ok(Appending::Sent(Sent {
            blob,
            message_id: prepared.email.index.message_id.clone(),
            size: i64::try_from(raw.len()).unwrap_or(i64::MAX),
            copies,
        })))
    }

    /// The account's email holding what an APPEND of the octets with blob
    /// id `blob` would store: the email with those octets, or the one an
    /// earlier APPEND of them became where the upstream rewrote them
    /// (recorded by [`Upstream::append`]). So a retried Email/import is
    /// answered with the email the first one made, never a second copy.
    async fn already_appended(
        &self,
        account: i64,
        blob: &str,
    ) -> Result<Option<i64>, UpstreamError> {
        let store = self.store();
        if let Some((_, id)) = store.emails_of_blobs(account, &[blob]).await?.first() {
            return Ok(Some(*id));
        }
        Ok(store.upstream_append(account, blob).await?)
    }

    /// The email an APPEND became, once synced, by what the upstream said:
    /// the mailbox and UID of its APPENDUID (RFC 4315) while the mailbox
    /// keeps that UIDVALIDITY; else the email with the octets sent (the
    /// upstream kept them); else, among the copies new since the APPEND
    /// (UID from UIDNEXT before it), the one with the Message-ID and size
    /// sent. `None` when none of these finds it.
    async fn appended_email(
        &self,
        account: i64,
        sent: &Sent,
    ) -> Result<Option<i64>, UpstreamError> {
        let store = self.store();
        let validities: HashMap<i64, i64> = store
            .upstream_mailboxes(account)
            .await?
            .into_iter()
            .map(|m| (m.mailbox_id, m.uid_validity))
            .collect();
        for copy in &sent.copies {
            let Some(said) = copy.said else { continue };
            if validities.get(&copy.mailbox) != Some(&i64::from(said.uid_validity)) {
                continue;
            }
            let uid = i64::from(said.uid);
            let found = store.upstream_copies_from(copy.mailbox, uid).await?;
            if let Some((_, email, _, _)) = found.iter().find(|(at, ..)| *at == uid) {
                return Ok(Some(*email));
            }
        }
        if let Some((_, id)) = store
            .emails_of_blobs(account, &[sent.blob.as_str()])
            .await?
            .first()
        {
            return Ok(Some(*id));
        }
        for copy in &sent.copies {
            let Some(uid_next) = copy.uid_next else {
                continue;
            };
            let new = store
                .upstream_copies_from(copy.mailbox, i64::from(uid_next))
                .await?;
            if let Some(email) = same_message(&new, sent.message_id.as_deref(), sent.size) {
                return Ok(Some(email));
            }
        }
        Ok(None)
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
        let connection = self.writer(&link, &mut slot).await?;
        let result = self.create_mailbox_on(connection, account, new).await;
        let full = match self.settle(account, &mut slot, result, Err).await? {
            Ok(full) => full,
            Err(refusal) => return Ok(Err(refusal)),
        };
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
        // The sync gave it a folder's; Mailbox/set's is the client's (or 0).
        if new.sort_order != default_sort_order(None) {
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

    async fn create_mailbox_on(
        &self,
        connection: &mut Connection,
        account: i64,
        new: &NewMailbox,
    ) -> Result<ObjectResult<String>, UpstreamError> {
        let names = self.mailbox_names(account).await?;
        let delimiter = delimiter(connection).await?;
        let full = match full_name(&delimiter, &names, new.parent_id, &new.name) {
            Ok(full) => full,
            Err(UpstreamError::Refused(text)) => return Ok(Err(text)),
            Err(error) => return Err(error),
        };
        self.count("create");
        let created = async {
            connection.create(&full).await?;
            connection.subscribe(&full, new.is_subscribed).await
        }
        .await;
        match created {
            Ok(()) => Ok(Ok(full)),
            Err(UpstreamError::Refused(text)) => Ok(Err(text)),
            Err(error) => Err(error),
        }
    }

    /// Mailbox/set `update` through the upstream: RENAME for a new name or
    /// parent (the mailbox and those under it keep their ids and their
    /// subscriptions), SUBSCRIBE / UNSUBSCRIBE; `sortOrder` locally.
    pub async fn update_mailbox(
        &self,
        account: i64,
        id: i64,
        patch: &MailboxPatch,
    ) -> Result<ObjectResult<()>, UpstreamError> {
        let link = self.link(account)?;
        let mut slot = link.writer.lock().await;
        let connection = self.writer(&link, &mut slot).await?;
        let result = self.update_mailbox_on(connection, account, id, patch).await;
        self.settle(account, &mut slot, result, Err).await
    }

    async fn update_mailbox_on(
        &self,
        connection: &mut Connection,
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
        let names = self.mailbox_names(account).await?;
        let Some(old) = names.get(&id).cloned() else {
            return Ok(Err("the mailbox is not on the upstream".into()));
        };
        let moved = patch
            .name
            .as_ref()
            .is_some_and(|name| *name != current.name)
            || patch
                .parent_id
                .is_some_and(|parent| parent != current.parent_id);
        let changed = async {
            let mut full = old.clone();
            if moved {
                let parent = patch.parent_id.unwrap_or(current.parent_id);
                let name = patch.name.as_deref().unwrap_or(&current.name);
                let delimiter = delimiter(connection).await?;
                full = full_name(&delimiter, &names, parent, name)?;
                let subscribed = connection.subscribed().await?;
                connection.unselect().await?;
                self.count("rename");
                connection.rename(&old, &full).await?;
                // Subscriptions follow the names (RFC 3501 §6.3.5 keeps them
                // under the old ones): for the mailbox and those under it.
                for name in subscribed {
                    if let Some(renamed) = renamed(&name, &old, &full, &delimiter) {
                        connection.subscribe(&name, false).await?;
                        connection.subscribe(&renamed, true).await?;
                    }
                }
                self.rename_mapped(account, &old, &full, &delimiter).await?;
            }
            if let Some(subscribed) = patch.is_subscribed {
                connection.subscribe(&full, subscribed).await?;
            }
            Ok::<_, UpstreamError>(())
        }
        .await;
        match changed {
            Ok(()) => {}
            Err(UpstreamError::Refused(text)) => return Ok(Err(text)),
            Err(error) => return Err(error),
        }
        if let Some(order) = patch.sort_order {
            let local = MailboxPatch {
                sort_order: Some(order),
                ..MailboxPatch::default()
            };
            store.update_mailbox(account, id, &local).await?;
        }
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
        let link = self.link(account)?;
        let mut slot = link.writer.lock().await;
        let connection = self.writer(&link, &mut slot).await?;
        let result = self
            .destroy_mailbox_on(connection, account, id, remove_emails)
            .await;
        self.settle(account, &mut slot, result, Err).await
    }

    async fn destroy_mailbox_on(
        &self,
        connection: &mut Connection,
        account: i64,
        id: i64,
        remove_emails: bool,
    ) -> Result<ObjectResult<()>, UpstreamError> {
        self.sync_after_write(account, connection).await?;
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
        let names = self.mailbox_names(account).await?;
        let Some(name) = names.get(&id).cloned() else {
            return Ok(Err("the mailbox is not on the upstream".into()));
        };
        self.count("delete");
        let deleted = async {
            connection.unselect().await?;
            connection.delete(&name).await
        }
        .await;
        match deleted {
            Ok(()) => Ok(Ok(())),
            Err(UpstreamError::Refused(text)) => Ok(Err(text)),
            Err(error) => Err(error),
        }
    }

    /// Makes one email's mailbox changes on the upstream: each mailbox it
    /// leaves is MOVEd (all its copies there) to one it enters, further
    /// mailboxes it enters get a COPY, further ones it leaves an EXPUNGE.
    /// Whether anything was sent.
    async fn change_mailboxes(
        &self,
        connection: &mut Connection,
        before: &EmailLists,
        after: &EmailLists,
        copies: &[(i64, u32)],
        names: Mapped<'_>,
        holding: &HashSet<String>,
    ) -> Result<bool, UpstreamError> {
        let targets: Vec<i64> = after
            .1
            .iter()
            .filter(|m| !before.1.contains(m))
            .copied()
            .collect();
        let leaving: Vec<(i64, Vec<u32>)> = by_mailbox(copies)
            .into_iter()
            .filter(|(mailbox, _)| !after.1.contains(mailbox))
            .collect();
        if targets.is_empty() && leaving.is_empty() {
            return Ok(false);
        }
        if copies.is_empty() {
            return Err(UpstreamError::Refused(
                "the email is not on the upstream".into(),
            ));
        }
        // Checked before anything is sent: every mailbox entered holds mail.
        for target in &targets {
            holds(holding, names.of(*target)?)?;
        }
        let extra = targets.len().saturating_sub(leaving.len());
        if extra > 0 {
            let (mailbox, uid) = copies[0];
            connection.select(names.of(mailbox)?).await?;
            for target in &targets[..extra] {
                self.count("copy");
                connection.copy(&[uid], names.of(*target)?).await?;
            }
        }
        let mut leaving = leaving.into_iter();
        for target in &targets[extra..] {
            let Some((mailbox, uids)) = leaving.next() else {
                break;
            };
            connection.select(names.of(mailbox)?).await?;
            self.count("move");
            connection.move_to(&uids, names.of(*target)?).await?;
            self.removed(names.account, mailbox, &uids);
        }
        for (mailbox, uids) in leaving {
            self.expunge(connection, names, mailbox, &uids).await?;
        }
        Ok(true)
    }

    /// Makes one email's keyword changes on the upstream: UID STORE on
    /// every copy.
    async fn change_keywords(
        &self,
        connection: &mut Connection,
        before: &EmailLists,
        after: &EmailLists,
        copies: &[(i64, u32)],
        names: Mapped<'_>,
    ) -> Result<(), UpstreamError> {
        let flags = |from: &[String], to: &[String]| -> Vec<String> {
            to.iter()
                .filter(|k| !from.contains(k))
                .map(|k| flag_of_keyword(k))
                .collect()
        };
        let (added, removed) = (flags(&before.0, &after.0), flags(&after.0, &before.0));
        if added.is_empty() && removed.is_empty() {
            return Ok(());
        }
        if copies.is_empty() {
            return Err(UpstreamError::Refused(
                "the email is not on the upstream".into(),
            ));
        }
        for (mailbox, uids) in by_mailbox(copies) {
            connection.select(names.of(mailbox)?).await?;
            self.count("store");
            connection.store_flags(&uids, true, &added).await?;
            connection.store_flags(&uids, false, &removed).await?;
        }
        Ok(())
    }

    /// `\Deleted` + UID EXPUNGE of `uids` in `mailbox`.
    async fn expunge(
        &self,
        connection: &mut Connection,
        names: Mapped<'_>,
        mailbox: i64,
        uids: &[u32],
    ) -> Result<(), UpstreamError> {
        connection.select(names.of(mailbox)?).await?;
        self.count("expunge");
        connection.expunge(uids).await?;
        self.removed(names.account, mailbox, uids);
        Ok(())
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
        for (email, mailbox, uid, _) in self.store().upstream_locations(account, ids).await? {
            if let Ok(uid) = u32::try_from(uid) {
                copies.entry(email).or_default().push((mailbox, uid));
            }
        }
        Ok(copies)
    }

    /// After RENAME: the mapped names of the mailbox and those under it.
    async fn rename_mapped(
        &self,
        account: i64,
        old: &str,
        new: &str,
        delimiter: &str,
    ) -> Result<(), UpstreamError> {
        let store = self.store();
        for mapped in store.upstream_mailboxes(account).await? {
            if let Some(name) = renamed(&mapped.name, old, new, delimiter) {
                store
                    .put_upstream_mailbox(account, &UpstreamMailbox { name, ..mapped })
                    .await?;
            }
        }
        Ok(())
    }

    /// After a write: a sync records what the upstream now holds (also
    /// after a refusal or a lost connection: what was done stands), and a
    /// connection that failed is dropped. The write's result; a refusal of
    /// the whole write becomes `refused(text)`.
    async fn settle<T>(
        &self,
        account: i64,
        slot: &mut Option<Connection>,
        result: Result<T, UpstreamError>,
        refused: impl FnOnce(String) -> T,
    ) -> Result<T, UpstreamError> {
        let synced = match (slot.as_mut(), &result) {
            (Some(connection), Ok(_) | Err(UpstreamError::Refused(_))) => {
                self.sync_after_write(account, connection).await
            }
            _ => Ok(()),
        };
        let failed = matches!(&result, Err(error) if !matches!(error, UpstreamError::Refused(_)));
        if synced.is_err() || failed {
            *slot = None;
        }
        let value = match result {
            Ok(value) => value,
            Err(UpstreamError::Refused(text)) => refused(text),
            Err(error) => return Err(error),
        };
        synced?;
        Ok(value)
    }
}

/// Why a role cannot be set through the upstream.
const ROLE_REFUSAL: &str =
    "roles come from the upstream's special-use attributes and cannot be set here";

/// The account a write acts on and the upstream name of each of its
/// mirrored mailboxes (by local mailbox id).
#[derive(Clone, Copy)]
struct Mapped<'a> {
    account: i64,
    names: &'a HashMap<i64, String>,
}

impl Mapped<'_> {
    /// The upstream name of `mailbox`, or a refusal when it has none.
    fn of(&self, mailbox: i64) -> Result<&str, UpstreamError> {
        name_of(self.names, mailbox)
    }
}

/// The upstream name of a mailbox, or a refusal when it has none.
fn name_of(names: &HashMap<i64, String>, mailbox: i64) -> Result<&str, UpstreamError> {
    names
        .get(&mailbox)
        .map(String::as_str)
        .ok_or_else(|| UpstreamError::Refused("the mailbox is not on the upstream".into()))
}

/// The upstream names of the mailboxes that can hold messages (LIST: not
/// `\Noselect` / `\NonExistent`).
async fn holding_mailboxes(connection: &mut Connection) -> Result<HashSet<String>, UpstreamError> {
    Ok(connection
        .list()
        .await?
        .into_iter()
        .filter(|listed| listed.selectable)
        .map(|listed| listed.name)
        .collect())
}

/// `name` when that upstream mailbox can hold messages, else a refusal.
fn holds<'a>(holding: &HashSet<String>, name: &'a str) -> Result<&'a str, UpstreamError> {
    if holding.contains(name) {
        Ok(name)
    } else {
        Err(UpstreamError::Refused(format!(
            "the upstream mailbox {name} cannot hold messages"
        )))
    }
}

/// Among the copies an APPEND may have made (`(uid, email, Message-ID,
/// size)`, as [`crate::store::ImapProxyStore::upstream_copies_from`] gives
/// them), the email with `message_id` and `size`: the first by UID. A
/// message without a Message-ID matches none (the octets alone never
/// identify it: another client may have APPENDed the same).
fn same_message(
    copies: &[(i64, i64, Option<String>, i64)],
    message_id: Option<&str>,
    size: i64,
) -> Option<i64> {
    let message_id = message_id?;
    copies
        .iter()
        .find(|(_, _, id, octets)| id.as_deref() == Some(message_id) && *octets == size)
        .map(|(_, email, _, _)| *email)
}

/// The upstream's hierarchy delimiter (LIST), `/` when it lists none.
async fn delimiter(connection: &mut Connection) -> Result<String, UpstreamError> {
    Ok(connection
        .list()
        .await?
        .into_iter()
        .find_map(|listed| listed.delimiter)
        .unwrap_or_else(|| "/".into()))
}

/// `name` after `old` was renamed `new`: `new` for `old` itself, `new`
/// and the rest for a mailbox under it (`old` then the delimiter), `None`
/// for any other (`Tom & Jerry` is not under `Tom`).
fn renamed(name: &str, old: &str, new: &str, delimiter: &str) -> Option<String> {
    if name == old {
        return Some(new.to_string());
    }
    let rest = name.strip_prefix(old)?;
    rest.starts_with(delimiter).then(|| format!("{new}{rest}"))
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
fn full_name(
    delimiter: &str,
    names: &HashMap<i64, String>,
    parent: Option<i64>,
    name: &str,
) -> Result<String, UpstreamError> {
    if name.contains(delimiter) {
        return Err(UpstreamError::Refused(format!(
            "a mailbox name cannot hold the upstream's hierarchy delimiter {delimiter:?}"
        )));
    }
    let leaf = utf7::encode(name);
    let Some(parent) = parent else {
        return Ok(leaf);
    };
    let parent = name_of(names, parent)?;
    Ok(format!("{parent}{delimiter}{leaf}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_line_feeds_become_crlf_and_crlf_stays() {
        let crlf = |raw: &[u8]| with_crlf(raw).into_owned();
        assert_eq!(crlf(b"a\nb\r\nc\n"), b"a\r\nb\r\nc\r\n");
        assert_eq!(crlf(b"\n"), b"\r\n");
        assert_eq!(crlf(b"x\r\n"), b"x\r\n");
    }

    #[test]
    fn renames_reach_the_mailbox_and_those_under_it_only() {
        assert_eq!(renamed("Tom", "Tom", "Tim", "/").as_deref(), Some("Tim"));
        assert_eq!(
            renamed("Tom/a/b", "Tom", "Tim", "/").as_deref(),
            Some("Tim/a/b")
        );
        assert_eq!(renamed("Tom &- Jerry", "Tom", "Tim", "/"), None);
        assert_eq!(renamed("Tom-2", "Tom", "Tim", "/"), None);
        assert_eq!(renamed("Tom.x", "Tom", "Tim", "/"), None);
        assert_eq!(
            renamed("Tom.x", "Tom", "Tim", ".").as_deref(),
            Some("Tim.x")
        );
    }

    #[test]
    fn an_appended_copy_without_appenduid_is_found_by_message_id_and_size() {
        let id = |text: &str| Some(text.to_string());
        let copies = [
            (7, 70, id("other@example.com"), 120),
            (8, 80, id("sent@example.com"), 99),
            (9, 90, id("sent@example.com"), 120),
            (10, 100, id("sent@example.com"), 120),
            (11, 110, None, 120),
        ];
        assert_eq!(
            same_message(&copies, Some("sent@example.com"), 120),
            Some(90)
        );
        assert_eq!(same_message(&copies, Some("sent@example.com"), 121), None);
        assert_eq!(same_message(&copies, Some("none@example.com"), 120), None);
        assert_eq!(same_message(&copies, None, 120), None);
        assert_eq!(same_message(&[], Some("sent@example.com"), 120), None);
    }

    #[test]
    fn copies_group_by_mailbox() {
        assert_eq!(
            by_mailbox(&[(2, 9), (1, 4), (2, 3), (1, 4)]),
            [(1, vec![4]), (2, vec![3, 9])]
        );
    }
}

//! One sync of an account from its upstream IMAP server: mailboxes from
//! LIST and LSUB, then, per mailbox, the UIDs and flags the upstream holds
//! against the UIDs the store has mapped (a comparison of UID sets, RFC
//! 3501 §2.3.1.1: a UIDVALIDITY change forgets the mailbox's UIDs, and its
//! messages are read again — the same bytes are the same email, so the
//! JMAP ids of unchanged messages stay).
//!
//! A new UID's message is read once (`BODY.PEEK[]`) and stored through
//! [`crate::mail::ingest`] like any imported message: header block,
//! projection, part tree, threads, search index. After every mailbox is
//! read, each email's mailboxIds and keywords are set to what the upstream
//! holds (the union of the flags of its copies), and an email the upstream
//! no longer has anywhere is destroyed. Additions come before removals, so
//! a message another client MOVEd keeps its JMAP id and only changes
//! mailboxIds. Every change goes through the store's ordinary writes, so
//! it reaches Email/changes, Mailbox/changes and push like a JMAP write.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use super::connection::{Connection, FetchedMessage, ListedMailbox, MessageFlags, Selected};
use super::{keywords_of_flags, utf7};
use crate::blob::BlobStore;
use crate::mail::ingest::{self, PreparedEmail};
use crate::proxy::upstream::UpstreamError;
use crate::store::{
    EmailUpdate, Inserted, MailboxNode, MailboxPatch, NewMailbox, Store, UpstreamCopy,
    UpstreamMailbox, default_sort_order,
};

/// Messages fetched per UID FETCH of whole messages.
const FETCH_BATCH: usize = 32;

/// What one sync did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Upstream mailboxes mirrored.
    pub mailboxes: usize,
    /// Mailboxes whose UIDs and flags were read (the others were unchanged
    /// since their last read, by CONDSTORE).
    pub mailboxes_read: usize,
    /// Messages read from the upstream (new UIDs).
    pub fetched: usize,
    /// Octets of those messages.
    pub fetched_octets: u64,
    /// Emails whose mailboxIds or keywords changed.
    pub updated: usize,
    /// Emails destroyed (gone from every upstream mailbox).
    pub destroyed: usize,
    /// Mailboxes the upstream refused to open (their mail kept as it was).
    pub skipped: usize,
    /// A mailbox changed while the sync read the others, so emails that
    /// seemed gone were kept: sync again soon.
    pub unstable: bool,
}

/// What reading one mailbox did, added to the sync's [`SyncReport`].
#[derive(Default)]
struct Counts {
    read: usize,
    fetched: usize,
    fetched_octets: u64,
}

impl SyncReport {
    fn add(&mut self, counts: Counts) {
        self.mailboxes_read += counts.read;
        self.fetched += counts.fetched;
        self.fetched_octets += counts.fetched_octets;
    }
}

/// What the upstream holds of one email: its mailboxes and keywords.
#[derive(Default)]
struct Held {
    mailboxes: BTreeSet<i64>,
    keywords: BTreeSet<String>,
}

/// Copies a write through this connection took out of a mailbox (UID MOVE
/// or EXPUNGE answered OK): (mailbox id, UIDs) each. The sync that follows
/// forgets them and reconciles their emails, so the mailbox's mapping need
/// not be read whole to find what went (module doc).
pub type Removed = Vec<(i64, Vec<u32>)>;

/// Syncs `account` from the logged-in `connection`, first forgetting the
/// copies `removed` by a write. An error leaves the store consistent
/// (every step is one of its ordinary writes) and the next sync picks up
/// where this one stopped.
pub async fn sync_account(
    store: &dyn Store,
    blobs: &Arc<BlobStore>,
    account: i64,
    connection: &mut Connection,
    removed: Removed,
) -> Result<SyncReport, UpstreamError> {
    // The emails whose copies this sync changes: only they are reconciled
    // (those a write removed a copy of, those of a mailbox gone upstream,
    // and what each mailbox read adds, removes or reflags).
    let mut touched: HashSet<i64> = HashSet::new();
    for (mailbox, uids) in removed {
        let uids: Vec<i64> = uids.into_iter().map(i64::from).collect();
        let copies = store.upstream_uids(mailbox, Some(&uids)).await?;
        touched.extend(copies.into_iter().map(|copy| copy.email_id));
        store.forget_upstream_uids(mailbox, Some(&uids)).await?;
    }
    let listed = connection.list().await?;
    let subscribed = connection.subscribed().await?;
    let (mirrored, stale, leftovers) =
        mirror_mailboxes(store, account, &listed, &subscribed).await?;
    for mailbox in leftovers {
        // A mailbox the account was made with that mirrors nothing; one
        // that holds mail or a child stays (the store refuses).
        let _ = store.destroy_mailbox(account, mailbox, false).await;
    }
    let mut report = SyncReport {
        mailboxes: mirrored.len(),
        ..SyncReport::default()
    };
    for mailbox in &stale {
        let copies = store.upstream_uids(mailbox.mailbox_id, None).await?;
        touched.extend(copies.into_iter().map(|copy| copy.email_id));
    }
    // What each mailbox was when read: a message that moved between two
    // reads is seen in neither, and must not be destroyed for that.
    let mut seen: Vec<(&UpstreamMailbox, Selected)> = Vec::new();
    for (mailbox, selectable) in &mirrored {
        if *selectable {
            let read = sync_mailbox(store, blobs, account, connection, mailbox, &mut touched);
            match read
                .await
                .map(|(selected, counts)| (selected, report.add(counts)))
            {
                Ok((selected, ())) => seen.push((mailbox, selected)),
                // One mailbox the upstream will not open (`NO`) is skipped,
                // its messages kept as they were; the others sync.
                Err(UpstreamError::Refused(why)) => {
                    tracing::warn!(account, mailbox = %mailbox.name, %why, "upstream mailbox skipped");
                    report.skipped += 1;
                }
                Err(error) => return Err(error),
            }
        }
    }
    // What the upstream holds of those emails: their copies in the
    // mailboxes it still lists.
    let gone: HashSet<i64> = stale.iter().map(|m| m.mailbox_id).collect();
    let ids: Vec<i64> = touched.iter().copied().collect();
    let mut held: HashMap<i64, Held> = HashMap::new();
    for (email, mailbox, _, keywords) in store.upstream_locations(account, &ids).await? {
        if gone.contains(&mailbox) {
            continue;
        }
        let entry = held.entry(email).or_default();
        entry.mailboxes.insert(mailbox);
        entry
            .keywords
            .extend(keywords.split_whitespace().map(str::to_string));
    }
    let destroy = reconcile(store, account, &touched, &held, &mut report).await?;
    if !destroy.is_empty() {
        if unchanged_since_read(connection, &seen).await? {
            report.destroyed = store.destroy_emails(account, &destroy).await?.len();
        } else {
            report.unstable = true;
        }
    }
    // Children before parents: a longer name is never a parent of a shorter.
    let mut gone: Vec<&UpstreamMailbox> = stale.iter().collect();
    gone.sort_by_key(|mailbox| std::cmp::Reverse(mailbox.name.len()));
    for mailbox in gone {
        store
            .destroy_mailbox(account, mailbox.mailbox_id, true)
            .await?;
    }
    store
        .record_upstream_sync(account, chrono::Utc::now().timestamp())
        .await?;
    Ok(report)
}

/// Reads one mailbox: nothing when its UIDVALIDITY and HIGHESTMODSEQ
/// (RFC 7162 CONDSTORE) are those of its last whole read; else what
/// changed since that read when no message went ([`changes_since`]: the
/// work is that of the messages changed, whatever the mailbox holds), or
/// else its UIDs and flags whole, gone UIDs forgotten; then new UIDs
/// fetched and stored and changed flags recorded per copy.
async fn sync_mailbox(
    store: &dyn Store,
    blobs: &Arc<BlobStore>,
    account: i64,
    connection: &mut Connection,
    mailbox: &UpstreamMailbox,
    touched: &mut HashSet<i64>,
) -> Result<(Selected, Counts), UpstreamError> {
    let mut report = Counts::default();
    let selected = connection.examine(&mailbox.name).await?;
    let uid_validity = i64::from(selected.uid_validity);
    let highest_modseq = selected
        .highest_modseq
        .and_then(|modseq| i64::try_from(modseq).ok());
    if uid_validity == mailbox.uid_validity
        && highest_modseq.is_some()
        && highest_modseq == mailbox.highest_modseq
    {
        return Ok((selected, report));
    }
    report.read += 1;
    let since = highest_modseq
        .and(mailbox.highest_modseq)
        .filter(|_| uid_validity == mailbox.uid_validity);
    let delta = match since {
        Some(since) => {
            changes_since(store, connection, &selected, since, mailbox.mailbox_id).await?
        }
        None => None,
    };
    let (upstream, mut local) = match delta {
        Some(delta) => delta,
        None => {
            if uid_validity != mailbox.uid_validity {
                let copies = store.upstream_uids(mailbox.mailbox_id, None).await?;
                touched.extend(copies.into_iter().map(|copy| copy.email_id));
                store.forget_upstream_uids(mailbox.mailbox_id, None).await?;
            }
            let local = local_copies(store, mailbox.mailbox_id, None).await?;
            let upstream = connection.flags(&selected).await?;
            forget_gone(store, mailbox.mailbox_id, &upstream, &local, touched).await?;
            (upstream, local)
        }
    };
    let new: Vec<u32> = upstream
        .iter()
        .map(|m| m.uid)
        .filter(|uid| !local.contains_key(uid))
        .collect();
    for batch in new.chunks(FETCH_BATCH) {
        let fetched = connection.fetch(batch).await?;
        report.fetched += fetched.len();
        report.fetched_octets += fetched.iter().map(|m| m.raw.len() as u64).sum::<u64>();
        let recorded = store_fetched(store, blobs, account, mailbox.mailbox_id, fetched).await?;
        for copy in recorded {
            touched.insert(copy.email_id);
            local.insert(copy.uid as u32, copy);
        }
    }
    record_changed_flags(store, mailbox.mailbox_id, &upstream, &local, touched).await?;
    let read = UpstreamMailbox {
        uid_validity,
        highest_modseq,
        ..mailbox.clone()
    };
    store.put_upstream_mailbox(account, &read).await?;
    Ok((selected, report))
}

/// The copies of mailbox `mailbox_id` the store has mapped, by UID: all,
/// or those of the UIDs `among`.
async fn local_copies(
    store: &dyn Store,
    mailbox_id: i64,
    among: Option<&[i64]>,
) -> Result<HashMap<u32, UpstreamCopy>, UpstreamError> {
    Ok(store
        .upstream_uids(mailbox_id, among)
        .await?
        .into_iter()
        .filter_map(|copy| Some((u32::try_from(copy.uid).ok()?, copy)))
        .collect())
}

/// Forgets the UIDs of `local` the upstream no longer lists, their emails
/// `touched`.
async fn forget_gone(
    store: &dyn Store,
    mailbox_id: i64,
    upstream: &[MessageFlags],
    local: &HashMap<u32, UpstreamCopy>,
    touched: &mut HashSet<i64>,
) -> Result<(), UpstreamError> {
    let on_upstream: HashSet<u32> = upstream.iter().map(|m| m.uid).collect();
    let gone: Vec<i64> = local
        .iter()
        .filter(|(uid, _)| !on_upstream.contains(uid))
        .map(|(uid, copy)| {
            touched.insert(copy.email_id);
            i64::from(*uid)
        })
        .collect();
    store.forget_upstream_uids(mailbox_id, Some(&gone)).await?;
    Ok(())
}

/// Stores a batch of messages fetched from mailbox `mailbox_id` through
/// ingest and records their UIDs; the copies recorded.
async fn store_fetched(
    store: &dyn Store,
    blobs: &Arc<BlobStore>,
    account: i64,
    mailbox_id: i64,
    fetched: Vec<FetchedMessage>,
) -> Result<Vec<UpstreamCopy>, UpstreamError> {
    let heads: Vec<(u32, Vec<String>)> = fetched
        .iter()
        .map(|m| (m.uid, keywords_of_flags(m.flags.iter().map(String::as_str))))
        .collect();
    let prepared: Vec<PreparedEmail> = tokio::task::spawn_blocking(move || {
        fetched
            .into_iter()
            .map(|message| {
                let keywords = keywords_of_flags(message.flags.iter().map(String::as_str));
                // INTERNALDATE is receivedAt; a server that gives none: now.
                let received_at = message
                    .internal_date
                    .unwrap_or_else(|| chrono::Utc::now().timestamp());
                ingest::prepare(message.raw, vec![mailbox_id], keywords, |_| received_at)
            })
            .collect()
    })
    .await
    .map_err(|error| UpstreamError::Refused(format!("preparing messages: {error}")))?;
    let stored: Vec<String> = prepared.iter().map(|p| p.email.blob_id.clone()).collect();
    let inserted = ingest::store_batch(store, blobs, account, prepared).await?;
    // A message read again is in the cache again, evicted or not before.
    let stored: Vec<&str> = stored.iter().map(String::as_str).collect();
    store.unmark_evicted(&stored).await?;
    let recorded: Vec<UpstreamCopy> = heads
        .into_iter()
        .zip(&inserted)
        .map(|((uid, keywords), outcome)| UpstreamCopy {
            uid: i64::from(uid),
            email_id: match outcome {
                Inserted::New(id) | Inserted::Duplicate(id) => *id,
            },
            keywords,
        })
        .collect();
    store.record_upstream_uids(mailbox_id, &recorded).await?;
    Ok(recorded)
}

/// Records the keywords of each copy in `local` whose upstream flags
/// changed, their emails `touched`.
async fn record_changed_flags(
    store: &dyn Store,
    mailbox_id: i64,
    upstream: &[MessageFlags],
    local: &HashMap<u32, UpstreamCopy>,
    touched: &mut HashSet<i64>,
) -> Result<(), UpstreamError> {
    let changed: Vec<UpstreamCopy> = upstream
        .iter()
        .filter_map(|message| {
            let copy = local.get(&message.uid)?;
            let keywords = keywords_of_flags(message.flags.iter().map(String::as_str));
            (keywords != copy.keywords).then(|| UpstreamCopy {
                keywords,
                ..copy.clone()
            })
        })
        .collect();
    touched.extend(changed.iter().map(|copy| copy.email_id));
    store.record_upstream_uids(mailbox_id, &changed).await?;
    Ok(())
}

/// What changed in the open mailbox since mod-sequence `since` (RFC 7162
/// §3.1.4 CHANGEDSINCE: new messages and changed flags) with the mapped
/// copies among it, when no message went (EXISTS is the mapped count plus
/// the new ones); `None` when one did (the mailbox is then read whole).
/// Reads only the changed messages' rows, never the whole mapping.
async fn changes_since(
    store: &dyn Store,
    connection: &mut Connection,
    selected: &Selected,
    since: i64,
    mailbox_id: i64,
) -> Result<Option<(Vec<MessageFlags>, HashMap<u32, UpstreamCopy>)>, UpstreamError> {
    let changed = connection
        .flags_changed_since(selected, u64::try_from(since).unwrap_or(0))
        .await?;
    let uids: Vec<i64> = changed.iter().map(|m| i64::from(m.uid)).collect();
    let known = local_copies(store, mailbox_id, Some(&uids)).await?;
    let new = changed
        .iter()
        .filter(|m| !known.contains_key(&m.uid))
        .count();
    let mapped = store.upstream_uid_count(mailbox_id).await?;
    if i64::from(selected.exists) != mapped + new as i64 {
        return Ok(None);
    }
    Ok(Some((changed, known)))
}

/// Whether every mailbox read is still as it was when read (EXAMINE again:
/// UIDVALIDITY, HIGHESTMODSEQ or else EXISTS and UIDNEXT).
async fn unchanged_since_read(
    connection: &mut Connection,
    seen: &[(&UpstreamMailbox, Selected)],
) -> Result<bool, UpstreamError> {
    for (mailbox, then) in seen {
        match connection.examine(&mailbox.name).await {
            Ok(now) if now == *then => {}
            Ok(_) => return Ok(false),
            Err(UpstreamError::Refused(_)) => return Ok(false),
            Err(error) => return Err(error),
        }
    }
    Ok(true)
}

/// Sets the touched emails' mailboxIds and keywords to what the upstream holds;
/// returns those it holds nowhere (to destroy once the read is known to be
/// stable).
async fn reconcile(
    store: &dyn Store,
    account: i64,
    touched: &HashSet<i64>,
    held: &HashMap<i64, Held>,
    report: &mut SyncReport,
) -> Result<Vec<i64>, UpstreamError> {
    let ids: Vec<i64> = touched
        .iter()
        .copied()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let metas = store.email_meta(account, &ids).await?;
    let mut updates = Vec::new();
    let mut destroy = Vec::new();
    for meta in metas {
        match held.get(&meta.id) {
            None => destroy.push(meta.id),
            Some(upstream) => {
                let mailboxes: Vec<i64> = upstream.mailboxes.iter().copied().collect();
                let keywords: Vec<String> = upstream.keywords.iter().cloned().collect();
                if mailboxes != meta.mailbox_ids || keywords != meta.keywords {
                    updates.push(EmailUpdate::replace(
                        meta.id,
                        Some(keywords),
                        Some(mailboxes),
                    ));
                }
            }
        }
    }
    if !updates.is_empty() {
        store.update_emails(account, &updates).await?;
        report.updated = updates.len();
    }
    Ok(destroy)
}

/// Mirrors the upstream's mailboxes: each listed one mapped to a local
/// mailbox (made, or adopted from those the account was made with by role
/// or by name, or updated in name, parent, role and subscription). Returns
/// the mirrored mailboxes with whether they can be selected (parents
/// first), the mapped ones the upstream no longer lists, and local
/// mailboxes that mirror nothing.
async fn mirror_mailboxes(
    store: &dyn Store,
    account: i64,
    listed: &[ListedMailbox],
    subscribed: &HashSet<String>,
) -> Result<(Vec<(UpstreamMailbox, bool)>, Vec<UpstreamMailbox>, Vec<i64>), UpstreamError> {
    let local: HashMap<i64, MailboxNode> = store
        .mailbox_nodes(account)
        .await?
        .into_iter()
        .map(|row| (row.id, row))
        .collect();
    let mapped = store.upstream_mailboxes(account).await?;
    let mut by_name: HashMap<&str, &UpstreamMailbox> =
        mapped.iter().map(|m| (m.name.as_str(), m)).collect();
    let mut claimed: HashSet<i64> = mapped.iter().map(|m| m.mailbox_id).collect();
    let mut ordered: Vec<&ListedMailbox> = listed.iter().collect();
    ordered.sort_by_key(|m| (depth(m), m.name.clone()));
    let mut ids_by_name: HashMap<&str, i64> = HashMap::new();
    let mut roles_taken: HashSet<&str> = HashSet::new();
    let mut mirrored = Vec::new();
    for listed in ordered {
        let (parent_name, leaf) = split_name(listed);
        let parent_id = parent_name.and_then(|parent| ids_by_name.get(parent).copied());
        let name = utf7::decode(leaf).unwrap_or_else(|| leaf.to_string());
        let role = listed.role.filter(|role| roles_taken.insert(role));
        let is_subscribed = subscribed.contains(&listed.name) || listed.role == Some("inbox");
        let existing = by_name.remove(listed.name.as_str()).cloned().or_else(|| {
            // Adopt a mailbox the account was made with: by role, else by name.
            let adopt = local
                .values()
                .filter(|row| !claimed.contains(&row.id))
                .find(|row| {
                    (role.is_some() && row.role.as_deref() == role)
                        || (row.parent_id == parent_id && row.name == name)
                })?;
            Some(UpstreamMailbox {
                mailbox_id: adopt.id,
                name: listed.name.clone(),
                uid_validity: 0,
                highest_modseq: None,
            })
        });
        let mailbox = match existing {
            Some(mailbox) => {
                claimed.insert(mailbox.mailbox_id);
                if let Some(row) = local.get(&mailbox.mailbox_id) {
                    let wanted = MailboxNode {
                        parent_id,
                        name: name.clone(),
                        role: role.map(str::to_string),
                        is_subscribed,
                        ..row.clone()
                    };
                    follow_upstream(store, account, row, &wanted).await?;
                }
                mailbox
            }
            None => {
                let id = store
                    .create_mailbox(
                        account,
                        &NewMailbox {
                            parent_id,
                            name,
                            role: role.map(str::to_string),
                            // As a standalone Fastview orders them.
                            sort_order: default_sort_order(role),
                            is_subscribed,
                        },
                    )
                    .await?;
                claimed.insert(id);
                UpstreamMailbox {
                    mailbox_id: id,
                    name: listed.name.clone(),
                    uid_validity: 0,
                    highest_modseq: None,
                }
            }
        };
        // A mapping as recorded needs no write (a sync that finds nothing
        // new writes nothing but its time).
        if mapped
            .iter()
            .all(|known| known.mailbox_id != mailbox.mailbox_id || known.name != mailbox.name)
        {
            store.put_upstream_mailbox(account, &mailbox).await?;
        }
        ids_by_name.insert(listed.name.as_str(), mailbox.mailbox_id);
        mirrored.push((mailbox, listed.selectable));
    }
    let stale: Vec<UpstreamMailbox> = by_name.into_values().cloned().collect();
    let leftovers: Vec<i64> = local
        .keys()
        .filter(|id| !claimed.contains(id))
        .copied()
        .collect();
    Ok((mirrored, stale, leftovers))
}

/// Updates local mailbox `row` to be as `wanted` (its parent, name, role
/// and subscription as the upstream lists them); nothing when it is.
async fn follow_upstream(
    store: &dyn Store,
    account: i64,
    row: &MailboxNode,
    wanted: &MailboxNode,
) -> Result<(), UpstreamError> {
    let patch = MailboxPatch {
        parent_id: (row.parent_id != wanted.parent_id).then_some(wanted.parent_id),
        name: (row.name != wanted.name).then(|| wanted.name.clone()),
        role: (row.role != wanted.role).then(|| wanted.role.clone()),
        sort_order: None,
        is_subscribed: (row.is_subscribed != wanted.is_subscribed).then_some(wanted.is_subscribed),
    };
    if patch != MailboxPatch::default() {
        store.update_mailbox(account, row.id, &patch).await?;
    }
    Ok(())
}

/// How deep a mailbox is in the upstream's hierarchy (0: top level).
fn depth(mailbox: &ListedMailbox) -> usize {
    match &mailbox.delimiter {
        Some(delimiter) if !delimiter.is_empty() => {
            mailbox.name.matches(delimiter.as_str()).count()
        }
        _ => 0,
    }
}

/// The parent's full name and the leaf of a listed name.
fn split_name(mailbox: &ListedMailbox) -> (Option<&str>, &str) {
    match &mailbox.delimiter {
        Some(delimiter) if !delimiter.is_empty() => {
            match mailbox.name.rsplit_once(delimiter.as_str()) {
                Some((parent, leaf)) => (Some(parent), leaf),
                None => (None, mailbox.name.as_str()),
            }
        }
        _ => (None, mailbox.name.as_str()),
    }
}

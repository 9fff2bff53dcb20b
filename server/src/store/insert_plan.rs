//! Planning a batch of new emails in memory, so each store writes a whole
//! batch in a fixed handful of statements instead of several per message.
//!
//! Both stores run the same steps inside their write transaction:
//! 1. read the account's emails with the batch's blob ids ([`new_count`]
//!    then tells how many ids to allocate),
//! 2. allocate that many email ids,
//! 3. read the stored thread refs of every message id the batch names
//!    ([`ref_keys`]),
//! 4. [`plan`]: duplicates, ids and threads, exactly as storing the
//!    messages one by one in batch order would decide them,
//! 5. write the planned rows with one multi-row statement per table.
//!
//! Threading (RFC 8621 §3 leaves the algorithm to the server): a message
//! joins the smallest thread that has a message id in common with it (its
//! own Message-ID, In-Reply-To or References) *and* the same base subject,
//! counting the refs stored before the batch and those of earlier messages of
//! the batch; otherwise it starts a thread whose id is its own email id.

use std::collections::{HashMap, HashSet};

use super::change_log::ChangeSet;
use super::{ChangeKind, ChangeType, Inserted, NewEmail, StoreError, StoreResult};

/// A stored `thread_refs` row: a message id seen in a thread, with the base
/// subject of the message that recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadRef {
    pub message_id: String,
    pub thread_id: i64,
    pub base_subject: String,
}

/// One new email of the batch, with its allocated id and its thread.
#[derive(Debug, Clone, Copy)]
pub struct PlannedEmail<'a> {
    pub id: i64,
    pub thread_id: i64,
    pub email: &'a NewEmail,
}

/// What a batch writes: outcomes in batch order, the new emails and the new
/// thread refs (each `(message_id, thread_id)` pair once).
#[derive(Debug, Default)]
pub struct InsertPlan<'a> {
    pub outcomes: Vec<Inserted>,
    pub new: Vec<PlannedEmail<'a>>,
    pub refs: Vec<ThreadRef>,
}

impl InsertPlan<'_> {
    /// The ids of the new emails, in batch order.
    pub fn new_ids(&self) -> Vec<i64> {
        self.new.iter().map(|planned| planned.id).collect()
    }

    /// The change-log entries of the batch (RFC 8620 §5.2): each new email
    /// created, the counts of its mailboxes changed, and each of its threads
    /// created, or updated when `existed` (the threads that had emails
    /// before this batch) holds it.
    pub(crate) fn changes(&self, existed: &HashSet<i64>) -> ChangeSet {
        let mut set = ChangeSet::default();
        for planned in &self.new {
            set.record(ChangeType::Email, planned.id, ChangeKind::Created);
            for mailbox in &planned.email.mailbox_ids {
                set.counts(*mailbox);
            }
        }
        for thread in self.threads() {
            let kind = if existed.contains(&thread) {
                ChangeKind::Updated
            } else {
                ChangeKind::Created
            };
            set.record(ChangeType::Thread, thread, kind);
        }
        set
    }

    /// The distinct threads of the new emails, ascending.
    pub fn threads(&self) -> Vec<i64> {
        let mut threads: Vec<i64> = self.new.iter().map(|e| e.thread_id).collect();
        threads.sort_unstable();
        threads.dedup();
        threads
    }
}

/// How many emails of the batch are new: not stored yet (`stored` maps blob
/// id → email id of the account) and not a repeat of an earlier one.
pub fn new_count(emails: &[NewEmail], stored: &HashMap<String, i64>) -> usize {
    let mut seen: HashSet<&str> = HashSet::with_capacity(emails.len());
    emails
        .iter()
        .filter(|e| !stored.contains_key(&e.blob_id) && seen.insert(e.blob_id.as_str()))
        .count()
}

/// The message ids the batch names, as stored keys (`key` maps a message id
/// to its stored form), sorted and distinct.
pub fn ref_keys(emails: &[NewEmail], key: impl Fn(&str) -> String) -> Vec<String> {
    let mut keys: Vec<String> = emails
        .iter()
        .flat_map(|e| e.index.message_id.iter().chain(&e.index.referenced_ids))
        .map(|id| key(id))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// Plans the batch. `stored` maps blob id → email id of the emails already in
/// the account; `ids` are fresh email ids, at least [`new_count`] of them,
/// given out in ascending order; `stored_refs` are the thread refs of the
/// account for the batch's [`ref_keys`]. `key` and `subject` map a message id
/// and a base subject to their stored forms.
///
/// Errors: [`StoreError::Conflict`] when `ids` runs out.
pub fn plan<'a>(
    emails: &'a [NewEmail],
    mut stored: HashMap<String, i64>,
    mut ids: Vec<i64>,
    stored_refs: Vec<ThreadRef>,
    key: impl Fn(&str) -> String,
    subject: impl Fn(&str) -> String,
) -> StoreResult<InsertPlan<'a>> {
    ids.sort_unstable();
    let mut ids = ids.into_iter();
    // (message id, base subject) → smallest thread; (message id, thread) seen.
    let mut threads: HashMap<(String, String), i64> = HashMap::new();
    let mut seen_refs: HashSet<(String, i64)> = HashSet::new();
    let note = |threads: &mut HashMap<(String, String), i64>, r: &ThreadRef| {
        threads
            .entry((r.message_id.clone(), r.base_subject.clone()))
            .and_modify(|t| *t = (*t).min(r.thread_id))
            .or_insert(r.thread_id);
    };
    for r in &stored_refs {
        seen_refs.insert((r.message_id.clone(), r.thread_id));
        note(&mut threads, r);
    }
    let mut plan = InsertPlan {
        outcomes: Vec::with_capacity(emails.len()),
        ..InsertPlan::default()
    };
    for email in emails {
        if let Some(id) = stored.get(&email.blob_id) {
            plan.outcomes.push(Inserted::Duplicate(*id));
            continue;
        }
        let id = ids
            .next()
            .ok_or_else(|| StoreError::Conflict("email id allocation".into()))?;
        stored.insert(email.blob_id.clone(), id);
        let base_subject = subject(&email.index.base_subject);
        let email_keys: Vec<String> = email
            .index
            .message_id
            .iter()
            .chain(&email.index.referenced_ids)
            .map(|k| key(k))
            .collect();
        let thread_id = email_keys
            .iter()
            .filter_map(|k| threads.get(&(k.clone(), base_subject.clone())).copied())
            .min()
            .unwrap_or(id);
        for message_id in email_keys {
            if seen_refs.insert((message_id.clone(), thread_id)) {
                let r = ThreadRef {
                    message_id,
                    thread_id,
                    base_subject: base_subject.clone(),
                };
                note(&mut threads, &r);
                plan.refs.push(r);
            }
        }
        plan.new.push(PlannedEmail {
            id,
            thread_id,
            email,
        });
        plan.outcomes.push(Inserted::New(id));
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::EmailIndex;
    use crate::store::FastView;

    fn email(blob: &str, message_id: Option<&str>, refs: &[&str], subject: &str) -> NewEmail {
        NewEmail {
            blob_id: blob.to_string(),
            size: 1,
            received_at: 0,
            sent_at: None,
            mailbox_ids: vec![1],
            keywords: Vec::new(),
            header_block: Vec::new(),
            fast_view: FastView::default(),
            structure: Vec::new(),
            search: Default::default(),
            index: EmailIndex {
                message_id: message_id.map(str::to_string),
                referenced_ids: refs.iter().map(|r| r.to_string()).collect(),
                base_subject: subject.to_string(),
                ..EmailIndex::default()
            },
        }
    }

    fn same(s: &str) -> String {
        s.to_string()
    }

    #[test]
    fn duplicates_ids_and_threads_follow_batch_order() {
        let emails = vec![
            email("b1", Some("a@x"), &[], "plans"),
            // Replies to a@x with the same base subject: thread of b1.
            email("b2", Some("b@x"), &["a@x"], "plans"),
            // A repeat of b1 within the batch.
            email("b1", Some("a@x"), &[], "plans"),
            // Refers to a@x but another subject: a thread of its own.
            email("b3", Some("c@x"), &["a@x"], "other"),
            // Already stored as email 7.
            email("b4", None, &[], ""),
            // Joins the stored thread 5 through old@x, not b1's thread.
            email("b5", Some("d@x"), &["old@x", "b@x"], "plans"),
        ];
        let stored: HashMap<String, i64> = [("b4".to_string(), 7)].into();
        assert_eq!(new_count(&emails, &stored), 4);
        assert_eq!(
            ref_keys(&emails, same),
            ["a@x", "b@x", "c@x", "d@x", "old@x"]
        );
        let stored_refs = vec![ThreadRef {
            message_id: "old@x".into(),
            thread_id: 5,
            base_subject: "plans".into(),
        }];
        let plan = plan(
            &emails,
            stored,
            vec![13, 11, 12, 10],
            stored_refs,
            same,
            same,
        )
        .unwrap();
        assert_eq!(
            plan.outcomes,
            [
                Inserted::New(10),
                Inserted::New(11),
                Inserted::Duplicate(10),
                Inserted::New(12),
                Inserted::Duplicate(7),
                Inserted::New(13),
            ]
        );
        let placed: Vec<(i64, i64)> = plan.new.iter().map(|e| (e.id, e.thread_id)).collect();
        assert_eq!(placed, [(10, 10), (11, 10), (12, 12), (13, 5)]);
        assert_eq!(plan.threads(), [5, 10, 12]);
        assert_eq!(plan.new_ids(), [10, 11, 12, 13]);
        // Thread 5 had emails before the batch; 10 and 12 are new.
        let changes = plan.changes(&HashSet::from([5]));
        let logged: Vec<(ChangeType, i64, ChangeKind, bool)> = changes
            .entries
            .iter()
            .map(|((kind_of, id), (kind, counts_only))| (*kind_of, *id, *kind, *counts_only))
            .collect();
        use ChangeKind::{Created, Updated};
        use ChangeType::{Email, Mailbox, Thread};
        assert_eq!(
            logged,
            [
                (Email, 10, Created, false),
                (Email, 11, Created, false),
                (Email, 12, Created, false),
                (Email, 13, Created, false),
                (Mailbox, 1, Updated, true),
                (Thread, 5, Updated, false),
                (Thread, 10, Created, false),
                (Thread, 12, Created, false),
            ]
        );
        let refs: Vec<(&str, i64)> = plan
            .refs
            .iter()
            .map(|r| (r.message_id.as_str(), r.thread_id))
            .collect();
        assert_eq!(
            refs,
            [
                ("a@x", 10),
                ("b@x", 10),
                ("c@x", 12),
                ("a@x", 12),
                ("d@x", 5),
                ("b@x", 5),
            ]
        );
    }

    #[test]
    fn running_out_of_ids_is_an_error_not_a_panic() {
        let emails = vec![email("b1", None, &[], ""), email("b2", None, &[], "")];
        let result = plan(&emails, HashMap::new(), vec![1], Vec::new(), same, same);
        assert!(matches!(result, Err(StoreError::Conflict(_))));
    }
}

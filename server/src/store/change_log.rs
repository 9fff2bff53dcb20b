//! The per-account change log (RFC 8620 §5.2): what a write changed
//! ([`ChangeSet`], logged at the account's next modseq by the store), state
//! strings as log positions ([`LogPosition`]), and the collapse of log rows
//! into one page of Foo/changes ([`ChangeCollector`] → [`Changes`]).

use std::collections::{BTreeMap, HashMap};

use async_trait::async_trait;

use super::{States, StoreError, StoreResult};

/// State strings and the change log behind Foo/changes (RFC 8620 §5.1, §5.2).
#[async_trait]
pub trait ChangeLog: Send + Sync + 'static {
    /// The account's current state counters.
    async fn states(&self, account: i64) -> StoreResult<States>;
    /// The changes of one type since `since`, at most `max_changes` ids
    /// (RFC 8620 §5.2); `CannotCalculateChanges` when `since` is after the
    /// type's state or before the retained log, `NotFound` for no account.
    async fn changes(
        &self,
        account: i64,
        kind: ChangeType,
        since: LogPosition,
        max_changes: usize,
    ) -> StoreResult<Changes>;
    /// Drops the account's log rows up to and including `through_modseq`:
    /// changes from earlier states can no longer be calculated. Returns the
    /// number of rows dropped.
    async fn truncate_changes(&self, account: i64, through_modseq: i64) -> StoreResult<u64>;
}
/// The data types whose changes the log records (RFC 8620 §5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ChangeType {
    Email = 1,
    Mailbox = 2,
    Thread = 3,
    /// RFC 8621 §6.
    Identity = 4,
    /// RFC 8621 §8: the one object `singleton`, logged as object 0.
    VacationResponse = 5,
    /// RFC 8621 §7.
    EmailSubmission = 6,
}

/// What happened to an object at one modseq.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ChangeKind {
    Created = 0,
    Updated = 1,
    Destroyed = 2,
}

impl ChangeKind {
    /// The `kind` column value back as a kind (unknown values read as updated).
    pub fn from_code(code: i64) -> Self {
        match code {
            0 => ChangeKind::Created,
            2 => ChangeKind::Destroyed,
            _ => ChangeKind::Updated,
        }
    }
}

/// A point in an account's change log: every change up to and including
/// `modseq`, or, with `object`, the changes of `modseq` only up to that object
/// id (an intermediate state of a paged Foo/changes inside one large write).
/// As a state string: `"12"` or `"12:40"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct LogPosition {
    pub modseq: i64,
    pub object: Option<i64>,
}

impl LogPosition {
    /// The position of a whole modseq (an ordinary state string).
    pub fn at(modseq: i64) -> Self {
        Self {
            modseq,
            object: None,
        }
    }

    /// Parses a state string; `None` for anything this server never issues.
    pub fn parse(state: &str) -> Option<Self> {
        let number = |text: &str| -> Option<i64> {
            let ok = !text.is_empty()
                && text.len() <= 18
                && text.bytes().all(|b| b.is_ascii_digit())
                && (text == "0" || !text.starts_with('0'));
            ok.then(|| text.parse().ok()).flatten()
        };
        match state.split_once(':') {
            None => Some(Self::at(number(state)?)),
            Some((modseq, object)) => Some(Self {
                modseq: number(modseq)?,
                object: Some(number(object)?),
            }),
        }
    }
}

impl std::fmt::Display for LogPosition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.object {
            None => write!(f, "{}", self.modseq),
            Some(object) => write!(f, "{}:{object}", self.modseq),
        }
    }
}

/// The changes of one type since a [`LogPosition`] (RFC 8620 §5.2), each
/// object once: created then updated is created; updated then destroyed is
/// destroyed; created then destroyed is omitted. Ids ascend in each list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    pub created: Vec<i64>,
    pub updated: Vec<i64>,
    pub destroyed: Vec<i64>,
    /// Of `updated`, the mailboxes of which only the counts (totalEmails,
    /// unreadEmails, totalThreads, unreadThreads) changed.
    pub counts_only: Vec<i64>,
    /// The position these changes lead to: the type's state when
    /// `has_more` is false, else an intermediate position.
    pub new_state: LogPosition,
    /// More changes follow `new_state`.
    pub has_more: bool,
}

impl Changes {
    /// How many ids the three lists hold together.
    pub fn len(&self) -> usize {
        self.created.len() + self.updated.len() + self.destroyed.len()
    }

    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The objects one write transaction changed, merged per object, to be
/// logged at the account's next modseq (used by both implementations).
#[derive(Debug, Default)]
pub(crate) struct ChangeSet {
    pub(super) entries: BTreeMap<(ChangeType, i64), (ChangeKind, bool)>,
    /// Advance every type's state even without log rows (a new account).
    pub all_types: bool,
}

impl ChangeSet {
    /// Records a change of one object.
    pub fn record(&mut self, kind_of: ChangeType, id: i64, kind: ChangeKind) {
        self.merge(kind_of, id, kind, false);
    }

    /// Records that a mailbox's counts may have changed.
    pub fn counts(&mut self, mailbox: i64) {
        self.merge(ChangeType::Mailbox, mailbox, ChangeKind::Updated, true);
    }

    fn merge(&mut self, kind_of: ChangeType, id: i64, kind: ChangeKind, counts_only: bool) {
        use ChangeKind::*;
        let key = (kind_of, id);
        let merged = match (self.entries.get(&key).copied(), kind) {
            (None, _) => Some((kind, counts_only)),
            (Some((Created, _)), Destroyed) => None,
            (Some((Created, _)), _) => Some((Created, false)),
            (Some((Destroyed, _)), Created) => Some((Updated, false)),
            (Some((Destroyed, _)), _) => Some((Destroyed, false)),
            (Some((Updated, _)), Destroyed) => Some((Destroyed, false)),
            (Some((Updated, _)), Created) => Some((Created, false)),
            (Some((Updated, before)), Updated) => Some((Updated, before && counts_only)),
        };
        match merged {
            Some(value) => self.entries.insert(key, value),
            None => self.entries.remove(&key),
        };
    }

    /// Whether the write changed nothing to log or advance.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && !self.all_types
    }

    /// Whether the state of `kind_of` advances.
    pub fn touches(&self, kind_of: ChangeType) -> bool {
        self.all_types || self.entries.keys().any(|(t, _)| *t == kind_of)
    }

    /// The log rows: (type, object id, kind, counts only).
    pub fn rows(&self) -> impl Iterator<Item = (i16, i64, i16, bool)> + '_ {
        self.entries
            .iter()
            .map(|((t, id), (kind, counts))| (*t as i16, *id, *kind as i16, *counts))
    }
}

/// Checks that changes can be calculated from `since` given the type's
/// `state` and the start of the retained log `from`.
pub(crate) fn check_since(since: LogPosition, state: i64, from: i64) -> StoreResult<()> {
    let too_old = since.modseq < from || (since.modseq == from && since.object.is_some());
    if since.modseq > state || too_old {
        return Err(StoreError::CannotCalculateChanges);
    }
    Ok(())
}

/// One row of the change log as [`ChangeLog::changes`] reads it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LogRow {
    pub modseq: i64,
    pub object: i64,
    pub kind: ChangeKind,
    pub counts_only: bool,
}

/// Rows fetched per query by [`ChangeLog::changes`].
pub(crate) const LOG_BATCH: i64 = 1000;

/// Collapses log rows, fed in log order, into one page of [`Changes`] of at
/// most `max` ids, cut at a modseq boundary when one fits, else inside the
/// first modseq (by object id).
#[derive(Debug)]
pub(crate) struct ChangeCollector {
    max: usize,
    objects: HashMap<i64, (ChangeKind, ChangeKind, bool)>,
    position: LogPosition,
    pending: Vec<LogRow>,
    full: bool,
}

impl ChangeCollector {
    pub fn new(since: LogPosition, max: usize) -> Self {
        Self {
            max: max.max(1),
            objects: HashMap::new(),
            position: since,
            pending: Vec::new(),
            full: false,
        }
    }

    /// The last position fetched from, for the next query.
    pub fn cursor(&self) -> LogPosition {
        self.pending
            .last()
            .map_or(self.position, |row| LogPosition {
                modseq: row.modseq,
                object: Some(row.object),
            })
    }

    fn apply(&mut self, row: &LogRow) {
        let update_counts = row.kind == ChangeKind::Updated && row.counts_only;
        self.objects
            .entry(row.object)
            .and_modify(|(_, last, counts)| {
                *last = row.kind;
                *counts = *counts && update_counts;
            })
            .or_insert((row.kind, row.kind, update_counts));
    }

    /// Feeds the next rows; `exhausted` when no rows follow them. Returns
    /// false once the page is full (feed no more).
    pub fn feed(&mut self, rows: Vec<LogRow>, exhausted: bool) -> bool {
        self.pending.extend(rows);
        while !self.full && !self.pending.is_empty() {
            let modseq = self.pending[0].modseq;
            let end = self
                .pending
                .iter()
                .position(|row| row.modseq != modseq)
                .unwrap_or(self.pending.len());
            if end == self.pending.len() && !exhausted {
                break; // the group may continue in the next fetch
            }
            let group: Vec<LogRow> = self.pending.drain(..end).collect();
            let new = group
                .iter()
                .filter(|row| !self.objects.contains_key(&row.object))
                .count();
            if self.objects.len() + new <= self.max {
                for row in &group {
                    self.apply(row);
                }
                self.position = LogPosition::at(modseq);
            } else if self.objects.is_empty() {
                for row in &group {
                    if self.objects.len() == self.max {
                        break;
                    }
                    self.apply(row);
                    self.position = LogPosition {
                        modseq,
                        object: Some(row.object),
                    };
                }
                self.full = true;
            } else {
                self.full = true;
            }
        }
        !self.full
    }

    /// The page; `state` is the type's state, reached when nothing is left.
    pub fn finish(self, state: i64) -> Changes {
        let mut changes = Changes {
            new_state: if self.full {
                self.position
            } else {
                LogPosition::at(state)
            },
            has_more: self.full,
            ..Changes::default()
        };
        let mut objects: Vec<(i64, (ChangeKind, ChangeKind, bool))> =
            self.objects.into_iter().collect();
        objects.sort_by_key(|(id, _)| *id);
        for (id, (first, last, counts_only)) in objects {
            match (first, last) {
                (ChangeKind::Created, ChangeKind::Destroyed) => {}
                (ChangeKind::Created, _) => changes.created.push(id),
                (_, ChangeKind::Destroyed) => changes.destroyed.push(id),
                _ => {
                    changes.updated.push(id);
                    if counts_only {
                        changes.counts_only.push(id);
                    }
                }
            }
        }
        changes
    }
}

//! The upstream's names of mirrored emails, kept in memory (issue 19,
//! ADR 0009).
//!
//! Every call the mirror answers maps its ids: an Email/get the upstream
//! Email ids it names to local emails, an Email/query its local results
//! back to upstream ids (and each email's upstream threadId, blobId and
//! part blobIds). Read from `jmap_mirror_emails` on each call that was a
//! tenth of the proxy's core (ADR 0009's profile), so each name read is
//! kept here, per local account, by upstream id and by local row id: one
//! cache entry per account (a call looks up one entry, then each id in its
//! maps), replaced by a larger copy when a call reads names it lacked (at
//! most [`MAX_NAMES_PER_ACCOUNT`]; past it the copy starts over).
//!
//! A name never changes while its email exists: a row of
//! `jmap_mirror_emails` is written once and never updated (a second
//! upstream email of the same octets is left unmapped, not remapped), an
//! upstream id names one email for ever (RFC 8620 §1.2), and a local row
//! id is never given again (`AUTOINCREMENT`, a PostgreSQL sequence). A
//! name kept for an email a later sync destroyed names a local row that is
//! gone: the local answer finds no such email (Email/get's `notFound`,
//! translated back to the same upstream id; an Email/query never lists
//! it), which is what the mirror's state says of it. Names are never
//! negative (an id not mirrored is read again each time) and leave as the
//! cache's bound needs room. Bounded in octets.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::store::{MirroredEmail, Store, StoreResult};

/// The octets [`MirrorNames`] holds at most.
pub const MIRROR_NAME_BYTES: u64 = 32 << 20;

/// The most emails one account's entry names; a call that would add past
/// it starts the entry over with its own.
pub const MAX_NAMES_PER_ACCOUNT: usize = 20_000;

/// Mirrored emails' upstream names per local account (module doc).
pub struct MirrorNames {
    accounts: moka::future::Cache<i64, Arc<AccountNames>>,
}

/// One account's names: each email by its upstream id and its local row.
#[derive(Default)]
struct AccountNames {
    by_upstream: HashMap<Box<str>, Arc<MirroredEmail>>,
    by_local: HashMap<i64, Arc<MirroredEmail>>,
    /// Octets, roughly: the names and their map slots.
    weight: u32,
}

/// What a call looks its emails up by.
enum Ids<'a> {
    Upstream(&'a [&'a str]),
    Local(&'a [i64]),
}

impl AccountNames {
    /// A copy of `kept` (none when it would pass the bound) with `read`.
    fn with(kept: Option<&AccountNames>, read: &[Arc<MirroredEmail>]) -> Self {
        let mut names = match kept {
            Some(kept) if kept.by_local.len() + read.len() <= MAX_NAMES_PER_ACCOUNT => {
                AccountNames {
                    by_upstream: kept.by_upstream.clone(),
                    by_local: kept.by_local.clone(),
                    weight: kept.weight,
                }
            }
            _ => AccountNames::default(),
        };
        for email in read {
            let weight = 160
                + 2 * email.upstream_id.len()
                + email.blob_id.len()
                + email.thread_id.len()
                + email.parts.as_ref().map_or(0, String::len);
            names.weight = names
                .weight
                .saturating_add(weight.min(u32::MAX as usize) as u32);
            names
                .by_upstream
                .insert(email.upstream_id.as_str().into(), email.clone());
            names.by_local.insert(email.email_id, email.clone());
        }
        names
    }
}

impl MirrorNames {
    /// An empty cache of at most `bytes` octets.
    pub fn new(bytes: u64) -> Self {
        Self {
            accounts: moka::future::Cache::builder()
                .max_capacity(bytes)
                .weigher(|_: &i64, names: &Arc<AccountNames>| names.weight.max(1))
                .build(),
        }
    }

    /// The names of local `account`'s emails with upstream ids `ids` (each
    /// once, in no order; an id not mirrored is left out), kept or read
    /// from `store` and kept. Errors: the store's.
    pub async fn by_upstream(
        &self,
        store: &dyn Store,
        account: i64,
        ids: &[&str],
    ) -> StoreResult<Vec<Arc<MirroredEmail>>> {
        self.named(store, account, Ids::Upstream(ids)).await
    }

    /// The names of local `account`'s emails `ids` (row ids; each once, in
    /// no order; one not mirrored is left out), as [`MirrorNames::by_upstream`].
    pub async fn by_local(
        &self,
        store: &dyn Store,
        account: i64,
        ids: &[i64],
    ) -> StoreResult<Vec<Arc<MirroredEmail>>> {
        self.named(store, account, Ids::Local(ids)).await
    }

    async fn named(
        &self,
        store: &dyn Store,
        account: i64,
        ids: Ids<'_>,
    ) -> StoreResult<Vec<Arc<MirroredEmail>>> {
        let kept = self.accounts.get(&account).await;
        let mut found = Vec::new();
        let read = match ids {
            Ids::Upstream(ids) => {
                let mut missing = Vec::new();
                let mut seen = HashSet::with_capacity(ids.len());
                for &id in ids.iter().filter(|id| seen.insert(**id)) {
                    match kept.as_ref().and_then(|kept| kept.by_upstream.get(id)) {
                        Some(email) => found.push(email.clone()),
                        None => missing.push(id),
                    }
                }
                if missing.is_empty() {
                    return Ok(found);
                }
                store.mirror_emails(account, None, Some(&missing)).await?
            }
            Ids::Local(ids) => {
                let mut missing = Vec::new();
                let mut seen = HashSet::with_capacity(ids.len());
                for &id in ids.iter().filter(|id| seen.insert(**id)) {
                    match kept.as_ref().and_then(|kept| kept.by_local.get(&id)) {
                        Some(email) => found.push(email.clone()),
                        None => missing.push(id),
                    }
                }
                if missing.is_empty() {
                    return Ok(found);
                }
                store.mirror_emails(account, Some(&missing), None).await?
            }
        };
        if read.is_empty() {
            return Ok(found);
        }
        let read: Vec<Arc<MirroredEmail>> = read.into_iter().map(Arc::new).collect();
        let names = AccountNames::with(kept.as_deref(), &read);
        found.extend(read);
        self.accounts.insert(account, Arc::new(names)).await;
        Ok(found)
    }

    /// Sets its gauges in `metrics` (`cache="mirror_names"`: entries are
    /// accounts).
    pub async fn report(&self, metrics: &crate::metrics::Metrics) {
        metrics.report_cache("mirror_names", &self.accounts).await;
    }
}

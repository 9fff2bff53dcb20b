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
//! maps), grown in place when a call reads names it lacked (at most
//! [`MAX_NAMES_PER_ACCOUNT`]; past it the entry starts over).
//!
//! Names change only in a sync: it may destroy a local email and, later,
//! store the same upstream id again as a new local row (an upstream that
//! gives an id again, or a whole sync that missed an email while the
//! upstream's list moved under its paging). Local answers read names only
//! while they hold the account's sync lock for reading ([`super::mirror::Mirror::hold`]),
//! and each sync, holding it for writing, forgets the account's names
//! first ([`MirrorNames::forget`]): a name kept is always the one the
//! store holds. Names are never negative (an id not mirrored is read again
//! each time) and leave as the cache's bound needs room. Bounded in
//! octets.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, RwLock};

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
    maps: RwLock<Maps>,
    /// Octets, roughly: the names and their map slots (what the entry
    /// weighed when it was last put in the cache).
    weight: AtomicU32,
}

#[derive(Default)]
struct Maps {
    by_upstream: HashMap<Arc<str>, Arc<MirroredEmail>>,
    by_local: HashMap<i64, Arc<MirroredEmail>>,
}

/// What a call looks its emails up by.
enum Ids<'a> {
    Upstream(&'a [&'a str]),
    Local(&'a [i64]),
}

/// Ids a kept entry did not name.
enum Missing<'a> {
    Upstream(Vec<&'a str>),
    Local(Vec<i64>),
}

impl AccountNames {
    /// The names this entry holds of `ids` (each once), and the ids it
    /// does not name.
    fn look_up<'a>(&self, ids: &Ids<'a>) -> (Vec<Arc<MirroredEmail>>, Missing<'a>) {
        let mut found = Vec::new();
        let maps = self.maps.read().ok();
        let missing = match *ids {
            Ids::Upstream(ids) => Missing::Upstream(pick(ids, &mut found, |id| {
                maps.as_ref()?.by_upstream.get(id).cloned()
            })),
            Ids::Local(ids) => Missing::Local(pick(ids, &mut found, |id| {
                maps.as_ref()?.by_local.get(&id).cloned()
            })),
        };
        (found, missing)
    }
}

/// Each of `ids` once: its name pushed to `found` when `kept` has it,
/// else it is among those returned.
fn pick<T: Copy + Eq + std::hash::Hash>(
    ids: &[T],
    found: &mut Vec<Arc<MirroredEmail>>,
    kept: impl Fn(T) -> Option<Arc<MirroredEmail>>,
) -> Vec<T> {
    let mut seen = HashSet::with_capacity(ids.len());
    let mut missing = Vec::new();
    for &id in ids.iter().filter(|id| seen.insert(**id)) {
        match kept(id) {
            Some(email) => found.push(email),
            None => missing.push(id),
        }
    }
    missing
}

/// Roughly the octets one name takes in both maps.
fn weight_of(email: &MirroredEmail) -> u32 {
    let octets = 160
        + email.upstream_id.len()
        + email.blob_id.len()
        + email.thread_id.len()
        + email.parts.as_ref().map_or(0, String::len);
    octets.min(u32::MAX as usize) as u32
}

impl MirrorNames {
    /// An empty cache of at most `bytes` octets.
    pub fn new(bytes: u64) -> Self {
        Self {
            accounts: moka::future::Cache::builder()
                .max_capacity(bytes)
                .weigher(|_: &i64, names: &Arc<AccountNames>| {
                    names.weight.load(Ordering::Relaxed).max(1)
                })
                .build(),
        }
    }

    /// The names of local `account`'s emails with upstream ids `ids` (each
    /// once, in no order; an id not mirrored is left out), kept or read
    /// from `store` and kept. The caller holds the account's sync lock for
    /// reading (module doc). Errors: the store's.
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

    /// Forgets local `account`'s names: what each sync does first, holding
    /// the account's sync lock for writing (module doc).
    pub async fn forget(&self, account: i64) {
        self.accounts.invalidate(&account).await;
    }

    async fn named(
        &self,
        store: &dyn Store,
        account: i64,
        ids: Ids<'_>,
    ) -> StoreResult<Vec<Arc<MirroredEmail>>> {
        let kept = self.accounts.get(&account).await;
        let empty = AccountNames::default();
        let (mut found, missing) = kept.as_deref().unwrap_or(&empty).look_up(&ids);
        let read = match missing {
            Missing::Upstream(missing) if !missing.is_empty() => {
                store.mirror_emails(account, None, Some(&missing)).await?
            }
            Missing::Local(missing) if !missing.is_empty() => {
                store.mirror_emails(account, Some(&missing), None).await?
            }
            _ => return Ok(found),
        };
        if read.is_empty() {
            return Ok(found);
        }
        let names = kept.unwrap_or_default();
        if let Ok(mut maps) = names.maps.write() {
            if maps.by_local.len() + read.len() > MAX_NAMES_PER_ACCOUNT {
                *maps = Maps::default();
                names.weight.store(0, Ordering::Relaxed);
            }
            for email in read {
                let email = Arc::new(email);
                names.weight.fetch_add(weight_of(&email), Ordering::Relaxed);
                maps.by_upstream
                    .insert(email.upstream_id.as_str().into(), email.clone());
                maps.by_local.insert(email.email_id, email.clone());
                found.push(email);
            }
        }
        // Put (again) so that the cache weighs what the entry holds now.
        self.accounts.insert(account, names).await;
        Ok(found)
    }

    /// Sets its gauges in `metrics` (`cache="mirror_names"`: entries are
    /// accounts).
    pub async fn report(&self, metrics: &crate::metrics::Metrics) {
        metrics.report_cache("mirror_names", &self.accounts).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::prelude::*;
    use crate::store::sqlite::tests::{insert_one, store_with_account};

    #[tokio::test]
    async fn a_name_the_store_gives_again_after_a_sync_is_read_again() {
        let (_dir, store, account, inbox) = store_with_account().await;
        let named = |email_id: i64| MirroredEmail {
            email_id,
            upstream_id: "Mx".into(),
            blob_id: "Gb".into(),
            thread_id: "Tq".into(),
            parts: None,
        };
        let first = insert_one(&store, account, inbox).await;
        store
            .put_mirror_emails(account, &[named(first)])
            .await
            .unwrap();
        let names = MirrorNames::new(MIRROR_NAME_BYTES);
        let read = names.by_upstream(&store, account, &["Mx", "Mx"]).await;
        assert_eq!(read.unwrap(), vec![Arc::new(named(first))]);
        let read = names.by_local(&store, account, &[first]).await;
        assert_eq!(read.unwrap(), vec![Arc::new(named(first))]);
        // A sync destroys the email and stores the same upstream id again.
        store.destroy_emails(account, &[first]).await.unwrap();
        let second = insert_one(&store, account, inbox).await;
        store
            .put_mirror_emails(account, &[named(second)])
            .await
            .unwrap();
        // Kept until forgotten, as the sync's first step forgets them.
        let kept = names.by_upstream(&store, account, &["Mx"]).await;
        assert_eq!(kept.unwrap(), vec![Arc::new(named(first))]);
        names.forget(account).await;
        let read = names.by_upstream(&store, account, &["Mx"]).await;
        assert_eq!(read.unwrap(), vec![Arc::new(named(second))]);
        let other = names.by_upstream(&store, account + 1, &["Mx"]).await;
        assert_eq!(other.unwrap(), Vec::new());
    }
}

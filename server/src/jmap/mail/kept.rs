//! Values kept at the account's Email and Mailbox states they were read at
//! (ADR 0003, issue 20): the one cache under [`super::mailbox::kept`] (an
//! account's mailboxes with their counts) and
//! [`super::email::kept_pages`] (the list view's Email/query pages).
//!
//! Both change only when the account's Email or Mailbox state moves
//! (RFC 8620 §5.1: each change of an object of a type moves its type's
//! state), so a value is used while both states are unchanged. A value is
//! kept only when the states read after it are the ones read before, so a
//! kept value is always the one of its states. Bounded in octets.

use std::hash::Hash;
use std::sync::Arc;

use crate::store::States;

/// Values `V` by key `K`, each kept with the Email and Mailbox states it
/// was read at (module doc).
pub struct KeptAtStates<K, V> {
    entries: moka::future::Cache<K, Arc<Kept<V>>>,
}

/// One entry of [`KeptAtStates`].
struct Kept<V> {
    email_state: i64,
    mailbox_state: i64,
    value: V,
    /// Octets, roughly, as the keeper weighed them.
    weight: u32,
}

impl<K, V> KeptAtStates<K, V>
where
    K: Hash + Eq + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
{
    /// The octets of an entry besides what its value holds elsewhere (a
    /// keeper adds this to the value's own weight).
    pub const ENTRY_BYTES: usize = std::mem::size_of::<Kept<V>>();

    /// An empty cache of at most `bytes` octets.
    pub fn new(bytes: u64) -> Self {
        Self {
            entries: moka::future::Cache::builder()
                .max_capacity(bytes)
                .weigher(|_: &K, kept: &Arc<Kept<V>>| kept.weight)
                .build(),
        }
    }

    /// The value kept for `key` when the account's states are still
    /// `states` (read by the caller before), else `None`.
    pub async fn get(&self, key: &K, states: &States) -> Option<V> {
        let kept = self.entries.get(key).await?;
        (kept.email_state == states.email && kept.mailbox_state == states.mailbox)
            .then(|| kept.value.clone())
    }

    /// Keeps `value` (`weight` octets, roughly), read for `key` after the
    /// account's states were `before`, when they are still `after` (read
    /// after it): a value read across a change is not kept.
    pub async fn keep(&self, key: K, before: &States, after: &States, value: V, weight: usize) {
        if before.email != after.email || before.mailbox != after.mailbox {
            return;
        }
        let kept = Kept {
            email_state: before.email,
            mailbox_state: before.mailbox,
            value,
            weight: weight.min(u32::MAX as usize) as u32,
        };
        self.entries.insert(key, Arc::new(kept)).await;
    }

    /// Sets its gauges in `metrics` (`cache="{name}"`).
    pub async fn report(&self, metrics: &crate::metrics::Metrics, name: &'static str) {
        metrics.report_cache(name, &self.entries).await;
    }
}

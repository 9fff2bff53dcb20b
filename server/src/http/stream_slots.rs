//! The event streams open on this node, counted per credential (issue 43).
//!
//! A stream is never idle, so the connection cap cannot shed it: each
//! credential of an account holds at most [`MAX_STREAMS_PER_CREDENTIAL`]
//! streams and the account at most [`MAX_STREAMS_PER_ACCOUNT`]. A
//! credential is what the stream authenticated with and how: the password
//! by its `Authorization` header, the password by a push access (the
//! session's `eventSourceUrl`), an API token. A leaked `eventSourceUrl` so
//! holds only its own credential's streams, never the owner's other ones;
//! and a newer stream of a credential that is full replaces its oldest
//! (which ends within a poll) instead of being refused, so a client that
//! reconnects is never locked out by its own, or a thief's, older streams.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::account::Credential;

/// Streams one credential of an account may have open on one node (a
/// client keeps one per device or tab); one more replaces the oldest.
pub const MAX_STREAMS_PER_CREDENTIAL: usize = 4;

/// Streams one account may have open on one node, all its credentials
/// together; one more is 429 unless its credential has one to replace.
pub const MAX_STREAMS_PER_ACCOUNT: usize = 16;

/// Whom a stream counts against: the account, its credential and whether
/// it came with a push access (`?access=`) rather than a header.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StreamKey {
    /// The account's row id.
    pub account: i64,
    /// What the stream authenticated with.
    pub credential: Credential,
    /// Whether it authenticated by the session's push access.
    pub by_access: bool,
}

/// One open stream as the slots know it.
struct Open {
    key: StreamKey,
    serial: u64,
    replaced: Arc<AtomicBool>,
}

/// Every open stream of the node, by account, oldest first.
#[derive(Default)]
struct OpenStreams {
    next: u64,
    by_account: HashMap<i64, Vec<Open>>,
}

/// The open event streams of this node, per account, oldest first.
#[derive(Default, Clone)]
pub struct StreamSlots {
    open: Arc<Mutex<OpenStreams>>,
}

/// A stream's slot: given back when dropped (the stream ended).
pub struct StreamSlot {
    open: Arc<Mutex<OpenStreams>>,
    account: i64,
    serial: u64,
    replaced: Arc<AtomicBool>,
}

impl StreamSlot {
    /// Whether a newer stream of the same credential took this slot: the
    /// stream should end.
    pub fn replaced(&self) -> bool {
        self.replaced.load(Ordering::Relaxed)
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(list) = open.by_account.get_mut(&self.account) {
            list.retain(|stream| stream.serial != self.serial);
            if list.is_empty() {
                open.by_account.remove(&self.account);
            }
        }
    }
}

impl StreamSlots {
    /// A slot for a new stream of `key`, or `None` (429) when the account
    /// holds [`MAX_STREAMS_PER_ACCOUNT`] and none of them is `key`'s. When
    /// `key` already holds [`MAX_STREAMS_PER_CREDENTIAL`] (or the account is
    /// full), its oldest stream is marked replaced and its slot taken.
    pub fn acquire(&self, key: StreamKey) -> Option<StreamSlot> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.next += 1;
        let serial = open.next;
        let list = open.by_account.entry(key.account).or_default();
        let same = list.iter().filter(|stream| stream.key == key).count();
        if same >= MAX_STREAMS_PER_CREDENTIAL || list.len() >= MAX_STREAMS_PER_ACCOUNT {
            let oldest = list.iter().position(|stream| stream.key == key)?;
            let old = list.remove(oldest);
            old.replaced.store(true, Ordering::Relaxed);
        }
        let replaced = Arc::new(AtomicBool::new(false));
        let account = key.account;
        list.push(Open {
            key,
            serial,
            replaced: replaced.clone(),
        });
        Some(StreamSlot {
            open: self.open.clone(),
            account,
            serial,
            replaced,
        })
    }

    /// Streams open for `account` on this node.
    pub fn open_for(&self, account: i64) -> usize {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.by_account.get(&account).map_or(0, Vec::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(account: i64, credential: Credential, by_access: bool) -> StreamKey {
        StreamKey {
            account,
            credential,
            by_access,
        }
    }

    #[test]
    fn a_full_credential_replaces_its_oldest_and_leaves_the_others() {
        let slots = StreamSlots::default();
        let password = Credential::Password { tag: [1; 8] };
        let leaked = key(1, password.clone(), true);
        let header = key(1, password, false);
        let thief: Vec<StreamSlot> = (0..10)
            .map(|_| slots.acquire(leaked.clone()).unwrap())
            .collect();
        // Only the newest four of the thief's ten still stand.
        let standing: Vec<bool> = thief.iter().map(|slot| !slot.replaced()).collect();
        assert_eq!(standing.iter().filter(|s| **s).count(), 4);
        assert!(standing[6..].iter().all(|s| *s));
        assert_eq!(slots.open_for(1), 4);
        // The owner's header streams have slots of their own.
        let owner: Vec<StreamSlot> = (0..4)
            .map(|_| slots.acquire(header.clone()).unwrap())
            .collect();
        assert!(owner.iter().all(|slot| !slot.replaced()));
        assert!(thief[6..].iter().all(|slot| !slot.replaced()));
        assert_eq!(slots.open_for(1), 8);
        drop(owner);
        assert_eq!(slots.open_for(1), 4);
        drop(thief);
        assert_eq!(slots.open_for(1), 0);
    }

    #[test]
    fn a_full_account_refuses_a_credential_with_nothing_to_replace() {
        let slots = StreamSlots::default();
        let held: Vec<StreamSlot> = (0..MAX_STREAMS_PER_ACCOUNT as i64)
            .map(|id| {
                let token = key(7, Credential::Token { id: id / 4 }, false);
                slots.acquire(token).unwrap()
            })
            .collect();
        assert!(
            slots
                .acquire(key(7, Credential::Token { id: 99 }, false))
                .is_none()
        );
        // A credential already there replaces its own oldest.
        let again = slots.acquire(key(7, Credential::Token { id: 0 }, false));
        assert!(again.is_some());
        assert!(held[0].replaced());
        assert!(!held[1].replaced());
        // Another account is not affected.
        assert!(
            slots
                .acquire(key(8, Credential::Token { id: 99 }, false))
                .is_some()
        );
    }
}

//! When a call may be answered from the mirror: the account's sync
//! succeeded and caught up with this node's writes, the shapes answered
//! as the upstream answered them, and the hold that keeps a sync off while
//! a local answer reads.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::proxy::jmap::mirror::mirrored::{MailboxSnapshot, Mirror, MirrorState};

/// The most call shapes remembered per account as answered alike or not
/// ([`Mirror::verify`]); past it a new shape stays forwarded.
const MAX_SHAPES: usize = 256;

impl Mirror {
    /// The mirror of upstream account `upstream_id` when a call may be
    /// answered from it: its task follows the upstream, its last sync
    /// succeeded, and it has caught up with every write made through this
    /// node. `None` otherwise (the call is forwarded).
    pub fn ready(&self, upstream_id: &str) -> Option<MirrorState> {
        let mirrored = self.entry(upstream_id)?;
        if mirrored.synced_through.load(Ordering::Acquire) < mirrored.writes.load(Ordering::Acquire)
        {
            return None;
        }
        let email_state = mirrored.fresh_state.lock().ok()?.clone()?;
        let mailboxes = mirrored.mailboxes.lock().ok()?.clone();
        let census = mirrored
            .census
            .lock()
            .ok()?
            .clone()
            .filter(|census| census.email_state == email_state);
        Some(MirrorState {
            account: mirrored.account.clone(),
            email_state,
            mailboxes,
            census,
        })
    }

    /// Whether a call of `shape` (a method and the arguments its answer
    /// depends on besides paging, as text) on upstream account
    /// `upstream_id` was answered here as the upstream answered it: `None`
    /// until compared.
    pub fn verified(&self, upstream_id: &str, shape: &str) -> Option<bool> {
        self.entry(upstream_id)?
            .verified
            .lock()
            .ok()?
            .get(&shape_digest(shape))
            .copied()
    }

    /// Whether a new shape of upstream account `upstream_id` may still be
    /// compared (fewer than [`MAX_SHAPES`] remembered).
    pub fn may_verify(&self, upstream_id: &str) -> bool {
        self.entry(upstream_id)
            .and_then(|mirrored| mirrored.verified.lock().ok().map(|v| v.len() < MAX_SHAPES))
            .unwrap_or(false)
    }

    /// Holds off the syncs of upstream account `upstream_id` while a local
    /// answer reads the mirror, so that it reads what one state names;
    /// `None` while a sync is applying changes or waits to (the call is
    /// then forwarded). Any number of local answers hold it at once.
    pub fn hold(&self, upstream_id: &str) -> Option<tokio::sync::OwnedRwLockReadGuard<()>> {
        self.entry(upstream_id)?
            .syncing
            .clone()
            .try_read_owned()
            .ok()
    }

    /// Waits, up to `at_most`, until no sync of upstream account
    /// `upstream_id` runs or waits to (what a call that cannot be forwarded
    /// does before [`Mirror::hold`]); whether it got there.
    pub async fn sync_settled(&self, upstream_id: &str, at_most: std::time::Duration) -> bool {
        let Some(mirrored) = self.entry(upstream_id) else {
            return false;
        };
        tokio::time::timeout(at_most, mirrored.syncing.read())
            .await
            .is_ok()
    }

    /// Records whether the mirror's answer to a call of `shape` was the
    /// upstream's (the first comparison stands; at most [`MAX_SHAPES`] per
    /// account are kept).
    pub fn verify(&self, upstream_id: &str, shape: &str, alike: bool) {
        let Some(mirrored) = self.entry(upstream_id) else {
            return;
        };
        let Ok(mut verified) = mirrored.verified.lock() else {
            return;
        };
        let digest = shape_digest(shape);
        if verified.len() < MAX_SHAPES && !verified.contains_key(&digest) {
            if !alike {
                tracing::info!(account = %upstream_id, %shape, "answered unlike the upstream: forwarded from now on");
            }
            verified.insert(digest, alike);
        }
    }

    /// The upstream's mailboxes of `upstream_id` as its last sync read them,
    /// when the mirror may be answered from ([`Mirror::ready`]).
    pub fn mailboxes(&self, upstream_id: &str) -> Option<Arc<MailboxSnapshot>> {
        self.ready(upstream_id)?;
        self.entry(upstream_id)?
            .mailbox_snapshot
            .lock()
            .ok()?
            .clone()
    }
}

/// The key a shape is remembered by: a digest, so that what a client
/// sends is not kept.
fn shape_digest(shape: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(shape.as_bytes()).into()
}

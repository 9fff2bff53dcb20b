//! The proxy's own storage: what the IMAP proxy (ADR 0008, migration 0309)
//! and the JMAP mirror (issue 19, migration 0310) keep beside ordinary
//! rows, as traits ([`ProxyStore`]) and their SQL (`imap.rs`, `jmap.rs`).

mod imap;
mod jmap;

use async_trait::async_trait;

use super::{MirroredEmail, StoreResult, UpstreamCopy, UpstreamMailbox};

/// Every method that exists only for a proxy: [`ImapProxyStore`] and
/// [`JmapProxyStore`].
pub trait ProxyStore: ImapProxyStore + JmapProxyStore {}

impl<T: ImapProxyStore + JmapProxyStore + ?Sized> ProxyStore for T {}

/// What the IMAP proxy (`serve --upstream imap…`, `mail/upstream/`) keeps
/// about its upstream: mirrored mailboxes, UIDs, syncs and the message
/// cache's evictions (SQL in `imap.rs`).
#[async_trait]
pub trait ImapProxyStore: Send + Sync + 'static {
    /// The upstream IMAP server this data dir mirrors (`serve --upstream`),
    /// if any (migration 0309).
    async fn upstream_source(&self) -> StoreResult<Option<String>>;
    /// Records the upstream this data dir mirrors.
    async fn set_upstream_source(&self, url: &str) -> StoreResult<()>;
    /// The account's mailboxes that mirror upstream mailboxes.
    async fn upstream_mailboxes(&self, account: i64) -> StoreResult<Vec<UpstreamMailbox>>;
    /// Records (or renames, or moves to a new UIDVALIDITY) the upstream
    /// mailbox a mailbox of the account mirrors; nothing when the mailbox is
    /// not the account's.
    async fn put_upstream_mailbox(
        &self,
        account: i64,
        mailbox: &UpstreamMailbox,
    ) -> StoreResult<()>;
    /// The synced copies in a mirrored mailbox, by UID: every one (`among`
    /// `None`), or those of the UIDs `among` (a UID not mapped is absent),
    /// so a sync of what changed reads only the copies that changed.
    async fn upstream_uids(
        &self,
        mailbox: i64,
        among: Option<&[i64]>,
    ) -> StoreResult<Vec<UpstreamCopy>>;
    /// How many copies of a mirrored mailbox are mapped (the count a
    /// mailbox's EXISTS is checked against without reading its mapping).
    async fn upstream_uid_count(&self, mailbox: i64) -> StoreResult<i64>;
    /// Records (or updates the flags of) copies in a mirrored mailbox.
    async fn record_upstream_uids(&self, mailbox: i64, copies: &[UpstreamCopy]) -> StoreResult<()>;
    /// `(email id, mailbox id, uid, keywords)` of every upstream copy of
    /// the account's emails among `emails`, by mailbox then UID (keywords
    /// space-separated, as [`UpstreamCopy`] holds them).
    async fn upstream_locations(
        &self,
        account: i64,
        emails: &[i64],
    ) -> StoreResult<Vec<(i64, i64, i64, String)>>;
    /// `(uid, email id, Message-ID, size)` of the copies in the mirrored
    /// mailbox `mailbox` with UID `first_uid` or above, by UID: what an
    /// APPEND added (RFC 4315 APPENDUID names its UID; without one, the
    /// UIDNEXT before it bounds them). Message-ID as the email's
    /// `message_id` holds it (no angle brackets); size in octets.
    async fn upstream_copies_from(
        &self,
        mailbox: i64,
        first_uid: i64,
    ) -> StoreResult<Vec<(i64, i64, Option<String>, i64)>>;
    /// The account's email that an earlier APPEND of the octets with blob
    /// id `sent_blob` became, where the upstream stored other octets than
    /// those sent (migration 0314; ADR 0008).
    async fn upstream_append(&self, account: i64, sent_blob: &str) -> StoreResult<Option<i64>>;
    /// Records that the octets with blob id `sent_blob`, APPENDed, became
    /// the account's `email` (nothing when the email is not the account's;
    /// the row goes with the email).
    async fn record_upstream_append(
        &self,
        account: i64,
        sent_blob: &str,
        email: i64,
    ) -> StoreResult<()>;
    /// `(blob id, email id)` of the account's emails with those blob ids.
    async fn emails_of_blobs(
        &self,
        account: i64,
        blob_ids: &[&str],
    ) -> StoreResult<Vec<(String, i64)>>;
    /// Octets of the distinct message blobs the data dir holds, evicted ones
    /// aside (the upstream cache's size).
    async fn upstream_cache_total(&self) -> StoreResult<i64>;
    /// Up to `limit` cached message blobs `(blob id, size)`, those of the
    /// oldest receivedAt first (what the cache evicts first).
    async fn upstream_cache_oldest(&self, limit: i64) -> StoreResult<Vec<(String, i64)>>;
    /// Records blobs as evicted (before they are deleted).
    async fn mark_evicted(&self, blobs: &[(String, i64)]) -> StoreResult<()>;
    /// Records blobs as back in the store.
    async fn unmark_evicted(&self, blobs: &[&str]) -> StoreResult<()>;
    /// Those of `blobs` that are evicted.
    async fn evicted_among(&self, blobs: &[&str]) -> StoreResult<Vec<String>>;
    /// Where a message blob is on the upstream: (account, mailbox name, UID).
    async fn upstream_blob_location(
        &self,
        blob_id: &str,
    ) -> StoreResult<Option<(i64, String, i64)>>;
    /// Records that `account` finished a sync at `at` (unix seconds).
    async fn record_upstream_sync(&self, account: i64, at: i64) -> StoreResult<()>;
    /// Records how `account`'s sync task learns of upstream changes
    /// (`notify`, `idle+status`, `status`; migration 0315), once it has
    /// synced.
    async fn record_upstream_watch(&self, account: i64, watch: &str) -> StoreResult<()>;
    /// `(account, unix seconds, watch)` of every account's last finished
    /// sync and how its task watches the upstream (empty: not yet told).
    async fn upstream_syncs(&self) -> StoreResult<Vec<(i64, i64, String)>>;
    /// Forgets UIDs of a mirrored mailbox (`None`: all of them, after a
    /// UIDVALIDITY change); the emails stay.
    async fn forget_upstream_uids(&self, mailbox: i64, uids: Option<&[i64]>) -> StoreResult<()>;
}

/// What the JMAP proxy keeps to mirror an upstream JMAP account: the
/// upstream names of the account, its mailboxes and its emails (SQL in
/// `jmap.rs`).
#[async_trait]
pub trait JmapProxyStore: Send + Sync + 'static {
    /// The local account mirroring the JMAP upstream's account
    /// `upstream_id` and the upstream Email state its mirror is at (`None`
    /// until a first sync ended), if there is one (issue 19, migration 0310).
    async fn mirror_account(&self, upstream_id: &str)
    -> StoreResult<Option<(i64, Option<String>)>>;
    /// Records that `account` mirrors the upstream account `upstream_id`
    /// (nothing when it already mirrors one).
    async fn put_mirror_account(&self, account: i64, upstream_id: &str) -> StoreResult<()>;
    /// Records the upstream Email state the account's mirror is now at.
    async fn set_mirror_state(&self, account: i64, state: &str) -> StoreResult<()>;
    /// `(local mailbox, upstream Mailbox id)` of the account's mirrored mailboxes.
    async fn mirror_mailboxes(&self, account: i64) -> StoreResult<Vec<(i64, String)>>;
    /// Records the upstream id of one of the account's mailboxes (nothing
    /// when the mailbox is not the account's).
    async fn put_mirror_mailbox(
        &self,
        account: i64,
        mailbox: i64,
        upstream_id: &str,
    ) -> StoreResult<()>;
    /// The account's mirrored emails: those with local ids among `local`,
    /// else those with upstream ids among `upstream`, else all of them.
    async fn mirror_emails(
        &self,
        account: i64,
        local: Option<&[i64]>,
        upstream: Option<&[&str]>,
    ) -> StoreResult<Vec<MirroredEmail>>;
    /// Records the upstream names of the account's emails (an email or an
    /// upstream id already mapped keeps its mapping).
    async fn put_mirror_emails(&self, account: i64, emails: &[MirroredEmail]) -> StoreResult<()>;
    /// The upstream Email ids of the account's mirrored emails in each of
    /// the upstream threadIds `threads` that has any: `(threadId, ids)`,
    /// each list by receivedAt then local id (RFC 8621 §3's order, ties as
    /// a standalone Fastview breaks them).
    async fn mirror_threads(
        &self,
        account: i64,
        threads: &[&str],
    ) -> StoreResult<Vec<(String, Vec<String>)>>;
    /// `(mapped, emails)`: how many of the account's emails have upstream
    /// names, and how many emails the account has; equal to the upstream's
    /// count when the mirror holds every upstream email, one for one.
    async fn mirror_census(&self, account: i64) -> StoreResult<(i64, i64)>;
}

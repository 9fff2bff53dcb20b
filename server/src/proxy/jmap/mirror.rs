//! The local mirror of a JMAP upstream's accounts (issue 19, ADR 0009).
//!
//! Each upstream account a client uses gets a local account whose emails
//! are the upstream's, stored through the ordinary ingest path (one
//! download per new message), so the projection, part tree and search
//! index are Fastview's own, and mapped to the upstream's ids
//! (`store::jmap_mirror`). A sync is one of two:
//!
//! - **whole**, the first time or when the upstream cannot calculate
//!   changes from the mirror's state: every Email id and its metadata
//!   (Email/query + Email/get by result reference, a page of
//!   `maxObjectsInGet` per round trip), compared with the mapped ones: new
//!   ones downloaded and stored, changed keywords or mailboxIds set, ones
//!   the upstream no longer lists destroyed;
//! - **from a state**: Email/changes from the state the mirror is at until
//!   `hasMoreChanges` is false, the created and updated ones read and
//!   applied as above, the destroyed ones destroyed.
//!
//! The state the mirror is at is recorded after what it names is applied,
//! so a mirror is never ahead of its state string; it may be behind the
//! upstream, and then answers as of that state. Each account's syncs run
//! one at a time ([`Mirror::catch_up`]); after a client's first request an
//! account task follows the upstream's event source (or polls) and syncs on
//! each Email change, until the account has been idle for
//! `--upstream-idle-minutes`. Credentials live in memory only, as long as
//! that task.
//!
//! After each sync a **census** asks the upstream, in one request, its
//! Email state, its Thread state, how many emails the account has and its
//! Email state again ([`Census`]): the mirror holds every upstream email
//! one for one when that count is the number mapped and the number stored,
//! and the Thread state is the one of the mirror's Email state when both
//! Email states are the one the sync reached. Calls whose answers depend on the whole account
//! (Thread/get, Email/query) are answered only then, and only in a shape
//! the mirror has once answered exactly as the upstream did
//! ([`Mirror::verified`]).
//!
//! # Layout
//!
//! `mirrored.rs` holds the types the others share (`Mirror`, one account's
//! `Mirrored`, `MirrorState`, `Census`); `answers.rs` says when the mirror
//! may be answered from; `registry.rs` makes an account's mirror on first
//! use and runs the syncs a request asks for; `follow.rs` is the account
//! task; `sync.rs` is one sync, `census.rs` the census after it, `apply.rs`
//! what a sync listed made local.

mod answers;
mod apply;
mod census;
mod follow;
mod mirrored;
mod registry;
mod sync;

pub use mirrored::{Census, MailboxSnapshot, Mirror, MirrorState};

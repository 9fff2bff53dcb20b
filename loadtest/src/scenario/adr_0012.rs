//! `adr-0012`: the list metadata a mail client polls.
//!
//! `GET /.well-known/jmap` → `Mailbox/get` → `Email/query` (inbox, newest
//! first, limit 30) → 10 × `Email/get` of those ids with properties
//! `["mailboxIds", "keywords"]`.

use super::{Step, list_query_steps, metadata_get};

/// How many metadata `Email/get` calls follow the query.
pub const METADATA_GETS: u32 = 10;

/// The steps of `adr-0012`.
pub fn steps() -> Vec<Step> {
    let mut steps = list_query_steps();
    steps.push(Step::repeat(METADATA_GETS, metadata_get()));
    steps
}

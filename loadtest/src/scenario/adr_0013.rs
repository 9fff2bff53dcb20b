//! `adr-0013`: `adr-0012`, then the fast-view list properties.
//!
//! The `adr-0012` steps, then 8 × `Email/get` of the same ids with
//! [`FAST_VIEW_PROPERTIES`](super::FAST_VIEW_PROPERTIES) (id, threadId,
//! mailboxIds, keywords, hasAttachment, from, to, subject, receivedAt, size,
//! preview).

use super::{Step, fast_view_get};

/// How many fast-view `Email/get` calls follow the metadata ones.
pub const FAST_VIEW_GETS: u32 = 8;

/// The steps of `adr-0013`.
pub fn steps() -> Vec<Step> {
    let mut steps = super::adr_0012::steps();
    steps.push(Step::repeat(FAST_VIEW_GETS, fast_view_get()));
    steps
}

//! `full`: the worst case, `adr-0013` with every body value.
//!
//! The `adr-0012` steps, then 8 × `Email/get` of the same ids with
//! [`FULL_PROPERTIES`] (the fast-view properties plus
//! `textBody`, `htmlBody`, `attachments` and `bodyValues`) and
//! `fetchAllBodyValues: true`, so the server has to read and parse every
//! message.

use super::{BodyValues, Call, EMAIL_GET_FULL, EmailGet, FULL_PROPERTIES, IdSelection, Step};

/// How many full `Email/get` calls follow the metadata ones.
pub const FULL_GETS: u32 = super::adr_0013::FAST_VIEW_GETS;

/// The steps of `full`.
pub fn steps() -> Vec<Step> {
    let mut steps = super::adr_0012::steps();
    steps.push(Step::repeat(
        FULL_GETS,
        Call::EmailGet(EmailGet {
            name: EMAIL_GET_FULL,
            ids: IdSelection::All,
            properties: FULL_PROPERTIES,
            body_values: BodyValues::All,
        }),
    ));
    steps
}

//! `webmail`: what a real webmail does to show the inbox and open a message.
//!
//! `GET /.well-known/jmap` → `Mailbox/get` → `Email/query` (inbox, newest
//! first, limit 30) → one `Email/get` of the list with the fast-view
//! properties → one `Email/get` of the newest message with
//! [`MESSAGE_PROPERTIES`] (`htmlBody`, `textBody`,
//! `attachments`, `bodyValues` and the headers shown) and
//! `fetchHTMLBodyValues: true`.

use super::{
    BodyValues, Call, EMAIL_GET_MESSAGE, EmailGet, IdSelection, MESSAGE_PROPERTIES, Step,
    fast_view_get, list_query_steps,
};

/// The steps of `webmail`.
pub fn steps() -> Vec<Step> {
    let mut steps = list_query_steps();
    steps.push(Step::once(fast_view_get()));
    steps.push(Step::once(Call::EmailGet(EmailGet {
        name: EMAIL_GET_MESSAGE,
        ids: IdSelection::First,
        properties: MESSAGE_PROPERTIES,
        body_values: BodyValues::Html,
    })));
    steps
}

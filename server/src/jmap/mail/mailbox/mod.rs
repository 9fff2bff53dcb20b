//! The Mailbox data type (RFC 8621 §2).

pub mod get;
pub mod query;
pub mod set;

//! RFC 8621 methods, one folder per data type, one file per method.

pub mod email;
pub mod mailbox;
pub mod thread;

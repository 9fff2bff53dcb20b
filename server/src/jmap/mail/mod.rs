//! RFC 8621 methods, one folder per data type, one file per method:
//! get, changes, query, queryChanges and set for Mailbox; get, changes,
//! query, queryChanges, set, import and parse for Email; get and changes for
//! Thread. [`changes`] is the Foo/changes shared by the three types.

pub mod changes;
pub mod email;
pub mod mailbox;
pub mod thread;

//! RFC 8621 methods, one folder per data type, one file per method:
//! get, changes, query, queryChanges and set for Mailbox; get, query,
//! queryChanges, set, import and parse for Email; get for Thread;
//! SearchSnippet/get. Email/changes and Thread/changes are
//! [`changes::changes_response`].
//!
//! The RFC 8620 §5 standard methods share their scaffolding, one file each:
//! [`get`] (requested ids, `notFound`, the response), [`changes`] (the
//! whole Foo/changes, from the change log), [`query_changes`] (argument
//! checks, the retry at one state, the response) and [`set`] (`ifInState`,
//! `maxObjectsInSet`, the response); [`kept`] is the cache of values kept
//! at the Email and Mailbox states they were read at. A handler reads as
//! plan (parse and check the arguments), load (the store reads and
//! writes), render (the response).

pub mod changes;
pub mod email;
pub mod get;
pub mod kept;
pub mod mailbox;
pub mod query_changes;
pub mod search_snippet;
pub mod set;
pub mod thread;

//! The mail domain: what a message is made of and how it is read, independent
//! of HTTP and of the database.

pub mod body;
pub mod compose;
pub mod delivery;
pub mod fast_view;
pub mod fsck;
pub mod gc;
pub mod header;
mod header_address;
mod header_date;
mod header_text;
pub mod import_source;
pub mod ingest;
mod lexical;
pub mod load;
pub mod message;
mod mime_field;
pub mod property;
pub mod query;
pub mod read_level;
pub mod relay;
pub mod search;
pub mod structure;
pub mod submission;
pub mod thread;
mod transfer;
pub mod vacation;
pub mod work;
pub mod writer;

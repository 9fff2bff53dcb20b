//! The Email data type (RFC 8621 §4).

pub mod body;
pub mod get;
pub mod header;
pub mod import;
pub mod property;
pub mod query;
pub mod render;
pub mod set;

//! The Email data type (RFC 8621 §4).

pub mod get;
pub mod import;
pub mod query;
pub mod render;
pub mod set;

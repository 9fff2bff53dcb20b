//! The Email data type (RFC 8621 §4).

pub mod create;
mod create_headers;
pub mod draft;
pub mod get;
pub mod get_arguments;
pub mod import;
pub mod kept_pages;
pub mod members;
pub mod parse;
pub mod query;
pub mod query_changes;
pub mod render;
pub mod render_text;
pub mod set;

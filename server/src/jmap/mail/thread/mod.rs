//! The Thread data type (RFC 8621 §3).

pub mod get;

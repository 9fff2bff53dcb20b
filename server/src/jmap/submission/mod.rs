//! `urn:ietf:params:jmap:submission` (RFC 8621 §6–§7): the identities an
//! account sends as.

pub mod identity;

//! `urn:ietf:params:jmap:submission` (RFC 8621 §6–§7): the identities an
//! account sends as, and the submissions that send its mail.

pub mod email_submission;
pub mod identity;
pub mod submission_query;

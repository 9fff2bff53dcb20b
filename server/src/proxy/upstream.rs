//! What the IMAP and the JMAP proxies share: the error of a round trip to
//! the upstream, and the password hash of the accounts they make.

/// The password hash an account made for an upstream's user carries: not
/// a PHC string, so no password ever verifies against it locally.
pub const UPSTREAM_PASSWORD_HASH: &str = "!upstream";

/// Why the upstream could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// The upstream refused the credentials (`NO` to LOGIN / AUTHENTICATE).
    #[error("the upstream refused the login")]
    LoginRefused,
    /// No connection, a TLS failure, a timeout or a dropped connection.
    #[error("the upstream could not be reached: {0}")]
    Unreachable(String),
    /// The upstream answered `NO`/`BAD` or something that is not IMAP.
    #[error("the upstream refused: {0}")]
    Refused(String),
    /// A JMAP upstream answered 429 (it brakes logins or requests): wait
    /// `retry_after` seconds (its Retry-After, else 60).
    #[error("the upstream asks to slow down (429), for {retry_after} s")]
    Throttled { retry_after: u64 },
    /// The local store failed while recording what the upstream holds.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// A message could not be stored.
    #[error(transparent)]
    Ingest(#[from] crate::mail::ingest::IngestError),
}

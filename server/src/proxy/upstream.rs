//! What the IMAP and the JMAP proxies share: the error of a round trip to
//! the upstream, and the accounts they make (their password hash).

use crate::store::{Account, Store, StoreError, StoreResult};

/// The password hash an account made for an upstream's user carries: not
/// a PHC string, so no password ever verifies against it locally.
pub const UPSTREAM_PASSWORD_HASH: &str = "!upstream";

/// The local account of an upstream's user `login`, made now; made by
/// another request meanwhile (a client's first requests often come
/// together), that one. `Conflict` only if that one is gone again.
pub async fn create_upstream_account(store: &dyn Store, login: &str) -> StoreResult<Account> {
    match store.create_account(login, UPSTREAM_PASSWORD_HASH).await {
        Ok(account) => Ok(account),
        Err(StoreError::Conflict(_)) => store
            .account_by_email(login)
            .await?
            .ok_or_else(|| StoreError::Conflict(format!("the account {login} vanished"))),
        Err(error) => Err(error),
    }
}

/// Why an upstream asks to wait ([`UpstreamError::Throttled`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Throttle {
    /// HTTP 429 Too Many Requests.
    TooManyRequests,
    /// HTTP 503 Service Unavailable, or IMAP `NO [UNAVAILABLE]`.
    Unavailable,
}

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
    /// The upstream asks to wait: a JMAP upstream answered 429 (it brakes
    /// logins or requests) or 503 (RFC 9110 §15.6.4), or an IMAP upstream
    /// refused a login with `[UNAVAILABLE]` (RFC 5530 §3). `retry_after`:
    /// its Retry-After (RFC 9110 §10.2.3), when it sent one.
    #[error("the upstream asks to wait ({}{})", why.label(), retry_after.map(|wait| format!(", for {} s", wait.as_secs())).unwrap_or_default())]
    Throttled {
        why: Throttle,
        retry_after: Option<std::time::Duration>,
    },
    /// The local store failed while recording what the upstream holds.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// A message could not be stored.
    #[error(transparent)]
    Ingest(#[from] crate::mail::ingest::IngestError),
}

//! HTTP Basic authentication (RFC 7617) against argon2 password hashes.
//!
//! Verified credentials are cached (moka) for up to [`VERIFIED_TTL`], keyed
//! by the user and a keyed SHA-256 of the password (the key is random per
//! process, so the cache never holds a password or an offline-guessable
//! hash), so steady-state requests do not pay argon2. A cached credential
//! older than [`CREDENTIAL_TTL`] is re-checked against the database (one
//! indexed read, no argon2): it stays valid only while the account exists
//! with the same password hash. A changed or removed password therefore
//! keeps working for at most [`CREDENTIAL_TTL`] on a node that verified it
//! before the change.
//!
//! Failed attempts are counted per client address and per (user, client
//! address) in windows of [`FAILURE_WINDOW`]; past [`MAX_FAILURES`] in a
//! window, attempts from there get 429 with Retry-After without being
//! verified, except credentials this node verified recently (they are never
//! slowed). Valid logins never count, so a load test never trips it.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use axum::http::HeaderMap;
use base64::Engine;
use moka::future::Cache;
use sha2::{Digest, Sha256};

use super::error::HttpError;
use crate::store::{Account, Store};

/// How long a verified credential is trusted without looking at the database.
pub const CREDENTIAL_TTL: Duration = Duration::from_secs(60);
/// How long a verified credential is kept at most (then argon2 again).
pub const VERIFIED_TTL: Duration = Duration::from_secs(3600);
/// The window failed attempts are counted in.
pub const FAILURE_WINDOW: Duration = Duration::from_secs(60);
/// Failed attempts allowed per window, per client address and per (user, address).
pub const MAX_FAILURES: u32 = 10;

/// Hashes a password with argon2id and a random salt (PHC string).
pub fn hash_password(password: &str) -> Result<String, argon2::password_hash::Error> {
    let salt = SaltString::encode_b64(&rand::random::<[u8; 16]>())?;
    Ok(Argon2::default()
        .hash_password(password.as_bytes(), &salt)?
        .to_string())
}

/// Checks a password against a PHC hash; false on mismatch or a bad hash.
pub fn verify_password(password: &str, hash: &str) -> bool {
    PasswordHash::new(hash)
        .map(|parsed| {
            Argon2::default()
                .verify_password(password.as_bytes(), &parsed)
                .is_ok()
        })
        .unwrap_or(false)
}

/// Authenticates requests for one server instance.
pub struct Authenticator {
    store: Arc<dyn Store>,
    key: [u8; 32],
    verified: Cache<(String, [u8; 32]), Verified>,
    failures: Cache<String, Arc<AtomicU32>>,
}

impl Authenticator {
    /// An authenticator with an empty credential cache.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            key: rand::random(),
            verified: Cache::builder()
                .max_capacity(100_000)
                .time_to_live(VERIFIED_TTL)
                .build(),
            failures: Cache::builder()
                .max_capacity(1_000_000)
                .time_to_live(FAILURE_WINDOW)
                .build(),
        }
    }

    fn secret_digest(&self, user: &str, password: &str) -> [u8; 32] {
        let mut hasher = Sha256::new();
        hasher.update(self.key);
        hasher.update(user.as_bytes());
        hasher.update([0]);
        hasher.update(password.as_bytes());
        hasher.finalize().into()
    }

    async fn failures(&self, key: &str) -> u32 {
        self.failures
            .get(key)
            .await
            .map_or(0, |count| count.load(Ordering::Relaxed))
    }

    async fn count_failure(&self, key: String) {
        self.failures
            .get_with(key, async { Arc::new(AtomicU32::new(0)) })
            .await
            .fetch_add(1, Ordering::Relaxed);
    }

    /// The account again if it still exists with the password hash `cached`
    /// was verified against (a cheap read instead of argon2).
    async fn recheck(&self, user: &str, cached: &Account) -> Result<Option<Account>, HttpError> {
        let current = self
            .store
            .account_by_email(user)
            .await
            .map_err(|error| HttpError::Internal(error.to_string()))?;
        Ok(current.filter(|a| a.id == cached.id && a.password_hash == cached.password_hash))
    }

    /// The account of a request's `Authorization: Basic` header, from client
    /// address `client`; 401 for a missing or malformed header, an unknown
    /// user or a wrong password alike; 429 after too many failures.
    pub async fn authenticate(
        &self,
        headers: &HeaderMap,
        client: IpAddr,
    ) -> Result<Account, HttpError> {
        let address_key = format!("ip:{client}");
        let Some((user, password)) = basic_credentials(headers) else {
            return Err(HttpError::Unauthorized);
        };
        let user = user.to_lowercase();
        let key = (user.clone(), self.secret_digest(&user, &password));
        if let Some(verified) = self.verified.get(&key).await {
            if verified.checked_at.elapsed() < CREDENTIAL_TTL {
                return Ok(verified.account);
            }
            if let Some(account) = self.recheck(&user, &verified.account).await? {
                self.verified
                    .insert(key, Verified::now(account.clone()))
                    .await;
                return Ok(account);
            }
            self.verified.invalidate(&key).await;
        }
        let pair_key = format!("user:{user}\0{client}");
        if self.failures(&address_key).await >= MAX_FAILURES
            || self.failures(&pair_key).await >= MAX_FAILURES
        {
            return Err(HttpError::TooManyAttempts {
                retry_after: FAILURE_WINDOW.as_secs(),
            });
        }
        let account = self
            .store
            .account_by_email(&user)
            .await
            .map_err(|error| HttpError::Internal(error.to_string()))?;
        // Verify against a dummy hash for unknown users so timing tells nothing.
        let hash = account
            .as_ref()
            .map(|a| a.password_hash.clone())
            .unwrap_or_else(|| DUMMY_HASH.to_string());
        let verified = tokio::task::spawn_blocking(move || verify_password(&password, &hash))
            .await
            .unwrap_or(false);
        match account {
            Some(account) if verified => {
                self.verified
                    .insert(key, Verified::now(account.clone()))
                    .await;
                Ok(account)
            }
            _ => {
                self.count_failure(address_key).await;
                self.count_failure(pair_key).await;
                Err(HttpError::Unauthorized)
            }
        }
    }
}

/// A credential verified with argon2, and when the database last confirmed it.
#[derive(Clone)]
struct Verified {
    account: Account,
    checked_at: std::time::Instant,
}

impl Verified {
    fn now(account: Account) -> Self {
        Self {
            account,
            checked_at: std::time::Instant::now(),
        }
    }
}

/// The authenticated account of a request (an axum extractor): reads the
/// Basic credentials and the client address, rejects with 401 or 429.
pub struct Authenticated(pub Account);

impl axum::extract::FromRequestParts<Arc<super::AppState>> for Authenticated {
    type Rejection = HttpError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &Arc<super::AppState>,
    ) -> Result<Self, Self::Rejection> {
        let client = parts
            .extensions
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .map_or(IpAddr::from([0, 0, 0, 0]), |info| info.0.ip());
        state
            .auth
            .authenticate(&parts.headers, client)
            .await
            .map(Authenticated)
    }
}

/// An argon2id hash of a random password, verified against for unknown users.
const DUMMY_HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$9sTkzLBSbwBNC8z3r8Fz2/rqQWzS5k0Hb0M4l9B6v1c";

/// `(user, password)` from `Authorization: Basic base64(user:password)`.
fn basic_credentials(headers: &HeaderMap) -> Option<(String, String)> {
    let value = headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, encoded) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (user, password) = decoded.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_hash_and_verify() {
        let hash = hash_password("correct horse").unwrap();
        assert!(hash.starts_with("$argon2id$"));
        assert!(verify_password("correct horse", &hash));
        assert!(!verify_password("wrong", &hash));
        assert!(!verify_password("x", "not a hash"));
        assert!(!verify_password("x", DUMMY_HASH));
    }

    #[test]
    fn basic_credentials_parse_rfc7617_headers() {
        let mut headers = HeaderMap::new();
        assert_eq!(basic_credentials(&headers), None);
        headers.insert("authorization", "Basic dXNlcjpwYTpzcw==".parse().unwrap());
        assert_eq!(
            basic_credentials(&headers),
            Some(("user".into(), "pa:ss".into()))
        );
        headers.insert("authorization", "Bearer dXNlcjpwYXNz".parse().unwrap());
        assert_eq!(basic_credentials(&headers), None);
        headers.insert("authorization", "Basic !!!".parse().unwrap());
        assert_eq!(basic_credentials(&headers), None);
    }
}

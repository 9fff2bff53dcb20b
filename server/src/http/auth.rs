//! HTTP Basic authentication (RFC 7617) against argon2 password hashes.
//!
//! Verified credentials are cached (moka) for [`CREDENTIAL_TTL`], keyed by
//! the user and a keyed SHA-256 of the password (the key is random per
//! process, so the cache never holds a password or an offline-guessable
//! hash), so steady-state requests do not pay argon2. A changed or removed
//! password therefore keeps working for at most [`CREDENTIAL_TTL`] on a node
//! that verified it before the change.

use std::sync::Arc;
use std::time::Duration;

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use axum::http::HeaderMap;
use base64::Engine;
use moka::future::Cache;
use sha2::{Digest, Sha256};

use super::error::HttpError;
use crate::store::{Account, Store};

/// How long verified credentials stay cached.
pub const CREDENTIAL_TTL: Duration = Duration::from_secs(60);

/// Hashes a password with argon2id and a random salt (PHC string).
pub fn hash_password(password: &str) -> Result<String, argon2::password_hash::Error> {
    let salt = SaltString::encode_b64(&rand::random::<[u8; 16]>())?;
    Ok(Argon2::default().hash_password(password.as_bytes(), &salt)?.to_string())
}

/// Checks a password against a PHC hash; false on mismatch or a bad hash.
pub fn verify_password(password: &str, hash: &str) -> bool {
    PasswordHash::new(hash)
        .map(|parsed| Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok())
        .unwrap_or(false)
}

/// Authenticates requests for one server instance.
pub struct Authenticator {
    store: Arc<dyn Store>,
    key: [u8; 32],
    verified: Cache<(String, [u8; 32]), Account>,
}

impl Authenticator {
    /// An authenticator with an empty credential cache.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            key: rand::random(),
            verified: Cache::builder()
                .max_capacity(100_000)
                .time_to_live(CREDENTIAL_TTL)
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

    /// The account of a request's `Authorization: Basic` header; 401 for a
    /// missing or malformed header, an unknown user or a wrong password alike.
    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<Account, HttpError> {
        let (user, password) = basic_credentials(headers).ok_or(HttpError::Unauthorized)?;
        let key = (user.to_lowercase(), self.secret_digest(&user.to_lowercase(), &password));
        if let Some(account) = self.verified.get(&key).await {
            return Ok(account);
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
                self.verified.insert(key, account.clone()).await;
                Ok(account)
            }
            _ => Err(HttpError::Unauthorized),
        }
    }
}

/// An argon2id hash of a random password, verified against for unknown users.
const DUMMY_HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$9sTkzLBSbwBNC8z3r8Fz2/rqQWzS5k0Hb0M4l9B6v1c";

/// `(user, password)` from `Authorization: Basic base64(user:password)`.
fn basic_credentials(headers: &HeaderMap) -> Option<(String, String)> {
    let value = headers.get(axum::http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, encoded) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD.decode(encoded.trim()).ok()?;
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
        assert_eq!(basic_credentials(&headers), Some(("user".into(), "pa:ss".into())));
        headers.insert("authorization", "Bearer dXNlcjpwYXNz".parse().unwrap());
        assert_eq!(basic_credentials(&headers), None);
        headers.insert("authorization", "Basic !!!".parse().unwrap());
        assert_eq!(basic_credentials(&headers), None);
    }
}

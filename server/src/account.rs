//! Account identity and credentials, with no HTTP: the one form a login
//! name is compared in ([`normalize_address`]), argon2 password hashes,
//! API token secrets and what the store keeps of them, and [`Credential`],
//! what a request authenticated with. `http/auth.rs` authenticates with
//! these; `fastview account`, `token`, `demo` and `seed` write them.

use std::time::Duration;

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use base64::Engine;
use sha2::{Digest, Sha256};
use unicode_normalization::UnicodeNormalization;

/// How long a verified credential is trusted without looking at the database.
pub const CREDENTIAL_TTL: Duration = Duration::from_secs(60);
/// How long a looked-up API token is trusted without looking again; also how
/// often an open event stream checks that its credential still stands.
pub const TOKEN_RECHECK: Duration = Duration::from_secs(5);
/// The prefix of an API token's secret.
pub const TOKEN_PREFIX: &str = "fvt_";

/// The one form a login name is stored and compared in: Unicode NFKC, then
/// lowercase (NFKC again after lowercasing). So `Ärger@` and `ärger@` are
/// one address, and `\u{212A}im@` (with the Kelvin sign) is `kim@`: the
/// same account, which `account add` refuses to create twice.
pub fn normalize_address(address: &str) -> String {
    // ASCII is its own NFKC form, and lowercases to ASCII: most login names
    // take this path, on every request (ADR 0003's profile had NFKC at
    // 1.8 % of the core).
    if address.is_ascii() {
        return address.to_ascii_lowercase();
    }
    address
        .nfkc()
        .collect::<String>()
        .to_lowercase()
        .nfkc()
        .collect()
}

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

/// What a request authenticated with.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Credential {
    /// Basic: the account's password, by the [`password_tag`] of the hash it
    /// was verified against (computed once per verification, not per request).
    Password { tag: [u8; 8] },
    /// Bearer: an API token, by id.
    Token { id: i64 },
}

/// A new API token's secret: [`TOKEN_PREFIX`] and 32 random octets in
/// base64url; shown once, stored only as [`token_digest`].
pub fn new_token_secret() -> String {
    let secret: [u8; 32] = rand::random();
    format!(
        "{TOKEN_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret)
    )
}

/// What the store keeps of a token secret: its SHA-256, lowercase hex.
pub fn token_digest(secret: &str) -> String {
    Sha256::digest(secret.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The tag of a password hash: the first 8 octets of its SHA-256. What a
/// [`Credential::Password`] and a push access name a password by, so that
/// a changed password (a new hash) is a different credential.
pub fn password_tag(password_hash: &str) -> [u8; 8] {
    let digest = Sha256::digest(password_hash.as_bytes());
    let mut tag = [0; 8];
    tag.copy_from_slice(&digest[..8]);
    tag
}

/// How long a credential an upstream accepted stays good while the
/// upstream cannot be asked (`--upstream-outage-grace-minutes`, issue 45;
/// ADR 0008): only the credential it accepted last for its user (a
/// password changed there and used here ends the old one's grace), and
/// only for `grace` after that acceptance. Credentials are named by a keyed
/// digest, never kept. Shared by the Basic login check of the IMAP proxy
/// and the session cache of the JMAP proxy.
pub struct OutageGrace {
    grace: Duration,
    /// Per user, the digest of the credential the upstream accepted last.
    latest: moka::future::Cache<String, [u8; 32]>,
}

impl OutageGrace {
    /// A grace of `grace` (zero: none), remembering acceptances for at
    /// least `kept` (the life of the cache the credentials are kept in).
    pub fn new(grace: Duration, kept: Duration) -> Self {
        Self {
            grace,
            latest: moka::future::Cache::builder()
                .max_capacity(100_000)
                .time_to_live(kept.max(grace))
                .build(),
        }
    }

    /// How long the cache that keeps accepted credentials must keep them:
    /// `ttl`, or the grace when that is longer.
    pub fn keep_for(&self, ttl: Duration) -> Duration {
        ttl.max(self.grace)
    }

    /// The upstream accepted credential `digest` of `user` just now.
    pub async fn accepted(&self, user: &str, digest: [u8; 32]) {
        self.latest.insert(user.to_string(), digest).await;
    }

    /// Whether credential `digest` of `user`, accepted `accepted_ago`,
    /// still stands while the upstream cannot be asked.
    pub async fn stands(&self, user: &str, digest: [u8; 32], accepted_ago: Duration) -> bool {
        accepted_ago < self.grace && self.latest.get(user).await == Some(digest)
    }
}

//! HTTP Basic authentication (RFC 7617) against argon2 password hashes, and
//! `Authorization: Bearer` (RFC 6750) with API tokens (`fastview token`).
//!
//! An API token is `fvt_` and 43 base64url characters (32 random octets);
//! the store keeps only its SHA-256, by which a Bearer credential is looked
//! up (one indexed read; a token has too much entropy to guess, so no argon2
//! and no brake). A looked-up token is trusted for [`TOKEN_RECHECK`], so a
//! revoked or expired token stops working within that time on every node.
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
//! The brake on failed logins is keyed by (user, client address), so one
//! user's bad guesses never lock out the other users behind the same
//! address (everyone behind a reverse proxy), with a much higher ceiling
//! per client address against spraying many users: [`MAX_FAILURES`] and
//! [`MAX_FAILURES_PER_ADDRESS`] per [`FAILURE_WINDOW`]. A login reserves a
//! failure slot of both before its password is verified and gives them back
//! only when it succeeds, so concurrent wrong guesses cannot all be verified
//! before the first is counted: past the limit a login gets 429 with
//! Retry-After without being verified. Unknown users are verified against
//! a dummy hash made like a real one and counted the same, so they cost
//! the same bounded work and tell nothing. Credentials this node verified
//! recently skip argon2, but not the brake: a braked (user, address) gets
//! 429 for the right password too, so the brake is no oracle. Valid logins
//! never count, and other users at the address are never slowed.
//!
//! Verifications (argon2, [`VERIFY_MEMORY_KIB`] each) run on the blocking
//! pool at most one per core at once; up to [`VERIFY_QUEUE_PER_CORE`] per
//! core wait for a turn, and past that a login gets 503 with Retry-After.
//!
//! The client address is the TCP peer's, or, when the peer is one of the
//! configured trusted proxies (`--trusted-proxy`), the rightmost address of
//! `X-Forwarded-For` that is not itself a trusted proxy ([`client_address`]).
//!
//! Login names are compared in one form, [`normalize_address`] (NFKC, then
//! lowercase), here and in `fastview account`.
//!
//! With a [`LoginCheck`] installed (the proxy wing's, in front of an IMAP
//! server: `serve --upstream`, issue 18) a Basic login is verified by that
//! server instead of argon2 (the same brake and cache; past
//! [`CREDENTIAL_TTL`], or when `fresh`, it is asked again, so a password
//! changed there stops working here within that time; a server that
//! cannot be asked is 503, not a failure), the account is made on its
//! first accepted login, and every authenticated request hands the
//! credentials to [`LoginCheck::use_account`], which keeps them in memory
//! only. While that server cannot be asked (an outage), a credential it
//! accepted within the outage grace (`--upstream-outage-grace-minutes`,
//! [`Authenticator::install_login_check`]) is still let through, so the
//! mirror keeps serving reads: only the exact credential (user and
//! password), only the user's most recently accepted one (a password
//! changed and used there ends the old one's grace), never one the server
//! refused since; writes fail on their own (`serverUnavailable`, issue 45).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use base64::Engine;
use ipnet::IpNet;
use moka::future::Cache;
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;

use super::error::HttpError;
use crate::account::{
    CREDENTIAL_TTL, Credential, OutageGrace, TOKEN_RECHECK, hash_password, normalize_address,
    password_tag, token_digest, verify_password,
};
use crate::metrics::Metrics;
use crate::store::{Account, Store};

/// Logins checked by the server that holds the mail rather than against a
/// local password hash (the proxy wing's IMAP upstream, ADR 0008).
#[async_trait::async_trait]
pub trait LoginCheck: Send + Sync {
    /// Asks that server about `user` and `password`: the account (made on
    /// its first accepted login) when it accepts them, `None` when it
    /// refuses; `HttpError::UpstreamUnavailable` (503) when it cannot be
    /// asked, `HttpError::Internal` when the store fails.
    async fn verify(&self, user: &str, password: &str) -> Result<Option<Account>, HttpError>;
    /// `account`'s credential was just accepted: kept in memory for what
    /// the account needs of that server while it is in use.
    fn use_account(&self, account: i64, user: &str, password: &str);
}

/// How long a verified credential is kept at most (then argon2 again).
pub const VERIFIED_TTL: Duration = Duration::from_secs(3600);
/// The window failed attempts are counted in.
pub const FAILURE_WINDOW: Duration = Duration::from_secs(60);
/// Failed attempts allowed per window per (user, client address).
pub const MAX_FAILURES: u32 = 10;
/// Failed attempts allowed per window per client address, all users together.
pub const MAX_FAILURES_PER_ADDRESS: u32 = 200;
/// Password verifications waiting for a core, per core, before 503.
pub const VERIFY_QUEUE_PER_CORE: usize = 16;
/// Memory one argon2 verification holds with the default parameters, in KiB.
pub const VERIFY_MEMORY_KIB: u32 = argon2::Params::DEFAULT_M_COST;

/// The address a request comes from: `peer`, unless `peer` is in
/// `trusted_proxies`; then the rightmost `X-Forwarded-For` entry that is not
/// itself a trusted proxy (every entry right of it was added by a trusted
/// proxy, so it is the first hop no one we trust could have forged). An
/// entry that is not an IP address ends the walk at the hop right of it.
pub fn client_address(peer: IpAddr, headers: &HeaderMap, trusted_proxies: &[IpNet]) -> IpAddr {
    let trusted = |address: &IpAddr| trusted_proxies.iter().any(|net| net.contains(address));
    let peer = peer.to_canonical();
    if !trusted(&peer) {
        return peer;
    }
    let hops: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(str::trim)
        .collect();
    let mut client = peer;
    for hop in hops.iter().rev() {
        let parsed = hop
            .parse::<IpAddr>()
            .or_else(|_| hop.parse::<SocketAddr>().map(|s| s.ip()));
        let Ok(address) = parsed else { break };
        client = address.to_canonical();
        if !trusted(&client) {
            break;
        }
    }
    client
}

/// Authenticates requests for one server instance.
pub struct Authenticator {
    store: Arc<dyn Store>,
    metrics: Arc<Metrics>,
    trusted_proxies: Vec<IpNet>,
    key: [u8; 32],
    verified: Cache<(String, [u8; 32]), Verified>,
    failures: Cache<String, Arc<AtomicU32>>,
    /// When a (user, client) failure counter last reached [`MAX_FAILURES`],
    /// in milliseconds since `started` (0: never). A counter lives
    /// [`FAILURE_WINDOW`] from its creation, before it reached the limit:
    /// when the last such moment is older than that, no one is braked and
    /// [`Authenticator::braked`] needs no lookup. (Marking every reservation
    /// instead kept the lookup on every request for a window after any
    /// login, issue 20.)
    last_full_ms: AtomicU64,
    started: Instant,
    /// A hash of a random password made like real ones, verified for unknown users.
    dummy_hash: Arc<str>,
    verify_slots: Arc<Semaphore>,
    verify_waiting: AtomicUsize,
    max_verify_waiting: usize,
    /// Tokens looked up in the last [`TOKEN_RECHECK`], by secret digest.
    tokens: Cache<String, (Account, i64)>,
    /// The deployment's push access key, read once.
    push_key: tokio::sync::OnceCell<Vec<u8>>,
    /// Logins checked by the server that holds the mail instead of a
    /// stored hash, which every request keeps informed ([`LoginCheck`]);
    /// `None`: argon2 against the store.
    pub login_check: Option<Arc<dyn LoginCheck>>,
    /// How long a credential the [`LoginCheck`]'s server accepted stays
    /// good while it cannot be asked.
    outage_grace: OutageGrace,
}

impl Authenticator {
    /// An authenticator with an empty credential cache, counting into
    /// `metrics`, taking `X-Forwarded-For` from `trusted_proxies` only.
    pub fn new(store: Arc<dyn Store>, metrics: Arc<Metrics>, trusted_proxies: Vec<IpNet>) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        let dummy_password: [u8; 16] = rand::random();
        let dummy_hash =
            hash_password(&base64::engine::general_purpose::STANDARD.encode(dummy_password))
                .unwrap_or_else(|_| FALLBACK_DUMMY_HASH.to_string());
        Self {
            store,
            metrics,
            trusted_proxies,
            key: rand::random(),
            verified: Cache::builder()
                .max_capacity(100_000)
                .time_to_live(VERIFIED_TTL)
                .build(),
            failures: Cache::builder()
                .max_capacity(1_000_000)
                .time_to_live(FAILURE_WINDOW)
                .build(),
            last_full_ms: AtomicU64::new(0),
            started: Instant::now(),
            dummy_hash: dummy_hash.into(),
            verify_slots: Arc::new(Semaphore::new(cores)),
            verify_waiting: AtomicUsize::new(0),
            max_verify_waiting: cores * VERIFY_QUEUE_PER_CORE,
            tokens: Cache::builder()
                .max_capacity(100_000)
                .time_to_live(TOKEN_RECHECK)
                .build(),
            push_key: tokio::sync::OnceCell::new(),
            login_check: None,
            outage_grace: OutageGrace::new(Duration::ZERO, VERIFIED_TTL),
        }
    }

    /// Has `check` verify Basic logins instead of argon2 (the proxy wing's
    /// upstream); a credential it accepted stays good for `outage_grace`
    /// while it cannot be asked (module doc). The credential caches keep
    /// entries for at least that long.
    pub fn install_login_check(&mut self, check: Arc<dyn LoginCheck>, outage_grace: Duration) {
        self.outage_grace = OutageGrace::new(outage_grace, VERIFIED_TTL);
        self.verified = Cache::builder()
            .max_capacity(100_000)
            .time_to_live(self.outage_grace.keep_for(VERIFIED_TTL))
            .build();
        self.login_check = Some(check);
    }

    /// The deployment's key for push access ([`super::push_access`]).
    pub async fn push_key(&self) -> Result<&[u8], HttpError> {
        self.push_key
            .get_or_try_init(|| self.store.server_key(super::push_access::KEY_NAME))
            .await
            .map(Vec::as_slice)
            .map_err(|error| HttpError::Internal(error.to_string()))
    }

    /// Whether `credential` still stands for `account` (the account exists,
    /// its password hash is unchanged, or the token exists unexpired): an
    /// open event stream asks every [`TOKEN_RECHECK`].
    pub async fn still_valid(&self, account: i64, credential: &Credential) -> bool {
        match credential {
            Credential::Password { tag } => {
                matches!(self.store.account_by_id(account).await,
                    Ok(Some(current)) if password_tag(&current.password_hash) == *tag)
            }
            Credential::Token { id } => {
                let now = chrono::Utc::now().timestamp();
                matches!(self.store.tokens(account).await,
                    Ok(tokens) if tokens.iter().any(|token| token.id == *id
                        && token.expires_at.is_none_or(|at| at > now)))
            }
        }
    }

    /// The account of a Bearer API token; 401 for an unknown, revoked or
    /// expired one. `fresh`: looked up in the store even if recently seen.
    async fn bearer(&self, secret: &str, fresh: bool) -> Result<(Account, Credential), HttpError> {
        let digest = token_digest(secret);
        if !fresh && let Some((account, id)) = self.tokens.get(&digest).await {
            return Ok((account, Credential::Token { id }));
        }
        let now = chrono::Utc::now().timestamp();
        let found = self
            .store
            .account_by_token(&digest, now)
            .await
            .map_err(|error| HttpError::Internal(error.to_string()))?;
        let (account, token) = found.ok_or(HttpError::Unauthorized)?;
        self.tokens
            .insert(digest, (account.clone(), token.id))
            .await;
        Ok((account, Credential::Token { id: token.id }))
    }

    /// The client address of a request from TCP peer `peer` ([`client_address`]).
    pub fn client_address(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        client_address(peer, headers, &self.trusted_proxies)
    }

    fn secret_digest(&self, user: &str, password: &str) -> [u8; 32] {
        let mut hasher = Sha256::new();
        hasher.update(self.key);
        hasher.update(user.as_bytes());
        hasher.update([0]);
        hasher.update(password.as_bytes());
        hasher.finalize().into()
    }

    /// Milliseconds since this authenticator was made.
    fn elapsed_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Whether (user, client) has used up its failures in this window.
    async fn braked(&self, user: &str, client: IpAddr) -> bool {
        let last = self.last_full_ms.load(Ordering::Acquire);
        // A second's margin past the window.
        let expired = last + FAILURE_WINDOW.as_millis() as u64 + 1_000;
        if last == 0 || self.elapsed_ms() > expired {
            return false;
        }
        self.failures
            .get(&format!("user:{user}\0{client}"))
            .await
            .is_some_and(|counter| counter.load(Ordering::Acquire) >= MAX_FAILURES)
    }

    /// Reserves a failure slot of (user, client) and of the client address,
    /// or 429 when either is used up in this window.
    async fn reserve_failure(&self, user: &str, client: IpAddr) -> Result<FailureSlots, HttpError> {
        let mut slots = FailureSlots(Vec::with_capacity(2));
        for (key, limit) in [
            (format!("user:{user}\0{client}"), MAX_FAILURES),
            (format!("ip:{client}"), MAX_FAILURES_PER_ADDRESS),
        ] {
            let counter = self
                .failures
                .get_with(key, async { Arc::new(AtomicU32::new(0)) })
                .await;
            let reserved = counter.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            });
            // A (user, client) counter at its limit brakes: `braked` looks
            // it up from now on, for a window. At least 1 (0 is "never").
            if limit == MAX_FAILURES && reserved.is_ok_and(|n| n + 1 >= limit) {
                self.last_full_ms
                    .fetch_max(self.elapsed_ms().max(1), Ordering::AcqRel);
            }
            if reserved.is_err() {
                self.metrics.count_login_refusal("braked");
                return Err(HttpError::TooManyAttempts {
                    retry_after: FAILURE_WINDOW.as_secs(),
                });
            }
            slots.0.push(counter);
        }
        Ok(slots)
    }

    /// For a login verified elsewhere (the JMAP upstream, issue 43): 429
    /// when `user` from `client` has used up its failures in this window.
    /// Asked before any kept session is used, as [`Self::authenticate`]
    /// asks before its cache (else the brake answers which guess is right).
    pub async fn check_brake(&self, user: &str, client: IpAddr) -> Result<(), HttpError> {
        if self.braked(user, client).await {
            self.metrics.count_login_refusal("braked");
            return Err(HttpError::TooManyAttempts {
                retry_after: FAILURE_WINDOW.as_secs(),
            });
        }
        Ok(())
    }

    /// For a login verified elsewhere: the failure slots of (`user`,
    /// `client`) and of `client` reserved before the verifier is asked
    /// (429 when either is used up); [`FailureSlots::keep`] them when it
    /// refused the login, drop them otherwise.
    pub async fn reserve_login(
        &self,
        user: &str,
        client: IpAddr,
    ) -> Result<FailureSlots, HttpError> {
        self.reserve_failure(user, client).await
    }

    /// Verifies `password` against `hash` on the blocking pool, at most one
    /// per core at once; 503 when too many already wait for a turn.
    async fn verify(&self, password: String, hash: Arc<str>) -> Result<bool, HttpError> {
        let permit = match self.verify_slots.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                let waiting = WaitingTurn::enter(&self.verify_waiting);
                if waiting.position >= self.max_verify_waiting {
                    self.metrics.count_login_refusal("busy");
                    return Err(HttpError::LoginBusy);
                }
                self.verify_slots
                    .clone()
                    .acquire_owned()
                    .await
                    .map_err(|_| HttpError::Internal("the verification gate closed".into()))?
            }
        };
        self.metrics.login_verifications.inc();
        // The permit moves into the blocking task: it bounds the memory in
        // use even when the request is dropped mid-verification.
        let verified = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            verify_password(&password, &hash)
        })
        .await
        .unwrap_or(false);
        Ok(verified)
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

    /// The account of a request's `Authorization` header (Basic, or Bearer
    /// with an API token) and the credential it used, from client address
    /// `client`; 401 for a missing or malformed header, an unknown user or
    /// token or a wrong password alike; 429 after too many failures; 503 when
    /// too many verifications wait.
    ///
    /// `fresh`: the credential is checked against the store now, not trusted
    /// from the last [`CREDENTIAL_TTL`] or [`TOKEN_RECHECK`] (a changed
    /// password is verified again): what the Session and the event source
    /// ask, so a session never carries a push access already dead.
    pub async fn authenticate(
        &self,
        headers: &HeaderMap,
        client: IpAddr,
        fresh: bool,
    ) -> Result<(Account, Credential), HttpError> {
        if let Some(secret) = bearer_token(headers) {
            return self.bearer(&secret, fresh).await;
        }
        let Some((user, password)) = basic_credentials(headers) else {
            return Err(HttpError::Unauthorized);
        };
        let user = normalize_address(&user);
        // A braked (user, address) is refused before the cache is asked:
        // were a cached right password let through while wrong guesses get
        // 429, the brake would answer which guess is right, at no cost.
        if self.braked(&user, client).await {
            self.metrics.count_login_refusal("braked");
            return Err(HttpError::TooManyAttempts {
                retry_after: FAILURE_WINDOW.as_secs(),
            });
        }
        let key = (user.clone(), self.secret_digest(&user, &password));
        let (account, credential) = self.basic(key, &user, &password, client, fresh).await?;
        if let Some(check) = &self.login_check {
            check.use_account(account.id, &user, &password);
        }
        Ok((account, credential))
    }

    /// [`Authenticator::authenticate`] for Basic credentials: from the
    /// cache, else verified (argon2, or a login at the upstream).
    async fn basic(
        &self,
        key: (String, [u8; 32]),
        user: &str,
        password: &str,
        client: IpAddr,
        fresh: bool,
    ) -> Result<(Account, Credential), HttpError> {
        let mut cached = None;
        if let Some(verified) = self.verified.get(&key).await {
            if !fresh && verified.checked_at.elapsed() < CREDENTIAL_TTL {
                return Ok(verified.into_credential());
            }
            // Behind an upstream the password is the upstream's: it is asked
            // again (below), since no local hash changes when it changes.
            if self.login_check.is_some() {
                cached = Some(verified);
            } else {
                if let Some(account) = self.recheck(user, &verified.account).await? {
                    let verified = Verified::now(account);
                    self.verified.insert(key, verified.clone()).await;
                    return Ok(verified.into_credential());
                }
                self.verified.invalidate(&key).await;
            }
        }
        let slots = self.reserve_failure(user, client).await?;
        if let Some(check) = &self.login_check {
            return self.checked(check, key, password, slots, cached).await;
        }
        let account = self
            .store
            .account_by_email(user)
            .await
            .map_err(|error| HttpError::Internal(error.to_string()))?;
        // Unknown users cost one verification like known ones.
        let hash = account.as_ref().map_or_else(
            || self.dummy_hash.clone(),
            |a| a.password_hash.as_str().into(),
        );
        let verified = self.verify(password.to_string(), hash).await?;
        match account {
            Some(account) if verified => {
                drop(slots); // a valid login gives its slots back
                let verified = Verified::now(account);
                self.verified.insert(key, verified.clone()).await;
                Ok(verified.into_credential())
            }
            _ => {
                slots.keep();
                Err(HttpError::Unauthorized)
            }
        }
    }
}

impl Authenticator {
    /// [`Authenticator::basic`] behind a [`LoginCheck`]: the server asked;
    /// while it cannot be, the `cached` credential within the outage grace
    /// (module doc). An error is not a failure of the user's: the slots go
    /// back.
    async fn checked(
        &self,
        check: &Arc<dyn LoginCheck>,
        key: (String, [u8; 32]),
        password: &str,
        slots: FailureSlots,
        cached: Option<Verified>,
    ) -> Result<(Account, Credential), HttpError> {
        match check.verify(&key.0, password).await {
            Ok(Some(account)) => {
                drop(slots);
                let verified = Verified::now(account);
                self.outage_grace.accepted(&key.0, key.1).await;
                self.verified.insert(key, verified.clone()).await;
                Ok(verified.into_credential())
            }
            Ok(None) => {
                self.verified.invalidate(&key).await;
                slots.keep();
                Err(HttpError::Unauthorized)
            }
            Err(HttpError::UpstreamUnavailable(why)) => {
                let stands = match &cached {
                    Some(verified) => {
                        let ago = verified.checked_at.elapsed();
                        self.outage_grace.stands(&key.0, key.1, ago).await
                    }
                    None => false,
                };
                match cached {
                    Some(verified) if stands => {
                        drop(slots);
                        self.metrics.upstream_outage_logins.inc();
                        Ok(verified.into_credential())
                    }
                    _ => Err(HttpError::UpstreamUnavailable(why)),
                }
            }
            Err(error) => Err(error),
        }
    }
}

/// Failure slots reserved for one login: given back when dropped, kept
/// (counted as failures for the rest of the window) by [`FailureSlots::keep`].
pub struct FailureSlots(Vec<Arc<AtomicU32>>);

impl FailureSlots {
    /// Counts the login as failed for the rest of the window.
    pub fn keep(mut self) {
        self.0.clear();
    }
}

impl Drop for FailureSlots {
    fn drop(&mut self) {
        for counter in &self.0 {
            counter.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// A login waiting for a verification turn; leaves the queue when dropped.
struct WaitingTurn<'a> {
    waiting: &'a AtomicUsize,
    /// How many were waiting before this one.
    position: usize,
}

impl<'a> WaitingTurn<'a> {
    fn enter(waiting: &'a AtomicUsize) -> Self {
        let position = waiting.fetch_add(1, Ordering::AcqRel);
        Self { waiting, position }
    }
}

impl Drop for WaitingTurn<'_> {
    fn drop(&mut self) {
        self.waiting.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A credential verified with argon2, and when the database last confirmed it.
#[derive(Clone)]
struct Verified {
    account: Account,
    checked_at: std::time::Instant,
    /// The [`password_tag`] of the hash it was verified against.
    tag: [u8; 8],
}

impl Verified {
    fn now(account: Account) -> Self {
        Self {
            tag: password_tag(&account.password_hash),
            account,
            checked_at: std::time::Instant::now(),
        }
    }

    /// The account and the credential it authenticated with.
    fn into_credential(self) -> (Account, Credential) {
        (self.account, Credential::Password { tag: self.tag })
    }
}

/// The authenticated account of a request and the credential it used (an
/// axum extractor, the credential for the response's session state):
/// reads the Basic or Bearer credentials and the client address, rejects
/// with 401 or 429. With `FRESH`, the credential is checked against the
/// store now ([`Authenticator::authenticate`]): [`FreshlyAuthenticated`].
pub struct AuthenticatedWith<const FRESH: bool = false>(pub Account, pub Credential);

/// [`AuthenticatedWith`], the credential checked against the store now:
/// for the Session, whose push access must work, and the event source.
pub type FreshlyAuthenticated = AuthenticatedWith<true>;

/// The account and credential of a request's Authorization header.
async fn authenticate_parts(
    parts: &axum::http::request::Parts,
    state: &super::AppState,
    fresh: bool,
) -> Result<(Account, Credential), HttpError> {
    let peer = parts
        .extensions
        .get::<axum::extract::ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::from([0, 0, 0, 0]), |info| info.0.ip());
    let client = state.auth.client_address(peer, &parts.headers);
    state.auth.authenticate(&parts.headers, client, fresh).await
}

impl<const FRESH: bool> axum::extract::FromRequestParts<Arc<super::AppState>>
    for AuthenticatedWith<FRESH>
{
    type Rejection = HttpError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &Arc<super::AppState>,
    ) -> Result<Self, Self::Rejection> {
        let (account, credential) = authenticate_parts(parts, state, FRESH).await?;
        Ok(AuthenticatedWith(account, credential))
    }
}

/// A well-formed argon2id hash with the default parameters, verified for
/// unknown users if hashing a random password at start-up ever failed.
const FALLBACK_DUMMY_HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$9sTkzLBSbwBNC8z3r8Fz2/rqQWzS5k0Hb0M4l9B6v1c";

/// Whom an `Authorization` value logs in as, for the failure brake of a
/// login verified elsewhere (the JMAP upstream): a Basic user's address
/// ([`normalize_address`]), a Bearer token by a prefix of its digest
/// (each token its own "user"; the per-address ceiling still counts
/// them), else the empty name.
pub fn brake_user(authorization: &axum::http::HeaderValue) -> String {
    let Ok(value) = authorization.to_str() else {
        return String::new();
    };
    if let Some(secret) = bearer_token_of(value) {
        let digest = token_digest(&secret);
        return format!("token:{}", &digest[..16]);
    }
    basic_credentials_of(value).map_or_else(String::new, |(user, _)| normalize_address(&user))
}

/// The token of `Authorization: Bearer <token>` (RFC 6750 §2.1).
fn bearer_token(headers: &HeaderMap) -> Option<String> {
    bearer_token_of(
        headers
            .get(axum::http::header::AUTHORIZATION)?
            .to_str()
            .ok()?,
    )
}

/// The token of a `Bearer <token>` value.
fn bearer_token_of(value: &str) -> Option<String> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim().to_string())
        .filter(|token| !token.is_empty())
}

/// `(user, password)` from `Authorization: Basic base64(user:password)`.
fn basic_credentials(headers: &HeaderMap) -> Option<(String, String)> {
    basic_credentials_of(
        headers
            .get(axum::http::header::AUTHORIZATION)?
            .to_str()
            .ok()?,
    )
}

/// `(user, password)` of a `Basic base64(user:password)` value (RFC 7617).
fn basic_credentials_of(value: &str) -> Option<(String, String)> {
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
        assert!(!verify_password("x", FALLBACK_DUMMY_HASH));
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

    #[test]
    fn addresses_normalise_to_nfkc_lowercase() {
        for (typed, normal) in [
            ("kim@example.com", "kim@example.com"),
            ("KIM@Example.COM", "kim@example.com"),
            ("\u{212A}im@example.com", "kim@example.com"),
            ("Ärger@example.com", "ärger@example.com"),
            ("A\u{308}rger@example.com", "ärger@example.com"),
            ("ＡＢ@example.com", "ab@example.com"),
        ] {
            assert_eq!(normalize_address(typed), normal, "{typed}");
        }
    }

    fn forwarded(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert("x-forwarded-for", value.parse().unwrap());
        headers
    }

    #[test]
    fn the_client_is_the_rightmost_untrusted_forwarded_hop_behind_a_trusted_peer() {
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().unwrap(), "::1/128".parse().unwrap()];
        let proxy: IpAddr = "10.1.2.3".parse().unwrap();
        let stranger: IpAddr = "192.0.2.9".parse().unwrap();
        let check = |peer: IpAddr, header: &str, expected: &str| {
            let headers = if header.is_empty() {
                HeaderMap::new()
            } else {
                forwarded(header)
            };
            assert_eq!(
                client_address(peer, &headers, &trusted),
                expected.parse::<IpAddr>().unwrap(),
                "{peer} {header}"
            );
        };
        check(proxy, "203.0.113.7", "203.0.113.7");
        check(proxy, "198.51.100.1, 203.0.113.7", "203.0.113.7");
        check(proxy, "198.51.100.1, 203.0.113.7, 10.9.9.9", "203.0.113.7");
        check(proxy, "10.5.5.5, 10.9.9.9", "10.5.5.5");
        check(proxy, "", "10.1.2.3");
        check(proxy, "garbage, 10.9.9.9", "10.9.9.9");
        check(proxy, "203.0.113.7:4711", "203.0.113.7");
        check("::1".parse().unwrap(), "2001:db8::1", "2001:db8::1");
        check(
            "::ffff:10.1.2.3".parse().unwrap(),
            "203.0.113.7",
            "203.0.113.7",
        );
        // An untrusted peer's header is ignored.
        check(stranger, "203.0.113.7", "192.0.2.9");
    }
}

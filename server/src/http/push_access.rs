//! Push access for a browser: the event source without an `Authorization`
//! header (issue 14).
//!
//! A browser's `EventSource` cannot send an `Authorization` header, so a web
//! client that authenticates every other request cannot open the event
//! source (RFC 8620 §7.3) with it. The Session object's `eventSourceUrl`
//! therefore carries an `access` query parameter: a capability signed by the
//! server ([`PushAccess`]), naming the account, the credential the session
//! was fetched with and an expiry ([`PUSH_ACCESS_TTL`]). It opens only the
//! event source of that account, and only while that credential stands: a
//! changed password or a revoked or expired API token ends it, and ends
//! streams already open within [`crate::account::TOKEN_RECHECK`].
//!
//! Shape (base64url, no padding, 57 octets): account id (8, big-endian) ·
//! expiry in unix seconds (8) · credential kind (1: `p` password, `t` token)
//! · credential tag (8: the token id, or the first 8 octets of the SHA-256
//! of the account's password hash) · HMAC-SHA256 over the 25 octets before
//! it (32), keyed by the deployment's `push-access` key
//! ([`crate::store::Store::server_key`], the same on every node).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::account::Credential;
#[cfg(test)]
use crate::account::password_tag;

/// How long a push access stays valid after the session that carried it
/// was fetched: long enough for a web client left open for days, which
/// keeps reconnecting with the URL it was given.
pub const PUSH_ACCESS_TTL: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);

/// The name of the signing key in the store's `server_keys`.
pub const KEY_NAME: &str = "push-access";

const BODY: usize = 8 + 8 + 1 + 8;

/// A verified push access: what it grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushAccess {
    pub account: i64,
    /// Unix seconds.
    pub expires_at: i64,
    pub credential: CredentialTag,
}

/// The credential a push access was made from, as far as it names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialTag {
    /// The account's password, as its hash was: [`crate::account::password_tag`].
    Password([u8; 8]),
    /// An API token, by id.
    Token(i64),
}

impl CredentialTag {
    /// A short text for the session state: `p` and 6 octets of the password
    /// tag in hex, or `t` and the token id.
    pub fn state_tag(&self) -> String {
        match self {
            CredentialTag::Password(tag) => {
                // Written by hand: on every API request (its sessionState).
                const HEX: &[u8; 16] = b"0123456789abcdef";
                let mut text = String::with_capacity(13);
                text.push('p');
                for byte in &tag[..6] {
                    text.push(HEX[usize::from(byte >> 4)] as char);
                    text.push(HEX[usize::from(byte & 0xf)] as char);
                }
                text
            }
            CredentialTag::Token(id) => format!("t{id}"),
        }
    }

    /// The tag of the credential a request authenticated with.
    pub fn of(credential: &Credential) -> Self {
        match credential {
            Credential::Password { tag } => CredentialTag::Password(*tag),
            Credential::Token { id } => CredentialTag::Token(*id),
        }
    }
}

fn mac(key: &[u8], body: &[u8]) -> Hmac<Sha256> {
    // HMAC takes a key of any length: new_from_slice cannot fail.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(body);
    mac
}

impl PushAccess {
    /// The signed, URL-safe form.
    pub fn sign(&self, key: &[u8]) -> String {
        let mut bytes = Vec::with_capacity(BODY + 32);
        bytes.extend_from_slice(&self.account.to_be_bytes());
        bytes.extend_from_slice(&self.expires_at.to_be_bytes());
        match self.credential {
            CredentialTag::Password(tag) => {
                bytes.push(b'p');
                bytes.extend_from_slice(&tag);
            }
            CredentialTag::Token(id) => {
                bytes.push(b't');
                bytes.extend_from_slice(&id.to_be_bytes());
            }
        }
        let signature = mac(key, &bytes).finalize().into_bytes();
        bytes.extend_from_slice(&signature);
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// The access `text` grants if `key` signed it and it has not expired at
    /// `now` (unix seconds); `None` for anything else, told apart from nothing.
    pub fn verify(text: &str, key: &[u8], now: i64) -> Option<Self> {
        let bytes = URL_SAFE_NO_PAD.decode(text.trim()).ok()?;
        if bytes.len() != BODY + 32 {
            return None;
        }
        let (body, signature) = bytes.split_at(BODY);
        mac(key, body).verify_slice(signature).ok()?;
        let number = |range: std::ops::Range<usize>| -> Option<i64> {
            Some(i64::from_be_bytes(body.get(range)?.try_into().ok()?))
        };
        let access = PushAccess {
            account: number(0..8)?,
            expires_at: number(8..16)?,
            credential: match body[16] {
                b'p' => CredentialTag::Password(body[17..25].try_into().ok()?),
                b't' => CredentialTag::Token(number(17..25)?),
                _ => return None,
            },
        };
        (access.expires_at > now).then_some(access)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_tags_are_the_password_tags_first_six_octets_in_hex_or_the_token_id() {
        let tag = CredentialTag::Password([0xab, 0x01, 0xf0, 0x00, 0x9c, 0x7e, 0xff, 0xff]);
        assert_eq!(tag.state_tag(), "pab01f0009c7e");
        assert_eq!(CredentialTag::Token(42).state_tag(), "t42");
    }

    #[test]
    fn an_access_verifies_only_unaltered_unexpired_and_under_its_key() {
        let key = [7u8; 32];
        for credential in [
            CredentialTag::Password(password_tag("$argon2id$v=19$…")),
            CredentialTag::Token(42),
        ] {
            let access = PushAccess {
                account: 3,
                expires_at: 1_000,
                credential,
            };
            let text = access.sign(&key);
            assert_eq!(text.len(), 76);
            assert_eq!(PushAccess::verify(&text, &key, 999), Some(access.clone()));
            assert_eq!(PushAccess::verify(&text, &key, 1_000), None, "expired");
            assert_eq!(
                PushAccess::verify(&text, &[8u8; 32], 999),
                None,
                "other key"
            );
            // Any changed octet (here the account id) breaks the signature.
            let mut bytes = URL_SAFE_NO_PAD.decode(&text).unwrap();
            bytes[7] ^= 1;
            assert_eq!(
                PushAccess::verify(&URL_SAFE_NO_PAD.encode(bytes), &key, 999),
                None
            );
            assert_eq!(PushAccess::verify("", &key, 0), None);
            assert_eq!(PushAccess::verify("!!", &key, 0), None);
        }
        assert_ne!(password_tag("a"), password_tag("b"));
    }
}

//! Fastview in front of an existing JMAP server (issue 19, ADR 0009).
//!
//! With `serve --upstream https://jmap.example.com/.well-known/jmap` a
//! serving instance is transparent to its clients: they see the upstream's
//! session (its accounts, capabilities, ids, blob ids and state strings),
//! with the URLs in it pointing at Fastview, and every credential is the
//! upstream's own.
//!
//! - [`JmapUpstreamUrl`]: the upstream's session URL, `https://`, or
//!   `http://` to a loopback address only.
//! - [`client::JmapUpstream`]: the round trips to the upstream: its session
//!   per credential (fetched with the user's own `Authorization`, which is
//!   how a credential is verified, and kept [`client::SESSION_TTL`]), API
//!   requests, and the streamed downloads, uploads and event source.

pub mod client;
pub mod edge;
pub mod forward;
pub mod mirror;
pub mod names;

pub use client::{JmapUpstream, UpstreamSession};

/// RFC 8620 §2's core capability, as the upstream's session names it.
pub const CAPABILITY_CORE: &str = "urn:ietf:params:jmap:core";
/// RFC 8621 §1.3.1's mail capability.
pub const CAPABILITY_MAIL: &str = "urn:ietf:params:jmap:mail";

/// How a serving instance uses its JMAP upstream (`serve` flags).
#[derive(Debug, Clone)]
pub struct JmapUpstreamOptions {
    /// `--upstream`: the session URL.
    pub url: JmapUpstreamUrl,
    /// `--upstream-poll`: the longest a followed account's mirror waits
    /// between syncs when the upstream's event source tells of no change.
    pub poll: std::time::Duration,
    /// `--upstream-poll-active`: how often a followed account's mirror polls
    /// the upstream's states when its event source gives no stream (issue
    /// 45), while a client of the account made a request within the last
    /// minute; after that the wait doubles up to `poll`.
    pub poll_active: std::time::Duration,
    /// `--upstream-idle-minutes`: how long after its last request an
    /// account's mirror is followed (and the credential kept in memory).
    pub idle: std::time::Duration,
    /// `--upstream-trusts-forwarded`: each client's address goes to the
    /// upstream (`Forwarded`, `X-Forwarded-For`), issue 43.
    pub trusts_forwarded: bool,
    /// `--upstream-outage-grace-minutes`: how long after the upstream last
    /// accepted a credential its session stands while the upstream cannot
    /// be reached (zero: not at all).
    pub outage_grace: std::time::Duration,
    /// `--upstream-syncs-at-once`: the most background syncs (with their
    /// downloads) and polls the mirrors run against the upstream at once
    /// (issue 45, [`crate::proxy::turns`]); clients' own calls take no turn.
    pub syncs_at_once: usize,
}

impl JmapUpstreamOptions {
    /// The options of an upstream at `url` with the flags' defaults (poll
    /// 60 s, 1 s while active without an event source, idle 30 minutes,
    /// outage grace 4 hours, [`crate::proxy::turns::DEFAULT_SYNCS_AT_ONCE`]
    /// syncs at once).
    pub fn new(url: JmapUpstreamUrl) -> Self {
        Self {
            url,
            poll: std::time::Duration::from_secs(60),
            poll_active: std::time::Duration::from_secs(1),
            idle: std::time::Duration::from_secs(30 * 60),
            trusts_forwarded: false,
            outage_grace: std::time::Duration::from_secs(4 * 3600),
            syncs_at_once: crate::proxy::turns::DEFAULT_SYNCS_AT_ONCE,
        }
    }
}

/// The session URL of an upstream JMAP server (RFC 8620 §2.2):
/// `https://host[:port]/path`, or `http://` when the host is loopback (a
/// password must not cross a network in the clear).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JmapUpstreamUrl(url::Url);

impl JmapUpstreamUrl {
    /// Parses a session URL. Errors name what is wrong: another scheme,
    /// `http://` to a host that is not loopback, credentials in the URL
    /// (they come from each user's request) or a fragment.
    pub fn parse(text: &str) -> Result<Self, String> {
        let url = url::Url::parse(text).map_err(|error| format!("{text}: {error}"))?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(format!(
                "{text}: no credentials in the URL: each user's own are forwarded"
            ));
        }
        if url.fragment().is_some() {
            return Err(format!("{text}: a session URL has no fragment"));
        }
        let loopback = match url.host() {
            Some(url::Host::Ipv4(address)) => address.is_loopback(),
            Some(url::Host::Ipv6(address)) => address.is_loopback(),
            Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
            None => return Err(format!("{text}: no host")),
        };
        match url.scheme() {
            "https" => Ok(Self(url)),
            "http" if loopback => Ok(Self(url)),
            "http" => Err(format!(
                "{text}: http:// only to a loopback address; use https://"
            )),
            other => Err(format!(
                "{text}: a JMAP upstream is https:// (or http:// on loopback), not {other}://"
            )),
        }
    }

    /// The URL itself.
    pub fn url(&self) -> &url::Url {
        &self.0
    }
}

impl std::fmt::Display for JmapUpstreamUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::JmapUpstreamUrl;

    #[test]
    fn session_urls_are_https_or_loopback_http() {
        let url = JmapUpstreamUrl::parse("https://jmap.example.com/.well-known/jmap").unwrap();
        assert_eq!(url.to_string(), "https://jmap.example.com/.well-known/jmap");
        assert!(JmapUpstreamUrl::parse("http://127.0.0.1:8080/.well-known/jmap").is_ok());
        assert!(JmapUpstreamUrl::parse("http://[::1]:8080/jmap/session").is_ok());
        assert!(JmapUpstreamUrl::parse("http://localhost/.well-known/jmap").is_ok());
        let refused = [
            ("http://jmap.example.com/.well-known/jmap", "loopback"),
            ("https://ann:pw@jmap.example.com/", "credentials"),
            ("https://jmap.example.com/#x", "fragment"),
            ("ftp://jmap.example.com/", "not ftp://"),
            ("jmap.example.com", "relative URL"),
        ];
        for (text, reason) in refused {
            let error = JmapUpstreamUrl::parse(text).unwrap_err();
            assert!(error.contains(reason), "{text}: {error}");
        }
    }
}

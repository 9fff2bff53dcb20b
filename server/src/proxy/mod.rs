//! The proxy wing: everything that exists only because Fastview stands in
//! front of another mail server (the upstream), and nothing else.
//!
//! - [`imap`]: in front of an IMAP server (issue 18, ADR 0008): logins
//!   checked upstream, each account's mail synced into the local store,
//!   writes applied upstream first.
//! - [`jmap`]: in front of a JMAP server (issue 19, ADR 0009): the
//!   upstream's session and ids, answered from a local mirror where it can
//!   be, forwarded where it cannot.
//! - [`upstream`] and [`turns`]: what both share: [`UpstreamError`], and
//!   the bound on background syncs against the upstream with their
//!   backoff (issue 45).
//!
//! The local handlers do not know whether an upstream exists: the wing
//! plugs into the seams the layers below declare (`mail::writer`,
//! `http::auth`'s login check, `mail::delivery`'s outbound), and the
//! assembly (`cli::serve`, the tests' support) chooses once. The IMAP and
//! JMAP halves import nothing of each other.

pub mod imap;
pub mod jmap;
pub mod turns;
pub mod upstream;

pub use upstream::UpstreamError;

/// What `serve --upstream` names: an IMAP server whose mail is mirrored
/// (issue 18), or a JMAP server fronted transparently (issue 19).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamTarget {
    /// `imaps://` or `imap://`: [`imap::UpstreamUrl`].
    Imap(imap::UpstreamUrl),
    /// `https://` (or `http://` to loopback): the upstream's session URL.
    Jmap(jmap::JmapUpstreamUrl),
}

impl UpstreamTarget {
    /// Parses `--upstream`: by its scheme, an IMAP or a JMAP upstream.
    pub fn parse(text: &str) -> Result<Self, String> {
        let scheme = text
            .split_once("://")
            .map(|(scheme, _)| scheme.to_ascii_lowercase());
        match scheme.as_deref() {
            Some("http" | "https") => jmap::JmapUpstreamUrl::parse(text).map(Self::Jmap),
            _ => imap::UpstreamUrl::parse(text).map(Self::Imap),
        }
    }
}

impl std::fmt::Display for UpstreamTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Imap(url) => url.fmt(f),
            Self::Jmap(url) => url.fmt(f),
        }
    }
}

/// How a serving instance uses its upstream (`serve --upstream` and the
/// flags beside it).
#[derive(Debug, Clone)]
pub enum ProxyOptions {
    /// In front of an IMAP server.
    Imap(imap::UpstreamOptions),
    /// In front of a JMAP server.
    Jmap(jmap::JmapUpstreamOptions),
}

/// The proxy wing of a serving instance, as assembled: what its caller
/// starts and what tests look into.
pub enum Proxy {
    /// The IMAP upstream (its writes, logins and syncs).
    Imap(std::sync::Arc<imap::Upstream>),
    /// The JMAP proxy's routes' state (the upstream's client, the mirror).
    Jmap(std::sync::Arc<jmap::edge::JmapProxy>),
}

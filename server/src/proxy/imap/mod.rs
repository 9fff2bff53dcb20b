//! The projection proxy in front of an IMAP server (issue 18, ADR 0008).
//!
//! With `serve --upstream imaps://host` a data dir mirrors the accounts of
//! an existing IMAP server: users log in with their IMAP credentials, which
//! are checked against the upstream ([`imap::Connection::login`]) and kept
//! in memory only while the account is in use ([`link::Upstream`]); each
//! account's mailboxes and messages are synced into the local store through
//! the ordinary ingest path ([`sync`]), so the list view, the read levels
//! and search never wait on the upstream.
//!
//! - [`UpstreamUrl`]: `imaps://host[:993]` (TLS), `imap://host[:143]`
//!   (STARTTLS required, unless the host is loopback).
//! - [`keywords_of_flags`] / [`flag_of_keyword`]: RFC 8621 §4.1.1's keyword
//!   ⇄ IMAP flag mapping (`$seen` ⇄ `\Seen`, …).
//! - [`utf7`]: mailbox names on the wire (RFC 3501 §5.1.3).

pub mod cache;
pub mod connection;
pub mod link;
pub mod seams;
pub mod sync;
pub mod utf7;
pub mod write;

pub use link::{MasterLogin, Upstream, UpstreamOptions};

/// How a connection to the upstream is secured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Security {
    /// TLS from the first octet (`imaps://`, RFC 8314).
    Tls,
    /// Plain TCP upgraded with STARTTLS before login (`imap://`).
    StartTls,
    /// Plain TCP: only to a loopback address (`imap://` to loopback).
    Plain,
}

/// Where the upstream IMAP server is: `imaps://host[:port]` or
/// `imap://host[:port]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamUrl {
    pub host: String,
    pub port: u16,
    pub security: Security,
}

impl UpstreamUrl {
    /// Parses an upstream URL. Errors name what is wrong: another scheme,
    /// no host, a path, or credentials in the URL (they come from each
    /// user's login).
    pub fn parse(text: &str) -> Result<Self, String> {
        let url = url::Url::parse(text).map_err(|error| format!("{text}: {error}"))?;
        // `imap://` is not a special scheme to the URL parser: an IPv4
        // address comes back as a domain, so the host is read again here.
        let host = match url.host() {
            Some(url::Host::Ipv6(address)) => address.to_string(),
            Some(host) => host.to_string(),
            None => return Err(format!("{text}: no host")),
        };
        let address: Option<std::net::IpAddr> = host.parse().ok();
        if !url.username().is_empty() || url.password().is_some() {
            return Err(format!(
                "{text}: no credentials in the URL: users log in with their own"
            ));
        }
        if !matches!(url.path(), "" | "/") || url.query().is_some() {
            return Err(format!("{text}: only a scheme, a host and a port"));
        }
        let loopback = address.map_or(host.eq_ignore_ascii_case("localhost"), |address| {
            address.is_loopback()
        });
        let (security, default_port) = match url.scheme() {
            "imaps" => (Security::Tls, 993),
            "imap" if loopback => (Security::Plain, 143),
            "imap" => (Security::StartTls, 143),
            other => {
                return Err(format!(
                    "{text}: the upstream is imaps:// or imap://, not {other}://"
                ));
            }
        };
        Ok(Self {
            host,
            port: url.port().unwrap_or(default_port),
            security,
        })
    }
}

impl std::fmt::Display for UpstreamUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = match self.security {
            Security::Tls => "imaps",
            Security::StartTls | Security::Plain => "imap",
        };
        if self.host.contains(':') {
            write!(f, "{scheme}://[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{scheme}://{}:{}", self.host, self.port)
        }
    }
}

/// The JMAP keywords of a message with these IMAP flags (RFC 8621 §4.1.1):
/// `\Seen` `$seen`, `\Flagged` `$flagged`, `\Answered` `$answered`,
/// `\Draft` `$draft`; `\Recent` and `\Deleted` are not keywords (a message
/// marked `\Deleted` is on its way out); any other flag is the keyword of
/// its own name, lowercase. Sorted, without duplicates.
pub fn keywords_of_flags<'a>(flags: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut keywords: Vec<String> = flags
        .into_iter()
        .filter_map(|flag| {
            let keyword = match flag.to_ascii_lowercase().as_str() {
                "\\seen" => "$seen".to_string(),
                "\\flagged" => "$flagged".to_string(),
                "\\answered" => "$answered".to_string(),
                "\\draft" => "$draft".to_string(),
                other if other.starts_with('\\') => return None,
                other => other.to_string(),
            };
            Some(keyword)
        })
        .collect();
    keywords.sort();
    keywords.dedup();
    keywords
}

/// The IMAP flag of a JMAP keyword: the inverse of [`keywords_of_flags`].
pub fn flag_of_keyword(keyword: &str) -> String {
    match keyword.to_ascii_lowercase().as_str() {
        "$seen" => "\\Seen".into(),
        "$flagged" => "\\Flagged".into(),
        "$answered" => "\\Answered".into(),
        "$draft" => "\\Draft".into(),
        other => other.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_urls_parse_with_security_by_scheme_and_host() {
        let url = UpstreamUrl::parse("imaps://imap.example.com").unwrap();
        assert_eq!(
            (url.host.as_str(), url.port, url.security),
            ("imap.example.com", 993, Security::Tls)
        );
        let url = UpstreamUrl::parse("imap://imap.example.com").unwrap();
        assert_eq!((url.port, url.security), (143, Security::StartTls));
        let url = UpstreamUrl::parse("imap://127.0.0.1:10143").unwrap();
        assert_eq!((url.port, url.security), (10143, Security::Plain));
        assert_eq!(url.to_string(), "imap://127.0.0.1:10143");
        let url = UpstreamUrl::parse("imap://[::1]:1143").unwrap();
        assert_eq!((url.host.as_str(), url.security), ("::1", Security::Plain));
        assert_eq!(url.to_string(), "imap://[::1]:1143");
        for bad in [
            "https://example.com",
            "imap://user:pw@example.com",
            "imap://example.com/INBOX",
            "imap.example.com",
        ] {
            assert!(UpstreamUrl::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn flags_and_keywords_map_both_ways() {
        assert_eq!(
            keywords_of_flags([
                "\\Seen",
                "\\Recent",
                "\\Deleted",
                "$Forwarded",
                "\\Answered"
            ]),
            ["$answered", "$forwarded", "$seen"]
        );
        assert_eq!(
            keywords_of_flags(["\\Flagged", "\\Draft", "Work", "work"]),
            ["$draft", "$flagged", "work"]
        );
        assert_eq!(flag_of_keyword("$seen"), "\\Seen");
        assert_eq!(flag_of_keyword("$draft"), "\\Draft");
        assert_eq!(flag_of_keyword("$forwarded"), "$forwarded");
    }
}

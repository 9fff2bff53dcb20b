//! Sending to other servers through the operator's SMTP relay (issue 17):
//! `serve --smtp-relay smtp://user:pass@host:587` (STARTTLS, required
//! unless the host is loopback) or `smtps://user:pass@host:465` (TLS from
//! the first octet), through lettre. One SMTP transaction per recipient, so
//! each recipient's `deliveryStatus` is the relay's own answer to it.

use lettre::address::{Address, Envelope};
use lettre::transport::smtp::authentication::Credentials;
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};

/// A relay URL that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RelayUrlError {
    #[error("the relay URL must start smtp:// or smtps://")]
    Scheme,
    #[error("the relay URL has no host")]
    NoHost,
    #[error("the relay URL is not a URL: {0}")]
    Malformed(String),
    #[error("cannot set up TLS to the relay: {0}")]
    Tls(String),
}

/// What a relay did not accept, with its reply (RFC 8621 §7 `smtpReply`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A 5xx reply (or an address the relay cannot be given): final.
    Permanent(String),
    /// A 4xx reply, or no answer at all: worth trying again.
    Temporary(String),
}

/// The configured relay: a lettre transport, and the URL without its
/// password (for logs).
pub struct Relay {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    shown: String,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay").field("url", &self.shown).finish()
    }
}

impl Relay {
    /// The relay of `url`: `smtp://[user[:password]@]host[:port]` (port 587,
    /// STARTTLS unless the host is loopback) or `smtps://…` (port 465).
    /// The user and password are percent-decoded.
    pub fn from_url(url: &str) -> Result<Self, RelayUrlError> {
        Self::build(url, None)
    }

    /// The relay of `url` (without credentials in it) as `user` with
    /// `password`: the IMAP upstream's submission server, as each user.
    pub fn from_url_as(url: &str, user: &str, password: &str) -> Result<Self, RelayUrlError> {
        Self::build(url, Some((user.to_string(), password.to_string())))
    }

    fn build(url: &str, credentials: Option<(String, String)>) -> Result<Self, RelayUrlError> {
        let parsed =
            url::Url::parse(url).map_err(|error| RelayUrlError::Malformed(error.to_string()))?;
        let host = parsed.host_str().ok_or(RelayUrlError::NoHost)?.to_string();
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let loopback = host == "localhost"
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        let tls = |error: lettre::transport::smtp::Error| RelayUrlError::Tls(error.to_string());
        let builder = match parsed.scheme() {
            "smtps" => AsyncSmtpTransport::<Tokio1Executor>::relay(&host)
                .map_err(tls)?
                .port(parsed.port().unwrap_or(465)),
            "smtp" if loopback => AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&host)
                .port(parsed.port().unwrap_or(587)),
            "smtp" => AsyncSmtpTransport::<Tokio1Executor>::starttls_relay(&host)
                .map_err(tls)?
                .port(parsed.port().unwrap_or(587)),
            _ => return Err(RelayUrlError::Scheme),
        };
        let decode = |text: &str| {
            percent_encoding::percent_decode_str(text)
                .decode_utf8_lossy()
                .into_owned()
        };
        let builder = match (credentials, parsed.username()) {
            (Some((user, password)), _) => builder.credentials(Credentials::new(user, password)),
            (None, "") => builder,
            (None, user) => builder.credentials(Credentials::new(
                decode(user),
                decode(parsed.password().unwrap_or_default()),
            )),
        };
        let mut shown = parsed.clone();
        let _ = shown.set_password(None);
        Ok(Self {
            transport: builder
                .timeout(Some(std::time::Duration::from_secs(60)))
                .build(),
            shown: shown.to_string(),
        })
    }

    /// Sends `message` (as it leaves: octets unchanged) from `mail_from` to
    /// `recipient`; the relay's reply, as one line.
    pub async fn send(
        &self,
        mail_from: &str,
        recipient: &str,
        message: &[u8],
    ) -> Result<String, Refusal> {
        let address = |text: &str| text.parse::<Address>();
        // An empty MAIL FROM is the null reverse-path (`<>`) of automatic
        // replies (RFC 3834 §3.3).
        let from = match mail_from {
            "" => Ok(None),
            from => address(from).map(Some),
        };
        let (Ok(from), Ok(to)) = (from, address(recipient)) else {
            return Err(Refusal::Permanent(
                "553 5.1.3 The address is not one the relay can be given".into(),
            ));
        };
        let envelope = Envelope::new(from, vec![to])
            .map_err(|error| Refusal::Permanent(format!("553 5.1.3 {error}")))?;
        // Every line ends CRLF on the wire (RFC 5321 §2.3.8): a bare LF or
        // CR would let a relay that reads them as line ends see an end of
        // data lettre did not dot-stuff (SMTP smuggling).
        let message = with_crlf(message);
        // lettre ends DATA with CRLF "." CRLF whatever the message ends
        // with: the message's own final CRLF is that first CRLF, so the
        // relay receives the octets as they are.
        let message = message.strip_suffix(b"\r\n").unwrap_or(&message);
        match self.transport.send_raw(&envelope, message).await {
            Ok(response) => Ok(one_line(&response.code().to_string(), response.message())),
            Err(error) => {
                let permanent = error.is_permanent();
                let text = refusal_text(
                    error.status().map(|code| code.to_string()),
                    &error.to_string(),
                    permanent,
                );
                match permanent {
                    true => Err(Refusal::Permanent(text)),
                    false => Err(Refusal::Temporary(text)),
                }
            }
        }
    }
}

impl std::fmt::Display for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

/// `message` with every bare LF and bare CR made a CRLF.
pub(crate) fn with_crlf(message: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    let clean = message.iter().enumerate().all(|(i, b)| match b {
        b'\r' => message.get(i + 1) == Some(&b'\n'),
        b'\n' => i > 0 && message[i - 1] == b'\r',
        _ => true,
    });
    if clean {
        return std::borrow::Cow::Borrowed(message);
    }
    let mut out = Vec::with_capacity(message.len() + 64);
    let mut i = 0;
    while i < message.len() {
        match message[i] {
            b'\r' if message.get(i + 1) == Some(&b'\n') => {
                out.extend_from_slice(b"\r\n");
                i += 1;
            }
            b'\r' | b'\n' => out.extend_from_slice(b"\r\n"),
            byte => out.push(byte),
        }
        i += 1;
    }
    std::borrow::Cow::Owned(out)
}

/// The `smtpReply` of a refusal (RFC 8621 §7): the relay's code and text
/// (lettre words it `permanent error (550): 5.1.1 …`), or, when the relay
/// gave no reply (no connection, TLS, a timeout), a synthetic one of the
/// form the RFC prescribes: code, enhanced code, explanation.
fn refusal_text(code: Option<String>, error: &str, permanent: bool) -> String {
    let text = error
        .split_once("): ")
        .map_or(error, |(_, text)| text)
        .trim();
    match code {
        Some(code) => one_line(&code, std::iter::once(text)),
        None if permanent => format!("550 5.0.0 {text}"),
        None => format!("451 4.4.1 {text}"),
    }
}

/// An SMTP reply as RFC 8621 §7 `smtpReply` wants it: the code, then the
/// lines joined by spaces.
fn one_line<'a>(code: &str, lines: impl Iterator<Item = &'a str>) -> String {
    let text: Vec<&str> = lines
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect();
    match (code.is_empty(), text.is_empty()) {
        (true, _) => text.join(" "),
        (false, true) => code.to_string(),
        (false, false) => format!("{code} {}", text.join(" ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relay_urls_name_the_transport_and_hide_the_password() {
        let relay = Relay::from_url("smtps://ann%40example.com:p%40ss@mail.example.com").unwrap();
        assert_eq!(
            relay.to_string(),
            "smtps://ann%40example.com@mail.example.com"
        );
        assert!(Relay::from_url("smtp://mail.example.com:2525").is_ok());
        assert!(Relay::from_url("smtp://127.0.0.1:2525").is_ok());
        assert!(Relay::from_url("smtp://[::1]").is_ok());
        assert!(matches!(
            Relay::from_url("http://mail.example.com"),
            Err(RelayUrlError::Scheme)
        ));
        assert!(matches!(
            Relay::from_url("mail.example.com"),
            Err(RelayUrlError::Malformed(_))
        ));
    }

    #[test]
    fn lines_leave_with_crlf() {
        assert_eq!(&*with_crlf(b"a\r\nb\r\n"), b"a\r\nb\r\n");
        assert_eq!(
            &*with_crlf(b"hello\n.\r\nMAIL FROM:<x>\rY\n"),
            b"hello\r\n.\r\nMAIL FROM:<x>\r\nY\r\n"
        );
    }

    #[test]
    fn refusals_read_as_smtp_replies() {
        assert_eq!(
            refusal_text(
                Some("550".into()),
                "permanent error (550): 5.1.1 No such user",
                true
            ),
            "550 5.1.1 No such user"
        );
        assert_eq!(
            refusal_text(
                None,
                "Connection error: Connection refused (os error 111)",
                false
            ),
            "451 4.4.1 Connection error: Connection refused (os error 111)"
        );
    }

    #[test]
    fn replies_are_one_line() {
        assert_eq!(
            one_line("250", ["2.0.0 Ok", " queued as 12 "].into_iter()),
            "250 2.0.0 Ok queued as 12"
        );
        assert_eq!(one_line("", ["no answer"].into_iter()), "no answer");
        assert_eq!(one_line("421", std::iter::empty()), "421");
    }
}

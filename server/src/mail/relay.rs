//! Sending to other servers through the operator's SMTP relay (issue 17):
//! `serve --smtp-relay smtp://user:pass@host:587` (STARTTLS, required
//! unless the host is loopback) or `smtps://user:pass@host:465` (TLS from
//! the first octet). One SMTP transaction per recipient, so each
//! recipient's `deliveryStatus` is the relay's own answer to it.
//!
//! The SMTP client is lettre's connection (`AsyncSmtpConnection`), driven
//! here step by step rather than through its transport, whose async form
//! bounds only the TCP connect (issue 43: a relay that went silent after
//! EHLO held a delivery for ever). Every step has a deadline
//! ([`RelayTimeouts`]): connecting, the greeting and EHLO, STARTTLS, AUTH,
//! each of MAIL, RCPT, DATA and RSET, and the message itself (its size at
//! [`RelayTimeouts::data_rate`] on top of a step's deadline). A step past
//! its deadline is a temporary refusal (`451 4.4.2`) and its connection is
//! dropped. Connections are reused: a transaction that ended with a reply
//! leaves its connection (after RSET) for the next one, up to
//! [`IDLE_CONNECTIONS`] kept idle for at most [`IDLE_FOR`], so N recipients
//! of one relay are N transactions on one connection, not N connections.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use lettre::address::Address;
use lettre::transport::smtp::authentication::{Credentials, DEFAULT_MECHANISMS};
use lettre::transport::smtp::client::{AsyncSmtpConnection, TlsParameters};
use lettre::transport::smtp::commands::{Data, Mail, Rcpt, Rset};
use lettre::transport::smtp::extension::{ClientId, Extension, MailBodyParameter, MailParameter};

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
    /// A 4xx reply, or no answer at all (no connection, a step past its
    /// deadline): worth trying again.
    Temporary(String),
}

/// The deadlines of the SMTP steps (`serve --smtp-timeout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelayTimeouts {
    /// Each step: the TCP connect (with the TLS handshake of `smtps`), the
    /// greeting, EHLO, STARTTLS with its handshake, AUTH, MAIL, RCPT, the
    /// DATA command, RSET, and the reply after the message's final dot.
    pub step: Duration,
    /// The slowest the message itself may be taken, octets per second: it
    /// has `final_reply` plus its size at this rate to arrive and be
    /// answered.
    pub data_rate: u64,
    /// The least wait for the reply after the message's final dot (RFC
    /// 5321 §4.5.3.2.6: 10 minutes), never less than `step`: a relay that
    /// takes the message and answers late has it, and giving up sooner
    /// sends it again on every retry (found by the issue 43 review).
    pub final_reply: Duration,
}

impl Default for RelayTimeouts {
    /// 60 s a step (lettre's own connect timeout), messages at 32 KiB/s
    /// (a 50 MiB message has 26 minutes): a relay slower than that is
    /// stalled, not slow.
    fn default() -> Self {
        Self {
            step: Duration::from_secs(60),
            data_rate: 32 << 10,
            final_reply: Duration::from_secs(600),
        }
    }
}

impl RelayTimeouts {
    /// The deadline of sending `octets` of message and reading the reply.
    pub fn data(&self, octets: usize) -> Duration {
        self.step.max(self.final_reply) + Duration::from_secs(octets as u64 / self.data_rate.max(1))
    }
}

/// Idle connections kept for reuse, per relay.
pub const IDLE_CONNECTIONS: usize = 4;

/// How long an idle connection is kept for reuse (relays close idle
/// clients after a few minutes; RFC 5321 §4.5.3.2.7 asks for 5).
pub const IDLE_FOR: Duration = Duration::from_secs(60);

/// How a connection to the relay is secured.
#[derive(Clone)]
enum Security {
    /// TLS from the first octet (`smtps`).
    Wrapper(TlsParameters),
    /// STARTTLS, required.
    StartTls(TlsParameters),
    /// None: only to a loopback host.
    Plain,
}

/// The configured relay: where it is, how to log in, the step deadlines,
/// the connections kept for reuse, and the URL without its password (for
/// logs).
pub struct Relay {
    host: String,
    port: u16,
    security: Security,
    credentials: Option<Credentials>,
    timeouts: RelayTimeouts,
    idle: Mutex<Vec<(AsyncSmtpConnection, Instant)>>,
    opened: AtomicU64,
    shown: String,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay").field("url", &self.shown).finish()
    }
}

/// A step that failed: the refusal, and whether its connection can go on.
struct Failed {
    refusal: Refusal,
    usable: bool,
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

    /// This relay with the step deadlines `timeouts`.
    pub fn with_timeouts(mut self, timeouts: RelayTimeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// The step deadlines in force.
    pub fn timeouts(&self) -> RelayTimeouts {
        self.timeouts
    }

    /// How many connections to the relay this value has opened.
    pub fn connections_opened(&self) -> u64 {
        self.opened.load(Ordering::Relaxed)
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
        let tls = || {
            TlsParameters::new(host.clone()).map_err(|error| RelayUrlError::Tls(error.to_string()))
        };
        let (security, port) = match parsed.scheme() {
            "smtps" => (Security::Wrapper(tls()?), parsed.port().unwrap_or(465)),
            "smtp" if loopback => (Security::Plain, parsed.port().unwrap_or(587)),
            "smtp" => (Security::StartTls(tls()?), parsed.port().unwrap_or(587)),
            _ => return Err(RelayUrlError::Scheme),
        };
        let decode = |text: &str| {
            percent_encoding::percent_decode_str(text)
                .decode_utf8_lossy()
                .into_owned()
        };
        let credentials = match (credentials, parsed.username()) {
            (Some((user, password)), _) => Some(Credentials::new(user, password)),
            (None, "") => None,
            (None, user) => Some(Credentials::new(
                decode(user),
                decode(parsed.password().unwrap_or_default()),
            )),
        };
        let mut shown = parsed.clone();
        let _ = shown.set_password(None);
        Ok(Self {
            host,
            port,
            security,
            credentials,
            timeouts: RelayTimeouts::default(),
            idle: Mutex::new(Vec::new()),
            opened: AtomicU64::new(0),
            shown: shown.to_string(),
        })
    }

    /// Runs one step under `deadline`: its refusal when the relay refused
    /// (the connection goes on) or failed or was silent (it does not).
    async fn step<T>(
        what: &str,
        deadline: Duration,
        step: impl Future<Output = Result<T, lettre::transport::smtp::Error>>,
    ) -> Result<T, Failed> {
        match tokio::time::timeout(deadline, step).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => {
                let permanent = error.is_permanent();
                let replied = error.status().is_some();
                let text = refusal_text(
                    error.status().map(|code| code.to_string()),
                    &error.to_string(),
                    permanent,
                );
                Err(Failed {
                    refusal: match permanent {
                        true => Refusal::Permanent(text),
                        false => Refusal::Temporary(text),
                    },
                    usable: replied,
                })
            }
            Err(_) => Err(Failed {
                refusal: Refusal::Temporary(format!(
                    "451 4.4.2 The relay did not answer {what} within {} s",
                    deadline.as_secs_f64()
                )),
                usable: false,
            }),
        }
    }

    /// A connection ready for a transaction: an idle one that answers RSET
    /// in time, else a new one (connected, greeted, EHLO, STARTTLS, AUTH).
    async fn connection(&self) -> Result<AsyncSmtpConnection, Failed> {
        let step = self.timeouts.step;
        loop {
            let idle = {
                let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
                idle.retain(|(_, since)| since.elapsed() < IDLE_FOR);
                idle.pop()
            };
            let Some((mut connection, _)) = idle else {
                break;
            };
            if Self::step("RSET", step, connection.command(Rset))
                .await
                .is_ok()
            {
                return Ok(connection);
            }
        }
        self.opened.fetch_add(1, Ordering::Relaxed);
        let hello = ClientId::default();
        let wrapper = match &self.security {
            Security::Wrapper(tls) => Some(tls.clone()),
            _ => None,
        };
        // Connect (and the smtps handshake), then the greeting, then EHLO:
        // lettre bounds the first itself; each has a step's time.
        let mut connection = Self::step(
            "the greeting and EHLO",
            step * 3,
            AsyncSmtpConnection::connect_tokio1(
                (self.host.as_str(), self.port),
                Some(step),
                &hello,
                wrapper,
                None,
            ),
        )
        .await?;
        if let Security::StartTls(tls) = &self.security {
            // STARTTLS, the handshake, EHLO again.
            Self::step(
                "STARTTLS",
                step * 3,
                connection.starttls(tls.clone(), &hello),
            )
            .await?;
        }
        if let Some(credentials) = &self.credentials {
            Self::step(
                "AUTH",
                step * 2,
                connection.auth(DEFAULT_MECHANISMS, credentials),
            )
            .await?;
        }
        Ok(connection)
    }

    /// Keeps `connection` for the next transaction, if there is room.
    fn keep(&self, connection: AsyncSmtpConnection) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < IDLE_CONNECTIONS {
            idle.push((connection, Instant::now()));
        }
    }

    /// Sends `message` (as it leaves: octets unchanged) from `mail_from` to
    /// `recipient`; the relay's reply, as one line. Returns within the
    /// step deadlines whatever the relay does.
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
        // Every line ends CRLF on the wire (RFC 5321 §2.3.8): a bare LF or
        // CR would let a relay that reads them as line ends see an end of
        // data lettre did not dot-stuff (SMTP smuggling).
        let message = with_crlf(message);
        // lettre ends DATA with CRLF "." CRLF whatever the message ends
        // with: the message's own final CRLF is that first CRLF, so the
        // relay receives the octets as they are.
        let message = message.strip_suffix(b"\r\n").unwrap_or(&message);
        let mut connection = self.connection().await.map_err(|failed| failed.refusal)?;
        let result = self.transaction(&mut connection, from, to, message).await;
        match result {
            Ok(reply) => {
                self.keep(connection);
                Ok(reply)
            }
            Err(failed) => {
                if failed.usable
                    && Self::step("RSET", self.timeouts.step, connection.command(Rset))
                        .await
                        .is_ok()
                {
                    self.keep(connection);
                }
                Err(failed.refusal)
            }
        }
    }

    /// MAIL, RCPT, DATA and the message on `connection`, each under its
    /// deadline (lettre's `send`, step by step).
    async fn transaction(
        &self,
        connection: &mut AsyncSmtpConnection,
        from: Option<Address>,
        to: Address,
        message: &[u8],
    ) -> Result<String, Failed> {
        let step = self.timeouts.step;
        let info = connection.server_info();
        let mut options = Vec::new();
        let ascii = |address: &Address| <Address as AsRef<str>>::as_ref(address).is_ascii();
        let non_ascii = from.as_ref().is_some_and(|from| !ascii(from)) || !ascii(&to);
        if non_ascii {
            if !info.supports_feature(Extension::SmtpUtfEight) {
                return Err(Failed {
                    refusal: Refusal::Permanent(
                        "553 5.6.7 The relay cannot take non-ASCII addresses (no SMTPUTF8)".into(),
                    ),
                    usable: true,
                });
            }
            options.push(MailParameter::SmtpUtfEight);
        }
        if !message.is_ascii() {
            if !info.supports_feature(Extension::EightBitMime) {
                return Err(Failed {
                    refusal: Refusal::Permanent(
                        "554 5.6.3 The relay cannot take 8-bit messages (no 8BITMIME)".into(),
                    ),
                    usable: true,
                });
            }
            options.push(MailParameter::Body(MailBodyParameter::EightBitMime));
        }
        Self::step("MAIL", step, connection.command(Mail::new(from, options))).await?;
        Self::step("RCPT", step, connection.command(Rcpt::new(to, Vec::new()))).await?;
        Self::step("DATA", step, connection.command(Data)).await?;
        let response = Self::step(
            "the message",
            self.timeouts.data(message.len()),
            connection.message(message),
        )
        .await?;
        Ok(one_line(&response.code().to_string(), response.message()))
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
    fn the_reply_to_a_message_is_waited_for_ten_minutes_at_least() {
        let short = RelayTimeouts {
            step: Duration::from_secs(3),
            ..RelayTimeouts::default()
        };
        assert_eq!(short.data(0), Duration::from_secs(600));
        assert_eq!(short.data(32 << 20), Duration::from_secs(600 + 1024));
        let long = RelayTimeouts {
            step: Duration::from_secs(900),
            ..RelayTimeouts::default()
        };
        assert_eq!(long.data(0), Duration::from_secs(900));
    }

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

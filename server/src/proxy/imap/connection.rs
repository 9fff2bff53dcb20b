//! One connection to the upstream IMAP server (RFC 3501) through
//! async-imap: connect (TLS, STARTTLS, or plain to loopback only), log in
//! with the user's credentials, and the few commands a sync needs — LIST
//! with RFC 6154 special-use attributes, LSUB, EXAMINE, UID FETCH of flags
//! and of whole messages (BODY.PEEK[], so reading never sets `\Seen`), and
//! IDLE (RFC 2177). Every command has a deadline: an upstream that stops
//! answering is [`UpstreamError::Unreachable`], never a hung task.

use std::collections::HashSet;
use std::fmt::Debug;
use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_imap::imap_proto::NameAttribute;
use futures::{TryStream, TryStreamExt};
use tokio::io::{AsyncRead, AsyncWrite};

use super::{Security, UpstreamUrl};
use crate::proxy::upstream::{Throttle, UpstreamError};

/// An async-imap error as the upstream's: the connection's are
/// [`UpstreamError::Unreachable`], the rest [`UpstreamError::Refused`].
impl From<async_imap::error::Error> for UpstreamError {
    fn from(error: async_imap::error::Error) -> Self {
        use async_imap::error::Error;
        match error {
            Error::Io(error) => Self::Unreachable(error.to_string()),
            Error::ConnectionLost => Self::Unreachable("the connection was lost".into()),
            other => Self::Refused(other.to_string()),
        }
    }
}

/// SASL PLAIN's one message (RFC 4616): `authzid NUL authcid NUL passwd`.
struct SaslPlain(String);

impl async_imap::Authenticator for SaslPlain {
    type Response = String;

    fn process(&mut self, _challenge: &[u8]) -> String {
        self.0.clone()
    }
}

/// How long connecting, TLS and login may take together.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);
/// How long one command may take (a FETCH of a batch of messages included).
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);

/// A byte stream a session runs over: TCP or TLS over TCP.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send + Debug {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + Debug> Io for T {}

type Session = async_imap::Session<Box<dyn Io>>;

/// A mailbox as LIST names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedMailbox {
    /// The full name on the wire (modified UTF-7, with delimiters).
    pub name: String,
    /// The hierarchy delimiter, when the server has a hierarchy.
    pub delimiter: Option<String>,
    /// The RFC 8621 role from RFC 6154 special use (`inbox` for INBOX).
    pub role: Option<&'static str>,
    /// Whether it can be selected (not `\Noselect` / `\NonExistent`).
    pub selectable: bool,
}

/// What EXAMINE tells of a mailbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Selected {
    pub uid_validity: u32,
    pub exists: u32,
    pub uid_next: Option<u32>,
    /// RFC 7162 HIGHESTMODSEQ, when the server has CONDSTORE.
    pub highest_modseq: Option<u64>,
}

impl Selected {
    fn of(mailbox: &async_imap::types::Mailbox) -> Self {
        Self {
            uid_validity: mailbox.uid_validity.unwrap_or(0),
            exists: mailbox.exists,
            uid_next: mailbox.uid_next,
            highest_modseq: mailbox.highest_modseq,
        }
    }
}

/// A message's UID and flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageFlags {
    pub uid: u32,
    pub flags: Vec<String>,
}

/// A whole message as fetched.
#[derive(Debug, Clone)]
pub struct FetchedMessage {
    pub uid: u32,
    pub flags: Vec<String>,
    /// INTERNALDATE in unix seconds.
    pub internal_date: Option<i64>,
    pub raw: Vec<u8>,
}

/// A logged-in connection.
pub struct Connection {
    session: Session,
    capabilities: HashSet<String>,
}

/// Runs `future` with a deadline: an elapsed one is `Unreachable`.
async fn deadline<T, E: Into<UpstreamError>>(
    limit: Duration,
    what: &str,
    future: impl Future<Output = Result<T, E>>,
) -> Result<T, UpstreamError> {
    match tokio::time::timeout(limit, future).await {
        Ok(result) => result.map_err(Into::into),
        Err(_) => Err(UpstreamError::Unreachable(format!(
            "{what}: no answer within {} s",
            limit.as_secs()
        ))),
    }
}

/// [`deadline`] of a command answered by a stream of responses, collected
/// whole.
async fn collected<T, S, E>(
    what: &str,
    command: impl Future<Output = Result<S, E>>,
) -> Result<Vec<T>, UpstreamError>
where
    S: TryStream<Ok = T, Error = E>,
    E: Into<UpstreamError>,
{
    deadline(COMMAND_TIMEOUT, what, async {
        command.await?.try_collect().await
    })
    .await
}

/// The TLS client settings: rustls with ring and the webpki roots.
fn tls() -> Arc<rustls::ClientConfig> {
    static CONFIG: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let roots =
                rustls::RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            let config = rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .expect("ring supports the default TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
            Arc::new(config)
        })
        .clone()
}

async fn wrap_tls(host: &str, stream: Box<dyn Io>) -> Result<Box<dyn Io>, UpstreamError> {
    let name = rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|error| UpstreamError::Unreachable(format!("{host}: {error}")))?;
    let stream = tokio_rustls::TlsConnector::from(tls())
        .connect(name, stream)
        .await
        .map_err(|error| UpstreamError::Unreachable(format!("TLS with {host}: {error}")))?;
    Ok(Box::new(stream))
}

/// Reads the greeting: `OK` (or `PREAUTH`) goes on, `BYE` is a refusal.
async fn greeting(client: &mut async_imap::Client<Box<dyn Io>>) -> Result<(), UpstreamError> {
    use async_imap::imap_proto::{Response, Status};
    let response = client
        .read_response()
        .await
        .map_err(|error| UpstreamError::Unreachable(error.to_string()))?
        .ok_or_else(|| UpstreamError::Unreachable("closed before its greeting".into()))?;
    match response.parsed() {
        Response::Data {
            status: Status::Bye,
            outcome,
            ..
        } => Err(UpstreamError::Refused(format!(
            "greeting BYE {}",
            outcome.information.as_deref().unwrap_or("")
        ))),
        _ => Ok(()),
    }
}

impl Connection {
    /// Connects to `url` and logs in as `user` (LOGIN). `LoginRefused` when
    /// the upstream says `NO` (or the credentials cannot be sent in a
    /// quoted string); `Unreachable` for a network, TLS or time failure.
    pub async fn login(
        url: &UpstreamUrl,
        user: &str,
        password: &str,
    ) -> Result<Self, UpstreamError> {
        Self::login_as(url, user, password, None).await
    }

    /// [`Connection::login`], or, with `acting_as`, authenticates as `user`
    /// on behalf of `acting_as`: AUTHENTICATE PLAIN with `acting_as` as the
    /// authorization identity (RFC 4616), which Dovecot's master users and
    /// Cyrus's admins both take (Dovecot's `user*master` LOGIN is its own).
    pub async fn login_as(
        url: &UpstreamUrl,
        user: &str,
        password: &str,
        acting_as: Option<&str>,
    ) -> Result<Self, UpstreamError> {
        let connecting = async {
            let tcp = tokio::net::TcpStream::connect((url.host.as_str(), url.port))
                .await
                .map_err(|error| UpstreamError::Unreachable(format!("{url}: {error}")))?;
            tcp.set_nodelay(true).ok();
            let tcp: Box<dyn Io> = Box::new(tcp);
            let client = match url.security {
                Security::Tls => {
                    let mut client = async_imap::Client::new(wrap_tls(&url.host, tcp).await?);
                    greeting(&mut client).await?;
                    client
                }
                Security::Plain => {
                    let mut client = async_imap::Client::new(tcp);
                    greeting(&mut client).await?;
                    client
                }
                Security::StartTls => {
                    let mut client = async_imap::Client::new(tcp);
                    greeting(&mut client).await?;
                    client
                        .run_command_and_check_ok("STARTTLS", None)
                        .await
                        .map_err(|error| {
                            UpstreamError::Refused(format!(
                                "STARTTLS (required off loopback): {error}"
                            ))
                        })?;
                    async_imap::Client::new(wrap_tls(&url.host, client.into_inner()).await?)
                }
            };
            let logged_in = match acting_as {
                None => client.login(user, password).await,
                Some(acting_as) => {
                    let plain = SaslPlain(format!("{acting_as}\0{user}\0{password}"));
                    client.authenticate("PLAIN", plain).await
                }
            };
            let mut session = match logged_in {
                Ok(session) => session,
                Err((async_imap::error::Error::No(text), _)) if unavailable(&text) => {
                    return Err(UpstreamError::Throttled {
                        why: Throttle::Unavailable,
                        retry_after: None,
                    });
                }
                Err((async_imap::error::Error::No(_), _))
                | Err((async_imap::error::Error::Validate(_), _)) => {
                    return Err(UpstreamError::LoginRefused);
                }
                Err((error, _)) => return Err(error.into()),
            };
            let capabilities: HashSet<String> = session
                .capabilities()
                .await?
                .iter()
                .map(|capability| match capability {
                    async_imap::types::Capability::Atom(atom) => atom.to_ascii_uppercase(),
                    async_imap::types::Capability::Imap4rev1 => "IMAP4REV1".to_string(),
                    async_imap::types::Capability::Auth(mechanism) => {
                        format!("AUTH={}", mechanism.to_ascii_uppercase())
                    }
                })
                .collect();
            // RFC 7162 §3.1: with CONDSTORE enabled, SELECT and EXAMINE tell
            // HIGHESTMODSEQ, so an unchanged mailbox need not be read.
            if capabilities.contains("CONDSTORE") {
                session.run_command_and_check_ok("ENABLE CONDSTORE").await?;
            }
            Ok::<_, UpstreamError>(Self {
                session,
                capabilities,
            })
        };
        deadline(CONNECT_TIMEOUT, "login", connecting).await
    }

    /// Whether the upstream offers `capability` (uppercase, e.g. `IDLE`).
    pub fn has(&self, capability: &str) -> bool {
        self.capabilities.contains(capability)
    }

    /// Every mailbox (LIST "" "*"), with its special use.
    pub async fn list(&mut self) -> Result<Vec<ListedMailbox>, UpstreamError> {
        let names: Vec<async_imap::types::Name> =
            collected("LIST", self.session.list(Some(""), Some("*"))).await?;
        Ok(names
            .iter()
            .map(|name| {
                let attributes = name.attributes();
                let selectable = !attributes.iter().any(|attribute| {
                    matches!(attribute, NameAttribute::NoSelect)
                        || matches!(attribute, NameAttribute::Extension(ext)
                            if ext.eq_ignore_ascii_case("\\NonExistent"))
                });
                let role = if name.name().eq_ignore_ascii_case("INBOX") {
                    Some("inbox")
                } else {
                    attributes.iter().find_map(role_of)
                };
                ListedMailbox {
                    name: unquoted(name.name()),
                    delimiter: name.delimiter().map(str::to_string),
                    role,
                    selectable,
                }
            })
            .collect())
    }

    /// The names of the subscribed mailboxes (LSUB "" "*").
    pub async fn subscribed(&mut self) -> Result<HashSet<String>, UpstreamError> {
        let names: Vec<async_imap::types::Name> =
            collected("LSUB", self.session.lsub(Some(""), Some("*"))).await?;
        Ok(names.iter().map(|name| unquoted(name.name())).collect())
    }

    /// Opens `name` read-only (EXAMINE: `\Recent` stays the other clients').
    pub async fn examine(&mut self, name: &str) -> Result<Selected, UpstreamError> {
        let mailbox = deadline(COMMAND_TIMEOUT, "EXAMINE", self.session.examine(name)).await?;
        Ok(Selected::of(&mailbox))
    }

    /// What STATUS tells of mailbox `name` (RFC 3501 §6.3.10: UIDVALIDITY,
    /// MESSAGES, UIDNEXT, and HIGHESTMODSEQ with CONDSTORE, RFC 7162
    /// §3.1.2.1) without opening it: how a folder is watched without NOTIFY.
    pub async fn status(&mut self, name: &str) -> Result<Selected, UpstreamError> {
        let items = if self.has("CONDSTORE") {
            "(UIDVALIDITY MESSAGES UIDNEXT HIGHESTMODSEQ)"
        } else {
            "(UIDVALIDITY MESSAGES UIDNEXT)"
        };
        let mailbox = deadline(COMMAND_TIMEOUT, "STATUS", self.session.status(name, items)).await?;
        Ok(Selected::of(&mailbox))
    }

    /// The UID and flags of every message of the open mailbox.
    pub async fn flags(&mut self, selected: &Selected) -> Result<Vec<MessageFlags>, UpstreamError> {
        self.fetch_flags(selected, "(UID FLAGS)").await
    }

    /// The UID and flags of the messages of the open mailbox whose
    /// mod-sequence passed `since` (RFC 7162 §3.1.4 CHANGEDSINCE): the new
    /// ones and those whose flags changed.
    pub async fn flags_changed_since(
        &mut self,
        selected: &Selected,
        since: u64,
    ) -> Result<Vec<MessageFlags>, UpstreamError> {
        let query = format!("(UID FLAGS) (CHANGEDSINCE {since})");
        self.fetch_flags(selected, &query).await
    }

    /// `UID FETCH 1:* {query}` as UIDs and flags; nothing for an empty
    /// mailbox (where `1:*` is an error to some servers).
    async fn fetch_flags(
        &mut self,
        selected: &Selected,
        query: &str,
    ) -> Result<Vec<MessageFlags>, UpstreamError> {
        if selected.exists == 0 {
            return Ok(Vec::new());
        }
        let fetches: Vec<async_imap::types::Fetch> =
            collected("UID FETCH FLAGS", self.session.uid_fetch("1:*", query)).await?;
        Ok(fetches
            .iter()
            .filter_map(|fetch| {
                Some(MessageFlags {
                    uid: fetch.uid?,
                    flags: fetch.flags().map(|flag| flag_text(&flag)).collect(),
                })
            })
            .collect())
    }

    /// The whole messages `uids` of the open mailbox, with flags and
    /// INTERNALDATE; a UID expunged meanwhile is simply absent.
    pub async fn fetch(&mut self, uids: &[u32]) -> Result<Vec<FetchedMessage>, UpstreamError> {
        if uids.is_empty() {
            return Ok(Vec::new());
        }
        let set = uid_set(uids);
        let fetches: Vec<async_imap::types::Fetch> = collected(
            "UID FETCH BODY",
            self.session
                .uid_fetch(&set, "(UID FLAGS INTERNALDATE BODY.PEEK[])"),
        )
        .await?;
        Ok(fetches
            .iter()
            .filter_map(|fetch| {
                Some(FetchedMessage {
                    uid: fetch.uid?,
                    flags: fetch.flags().map(|flag| flag_text(&flag)).collect(),
                    internal_date: fetch.internal_date().map(|date| date.timestamp()),
                    raw: fetch.body()?.to_vec(),
                })
            })
            .collect())
    }

    /// Opens `name` read-write (SELECT), for the writes below.
    pub async fn select(&mut self, name: &str) -> Result<Selected, UpstreamError> {
        let mailbox = deadline(COMMAND_TIMEOUT, "SELECT", self.session.select(name)).await?;
        Ok(Selected::of(&mailbox))
    }

    /// Adds (`add`) or removes `flags` on `uids` of the open mailbox
    /// (UID STORE ±FLAGS.SILENT).
    pub async fn store_flags(
        &mut self,
        uids: &[u32],
        add: bool,
        flags: &[String],
    ) -> Result<(), UpstreamError> {
        if uids.is_empty() || flags.is_empty() {
            return Ok(());
        }
        let query = format!(
            "{}FLAGS.SILENT ({})",
            if add { "+" } else { "-" },
            flags.join(" ")
        );
        let set = uid_set(uids);
        collected("UID STORE", self.session.uid_store(&set, &query)).await?;
        Ok(())
    }

    /// Copies `uids` of the open mailbox to `target` (UID COPY).
    pub async fn copy(&mut self, uids: &[u32], target: &str) -> Result<(), UpstreamError> {
        deadline(
            COMMAND_TIMEOUT,
            "UID COPY",
            self.session.uid_copy(uid_set(uids), target),
        )
        .await
    }

    /// Moves `uids` of the open mailbox to `target`: UID MOVE (RFC 6851)
    /// when offered, else UID COPY, `\Deleted` and UID EXPUNGE.
    pub async fn move_to(&mut self, uids: &[u32], target: &str) -> Result<(), UpstreamError> {
        if self.has("MOVE") {
            return deadline(
                COMMAND_TIMEOUT,
                "UID MOVE",
                self.session.uid_mv(uid_set(uids), target),
            )
            .await;
        }
        self.copy(uids, target).await?;
        self.expunge(uids).await
    }

    /// Removes `uids` from the open mailbox: `\Deleted`, then UID EXPUNGE
    /// (RFC 4315 UIDPLUS) of just those, so another client's `\Deleted`
    /// messages stay. Without UIDPLUS it is refused.
    pub async fn expunge(&mut self, uids: &[u32]) -> Result<(), UpstreamError> {
        if !self.has("UIDPLUS") {
            return Err(UpstreamError::Refused(
                "the upstream has no UIDPLUS: removing one message would expunge others".into(),
            ));
        }
        self.store_flags(uids, true, &["\\Deleted".to_string()])
            .await?;
        let set = uid_set(uids);
        collected("UID EXPUNGE", self.session.uid_expunge(&set)).await?;
        Ok(())
    }

    /// Appends a message to `mailbox` with `flags` and INTERNALDATE
    /// `received_at` (unix seconds): where the upstream put it, when its
    /// tagged `OK` carries RFC 4315 `[APPENDUID uidvalidity uid]` (else
    /// `None`). async-imap's own APPEND drops that response code, so the
    /// command is written here: the command line with a synchronizing
    /// literal, the octets after the continuation, then the responses up
    /// to the tagged one (untagged ones on this connection, which listens
    /// for nothing, are passed over). `NO` / `BAD` is
    /// [`UpstreamError::Refused`] with the upstream's words.
    pub async fn append(
        &mut self,
        mailbox: &str,
        flags: &[String],
        received_at: i64,
        raw: &[u8],
    ) -> Result<Option<AppendUid>, UpstreamError> {
        let date = chrono::DateTime::from_timestamp(received_at, 0)
            .unwrap_or_default()
            .format("\"%d-%b-%Y %H:%M:%S +0000\"")
            .to_string();
        let command = format!(
            "APPEND {} ({}) {date} {{{}}}",
            quoted(mailbox)?,
            flags.join(" "),
            raw.len()
        );
        let session = &mut self.session;
        deadline(COMMAND_TIMEOUT, "APPEND", async move {
            let tag = session.run_command(&command).await?;
            // The continuation, or the command's refusal.
            if let Some(refused) = read_until(session, &tag, true).await? {
                return Err(refused.into_refusal());
            }
            use tokio::io::AsyncWriteExt;
            let stream = session.get_mut();
            let written = async {
                stream.write_all(raw).await?;
                stream.write_all(b"\r\n").await?;
                stream.flush().await
            };
            written.await.map_err(lost)?;
            match read_until(session, &tag, false).await? {
                Some(Tagged::Ok(appended)) => Ok(appended),
                Some(refused) => Err(refused.into_refusal()),
                None => Err(UpstreamError::Unreachable(
                    "APPEND: no tagged answer".into(),
                )),
            }
        })
        .await
    }

    /// Leaves the open mailbox (UNSELECT, RFC 3691; else EXAMINE INBOX):
    /// before RENAME or DELETE, since a server may end a session whose
    /// selected mailbox goes away.
    pub async fn unselect(&mut self) -> Result<(), UpstreamError> {
        let left = if self.has("UNSELECT") {
            deadline(
                COMMAND_TIMEOUT,
                "UNSELECT",
                self.session.run_command_and_check_ok("UNSELECT"),
            )
            .await
        } else {
            self.examine("INBOX").await.map(|_| ())
        };
        match left {
            // None was open (`BAD`): nothing to leave.
            Err(UpstreamError::Refused(_)) => Ok(()),
            left => left,
        }
    }

    /// CREATE.
    pub async fn create(&mut self, name: &str) -> Result<(), UpstreamError> {
        deadline(COMMAND_TIMEOUT, "CREATE", self.session.create(name)).await
    }

    /// RENAME.
    pub async fn rename(&mut self, from: &str, to: &str) -> Result<(), UpstreamError> {
        deadline(COMMAND_TIMEOUT, "RENAME", self.session.rename(from, to)).await
    }

    /// DELETE.
    pub async fn delete(&mut self, name: &str) -> Result<(), UpstreamError> {
        deadline(COMMAND_TIMEOUT, "DELETE", self.session.delete(name)).await
    }

    /// SUBSCRIBE or UNSUBSCRIBE.
    pub async fn subscribe(&mut self, name: &str, subscribed: bool) -> Result<(), UpstreamError> {
        if subscribed {
            deadline(COMMAND_TIMEOUT, "SUBSCRIBE", self.session.subscribe(name)).await
        } else {
            deadline(
                COMMAND_TIMEOUT,
                "UNSUBSCRIBE",
                self.session.unsubscribe(name),
            )
            .await
        }
    }

    /// Asks to be told of changes to the messages of every mailbox (RFC
    /// 5465 NOTIFY), when the upstream offers it; `false` when it does not.
    /// Mailbox events (MailboxName, SubscriptionChange) are not asked for:
    /// their LIST responses with extended data do not parse, and a renamed
    /// or new mailbox is seen at the next sync anyway.
    pub async fn notify_all(&mut self) -> Result<bool, UpstreamError> {
        if !self.has("NOTIFY") {
            return Ok(false);
        }
        deadline(
            COMMAND_TIMEOUT,
            "NOTIFY",
            self.session.run_command_and_check_ok(
                "NOTIFY SET (selected (MessageNew (UID) MessageExpunge FlagChange)) \
                 (personal (MessageNew MessageExpunge FlagChange))",
            ),
        )
        .await?;
        Ok(true)
    }

    /// NOOP: whether the session is still there.
    pub async fn noop(&mut self) -> Result<(), UpstreamError> {
        deadline(Duration::from_secs(10), "NOOP", self.session.noop()).await
    }

    /// Whether the upstream told of a change since the last call (an
    /// unsolicited EXISTS, EXPUNGE, FETCH or NOTIFY STATUS arrived among
    /// the answers to other commands); drains what it told.
    pub fn changes_pending(&mut self) -> bool {
        let told = &self.session.unsolicited_responses;
        pending_changes(|| told.try_recv().ok())
    }

    /// Waits in IDLE (RFC 2177) on the open mailbox for at most `limit`:
    /// `true` when the upstream told of a change, `false` at the limit.
    /// Without IDLE it sleeps `limit` and answers `true` (poll).
    pub async fn wait(self, limit: Duration) -> Result<(Self, bool), UpstreamError> {
        if !self.has("IDLE") {
            tokio::time::sleep(limit).await;
            return Ok((self, true));
        }
        let Self {
            session,
            capabilities,
        } = self;
        let told = session.unsolicited_responses.clone();
        let mut idle = session.idle();
        deadline(COMMAND_TIMEOUT, "IDLE", idle.init()).await?;
        // What came before the server's "+ idling" is not waited for again.
        let woke = pending_changes(|| told.try_recv().ok()) || {
            let (waiting, _stop) = idle.wait_with_timeout(limit);
            match waiting.await? {
                async_imap::extensions::idle::IdleResponse::NewData(_) => true,
                async_imap::extensions::idle::IdleResponse::Timeout
                | async_imap::extensions::idle::IdleResponse::ManualInterrupt => false,
            }
        };
        let session = deadline(COMMAND_TIMEOUT, "DONE", idle.done()).await?;
        Ok((
            Self {
                session,
                capabilities,
            },
            woke,
        ))
    }

    /// Ends the session politely (LOGOUT), ignoring a failure.
    pub async fn logout(mut self) {
        let _ = tokio::time::timeout(Duration::from_secs(5), self.session.logout()).await;
    }
}

/// Where an APPEND put a message (RFC 4315 §3 APPENDUID): the
/// mailbox's UIDVALIDITY and the message's UID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendUid {
    pub uid_validity: u32,
    pub uid: u32,
}

/// The tagged answer to a command written by hand.
enum Tagged {
    /// `OK`, with the APPENDUID it carried.
    Ok(Option<AppendUid>),
    /// `NO` or `BAD`: the upstream's words.
    Refused(String),
}

impl Tagged {
    fn into_refusal(self) -> UpstreamError {
        match self {
            Tagged::Ok(_) => UpstreamError::Refused("the upstream ended APPEND early".into()),
            Tagged::Refused(text) => UpstreamError::Refused(text),
        }
    }

    /// The tagged answer of a response, when it is the one to `tag`.
    fn of(response: &async_imap::imap_proto::Response<'_>, tag: &RequestId) -> Option<Self> {
        use async_imap::imap_proto::{Response, ResponseCode, Status};
        let Response::Done {
            tag: done,
            status,
            outcome,
        } = response
        else {
            return None;
        };
        if done != tag {
            return None;
        }
        Some(match status {
            Status::Ok => Tagged::Ok(match &outcome.code {
                Some(ResponseCode::AppendUid(uid_validity, uids)) => {
                    single_uid(uids).map(|uid| AppendUid {
                        uid_validity: *uid_validity,
                        uid,
                    })
                }
                _ => None,
            }),
            other => Tagged::Refused(format!(
                "{other:?} {}",
                outcome.information.as_deref().unwrap_or("")
            )),
        })
    }
}

/// The one UID of an APPENDUID's set (one message appended).
fn single_uid(uids: &[async_imap::imap_proto::rfc4315::UidSetMember]) -> Option<u32> {
    use async_imap::imap_proto::rfc4315::UidSetMember;
    match uids {
        [UidSetMember::Uid(uid)] => Some(*uid),
        [UidSetMember::UidRange(range)] if range.start() == range.end() => Some(*range.start()),
        _ => None,
    }
}

type RequestId = async_imap::imap_proto::RequestId;

/// A failed read or write of the connection: [`UpstreamError::Unreachable`].
fn lost(error: std::io::Error) -> UpstreamError {
    UpstreamError::Unreachable(error.to_string())
}

/// Reads responses until the tagged one to `tag` (its answer), or, when
/// `continuation`, until a continuation request (`None`); other responses
/// are passed over.
async fn read_until(
    session: &mut Session,
    tag: &RequestId,
    continuation: bool,
) -> Result<Option<Tagged>, UpstreamError> {
    use async_imap::imap_proto::Response;
    loop {
        let Some(response) = session.read_response().await.map_err(lost)? else {
            return Err(UpstreamError::Unreachable("the connection was lost".into()));
        };
        if continuation && matches!(response.parsed(), Response::Continue(_)) {
            return Ok(None);
        }
        if let Some(tagged) = Tagged::of(response.parsed(), tag) {
            return Ok(Some(tagged));
        }
    }
}

/// Whether a `NO` to LOGIN carries RFC 5530 §3's `[UNAVAILABLE]`: the
/// server cannot check the credentials now (a subsystem is down), which is
/// not a wrong password (Dovecot: "Temporary authentication failure").
fn unavailable(text: &str) -> bool {
    text.to_ascii_uppercase().contains("[UNAVAILABLE]")
}

/// `name` as an IMAP quoted string (RFC 3501 §4.3: `\` and `"` escaped);
/// a name with CR or LF cannot be one (refused).
fn quoted(name: &str) -> Result<String, UpstreamError> {
    if name.contains(['\r', '\n']) {
        return Err(UpstreamError::Refused(format!(
            "the mailbox name {name:?} cannot be sent in a quoted string"
        )));
    }
    Ok(format!(
        "\"{}\"",
        name.replace('\\', "\\\\").replace('"', "\\\"")
    ))
}

/// Whether the unsolicited responses waiting tell of a change (a message
/// came, went or changed flags; not `\Recent` counts or `* OK [...]`
/// status lines); drains them.
fn pending_changes(
    mut told: impl FnMut() -> Option<async_imap::types::UnsolicitedResponse>,
) -> bool {
    use async_imap::imap_proto::Response;
    use async_imap::types::UnsolicitedResponse;
    let mut pending = false;
    while let Some(response) = told() {
        pending |= match response {
            UnsolicitedResponse::Status { .. }
            | UnsolicitedResponse::Exists(_)
            | UnsolicitedResponse::Expunge(_) => true,
            UnsolicitedResponse::Recent(_) => false,
            UnsolicitedResponse::Other(data) => {
                matches!(
                    data.parsed(),
                    Response::Fetch(..) | Response::Vanished { .. }
                )
            }
        };
    }
    pending
}

/// A mailbox name as LIST and LSUB give it, with the quoted-string
/// escapes (`\"`, `\\`, RFC 3501 §9) undone: the name commands take
/// (async-imap quotes it again when sending).
fn unquoted(listed: &str) -> String {
    let mut name = String::with_capacity(listed.len());
    let mut chars = listed.chars();
    while let Some(c) = chars.next() {
        match (c, chars.clone().next()) {
            ('\\', Some(next @ ('"' | '\\'))) => {
                name.push(next);
                chars.next();
            }
            _ => name.push(c),
        }
    }
    name
}

/// The RFC 8621 role of an RFC 6154 special-use attribute.
fn role_of(attribute: &NameAttribute<'_>) -> Option<&'static str> {
    Some(match attribute {
        NameAttribute::All => "all",
        NameAttribute::Archive => "archive",
        NameAttribute::Drafts => "drafts",
        NameAttribute::Flagged => "flagged",
        NameAttribute::Junk => "junk",
        NameAttribute::Sent => "sent",
        NameAttribute::Trash => "trash",
        _ => return None,
    })
}

/// A flag as IMAP writes it (`\Seen`, `$Forwarded`).
fn flag_text(flag: &async_imap::types::Flag<'_>) -> String {
    use async_imap::types::Flag;
    match flag {
        Flag::Seen => "\\Seen".into(),
        Flag::Answered => "\\Answered".into(),
        Flag::Flagged => "\\Flagged".into(),
        Flag::Deleted => "\\Deleted".into(),
        Flag::Draft => "\\Draft".into(),
        Flag::Recent => "\\Recent".into(),
        Flag::MayCreate => "\\*".into(),
        Flag::Custom(name) => name.to_string(),
    }
}

/// A UID set in IMAP's compact form: ascending, runs as `a:b`.
pub fn uid_set(uids: &[u32]) -> String {
    let mut sorted = uids.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}:{end}")
        });
        i += 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_login_refused_as_unavailable_is_not_a_wrong_password() {
        // As async-imap words a `NO` (RFC 5530 §3's code is not one it parses).
        let dovecot =
            r#"code: None, info: Some("[UNAVAILABLE] Temporary authentication failure.")"#;
        assert!(unavailable(dovecot));
        assert!(!unavailable(
            r#"code: None, info: Some("[AUTHENTICATIONFAILED] Authentication failed.")"#
        ));
        assert!(!unavailable("the mailbox is unavailable"));
    }

    #[test]
    fn listed_names_lose_their_quoting() {
        assert_eq!(unquoted(r#"\"quoted\""#), r#""quoted""#);
        assert_eq!(unquoted(r"back\\slash"), r"back\slash");
        assert_eq!(unquoted("plain &AOk-"), "plain &AOk-");
    }

    #[test]
    fn uid_sets_are_compact() {
        assert_eq!(uid_set(&[5, 1, 2, 3, 9, 10, 7]), "1:3,5,7,9:10");
        assert_eq!(uid_set(&[4]), "4");
        assert_eq!(uid_set(&[2, 2, 1]), "1:2");
    }
}

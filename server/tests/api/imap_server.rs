//! The IMAP servers the proxy's checks run in front of (issue 45): Dovecot
//! 2.3 (`tests/common/dovecot.rs`) and Cyrus IMAP 3.6
//! (`tests/common/cyrus.rs`), behind one handle, [`ImapServer`]: start with
//! users, the URL for `serve --upstream`, Python's imaplib as "another
//! client", an outage (stop, start again), a changed password, a master
//! login. What the two servers do differently, and a check must know, is
//! a method here, never a branch hidden in a check.

use std::path::PathBuf;

use fastview::proxy::imap::{MasterLogin, UpstreamUrl};

use crate::support::PASSWORD;
use crate::support::cyrus::{CYRUS_ADMIN, CYRUS_ADMIN_PASSWORD, Cyrus};
use crate::support::dovecot::Dovecot;
use crate::support::imaplib::{self, quoted};

/// One test per server of a check `async fn check_…(kind: Kind)`, named
/// `…_in_front_of_dovecot` and `…_in_front_of_cyrus`, so both run in CI.
macro_rules! in_front_of_each {
    ($check:ident: $dovecot:ident, $cyrus:ident) => {
        #[tokio::test]
        async fn $dovecot() {
            $check($crate::imap_server::Kind::Dovecot).await;
        }

        #[tokio::test]
        async fn $cyrus() {
            $check($crate::imap_server::Kind::Cyrus).await;
        }
    };
}

/// Which server a check runs in front of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dovecot,
    Cyrus,
}

/// A running IMAP server of either kind, stopped when dropped.
pub enum ImapServer {
    Dovecot(Dovecot),
    Cyrus(Cyrus),
}

/// The master login the Dovecot of [`ImapServer::start_with_master`] has.
const DOVECOT_MASTER: (&str, &str) = ("fastview", "master-secret");

impl ImapServer {
    /// Starts a server of `kind` with one account per address, each with
    /// [`PASSWORD`], its INBOX and Drafts, Sent, Trash and Archive (special
    /// use) made; `None` when that server is not at hand (the test is
    /// skipped, unless `FASTVIEW_TEST_REQUIRE` names it).
    pub fn start(kind: Kind, users: &[&str]) -> Option<Self> {
        Self::start_inner(kind, users, false)
    }

    /// [`ImapServer::start`] with a login that may act as any user, and
    /// that login: Dovecot's master user, Cyrus's administrator (`admins:`),
    /// each taking the user as SASL authorization identity (RFC 4616).
    pub fn start_with_master(kind: Kind, users: &[&str]) -> Option<(Self, MasterLogin)> {
        let server = Self::start_inner(kind, users, true)?;
        let (user, password) = match kind {
            Kind::Dovecot => DOVECOT_MASTER,
            Kind::Cyrus => (CYRUS_ADMIN, CYRUS_ADMIN_PASSWORD),
        };
        let master = MasterLogin {
            user: user.into(),
            password: password.into(),
        };
        Some((server, master))
    }

    fn start_inner(kind: Kind, users: &[&str], master: bool) -> Option<Self> {
        let users: Vec<(&str, &str)> = users.iter().map(|user| (*user, PASSWORD)).collect();
        match kind {
            Kind::Dovecot => {
                Dovecot::start(&users, master.then_some(DOVECOT_MASTER)).map(Self::Dovecot)
            }
            // Cyrus always has its administrator.
            Kind::Cyrus => Cyrus::start(&users).map(Self::Cyrus),
        }
    }

    fn port(&self) -> u16 {
        match self {
            Self::Dovecot(dovecot) => dovecot.port(),
            Self::Cyrus(cyrus) => cyrus.imap_port(),
        }
    }

    fn log(&self) -> String {
        match self {
            Self::Dovecot(dovecot) => dovecot.log(),
            Self::Cyrus(cyrus) => cyrus.log(),
        }
    }

    /// `imap://127.0.0.1:port`, for `serve --upstream`.
    pub fn url(&self) -> UpstreamUrl {
        UpstreamUrl::parse(&format!("imap://127.0.0.1:{}", self.port())).unwrap()
    }

    /// How the proxy learns of another client's changes in front of this
    /// server, as `account list` says: Dovecot has NOTIFY (RFC 5465) and
    /// tells of every folder on one connection; Cyrus 3.6 has none, so the
    /// proxy IDLEs on INBOX and asks the other folders their STATUS.
    pub fn watch(&self) -> &'static str {
        match self {
            Self::Dovecot(_) => "notify",
            Self::Cyrus(_) => "idle+status",
        }
    }

    /// Whether the server stores other octets than those APPENDed when a
    /// header holds 8-bit octets: Cyrus does (`munge8bit`, its default:
    /// each becomes `X`); Dovecot keeps them.
    pub fn rewrites_8bit_headers(&self) -> bool {
        match self {
            Self::Dovecot(_) => false,
            Self::Cyrus(_) => true,
        }
    }

    /// A folder name (for Mailbox/set) the server refuses to CREATE:
    /// Dovecot's Maildir takes no name starting with `~`, which Cyrus
    /// takes; Cyrus's name policy takes no `%`.
    pub fn refused_name(&self) -> &'static str {
        match self {
            Self::Dovecot(_) => "~x",
            Self::Cyrus(_) => "a%b",
        }
    }

    /// A folder name that LIST gives quoted (RFC 3501 §4.3): Dovecot takes
    /// quotes and a backslash, which Cyrus's name policy refuses; Cyrus
    /// takes `*` and a space.
    pub fn quoted_name(&self) -> &'static str {
        match self {
            Self::Dovecot(_) => "\"quoted\" back\\slash",
            Self::Cyrus(_) => "a*b c",
        }
    }

    /// Stops the server (an outage) and waits until it no longer listens.
    pub fn stop(&self) {
        match self {
            Self::Dovecot(dovecot) => dovecot.stop(),
            Self::Cyrus(cyrus) => cyrus.stop(),
        }
    }

    /// Starts it again after [`ImapServer::stop`], with the same mail.
    pub fn start_again(&self) {
        match self {
            Self::Dovecot(dovecot) => dovecot.start_again(),
            Self::Cyrus(cyrus) => cyrus.start_again(),
        }
    }

    /// Sets the passwords of the users named (every user the server has,
    /// for Dovecot, whose passwd-file this replaces).
    pub fn set_passwords(&self, users: &[(&str, &str)]) {
        match self {
            Self::Dovecot(dovecot) => {
                // Dovecot notices a changed passwd-file by its mtime, in
                // seconds.
                std::thread::sleep(std::time::Duration::from_millis(1100));
                dovecot.write_passwords(users);
            }
            Self::Cyrus(cyrus) => {
                for (user, password) in users {
                    cyrus.set_password(user, password);
                }
            }
        }
    }

    /// The folder holding the mail of `user`'s mailbox `name` (an IMAP
    /// name), for a test that makes it unreadable.
    pub fn mailbox_folder(&self, user: &str, name: &str) -> PathBuf {
        match self {
            Self::Dovecot(dovecot) => dovecot.dir().join(format!("mail/{user}/.{name}")),
            // Cyrus 3.6 keeps a mailbox under `uuid/a/b/` and its MAILBOXID
            // (RFC 8474), `ab…`.
            Self::Cyrus(cyrus) => {
                let status = self.client(
                    user,
                    &format!(
                        "print(m.status({:?}, '(MAILBOXID)')[1][0].decode())",
                        quoted(name)
                    ),
                );
                let id = status
                    .split("MAILBOXID (")
                    .nth(1)
                    .and_then(|rest| rest.split(')').next())
                    .unwrap_or_else(|| panic!("no MAILBOXID in {status}"));
                cyrus
                    .dir()
                    .join(format!("spool/uuid/{}/{}/{id}", &id[..1], &id[1..2]))
            }
        }
    }

    /// Runs Python with `m`, an imaplib connection logged in as `user`;
    /// returns what it prints (panics, with the server's log, when it fails).
    pub fn client(&self, user: &str, code: &str) -> String {
        imaplib::run(self.port(), (user, PASSWORD), code, &|| self.log())
    }

    /// CREATEs `name` (an IMAP name: modified UTF-7, `/` between levels).
    pub fn create(&self, user: &str, name: &str) {
        self.client(
            user,
            &format!("r = m.create({:?})\nassert r[0] == 'OK', r", quoted(name)),
        );
    }

    /// APPENDs messages to `mailbox` with flags and INTERNALDATE
    /// `base_time + index`.
    pub fn append(
        &self,
        user: &str,
        mailbox: &str,
        messages: &[Vec<u8>],
        flags: &str,
        base_time: i64,
    ) {
        let what = (messages, flags);
        let log = || self.log();
        imaplib::append(
            self.port(),
            (user, PASSWORD),
            mailbox,
            what,
            base_time,
            &log,
        );
    }

    /// What imaplib sees of a mailbox: `UID FLAGS` lines, one per message.
    pub fn flags(&self, user: &str, mailbox: &str) -> Vec<String> {
        let out = self.client(
            user,
            &format!(
                "typ, n = m.select({:?})\nassert typ == 'OK', n\n\
                 if int(n[0]) > 0:\n    \
                 typ, data = m.uid('FETCH', '1:*', '(UID FLAGS)')\n    \
                 for line in data:\n        print(line.decode())",
                quoted(mailbox)
            ),
        );
        out.lines().map(str::to_string).collect()
    }

    /// The octets of every message of `mailbox` as the server holds them,
    /// by UID.
    pub fn messages(&self, user: &str, mailbox: &str) -> Vec<Vec<u8>> {
        let out = self.client(
            user,
            &format!(
                "m.select({:?})\ntyp, data = m.uid('FETCH', '1:*', '(BODY.PEEK[])')\n\
                 for item in data:\n    if isinstance(item, tuple):\n        print(item[1].hex())",
                quoted(mailbox)
            ),
        );
        out.lines().map(unhex).collect()
    }

    /// The names LIST gives (IMAP names), sorted.
    pub fn mailbox_names(&self, user: &str) -> Vec<String> {
        let out = self.client(
            user,
            "typ, data = m.list()\nfor line in data:\n    print(line.decode().split(' \"/\" ', 1)[1].strip('\"'))",
        );
        let mut names: Vec<String> = out.lines().map(str::to_string).collect();
        names.sort();
        names
    }
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

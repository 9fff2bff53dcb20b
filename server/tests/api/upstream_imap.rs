//! Fastview in front of a real IMAP server (issue 18): Dovecot, started
//! here on a loopback port from a config in a temporary folder (Maildir,
//! passwd-file users), and Python's imaplib as "another IMAP client".
//! Messages appended to Dovecot are read through Fastview with the same
//! JSON, at every read level, as a standalone Fastview that imported the
//! same bytes with the same receivedAt; what the other client does (flags,
//! MOVE, EXPUNGE, APPEND, a UIDVALIDITY reset) reaches JMAP while Fastview
//! listens (IDLE).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use fastview::app::ServeOptions;
use fastview::proxy::imap::{MasterLogin, UpstreamOptions, UpstreamUrl};
use fastview::proxy::{Proxy, ProxyOptions};
use serde_json::{Value, json};

use crate::support::{
    PASSWORD, TestAccount, TestApp, corpus, corpus_sample, crlf, proxy_login, require, run_ok,
    spawn_app, spawn_in_front_of,
};

/// A throwaway Dovecot, stopped when dropped.
struct Dovecot {
    dir: tempfile::TempDir,
    port: u16,
}

impl Dovecot {
    fn config(&self) -> PathBuf {
        self.dir.path().join("dovecot.conf")
    }

    /// Starts Dovecot with one user per address (password [`PASSWORD`]), or
    /// `None` (after [`require`]) when it is not installed.
    fn start(users: &[&str]) -> Option<Self> {
        Self::start_with_master(users, None)
    }

    /// [`Dovecot::start`] with a master login (user, password): any user
    /// logs in as `user*master` with the master's password.
    fn start_with_master(users: &[&str], master: Option<(&str, &str)>) -> Option<Self> {
        if Command::new("dovecot").arg("--version").output().is_err() {
            require("imap", "no dovecot (apt-get install dovecot-imapd)");
            return None;
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path();
        // Dovecot's mail processes run as the dovecot user.
        set_mode(root, 0o755);
        std::fs::create_dir(root.join("mail")).unwrap();
        set_mode(&root.join("mail"), 0o777);
        let passwd: String = users
            .iter()
            .map(|user| format!("{user}:{{PLAIN}}{PASSWORD}::::::\n"))
            .collect();
        std::fs::write(root.join("passwd"), passwd).unwrap();
        let master_passdb = match master {
            Some((user, password)) => {
                std::fs::write(
                    root.join("masters"),
                    format!("{user}:{{PLAIN}}{password}::::::\n"),
                )
                .unwrap();
                format!(
                    "auth_master_user_separator = *\npassdb {{\n  driver = passwd-file\n  \
                     master = yes\n  args = scheme=PLAIN username_format=%u {}/masters\n}}\n",
                    root.display()
                )
            }
            None => String::new(),
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let root_text = root.display();
        let config = format!(
            r#"protocols = imap
listen = 127.0.0.1
base_dir = {root_text}/run
state_dir = {root_text}/state
log_path = {root_text}/dovecot.log
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
default_login_user = dovenull
default_internal_user = dovecot
mail_uid = dovecot
mail_gid = dovecot
first_valid_uid = 1
mail_location = maildir:{root_text}/mail/%u
protocol imap {{
  mail_max_userip_connections = 100
}}
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {root_text}/passwd
}}
userdb {{
  driver = static
  args = uid=dovecot gid=dovecot home={root_text}/mail/%u
}}
service imap-login {{
  chroot =
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service anvil {{
  chroot =
}}
{master_passdb}
namespace inbox {{
  inbox = yes
  separator = /
  mailbox Drafts {{
    special_use = \Drafts
    auto = subscribe
  }}
  mailbox Sent {{
    special_use = \Sent
    auto = subscribe
  }}
  mailbox Trash {{
    special_use = \Trash
    auto = subscribe
  }}
  mailbox Archive {{
    special_use = \Archive
    auto = subscribe
  }}
}}
"#
        );
        let dovecot = Self { dir, port };
        std::fs::write(dovecot.config(), config).unwrap();
        dovecot.run();
        Some(dovecot)
    }

    /// Starts the Dovecot of this config and waits until it listens.
    fn run(&self) {
        let status = Command::new("dovecot")
            .arg("-c")
            .arg(self.config())
            .status()
            .expect("run dovecot");
        assert!(status.success(), "dovecot did not start: {}", self.log());
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "dovecot is not listening: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops Dovecot (an outage) and waits until it no longer listens;
    /// [`Dovecot::run`] starts it again with the same mail.
    fn stop(&self) {
        let _ = Command::new("doveadm")
            .arg("-c")
            .arg(self.config())
            .arg("stop")
            .output();
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
            assert!(Instant::now() < deadline, "dovecot still listens");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("dovecot.log")).unwrap_or_default()
    }

    fn url(&self) -> UpstreamUrl {
        UpstreamUrl::parse(&format!("imap://127.0.0.1:{}", self.port)).unwrap()
    }

    /// Runs Python with `m`, an imaplib connection logged in as `user`;
    /// returns what it prints.
    fn client(&self, user: &str, code: &str) -> String {
        let script = format!(
            "import imaplib, sys\nm = imaplib.IMAP4('127.0.0.1', {})\nm.login({user:?}, {PASSWORD:?})\n{code}\nm.logout()\n",
            self.port
        );
        let output = Command::new("python3")
            .arg("-c")
            .arg(script)
            .output()
            .expect("python3");
        assert!(
            output.status.success(),
            "imaplib: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    /// APPENDs messages to `mailbox` with flags and INTERNALDATE
    /// `base_time + index`.
    fn append(&self, user: &str, mailbox: &str, messages: &[Vec<u8>], flags: &str, base_time: i64) {
        let folder = tempfile::tempdir().unwrap();
        for (index, raw) in messages.iter().enumerate() {
            std::fs::write(folder.path().join(format!("{index:05}")), raw).unwrap();
        }
        self.client(
            user,
            &format!(
                "import os\nfolder = {:?}\nfor i, name in enumerate(sorted(os.listdir(folder))):\n    \
                 data = open(os.path.join(folder, name), 'rb').read()\n    \
                 r = m.append({mailbox:?}, {flags:?} or None, imaplib.Time2Internaldate({base_time} + i), data)\n    \
                 assert r[0] == 'OK', r",
                folder.path().display().to_string()
            ),
        );
    }
}

impl Drop for Dovecot {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("dovecot's log:\n{}", self.log());
        }
        let _ = Command::new("doveadm")
            .arg("-c")
            .arg(self.config())
            .arg("stop")
            .output();
        let pid =
            std::fs::read_to_string(self.dir.path().join("run/master.pid")).unwrap_or_default();
        if let Ok(pid) = pid.trim().parse::<i32>() {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
    }
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A Fastview in front of `dovecot`, listening with a long poll (so what
/// arrives within seconds came through IDLE).
async fn spawn_proxy(dovecot: &Dovecot) -> TestApp {
    spawn_proxy_options(dovecot, |_| {}).await
}

/// [`spawn_proxy`] with its upstream options changed by `change` (a
/// master login, a bound of the message cache, a submission server).
async fn spawn_proxy_options(
    dovecot: &Dovecot,
    change: impl FnOnce(&mut UpstreamOptions),
) -> TestApp {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("fastview=debug"))
        .with_test_writer()
        .try_init();
    let mut upstream = UpstreamOptions {
        url: dovecot.url(),
        poll: Duration::from_secs(300),
        poll_active: Duration::from_secs(1),
        idle: Duration::from_secs(1800),
        cache_bytes: 0,
        smtp: None,
        master: None,
        outage_grace: Duration::from_secs(4 * 3600),
        syncs_at_once: 4,
    };
    change(&mut upstream);
    let proxy =
        spawn_in_front_of(ServeOptions::default(), Some(ProxyOptions::Imap(upstream))).await;
    // What `serve --upstream` records in the data dir.
    proxy
        .app
        .store
        .set_upstream_source(&dovecot.url().to_string())
        .await
        .unwrap();
    proxy
}

/// The status of `GET /jmap/session` as `user` with `password` (a fresh
/// credential check).
async fn session_status(proxy: &TestApp, user: &str, password: &str) -> u16 {
    proxy
        .get_as(format!("{}/jmap/session", proxy.base), user, password)
        .await
        .status()
        .as_u16()
}

/// Waits (at most `limit`) until `check` holds of a fresh `Email/query`
/// + `Email/get` of every email; returns that list.
async fn until(
    proxy: &TestApp,
    user: &TestAccount,
    limit: Duration,
    what: &str,
    check: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let responses = proxy
            .call(
                user,
                json!([
                    ["Email/query", {"accountId": user.account_id,
                        "sort": [{"property": "receivedAt", "isAscending": true}]}, "q"],
                    ["Email/get", {"accountId": user.account_id,
                        "#ids": {"resultOf": "0", "name": "Email/query", "path": "/ids"},
                        "properties": ["id", "blobId", "mailboxIds", "keywords", "receivedAt"]}, "g"]
                ]),
            )
            .await;
        let list = responses[1][1]["list"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if check(&list) {
            return list;
        }
        assert!(
            started.elapsed() < limit,
            "{what}: not within {limit:?}; the proxy has {responses:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn mailbox_ids(proxy: &TestApp, user: &TestAccount) -> Vec<(String, Value)> {
    let got = proxy
        .call1(user, "Mailbox/get", json!({"accountId": user.account_id}))
        .await;
    got["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["name"].as_str().unwrap().to_string(), m.clone()))
        .collect()
}

fn mailbox_named(mailboxes: &[(String, Value)], name: &str) -> String {
    mailboxes
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, m)| m["id"].as_str().unwrap().to_string())
        .unwrap_or_else(|| panic!("no mailbox {name} in {mailboxes:#?}"))
}

/// Removes what differs by design between two servers: ids.
fn without_ids(mut value: Value) -> Value {
    if let Some(list) = value["list"].as_array_mut() {
        for email in list {
            if let Some(object) = email.as_object_mut() {
                object.remove("id");
                object.remove("threadId");
                object.remove("mailboxIds");
            }
        }
    }
    if let Some(object) = value.as_object_mut() {
        object.remove("state");
        object.remove("accountId");
    }
    value
}

#[tokio::test]
async fn mailboxes_and_messages_read_through_the_proxy_match_an_import() {
    let Some(dovecot) = Dovecot::start(&["ann@example.com"]) else {
        return;
    };
    let messages: Vec<Vec<u8>> = match corpus() {
        Some(corpus) => corpus_sample(&corpus, 40),
        None => golden_messages(),
    }
    .iter()
    // IMAP carries no NUL octet (RFC 3501 CHAR8): Dovecot stores one as
    // 0x80, so such a message is not "the same bytes" on both sides.
    .filter(|raw| !raw.contains(&0))
    .map(|raw| crlf(raw))
    .collect();
    let base_time = 1_700_000_000;
    dovecot.append("ann@example.com", "INBOX", &messages, "\\Seen", base_time);
    dovecot.client("ann@example.com", "m.create('Work/Projects')");
    let proxy = spawn_proxy(&dovecot).await;
    // A wrong password is refused by the upstream.
    assert_eq!(
        session_status(&proxy, "ann@example.com", "wrong").await,
        401
    );
    let ann = proxy_login(&proxy, "ann@example.com").await;
    let list = first_sync(&proxy, &ann, messages.len()).await;
    assert!(
        list.iter()
            .all(|email| email["keywords"] == json!({"$seen": true}))
    );
    assert_eq!(list[0]["receivedAt"], "2023-11-14T22:13:20Z");

    // Mailboxes: roles from SPECIAL-USE, the hierarchy, subscriptions.
    let mailboxes = mailbox_ids(&proxy, &ann).await;
    let names: Vec<&str> = mailboxes.iter().map(|(n, _)| n.as_str()).collect();
    for name in [
        "INBOX", "Drafts", "Sent", "Trash", "Archive", "Work", "Projects",
    ] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }
    let by_name = |name: &str| &mailboxes.iter().find(|(n, _)| n == name).unwrap().1;
    assert_eq!(by_name("INBOX")["role"], "inbox");
    assert_eq!(by_name("Sent")["role"], "sent");
    assert_eq!(by_name("Archive")["role"], "archive");
    assert_eq!(by_name("Projects")["parentId"], by_name("Work")["id"]);
    assert_eq!(by_name("Projects")["isSubscribed"], false);
    assert_eq!(by_name("Sent")["isSubscribed"], true);
    assert_eq!(by_name("INBOX")["totalEmails"], messages.len());
    assert_eq!(mailboxes.len(), 7, "{names:?}");

    // The same JSON as a standalone import of the same bytes.
    let standalone = spawn_app().await;
    let alone = standalone.account("ann@example.com").await;
    let alone_ids = standalone.ingest(&alone, &messages, base_time).await;
    // Same flags as the upstream's copies.
    let seen: Vec<Value> = alone_ids
        .iter()
        .map(|id| {
            json!([ "Email/set", {"accountId": alone.account_id,
            "update": {id: {"keywords/$seen": true}}}, "s"])
        })
        .collect();
    standalone.call(&alone, Value::Array(seen)).await;
    let proxy_ids: Vec<Value> = list.iter().map(|email| email["id"].clone()).collect();
    let property_sets = [
        Value::Null,
        json!(["mailboxIds", "keywords", "size", "receivedAt", "blobId"]),
        json!([
            "from",
            "to",
            "subject",
            "sentAt",
            "preview",
            "hasAttachment",
            "headers",
            "header:List-Id:asText",
            "messageId",
            "inReplyTo",
            "references"
        ]),
        json!(["bodyStructure", "textBody", "htmlBody", "attachments"]),
    ];
    for properties in property_sets {
        for fetch in [
            json!({}),
            json!({"fetchAllBodyValues": true, "maxBodyValueBytes": 100}),
        ] {
            let mut arguments = json!({"properties": properties});
            for (key, value) in fetch.as_object().unwrap() {
                arguments[key] = value.clone();
            }
            arguments["accountId"] = json!(ann.account_id);
            arguments["ids"] = json!(proxy_ids);
            let through = proxy.call1(&ann, "Email/get", arguments.clone()).await;
            arguments["accountId"] = json!(alone.account_id);
            arguments["ids"] = json!(alone_ids);
            let imported = standalone
                .call1(&alone, "Email/get", arguments.clone())
                .await;
            assert_eq!(through["list"].as_array().unwrap().len(), messages.len());
            assert_eq!(without_ids(through), without_ids(imported), "{arguments}");
        }
    }
}

#[tokio::test]
async fn another_clients_changes_reach_jmap_within_two_seconds() {
    let messages = golden_crlf(4);
    let Some((dovecot, proxy, bob, first)) =
        proxy_with_inbox("bob@example.com", &messages, |_| {}).await
    else {
        return;
    };
    let mailboxes = mailbox_ids(&proxy, &bob).await;
    let inbox = mailbox_named(&mailboxes, "INBOX");
    let archive = mailbox_named(&mailboxes, "Archive");
    let ids: Vec<String> = first
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect();
    let state = proxy.state(&bob, "Email").await;

    // A flag set by another client.
    dovecot.client(
        "bob@example.com",
        "m.select('INBOX')\nm.uid('STORE', '1', '+FLAGS', '(\\\\Flagged)')",
    );
    until(&proxy, &bob, Duration::from_secs(2), "a flag", |list| {
        list.iter()
            .any(|e| e["id"] == ids[0] && e["keywords"] == json!({"$flagged": true}))
    })
    .await;
    let changes = proxy
        .call_in(&bob, "Email/changes", json!({"sinceState": state}))
        .await;
    assert_eq!(changes["updated"], json!([ids[0]]), "{changes}");

    // A MOVE keeps the JMAP id and changes mailboxIds.
    dovecot.client(
        "bob@example.com",
        "m.select('INBOX')\nr = m.uid('MOVE', '2', 'Archive')\nassert r[0] == 'OK', r",
    );
    until(&proxy, &bob, Duration::from_secs(2), "a move", |list| {
        list.iter()
            .any(|e| e["id"] == ids[1] && e["mailboxIds"] == json!({archive.clone(): true}))
    })
    .await;

    // An EXPUNGE destroys.
    dovecot.client(
        "bob@example.com",
        "m.select('INBOX')\nm.uid('STORE', '3', '+FLAGS', '(\\\\Deleted)')\nm.expunge()",
    );
    let after = until(&proxy, &bob, Duration::from_secs(2), "an expunge", |list| {
        list.len() == 3 && !list.iter().any(|e| e["id"] == ids[2])
    })
    .await;
    assert!(
        after
            .iter()
            .any(|e| e["id"] == ids[0] && e["mailboxIds"] == json!({inbox.clone(): true}))
    );

    // An APPEND shows up.
    let extra = crlf(b"From: carol@example.com\nTo: bob@example.com\nSubject: new\n\nhello\n");
    dovecot.append("bob@example.com", "INBOX", &[extra], "", 1_800_000_000);
    let appended = until(&proxy, &bob, Duration::from_secs(2), "an append", |list| {
        list.len() == 4
    })
    .await;
    let new_id = appended.last().unwrap()["id"].clone();

    // A UIDVALIDITY reset keeps the ids of unchanged messages.
    let before: Vec<Value> = appended.iter().map(|e| e["id"].clone()).collect();
    run_ok(
        Command::new("doveadm")
            .arg("-c")
            .arg(dovecot.config())
            .args([
                "mailbox",
                "update",
                "-u",
                "bob@example.com",
                "--uid-validity",
                "12345",
                "INBOX",
            ]),
    );
    // A change to wake the listener after the reset.
    dovecot.client(
        "bob@example.com",
        "m.select('INBOX')\nm.store('1', '+FLAGS', '(\\\\Seen)')",
    );
    let reset = until(
        &proxy,
        &bob,
        Duration::from_secs(5),
        "a UIDVALIDITY reset",
        |list| list.iter().any(|e| e["keywords"].get("$seen").is_some()),
    )
    .await;
    let after_reset: Vec<Value> = reset.iter().map(|e| e["id"].clone()).collect();
    assert_eq!(after_reset, before);
    assert!(after_reset.contains(&new_id));
}

/// The golden fixtures' messages (when the corpus is absent).
fn golden_messages() -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/golden");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "eml"))
        .collect();
    names.sort();
    names
        .iter()
        .map(|path| std::fs::read(path).unwrap())
        .collect()
}

/// Waits (at most 5 s) until an email received at `received_at` shows;
/// returns the emails.
async fn until_received(
    proxy: &TestApp,
    user: &TestAccount,
    what: &str,
    received_at: &str,
) -> Vec<Value> {
    let limit = Duration::from_secs(5);
    until(proxy, user, limit, what, |list| {
        list.iter().any(|e| e["receivedAt"] == received_at)
    })
    .await
}

/// The first `count` golden messages with CRLF line ends.
fn golden_crlf(count: usize) -> Vec<Vec<u8>> {
    golden_messages()
        .iter()
        .take(count)
        .map(|raw| crlf(raw))
        .collect()
}

/// Waits (at most 30 s) until the first sync shows `count` emails; returns them.
async fn first_sync(proxy: &TestApp, user: &TestAccount, count: usize) -> Vec<Value> {
    let limit = Duration::from_secs(30);
    until(proxy, user, limit, "the first sync", |list| {
        list.len() == count
    })
    .await
}

/// A Dovecot whose `user` holds `messages` in INBOX (INTERNALDATE from
/// 1,700,000,000), a proxy in front of it with its upstream options changed
/// by `change`, and `user` logged in: (dovecot, proxy, account, the emails
/// of the first sync); `None` when Dovecot is not installed.
async fn proxy_with_inbox(
    user: &str,
    messages: &[Vec<u8>],
    change: impl FnOnce(&mut UpstreamOptions),
) -> Option<(Dovecot, TestApp, TestAccount, Vec<Value>)> {
    let dovecot = Dovecot::start(&[user])?;
    dovecot.append(user, "INBOX", messages, "", 1_700_000_000);
    let proxy = spawn_proxy_options(&dovecot, change).await;
    let account = proxy_login(&proxy, user).await;
    let first = first_sync(&proxy, &account, messages.len()).await;
    Some((dovecot, proxy, account, first))
}

/// What imaplib sees of a mailbox: `UID FLAGS` lines, one per message.
fn upstream_flags(dovecot: &Dovecot, user: &str, mailbox: &str) -> Vec<String> {
    let out = dovecot.client(
        user,
        &format!(
            "typ, n = m.select({mailbox:?})\nassert typ == 'OK', n\n\
             if int(n[0]) > 0:\n    \
             typ, data = m.uid('FETCH', '1:*', '(UID FLAGS)')\n    \
             for line in data:\n        print(line.decode())"
        ),
    );
    out.lines().map(str::to_string).collect()
}

fn upstream_mailbox_names(dovecot: &Dovecot, user: &str) -> Vec<String> {
    let out = dovecot.client(
        user,
        "typ, data = m.list()\nfor line in data:\n    print(line.decode().split(' \"/\" ', 1)[1].strip('\"'))",
    );
    let mut names: Vec<String> = out.lines().map(str::to_string).collect();
    names.sort();
    names
}

#[tokio::test]
async fn jmap_writes_go_to_the_upstream_first() {
    let messages = golden_crlf(3);
    let Some((dovecot, proxy, carol, first)) =
        proxy_with_inbox("carol@example.com", &messages, |_| {}).await
    else {
        return;
    };
    let ids: Vec<String> = first
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect();
    let mailboxes = mailbox_ids(&proxy, &carol).await;
    let inbox = mailbox_named(&mailboxes, "INBOX");
    let archive = mailbox_named(&mailboxes, "Archive");

    // Keywords: UID STORE upstream, then the change here, by a sync that
    // reads only the mailbox that changed (CONDSTORE: HIGHESTMODSEQ).
    // (After the first sync has ended, which is after its emails show.)
    let deadline = Instant::now() + Duration::from_secs(10);
    while proxy
        .metric("fastview_upstream_round_trips_total{method=\"sync\",command=\"sync\"}")
        .await
        < 1.0
    {
        assert!(Instant::now() < deadline, "the first sync ends");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let read_before = proxy.metric("fastview_upstream_mailboxes_read_total").await;
    let set = proxy
        .update_email(
            &carol,
            &ids[0],
            json!({"keywords/$flagged": true, "keywords/$seen": true}),
        )
        .await;
    assert_eq!(set["updated"], json!({ids[0].clone(): null}), "{set}");
    let read = proxy.metric("fastview_upstream_mailboxes_read_total").await - read_before;
    assert_eq!(read, 1.0, "mailboxes read by the sync after the write");
    let stores = proxy
        .metric("fastview_upstream_round_trips_total{method=\"Email/set\",command=\"store\"}")
        .await;
    assert_eq!(stores, 1.0, "UID STORE counted under Email/set");
    let flags = upstream_flags(&dovecot, "carol@example.com", "INBOX");
    assert!(
        flags[0].contains("\\Flagged") && flags[0].contains("\\Seen"),
        "{flags:?}"
    );
    let got = proxy.email_get(&carol, &[&ids[0]], &["keywords"]).await;
    assert_eq!(
        got["list"][0]["keywords"],
        json!({"$flagged": true, "$seen": true})
    );

    // mailboxIds: UID MOVE; the JMAP id stays.
    let set = proxy
        .call_in(
            &carol,
            "Email/set",
            json!({"update": {ids[1].clone(): {"mailboxIds": {archive.clone(): true}}}}),
        )
        .await;
    assert_eq!(set["updated"], json!({ids[1].clone(): null}), "{set}");
    assert_eq!(
        upstream_flags(&dovecot, "carol@example.com", "INBOX").len(),
        2
    );
    assert_eq!(
        upstream_flags(&dovecot, "carol@example.com", "Archive").len(),
        1
    );
    let got = proxy.email_get(&carol, &[&ids[1]], &["mailboxIds"]).await;
    assert_eq!(got["list"][0]["mailboxIds"], json!({archive.clone(): true}));

    // In two mailboxes at once: UID COPY.
    let set = proxy
        .call_in(
            &carol,
            "Email/set",
            json!({"update": {ids[1].clone(): {format!("mailboxIds/{inbox}"): true}}}),
        )
        .await;
    assert_eq!(set["updated"], json!({ids[1].clone(): null}), "{set}");
    assert_eq!(
        upstream_flags(&dovecot, "carol@example.com", "INBOX").len(),
        3
    );

    // Destroy: \Deleted + UID EXPUNGE of every copy.
    let set = proxy
        .call_in(&carol, "Email/set", json!({"destroy": [ids[1]]}))
        .await;
    assert_eq!(set["destroyed"], json!([ids[1]]), "{set}");
    assert_eq!(
        upstream_flags(&dovecot, "carol@example.com", "INBOX").len(),
        2
    );
    assert!(upstream_flags(&dovecot, "carol@example.com", "Archive").is_empty());

    // Email/import: APPEND, with flags and INTERNALDATE.
    let raw = b"From: dan@example.com\nTo: carol@example.com\nSubject: imported\n\nhi\n".to_vec();
    let (status, upload) = proxy.upload(&carol, raw).await;
    assert_eq!(status, 201, "{upload}");
    let imported = proxy
        .call_in(
            &carol,
            "Email/import",
            json!({"emails": {"i": {
            "blobId": upload["blobId"], "mailboxIds": {archive.clone(): true},
            "keywords": {"$seen": true}, "receivedAt": "2024-01-02T03:04:05Z"}}}),
        )
        .await;
    let created = &imported["created"]["i"];
    assert!(created["id"].is_string(), "{imported}");
    let flags = upstream_flags(&dovecot, "carol@example.com", "Archive");
    assert_eq!(flags.len(), 1);
    assert!(flags[0].contains("\\Seen"), "{flags:?}");
    let got = proxy
        .email_get(
            &carol,
            &[&created["id"]],
            &["receivedAt", "subject", "mailboxIds"],
        )
        .await;
    assert_eq!(got["list"][0]["receivedAt"], "2024-01-02T03:04:05Z");
    assert_eq!(got["list"][0]["subject"], "imported");
    // Synced mail is in the local search index.
    let found = proxy
        .call_in(
            &carol,
            "Email/query",
            json!({"filter": {"text": "imported"}}),
        )
        .await;
    assert_eq!(found["ids"], json!([created["id"]]), "{found}");

    // Mailbox/set: CREATE, RENAME (the id stays), DELETE; a refusal.
    let made = proxy
        .call_in(
            &carol,
            "Mailbox/set",
            json!({"create": {"l": {"name": "Lists", "parentId": null}, "bad": {"name": "~x"}}}),
        )
        .await;
    let lists = made["created"]["l"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{made}"))
        .to_string();
    assert_eq!(made["notCreated"]["bad"]["type"], "forbidden", "{made}");
    assert!(upstream_mailbox_names(&dovecot, "carol@example.com").contains(&"Lists".to_string()));
    let renamed = proxy
        .call_in(
            &carol,
            "Mailbox/set",
            json!({"update": {lists.clone(): {"name": "Lists ✓", "parentId": archive}}}),
        )
        .await;
    assert_eq!(
        renamed["updated"],
        json!({lists.clone(): null}),
        "{renamed}"
    );
    let names = upstream_mailbox_names(&dovecot, "carol@example.com");
    assert!(
        names.contains(&"Archive/Lists &JxM-".to_string()),
        "{names:?}"
    );
    let after = mailbox_ids(&proxy, &carol).await;
    assert_eq!(mailbox_named(&after, "Lists ✓"), lists);
    // The subscription followed the new name.
    let row = &after.iter().find(|(n, _)| n == "Lists ✓").unwrap().1;
    assert_eq!(row["isSubscribed"], true, "{row}");
    // A name holding the hierarchy delimiter is refused, not nested.
    let nested = proxy
        .call_in(
            &carol,
            "Mailbox/set",
            json!({"create": {"x": {"name": "x/y"}}}),
        )
        .await;
    assert_eq!(nested["notCreated"]["x"]["type"], "forbidden", "{nested}");
    let gone = proxy
        .call_in(&carol, "Mailbox/set", json!({"destroy": [lists]}))
        .await;
    assert_eq!(gone["destroyed"], json!([lists]), "{gone}");
    assert!(
        !upstream_mailbox_names(&dovecot, "carol@example.com")
            .iter()
            .any(|n| n.contains("Lists"))
    );

    // The same bytes twice in INBOX are one email; a move takes both copies.
    let twice = crlf(b"From: fay@example.com\nTo: carol@example.com\nSubject: twice\n\nsame\n");
    dovecot.append(
        "carol@example.com",
        "INBOX",
        &[twice.clone(), twice],
        "",
        1_750_000_000,
    );
    let listed = until_received(&proxy, &carol, "two copies", "2025-06-15T15:06:40Z").await;
    let once = listed
        .iter()
        .find(|e| e["receivedAt"] == "2025-06-15T15:06:40Z")
        .unwrap()["id"]
        .clone();
    let inbox_before = upstream_flags(&dovecot, "carol@example.com", "INBOX").len();
    proxy
        .update_email(
            &carol,
            once.as_str().unwrap(),
            json!({"mailboxIds": {archive.clone(): true}}),
        )
        .await;
    assert_eq!(
        upstream_flags(&dovecot, "carol@example.com", "INBOX").len(),
        inbox_before - 2
    );
    assert_eq!(
        upstream_flags(&dovecot, "carol@example.com", "Archive").len(),
        3
    );

    // A mailbox the upstream will not open does not stop the others.
    dovecot.client("carol@example.com", "m.create('Broken')");
    let broken = dovecot.dir.path().join("mail/carol@example.com/.Broken");
    set_mode(&broken, 0o000);
    let late = crlf(b"From: gil@example.com\nTo: carol@example.com\nSubject: late\n\nstill\n");
    dovecot.append("carol@example.com", "INBOX", &[late], "", 1_760_000_000);
    until_received(
        &proxy,
        &carol,
        "mail beside a broken mailbox",
        "2025-10-09T08:53:20Z",
    )
    .await;
    set_mode(&broken, 0o755);

    // A name with quotes and a backslash round-trips (LIST quotes it).
    let odd_id = proxy.create_mailbox(&carol, "\"quoted\" back\\slash").await;
    let mailboxes = mailbox_ids(&proxy, &carol).await;
    assert_eq!(mailbox_named(&mailboxes, "\"quoted\" back\\slash"), odd_id);

    // Another client deleting the mailbox a write's sync read last (the
    // last by name) does not break the next write.
    dovecot.client("carol@example.com", "m.create('Zz')");
    proxy
        .update_email(&carol, &ids[0], json!({"keywords/$forwarded": true}))
        .await;
    dovecot.client(
        "carol@example.com",
        "r = m.delete('Zz')\nassert r[0] == 'OK', r",
    );
    proxy
        .update_email(&carol, &ids[0], json!({"keywords/$answered": true}))
        .await;

    // A password changed upstream stops working here (a fresh check asks).
    // (Dovecot notices a changed passwd-file by its mtime, in seconds.)
    tokio::time::sleep(Duration::from_millis(1100)).await;
    std::fs::write(
        dovecot.dir.path().join("passwd"),
        "carol@example.com:{PLAIN}changed::::::\n",
    )
    .unwrap();
    let carol_with = |password| session_status(&proxy, "carol@example.com", password);
    assert_eq!(carol_with(PASSWORD).await, 401);
    assert_eq!(carol_with("changed").await, 200);
}

#[tokio::test]
async fn a_master_login_syncs_every_account_without_its_user() {
    let Some(dovecot) =
        Dovecot::start_with_master(&["dan@example.com"], Some(("fastview", "master-secret")))
    else {
        return;
    };
    let messages = golden_crlf(2);
    dovecot.append("dan@example.com", "INBOX", &messages, "", 1_700_000_000);
    let proxy = spawn_proxy_options(&dovecot, |options| {
        options.master = Some(MasterLogin {
            user: "fastview".into(),
            password: "master-secret".into(),
        })
    })
    .await;
    // An account an earlier login made; nobody logs in now.
    let Some(Proxy::Imap(upstream)) = &proxy.proxy else {
        panic!("an IMAP proxy");
    };
    let dan = upstream.account("dan@example.com").await.unwrap();
    assert_eq!(upstream.start_all().await.unwrap(), 1);
    let store = proxy.app.store.clone();
    let emails = || async { store.query_rows(dan.id, None).await.unwrap().len() };
    let deadline = Instant::now() + Duration::from_secs(30);
    while emails().await < 2 {
        assert!(Instant::now() < deadline, "the master login's first sync");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // `account list` tells how far behind each account's mirror may be,
    // and how it learns of changes (Dovecot has NOTIFY).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let listed = proxy.cli().args(["account", "list"]).output().unwrap();
        let text = String::from_utf8_lossy(&listed.stdout).to_string();
        let line = text
            .lines()
            .find(|l| l.contains("dan@example.com"))
            .unwrap_or_default()
            .to_string();
        if line.contains("\tsynced ") && line.ends_with(" s ago\twatch notify") {
            break;
        }
        assert!(Instant::now() < deadline, "account list: {text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Still listening, with no request at all.
    let extra = crlf(b"From: eve@example.com\nTo: dan@example.com\nSubject: later\n\nhi\n");
    dovecot.append("dan@example.com", "INBOX", &[extra], "", 1_800_000_000);
    let deadline = Instant::now() + Duration::from_secs(5);
    while emails().await < 3 {
        assert!(
            Instant::now() < deadline,
            "a change while nobody is logged in"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Dan's own password is still checked against the upstream.
    assert_eq!(
        session_status(&proxy, "dan@example.com", "wrong").await,
        401
    );
    assert_eq!(
        session_status(&proxy, "dan@example.com", PASSWORD).await,
        200
    );
}

#[tokio::test]
async fn evicted_messages_are_read_again_from_the_upstream() {
    let messages = golden_crlf(6);
    // A bound of one octet: the eviction pass takes every message.
    let Some((_dovecot, proxy, erin, listed)) =
        proxy_with_inbox("erin@example.com", &messages, |options| {
            options.cache_bytes = 1
        })
        .await
    else {
        return;
    };
    let ids: Vec<Value> = listed.iter().map(|e| e["id"].clone()).collect();
    let blobs: Vec<String> = listed
        .iter()
        .map(|e| e["blobId"].as_str().unwrap().to_string())
        .collect();
    let full = json!({"accountId": erin.account_id, "ids": ids,
        "properties": ["blobId", "bodyValues", "textBody", "htmlBody", "attachments", "preview"],
        "fetchAllBodyValues": true});
    let before = proxy.call1(&erin, "Email/get", full.clone()).await;

    let Some(Proxy::Imap(upstream)) = &proxy.proxy else {
        panic!("an IMAP proxy");
    };
    assert_eq!(upstream.evict().await.unwrap(), 6);
    for blob in &blobs {
        assert!(
            !proxy.app.blobs.exists(blob).await.unwrap(),
            "{blob} evicted"
        );
    }
    // `fastview fsck` (its own blob store, no upstream to read from):
    // evicted blobs are not missing.
    let plain = fastview::blob::BlobStore::open(proxy.app.blobs.url()).unwrap();
    let report = fastview::mail::fsck::check(proxy.app.store.as_ref(), &plain, |_| {})
        .await
        .unwrap();
    assert_eq!(report.checked, 6);
    assert!(report.missing.is_empty(), "{:?}", report.missing);
    assert!(!proxy.app.blobs.exists(&blobs[0]).await.unwrap());
    // The list view reads no blob: they stay evicted.
    let list = proxy
        .email_get(
            &erin,
            &ids,
            &[
                "subject",
                "from",
                "preview",
                "hasAttachment",
                "bodyStructure",
            ],
        )
        .await;
    assert_eq!(list["list"].as_array().unwrap().len(), 6);
    assert!(!proxy.app.blobs.exists(&blobs[0]).await.unwrap());
    // A full read brings each back from the upstream, the same JSON.
    let after = proxy.call1(&erin, "Email/get", full).await;
    assert_eq!(after["list"], before["list"]);
    assert_eq!(
        proxy.metric("fastview_upstream_cache_refills_total").await,
        6.0
    );
    let octets: usize = messages.iter().map(Vec::len).sum();
    assert_eq!(
        proxy
            .metric("fastview_upstream_bytes_total{method=\"Email/get\"}")
            .await,
        octets as f64,
        "the octets read again, under the method that read them"
    );
    for blob in &blobs {
        assert!(
            proxy.app.blobs.exists(blob).await.unwrap(),
            "{blob} read again"
        );
    }
    let names: Vec<&str> = blobs.iter().map(String::as_str).collect();
    assert!(
        proxy
            .app
            .store
            .evicted_among(&names)
            .await
            .unwrap()
            .is_empty()
    );
    // A download of an evicted message: byte for byte what IMAP holds.
    assert_eq!(upstream.evict().await.unwrap(), 6);
    let (status, body) = proxy.download(&erin, &blobs[1], "m.eml").await;
    assert_eq!(status, 200);
    assert!(messages.contains(&body));
    assert_eq!(
        fastview::blob::blob_id_of(&body),
        blobs[1],
        "the octets hash to the blob id"
    );
}

#[tokio::test]
async fn mail_is_sent_through_the_upstreams_submission_server_as_the_user() {
    let outbox = tempfile::tempdir().unwrap();
    let auth = format!("hana@example.com:{PASSWORD}");
    let Some(sink) = crate::relay::start_sink(outbox.path(), &["--auth", &auth]) else {
        return;
    };
    let welcome = crlf(b"From: ivy@example.com\nTo: hana@example.com\nSubject: hi\n\nhello\n");
    let smtp = format!("smtp://127.0.0.1:{}", sink.port);
    let Some((dovecot, proxy, hana, _)) =
        proxy_with_inbox("hana@example.com", &[welcome], |options| {
            options.smtp = Some(smtp)
        })
        .await
    else {
        return;
    };
    // With a submission server, submission is offered (RFC 8621 §1.3.2).
    let session = proxy.session(&hana).await;
    let submission = "urn:ietf:params:jmap:submission";
    assert_eq!(session["capabilities"][submission], json!({}));
    assert_eq!(
        session["accounts"][&hana.account_id]["accountCapabilities"][submission],
        json!({"maxDelayedSend": 0, "submissionExtensions": {}})
    );
    assert_eq!(session["primaryAccounts"][submission], hana.account_id);
    let mailboxes = mailbox_ids(&proxy, &hana).await;
    let (drafts, sent) = (
        mailbox_named(&mailboxes, "Drafts"),
        mailbox_named(&mailboxes, "Sent"),
    );
    let identities = proxy
        .call_using(
            &hana,
            &[submission],
            json!([["Identity/get", {"accountId": hana.account_id}]]),
        )
        .await;
    let identity = identities[0][1]["list"][0]["id"].clone();
    let responses = proxy
        .call_using(
            &hana,
            &[submission],
            json!([
                ["Email/set", {"accountId": hana.account_id, "create": {"d": {
                    "mailboxIds": {drafts.clone(): true},
                    "keywords": {"$draft": true, "$seen": true},
                    "from": [{"email": "hana@example.com"}],
                    "to": [{"email": "jo@far.example"}],
                    "subject": "Out",
                    "bodyValues": {"1": {"value": "Sent upstream.\n"}},
                    "textBody": [{"partId": "1", "type": "text/plain"}],
                }}}],
                ["EmailSubmission/set", {"accountId": hana.account_id,
                    "create": {"s": {"identityId": identity, "emailId": "#d"}},
                    "onSuccessUpdateEmail": {"#s": {"keywords/$draft": null,
                        format!("mailboxIds/{drafts}"): null, format!("mailboxIds/{sent}"): true}}}],
            ]),
        )
        .await;
    let created = &responses[1][1]["created"]["s"];
    assert_eq!(
        created["deliveryStatus"]["jo@far.example"]["delivered"], "unknown",
        "{responses:?}"
    );
    // The submission server got it from Hana, authenticated as Hana.
    let record: Value =
        serde_json::from_slice(&std::fs::read(outbox.path().join("1.json")).unwrap()).unwrap();
    assert_eq!(record["login"], "hana@example.com");
    assert_eq!(record["mail_from"], "hana@example.com");
    assert_eq!(record["rcpt_tos"], json!(["jo@far.example"]));
    // The draft became the sent copy, on the upstream.
    assert_eq!(responses[2][0], "Email/set", "{responses:?}");
    assert!(upstream_flags(&dovecot, "hana@example.com", "Drafts").is_empty());
    let sent_flags = upstream_flags(&dovecot, "hana@example.com", "Sent");
    assert_eq!(sent_flags.len(), 1);
    assert!(!sent_flags[0].contains("\\Draft"), "{sent_flags:?}");

    // A client that leaves the draft where it is: the server keeps the
    // sent copy in Sent (read, without Bcc), the draft stays a draft.
    let responses = proxy
        .call_using(
            &hana,
            &[submission],
            json!([
                ["Email/set", {"accountId": hana.account_id, "create": {"d": {
                    "mailboxIds": {drafts.clone(): true},
                    "keywords": {"$draft": true},
                    "from": [{"email": "hana@example.com"}],
                    "to": [{"email": "jo@far.example"}],
                    "bcc": [{"email": "kit@far.example"}],
                    "subject": "Second",
                    "bodyValues": {"1": {"value": "Kept by the server.\n"}},
                    "textBody": [{"partId": "1", "type": "text/plain"}],
                }}}],
                ["EmailSubmission/set", {"accountId": hana.account_id,
                    "create": {"s": {"identityId": identity, "emailId": "#d"}}}],
            ]),
        )
        .await;
    assert!(responses[1][1]["created"]["s"].is_object(), "{responses:?}");
    assert_eq!(
        upstream_flags(&dovecot, "hana@example.com", "Drafts").len(),
        1
    );
    let sent_flags = upstream_flags(&dovecot, "hana@example.com", "Sent");
    assert_eq!(sent_flags.len(), 2, "{sent_flags:?}");
    assert!(sent_flags[1].contains("\\Seen"), "{sent_flags:?}");
    let copy = dovecot.client(
        "hana@example.com",
        "m.select('Sent')\ntyp, data = m.uid('FETCH', '2', '(BODY.PEEK[HEADER])')\nprint(data[0][1].decode())",
    );
    assert!(copy.contains("Subject: Second"), "{copy}");
    assert!(!copy.to_ascii_lowercase().contains("bcc:"), "{copy}");
}

/// Waits (at most 10 s) until a sync mirrored the upstream mailbox `name`;
/// the mailboxes then.
async fn until_mirrored(proxy: &TestApp, user: &TestAccount, name: &str) -> Vec<(String, Value)> {
    let started = Instant::now();
    loop {
        let mailboxes = mailbox_ids(proxy, user).await;
        if mailboxes.iter().any(|(n, _)| n == name) {
            return mailboxes;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{name} mirrored: not within 10 s; {mailboxes:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Checks the `sortOrder` of the mailboxes `user` has through `proxy`
/// against those of a standalone Fastview's account `local`: each role's
/// the standalone's mailbox of that role has, the folder "Aaa" that of a
/// folder `fastview import` makes, so Mailbox/query by sortOrder then name
/// lists INBOX first and "Aaa" after every role.
pub(crate) async fn assert_sorted_as_standalone(
    proxy: &TestApp,
    user: &TestAccount,
    standalone: &TestApp,
    local: &TestAccount,
) {
    let of = |got: Value| got["list"].as_array().unwrap().clone();
    let local_list = of(standalone
        .call1(local, "Mailbox/get", json!({"accountId": local.account_id}))
        .await);
    let proxied = of(proxy
        .call1(user, "Mailbox/get", json!({"accountId": user.account_id}))
        .await);
    let mut roles = 0;
    for mailbox in &proxied {
        if mailbox["role"].is_null() {
            continue;
        }
        let same_role = local_list
            .iter()
            .find(|m| m["role"] == mailbox["role"])
            .unwrap_or_else(|| panic!("no {} on the standalone server", mailbox["role"]));
        assert_eq!(mailbox["sortOrder"], same_role["sortOrder"], "{mailbox}");
        roles += 1;
    }
    assert!(
        roles >= 5,
        "INBOX and the special-use folders: {proxied:#?}"
    );
    let folder = proxied.iter().find(|m| m["name"] == "Aaa").unwrap();
    assert_eq!(folder["sortOrder"], fastview::store::FOLDER_SORT_ORDER);
    let query = proxy
        .call1(
            user,
            "Mailbox/query",
            json!({"accountId": user.account_id,
                "sort": [{"property": "sortOrder"}, {"property": "name"}]}),
        )
        .await;
    let ids = query["ids"].as_array().unwrap();
    let inbox = proxied.iter().find(|m| m["role"] == "inbox").unwrap();
    assert_eq!(ids[0], inbox["id"], "{query}");
    let folder_at = ids.iter().position(|id| *id == folder["id"]).unwrap();
    assert_eq!(folder_at, roles, "after every role: {query}");
}

#[tokio::test]
async fn dovecot_folders_sort_after_the_roles_as_on_a_standalone_server() {
    let Some(dovecot) = Dovecot::start(&["lee@example.com"]) else {
        return;
    };
    dovecot.client(
        "lee@example.com",
        "r = m.create('Aaa')\nassert r[0] == 'OK', r",
    );
    let proxy = spawn_proxy(&dovecot).await;
    let lee = proxy_login(&proxy, "lee@example.com").await;
    until_mirrored(&proxy, &lee, "Aaa").await;
    let standalone = spawn_app().await;
    let local = standalone.account("bob@example.com").await;
    assert_sorted_as_standalone(&proxy, &lee, &standalone, &local).await;
}

#[tokio::test]
async fn an_import_is_created_as_stored_and_retried_without_a_copy() {
    let Some((dovecot, proxy, mia, _)) = proxy_with_inbox("mia@example.com", &[], |_| {}).await
    else {
        return;
    };
    let inbox = mailbox_named(&until_mirrored(&proxy, &mia, "INBOX").await, "INBOX");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/golden");
    let raw = crlf(&std::fs::read(dir.join("raw_utf8_headers.eml")).unwrap());
    let (status, upload) = proxy.upload(&mia, raw.clone()).await;
    assert_eq!(status, 201, "{upload}");
    let import = json!({"accountId": mia.account_id, "emails": {"i": {
        "blobId": upload["blobId"], "mailboxIds": {inbox: true}}}});
    let imported = proxy.call1(&mia, "Email/import", import.clone()).await;
    let created = imported["created"]["i"].clone();
    assert!(created["id"].is_string(), "{imported}");
    // Dovecot keeps the octets: the email is the upload's.
    assert_eq!(created["blobId"], upload["blobId"]);
    assert_eq!(created["size"], raw.len());
    let (_, downloaded) = proxy
        .download(&mia, created["blobId"].as_str().unwrap(), "m.eml")
        .await;
    assert_eq!(downloaded, raw);
    let got = proxy
        .email_get(&mia, &[&created["id"]], &["blobId", "threadId", "size"])
        .await;
    for property in ["blobId", "threadId", "size"] {
        assert_eq!(got["list"][0][property], created[property], "{property}");
    }
    // A retry of the same upload is the same email: no second APPEND.
    let again = proxy.call1(&mia, "Email/import", import).await;
    assert_eq!(again["notCreated"]["i"]["type"], "alreadyExists", "{again}");
    assert_eq!(again["notCreated"]["i"]["existingId"], created["id"]);
    assert_eq!(
        upstream_flags(&dovecot, "mia@example.com", "INBOX").len(),
        1
    );
    let listed = first_sync(&proxy, &mia, 1).await;
    assert_eq!(listed[0]["id"], created["id"]);
}

#[tokio::test]
async fn submission_is_offered_only_with_a_submission_server() {
    let Some((_dovecot, proxy, noa, _)) = proxy_with_inbox("noa@example.com", &[], |_| {}).await
    else {
        return;
    };
    let submission = "urn:ietf:params:jmap:submission";
    let session = proxy.session(&noa).await;
    assert!(
        session["capabilities"].get(submission).is_none(),
        "{session}"
    );
    let account = &session["accounts"][&noa.account_id]["accountCapabilities"];
    assert!(account.get(submission).is_none(), "{session}");
    assert!(
        session["primaryAccounts"].get(submission).is_none(),
        "{session}"
    );
    assert!(
        account.get("urn:ietf:params:jmap:mail").is_some(),
        "{session}"
    );
    // Its methods are unknown, named in `using` or not (a client that
    // names every registered capability keeps working).
    let calls = json!([
        ["Identity/get", {"accountId": noa.account_id}],
        ["EmailSubmission/set", {"accountId": noa.account_id, "create": {}}],
        ["Mailbox/get", {"accountId": noa.account_id, "ids": []}],
    ]);
    for using in [&[submission][..], &[]] {
        let responses = proxy.call_using(&noa, using, calls.clone()).await;
        assert_eq!(responses[0][0], "error", "{responses:?}");
        assert_eq!(responses[0][1]["type"], "unknownMethod");
        assert_eq!(responses[1][1]["type"], "unknownMethod");
        assert_eq!(responses[2][0], "Mailbox/get", "{responses:?}");
    }
}

#[tokio::test]
async fn reads_go_on_through_an_upstream_outage_and_writes_wait_for_its_return() {
    let Some(dovecot) = Dovecot::start(&["olga@example.com", "pavel@example.com"]) else {
        return;
    };
    let messages = golden_crlf(3);
    dovecot.append("olga@example.com", "INBOX", &messages, "", 1_700_000_000);
    let proxy = spawn_proxy(&dovecot).await;
    let without_grace =
        spawn_proxy_options(&dovecot, |options| options.outage_grace = Duration::ZERO).await;
    let olga = proxy_login(&proxy, "olga@example.com").await;
    proxy_login(&without_grace, "olga@example.com").await;
    let synced = until(
        &proxy,
        &olga,
        Duration::from_secs(20),
        "the first sync",
        |list| list.len() == 3,
    )
    .await;
    // Pavel changes his password upstream and logs in with the new one:
    // the old one's grace ends there.
    let pavel_with = |password| session_status(&proxy, "pavel@example.com", password);
    assert_eq!(pavel_with(PASSWORD).await, 200);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    std::fs::write(
        dovecot.dir.path().join("passwd"),
        format!(
            "olga@example.com:{{PLAIN}}{PASSWORD}::::::\npavel@example.com:{{PLAIN}}changed::::::\n"
        ),
    )
    .unwrap();
    assert_eq!(pavel_with("changed").await, 200);

    dovecot.stop();
    // A session GET asks the upstream afresh: it cannot, so the credential
    // it accepted stands; a password it never accepted cannot be checked.
    let olga_with = |password| session_status(&proxy, "olga@example.com", password);
    assert_eq!(olga_with(PASSWORD).await, 200);
    assert_eq!(olga_with("a guess").await, 503);
    assert_eq!(pavel_with("changed").await, 200);
    assert_eq!(pavel_with(PASSWORD).await, 503, "replaced upstream");
    assert_eq!(
        session_status(&without_grace, "olga@example.com", PASSWORD).await,
        503,
        "no grace"
    );
    // Olga's and Pavel's fresh checks; requests within a minute of the
    // last check need none.
    assert_eq!(
        proxy.metric("fastview_upstream_outage_logins_total").await,
        2.0
    );
    // The list view comes from the mirror.
    let listed = until(&proxy, &olga, Duration::from_secs(5), "reads", |list| {
        list.len() == 3
    })
    .await;
    assert_eq!(listed, synced);
    // A write cannot reach the upstream: serverUnavailable, nothing changed.
    let id = synced[0]["id"].as_str().unwrap();
    let update = json!({"accountId": olga.account_id,
        "update": {id: {"keywords/$flagged": true}}});
    let set = json!([["Email/set", update, "0"]]);
    let refused = proxy.call(&olga, set.clone()).await;
    assert_eq!(
        (refused[0][0].as_str(), refused[0][1]["type"].as_str()),
        (Some("error"), Some("serverUnavailable")),
        "{refused:?}"
    );

    // The upstream is back: the write goes through within seconds.
    dovecot.run();
    let back = Instant::now();
    loop {
        let answer = proxy.call(&olga, set.clone()).await;
        if answer[0][1]["updated"].get(id).is_some() {
            break;
        }
        assert_eq!(answer[0][1]["type"], "serverUnavailable", "{answer:?}");
        assert!(back.elapsed() < Duration::from_secs(10), "{answer:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let flagged = dovecot.client(
        "olga@example.com",
        "m.select('INBOX')\nprint(m.uid('FETCH', '1:*', '(FLAGS)')[1])",
    );
    assert_eq!(flagged.matches("\\\\Flagged").count(), 1, "{flagged}");
}

//! Fastview in front of real IMAP servers (issues 18 and 45): each check
//! is written once, `check_…(kind)`, and run by one test per server,
//! `…_in_front_of_dovecot` and `…_in_front_of_cyrus` (`imap_server.rs`:
//! Dovecot 2.3 and Cyrus IMAP 3.6, started here on loopback ports, and
//! Python's imaplib as "another IMAP client"). Messages appended upstream
//! are read through Fastview with the same JSON, at every read level, as a
//! standalone Fastview that imported the octets the server holds with the
//! same receivedAt; what the other client does (flags, MOVE, EXPUNGE,
//! APPEND, in INBOX and in other folders) reaches JMAP within two seconds;
//! reads go on through an outage. Writes are in `upstream_imap_writes.rs`.
//! Where the servers differ, the check asks the server handle, by name.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fastview::app::ServeOptions;
use fastview::proxy::ProxyOptions;
use fastview::proxy::imap::UpstreamOptions;
use serde_json::{Value, json};

use crate::imap_server::{ImapServer, Kind};
use crate::support::{
    PASSWORD, TestAccount, TestApp, corpus, corpus_sample, crlf, proxy_login, spawn_app,
    spawn_in_front_of,
};

/// A Fastview in front of `server`, listening with a long poll (so what
/// arrives within seconds came through NOTIFY, IDLE or STATUS).
pub(crate) async fn spawn_proxy(server: &ImapServer) -> TestApp {
    spawn_proxy_options(server, |_| {}).await
}

/// [`spawn_proxy`] with its upstream options changed by `change` (a
/// master login, a bound of the message cache, a submission server).
pub(crate) async fn spawn_proxy_options(
    server: &ImapServer,
    change: impl FnOnce(&mut UpstreamOptions),
) -> TestApp {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("fastview=debug"))
        .with_test_writer()
        .try_init();
    let mut upstream = UpstreamOptions {
        url: server.url(),
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
        .set_upstream_source(&server.url().to_string())
        .await
        .unwrap();
    proxy
}

/// The status of `GET /jmap/session` as `user` with `password` (a fresh
/// credential check).
pub(crate) async fn session_status(proxy: &TestApp, user: &str, password: &str) -> u16 {
    proxy
        .get_as(format!("{}/jmap/session", proxy.base), user, password)
        .await
        .status()
        .as_u16()
}

/// Waits (at most `limit`) until `check` holds of a fresh `Email/query`
/// + `Email/get` of every email; returns that list.
pub(crate) async fn until(
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

pub(crate) async fn mailbox_ids(proxy: &TestApp, user: &TestAccount) -> Vec<(String, Value)> {
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

pub(crate) fn mailbox_named(mailboxes: &[(String, Value)], name: &str) -> String {
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

/// The header of a message: its octets up to the first empty line.
fn header_of(raw: &[u8]) -> &[u8] {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(raw.len());
    &raw[..end]
}

/// The octets `server` holds of `user`'s INBOX, checked against those
/// APPENDed: the same, but where the server rewrites 8-bit header octets
/// (Cyrus's `munge8bit`) a message with some has other, ASCII, headers.
fn stored_as_appended(server: &ImapServer, user: &str, sent: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let stored = server.messages(user, "INBOX");
    assert_eq!(stored.len(), sent.len());
    for (kept, sent) in stored.iter().zip(sent) {
        if server.rewrites_8bit_headers() && !header_of(sent).is_ascii() {
            assert_ne!(kept, sent);
            assert!(header_of(kept).is_ascii());
        } else {
            assert_eq!(kept, sent);
        }
    }
    stored
}

/// Mailboxes (roles, hierarchy, subscriptions, a non-ASCII name) and
/// messages read through the proxy: the same JSON at every read level as a
/// standalone import of the octets the server holds.
async fn check_mailboxes_and_messages_match_an_import(kind: Kind) {
    let Some(server) = ImapServer::start(kind, &["ann@example.com"]) else {
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
    server.append("ann@example.com", "INBOX", &messages, "\\Seen", base_time);
    let messages = stored_as_appended(&server, "ann@example.com", &messages);
    server.create("ann@example.com", "Work/Projects");
    // "Entwürfe" in modified UTF-7 (RFC 3501 §5.1.3).
    server.create("ann@example.com", "Entw&APw-rfe");
    let proxy = spawn_proxy(&server).await;
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
    assert_mailboxes(&mailbox_ids(&proxy, &ann).await, messages.len());

    // The same JSON as a standalone import of the octets the server holds.
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
    for arguments in email_get_variants() {
        let mut arguments = arguments;
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

/// Mailboxes: roles from SPECIAL-USE, the hierarchy, subscriptions, a
/// non-ASCII name.
fn assert_mailboxes(mailboxes: &[(String, Value)], in_inbox: usize) {
    let names: Vec<&str> = mailboxes.iter().map(|(n, _)| n.as_str()).collect();
    for name in [
        "INBOX",
        "Drafts",
        "Sent",
        "Trash",
        "Archive",
        "Work",
        "Projects",
        "Entwürfe",
    ] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }
    let by_name = |name: &str| &mailboxes.iter().find(|(n, _)| n == name).unwrap().1;
    assert_eq!(by_name("INBOX")["role"], "inbox");
    for (name, role) in [
        ("Drafts", "drafts"),
        ("Sent", "sent"),
        ("Trash", "trash"),
        ("Archive", "archive"),
    ] {
        assert_eq!(by_name(name)["role"], role, "{name}");
    }
    assert_eq!(by_name("Entwürfe")["role"], Value::Null);
    assert_eq!(by_name("Projects")["parentId"], by_name("Work")["id"]);
    assert_eq!(by_name("Projects")["isSubscribed"], false);
    assert_eq!(by_name("Sent")["isSubscribed"], true);
    assert_eq!(by_name("INBOX")["totalEmails"], in_inbox);
    assert_eq!(mailboxes.len(), 8, "{names:?}");
}

/// Email/get's arguments at every read level, without and with body values.
fn email_get_variants() -> Vec<Value> {
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
    let mut variants = Vec::new();
    for properties in property_sets {
        variants.push(json!({"properties": properties}));
        variants.push(json!({"properties": properties,
            "fetchAllBodyValues": true, "maxBodyValueBytes": 100}));
    }
    variants
}

in_front_of_each!(check_mailboxes_and_messages_match_an_import:
    mailboxes_and_messages_match_an_import_in_front_of_dovecot,
    mailboxes_and_messages_match_an_import_in_front_of_cyrus
);

/// `account list` shows `user` synced and watched as `watch` (within 10 s).
pub(crate) async fn until_listed_as_watched(proxy: &TestApp, user: &str, watch: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let listed = proxy.cli().args(["account", "list"]).output().unwrap();
        let text = String::from_utf8_lossy(&listed.stdout).to_string();
        let line = text
            .lines()
            .find(|l| l.contains(user))
            .unwrap_or_default()
            .to_string();
        if line.contains("\tsynced ") && line.ends_with(&format!(" s ago\twatch {watch}")) {
            return;
        }
        assert!(Instant::now() < deadline, "account list: {text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits (at most 2 s) until `check` holds of the list.
async fn within_two_seconds(
    proxy: &TestApp,
    user: &TestAccount,
    what: &str,
    check: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    until(proxy, user, Duration::from_secs(2), what, check).await
}

/// Another client's flag, MOVE, EXPUNGE and APPEND, in INBOX and in
/// another folder, reach JMAP within two seconds, however the proxy
/// watches (`account list` says how).
async fn check_another_clients_changes_reach_jmap_within_two_seconds(kind: Kind) {
    let messages = golden_crlf(4);
    let Some((server, proxy, bob, first)) =
        proxy_with_inbox(kind, "bob@example.com", &messages, |_| {}).await
    else {
        return;
    };
    // How the proxy watches: NOTIFY, or IDLE on INBOX and STATUS of the
    // rest (the poll is 300 s: what shows within 2 s came through these).
    until_listed_as_watched(&proxy, "bob@example.com", server.watch()).await;
    let mailboxes = mailbox_ids(&proxy, &bob).await;
    let inbox = mailbox_named(&mailboxes, "INBOX");
    let archive = mailbox_named(&mailboxes, "Archive");
    let ids: Vec<String> = first
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect();
    let state = proxy.state(&bob, "Email").await;

    // A flag set by another client.
    server.client(
        "bob@example.com",
        "m.select('INBOX')\nm.uid('STORE', '1', '+FLAGS', '(\\\\Flagged)')",
    );
    within_two_seconds(&proxy, &bob, "a flag", |list| {
        list.iter()
            .any(|e| e["id"] == ids[0] && e["keywords"] == json!({"$flagged": true}))
    })
    .await;
    let changes = proxy
        .call_in(&bob, "Email/changes", json!({"sinceState": state}))
        .await;
    assert_eq!(changes["updated"], json!([ids[0]]), "{changes}");

    // A MOVE keeps the JMAP id and changes mailboxIds.
    server.client(
        "bob@example.com",
        "m.select('INBOX')\nr = m.uid('MOVE', '2', 'Archive')\nassert r[0] == 'OK', r",
    );
    within_two_seconds(&proxy, &bob, "a move", |list| {
        list.iter()
            .any(|e| e["id"] == ids[1] && e["mailboxIds"] == json!({archive.clone(): true}))
    })
    .await;
    // A flag in a folder other than INBOX.
    server.client(
        "bob@example.com",
        "m.select('Archive')\nr = m.uid('STORE', '1', '+FLAGS', '(\\\\Answered)')\nassert r[0] == 'OK', r",
    );
    within_two_seconds(&proxy, &bob, "a flag in Archive", |list| {
        list.iter()
            .any(|e| e["id"] == ids[1] && e["keywords"] == json!({"$answered": true}))
    })
    .await;

    // An EXPUNGE destroys.
    server.client(
        "bob@example.com",
        "m.select('INBOX')\nm.uid('STORE', '3', '+FLAGS', '(\\\\Deleted)')\nm.expunge()",
    );
    let after = within_two_seconds(&proxy, &bob, "an expunge", |list| {
        list.len() == 3 && !list.iter().any(|e| e["id"] == ids[2])
    })
    .await;
    assert!(
        after
            .iter()
            .any(|e| e["id"] == ids[0] && e["mailboxIds"] == json!({inbox.clone(): true}))
    );

    // An APPEND shows up, in INBOX and in another folder.
    let extra = crlf(b"From: carol@example.com\nTo: bob@example.com\nSubject: new\n\nhello\n");
    server.append("bob@example.com", "INBOX", &[extra], "", 1_800_000_000);
    within_two_seconds(&proxy, &bob, "an append", |list| list.len() == 4).await;
    let filed = crlf(b"From: carol@example.com\nTo: bob@example.com\nSubject: filed\n\nhi\n");
    server.append("bob@example.com", "Archive", &[filed], "", 1_800_000_100);
    let appended =
        within_two_seconds(&proxy, &bob, "an append to Archive", |list| list.len() == 5).await;
    let new_id = appended[3]["id"].clone();
    assert_uid_validity_reset_keeps_ids(&server, &proxy, &bob, &appended, &new_id).await;
}

/// A UIDVALIDITY reset of INBOX keeps the ids of unchanged messages. Only
/// in front of Dovecot, whose `doveadm mailbox update` sets it: Cyrus has
/// no command that does.
async fn assert_uid_validity_reset_keeps_ids(
    server: &ImapServer,
    proxy: &TestApp,
    bob: &TestAccount,
    appended: &[Value],
    new_id: &Value,
) {
    let ImapServer::Dovecot(dovecot) = server else {
        return;
    };
    let before: Vec<Value> = appended.iter().map(|e| e["id"].clone()).collect();
    crate::support::run_ok(
        std::process::Command::new("doveadm")
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
    server.client(
        "bob@example.com",
        "m.select('INBOX')\nm.store('1', '+FLAGS', '(\\\\Seen)')",
    );
    let reset = until(
        proxy,
        bob,
        Duration::from_secs(5),
        "a UIDVALIDITY reset",
        |list| list.iter().any(|e| e["keywords"].get("$seen").is_some()),
    )
    .await;
    let after_reset: Vec<Value> = reset.iter().map(|e| e["id"].clone()).collect();
    assert_eq!(after_reset, before);
    assert!(after_reset.contains(new_id));
}

in_front_of_each!(check_another_clients_changes_reach_jmap_within_two_seconds:
    another_clients_changes_reach_jmap_within_two_seconds_in_front_of_dovecot,
    another_clients_changes_reach_jmap_within_two_seconds_in_front_of_cyrus
);

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
pub(crate) async fn until_received(
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
pub(crate) fn golden_crlf(count: usize) -> Vec<Vec<u8>> {
    golden_messages()
        .iter()
        .take(count)
        .map(|raw| crlf(raw))
        .collect()
}

/// Waits (at most 30 s) until the first sync shows `count` emails; returns them.
pub(crate) async fn first_sync(proxy: &TestApp, user: &TestAccount, count: usize) -> Vec<Value> {
    let limit = Duration::from_secs(30);
    until(proxy, user, limit, "the first sync", |list| {
        list.len() == count
    })
    .await
}

/// A server of `kind` whose `user` holds `messages` in INBOX (INTERNALDATE
/// from 1,700,000,000), a proxy in front of it with its upstream options
/// changed by `change`, and `user` logged in: (server, proxy, account, the
/// emails of the first sync); `None` when that server is not at hand.
pub(crate) async fn proxy_with_inbox(
    kind: Kind,
    user: &str,
    messages: &[Vec<u8>],
    change: impl FnOnce(&mut UpstreamOptions),
) -> Option<(ImapServer, TestApp, TestAccount, Vec<Value>)> {
    let server = ImapServer::start(kind, &[user])?;
    server.append(user, "INBOX", messages, "", 1_700_000_000);
    let proxy = spawn_proxy_options(&server, change).await;
    let account = proxy_login(&proxy, user).await;
    let first = first_sync(&proxy, &account, messages.len()).await;
    Some((server, proxy, account, first))
}

/// Waits (at most 10 s) until a sync mirrored the upstream mailbox `name`;
/// the mailboxes then.
pub(crate) async fn until_mirrored(
    proxy: &TestApp,
    user: &TestAccount,
    name: &str,
) -> Vec<(String, Value)> {
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

/// A user folder sorts after INBOX and the special-use folders, with the
/// sortOrder a standalone server gives.
async fn check_folders_sort_after_the_roles_as_on_a_standalone_server(kind: Kind) {
    let Some(server) = ImapServer::start(kind, &["lee@example.com"]) else {
        return;
    };
    server.create("lee@example.com", "Aaa");
    let proxy = spawn_proxy(&server).await;
    let lee = proxy_login(&proxy, "lee@example.com").await;
    until_mirrored(&proxy, &lee, "Aaa").await;
    let standalone = spawn_app().await;
    let local = standalone.account("bob@example.com").await;
    assert_sorted_as_standalone(&proxy, &lee, &standalone, &local).await;
}

in_front_of_each!(check_folders_sort_after_the_roles_as_on_a_standalone_server:
    folders_sort_after_the_roles_as_on_a_standalone_server_in_front_of_dovecot,
    folders_sort_after_the_roles_as_on_a_standalone_server_in_front_of_cyrus
);

/// Email/import of a message with raw UTF-8 in its headers: the answer is
/// the email as the server stored it, found by what the server says
/// (APPENDUID), whether it kept the octets (Dovecot) or rewrote them
/// (Cyrus's `munge8bit`); a retry is `alreadyExists`, never a second copy.
async fn check_an_import_is_created_as_stored_and_retried_without_a_copy(kind: Kind) {
    let Some((server, proxy, mia, _)) =
        proxy_with_inbox(kind, "mia@example.com", &[], |_| {}).await
    else {
        return;
    };
    let inbox = mailbox_named(&until_mirrored(&proxy, &mia, "INBOX").await, "INBOX");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/golden");
    let raw = crlf(&std::fs::read(dir.join("raw_utf8_headers.eml")).unwrap());
    assert!(!header_of(&raw).is_ascii(), "raw UTF-8 in its headers");
    let (status, upload) = proxy.upload(&mia, raw.clone()).await;
    assert_eq!(status, 201, "{upload}");
    let import = json!({"accountId": mia.account_id, "emails": {"i": {
        "blobId": upload["blobId"], "mailboxIds": {inbox: true}}}});
    let imported = proxy.call1(&mia, "Email/import", import.clone()).await;
    let created = imported["created"]["i"].clone();
    assert!(created["id"].is_string(), "{imported}");
    let stored = stored_as_appended(&server, "mia@example.com", std::slice::from_ref(&raw));
    // The email is the server's octets: the upload's where it kept them.
    assert_eq!(
        created["blobId"] == upload["blobId"],
        !server.rewrites_8bit_headers(),
        "{created}"
    );
    assert_eq!(created["blobId"], fastview::blob::blob_id_of(&stored[0]));
    assert_eq!(created["size"], stored[0].len());
    let (status, downloaded) = proxy
        .download(&mia, created["blobId"].as_str().unwrap(), "m.eml")
        .await;
    assert_eq!(status, 200);
    assert_eq!(downloaded, stored[0]);
    let got = proxy
        .email_get(&mia, &[&created["id"]], &["blobId", "threadId", "size"])
        .await;
    for property in ["blobId", "threadId", "size"] {
        assert_eq!(got["list"][0][property], created[property], "{property}");
    }
    let listed = first_sync(&proxy, &mia, 1).await;
    assert_eq!(listed[0]["id"], created["id"]);
    // A retry of the same upload is the same email: no second APPEND.
    let again = proxy.call1(&mia, "Email/import", import).await;
    assert_eq!(again["notCreated"]["i"]["type"], "alreadyExists", "{again}");
    assert_eq!(again["notCreated"]["i"]["existingId"], created["id"]);
    assert_eq!(server.flags("mia@example.com", "INBOX").len(), 1);
    let listed = first_sync(&proxy, &mia, 1).await;
    assert_eq!(listed[0]["id"], created["id"]);
}

in_front_of_each!(check_an_import_is_created_as_stored_and_retried_without_a_copy:
    an_import_is_created_as_stored_and_retried_without_a_copy_in_front_of_dovecot,
    an_import_is_created_as_stored_and_retried_without_a_copy_in_front_of_cyrus
);

/// Without `--upstream-smtp` the session offers no submission (whatever
/// the IMAP server): the methods are unknown.
async fn check_submission_is_offered_only_with_a_submission_server(kind: Kind) {
    let Some((_server, proxy, noa, _)) =
        proxy_with_inbox(kind, "noa@example.com", &[], |_| {}).await
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

in_front_of_each!(check_submission_is_offered_only_with_a_submission_server:
    submission_is_offered_only_with_a_submission_server_in_front_of_dovecot,
    submission_is_offered_only_with_a_submission_server_in_front_of_cyrus
);

/// The upstream stopped: a credential it accepted recently reads from the
/// mirror (never one it replaced or never saw), writes are
/// serverUnavailable; back, a write goes through within seconds.
async fn check_reads_go_on_through_an_upstream_outage_and_writes_wait_for_its_return(kind: Kind) {
    let Some(server) = ImapServer::start(kind, &["olga@example.com", "pavel@example.com"]) else {
        return;
    };
    let messages = golden_crlf(3);
    server.append("olga@example.com", "INBOX", &messages, "", 1_700_000_000);
    let proxy = spawn_proxy(&server).await;
    let without_grace =
        spawn_proxy_options(&server, |options| options.outage_grace = Duration::ZERO).await;
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
    server.set_passwords(&[
        ("olga@example.com", PASSWORD),
        ("pavel@example.com", "changed"),
    ]);
    assert_eq!(pavel_with("changed").await, 200);

    server.stop();
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
    server.start_again();
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
    let flags = server.flags("olga@example.com", "INBOX");
    let flagged = flags.iter().filter(|line| line.contains("\\Flagged"));
    assert_eq!(flagged.count(), 1, "{flags:?}");
}

in_front_of_each!(check_reads_go_on_through_an_upstream_outage_and_writes_wait_for_its_return:
    reads_go_on_through_an_upstream_outage_and_writes_wait_for_its_return_in_front_of_dovecot,
    reads_go_on_through_an_upstream_outage_and_writes_wait_for_its_return_in_front_of_cyrus
);

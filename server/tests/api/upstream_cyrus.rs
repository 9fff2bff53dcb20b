//! Fastview in front of a real Cyrus IMAP 3.6 (issue 45), started here from
//! Debian's unpacked packages (`tests/common/cyrus.rs`,
//! `tools/cyrus-unpack.sh`): the IMAP proxy reads what another client
//! APPENDed, folder names included, and writes keywords back; the JMAP proxy
//! in front of Cyrus's own JMAP answers with Cyrus's ids. Skipped without
//! `FASTVIEW_TEST_CYRUS_ROOT`, unless `FASTVIEW_TEST_REQUIRE` names `cyrus`.

use std::path::Path;
use std::time::{Duration, Instant};

use fastview::app::ServeOptions;
use fastview::proxy::ProxyOptions;
use fastview::proxy::imap::{UpstreamOptions, UpstreamUrl};
use fastview::proxy::jmap::{JmapUpstreamOptions, JmapUpstreamUrl};
use serde_json::{Value, json};

use crate::support::cyrus::Cyrus;
use crate::support::{PASSWORD, TestAccount, TestApp, crlf, proxy_login, spawn_in_front_of};

const ANN: &str = "ann@example.com";

/// INTERNALDATE of the first message appended; the next are a second apart.
const BASE_TIME: i64 = 1_700_000_000;

/// Golden fixtures by name: each message with CRLF line ends (as IMAP
/// carries it) and the subject its `.json` gives.
fn fixtures(names: &[&str]) -> Vec<(Vec<u8>, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/golden");
    names
        .iter()
        .map(|name| {
            let raw = std::fs::read(dir.join(format!("{name}.eml"))).unwrap();
            let golden: Value =
                serde_json::from_slice(&std::fs::read(dir.join(format!("{name}.json"))).unwrap())
                    .unwrap();
            let subject = golden["subject"].as_str().unwrap().to_string();
            (crlf(&raw), subject)
        })
        .collect()
}

fn messages(fixtures: &[(Vec<u8>, String)]) -> Vec<Vec<u8>> {
    fixtures.iter().map(|(raw, _)| raw.clone()).collect()
}

/// The status of `GET /jmap/session` as `login` with `password`.
async fn session_status(proxy: &TestApp, login: &str, password: &str) -> u16 {
    proxy
        .get_as(format!("{}/jmap/session", proxy.base), login, password)
        .await
        .status()
        .as_u16()
}

/// Email/query (receivedAt ascending) and Email/get of what it finds.
fn query_and_get(account_id: &str) -> Value {
    json!([
        ["Email/query", {"accountId": account_id,
            "sort": [{"property": "receivedAt", "isAscending": true}]}, "0"],
        ["Email/get", {"accountId": account_id,
            "#ids": {"resultOf": "0", "name": "Email/query", "path": "/ids"},
            "properties": ["id", "subject", "mailboxIds", "keywords", "receivedAt"]}, "1"]
    ])
}

/// Waits (at most 10 s) until the proxy lists `count` emails; returns them.
async fn until_listed(proxy: &TestApp, user: &TestAccount, count: usize) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let responses = proxy.call(user, query_and_get(&user.account_id)).await;
        let list = responses[1][1]["list"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if list.len() == count {
            return list;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{count} emails: not within 10 s; the proxy has {responses:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Mailbox ids by name, and the whole Mailbox objects.
async fn mailboxes(proxy: &TestApp, user: &TestAccount) -> Vec<Value> {
    proxy
        .call1(user, "Mailbox/get", json!({"accountId": user.account_id}))
        .await["list"]
        .as_array()
        .unwrap()
        .clone()
}

fn named<'a>(mailboxes: &'a [Value], name: &str) -> &'a Value {
    mailboxes
        .iter()
        .find(|mailbox| mailbox["name"] == name)
        .unwrap_or_else(|| panic!("no mailbox {name} in {mailboxes:#?}"))
}

/// A Fastview in front of Cyrus's IMAP, listening with a long poll (so
/// what it sees within seconds came through IDLE or its own writes).
async fn spawn_imap_proxy(cyrus: &Cyrus) -> TestApp {
    let url = UpstreamUrl::parse(&cyrus.imap_url()).unwrap();
    let upstream = UpstreamOptions {
        url: url.clone(),
        poll: Duration::from_secs(300),
        poll_active: Duration::from_secs(1),
        idle: Duration::from_secs(1800),
        cache_bytes: 0,
        smtp: None,
        master: None,
        outage_grace: Duration::from_secs(4 * 3600),
        syncs_at_once: 4,
    };
    let proxy =
        spawn_in_front_of(ServeOptions::default(), Some(ProxyOptions::Imap(upstream))).await;
    // What `serve --upstream` records in the data dir.
    proxy
        .app
        .store
        .set_upstream_source(&url.to_string())
        .await
        .unwrap();
    proxy
}

#[tokio::test]
async fn the_imap_proxy_reads_cyrus_mail_and_writes_keywords_to_it() {
    let Some(cyrus) = Cyrus::start(&[(ANN, PASSWORD)]) else {
        return;
    };
    let inbox = fixtures(&["plain_ascii", "encoded_words_adjacent", "legacy_koi8r_qp"]);
    let drafts = fixtures(&["mixed_with_attachment", "message_ids"]);
    // "Entwürfe" in modified UTF-7 (RFC 3501 §5.1.3).
    cyrus.python_imap(
        ANN,
        PASSWORD,
        "r = m.create('\"Entw&APw-rfe\"')\nassert r[0] == 'OK', r",
    );
    cyrus.append((ANN, PASSWORD), "INBOX", &messages(&inbox), "", BASE_TIME);
    let later = BASE_TIME + 100;
    cyrus.append(
        (ANN, PASSWORD),
        "Entw&APw-rfe",
        &messages(&drafts),
        "\\Seen",
        later,
    );

    let proxy = spawn_imap_proxy(&cyrus).await;
    // Cyrus checks passwords.
    assert_eq!(session_status(&proxy, ANN, "wrong").await, 401);
    let ann = proxy_login(&proxy, ANN).await;
    let list = until_listed(&proxy, &ann, 5).await;

    let mailboxes = mailboxes(&proxy, &ann).await;
    let inbox_id = named(&mailboxes, "INBOX")["id"].clone();
    let folder_id = named(&mailboxes, "Entwürfe")["id"].clone();
    assert_eq!(named(&mailboxes, "INBOX")["role"], "inbox");
    for (name, role) in [
        ("Drafts", "drafts"),
        ("Sent", "sent"),
        ("Trash", "trash"),
        ("Archive", "archive"),
    ] {
        assert_eq!(named(&mailboxes, name)["role"], role, "{name}");
    }
    assert_eq!(named(&mailboxes, "Entwürfe")["role"], Value::Null);
    assert_eq!(named(&mailboxes, "Entwürfe")["totalEmails"], 2);
    assert_eq!(mailboxes.len(), 6, "{mailboxes:#?}");

    let expected = inbox
        .iter()
        .map(|(_, subject)| (subject, &inbox_id, json!({})))
        .chain(
            drafts
                .iter()
                .map(|(_, subject)| (subject, &folder_id, json!({"$seen": true}))),
        );
    for (email, (subject, mailbox, keywords)) in list.iter().zip(expected) {
        assert_eq!(email["subject"], *subject, "{email}");
        assert_eq!(
            email["mailboxIds"],
            json!({mailbox.as_str().unwrap(): true})
        );
        assert_eq!(email["keywords"], keywords, "{email}");
    }
    assert_eq!(list[0]["receivedAt"], "2023-11-14T22:13:20Z");

    // A keyword set through Fastview is Cyrus's flag.
    let first = list[0]["id"].as_str().unwrap();
    let set = proxy
        .call1(
            &ann,
            "Email/set",
            json!({"accountId": ann.account_id,
                "update": {first: {"keywords/$flagged": true}}}),
        )
        .await;
    assert!(set["updated"].get(first).is_some(), "{set}");
    let flags = cyrus.python_imap(
        ANN,
        PASSWORD,
        "m.select('INBOX')\nfor line in m.uid('FETCH', '1:*', '(FLAGS)')[1]:\n    print(line.decode())",
    );
    let flags: Vec<&str> = flags.lines().collect();
    assert_eq!(flags.len(), 3, "{flags:?}");
    assert!(flags[0].contains("\\Flagged"), "{flags:?}");
    assert!(!flags[1].contains("\\Flagged"), "{flags:?}");
}

/// `body` POSTed to Cyrus's JMAP API as `login`.
async fn cyrus_api(client: &reqwest::Client, api_url: &str, login: &str, body: &Value) -> Value {
    let response = client
        .post(api_url)
        .basic_auth(login, Some(PASSWORD))
        .json(body)
        .send()
        .await
        .expect("Cyrus's JMAP API");
    assert_eq!(response.status(), 200);
    response.json().await.expect("JSON")
}

#[tokio::test]
async fn the_jmap_proxy_in_front_of_cyrus_answers_cyrus_ids() {
    let Some(cyrus) = Cyrus::start(&[(ANN, PASSWORD)]) else {
        return;
    };
    let inbox = fixtures(&[
        "plain_ascii",
        "alternative",
        "message_ids",
        "legacy_iso2022jp",
    ]);
    cyrus.append((ANN, PASSWORD), "INBOX", &messages(&inbox), "", BASE_TIME);

    // Cyrus's own session.
    let client = reqwest::Client::new();
    let (direct_session, api_url) = cyrus.session(ANN, PASSWORD).await;

    let url = JmapUpstreamUrl::parse(&cyrus.jmap_url()).unwrap();
    let options = JmapUpstreamOptions::new(url);
    let proxy = spawn_in_front_of(ServeOptions::default(), Some(ProxyOptions::Jmap(options))).await;
    assert_eq!(session_status(&proxy, ANN, "wrong").await, 401);
    let ann = proxy_login(&proxy, ANN).await;
    let session = proxy.session(&ann).await;
    assert_eq!(
        session["primaryAccounts"],
        direct_session["primaryAccounts"]
    );
    assert_eq!(session["username"], ANN);
    assert_eq!(session["apiUrl"], format!("{}/jmap/api", proxy.base));

    let body = json!({
        "using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
        "methodCalls": query_and_get(&ann.account_id),
    });
    let direct = cyrus_api(&client, &api_url, ANN, &body).await;
    let proxied = proxy.call(&ann, query_and_get(&ann.account_id)).await;
    let direct = direct["methodResponses"].as_array().unwrap();
    assert_eq!(proxied[0][1]["ids"], direct[0][1]["ids"]);
    let ids = direct[0][1]["ids"].as_array().unwrap();
    assert_eq!(ids.len(), inbox.len(), "{direct:#?}");
    assert_eq!(proxied[1][1]["list"], direct[1][1]["list"]);
    let subjects: Vec<&Value> = proxied[1][1]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|email| &email["subject"])
        .collect();
    let expected: Vec<Value> = inbox.iter().map(|(_, subject)| json!(subject)).collect();
    assert_eq!(subjects, expected.iter().collect::<Vec<_>>());
}

/// Waits (at most 10 s) until the first sync mirrored INBOX; the mailboxes.
async fn until_synced(proxy: &TestApp, user: &TestAccount) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let list = mailboxes(proxy, user).await;
        if list.iter().any(|mailbox| mailbox["name"] == "INBOX") {
            return list;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the first sync: not within 10 s; {list:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The octets of every message of `mailbox` as Cyrus holds them, by UID.
fn cyrus_messages(cyrus: &Cyrus, mailbox: &str) -> Vec<Vec<u8>> {
    let out = cyrus.python_imap(
        ANN,
        PASSWORD,
        &format!(
            "m.select({mailbox:?})\ntyp, data = m.uid('FETCH', '1:*', '(BODY.PEEK[])')\n\
             for item in data:\n    if isinstance(item, tuple):\n        print(item[1].hex())"
        ),
    );
    out.lines().map(unhex).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

#[tokio::test]
async fn an_import_cyrus_rewrites_is_created_as_stored_and_retried_without_a_copy() {
    let Some(cyrus) = Cyrus::start(&[(ANN, PASSWORD)]) else {
        return;
    };
    let proxy = spawn_imap_proxy(&cyrus).await;
    let ann = proxy_login(&proxy, ANN).await;
    let inbox = named(&until_synced(&proxy, &ann).await, "INBOX")["id"].clone();
    let (raw, subject) = fixtures(&["raw_utf8_headers"]).remove(0);
    assert!(!raw.is_ascii(), "the fixture has raw UTF-8 in its headers");
    let (status, upload) = proxy.upload(&ann, raw.clone()).await;
    assert_eq!(status, 201, "{upload}");
    let import = json!({"accountId": ann.account_id, "emails": {"i": {
        "blobId": upload["blobId"], "mailboxIds": {inbox.as_str().unwrap(): true}}}});

    let imported = proxy.call1(&ann, "Email/import", import.clone()).await;
    let created = imported["created"]["i"].clone();
    assert!(created["id"].is_string(), "{imported}");
    // Cyrus stored other octets (munge8bit: each 8-bit header octet is X).
    let stored = cyrus_messages(&cyrus, "INBOX");
    assert_eq!(stored.len(), 1);
    assert_ne!(stored[0], raw);
    let header_end = stored[0].windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    assert!(stored[0][..header_end].is_ascii());
    // The answer is the email as stored: Cyrus's octets.
    assert_ne!(created["blobId"], upload["blobId"]);
    assert_eq!(created["size"], stored[0].len());
    let (status, downloaded) = proxy
        .download(&ann, created["blobId"].as_str().unwrap(), "m.eml")
        .await;
    assert_eq!(status, 200);
    assert_eq!(downloaded, stored[0]);
    let got = proxy
        .email_get(
            &ann,
            &[&created["id"]],
            &["blobId", "threadId", "size", "subject"],
        )
        .await;
    let email = &got["list"][0];
    for property in ["blobId", "threadId", "size"] {
        assert_eq!(email[property], created[property], "{property}: {got}");
    }
    assert_ne!(
        email["subject"],
        subject.as_str(),
        "Cyrus's subject, not the one sent"
    );
    let listed = until_listed(&proxy, &ann, 1).await;
    assert_eq!(listed[0]["id"], created["id"]);

    // A retry of the same upload is the same email: no second APPEND.
    let again = proxy.call1(&ann, "Email/import", import).await;
    assert_eq!(again["notCreated"]["i"]["type"], "alreadyExists", "{again}");
    assert_eq!(again["notCreated"]["i"]["existingId"], created["id"]);
    assert_eq!(cyrus_messages(&cyrus, "INBOX").len(), 1);
    let listed = until_listed(&proxy, &ann, 1).await;
    assert_eq!(listed[0]["id"], created["id"]);
}

#[tokio::test]
async fn cyrus_folders_sort_after_the_roles_as_on_a_standalone_server() {
    let Some(cyrus) = Cyrus::start(&[(ANN, PASSWORD)]) else {
        return;
    };
    cyrus.python_imap(ANN, PASSWORD, "r = m.create('Aaa')\nassert r[0] == 'OK', r");
    let proxy = spawn_imap_proxy(&cyrus).await;
    let ann = proxy_login(&proxy, ANN).await;
    until_synced(&proxy, &ann).await;
    let standalone = crate::support::spawn_app().await;
    let local = standalone.account("bob@example.com").await;
    crate::upstream_imap::assert_sorted_as_standalone(&proxy, &ann, &standalone, &local).await;
}

#[tokio::test]
async fn another_clients_change_in_any_cyrus_folder_shows_without_notify() {
    let Some(cyrus) = Cyrus::start(&[(ANN, PASSWORD)]) else {
        return;
    };
    let work = fixtures(&["plain_ascii", "message_ids"]);
    cyrus.python_imap(
        ANN,
        PASSWORD,
        "r = m.create('Work')\nassert r[0] == 'OK', r",
    );
    cyrus.append((ANN, PASSWORD), "Work", &messages(&work), "", BASE_TIME);
    // The proxy's poll is 300 s: what shows within seconds came through
    // IDLE on INBOX or the STATUS of the other folders (Cyrus has no NOTIFY).
    let proxy = spawn_imap_proxy(&cyrus).await;
    let ann = proxy_login(&proxy, ANN).await;
    let list = until_listed(&proxy, &ann, 2).await;
    assert_eq!(list[0]["keywords"], json!({}));
    for (round, flag) in ["\\\\Flagged", "\\\\Answered"].iter().enumerate() {
        cyrus.python_imap(
            ANN,
            PASSWORD,
            &format!("m.select('Work')\nr = m.uid('STORE', '1', '+FLAGS', '({flag})')\nassert r[0] == 'OK', r"),
        );
        let keyword = ["$flagged", "$answered"][round];
        let started = Instant::now();
        loop {
            let list = proxy.call(&ann, query_and_get(&ann.account_id)).await;
            if list[1][1]["list"][0]["keywords"].get(keyword).is_some() {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(15),
                "{keyword} in Work: {list:#?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    // `account list` says how the account is watched.
    let listed = proxy.cli().args(["account", "list"]).output().unwrap();
    let text = String::from_utf8_lossy(&listed.stdout).to_string();
    assert!(
        text.lines()
            .any(|line| line.contains(ANN) && line.ends_with("\twatch idle+status")),
        "{text}"
    );
}

//! Email/set `create` (RFC 8621 §4.6): a draft made from JSON round-trips
//! through Email/get at every read level, its raw message parses in
//! Python's `email` package to the same parts, each error names what is
//! wrong, and creation ids work within the call and across calls.

use std::io::Write;
use std::process::{Command, Stdio};

use fastview::jmap::Limits;
use serde_json::{Value, json};

use crate::support::{TestAccount, TestApp, spawn_app_with_limits, spawn_with_accounts};

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR inline logo octets \xff\xfe\x00";
const PDF: &[u8] = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj << >> endobj\n\0binary\n";
const TEXT: &str = "Hello Zoë,\n\nthe plan is attached.\n-- \nJosé\n";
const HTML: &str =
    "<p>Hello Zoë,</p>\n<p><img src=\"cid:logo@example.com\"> the plan is attached.</p>\n";

/// The create object of the draft every round-trip test makes.
fn draft(user: &TestAccount, png: &str, pdf: &str) -> Value {
    json!({
        "mailboxIds": {user.inbox.clone(): true},
        "keywords": {"$draft": true, "$seen": true},
        "receivedAt": "2024-05-01T10:00:00Z",
        "from": [{"name": "José Müller", "email": "jose@example.com"}],
        "to": [{"name": "Zoë Ünal", "email": "zoe@example.org"}, {"name": null, "email": "bob@example.org"}],
        "cc": [{"name": "Ann", "email": "ann@example.net"}],
        "bcc": [{"name": null, "email": "archive@example.com"}],
        "replyTo": [{"name": "José", "email": "jose+reply@example.com"}],
        "subject": "Café ☕ — the plan for Köln",
        "sentAt": "2024-05-01T12:00:00+02:00",
        "messageId": ["draft-1@example.com"],
        "inReplyTo": ["orig@example.org"],
        "references": ["root@example.org", "orig@example.org"],
        "header:X-Draft-Note:asText": "Überarbeitet",
        "header:List-Post:asURLs": ["mailto:list@example.org"],
        "bodyValues": {"t": {"value": TEXT}, "h": {"value": HTML, "isTruncated": false}},
        "textBody": [{"partId": "t", "type": "text/plain"}],
        "htmlBody": [{"partId": "h", "type": "text/html"}],
        "attachments": [
            {"blobId": png, "type": "image/png", "disposition": "inline", "cid": "logo@example.com", "name": "logo.png"},
            {"blobId": pdf, "type": "application/pdf", "disposition": "attachment", "name": "Plan für Köln.pdf"},
        ],
    })
}

async fn upload(app: &TestApp, user: &TestAccount, bytes: &[u8]) -> String {
    let (status, uploaded) = app.upload(user, bytes.to_vec()).await;
    assert_eq!(status, 201, "{uploaded}");
    uploaded["blobId"].as_str().unwrap().to_string()
}

/// An account with the draft created: (app, user, the `created` entry).
async fn drafted() -> (TestApp, TestAccount, Value) {
    let (app, [user]) = spawn_with_accounts(["jose@example.com"]).await;
    let (png, pdf) = (
        upload(&app, &user, PNG).await,
        upload(&app, &user, PDF).await,
    );
    let response = app
        .call_in(
            &user,
            "Email/set",
            json!({"create": {"d": draft(&user, &png, &pdf)}}),
        )
        .await;
    assert_eq!(response["notCreated"], Value::Null, "{response}");
    let created = response["created"]["d"].clone();
    (app, user, created)
}

async fn get(app: &TestApp, user: &TestAccount, id: &Value, extra: Value) -> Value {
    let mut arguments = json!({"accountId": user.account_id, "ids": [id]});
    for (key, value) in extra.as_object().unwrap() {
        arguments[key] = value.clone();
    }
    let got = app.call1(user, "Email/get", arguments).await;
    assert_eq!(got["notFound"], json!([]), "{got}");
    got["list"][0].clone()
}

async fn download(app: &TestApp, user: &TestAccount, blob_id: &str) -> Vec<u8> {
    let (status, body) = app.download(user, blob_id, "x").await;
    assert_eq!(status, 200, "{blob_id}");
    body
}

fn crlf(text: &str) -> String {
    text.replace('\n', "\r\n")
}

#[tokio::test]
async fn a_draft_round_trips_through_email_get_at_every_read_level() {
    let (app, user, created) = drafted().await;
    let (id, blob) = (&created["id"], created["blobId"].as_str().unwrap());
    assert!(id.as_str().unwrap().starts_with('e'), "{created}");
    assert!(created["threadId"].as_str().unwrap().starts_with('t'));
    let raw = download(&app, &user, blob).await;
    assert_eq!(created["size"], json!(raw.len()));
    // Metadata.
    let metadata = get(&app, &user, id, json!({"properties": ["mailboxIds", "keywords", "receivedAt", "size", "blobId", "threadId"]})).await;
    assert_eq!(
        metadata,
        json!({"id": id, "mailboxIds": {user.inbox.clone(): true}, "keywords": {"$draft": true, "$seen": true},
               "receivedAt": "2024-05-01T10:00:00Z", "size": created["size"], "blobId": blob, "threadId": created["threadId"]})
    );
    // Header properties.
    let headers = get(&app, &user, id, json!({"properties": [
        "from", "to", "cc", "bcc", "replyTo", "sender", "subject", "sentAt", "messageId", "inReplyTo", "references",
        "header:X-Draft-Note:asText", "header:List-Post:asURLs", "header:MIME-Version:asText"]})).await;
    assert_eq!(
        headers,
        json!({
            "id": id,
            "from": [{"name": "José Müller", "email": "jose@example.com"}],
            "to": [{"name": "Zoë Ünal", "email": "zoe@example.org"}, {"name": null, "email": "bob@example.org"}],
            "cc": [{"name": "Ann", "email": "ann@example.net"}],
            "bcc": [{"name": null, "email": "archive@example.com"}],
            "replyTo": [{"name": "José", "email": "jose+reply@example.com"}],
            "sender": null,
            "subject": "Café ☕ — the plan for Köln",
            "sentAt": "2024-05-01T12:00:00+02:00",
            "messageId": ["draft-1@example.com"],
            "inReplyTo": ["orig@example.org"],
            "references": ["root@example.org", "orig@example.org"],
            "header:X-Draft-Note:asText": "Überarbeitet",
            "header:List-Post:asURLs": ["mailto:list@example.org"],
            "header:MIME-Version:asText": "1.0",
        })
    );
    // Fast view: the inline image is not an attachment to offer, the PDF is.
    let fast = get(
        &app,
        &user,
        id,
        json!({"properties": ["preview", "hasAttachment"]}),
    )
    .await;
    assert_eq!(
        fast,
        json!({"id": id, "preview": "Hello Zoë, the plan is attached. -- José", "hasAttachment": true})
    );
    // Full: the structure RFC 8621 §4.1.4 reads back as the lists given.
    let full = get(
        &app,
        &user,
        id,
        json!({
        "properties": ["bodyValues", "textBody", "htmlBody", "attachments"],
        "fetchAllBodyValues": true}),
    )
    .await;
    let part = |part_id: &str, kind: &str, size: usize, extra: Value| {
        let mut part = json!({"partId": part_id, "blobId": format!("{blob}_{part_id}"), "size": size,
            "name": null, "type": kind, "charset": null, "disposition": null, "cid": null,
            "language": null, "location": null});
        for (key, value) in extra.as_object().unwrap() {
            part[key] = value.clone();
        }
        part
    };
    let text = part(
        "2",
        "text/plain",
        crlf(TEXT).len(),
        json!({"charset": "utf-8"}),
    );
    let html = part(
        "4",
        "text/html",
        crlf(HTML).len(),
        json!({"charset": "utf-8"}),
    );
    let image = part(
        "5",
        "image/png",
        PNG.len(),
        json!({"name": "logo.png", "disposition": "inline", "cid": "logo@example.com"}),
    );
    let pdf = part(
        "6",
        "application/pdf",
        PDF.len(),
        json!({"name": "Plan für Köln.pdf", "disposition": "attachment"}),
    );
    assert_eq!(
        full,
        json!({
            "id": id,
            "bodyValues": {
                "2": {"value": TEXT, "isEncodingProblem": false, "isTruncated": false},
                "4": {"value": HTML, "isEncodingProblem": false, "isTruncated": false},
            },
            "textBody": [text],
            "htmlBody": [html],
            "attachments": [image, pdf],
        })
    );
    // The structure RFC 8621 §4.1.4 reads back as the lists given.
    let structure = get(
        &app,
        &user,
        id,
        json!({"properties": ["bodyStructure"],
               "bodyProperties": ["partId", "type", "charset", "disposition", "cid", "name", "subParts"]}),
    )
    .await;
    let leaf = |part_id: &str, kind: &str, extra: Value| {
        let mut part = json!({"partId": part_id, "type": kind, "charset": null,
            "disposition": null, "cid": null, "name": null, "subParts": null});
        for (key, value) in extra.as_object().unwrap() {
            part[key] = value.clone();
        }
        part
    };
    let multipart = |kind: &str, sub_parts: Vec<Value>| {
        json!({"partId": null, "type": kind, "charset": null, "disposition": null, "cid": null,
               "name": null, "subParts": sub_parts})
    };
    let utf8 = || json!({"charset": "utf-8"});
    let expected = multipart(
        "multipart/mixed",
        vec![
            multipart(
                "multipart/alternative",
                vec![
                    leaf("2", "text/plain", utf8()),
                    multipart(
                        "multipart/related",
                        vec![
                            leaf("4", "text/html", utf8()),
                            leaf(
                                "5",
                                "image/png",
                                json!({"name": "logo.png", "disposition": "inline", "cid": "logo@example.com"}),
                            ),
                        ],
                    ),
                ],
            ),
            leaf(
                "6",
                "application/pdf",
                json!({"name": "Plan für Köln.pdf", "disposition": "attachment"}),
            ),
        ],
    );
    assert_eq!(structure, json!({"id": id, "bodyStructure": expected}));
    // The parts' blobs are the octets uploaded.
    assert_eq!(download(&app, &user, &format!("{blob}_5")).await, PNG);
    assert_eq!(download(&app, &user, &format!("{blob}_6")).await, PDF);
}

/// What Python's `email` package (policy.default) reads from a message:
/// subject, from, and per part its type, file name, cid, disposition,
/// charset and content (text decoded, other octets in hex), and the
/// defects it found.
fn python_parts(raw: &[u8]) -> Value {
    const SCRIPT: &str = r#"
import email, json, sys
from email import policy
msg = email.message_from_bytes(sys.stdin.buffer.read(), policy=policy.default)
parts, defects = [], [str(d) for d in msg.defects]
for part in msg.walk():
    defects += [str(d) for d in part.defects]
    entry = {"type": part.get_content_type(), "filename": part.get_filename(),
             "cid": part.get("Content-ID"), "disposition": part.get_content_disposition()}
    if not part.is_multipart():
        payload = part.get_payload(decode=True)
        entry["charset"] = part.get_content_charset()
        entry["content"] = (payload.decode(part.get_content_charset())
                            if part.get_content_maintype() == "text" else payload.hex())
    parts.append(entry)
print(json.dumps({"subject": str(msg["subject"]), "from": str(msg["from"]),
                  "to": str(msg["to"]), "parts": parts, "defects": defects}))
"#;
    let mut child = Command::new("python3")
        .args(["-c", SCRIPT])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    child.stdin.take().unwrap().write_all(raw).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "python3 failed");
    serde_json::from_slice(&output.stdout).expect("python3 printed JSON")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test]
async fn the_stored_message_parses_in_python_to_the_same_parts() {
    let (app, user, created) = drafted().await;
    let raw = download(&app, &user, created["blobId"].as_str().unwrap()).await;
    let leaf = |kind: &str,
                filename: Value,
                cid: Value,
                disposition: Value,
                charset: Value,
                content: String| {
        json!({"type": kind, "filename": filename, "cid": cid, "disposition": disposition,
               "charset": charset, "content": content})
    };
    let multipart =
        |kind: &str| json!({"type": kind, "filename": null, "cid": null, "disposition": null});
    assert_eq!(
        python_parts(&raw),
        json!({
            "subject": "Café ☕ — the plan for Köln",
            "from": "José Müller <jose@example.com>",
            "to": "Zoë Ünal <zoe@example.org>, bob@example.org",
            "parts": [
                multipart("multipart/mixed"),
                multipart("multipart/alternative"),
                leaf("text/plain", Value::Null, Value::Null, Value::Null, json!("utf-8"), crlf(TEXT)),
                multipart("multipart/related"),
                leaf("text/html", Value::Null, Value::Null, Value::Null, json!("utf-8"), crlf(HTML)),
                leaf("image/png", json!("logo.png"), json!("<logo@example.com>"), json!("inline"), Value::Null, hex(PNG)),
                leaf("application/pdf", json!("Plan für Köln.pdf"), Value::Null, json!("attachment"), Value::Null, hex(PDF)),
            ],
            "defects": [],
        })
    );
    // Every line of the message is CRLF-terminated and at most 78 characters.
    let text = std::str::from_utf8(&raw).expect("an ASCII message");
    assert!(!text.replace("\r\n", "").contains('\n'));
    assert!(text.split("\r\n").all(|line| line.len() <= 78), "{text}");
}

#[tokio::test]
async fn a_draft_without_date_or_message_id_gets_both() {
    let (app, [user]) = spawn_with_accounts(["ann@example.com"]).await;
    let response = app
        .call_in(
            &user,
            "Email/set",
            json!({"create": {"d": {
                "mailboxIds": {user.inbox.clone(): true},
                "from": [{"email": "ann@example.com"}],
                "bodyValues": {"1": {"value": "short"}},
                "textBody": [{"partId": "1"}],
            }}}),
        )
        .await;
    let id = &response["created"]["d"]["id"];
    let got = get(&app, &user, id, json!({"properties": ["messageId", "sentAt", "receivedAt", "textBody", "bodyValues", "subject"], "fetchTextBodyValues": true})).await;
    let message_id = got["messageId"][0].as_str().expect("a Message-ID");
    assert!(message_id.ends_with("@example.com"), "{got}");
    let sent =
        chrono::DateTime::parse_from_rfc3339(got["sentAt"].as_str().expect("a Date")).unwrap();
    let received =
        chrono::DateTime::parse_from_rfc3339(got["receivedAt"].as_str().unwrap()).unwrap();
    assert!(
        (sent.timestamp() - received.timestamp()).abs() < 60,
        "{got}"
    );
    assert_eq!(got["subject"], Value::Null);
    assert_eq!(got["textBody"][0]["type"], json!("text/plain"));
    let part_id = got["textBody"][0]["partId"].as_str().unwrap();
    assert_eq!(got["bodyValues"][part_id]["value"], json!("short"));
}

#[tokio::test]
async fn invalid_drafts_name_each_offending_property() {
    let (app, [user]) = spawn_with_accounts(["ann@example.com"]).await;
    let inbox = || json!({user.inbox.clone(): true});
    let response = app
        .call_in(&user, "Email/set", json!({"create": {
            "serverSet": {"mailboxIds": inbox(), "id": "e1", "threadId": "t1", "preview": "x"},
            "headers": {"mailboxIds": inbox(), "headers": [{"name": "Subject", "value": "x"}]},
            "twice": {"mailboxIds": inbox(), "subject": "a", "header:Subject:asText": "b"},
            "noMailbox": {"subject": "x"},
            "truncated": {"mailboxIds": inbox(), "bodyValues": {"1": {"value": "x", "isTruncated": true}}, "textBody": [{"partId": "1"}]},
            "encoding": {"mailboxIds": inbox(), "bodyValues": {"1": {"value": "x"}},
                "textBody": [{"partId": "1", "header:Content-Transfer-Encoding": "base64"}]},
            "htmlAsText": {"mailboxIds": inbox(), "bodyValues": {"1": {"value": "x"}}, "textBody": [{"partId": "1", "type": "text/html"}]},
            "both": {"mailboxIds": inbox(), "bodyValues": {"1": {"value": "x"}}, "bodyStructure": {"partId": "1"}, "htmlBody": [{"partId": "1", "type": "text/html"}]},
            "injection": {"mailboxIds": inbox(), "header:X-A:asRaw": "x\r\nBcc: evil@example.com"},
            // Not an addr-spec: would be read back as another address list.
            "badAddress": {"mailboxIds": inbox(), "to": [{"email": "a(@x.com"}, {"email": "victim@example.com"}]},
            "quoteAddress": {"mailboxIds": inbox(), "cc": [{"email": "a\"@x.com"}]},
            "badMessageId": {"mailboxIds": inbox(), "messageId": ["a\"b@c"]},
            "notUtc": {"mailboxIds": inbox(), "receivedAt": "2024-01-01T00:00:00+01:00"},
        }}))
        .await;
    let properties = |id: &str| {
        let error = &response["notCreated"][id];
        assert_eq!(error["type"], json!("invalidProperties"), "{id}: {error}");
        error["properties"].clone()
    };
    assert_eq!(
        properties("serverSet"),
        json!(["id", "preview", "threadId"])
    );
    assert_eq!(properties("headers"), json!(["headers"]));
    assert_eq!(
        properties("twice"),
        json!(["header:Subject:asText", "subject"])
    );
    assert_eq!(properties("noMailbox"), json!(["mailboxIds"]));
    assert_eq!(properties("truncated"), json!(["bodyValues/1/isTruncated"]));
    assert_eq!(
        properties("encoding"),
        json!(["textBody/0/header:Content-Transfer-Encoding"])
    );
    assert_eq!(properties("htmlAsText"), json!(["textBody/0/type"]));
    assert_eq!(properties("both"), json!(["htmlBody"]));
    assert_eq!(properties("injection"), json!(["header:X-A:asRaw"]));
    assert_eq!(properties("badAddress"), json!(["to"]));
    assert_eq!(properties("quoteAddress"), json!(["cc"]));
    assert_eq!(properties("badMessageId"), json!(["messageId"]));
    assert_eq!(properties("notUtc"), json!(["receivedAt"]));
    assert_eq!(response["created"], Value::Null);
    // Nothing was stored.
    let query = app.call_in(&user, "Email/query", json!({})).await;
    assert_eq!(query["ids"], json!([]));
}

#[tokio::test]
async fn blobs_not_found_are_listed() {
    let (app, [user, other]) = spawn_with_accounts(["ann@example.com", "bob@example.com"]).await;
    let theirs = upload(&app, &other, PNG).await;
    let mine = upload(&app, &user, PDF).await;
    let missing = "0".repeat(64);
    let response = app
        .call_in(
            &user,
            "Email/set",
            json!({"create": {"d": {
                "mailboxIds": {user.inbox.clone(): true},
                "attachments": [
                    {"blobId": mine, "type": "application/pdf"},
                    {"blobId": theirs, "type": "image/png"},
                    {"blobId": missing, "type": "image/png"},
                    {"blobId": format!("{mine}_7"), "type": "image/png"},
                    {"blobId": "not-a-blob-id"},
                ],
            }}}),
        )
        .await;
    let error = &response["notCreated"]["d"];
    assert_eq!(error["type"], json!("blobNotFound"), "{response}");
    let mut expected = vec![
        missing,
        "not-a-blob-id".to_string(),
        theirs,
        format!("{mine}_7"),
    ];
    expected.sort();
    assert_eq!(error["notFound"], json!(expected));
    // With those fixed, a part of a stored message is found: the PDF,
    // decoded, as the part of a message of the account.
    let pdf_only = app
        .call_in(&user, "Email/set", json!({"create": {"d": {
            "mailboxIds": {user.inbox.clone(): true},
            "attachments": [{"blobId": mine, "type": "application/pdf", "name": "a.pdf", "disposition": "attachment"}],
        }}}))
        .await;
    let blob = pdf_only["created"]["d"]["blobId"].as_str().unwrap();
    let part_blob = format!("{blob}_1");
    assert_eq!(download(&app, &user, &part_blob).await, PDF);
    let forwarded = app
        .call_in(&user, "Email/set", json!({"create": {"f": {
            "mailboxIds": {user.inbox.clone(): true},
            "attachments": [{"blobId": part_blob, "disposition": "attachment", "name": "again.pdf"},
                            {"blobId": format!("{blob}_9")}],
        }}}))
        .await;
    assert_eq!(
        forwarded["notCreated"]["f"]["notFound"],
        json!([format!("{blob}_9")])
    );
}

#[tokio::test]
async fn a_draft_over_max_size_upload_is_too_large() {
    let app = spawn_app_with_limits(Limits {
        max_size_upload: 8 << 10,
        ..Limits::default()
    })
    .await;
    let user = app.account("ann@example.com").await;
    let blob = upload(&app, &user, &[7u8; 5 << 10]).await;
    let inbox = json!({user.inbox.clone(): true});
    let many: Vec<Value> = (0..257)
        .map(|i| json!({"blobId": format!("{i:064x}")}))
        .collect();
    let response = app
        .call_in(&user, "Email/set", json!({"create": {
            // 5 KiB of octets is 6.8 KiB of base64: twice is over 8 KiB.
            "blobs": {"mailboxIds": inbox, "attachments": [{"blobId": blob}, {"blobId": blob, "name": "copy"}]},
            // One blob fits; its base64 and a 2 KiB text do not.
            "built": {"mailboxIds": inbox, "bodyValues": {"1": {"value": "é".repeat(1 << 10)}},
                "textBody": [{"partId": "1"}], "attachments": [{"blobId": blob}]},
            "fits": {"mailboxIds": inbox, "attachments": [{"blobId": blob}]},
            // More blobs than one Email may name: refused before any lookup.
            "many": {"mailboxIds": inbox, "attachments": many},
        }}))
        .await;
    assert_eq!(
        response["notCreated"]["many"]["type"],
        json!("tooLarge"),
        "{response}"
    );
    assert_eq!(
        response["notCreated"]["blobs"]["type"],
        json!("tooLarge"),
        "{response}"
    );
    assert_eq!(
        response["notCreated"]["built"]["type"],
        json!("tooLarge"),
        "{response}"
    );
    assert!(response["created"]["fits"]["size"].as_u64().unwrap() <= 8 << 10);
}

#[tokio::test]
async fn replacing_a_draft_is_create_and_destroy_in_one_call() {
    let (app, [user]) = spawn_with_accounts(["ann@example.com"]).await;
    let version = |text: &str| {
        json!({"mailboxIds": {user.inbox.clone(): true}, "keywords": {"$draft": true},
               "subject": "Draft", "bodyValues": {"1": {"value": text}}, "textBody": [{"partId": "1"}]})
    };
    let first = app
        .call_in(
            &user,
            "Email/set",
            json!({"create": {"v1": version("first")}}),
        )
        .await;
    let v1 = first["created"]["v1"]["id"].clone();
    let second = app
        .call_in(&user, "Email/set", json!({"ifInState": first["newState"], "create": {"v2": version("second")}, "destroy": [v1]}),
        )
        .await;
    let v2 = second["created"]["v2"]["id"].clone();
    assert_eq!(second["destroyed"], json!([v1]), "{second}");
    assert_eq!(second["oldState"], first["newState"]);
    let got = app.email_get(&user, &[&v1, &v2], &["preview"]).await;
    assert_eq!(got["list"], json!([{"id": v2, "preview": "second"}]));
    assert_eq!(got["notFound"], json!([v1]));
    // A stale ifInState changes nothing.
    let stale = app
        .call(
            &user,
            json!([["Email/set", {"accountId": user.account_id,
            "ifInState": first["newState"], "create": {"v3": version("third")}}]]),
        )
        .await;
    assert_eq!(stale[0][1]["type"], json!("stateMismatch"));
}

#[tokio::test]
async fn a_creation_id_names_the_new_email_in_later_calls() {
    let (app, [user]) = spawn_with_accounts(["ann@example.com"]).await;
    let responses = app
        .call(&user, json!([
            ["Email/set", {"accountId": user.account_id, "create": {"d": {
                "mailboxIds": {user.inbox.clone(): true}, "subject": "Hi",
                "bodyValues": {"1": {"value": "body"}}, "textBody": [{"partId": "1"}]}}}],
            ["Email/set", {"accountId": user.account_id, "update": {"#d": {"keywords/$seen": true}}}],
            ["Email/query", {"accountId": user.account_id}],
            ["Email/get", {"accountId": user.account_id,
                "#ids": {"resultOf": "2", "name": "Email/query", "path": "/ids"},
                "properties": ["subject", "keywords"]}],
            ["Email/set", {"accountId": user.account_id, "destroy": ["#d", "#unknown"]}],
        ]))
        .await;
    let id = responses[0][1]["created"]["d"]["id"].clone();
    assert_eq!(
        responses[1][1]["updated"],
        json!({id.as_str().unwrap(): null}),
        "{}",
        responses[1]
    );
    assert_eq!(
        responses[3][1]["list"],
        json!([{"id": id, "subject": "Hi", "keywords": {"$seen": true}}])
    );
    assert_eq!(responses[4][1]["destroyed"], json!([id]));
    assert_eq!(
        responses[4][1]["notDestroyed"]["#unknown"]["type"],
        json!("notFound")
    );
}

#[tokio::test]
async fn a_draft_over_the_quota_is_refused_and_leaves_nothing() {
    let (app, [user]) = spawn_with_accounts(["ann@example.com"]).await;
    let output = app
        .cli()
        .args(["account", "set", &user.email, "--quota", "1K"])
        .output()
        .expect("account set");
    assert!(output.status.success(), "{output:?}");
    let create = |text: String| {
        json!({"accountId": user.account_id, "create": {"d": {
            "mailboxIds": {user.inbox.clone(): true},
            "bodyValues": {"1": {"value": text}}, "textBody": [{"partId": "1"}]}}})
    };
    let refused = app
        .call1(&user, "Email/set", create("x".repeat(2 << 10)))
        .await;
    assert_eq!(
        refused["notCreated"]["d"]["type"],
        json!("overQuota"),
        "{refused}"
    );
    assert_eq!(refused["oldState"], refused["newState"]);
    let fits = app.call1(&user, "Email/set", create("small".into())).await;
    assert!(fits["created"]["d"]["id"].is_string(), "{fits}");
}

#[tokio::test]
async fn a_body_structure_and_every_header_form_round_trip() {
    let (app, [user]) = spawn_with_accounts(["ann@example.com"]).await;
    let pdf = upload(&app, &user, PDF).await;
    let headers = json!({
        "header:X-Raw": " kept  as\r\n  written",
        "header:X-Text:asText": "Ünïcode text",
        "header:X-Addresses:asAddresses": [{"name": "Zoë", "email": "zoe@example.org"}],
        "header:X-Groups:asGroupedAddresses": [
            {"name": "Team", "addresses": [{"name": "Ann", "email": "ann@example.com"}, {"name": null, "email": "bob@example.com"}]},
            {"name": null, "addresses": [{"name": null, "email": "cy@example.com"}]},
        ],
        "header:X-Ids:asMessageIds": ["a@example.com", "b@example.com"],
        "header:X-When:asDate": "2024-02-29T23:59:59-05:00",
        "header:List-Unsubscribe:asURLs": ["https://example.com/u", "mailto:u@example.com"],
        "header:Comments:asText:all": ["first", "second"],
    });
    let mut create = json!({
        "mailboxIds": {user.inbox.clone(): true},
        "bodyValues": {"a": {"value": "plain part\n"}, "b": {"value": "<b>html</b>"}},
        "bodyStructure": {"type": "multipart/mixed", "subParts": [
            {"type": "multipart/alternative", "subParts": [
                {"partId": "a", "type": "text/plain", "language": ["en", "de"], "header:X-Part:asText": "on a part"},
                {"partId": "b", "type": "text/html", "location": "https://example.com/b.html"},
            ]},
            {"blobId": pdf, "type": "application/pdf", "disposition": "attachment", "name": "p.pdf", "size": 999999},
        ]},
    });
    for (key, value) in headers.as_object().unwrap() {
        create[key] = value.clone();
    }
    let response = app
        .call_in(&user, "Email/set", json!({"create": {"s": create}}))
        .await;
    let id = &response["created"]["s"]["id"];
    assert!(id.is_string(), "{response}");
    let properties: Vec<&String> = headers.as_object().unwrap().keys().collect();
    let got = get(&app, &user, id, json!({"properties": properties})).await;
    // Every form reads back as given; the raw value with its leading space
    // and its folding.
    let mut expected = headers.clone();
    expected["id"] = id.clone();
    assert_eq!(got, expected);
    let structure = get(
        &app,
        &user,
        id,
        json!({"properties": ["bodyStructure"], "bodyProperties":
            ["partId", "type", "size", "name", "disposition", "language", "location", "header:X-Part:asText", "subParts"]}),
    )
    .await;
    let leaf = |part_id: &str, kind: &str, size: usize, extra: Value| {
        let mut part = json!({"partId": part_id, "type": kind, "size": size, "name": null,
            "disposition": null, "language": null, "location": null, "header:X-Part:asText": null, "subParts": null});
        for (key, value) in extra.as_object().unwrap() {
            part[key] = value.clone();
        }
        part
    };
    let sub_parts = |value: &Value| value["subParts"].clone();
    assert_eq!(
        sub_parts(&sub_parts(&structure["bodyStructure"])[0]),
        json!([
            leaf(
                "2",
                "text/plain",
                "plain part\r\n".len(),
                json!({"language": ["en", "de"], "header:X-Part:asText": "on a part"})
            ),
            leaf(
                "3",
                "text/html",
                "<b>html</b>".len(),
                json!({"location": "https://example.com/b.html"})
            ),
        ])
    );
    assert_eq!(
        sub_parts(&structure["bodyStructure"])[1],
        leaf(
            "4",
            "application/pdf",
            PDF.len(),
            json!({"name": "p.pdf", "disposition": "attachment"})
        )
    );
}

//! Bad messages: ingest and Email/get never fail a call for one bad message.
//! Each message is stored (through the ingest path, or upload and
//! Email/import), then read back with every property: the call succeeds,
//! with sensible values, in bounded time.

use std::time::{Duration, Instant};

use fastview::jmap::Limits;
use serde_json::{Value, json};

use crate::support::{
    PASSWORD, TestAccount, TestApp, email_properties_and, spawn_app_with_limits,
    spawn_with_accounts,
};

/// Every Email property (RFC 8621 §4.1) and every EmailBodyPart property.
fn all_properties() -> (Value, Value) {
    let properties = email_properties_and(&[
        "bodyValues",
        "textBody",
        "htmlBody",
        "attachments",
        "bodyStructure",
        "headers",
        "header:Subject:asText",
        "header:From:asAddresses:all",
        "header:Date:asDate",
        "header:Message-ID:asMessageIds",
        "header:List-Unsubscribe:asURLs",
        "header:X-Nope",
    ]);
    let body_properties = json!([
        "partId",
        "blobId",
        "size",
        "headers",
        "name",
        "type",
        "charset",
        "disposition",
        "cid",
        "language",
        "location",
        "subParts",
        "header:Content-Type:asText",
    ]);
    (properties, body_properties)
}

/// Reads one email with every property (and, separately, with
/// `properties: null`), asserting both calls succeed within `limit`.
async fn get_everything(app: &TestApp, user: &TestAccount, id: &str, limit: Duration) -> Value {
    let (properties, body_properties) = all_properties();
    let body = json!({
        "using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
        "methodCalls": [
            ["Email/get", {"accountId": user.account_id, "ids": [id], "properties": properties,
                "bodyProperties": body_properties, "fetchAllBodyValues": true}, "all"],
            ["Email/get", {"accountId": user.account_id, "ids": [id], "properties": null,
                "fetchTextBodyValues": true, "fetchHTMLBodyValues": true, "maxBodyValueBytes": 1000}, "default"],
        ],
    });
    let started = Instant::now();
    let response = app
        .client
        .post(format!("{}/jmap/api", app.base))
        .basic_auth(&user.email, Some(PASSWORD))
        .json(&body)
        .send()
        .await
        .expect("send");
    assert_eq!(response.status(), 200);
    let text = response.text().await.expect("body");
    let elapsed = started.elapsed();
    let server = app
        .metric("fastview_jmap_method_duration_seconds_sum{method=\"Email/get\"}")
        .await;
    eprintln!(
        "Email/get of {id}: {elapsed:?} ({server:.3} s in the server so far), {} octets",
        text.len()
    );
    assert!(elapsed < limit, "Email/get took {elapsed:?}");
    // The response parses with serde_json's default recursion limit, as a client's would.
    let response: Value =
        serde_json::from_str(&text).expect("a response any JSON client can parse");
    let responses = response["methodResponses"].as_array().unwrap();
    for response in responses {
        assert_eq!(
            response[0],
            json!("Email/get"),
            "{}",
            &response.to_string()[..500.min(response.to_string().len())]
        );
        assert_eq!(response[1]["notFound"], json!([]));
        assert_eq!(response[1]["list"].as_array().unwrap().len(), 1);
    }
    let email = responses[0][1]["list"][0].clone();
    let default = &responses[1][1]["list"][0];
    // The default properties agree with the full read (body parts differ in
    // their bodyProperties).
    for (key, value) in default.as_object().unwrap() {
        if !["bodyValues", "textBody", "htmlBody", "attachments"].contains(&key.as_str()) {
            assert_eq!(&email[key], value, "{key}");
        }
    }
    email
}

/// The leaf parts of a bodyStructure, depth first.
fn leaves(part: &Value, out: &mut Vec<Value>) {
    match part["subParts"].as_array() {
        Some(children) => children.iter().for_each(|child| leaves(child, out)),
        None => out.push(part.clone()),
    }
}

/// The depth of a bodyStructure (1 for a single part).
fn depth(part: &Value) -> usize {
    1 + part["subParts"]
        .as_array()
        .map_or(0, |children| children.iter().map(depth).max().unwrap_or(0))
}

/// Deterministic pseudo-random bytes (xorshift).
fn garbage(len: usize, mut seed: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u8
        })
        .collect()
}

/// Checks what holds for every email: size, ids, and that every leaf part
/// has a blob, a type and a size.
fn check_common(email: &Value, raw_len: usize) {
    assert_eq!(email["size"], json!(raw_len));
    assert!(
        email["id"].is_string() && email["blobId"].is_string() && email["threadId"].is_string()
    );
    assert!(email["headers"].is_array());
    assert!(email["preview"].is_string());
    assert!(email["hasAttachment"].is_boolean());
    assert!(email["bodyValues"].is_object());
    let structure = &email["bodyStructure"];
    assert!(structure.is_object(), "{structure}");
    let mut parts = Vec::new();
    leaves(structure, &mut parts);
    for part in &parts {
        assert!(part["blobId"].is_string(), "{part}");
        assert!(part["type"].is_string(), "{part}");
        assert!(part["size"].is_u64(), "{part}");
    }
    for list in ["textBody", "htmlBody", "attachments"] {
        assert!(email[list].is_array(), "{list}");
    }
}

#[tokio::test]
async fn unreadable_messages_are_stored_and_served() {
    let (app, [user]) = spawn_with_accounts(["ann@example.com"]).await;
    let header_only =
        b"From: Ann <ann@example.com>\r\nSubject: Only a header\r\nMessage-ID: <h@example.com>"
            .to_vec();
    let header_only_blank =
        b"From: ann@example.com\r\nSubject: Header and blank line\r\n\r\n".to_vec();
    let messages = vec![
        Vec::new(),
        b"\r\n".to_vec(),
        b"\r\n\r\nbody without a header".to_vec(),
        garbage(64 << 10, 1),
        [b"\x00\xff\xfe".as_slice(), &garbage(4096, 2)].concat(),
        header_only.clone(),
        header_only_blank.clone(),
        b"not a header line\r\nnor this\r\n\r\nbody".to_vec(),
        // Found by fuzz/: mail-parser panics on it where debug assertions are on.
        std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/fuzz/mail_parser_invalid_part_id.eml"
        ))
        .unwrap(),
    ];
    let ids = app.ingest(&user, &messages, 1_700_000_000).await;
    assert_eq!(ids.len(), messages.len());
    for (i, (id, raw)) in ids.iter().zip(&messages).enumerate() {
        let email = get_everything(&app, &user, id, Duration::from_secs(10)).await;
        check_common(&email, raw.len());
        // The whole message is readable as body parts: their sizes add up to
        // at most the message's.
        let mut parts = Vec::new();
        leaves(&email["bodyStructure"], &mut parts);
        let total: u64 = parts.iter().map(|p| p["size"].as_u64().unwrap()).sum();
        assert!(total <= raw.len() as u64, "message {i}");
    }
    let email = get_everything(&app, &user, &ids[0], Duration::from_secs(10)).await;
    assert_eq!(email["headers"], json!([]));
    assert_eq!(email["subject"], Value::Null);
    assert_eq!(email["preview"], json!(""));
    let email = get_everything(&app, &user, &ids[5], Duration::from_secs(10)).await;
    assert_eq!(email["subject"], json!("Only a header"));
    assert_eq!(
        email["from"],
        json!([{"name": "Ann", "email": "ann@example.com"}])
    );
    assert_eq!(email["messageId"], json!(["h@example.com"]));
    let email = get_everything(&app, &user, &ids[6], Duration::from_secs(10)).await;
    assert_eq!(email["subject"], json!("Header and blank line"));
    assert_eq!(email["bodyStructure"]["size"], json!(0));
}

#[tokio::test]
async fn long_lines_and_bad_encodings_are_served() {
    let (app, [user]) = spawn_with_accounts(["ann@example.com"]).await;
    let long = "x".repeat(1 << 20);
    let long_lines = format!(
        "From: ann@example.com\r\nSubject: {long}\r\nX-Long: {long}\r\nContent-Type: text/plain\r\n\r\n{long}\r\n{long}"
    )
    .into_bytes();
    let bad_base64 = concat!(
        "From: ann@example.com\r\nSubject: bad base64\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n",
        "--b\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n",
        "!!!! this is *not* base64 @@@@ ==== ñ\r\nSGVsbG8=garbage=\r\n",
        "--b\r\nContent-Type: application/pdf; name=a.pdf\r\nContent-Transfer-Encoding: base64\r\n\r\n",
        "JVBERi0xLjQK====\r\n%%%%\r\n",
        "--b\r\nContent-Type: text/plain; charset=x-no-such-charset\r\nContent-Transfer-Encoding: x-unknown\r\n\r\n",
        "who knows\r\n",
        "--b--\r\n",
    )
    .as_bytes()
    .to_vec();
    let bad_qp = concat!(
        "From: ann@example.com\r\nSubject: =?utf-8?q?bad=ZZ?= =?x-nope?b?!!!?=\r\n",
        "Content-Type: text/html; charset=iso-8859-1\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n",
        "<p>=ZZ =4 =\r\n=\r\n=C3=A9=E9 soft=\r\nbreak=",
    )
    .as_bytes()
    .to_vec();
    let bad_utf8 = [
        b"From: \xff\xfe <a@example.com>\r\nSubject: \xc3\x28 invalid \xe2\x82\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n".as_slice(),
        b"\xc3\x28\xa0\xa1 \xf0\x28\x8c\xbc \x00\x01\x02 end",
    ]
    .concat();
    let messages = vec![long_lines, bad_base64, bad_qp, bad_utf8];
    let ids = app.ingest(&user, &messages, 1_700_000_000).await;
    for (id, raw) in ids.iter().zip(&messages) {
        let email = get_everything(&app, &user, id, Duration::from_secs(20)).await;
        check_common(&email, raw.len());
    }
    let email = get_everything(&app, &user, &ids[0], Duration::from_secs(20)).await;
    assert_eq!(email["subject"].as_str().unwrap().len(), 1 << 20);
    assert_eq!(email["preview"].as_str().unwrap().chars().count(), 256);
    let values = email["bodyValues"].as_object().unwrap();
    assert_eq!(values.len(), 1);
    let email = get_everything(&app, &user, &ids[1], Duration::from_secs(20)).await;
    assert_eq!(
        email["attachments"].as_array().unwrap().len(),
        1,
        "{}",
        email["attachments"]
    );
    let email = get_everything(&app, &user, &ids[2], Duration::from_secs(20)).await;
    assert!(
        email["bodyValues"]
            .as_object()
            .unwrap()
            .values()
            .all(|v| v["value"].is_string())
    );
}

#[tokio::test]
async fn ten_thousand_parts_are_all_rendered_quickly() {
    let (app, [user]) = spawn_with_accounts(["ann@example.com"]).await;
    let mut raw = String::from(
        "From: ann@example.com\r\nSubject: many parts\r\nContent-Type: multipart/mixed; boundary=\"sep\"\r\n\r\n",
    );
    for i in 0..10_000 {
        let kind = if i % 2 == 0 {
            "text/plain"
        } else {
            "application/octet-stream; name=\"f.bin\""
        };
        raw.push_str(&format!(
            "--sep\r\nContent-Type: {kind}\r\n\r\npart {i}\r\n"
        ));
    }
    raw.push_str("--sep--\r\n");
    let ids = app
        .ingest(&user, &[raw.clone().into_bytes()], 1_700_000_000)
        .await;
    let email = get_everything(&app, &user, &ids[0], Duration::from_secs(20)).await;
    check_common(&email, raw.len());
    let mut parts = Vec::new();
    leaves(&email["bodyStructure"], &mut parts);
    assert_eq!(parts.len(), 10_000, "every part is rendered");
    assert_eq!(email["bodyValues"].as_object().unwrap().len(), 5_000);
    assert_eq!(email["attachments"].as_array().unwrap().len(), 5_000);
}

#[tokio::test]
async fn multiparts_nested_a_thousand_deep_are_served() {
    let (app, [user]) = spawn_with_accounts(["ann@example.com"]).await;
    const DEPTH: usize = 1000;
    // Each level: the next level, then a text leaf of its own.
    let mut inner = String::from("Content-Type: text/plain\r\n\r\nthe innermost text\r\n");
    for level in (0..DEPTH).rev() {
        inner = format!(
            "Content-Type: multipart/mixed; boundary=\"b{level}\"\r\n\r\n--b{level}\r\n{inner}\
             --b{level}\r\nContent-Type: text/plain\r\n\r\nleaf {level}\r\n--b{level}--\r\n"
        );
    }
    let raw = format!("From: ann@example.com\r\nSubject: deep\r\n{inner}");
    let ids = app
        .ingest(&user, &[raw.clone().into_bytes()], 1_700_000_000)
        .await;
    let email = get_everything(&app, &user, &ids[0], Duration::from_secs(20)).await;
    check_common(&email, raw.len());
    let structure = &email["bodyStructure"];
    // The tree is cut where JSON clients can still parse it ...
    assert_eq!(depth(structure), fastview::mail::body::MAX_DEPTH + 2);
    // ... and nothing is lost: every leaf is there, in document order.
    let mut parts = Vec::new();
    leaves(structure, &mut parts);
    assert_eq!(parts.len(), DEPTH + 1);
    let values = email["bodyValues"].as_object().unwrap();
    let texts: Vec<&str> = parts
        .iter()
        .map(|part| {
            values[part["partId"].as_str().unwrap()]["value"]
                .as_str()
                .unwrap()
        })
        .collect();
    // (The CRLF before a boundary belongs to the boundary.)
    assert_eq!(texts[0], "the innermost text");
    assert_eq!(texts[1], format!("leaf {}", DEPTH - 1));
    assert_eq!(texts[DEPTH], "leaf 0");
    assert_eq!(email["textBody"].as_array().unwrap().len(), DEPTH + 1);
    // A part below the cut downloads like any other.
    let blob = parts[0]["blobId"].as_str().unwrap();
    let url = format!(
        "{}/jmap/download/{}/{blob}/t.txt",
        app.base, user.account_id
    );
    let response = app.get_as(&url, &user.email, PASSWORD).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), "the innermost text");
}

#[tokio::test]
async fn a_hundred_megabyte_attachment_is_imported_and_served() {
    let app = spawn_app_with_limits(Limits {
        max_size_upload: 200 << 20,
        ..Limits::default()
    })
    .await;
    let user = app.account("ann@example.com").await;
    // 100 MiB of attachment octets, base64 in 76-character lines.
    let attachment_len: usize = 100 << 20;
    let mut raw = Vec::with_capacity(attachment_len / 3 * 4 * 78 / 76 + 4096);
    raw.extend_from_slice(
        b"From: ann@example.com\r\nSubject: big\r\nContent-Type: multipart/mixed; boundary=\"b\"\r\n\r\n\
          --b\r\nContent-Type: text/plain\r\n\r\nSee the attachment.\r\n\
          --b\r\nContent-Type: application/octet-stream; name=\"big.bin\"\r\n\
          Content-Disposition: attachment; filename=\"big.bin\"\r\nContent-Transfer-Encoding: base64\r\n\r\n",
    );
    {
        use base64::Engine;
        let block = garbage(57 * 1024, 3);
        let mut written = 0;
        while written < attachment_len {
            let take = (attachment_len - written).min(block.len());
            let encoded = base64::engine::general_purpose::STANDARD.encode(&block[..take]);
            for line in encoded.as_bytes().chunks(76) {
                raw.extend_from_slice(line);
                raw.extend_from_slice(b"\r\n");
            }
            written += take;
        }
    }
    raw.extend_from_slice(b"--b--\r\n");
    let raw_len = raw.len();
    let uploaded: Value = app.upload_typed(&user, "message/rfc822", raw).await;
    assert_eq!(uploaded["size"], json!(raw_len));
    let imported = app.import_to_inbox(&user, &uploaded["blobId"]).await;
    let id = imported["created"]["i"]["id"]
        .as_str()
        .expect("imported")
        .to_string();
    assert_eq!(imported["created"]["i"]["size"], json!(raw_len));
    let email = get_everything(&app, &user, &id, Duration::from_secs(120)).await;
    check_common(&email, raw_len);
    assert_eq!(email["hasAttachment"], json!(true));
    assert_eq!(email["preview"], json!("See the attachment."));
    let attachments = email["attachments"].as_array().unwrap();
    assert_eq!(attachments.len(), 1);
    assert_eq!(attachments[0]["size"], json!(attachment_len));
    assert_eq!(attachments[0]["name"], json!("big.bin"));
    // Only the text part is a body value: the attachment is not sent inline.
    assert_eq!(email["bodyValues"].as_object().unwrap().len(), 1);
}

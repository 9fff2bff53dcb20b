//! ADR 0002 and ADR 0003 proved by counting I/O against the real server:
//! each read level reads exactly its sources, the switches give identical
//! JSON, and a projection miss is computed, served and written back.

use fastview::app::ServeOptions;
use fastview::mail::read_level::ReadSwitches;
use serde_json::{Value, json};

use crate::support::{
    METADATA_PROPERTIES, TestAccount, TestApp, demo_messages, spawn_full_level_sibling,
    spawn_sibling, spawn_with_accounts, spawn_with_messages,
};

/// `count` messages written for this test: multipart/mixed with a text body
/// and, for every third, a PDF attachment.
fn generated_messages(count: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|i| {
            let attachment = if i % 3 == 0 {
                "--b\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename=\"r.pdf\"\r\nContent-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQK\r\n"
            } else {
                ""
            };
            format!(
                "From: Sender {i} <s{i}@example.com>\r\nTo: r@example.org\r\nSubject: Report {i}\r\n\
                 Date: Mon, 2 Sep 2024 10:{:02}:00 +0000\r\nMessage-ID: <gen{i}@example.com>\r\n\
                 MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b\"\r\n\r\n\
                 --b\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nWeekly report number {i}.\r\n\
                 {attachment}--b--\r\n",
                i % 60
            )
            .into_bytes()
        })
        .collect()
}

async fn seeded(count: usize) -> (TestApp, TestAccount, Vec<String>) {
    let (app, user, ids) = spawn_with_messages(&generated_messages(count)).await;
    (app, user, ids)
}

async fn get(app: &TestApp, user: &TestAccount, ids: &[String], properties: Value) -> Value {
    app.call1(
        user,
        "Email/get",
        json!({"accountId": user.account_id, "ids": ids, "properties": properties}),
    )
    .await
}

/// `(blob reads, blob bytes, header parses, full parses)` so far.
async fn io(app: &TestApp) -> (f64, f64, f64, f64) {
    (
        app.metric("fastview_blob_reads_total").await,
        app.metric("fastview_blob_read_bytes_total").await,
        app.metric("fastview_message_parses_total{scope=\"header\"}")
            .await,
        app.metric("fastview_message_parses_total{scope=\"full\"}")
            .await,
    )
}

#[tokio::test]
async fn metadata_level_reads_no_blob_and_parses_nothing() {
    let (app, user, ids) = seeded(100).await;
    let response = get(&app, &user, &ids, json!(METADATA_PROPERTIES)).await;
    assert_eq!(response["list"].as_array().unwrap().len(), 100);
    assert_eq!(
        response["list"][0]["mailboxIds"],
        json!({user.inbox.clone(): true})
    );
    assert_eq!(
        response["list"][0]["receivedAt"],
        json!("2023-11-14T22:13:20Z")
    );
    assert_eq!(io(&app).await, (0.0, 0.0, 0.0, 0.0));
    assert_eq!(
        app.metric("fastview_email_get_total{read_level=\"metadata\"}")
            .await,
        1.0
    );
}

/// `(hit, stale, miss)` of `fastview_metadata_snapshots_total` so far.
async fn snapshots(app: &TestApp) -> (f64, f64, f64) {
    let mut counts = [0.0; 3];
    for (count, result) in counts.iter_mut().zip(["hit", "stale", "miss"]) {
        let name = format!("fastview_metadata_snapshots_total{{result=\"{result}\"}}");
        *count = app.metric(&name).await;
    }
    (counts[0], counts[1], counts[2])
}

/// Metadata snapshots, and the whole texts of a shape of metadata alone
/// (issue 20), serve only the account's current Email state.
#[tokio::test]
async fn metadata_snapshots_serve_only_the_current_email_state() {
    let (app, user, ids) = seeded(30).await;
    let properties = json!(["mailboxIds", "keywords"]);
    let first = get(&app, &user, &ids, properties.clone()).await;
    assert_eq!(snapshots(&app).await, (0.0, 0.0, 1.0));
    // The same call again, nothing changed: answered from its whole texts,
    // the snapshot not even asked.
    assert_eq!(get(&app, &user, &ids, properties.clone()).await, first);
    assert_eq!(snapshots(&app).await, (0.0, 0.0, 1.0));
    // Another shape of the same ids: the snapshot, the same metadata.
    let other = get(
        &app,
        &user,
        &ids,
        json!(["keywords", "threadId", "mailboxIds"]),
    )
    .await;
    assert_eq!(other["list"][7]["keywords"], first["list"][7]["keywords"]);
    assert_eq!(snapshots(&app).await, (1.0, 0.0, 1.0));
    // One snapshot for the account, holding the 30.
    assert_eq!(
        app.metric("fastview_cache_entries{cache=\"metadata\"}")
            .await,
        1.0
    );
    let held = app.metric("fastview_cache_bytes{cache=\"metadata\"}").await;
    assert!((30.0 * 128.0..30.0 * 1024.0).contains(&held), "{held}");

    // A change to one email advances the Email state: the kept texts and
    // every snapshot of the account are passed over, the next call reads
    // the store.
    let set = app
        .update_email(&user, &ids[7], json!({"keywords/$seen": true}))
        .await;
    assert_eq!(set["updated"], json!({ids[7].clone(): null}), "{set}");
    let after = get(&app, &user, &ids, properties.clone()).await;
    assert_eq!(snapshots(&app).await, (1.0, 1.0, 1.0));
    assert_ne!(after["state"], first["state"]);
    assert_eq!(after["list"][7]["keywords"], json!({"$seen": true}));
    assert_eq!(after["list"][6]["keywords"], json!({}));
    assert_eq!(get(&app, &user, &ids, properties.clone()).await, after);
    assert_eq!(snapshots(&app).await, (1.0, 1.0, 1.0));
    get(
        &app,
        &user,
        &ids,
        json!(["keywords", "threadId", "mailboxIds"]),
    )
    .await;
    assert_eq!(snapshots(&app).await, (2.0, 1.0, 1.0));

    // An id without a snapshot (a new message) reads the store for all.
    let new =
        b"From: Bob <bob@example.org>\r\nTo: ann@example.com\r\nSubject: New\r\n\r\nNew one\r\n";
    let more = app.ingest(&user, &[new.to_vec()], 1_700_000_100).await;
    let with_new: Vec<String> = ids.iter().chain(&more).cloned().collect();
    let listed = get(&app, &user, &with_new, properties).await;
    assert_eq!(listed["list"].as_array().unwrap().len(), 31);
    assert_eq!(snapshots(&app).await, (2.0, 1.0, 2.0));
}

#[tokio::test]
async fn header_level_parses_header_blocks_only() {
    let (app, user, ids) = seeded(100).await;
    let response = get(
        &app,
        &user,
        &ids,
        json!([
            "subject",
            "from",
            "sentAt",
            "header:Message-ID:asMessageIds"
        ]),
    )
    .await;
    assert_eq!(response["list"][7]["subject"], json!("Report 7"));
    assert_eq!(
        response["list"][7]["from"],
        json!([{"name": "Sender 7", "email": "s7@example.com"}])
    );
    assert_eq!(
        response["list"][7]["header:Message-ID:asMessageIds"],
        json!(["gen7@example.com"])
    );
    assert_eq!(io(&app).await, (0.0, 0.0, 100.0, 0.0));
    assert_eq!(
        app.state.jmap.metrics.parses("header"),
        100,
        "the instance's own counters"
    );
    // Parsed header blocks are cached: a second call parses nothing.
    get(&app, &user, &ids, json!(["subject"])).await;
    assert_eq!(io(&app).await, (0.0, 0.0, 100.0, 0.0));
    assert_eq!(
        app.metric("fastview_email_get_total{read_level=\"header\"}")
            .await,
        2.0
    );
    // The cache gauges show what the header cache holds: the 100 blocks.
    assert_eq!(
        app.metric("fastview_cache_entries{cache=\"header\"}").await,
        100.0
    );
    let bytes = app.metric("fastview_cache_bytes{cache=\"header\"}").await;
    assert!(
        bytes > 100.0 * 100.0,
        "{bytes} octets for 100 header blocks"
    );
}

#[tokio::test]
async fn fast_view_level_reads_the_projection_not_the_message() {
    let (app, user, ids) = seeded(100).await;
    let response = get(&app, &user, &ids, json!(["id", "preview", "hasAttachment"])).await;
    assert_eq!(
        response["list"][3]["preview"],
        json!("Weekly report number 3.")
    );
    assert_eq!(response["list"][3]["hasAttachment"], json!(true));
    assert_eq!(response["list"][4]["hasAttachment"], json!(false));
    // Unlike James, ["id","preview"] does not even read the header block.
    assert_eq!(io(&app).await, (0.0, 0.0, 0.0, 0.0));
    assert_eq!(app.metric("fastview_fast_view_hits_total").await, 100.0);
    assert_eq!(app.metric("fastview_fast_view_misses_total").await, 0.0);
}

#[tokio::test]
async fn structure_level_reads_the_stored_tree_and_no_blob() {
    let (app, user, ids) = seeded(100).await;
    let response = get(
        &app,
        &user,
        &ids,
        json!(["bodyStructure", "textBody", "htmlBody", "attachments"]),
    )
    .await;
    assert_eq!(
        response["list"][0]["attachments"][0]["name"],
        json!("r.pdf")
    );
    assert_eq!(response["list"][0]["attachments"][0]["size"], json!(9));
    assert_eq!(response["list"][1]["attachments"], json!([]));
    assert_eq!(response["list"][4]["textBody"][0]["partId"], json!("1"));
    assert_eq!(
        response["list"][4]["bodyStructure"]["type"],
        json!("multipart/mixed")
    );
    assert_eq!(io(&app).await, (0.0, 0.0, 0.0, 0.0));
    assert_eq!(
        app.metric("fastview_email_get_total{read_level=\"structure\"}")
            .await,
        1.0
    );
    // Part headers need the header block (the root part's header), still no blob.
    let response = app
        .call_in(
            &user,
            "Email/get",
            json!({"ids": &ids[..2],
                "properties": ["bodyStructure"], "bodyProperties": ["partId", "headers"]}),
        )
        .await;
    let root_headers = response["list"][0]["bodyStructure"]["headers"]
        .as_array()
        .unwrap();
    assert_eq!(
        root_headers[2],
        json!({"name": "Subject", "value": " Report 0"})
    );
    assert_eq!(
        response["list"][0]["bodyStructure"]["subParts"][0]["headers"],
        json!([{"name": "Content-Type", "value": " text/plain; charset=utf-8"}])
    );
    let (reads, _, header_parses, full_parses) = io(&app).await;
    assert_eq!((reads, header_parses, full_parses), (0.0, 2.0, 0.0));
}

/// A text part and a 10 MB attachment.
fn with_large_attachment() -> Vec<u8> {
    let line = "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3h5ejAx\r\n";
    let attachment = line.repeat(10_000_000 / line.len());
    format!(
        "From: a@example.com\r\nSubject: Big\r\nMIME-Version: 1.0\r\n\
         Content-Type: multipart/mixed; boundary=\"b\"\r\n\r\n\
         --b\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nSee the attached archive.\r\n\
         --b\r\nContent-Type: application/octet-stream\r\n\
         Content-Disposition: attachment; filename=\"big.bin\"\r\n\
         Content-Transfer-Encoding: base64\r\n\r\n{attachment}--b--\r\n"
    )
    .into_bytes()
}

#[tokio::test]
async fn body_values_read_only_the_ranges_of_the_parts_asked() {
    let (app, [user]) = spawn_with_accounts(["ann@example.com"]).await;
    let raw = with_large_attachment();
    assert!(raw.len() > 10_000_000);
    let ids = app.ingest(&user, &[raw], 1_700_000_000).await;
    let response = app
        .call_in(
            &user,
            "Email/get",
            json!({"ids": ids,
                "properties": ["bodyValues", "textBody", "attachments"],
                "fetchTextBodyValues": true}),
        )
        .await;
    let email = &response["list"][0];
    assert_eq!(
        email["bodyValues"],
        json!({"1": {"value": "See the attached archive.", "isEncodingProblem": false,
            "isTruncated": false}})
    );
    assert_eq!(email["attachments"][0]["name"], json!("big.bin"));
    let (reads, bytes, header_parses, full_parses) = io(&app).await;
    assert_eq!((reads, header_parses, full_parses), (1.0, 0.0, 0.0));
    assert!(bytes < 64.0 * 1024.0, "read {bytes} octets");
    assert_eq!(bytes, "See the attached archive.".len() as f64);
    assert_eq!(
        app.metric("fastview_email_get_total{read_level=\"body_values\"}")
            .await,
        1.0
    );
    // The attachment downloads as its decoded octets, read by its range.
    let blob_id = email["attachments"][0]["blobId"].as_str().unwrap();
    let (status, body) = app.download(&user, blob_id, "big.bin").await;
    assert_eq!(status, 200);
    // 135,135 lines of 72 base64 characters, each 54 octets decoded.
    let decoded_line: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz01";
    assert_eq!(body.len(), 7_297_290);
    assert!(body.chunks(54).all(|chunk| chunk == decoded_line));
    let (reads, bytes, _, full_parses) = io(&app).await;
    assert_eq!((reads, full_parses), (2.0, 0.0));
    assert!(bytes < 10_100_000.0, "read {bytes} octets");
}

#[tokio::test]
async fn full_level_reads_each_message_once() {
    let (app, user, ids) = seeded(100).await;
    let off = spawn_full_level_sibling(&app).await;
    let response = get(&off, &user, &ids, json!(["textBody", "attachments"])).await;
    assert_eq!(
        response["list"][0]["attachments"][0]["name"],
        json!("r.pdf")
    );
    let (reads, bytes, header_parses, full_parses) = io(&off).await;
    assert_eq!((reads, header_parses, full_parses), (100.0, 0.0, 100.0));
    let sizes: i64 = generated_messages(100).iter().map(|m| m.len() as i64).sum();
    assert_eq!(bytes, sizes as f64);
}

#[tokio::test]
async fn a_part_tree_that_does_not_decode_is_recomputed_served_and_written_back() {
    let (app, user, ids) = seeded(6).await;
    let properties = json!(["bodyStructure", "textBody", "attachments"]);
    let before = get(&app, &user, &ids, properties.clone()).await;
    let numeric: Vec<i64> = ids
        .iter()
        .map(|id| fastview::jmap::ids::parse_email_id(id).unwrap())
        .collect();
    let damaged: Vec<(i64, Vec<u8>)> = numeric.iter().map(|id| (*id, vec![9, 9, 9])).collect();
    app.app.store.put_body_structures(&damaged).await.unwrap();
    let fresh = spawn_sibling(&app, ServeOptions::default()).await;
    assert_eq!(get(&fresh, &user, &ids, properties.clone()).await, before);
    let (reads, _, _, full_parses) = io(&fresh).await;
    assert_eq!((reads, full_parses), (6.0, 6.0));
    // Written back: another fresh server reads no blob.
    let stored = app
        .app
        .store
        .body_structures(user.id, &numeric)
        .await
        .unwrap();
    assert_eq!(stored.len(), 6);
    assert!(stored.iter().all(|(_, tree)| tree[0] == 1));
    let again = spawn_sibling(&app, ServeOptions::default()).await;
    assert_eq!(get(&again, &user, &ids, properties).await, before);
    assert_eq!(io(&again).await, (0.0, 0.0, 0.0, 0.0));
}

#[tokio::test]
async fn switches_off_give_byte_identical_json() {
    let (app, [user]) = spawn_with_accounts(["ann@example.com"]).await;
    let mut messages = demo_messages();
    messages.extend(generated_messages(10));
    let ids = app.ingest(&user, &messages, 1_700_000_000).await;
    let off_levels = spawn_full_level_sibling(&app).await;
    let off_fast_view = spawn_sibling(
        &app,
        ServeOptions {
            switches: ReadSwitches {
                read_levels: true,
                fast_view: false,
            },
            ..ServeOptions::default()
        },
    )
    .await;
    // Mailbox ids and keywords whose order as text is not their order as
    // numbers or as given: m11 before m2, `$flagged` before `work`.
    let created = app
        .call_in(
            &user,
            "Mailbox/set",
            json!({"create":
            (1..=5).map(|n| (format!("n{n}"), json!({"name": format!("Folder {n}")})))
                .collect::<serde_json::Map<_, _>>()}),
        )
        .await;
    let last = created["created"]["n5"]["id"].as_str().unwrap().to_string();
    let updated = app
        .call_in(
            &user,
            "Email/set",
            json!({"update": {
            ids[0].clone(): {"mailboxIds": {user.inbox.clone(): true, last.clone(): true},
                "keywords": {"work": true, "$flagged": true, "$seen": true}}}}),
        )
        .await;
    assert_eq!(
        updated["updated"].as_object().unwrap().len(),
        1,
        "{updated}"
    );
    let property_sets = [
        json!(["mailboxIds", "keywords"]),
        json!([
            "id",
            "threadId",
            "mailboxIds",
            "keywords",
            "hasAttachment",
            "from",
            "to",
            "subject",
            "receivedAt",
            "size",
            "preview"
        ]),
        json!(["subject", "sentAt", "headers", "header:List-Id:asText"]),
        json!([
            "blobId",
            "messageId",
            "inReplyTo",
            "references",
            "sender",
            "cc",
            "bcc",
            "replyTo",
            "sentAt",
            "header:Received:all",
            "header:Subject:asText:all",
            "header:From:asGroupedAddresses",
            "header:Date:asDate",
            "header:X-Missing"
        ]),
        Value::Null,
        json!([
            "bodyStructure",
            "textBody",
            "htmlBody",
            "attachments",
            "preview",
            "hasAttachment"
        ]),
    ];
    for properties in property_sets {
        let default = get(&app, &user, &ids, properties.clone()).await;
        assert_eq!(default["list"].as_array().unwrap().len(), messages.len());
        // The octets too: the list view's text (issue 20) is what the tree
        // at the full level serializes to.
        let request = json!({"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
            "methodCalls": [["Email/get", {"accountId": user.account_id, "ids": ids,
                "properties": properties}, "g"]]});
        let text = app.api_text(&user, &request).await;
        for other in [&off_levels, &off_fast_view] {
            assert_eq!(
                get(other, &user, &ids, properties.clone()).await,
                default,
                "{properties}"
            );
            assert_eq!(other.api_text(&user, &request).await, text, "{properties}");
        }
    }
    // Body values at every flag, truncated or not, and part headers: the
    // stored tree and ranges give what the whole message gives.
    for (flags, max) in [
        (json!({"fetchTextBodyValues": true}), 0),
        (json!({"fetchHTMLBodyValues": true}), 0),
        (json!({"fetchAllBodyValues": true}), 0),
        (json!({"fetchAllBodyValues": true}), 64),
    ] {
        let mut arguments = json!({"accountId": user.account_id, "ids": ids,
            "properties": ["bodyValues", "bodyStructure", "textBody", "htmlBody"],
            "bodyProperties": ["partId", "blobId", "size", "type", "charset", "name",
                "headers", "header:Content-Type:asText"],
            "maxBodyValueBytes": max});
        for (key, value) in flags.as_object().unwrap() {
            arguments[key] = value.clone();
        }
        let default = app.call1(&user, "Email/get", arguments.clone()).await;
        assert_eq!(default["list"].as_array().unwrap().len(), messages.len());
        let full = off_levels
            .call1(&user, "Email/get", arguments.clone())
            .await;
        assert_eq!(full, default, "{arguments}");
    }
    // The "off" servers did read full messages for list properties.
    assert!(
        off_levels
            .metric("fastview_email_get_total{read_level=\"full\"}")
            .await
            >= 3.0
    );
    assert!(off_fast_view.metric("fastview_blob_reads_total").await > 0.0);
}

#[tokio::test]
async fn a_projection_miss_is_computed_served_and_written_back() {
    let (app, user, ids) = seeded(12).await;
    let before = get(&app, &user, &ids, json!(["preview", "hasAttachment"])).await;
    // A fresh server (empty caches) on the same data, after the table is emptied.
    let fresh = spawn_sibling(&app, ServeOptions::default()).await;
    assert_eq!(
        app.app.store.clear_fast_views(Some(user.id)).await.unwrap(),
        12
    );
    let after = get(&fresh, &user, &ids, json!(["preview", "hasAttachment"])).await;
    assert_eq!(after, before);
    assert_eq!(fresh.metric("fastview_fast_view_misses_total").await, 12.0);
    assert_eq!(fresh.metric("fastview_blob_reads_total").await, 12.0);
    // Rows were written back: nothing is missing any more.
    assert!(
        app.app
            .store
            .email_blobs(Some(user.id), 0, 100, true)
            .await
            .unwrap()
            .is_empty()
    );
}

/// Creates a mailbox "Folder" for `user`; its id.
async fn create_folder(app: &TestApp, user: &TestAccount) -> String {
    let created = app
        .call1(
            user,
            "Mailbox/set",
            json!({"accountId": user.account_id, "create": {"f": {"name": "Folder"}}}),
        )
        .await;
    created["created"]["f"]["id"].as_str().unwrap().to_string()
}

/// The list view's texts kept per account (issue 20) hold only what never
/// changes: each call writes in the mailboxIds and keywords it reads, and
/// its octets stay those of the full level's tree.
#[tokio::test]
async fn kept_list_texts_take_each_calls_mailbox_ids_and_keywords() {
    let (app, user, ids) = seeded(30).await;
    let full = spawn_full_level_sibling(&app).await;
    let request = |properties: Value| {
        json!({"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
            "methodCalls": [["Email/get", {"accountId": user.account_id, "ids": ids,
                "properties": properties}, "g"]]})
    };
    let list = request(json!([
        "id",
        "subject",
        "keywords",
        "from",
        "mailboxIds",
        "preview"
    ]));
    let first = app.api_text(&user, &list).await;
    assert_eq!(first, full.api_text(&user, &list).await);
    // One entry for the account, holding the 30 texts.
    assert_eq!(
        app.metric("fastview_cache_entries{cache=\"list_text\"}")
            .await,
        1.0
    );
    let held = app
        .metric("fastview_cache_bytes{cache=\"list_text\"}")
        .await;
    assert!((30.0 * 100.0..30.0 * 4096.0).contains(&held), "{held}");
    assert_eq!(app.api_text(&user, &list).await, first);

    // Keywords and mailboxes change: the kept texts take the new ones.
    let folder = create_folder(&app, &user).await;
    let set = app
        .call_in(
            &user,
            "Email/set",
            json!({"update": {ids[3].clone(): {
                "keywords": {"$seen": true, "Work": true},
                "mailboxIds": {user.inbox.clone(): true, folder.clone(): true}}}}),
        )
        .await;
    assert_eq!(set["updated"].as_object().unwrap().len(), 1, "{set}");
    let changed = app.api_text(&user, &list).await;
    assert_ne!(changed, first);
    assert_eq!(changed, full.api_text(&user, &list).await);
    let answer: Value = serde_json::from_str(&changed).unwrap();
    let email = &answer["methodResponses"][0][1]["list"][3];
    assert_eq!(email["keywords"], json!({"$seen": true, "work": true}));
    assert_eq!(
        email["mailboxIds"],
        json!({user.inbox.clone(): true, folder.clone(): true})
    );

    // Another shape is not served the first one's texts, nor it the other's.
    let other = request(json!(["subject", "receivedAt", "hasAttachment"]));
    assert_eq!(
        app.api_text(&user, &other).await,
        full.api_text(&user, &other).await
    );
    assert_eq!(app.api_text(&user, &list).await, changed);
}

/// A shape of metadata alone keeps its texts whole, for the Email state
/// they were read at (issue 20): a change of keywords or mailboxes, which
/// changes the state, is never answered from texts of the state before.
#[tokio::test]
async fn kept_metadata_texts_are_right_for_their_state_alone() {
    let (app, user, ids) = seeded(30).await;
    let full = spawn_full_level_sibling(&app).await;
    let metadata = json!({"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
        "methodCalls": [["Email/get", {"accountId": user.account_id, "ids": ids,
            "properties": ["id", "mailboxIds", "keywords", "threadId"]}, "g"]]});
    let list = json!({"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
        "methodCalls": [["Email/get", {"accountId": user.account_id, "ids": ids,
            "properties": ["id", "subject", "keywords", "mailboxIds"]}, "g"]]});
    let entries = || app.metric("fastview_cache_entries{cache=\"list_text\"}");
    let first = app.api_text(&user, &metadata).await;
    assert_eq!(first, full.api_text(&user, &metadata).await);
    assert_eq!(entries().await, 1.0);
    // The list view's shape is kept beside it, not in its place.
    assert_eq!(
        app.api_text(&user, &list).await,
        full.api_text(&user, &list).await
    );
    assert_eq!(entries().await, 2.0);
    assert_eq!(app.api_text(&user, &metadata).await, first);

    let folder = create_folder(&app, &user).await;
    for (n, update) in [
        json!({"keywords": {"$seen": true, "$flagged": true}}),
        json!({"keywords": {}}),
        json!({"mailboxIds": {user.inbox.clone(): true, folder.clone(): true}}),
    ]
    .into_iter()
    .enumerate()
    {
        let set = app
            .call_in(
                &user,
                "Email/set",
                json!({"update": {ids[n].clone(): update}}),
            )
            .await;
        assert_eq!(set["updated"].as_object().unwrap().len(), 1, "{set}");
        let changed = app.api_text(&user, &metadata).await;
        assert_ne!(changed, first, "{n}");
        assert_eq!(changed, full.api_text(&user, &metadata).await, "{n}");
        // Kept again at the new state, and served from there.
        assert_eq!(app.api_text(&user, &metadata).await, changed, "{n}");
    }
}

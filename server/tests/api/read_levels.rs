//! ADR 0002 and ADR 0003 proved by counting I/O against the real server:
//! each read level reads exactly its sources, the switches give identical
//! JSON, and a projection miss is computed, served and written back.

use fastview::app::ServeOptions;
use fastview::mail::read_level::ReadSwitches;
use serde_json::{Value, json};

use crate::support::{TestAccount, TestApp, demo_messages, spawn_app, spawn_sibling};

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
    let app = spawn_app().await;
    let user = app.account("ann@example.com").await;
    let ids = app
        .ingest(&user, &generated_messages(count), 1_700_000_000)
        .await;
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
    let response = get(
        &app,
        &user,
        &ids,
        json!([
            "id",
            "blobId",
            "threadId",
            "mailboxIds",
            "keywords",
            "size",
            "receivedAt"
        ]),
    )
    .await;
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
async fn full_level_reads_each_message_once() {
    let (app, user, ids) = seeded(100).await;
    let response = get(&app, &user, &ids, json!(["textBody", "attachments"])).await;
    assert_eq!(
        response["list"][0]["attachments"][0]["name"],
        json!("r.pdf")
    );
    let (reads, bytes, header_parses, full_parses) = io(&app).await;
    assert_eq!((reads, header_parses, full_parses), (100.0, 0.0, 100.0));
    let sizes: i64 = generated_messages(100).iter().map(|m| m.len() as i64).sum();
    assert_eq!(bytes, sizes as f64);
}

#[tokio::test]
async fn switches_off_give_byte_identical_json() {
    let app = spawn_app().await;
    let user = app.account("ann@example.com").await;
    let mut messages = demo_messages();
    messages.extend(generated_messages(10));
    let ids = app.ingest(&user, &messages, 1_700_000_000).await;
    let off_levels = spawn_sibling(
        &app,
        ServeOptions {
            switches: ReadSwitches {
                read_levels: false,
                fast_view: true,
            },
            ..ServeOptions::default()
        },
    )
    .await;
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
        Value::Null,
    ];
    for properties in property_sets {
        let default = get(&app, &user, &ids, properties.clone()).await;
        assert_eq!(default["list"].as_array().unwrap().len(), messages.len());
        for other in [&off_levels, &off_fast_view] {
            assert_eq!(
                get(other, &user, &ids, properties.clone()).await,
                default,
                "{properties}"
            );
        }
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

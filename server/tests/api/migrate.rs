//! `fastview migrate-store`: a SQLite data dir copied into a fresh PostgreSQL
//! database (only when `FASTVIEW_TEST_POSTGRES_URL` is set), interrupted and
//! resumed, serves the same JMAP objects with the same ids and states.

use fastview::app::App;
use serde_json::{Value, json};

use crate::support::{
    TestAccount, TestApp, TestDatabase, demo_messages, spawn_app_on, spawn_sqlite_app,
};

/// Every Email property (RFC 8621 §4.1) with every body part property.
fn email_get(account: &TestAccount, ids: &Value) -> Value {
    json!({
        "accountId": account.account_id,
        "ids": ids,
        "properties": [
            "id", "blobId", "threadId", "mailboxIds", "keywords", "size", "receivedAt",
            "messageId", "inReplyTo", "references", "sender", "from", "to", "cc", "bcc",
            "replyTo", "subject", "sentAt", "hasAttachment", "preview", "bodyValues",
            "textBody", "htmlBody", "attachments", "bodyStructure", "headers",
            "header:Subject:asText", "header:From:asAddresses:all", "header:Date:asDate",
            "header:Message-ID:asMessageIds", "header:List-Unsubscribe:asURLs"
        ],
        "bodyProperties": [
            "partId", "blobId", "size", "headers", "name", "type", "charset", "disposition",
            "cid", "language", "location", "subParts"
        ],
        "fetchAllBodyValues": true,
    })
}

pub async fn upload(app: &TestApp, account: &TestAccount, bytes: Vec<u8>) -> Value {
    let (status, body) = app.upload(account, bytes).await;
    assert_eq!(status, 201, "{body}");
    body
}

/// Everything a client sees of an account: all emails with all properties,
/// mailboxes, threads, the listing, and the state strings.
pub async fn snapshot(app: &TestApp, account: &TestAccount) -> Value {
    let responses = app
        .call(
            account,
            json!([
                ["Email/query", {"accountId": account.account_id,
                    "sort": [{"property": "receivedAt", "isAscending": false}]}],
                ["Email/query", {"accountId": account.account_id,
                    "filter": {"inMailbox": account.inbox}, "calculateTotal": true}],
                ["Mailbox/get", {"accountId": account.account_id, "ids": null}],
            ]),
        )
        .await;
    let ids = responses[0][1]["ids"].clone();
    let emails = app
        .call1(account, "Email/get", email_get(account, &ids))
        .await;
    let thread_ids: Vec<Value> = emails["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["threadId"].clone())
        .collect();
    let threads = app
        .call1(
            account,
            "Thread/get",
            json!({"accountId": account.account_id, "ids": thread_ids}),
        )
        .await;
    json!({
        "query": responses[0][1],
        "inbox": responses[1][1],
        "mailboxes": responses[2][1],
        "emails": emails,
        "threads": threads,
    })
}

#[tokio::test]
async fn migrate_store_copies_sqlite_into_postgres_and_resumes() {
    let Some(database) = TestDatabase::create().await else {
        return;
    };
    let source = spawn_sqlite_app().await;
    let ann = source.account("ann@example.com").await;
    let bob = source.account("bob@example.com").await;
    let ids = source.ingest(&ann, &demo_messages(), 1_700_000_000).await;
    source
        .ingest(&bob, &demo_messages()[..3], 1_700_100_000)
        .await;
    // Mailboxes (a child created before its parent is re-parented), keywords,
    // moves, an upload imported as an email, a destroyed email.
    let created = source
        .call_in(&ann, "Mailbox/set", json!({"create": {
            "child": {"name": "Child"}, "parent": {"name": "Projects", "sortOrder": 3, "isSubscribed": false}}}))
        .await;
    let (child, parent) = (
        created["created"]["child"]["id"].clone(),
        created["created"]["parent"]["id"].clone(),
    );
    source
        .call_in(
            &ann,
            "Mailbox/set",
            json!({"update": {child.as_str().unwrap(): {"parentId": parent}}}),
        )
        .await;
    source
        .call_in(&ann, "Email/set", json!({"update": {
            ids[0].clone(): {"keywords": {"$seen": true, "$flagged": true}},
            ids[1].clone(): {"mailboxIds": {child.as_str().unwrap(): true}},
            ids[2].clone(): {"mailboxIds": {ann.inbox.clone(): true, parent.as_str().unwrap(): true}},
        }, "destroy": [ids[3].clone()]}))
        .await;
    let uploaded = upload(
        &source,
        &ann,
        b"From: Cy <cy@example.org>\r\nTo: ann@example.com\r\nSubject: Uploaded\r\n\r\nHello\r\n"
            .to_vec(),
    )
    .await;
    let imported = source
        .call_in(
            &ann,
            "Email/import",
            json!({"emails": {
            "u": {"blobId": uploaded["blobId"], "mailboxIds": {ann.inbox.clone(): true},
                  "keywords": {"$seen": true}, "receivedAt": "2024-05-01T10:00:00Z"}}}),
        )
        .await;
    assert!(imported["created"]["u"]["id"].is_string(), "{imported}");
    let before = (snapshot(&source, &ann).await, snapshot(&source, &bob).await);

    // Interrupted after two batches of four emails, then resumed, then re-run;
    // the blobs go to another blob directory.
    let blob_dir = tempfile::tempdir().unwrap();
    let blob_url = format!("file://{}", blob_dir.path().display());
    let migrate = |extra: &[&str]| {
        let mut command = source.cli();
        command
            .args(["migrate-store", "--to", &database.url, "--batch-size", "4"])
            .args(["--to-blob-url", &blob_url])
            .args(extra);
        command.output().expect("run migrate-store")
    };
    let output = migrate(&["--stop-after-batches", "2"]);
    assert_eq!(
        output.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    {
        let target = App::open_with(&source.app.data_dir, Some(&database.url), Some(2))
            .await
            .unwrap();
        assert_eq!(target.store.raw_counts(None).await.unwrap().emails, 8);
    }
    let output = migrate(&[]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stderr).contains("resuming after email"));
    let output = migrate(&[]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("copied 0 emails, 0 other rows, 0 blobs"),
        "{stdout}"
    );

    // A server on the PostgreSQL copy and the copied blobs serves the same objects.
    let app = App::open_storage(
        &source.app.data_dir,
        Some(&database.url),
        Some(4),
        Some(&blob_url),
    )
    .await
    .unwrap();
    let target = spawn_app_on(
        app,
        tempfile::tempdir().unwrap(),
        Some(database.url.clone()),
    )
    .await;
    let after = (snapshot(&target, &ann).await, snapshot(&target, &bob).await);
    assert_eq!(before.0, after.0);
    assert_eq!(before.1, after.1);
    let count = before.0["emails"]["list"].as_array().unwrap().len();
    assert_eq!(count, ids.len());
    assert_eq!(before.0["mailboxes"]["list"].as_array().unwrap().len(), 8);

    // New rows on the copy get fresh ids: the sequences moved past the copy.
    let new_mailbox = target.create_mailbox(&ann, "After").await;
    assert!(!lists_id(&before.0["mailboxes"], &new_mailbox));
    let fresh = upload(
        &target,
        &ann,
        b"From: Dee <dee@example.org>\r\nSubject: After the move\r\n\r\nNew\r\n".to_vec(),
    )
    .await;
    let imported = target.import_to_inbox(&ann, &fresh["blobId"]).await;
    let new_id = imported["created"]["i"]["id"].clone();
    assert!(new_id.is_string(), "{imported}");
    assert!(!lists_id(&before.0["emails"], &new_id));

    // The copied accounts can send: each has the identity for its address.
    let identities = target
        .call_using(
            &ann,
            &["urn:ietf:params:jmap:submission"],
            json!([["Identity/get", {"accountId": ann.account_id}]]),
        )
        .await;
    let list = identities[0][1]["list"].as_array().unwrap();
    assert_eq!(list.len(), 1, "{identities:?}");
    assert_eq!(list[0]["email"], json!(ann.email));
    assert_eq!(list[0]["mayDelete"], false);
    drop(target);
    drop(database);
}

/// Whether a /get response's `list` holds an object with id `id`.
fn lists_id(got: &Value, id: &impl PartialEq<Value>) -> bool {
    let list = got["list"].as_array().unwrap();
    list.iter().any(|object| *id == object["id"])
}

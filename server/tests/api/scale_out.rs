//! Two server nodes on one database and one blob store (as two processes
//! behind a load balancer would run): a change made through one is seen by
//! the other at once, with identical state strings. On PostgreSQL when
//! `FASTVIEW_TEST_POSTGRES_URL` is set; on one SQLite file otherwise.

use serde_json::{Value, json};

use crate::migrate::{snapshot, upload};
use crate::support::{TestAccount, TestApp, demo_messages, spawn_app, spawn_second_node};

/// Both nodes serve the same account identically (objects and states).
async fn assert_same(first: &TestApp, second: &TestApp, user: &TestAccount) -> Value {
    let (a, b) = (snapshot(first, user).await, snapshot(second, user).await);
    assert_eq!(a, b);
    a
}

#[tokio::test]
async fn two_nodes_on_one_database_see_each_others_changes_at_once() {
    let first = spawn_app().await;
    let second = spawn_second_node(&first).await;
    eprintln!(
        "two nodes on {}",
        if first.database_url.is_some() {
            "PostgreSQL"
        } else {
            "SQLite"
        }
    );
    let user = first.account("ann@example.com").await;
    let ids = first
        .ingest(&user, &demo_messages()[..5], 1_700_000_000)
        .await;
    // Both nodes read everything once, so their caches are warm.
    let start = assert_same(&first, &second, &user).await;

    // Keywords through node 1.
    first
        .call_in(
            &user,
            "Email/set",
            json!({"update": {ids[0].clone(): {"keywords": {"$seen": true, "$flagged": true}}}}),
        )
        .await;
    let after_keywords = assert_same(&first, &second, &user).await;
    assert_ne!(after_keywords["emails"]["state"], start["emails"]["state"]);
    let email = &after_keywords["emails"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == json!(ids[0]))
        .unwrap()["keywords"];
    assert_eq!(email, &json!({"$seen": true, "$flagged": true}));

    // A new message through node 2 (uploaded there, read in full on node 1).
    let raw = b"From: Bob <bob@example.org>\r\nTo: ann@example.com\r\nSubject: Via node two\r\n\r\nSecond node body\r\n".to_vec();
    let uploaded = upload(&second, &user, raw.clone()).await;
    let imported = second.import_to_inbox(&user, &uploaded["blobId"]).await;
    let new_id = imported["created"]["i"]["id"].clone();
    assert!(new_id.is_string(), "{imported}");
    let after_import = assert_same(&first, &second, &user).await;
    assert_eq!(after_import["inbox"]["total"], json!(6));
    assert_eq!(after_import["inbox"]["ids"][0], new_id);
    let body = first
        .call_in(
            &user,
            "Email/get",
            json!({"ids": [new_id],
            "properties": ["bodyValues"], "fetchAllBodyValues": true}),
        )
        .await;
    let values = body["list"][0]["bodyValues"].as_object().unwrap();
    assert_eq!(
        values.values().next().unwrap()["value"],
        json!("Second node body\n")
    );

    // Mailboxes through node 1: create, then rename through node 2.
    let mailbox = first.create_mailbox(&user, "Projects").await;
    assert_same(&first, &second, &user).await;
    second
        .call_in(
            &user,
            "Mailbox/set",
            json!({"update": {mailbox.clone(): {"name": "Work"}}}),
        )
        .await;
    let after_mailboxes = assert_same(&first, &second, &user).await;
    let names: Vec<&Value> = after_mailboxes["mailboxes"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["name"])
        .collect();
    assert!(names.contains(&&json!("Work")), "{names:?}");
    assert_ne!(
        after_mailboxes["mailboxes"]["state"],
        after_import["mailboxes"]["state"]
    );

    // Moving an email through node 2 changes both counts and memberships on node 1.
    second
        .call_in(
            &user,
            "Email/set",
            json!({"update": {ids[1].clone(): {"mailboxIds": {mailbox.clone(): true}}}}),
        )
        .await;
    let moved = assert_same(&first, &second, &user).await;
    assert_eq!(moved["inbox"]["total"], json!(5));
    drop(second);
}

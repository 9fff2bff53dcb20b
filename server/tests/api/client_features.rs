//! What unmodified clients rely on (issue 14): a multipart `bodyStructure`
//! always carries its `subParts` (the reference webmail walks them),
//! Email/import's `receivedAt` default and its error for an unknown blob,
//! the clamped `limit` returned by /query, and the keyword sorts and thread
//! keyword filters of RFC 8621 §4.4.

use serde_json::{Value, json};

use crate::support::{
    TestAccount, TestApp, demo_messages, spawn_with_accounts, spawn_with_messages,
};

/// The demo messages in ann's inbox, ids in file order.
async fn demo() -> (TestApp, TestAccount, Vec<String>) {
    let (app, user, ids) = spawn_with_messages(&demo_messages()).await;
    (app, user, ids)
}

/// `(type, subParts)` of a bodyStructure, recursively: the tree's shape.
fn shape(part: &Value) -> Value {
    match part.get("subParts") {
        Some(Value::Array(children)) => {
            json!([part["type"], children.iter().map(shape).collect::<Vec<_>>()])
        }
        _ => part["type"].clone(),
    }
}

#[tokio::test]
async fn a_multipart_body_structure_carries_its_sub_parts_with_the_default_body_properties() {
    let (app, user, ids) = demo().await;
    // 05-inline-image.eml: related(alternative(plain, html), png).
    let email = app.email_get(&user, &[&ids[4]], &["bodyStructure"]).await;
    let structure = &email["list"][0]["bodyStructure"];
    assert_eq!(
        shape(structure),
        json!([
            "multipart/related",
            [
                ["multipart/alternative", ["text/plain", "text/html"]],
                "image/png"
            ]
        ])
    );
    // A leaf part has the ten default properties and no subParts.
    let png = &structure["subParts"][1];
    assert_eq!(png.as_object().unwrap().len(), 10, "{png}");
    assert_eq!(png["name"], "logo-v2.png");
    assert_eq!(png["partId"], "4");
    // A single-part message is one leaf.
    let plain = app.email_get(&user, &[&ids[7]], &["bodyStructure"]).await;
    assert!(plain["list"][0]["bodyStructure"].get("subParts").is_none());
    assert_eq!(plain["list"][0]["bodyStructure"]["type"], "text/plain");
}

#[tokio::test]
async fn email_import_defaults_received_at_to_the_top_received_header_and_names_an_unknown_blob() {
    let (app, [user]) = spawn_with_accounts(["ann@example.com"]).await;
    let messages = demo_messages();
    // 08-thread-1.eml's top Received header says 15:02:13 UTC.
    let (status, uploaded) = app.upload(&user, messages[7].clone()).await;
    assert_eq!(status, 201);
    // A message without a Received header: the import time.
    let bare = b"From: a@example.com\r\nSubject: bare\r\n\r\nhello\r\n".to_vec();
    let (_, bare_upload) = app.upload(&user, bare).await;
    let before = chrono::Utc::now().timestamp();
    let response = app
        .call_in(
            &user,
            "Email/import",
            json!({"emails": {
                "r": {"blobId": uploaded["blobId"], "mailboxIds": {(user.inbox.clone()): true}},
                "b": {"blobId": bare_upload["blobId"], "mailboxIds": {(user.inbox.clone()): true}},
                "x": {"blobId": "Gffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
                      "mailboxIds": {(user.inbox.clone()): true}},
            }}),
        )
        .await;
    assert_eq!(
        response["notCreated"]["x"]["type"], "invalidProperties",
        "{response}"
    );
    assert_eq!(response["notCreated"]["x"]["properties"], json!(["blobId"]));
    let (r, b) = (
        &response["created"]["r"]["id"],
        &response["created"]["b"]["id"],
    );
    let got = app.email_get(&user, &[&r, &b], &["receivedAt"]).await;
    assert_eq!(got["list"][0]["receivedAt"], "2024-03-11T15:02:13Z");
    let bare_time =
        chrono::DateTime::parse_from_rfc3339(got["list"][1]["receivedAt"].as_str().unwrap())
            .unwrap()
            .timestamp();
    assert!(
        (before..before + 60).contains(&bare_time),
        "{bare_time} vs {before}"
    );
}

#[tokio::test]
async fn a_query_without_limit_returns_the_limit_it_was_clamped_to() {
    let (app, user, ids) = demo().await;
    let max =
        app.session(&user).await["capabilities"]["urn:ietf:params:jmap:core"]["maxObjectsInGet"]
            .clone();
    for method in ["Email/query", "Mailbox/query"] {
        let unlimited = app.call_in(&user, method, json!({})).await;
        assert_eq!(unlimited["limit"], max, "{method}");
        let over = app
            .call_in(&user, method, json!({"limit": 1_000_000}))
            .await;
        assert_eq!(over["limit"], max, "{method}");
        let under = app.call_in(&user, method, json!({"limit": 2})).await;
        assert!(under.get("limit").is_none(), "{method}: {under}");
        assert_eq!(under["ids"].as_array().unwrap().len(), 2);
    }
    let all = app.call_in(&user, "Email/query", json!({})).await;
    assert_eq!(all["ids"].as_array().unwrap().len(), ids.len());
}

#[tokio::test]
async fn keyword_sorts_and_thread_keyword_filters_follow_rfc8621_section_4_4() {
    let (app, user, ids) = demo().await;
    // The thread of 08..11 (ids[7..11]); flag one of its emails, and 01.
    let thread = app
        .email_get(&user, &[&ids[7], &ids[8], &ids[9], &ids[10]], &["threadId"])
        .await;
    let thread_ids: Vec<&Value> = thread["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["threadId"])
        .collect();
    assert!(
        thread_ids.iter().all(|t| *t == thread_ids[0]),
        "one thread: {thread}"
    );
    let set = app
        .call_in(
            &user,
            "Email/set",
            json!({"update": {
                (ids[8].clone()): {"keywords/$flagged": true},
                (ids[0].clone()): {"keywords/$flagged": true},
            }}),
        )
        .await;
    assert_eq!(set["updated"].as_object().unwrap().len(), 2, "{set}");
    let query = |filter: Value, sort: Value| {
        let app = &app;
        let user = &user;
        async move {
            app.call1(
                user,
                "Email/query",
                json!({"accountId": user.account_id, "filter": filter, "sort": sort}),
            )
            .await
        }
    };
    let received = json!({"property": "receivedAt", "isAscending": true});
    let some = query(
        json!({"someInThreadHaveKeyword": "$Flagged"}),
        json!([received]),
    )
    .await;
    assert_eq!(
        some["ids"],
        json!([ids[0], ids[7], ids[8], ids[9], ids[10]])
    );
    assert_eq!(some["canCalculateChanges"], false);
    let none = query(
        json!({"noneInThreadHaveKeyword": "$flagged"}),
        json!([received]),
    )
    .await;
    assert_eq!(none["ids"].as_array().unwrap().len(), ids.len() - 5);
    let all = query(
        json!({"allInThreadHaveKeyword": "$flagged"}),
        json!([received]),
    )
    .await;
    assert_eq!(all["ids"], json!([ids[0]]));
    // hasKeyword sort: flagged first when descending, then receivedAt.
    let sorted = query(
        json!(null),
        json!([{"property": "hasKeyword", "keyword": "$flagged", "isAscending": false}, received]),
    )
    .await;
    let sorted: Vec<String> = serde_json::from_value(sorted["ids"].clone()).unwrap();
    assert_eq!(sorted[..2], [ids[0].clone(), ids[8].clone()]);
    assert_eq!(sorted.len(), ids.len());
    assert_eq!(sorted[2], ids[1]);
    // someInThreadHaveKeyword sort: the flagged thread's emails and 01 first.
    let by_thread = query(
        json!(null),
        json!([{"property": "someInThreadHaveKeyword", "keyword": "$flagged", "isAscending": false}, received]),
    )
    .await;
    assert_eq!(
        by_thread["ids"].as_array().unwrap()[..5],
        [&ids[0], &ids[7], &ids[8], &ids[9], &ids[10]].map(|id| json!(id))
    );
    // A keyword sort without its keyword is invalidArguments.
    let missing = app
        .call(&user, json!([["Email/query", {"accountId": user.account_id, "sort": [{"property": "hasKeyword"}]}, "q"]]))
        .await;
    assert_eq!(missing[0][1]["type"], "invalidArguments");
    // Email/queryChanges: a hasKeyword sort is followed, a thread filter is refused.
    let flagged_sort =
        json!([{"property": "hasKeyword", "keyword": "$flagged", "isAscending": false}, received]);
    let before = query(json!(null), flagged_sort.clone()).await;
    assert_eq!(before["canCalculateChanges"], true);
    app.call_in(
        &user,
        "Email/set",
        json!({"update": {(ids[5].clone()): {"keywords/$flagged": true}}}),
    )
    .await;
    let changes = app
        .call_in(
            &user,
            "Email/queryChanges",
            json!({"sort": flagged_sort, "sinceQueryState": before["queryState"]}),
        )
        .await;
    assert_eq!(changes["removed"], json!([ids[5]]), "{changes}");
    assert_eq!(changes["added"], json!([{"id": ids[5], "index": 1}]));
    let refused = app
        .call(&user, json!([["Email/queryChanges", {"accountId": user.account_id, "filter": {"someInThreadHaveKeyword": "$flagged"}, "sinceQueryState": before["queryState"]}, "c"]]))
        .await;
    assert_eq!(refused[0][1]["type"], "cannotCalculateChanges");
}

/// Email/copy and Blob/copy (RFC 8620 §5.4, §6.3): the same account twice is
/// `invalidArguments`; a login sees only its own account, so another source
/// is `fromAccountNotFound` and another destination `accountNotFound`.
#[tokio::test]
async fn copies_name_their_accounts_as_rfc8620_section_5_4_says() {
    let (app, [ann, bob]) = spawn_with_accounts(["ann@example.com", "bob@example.com"]).await;
    for (method, extra) in [
        (
            "Email/copy",
            json!({"create": {"x": {"id": "e1", "mailboxIds": {(ann.inbox.clone()): true}}}}),
        ),
        ("Blob/copy", json!({"blobIds": ["placeholder"]})),
    ] {
        let call = |from: &str, to: &str| {
            let mut arguments = extra.clone();
            arguments["fromAccountId"] = json!(from);
            arguments["accountId"] = json!(to);
            json!([[method, arguments, "c"]])
        };
        let same = app.call(&ann, call(&ann.account_id, &ann.account_id)).await;
        assert_eq!(same[0][1]["type"], "invalidArguments", "{method}: {same:?}");
        let from_other = app.call(&ann, call(&bob.account_id, &ann.account_id)).await;
        assert_eq!(from_other[0][1]["type"], "fromAccountNotFound", "{method}");
        let to_other = app.call(&ann, call(&ann.account_id, &bob.account_id)).await;
        assert_eq!(to_other[0][1]["type"], "accountNotFound", "{method}");
        let missing = app
            .call(&ann, json!([[method, {"accountId": ann.account_id}, "c"]]))
            .await;
        assert_eq!(missing[0][1]["type"], "invalidArguments", "{method}");
    }
}

/// RFC 8621 §4.8: a blob that does not even open with a header field is no
/// message: `invalidEmail`, and the upload stays for a retry. RFC 8620
/// §5.3: a second sibling mailbox of one name is `alreadyExists` naming the first.
#[tokio::test]
async fn a_blob_that_is_no_message_and_a_duplicate_mailbox_name_are_refused_by_name() {
    let (app, [user]) = spawn_with_accounts(["ann@example.com"]).await;
    let (_, upload) = app.upload(&user, b"this is not an email".to_vec()).await;
    let response = app
        .call_in(
            &user,
            "Email/import",
            json!({"emails": {
                "bad": {"blobId": upload["blobId"], "mailboxIds": {(user.inbox.clone()): true}}}}),
        )
        .await;
    assert_eq!(
        response["notCreated"]["bad"]["type"], "invalidEmail",
        "{response}"
    );
    assert_eq!(response["created"], Value::Null);
    let parsed = app
        .call_in(&user, "Email/parse", json!({"blobIds": [upload["blobId"]]}))
        .await;
    assert_eq!(parsed["notParsable"], json!([upload["blobId"]]));

    let first = app.create_mailbox(&user, "Projects").await;
    let again = app
        .call_in(
            &user,
            "Mailbox/set",
            json!({"create": {"b": {"name": "projects"}}}),
        )
        .await;
    assert_eq!(again["notCreated"]["b"]["type"], "alreadyExists", "{again}");
    assert_eq!(again["notCreated"]["b"]["existingId"], first);
}

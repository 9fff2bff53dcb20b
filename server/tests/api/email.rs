//! RFC 8621 mail methods on the demo messages: Mailbox/*, Email/query,
//! Email/get, Email/set, Email/import, Thread/get, and state strings.

use fastview::store::sqlite::SqliteStore;
use serde_json::{Value, json};

use crate::support::{TestAccount, TestApp, demo_messages, spawn_with_messages};

async fn demo_account() -> (TestApp, TestAccount, Vec<String>) {
    let (app, user, ids) = spawn_with_messages(&demo_messages()).await;
    (app, user, ids)
}

async fn query(app: &TestApp, user: &TestAccount, filter: Value, sort: Value) -> Vec<String> {
    let response = app
        .call1(user, "Email/query", json!({"accountId": user.account_id, "filter": filter, "sort": sort, "calculateTotal": true}))
        .await;
    let ids: Vec<String> = serde_json::from_value(response["ids"].clone()).unwrap();
    assert_eq!(response["total"], json!(ids.len()));
    ids
}

#[tokio::test]
async fn inbox_listing_is_served_from_the_mailbox_received_index() {
    let (app, user, ids) = demo_account().await;
    let newest_first = query(
        &app,
        &user,
        json!({"inMailbox": user.inbox}),
        json!([{"property": "receivedAt", "isAscending": false}]),
    )
    .await;
    let mut expected = ids.clone();
    expected.reverse();
    assert_eq!(newest_first, expected);
    let page = app
        .call_in(
            &user,
            "Email/query",
            json!({"filter": {"inMailbox": user.inbox},
            "sort": [{"property": "receivedAt", "isAscending": true}], "position": 2, "limit": 3}),
        )
        .await;
    assert_eq!(page["ids"], json!(ids[2..5]));
    assert_eq!(page["position"], json!(2));
    let tail = app
        .call_in(
            &user,
            "Email/query",
            json!({"filter": {"inMailbox": user.inbox},
            "sort": [{"property": "receivedAt", "isAscending": true}], "position": -2, "limit": 5}),
        )
        .await;
    assert_eq!(tail["ids"], json!(ids[ids.len() - 2..]));
    assert_eq!(tail["position"], json!(ids.len() - 2));
    // The query plan walks the (mailbox, receivedAt) primary key: no scan, no sort step.
    let store = SqliteStore::connect(&fastview::app::default_database_url(&app.app.data_dir), 1)
        .await
        .unwrap();
    let plan = store.mailbox_listing_plan().await.unwrap().join("\n");
    assert!(
        plan.contains("SEARCH em USING PRIMARY KEY (mailbox_id=?)"),
        "{plan}"
    );
    assert!(!plan.contains("TEMP B-TREE"), "{plan}");
    assert!(!plan.contains("SCAN em"), "{plan}");
}

#[tokio::test]
async fn query_filters_and_sorts() {
    let (app, user, ids) = demo_account().await;
    let none = Value::Null;
    let (app_ref, user_ref) = (&app, &user);
    let subjects = |found: Vec<String>| async move {
        let response = app_ref
            .call1(
                user_ref,
                "Email/get",
                json!({"accountId": user_ref.account_id, "ids": found, "properties": ["subject"]}),
            )
            .await;
        response["list"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["subject"].as_str().unwrap_or("").to_string())
            .collect::<Vec<_>>()
    };
    let with_attachment = query(&app, &user, json!({"hasAttachment": true}), none.clone()).await;
    assert!(!with_attachment.is_empty() && with_attachment.len() < ids.len());
    let threads = query(
        &app,
        &user,
        json!({"subject": "thread"}),
        json!([{"property": "receivedAt"}]),
    )
    .await;
    let complement = query(
        &app,
        &user,
        json!({"operator": "NOT", "conditions": [{"subject": "thread"}]}),
        none.clone(),
    )
    .await;
    assert_eq!(threads.len() + complement.len(), ids.len());
    let before = query(
        &app,
        &user,
        json!({"before": "2023-11-14T22:13:23Z"}),
        json!([{"property": "receivedAt"}]),
    )
    .await;
    assert_eq!(before, ids[..3]);
    let after = query(
        &app,
        &user,
        json!({"after": "2023-11-14T22:13:23Z"}),
        json!([{"property": "receivedAt"}]),
    )
    .await;
    assert_eq!(after, ids[3..]);
    let by_size = query(
        &app,
        &user,
        json!(null),
        json!([{"property": "size", "isAscending": false}]),
    )
    .await;
    let sizes = app.email_get(&user, &by_size, &["size"]).await;
    let sizes: Vec<u64> = sizes["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["size"].as_u64().unwrap())
        .collect();
    assert!(sizes.windows(2).all(|w| w[0] >= w[1]), "{sizes:?}");
    let collapsed = app
        .call_in(
            &user,
            "Email/query",
            json!({"collapseThreads": true, "calculateTotal": true}),
        )
        .await;
    assert_eq!(
        collapsed["total"],
        json!(ids.len() - 3),
        "the 4-message thread collapses to one"
    );
    let by_subject =
        subjects(query(&app, &user, json!({"header": ["List-Id"]}), none.clone()).await).await;
    assert_eq!(by_subject.len(), 1, "{by_subject:?}");
    let anchored = app
        .call_in(&user, "Email/query", json!({"sort": [{"property": "receivedAt"}], "anchor": ids[4], "anchorOffset": -1, "limit": 2}))
        .await;
    assert_eq!(anchored["ids"], json!(ids[3..5]));
    let missing = app
        .call(&user, json!([["Email/query", {"accountId": user.account_id, "sort": [{"property": "receivedAt"}], "anchor": "e999999"}]]))
        .await;
    assert_eq!(missing[0][1]["type"], json!("anchorNotFound"));
}

#[tokio::test]
async fn email_set_updates_keywords_and_mailboxes_and_advances_states() {
    let (app, user, ids) = demo_account().await;
    let before = app
        .call_in(&user, "Mailbox/get", json!({"ids": [user.inbox]}))
        .await;
    assert_eq!(before["list"][0]["unreadEmails"], json!(ids.len()));
    let archive = app
        .call_in(
            &user,
            "Mailbox/query",
            json!({"filter": {"role": "archive"}}),
        )
        .await["ids"][0]
        .clone();
    let response = app
        .call_in(&user, "Email/set", json!({"update": {
            ids[0].clone(): {"keywords/$seen": true, "keywords/$Flagged": true},
            ids[1].clone(): {"keywords": {"$seen": true}, "mailboxIds": {archive.as_str().unwrap(): true}},
            ids[2].clone(): {"mailboxIds": {}},
            ids[3].clone(): {"subject": "nope"},
            "e999999": {"keywords/$seen": true},
        }, "destroy": [ids[4].clone(), "e999998"]}))
        .await;
    assert_eq!(
        response["updated"],
        json!({ids[0].clone(): null, ids[1].clone(): null})
    );
    assert_eq!(
        response["notUpdated"][&ids[2]]["type"],
        json!("invalidProperties")
    );
    assert_eq!(
        response["notUpdated"][&ids[3]]["properties"],
        json!(["subject"])
    );
    assert_eq!(response["notUpdated"]["e999999"]["type"], json!("notFound"));
    assert_eq!(response["destroyed"], json!([ids[4].clone()]));
    assert_eq!(
        response["notDestroyed"]["e999998"]["type"],
        json!("notFound")
    );
    assert_ne!(response["oldState"], response["newState"]);
    let got = app
        .email_get(
            &user,
            &[&ids[0], &ids[1], &ids[4]],
            &["keywords", "mailboxIds"],
        )
        .await;
    assert_eq!(
        got["list"][0]["keywords"],
        json!({"$flagged": true, "$seen": true})
    );
    assert_eq!(
        got["list"][1]["mailboxIds"],
        json!({archive.as_str().unwrap(): true})
    );
    assert_eq!(got["notFound"], json!([ids[4].clone()]));
    let after = app
        .call_in(&user, "Mailbox/get", json!({"ids": [user.inbox]}))
        .await;
    assert_eq!(after["list"][0]["totalEmails"], json!(ids.len() - 2));
    assert_eq!(after["list"][0]["unreadEmails"], json!(ids.len() - 3));
    assert_ne!(after["state"], before["state"]);
}

/// Mailbox counts are kept per account at its Email and Mailbox states:
/// the same answer while nothing changes, new counts as soon as an email
/// or a mailbox does, whichever request changed it.
#[tokio::test]
async fn mailbox_counts_are_kept_until_a_state_moves() {
    let (app, user, ids) = demo_account().await;
    let inbox = user.inbox.clone();
    let get = || {
        app.call_in(&user, "Mailbox/get", json!({"ids": [inbox], "properties": ["name", "totalEmails", "unreadEmails", "totalThreads", "unreadThreads"]}),
        )
    };
    let first = get().await;
    assert_eq!(first["list"][0]["unreadEmails"], json!(ids.len()));
    assert_eq!(get().await, first);
    assert_eq!(
        app.metric("fastview_cache_entries{cache=\"mailboxes\"}")
            .await,
        1.0
    );
    // A keyword: the Email state moves, the Mailbox counts follow.
    app.update_email(&user, &ids[0], json!({"keywords/$seen": true}))
        .await;
    let seen = get().await;
    assert_eq!(seen["list"][0]["unreadEmails"], json!(ids.len() - 1));
    assert_eq!(seen["list"][0]["totalEmails"], json!(ids.len()));
    // A rename: the Mailbox state moves.
    app.call_in(
        &user,
        "Mailbox/set",
        json!({"update": {inbox.clone(): {"name": "Post"}}}),
    )
    .await;
    let renamed = get().await;
    assert_eq!(renamed["list"][0]["name"], json!("Post"));
    assert_eq!(renamed["list"][0]["unreadEmails"], json!(ids.len() - 1));
    // An email destroyed, then Mailbox/query by the kept rows' counts.
    app.call_in(&user, "Email/set", json!({"destroy": [ids[1].clone()]}))
        .await;
    assert_eq!(get().await["list"][0]["totalEmails"], json!(ids.len() - 1));
    let sorted = app
        .call_in(&user, "Mailbox/query", json!({"filter": {"name": "Post"}}))
        .await;
    assert_eq!(sorted["ids"], json!([inbox]));
}

#[tokio::test]
async fn list_view_pages_are_kept_until_a_state_moves() {
    let (app, user, ids) = demo_account().await;
    assert!(ids.len() >= 4, "the demo messages: {}", ids.len());
    let newest_first: Vec<String> = ids.iter().rev().cloned().collect();
    let page = |limit: usize| {
        app.call_in(
            &user,
            "Email/query",
            json!({"filter": {"inMailbox": user.inbox},
                "sort": [{"property": "receivedAt", "isAscending": false}],
                "limit": limit, "calculateTotal": true}),
        )
    };
    let first = page(2).await;
    assert_eq!(first["ids"], json!(newest_first[..2]));
    assert_eq!(first["total"], json!(ids.len()));
    assert_eq!(page(2).await, first);
    assert_eq!(page(3).await["ids"], json!(newest_first[..3]));
    assert_eq!(
        app.metric("fastview_cache_entries{cache=\"pages\"}").await,
        2.0
    );
    // The newest email moved to another mailbox: the Email state moves,
    // both kept pages give way.
    let later = app.create_mailbox(&user, "Later").await;
    assert_eq!(page(2).await, first, "a new mailbox changes no page");
    app.call_in(
        &user,
        "Email/set",
        json!({"update": {newest_first[0].clone(): {"mailboxIds": {later.clone(): true}}}}),
    )
    .await;
    let moved = page(2).await;
    assert_eq!(moved["ids"], json!(newest_first[1..3]));
    assert_eq!(moved["total"], json!(ids.len() - 1));
    assert_eq!(page(3).await["ids"], json!(newest_first[1..4]));
    // An email destroyed.
    app.call_in(
        &user,
        "Email/set",
        json!({"destroy": [newest_first[1].clone()]}),
    )
    .await;
    let destroyed = page(2).await;
    assert_eq!(destroyed["ids"], json!(newest_first[2..4]));
    assert_eq!(destroyed["total"], json!(ids.len() - 2));
    // Each answer names the state it is of.
    let state = app.state(&user, "Email").await;
    assert_eq!(destroyed["queryState"], state);
    assert_ne!(first["queryState"], state);
}

#[tokio::test]
async fn email_import_stores_an_upload_and_threads_join() {
    let (app, user, ids) = demo_account().await;
    let reply = b"From: Bob <bob@example.org>\r\nTo: ann@example.com\r\nSubject: Re: Welcome to your Fastview demo mailbox\r\n\
        Message-ID: <reply-1@example.org>\r\nIn-Reply-To: <welcome.20240304083000@example.org>\r\n\r\nThanks!\r\n".to_vec();
    let uploaded: Value = app
        .upload_typed(&user, "message/rfc822", reply.clone())
        .await;
    let responses = app
        .call(&user, json!([
            ["Email/import", {"accountId": user.account_id, "emails": {
                "r": {"blobId": uploaded["blobId"], "mailboxIds": {user.inbox.clone(): true}, "keywords": {"$seen": true}, "receivedAt": "2024-05-01T10:00:00Z"},
                "bad": {"blobId": "0".repeat(64), "mailboxIds": {user.inbox.clone(): true}},
            }}],
            ["Email/import", {"accountId": user.account_id, "emails": {
                "again": {"blobId": uploaded["blobId"], "mailboxIds": {user.inbox.clone(): true}},
            }}],
        ]))
        .await;
    let created = &responses[0][1]["created"]["r"];
    assert_eq!(created["size"], json!(reply.len()));
    assert_eq!(created["blobId"], uploaded["blobId"]);
    // RFC 8621 §4.8: a blobId not found MUST be invalidProperties.
    assert_eq!(
        responses[0][1]["notCreated"]["bad"]["type"],
        json!("invalidProperties")
    );
    assert_eq!(
        responses[1][1]["notCreated"]["again"]["type"],
        json!("alreadyExists")
    );
    assert_eq!(
        responses[1][1]["notCreated"]["again"]["existingId"],
        created["id"]
    );
    let got = app
        .email_get(
            &user,
            &[&created["id"]],
            &["size", "receivedAt", "keywords", "preview", "threadId"],
        )
        .await;
    let email = &got["list"][0];
    assert_eq!(email["keywords"], json!({"$seen": true}));
    assert_eq!(email["receivedAt"], json!("2024-05-01T10:00:00Z"));
    assert_eq!(email["preview"], json!("Thanks!"));
    // The reply names the welcome message and shares its base subject: same thread.
    let welcome = app
        .email_get(&user, &[&ids[0]], &["messageId", "threadId"])
        .await;
    assert_eq!(
        welcome["list"][0]["messageId"],
        json!(["welcome.20240304083000@example.org"])
    );
    assert_eq!(email["threadId"], welcome["list"][0]["threadId"]);
}

#[tokio::test]
async fn the_demo_thread_is_one_thread_in_order() {
    let (app, user, ids) = demo_account().await;
    let got = app.email_get(&user, &ids, &["threadId", "subject"]).await;
    let list = got["list"].as_array().unwrap();
    // 08-thread-1 … 11-thread-4 are one conversation ("Re: Réunion de lundi …").
    let thread_members: Vec<usize> = vec![7, 8, 9, 10];
    assert!(list[8]["subject"].as_str().unwrap().starts_with("Re: "));
    let thread_id = list[thread_members[0]]["threadId"].clone();
    assert!(
        thread_members
            .iter()
            .all(|i| list[*i]["threadId"] == thread_id),
        "{list:?}"
    );
    let distinct: std::collections::HashSet<String> =
        list.iter().map(|e| e["threadId"].to_string()).collect();
    assert_eq!(distinct.len(), list.len() - 3);
    let threads = app
        .call_in(&user, "Thread/get", json!({"ids": [thread_id, "t999999"]}))
        .await;
    let expected: Vec<String> = thread_members.iter().map(|i| ids[*i].clone()).collect();
    assert_eq!(threads["list"][0]["emailIds"], json!(expected));
    assert_eq!(threads["notFound"], json!(["t999999"]));
}

#[tokio::test]
async fn mailbox_set_creates_renames_moves_and_destroys() {
    let (app, user, ids) = demo_account().await;
    let response = app
        .call_in(
            &user,
            "Mailbox/set",
            json!({"create": {
                "work": {"name": "Work"},
                "clients": {"name": "Clients", "parentId": "#work"},
                "dup": {"name": "inbox"},
                "nameless": {},
            }}),
        )
        .await;
    // A sibling of the same name: alreadyExists naming the inbox (RFC 8620 §5.3).
    assert_eq!(
        response["notCreated"]["dup"]["type"],
        json!("alreadyExists")
    );
    assert_eq!(
        response["notCreated"]["dup"]["existingId"],
        json!(user.inbox)
    );
    assert_eq!(
        response["notCreated"]["nameless"]["properties"],
        json!(["name"])
    );
    let work = response["created"]["work"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let clients = response["created"]["clients"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let moved = app
        .call_in(
            &user,
            "Email/set",
            json!({"update": {ids[0].clone(): {"mailboxIds": {clients.clone(): true}}}}),
        )
        .await;
    assert_eq!(moved["updated"], json!({ids[0].clone(): null}));
    let response = app
        .call_in(&user, "Mailbox/set", json!({"update": {clients.clone(): {"name": "Customers", "parentId": null}, work.clone(): {"parentId": work}},
            "destroy": [clients.clone(), user.inbox.clone()]}))
        .await;
    assert_eq!(response["updated"], json!({clients.clone(): null}));
    assert_eq!(
        response["notUpdated"][&work]["type"],
        json!("invalidProperties")
    );
    assert_eq!(
        response["notDestroyed"][&clients]["type"],
        json!("mailboxHasEmail")
    );
    assert_eq!(
        response["notDestroyed"][&user.inbox]["type"],
        json!("forbidden")
    );
    let response = app
        .call_in(
            &user,
            "Mailbox/set",
            json!({"destroy": [clients.clone(), work.clone()], "onDestroyRemoveEmails": true}),
        )
        .await;
    assert_eq!(response["destroyed"], json!([clients, work]));
    let gone = app.email_get(&user, &[&ids[0]], &["id"]).await;
    assert_eq!(gone["notFound"], json!([ids[0].clone()]));
    let listed = app
        .call_in(
            &user,
            "Mailbox/query",
            json!({"sort": [{"property": "sortOrder"}], "calculateTotal": true}),
        )
        .await;
    assert_eq!(listed["total"], json!(6));
}

#[tokio::test]
async fn patch_paths_are_json_pointers_depth_is_bounded_and_using_is_honoured() {
    let (app, user, ids) = demo_account().await;
    let response = app
        .call_in(
            &user,
            "Email/set",
            json!({"update": {
                ids[0].clone(): {"keywords/a~1b": true},
                ids[1].clone(): {"keywords/$seen/x": true},
                ids[2].clone(): {"keywords/$seen": false},
                ids[3].clone(): {"keywords/a~2b": true},
            }}),
        )
        .await;
    assert_eq!(response["updated"], json!({ids[0].clone(): null}));
    assert_eq!(
        response["notUpdated"][&ids[1]]["type"],
        json!("invalidPatch")
    );
    assert_eq!(
        response["notUpdated"][&ids[2]]["type"],
        json!("invalidProperties")
    );
    assert_eq!(
        response["notUpdated"][&ids[3]]["type"],
        json!("invalidPatch")
    );
    let got = app.email_get(&user, &[&ids[0]], &["keywords"]).await;
    assert_eq!(got["list"][0]["keywords"], json!({"a/b": true}));

    // maxMailboxDepth is 10: a chain of 11 stops at the 11th.
    let mut create = serde_json::Map::new();
    for i in 0..11 {
        let mut mailbox = json!({"name": format!("n{i}")});
        if i > 0 {
            mailbox["parentId"] = json!(format!("#n{}", i - 1));
        }
        create.insert(format!("n{i}"), mailbox);
    }
    let response = app
        .call_in(&user, "Mailbox/set", json!({"create": create}))
        .await;
    assert_eq!(response["created"].as_object().unwrap().len(), 10);
    assert_eq!(
        response["notCreated"]["n10"]["properties"],
        json!(["parentId"])
    );

    // A mail method in a request that names only the core capability is unknown.
    let body = json!({"using": ["urn:ietf:params:jmap:core"], "methodCalls": [
        ["Email/get", {"accountId": user.account_id, "ids": [ids[0]]}, "0"],
        ["Core/echo", {"x": 1}, "1"],
    ]});
    let (status, response) = app.api_raw(&user, &body).await;
    assert_eq!(status, 200);
    assert_eq!(
        response["methodResponses"][0][1]["type"],
        json!("unknownMethod")
    );
    assert_eq!(
        response["methodResponses"][1],
        json!(["Core/echo", {"x": 1}, "1"])
    );
}

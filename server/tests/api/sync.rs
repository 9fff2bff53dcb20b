//! Clients stay in sync: Foo/changes, Foo/queryChanges and push (RFC 8620
//! §5.2, §5.6, §7.3), as a caching client uses them. Changes are made
//! through the API, through `fastview import` (another process), and
//! applied to cached lists that must equal a fresh fetch.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};

use crate::support::{
    PASSWORD, TestAccount, TestApp, demo_messages, run_ok, spawn_with_accounts, spawn_with_messages,
};

/// The properties a client caches of each email.
const EMAIL_PROPERTIES: &[&str] = &["id", "threadId", "mailboxIds", "keywords", "subject"];

/// Cached objects by id, and the state they are at.
#[derive(Debug, Clone, PartialEq)]
struct Cache {
    state: String,
    objects: BTreeMap<String, Value>,
}

async fn get_all(
    app: &TestApp,
    user: &TestAccount,
    method: &str,
    ids: Option<Vec<String>>,
) -> (String, Vec<Value>) {
    let mut arguments = json!({"accountId": user.account_id, "ids": ids});
    if method == "Email/get" {
        arguments["properties"] = json!(EMAIL_PROPERTIES);
    }
    let response = app.call1(user, method, arguments).await;
    (
        response["state"].as_str().unwrap().to_string(),
        response["list"].as_array().unwrap().clone(),
    )
}

impl Cache {
    /// A cache holding `list` (objects with an `id`) at `state`.
    fn of(state: String, list: Vec<Value>) -> Self {
        let objects = list
            .into_iter()
            .map(|o| (o["id"].as_str().unwrap().to_string(), o))
            .collect();
        Cache { state, objects }
    }
}

async fn fetch(app: &TestApp, user: &TestAccount, kind: &str) -> Cache {
    let (state, list) = get_all(app, user, &format!("{kind}/get"), None).await;
    Cache::of(state, list)
}

/// A cache of the threads of the emails in `emails`, by Thread/get.
async fn fetch_threads(app: &TestApp, user: &TestAccount, emails: &Cache) -> Cache {
    let thread_ids: Vec<String> = emails
        .objects
        .values()
        .map(|e| e["threadId"].as_str().unwrap().to_string())
        .collect();
    let (state, list) = get_all(app, user, "Thread/get", Some(thread_ids)).await;
    Cache::of(state, list)
}

/// Brings a cache up to date with `{kind}/changes` pages of `max` ids;
/// returns the number of pages.
async fn sync(
    app: &TestApp,
    user: &TestAccount,
    kind: &str,
    cache: &mut Cache,
    max: usize,
) -> usize {
    let mut pages = 0;
    loop {
        let changes = app
            .call1(
                user,
                &format!("{kind}/changes"),
                json!({"accountId": user.account_id, "sinceState": cache.state, "maxChanges": max}),
            )
            .await;
        pages += 1;
        assert_eq!(changes["oldState"], json!(cache.state));
        let ids =
            |name: &str| -> Vec<String> { serde_json::from_value(changes[name].clone()).unwrap() };
        let (created, updated, destroyed) = (ids("created"), ids("updated"), ids("destroyed"));
        assert!(
            created.len() + updated.len() + destroyed.len() <= max,
            "{changes}"
        );
        for id in &destroyed {
            cache.objects.remove(id);
        }
        let wanted: Vec<String> = created.iter().chain(&updated).cloned().collect();
        if !wanted.is_empty() {
            let (_, list) = get_all(app, user, &format!("{kind}/get"), Some(wanted)).await;
            for object in list {
                cache
                    .objects
                    .insert(object["id"].as_str().unwrap().to_string(), object);
            }
        }
        cache.state = changes["newState"].as_str().unwrap().to_string();
        if changes["hasMoreChanges"] == json!(false) {
            return pages;
        }
    }
}

async fn upload(app: &TestApp, user: &TestAccount, raw: &[u8]) -> String {
    let (_, uploaded) = app.upload(user, raw.to_vec()).await;
    uploaded["blobId"].as_str().unwrap().to_string()
}

async fn mailbox_by_role(app: &TestApp, user: &TestAccount, role: &str) -> String {
    app.call1(
        user,
        "Mailbox/query",
        json!({"accountId": user.account_id, "filter": {"role": role}}),
    )
    .await["ids"][0]
        .as_str()
        .unwrap()
        .to_string()
}

/// Writes `.eml` files and runs `fastview import` on them (another process).
fn cli_import(app: &TestApp, user: &TestAccount, messages: &[(&str, String)]) {
    let dir = tempfile::tempdir().unwrap();
    for (name, body) in messages {
        std::fs::write(dir.path().join(format!("{name}.eml")), body).unwrap();
    }
    run_ok(
        app.cli()
            .arg("import")
            .arg("--account")
            .arg(&user.email)
            .arg(dir.path()),
    );
}

fn message(id: &str, subject: &str, reply_to: Option<&str>) -> String {
    let mut raw = format!(
        "From: Cy <cy@example.net>\r\nTo: ann@example.com\r\nSubject: {subject}\r\nMessage-ID: <{id}>\r\n"
    );
    if let Some(parent) = reply_to {
        raw.push_str(&format!("In-Reply-To: <{parent}>\r\n"));
    }
    raw.push_str("\r\nbody\r\n");
    raw
}

#[tokio::test]
async fn a_caching_client_follows_every_kind_of_change() {
    let (app, user, ids) = spawn_with_messages(&demo_messages()).await;
    let mut emails = fetch(&app, &user, "Email").await;
    let mut mailboxes = fetch(&app, &user, "Mailbox").await;
    let mut threads = fetch_threads(&app, &user, &emails).await;
    let archive = mailbox_by_role(&app, &user, "archive").await;

    // Email/set: read, flag, move, destroy.
    let set = app
        .call_in(&user, "Email/set", json!({"update": {
                ids[0].clone(): {"keywords/$seen": true},
                ids[1].clone(): {"keywords/$flagged": true, "mailboxIds/{archive}".replace("{archive}", &archive): true},
                ids[2].clone(): {"mailboxIds": {archive.clone(): true}},
            },
            "destroy": [ids[8].clone()]}))
        .await;
    assert_eq!(set["destroyed"], json!([ids[8].clone()]), "{set}");
    // Email/import: a reply joining a thread.
    let reply = "From: Bob <bob@example.org>\r\nSubject: Re: Welcome to your Fastview demo mailbox\r\nMessage-ID: <sync-1@example.org>\r\nIn-Reply-To: <welcome.20240304083000@example.org>\r\n\r\nThanks\r\n";
    let blob = upload(&app, &user, reply.as_bytes()).await;
    let imported = app.import_to_inbox(&user, &blob).await;
    assert!(imported["created"]["i"]["id"].is_string(), "{imported}");
    // Mailbox/set: create, rename, and a mailbox destroyed with its email.
    let created = app
        .call_in(
            &user,
            "Mailbox/set",
            json!({"create": {
            "w": {"name": "Work"}, "t": {"name": "Temp"}}}),
        )
        .await;
    let work = created["created"]["w"]["id"].as_str().unwrap().to_string();
    let temp = created["created"]["t"]["id"].as_str().unwrap().to_string();
    app.call_in(
        &user,
        "Email/set",
        json!({"update": {ids[3].clone(): {"mailboxIds": {temp.clone(): true}}}}),
    )
    .await;
    let responses = app
        .call(&user, json!([
            ["Mailbox/set", {"accountId": user.account_id, "update": {work.clone(): {"name": "Projects"}}}],
            ["Mailbox/set", {"accountId": user.account_id, "destroy": [temp.clone()], "onDestroyRemoveEmails": true}],
        ]))
        .await;
    assert_eq!(
        responses[1][1]["destroyed"],
        json!([temp.clone()]),
        "{responses:?}"
    );
    // Another process: `fastview import`, several messages in one batch.
    // (A thread of seven: the first starts it, the others reply to it.)
    let names = ["a", "b", "c", "d", "e", "f", "g"];
    let cli: Vec<(&str, String)> = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let id = format!("cli-{i}@example.net");
            let parent = (i > 0).then_some("cli-0@example.net");
            (*name, message(&id, &format!("CLI {i}"), parent))
        })
        .collect();
    cli_import(&app, &user, &cli);

    let email_pages = sync(&app, &user, "Email", &mut emails, 3).await;
    let mailbox_pages = sync(&app, &user, "Mailbox", &mut mailboxes, 2).await;
    let thread_pages = sync(&app, &user, "Thread", &mut threads, 2).await;
    assert!(
        email_pages > 3 && mailbox_pages > 1 && thread_pages > 1,
        "{email_pages} {mailbox_pages} {thread_pages}"
    );
    assert_eq!(emails, fetch(&app, &user, "Email").await);
    assert_eq!(mailboxes, fetch(&app, &user, "Mailbox").await);
    let fresh = fetch_threads(&app, &user, &emails).await;
    assert_eq!(threads, fresh);
    assert!(!mailboxes.objects.contains_key(&temp));
    assert_eq!(mailboxes.objects[&work]["name"], json!("Projects"));
    assert!(!emails.objects.contains_key(&ids[3]) && !emails.objects.contains_key(&ids[8]));

    // Nothing more: one empty page at the same state.
    let again = app
        .call_in(&user, "Email/changes", json!({"sinceState": emails.state}))
        .await;
    assert_eq!(
        (again["created"].clone(), again["newState"].clone()),
        (json!([]), json!(emails.state))
    );
}

#[tokio::test]
async fn mailbox_changes_say_when_only_counts_changed_and_bad_states_cannot_be_calculated() {
    let (app, user, ids) = spawn_with_messages(&demo_messages()[..3]).await;
    let state = app.state(&user, "Mailbox").await;
    app.update_email(&user, &ids[0], json!({"keywords/$seen": true}))
        .await;
    let changes = app
        .call_in(&user, "Mailbox/changes", json!({"sinceState": state}))
        .await;
    assert_eq!(changes["updated"], json!([user.inbox.clone()]));
    assert_eq!(
        changes["updatedProperties"],
        json!([
            "totalEmails",
            "unreadEmails",
            "totalThreads",
            "unreadThreads"
        ])
    );
    app.call_in(
        &user,
        "Mailbox/set",
        json!({"update": {user.inbox.clone(): {"sortOrder": 9}}}),
    )
    .await;
    let changes = app
        .call_in(&user, "Mailbox/changes", json!({"sinceState": state}))
        .await;
    assert_eq!(changes["updatedProperties"], Value::Null);

    let current = app.state(&user, "Email").await;
    let future = (current.parse::<i64>().unwrap() + 5).to_string();
    for bad in ["", "abc", "-1", "01", future.as_str(), "1:x"] {
        for method in ["Email/changes", "Mailbox/changes", "Thread/changes"] {
            let responses = app
                .call(
                    &user,
                    json!([[method, {"accountId": user.account_id, "sinceState": bad}]]),
                )
                .await;
            assert_eq!(responses[0][0], "error", "{method} {bad}");
            assert_eq!(
                responses[0][1]["type"], "cannotCalculateChanges",
                "{method} {bad}"
            );
        }
    }
    let zero = app.call(&user, json!([["Email/changes", {"accountId": user.account_id, "sinceState": current, "maxChanges": 0}]])).await;
    assert_eq!(zero[0][1]["type"], "invalidArguments");
}

/// Applies queryChanges to a cached id list as RFC 8620 §5.6 describes.
fn apply_query_changes(ids: &mut Vec<String>, changes: &Value) {
    let removed: Vec<String> = serde_json::from_value(changes["removed"].clone()).unwrap();
    ids.retain(|id| !removed.contains(id));
    for added in changes["added"].as_array().unwrap() {
        let index = added["index"].as_u64().unwrap() as usize;
        ids.insert(
            index.min(ids.len()),
            added["id"].as_str().unwrap().to_string(),
        );
    }
}

#[tokio::test]
async fn query_changes_bring_cached_queries_up_to_date() {
    let (app, user, ids) = spawn_with_messages(&demo_messages()).await;
    let archive = mailbox_by_role(&app, &user, "archive").await;
    let queries = [
        (
            json!({"inMailbox": user.inbox}),
            json!([{"property": "receivedAt", "isAscending": false}]),
        ),
        (
            json!({"inMailbox": user.inbox}),
            json!([{"property": "receivedAt", "isAscending": true}]),
        ),
        (
            json!({"notKeyword": "$seen"}),
            json!([{"property": "size"}]),
        ),
        (json!(null), json!([{"property": "subject"}])),
        (json!({"subject": "thread"}), json!(null)),
    ];
    let mut cached = Vec::new();
    for (filter, sort) in &queries {
        let query = app
            .call_in(
                &user,
                "Email/query",
                json!({"filter": filter, "sort": sort}),
            )
            .await;
        assert_eq!(query["canCalculateChanges"], json!(true));
        let list: Vec<String> = serde_json::from_value(query["ids"].clone()).unwrap();
        cached.push((query["queryState"].as_str().unwrap().to_string(), list));
    }
    let collapsed = app
        .call_in(&user, "Email/query", json!({"collapseThreads": true}))
        .await;
    assert_eq!(collapsed["canCalculateChanges"], json!(false));
    let mailbox_query = json!({"accountId": user.account_id, "sort": [{"property": "name"}]});
    let mailboxes = app
        .call1(&user, "Mailbox/query", mailbox_query.clone())
        .await;
    assert_eq!(mailboxes["canCalculateChanges"], json!(true));

    // Changes: read, move out, destroy, import, and the CLI.
    app.call_in(&user, "Email/set", json!({"update": {ids[0].clone(): {"keywords/$seen": true}, ids[4].clone(): {"mailboxIds": {archive.clone(): true}}},
        "destroy": [ids[6].clone()]}))
        .await;
    cli_import(
        &app,
        &user,
        &[
            ("n1", message("q-1@example.net", "New thread one", None)),
            (
                "n2",
                message(
                    "q-2@example.net",
                    "Re: New thread one",
                    Some("q-1@example.net"),
                ),
            ),
        ],
    );
    app.call_in(&user, "Mailbox/set", json!({"create": {"a": {"name": "Aardvark"}}, "update": {archive.clone(): {"name": "Zebra"}}})).await;

    for ((filter, sort), (state, list)) in queries.iter().zip(cached.iter_mut()) {
        let changes = app
            .call_in(
                &user,
                "Email/queryChanges",
                json!({"filter": filter, "sort": sort,
                "sinceQueryState": state, "calculateTotal": true}),
            )
            .await;
        apply_query_changes(list, &changes);
        let fresh = app
            .call_in(
                &user,
                "Email/query",
                json!({"filter": filter, "sort": sort, "calculateTotal": true}),
            )
            .await;
        assert_eq!(json!(list), fresh["ids"], "{filter} {sort}: {changes}");
        assert_eq!(changes["total"], fresh["total"]);
        assert_eq!(changes["newQueryState"], fresh["queryState"]);
        let indexes: Vec<u64> = changes["added"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["index"].as_u64().unwrap())
            .collect();
        assert!(indexes.windows(2).all(|w| w[0] <= w[1]), "{changes}");
        // maxChanges below the number of changes is tooManyChanges.
        let count = changes["removed"].as_array().unwrap().len()
            + changes["added"].as_array().unwrap().len();
        let too_many = app
            .call(&user, json!([["Email/queryChanges", {"accountId": user.account_id, "filter": filter, "sort": sort,
                "sinceQueryState": state, "maxChanges": count - 1}]]))
            .await;
        assert_eq!(too_many[0][1]["type"], "tooManyChanges");
    }
    let mut mailbox_ids: Vec<String> = serde_json::from_value(mailboxes["ids"].clone()).unwrap();
    let changes = app
        .call_in(
            &user,
            "Mailbox/queryChanges",
            json!({"sort": [{"property": "name"}],
            "sinceQueryState": mailboxes["queryState"]}),
        )
        .await;
    apply_query_changes(&mut mailbox_ids, &changes);
    let fresh = app.call1(&user, "Mailbox/query", mailbox_query).await;
    assert_eq!(json!(mailbox_ids), fresh["ids"]);
    // Count changes do not move mailboxes: the inbox is neither removed nor added.
    assert!(
        !changes["removed"]
            .as_array()
            .unwrap()
            .contains(&json!(user.inbox)),
        "{changes}"
    );

    let responses = app
        .call(&user, json!([
            ["Email/queryChanges", {"accountId": user.account_id, "sinceQueryState": "nope"}],
            ["Email/queryChanges", {"accountId": user.account_id, "sinceQueryState": cached[0].0, "collapseThreads": true}],
        ]))
        .await;
    assert_eq!(responses[0][1]["type"], "cannotCalculateChanges");
    assert_eq!(responses[1][1]["type"], "cannotCalculateChanges");
}

#[tokio::test]
async fn twenty_concurrent_keyword_patches_all_land() {
    let (app, user, ids) = spawn_with_messages(&demo_messages()[..1]).await;
    let before: i64 = app.state(&user, "Email").await.parse().unwrap();
    let calls = (0..20).map(|i| {
        let (app, user, id) = (&app, &user, ids[0].clone());
        async move {
            let response = app
                .call1(
                    user,
                    "Email/set",
                    json!({"accountId": user.account_id,
                    "update": {id.clone(): {format!("keywords/k{i}"): true}}}),
                )
                .await;
            assert_eq!(response["updated"], json!({id: null}), "{response}");
            response["newState"]
                .as_str()
                .unwrap()
                .parse::<i64>()
                .unwrap()
        }
    });
    let states = futures::future::join_all(calls).await;
    let keywords =
        app.email_get(&user, &[&ids[0]], &["keywords"]).await["list"][0]["keywords"].clone();
    let expected: serde_json::Map<String, Value> =
        (0..20).map(|i| (format!("k{i}"), json!(true))).collect();
    assert_eq!(keywords, Value::Object(expected));
    let after: i64 = app.state(&user, "Email").await.parse().unwrap();
    assert_eq!(after, before + 20, "each patch advanced the state once");
    assert!(
        states.iter().all(|s| *s > before && *s <= after),
        "{states:?}"
    );
    let changes = app
        .call_in(
            &user,
            "Email/changes",
            json!({"sinceState": before.to_string()}),
        )
        .await;
    assert_eq!(changes["updated"], json!([ids[0].clone()]));
}

/// Reads server-sent events from a response until `done` says stop or the
/// deadline passes; returns (event, data, id) triples.
pub(crate) async fn read_events(
    response: reqwest::Response,
    deadline: Duration,
    done: impl Fn(&[(String, String, String)]) -> bool,
) -> Vec<(String, String, String)> {
    let mut stream = response.bytes_stream();
    let mut buffer = String::new();
    let mut events = Vec::new();
    let _ = tokio::time::timeout(deadline, async {
        while let Some(chunk) = stream.next().await {
            buffer.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
            while let Some(end) = buffer.find("\n\n") {
                let block: String = buffer.drain(..end + 2).collect();
                let (mut event, mut data, mut id) = (String::new(), String::new(), String::new());
                for line in block.lines() {
                    if let Some(value) = line.strip_prefix("event:") {
                        event = value.trim().to_string();
                    } else if let Some(value) = line.strip_prefix("data:") {
                        data.push_str(value.trim());
                    } else if let Some(value) = line.strip_prefix("id:") {
                        id = value.trim().to_string();
                    }
                }
                if !event.is_empty() {
                    events.push((event, data, id));
                }
                if done(&events) {
                    return;
                }
            }
        }
    })
    .await;
    events
}

async fn open_events(
    app: &TestApp,
    user: &TestAccount,
    query: &str,
    last_event_id: Option<&str>,
) -> reqwest::Response {
    let mut request = app
        .client
        .get(format!("{}/jmap/eventsource?{query}", app.base))
        .basic_auth(&user.email, Some(PASSWORD));
    if let Some(id) = last_event_id {
        request = request.header("Last-Event-ID", id);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    response
}

#[tokio::test]
async fn the_event_source_pushes_state_changes_within_a_second() {
    let (app, user, ids) = spawn_with_messages(&demo_messages()[..2]).await;
    let events = open_events(&app, &user, "types=*&closeafter=no&ping=0", None).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let set = app
        .update_email(&user, &ids[0], json!({"keywords/$seen": true}))
        .await;
    let changed_at = Instant::now();
    let new_state = set["newState"].clone();
    let received = read_events(events, Duration::from_secs(1), |events| !events.is_empty()).await;
    assert!(changed_at.elapsed() <= Duration::from_secs(1));
    assert_eq!(received.len(), 1, "{received:?}");
    let (event, data, id) = &received[0];
    assert_eq!(event, "state");
    let data: Value = serde_json::from_str(data).unwrap();
    assert_eq!(data["@type"], "StateChange");
    assert_eq!(data["changed"][&user.account_id]["Email"], new_state);
    assert!(
        data["changed"][&user.account_id]["Mailbox"].is_string(),
        "{data}"
    );
    assert!(!id.is_empty());

    // Only the types asked for; closeafter=state ends the response.
    let events = open_events(&app, &user, "types=Mailbox&closeafter=state&ping=0", None).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    app.update_email(&user, &ids[1], json!({"keywords/$flagged": true}))
        .await;
    app.call_in(
        &user,
        "Mailbox/set",
        json!({"create": {"n": {"name": "New"}}}),
    )
    .await;
    let received = read_events(events, Duration::from_secs(3), |_| false).await;
    assert_eq!(
        received.len(),
        1,
        "the stream ended after one state event: {received:?}"
    );
    let data: Value = serde_json::from_str(&received[0].1).unwrap();
    let changed = data["changed"][&user.account_id].as_object().unwrap();
    assert_eq!(changed.keys().collect::<Vec<_>>(), vec!["Mailbox"]);

    // Pings carry {"interval": N} and no id.
    let events = open_events(&app, &user, "types=*&closeafter=no&ping=1", None).await;
    let received = read_events(events, Duration::from_secs(3), |events| !events.is_empty()).await;
    assert_eq!(received[0].0, "ping");
    assert_eq!(
        serde_json::from_str::<Value>(&received[0].1).unwrap(),
        json!({"interval": 1})
    );
    assert!(received[0].2.is_empty());

    // A client back with Last-Event-ID hears at once what it missed.
    let last_id = id.clone();
    let events = open_events(&app, &user, "types=*&closeafter=no&ping=0", Some(&last_id)).await;
    let received = read_events(events, Duration::from_secs(1), |events| !events.is_empty()).await;
    assert_eq!(received.len(), 1, "{received:?}");
    let data: Value = serde_json::from_str(&received[0].1).unwrap();
    assert!(
        data["changed"][&user.account_id]["Email"].is_string(),
        "{data}"
    );
}

#[tokio::test]
async fn email_parse_renders_an_attached_message() {
    let (app, [user]) = spawn_with_accounts(["ann@example.com"]).await;
    let inner = "From: Dee <dee@example.org>\r\nTo: ann@example.com\r\nSubject: Inner subject\r\nMessage-ID: <inner@example.org>\r\nContent-Type: multipart/mixed; boundary=in\r\n\r\n--in\r\nContent-Type: text/plain\r\n\r\nInner body\r\n--in\r\nContent-Type: text/plain; name=note.txt\r\nContent-Disposition: attachment; filename=note.txt\r\n\r\nnote\r\n--in--\r\n";
    let outer = format!(
        "From: Cy <cy@example.net>\r\nTo: ann@example.com\r\nSubject: Fwd\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=out\r\n\r\n--out\r\nContent-Type: text/plain\r\n\r\nSee attached\r\n--out\r\nContent-Type: message/rfc822\r\n\r\n{inner}\r\n--out--\r\n"
    );
    let id = &app
        .ingest(&user, &[outer.into_bytes()], 1_700_000_000)
        .await[0];
    let got = app
        .email_get(&user, &[&id], &["attachments", "textBody"])
        .await;
    let attached = got["list"][0]["attachments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["type"] == "message/rfc822")
        .expect("attached message")
        .clone();
    let blob = attached["blobId"].as_str().unwrap().to_string();
    let text_blob = got["list"][0]["textBody"][0]["blobId"]
        .as_str()
        .unwrap()
        .to_string();
    let parsed = app
        .call_in(&user, "Email/parse", json!({"blobIds": [blob, text_blob, format!("{}_99", blob.split('_').next().unwrap()), "nope"],
            "properties": ["id", "threadId", "mailboxIds", "keywords", "receivedAt", "subject", "from", "messageId", "attachments", "bodyValues", "size"],
            "fetchTextBodyValues": true}))
        .await;
    let email = &parsed["parsed"][&blob];
    assert_eq!(email["subject"], "Inner subject");
    assert_eq!(email["messageId"], json!(["inner@example.org"]));
    assert_eq!(email["from"][0]["email"], "dee@example.org");
    for null in ["id", "threadId", "mailboxIds", "keywords", "receivedAt"] {
        assert_eq!(email[null], Value::Null, "{null}");
    }
    assert!(
        email["bodyValues"]
            .as_object()
            .unwrap()
            .values()
            .any(|v| v["value"].as_str().unwrap().contains("Inner body")),
        "{email}"
    );
    assert_eq!(parsed["notParsable"], json!([text_blob]));
    assert_eq!(parsed["notFound"].as_array().unwrap().len(), 2, "{parsed}");
    // The attached message's own attachment downloads by its nested blob id.
    let note = &email["attachments"][0];
    let nested = note["blobId"].as_str().unwrap();
    assert!(nested.starts_with(&format!("{blob}_")), "{nested}");
    let body = app
        .get_as(
            format!(
                "{}/jmap/download/{}/{}/note.txt",
                app.base, user.account_id, nested
            ),
            &user.email,
            PASSWORD,
        )
        .await;
    assert_eq!(body.status(), 200);
    assert_eq!(body.text().await.unwrap().trim_end(), "note");
}

#[tokio::test]
async fn jmap_client_keeps_a_mailbox_in_sync_through_changes_and_push() {
    use jmap_client::DataType;
    use jmap_client::client::Client;
    use jmap_client::event_source::PushNotification;

    let (app, user, ids) = spawn_with_messages(&demo_messages()[..3]).await;
    let client = Client::new()
        .credentials((user.email.as_str(), PASSWORD))
        .connect(&app.base)
        .await
        .expect("connect");
    let email_state = app.state(&user, "Email").await;
    let mailbox_state = app.state(&user, "Mailbox").await;
    let mut stream = client
        .event_source(
            Some([DataType::Email, DataType::Mailbox]),
            false,
            None,
            None,
        )
        .await
        .expect("event source");
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Another client reads a message and imports one via the CLI.
    app.update_email(&user, &ids[0], json!({"keywords/$seen": true}))
        .await;
    let notification = tokio::time::timeout(Duration::from_secs(3), stream.next())
        .await
        .expect("pushed in time")
        .expect("stream open")
        .expect("notification");
    let PushNotification::StateChange(changes) = notification else {
        panic!("expected a StateChange");
    };
    assert!(changes.has_type(DataType::Email));
    let email_changes = client
        .email_changes(email_state.clone(), None)
        .await
        .expect("Email/changes");
    assert_eq!(email_changes.updated(), [ids[0].clone()]);
    assert!(!email_changes.has_more_changes());
    let mailbox_changes = client
        .mailbox_changes(mailbox_state.clone(), 10)
        .await
        .expect("Mailbox/changes");
    assert_eq!(mailbox_changes.updated(), std::slice::from_ref(&user.inbox));
    let inbox = client
        .mailbox_get(&user.inbox, None::<Vec<_>>)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(inbox.unread_emails(), 2);

    cli_import(
        &app,
        &user,
        &[("c", message("client-1@example.net", "Via CLI", None))],
    );
    let notification = tokio::time::timeout(Duration::from_secs(3), stream.next())
        .await
        .expect("pushed in time")
        .expect("stream open")
        .expect("notification");
    assert!(matches!(notification, PushNotification::StateChange(_)));
    let later = client
        .email_changes(email_changes.new_state().to_string(), Some(10))
        .await
        .expect("Email/changes");
    assert_eq!(later.created().len(), 1);
    let created = client
        .email_get(
            &later.created()[0],
            Some([jmap_client::email::Property::Subject]),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(created.subject(), Some("Via CLI"));
    let inbox = client
        .mailbox_get(&user.inbox, None::<Vec<_>>)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(inbox.total_emails(), 4);
}

//! Bounded work per request (issue 13 items 1 and 2): result references
//! that amplify a request get the RFC 8620 `limit` error; render work over
//! the request's budget gets `requestTooLarge`; heavy parsing and rendering
//! run on the work pool, so another account's list view is served while it
//! runs.

use serde_json::{Value, json};

use crate::support::{TestAccount, TestApp, spawn_with_accounts};

const CORE: &str = "urn:ietf:params:jmap:core";
const MAIL: &str = "urn:ietf:params:jmap:mail";

/// A request whose call i echoes call i − 1's whole response twice: each
/// call doubles the data, from 4 KB to 2^30 × 4 KB by the last call.
fn amplifying_calls() -> Vec<Value> {
    let mut calls = vec![json!(["Core/echo", {"seed": "x".repeat(4096)}, "c0"])];
    for i in 1..=30 {
        let previous = format!("c{}", i - 1);
        let reference = json!({"resultOf": previous, "name": "Core/echo", "path": ""});
        calls.push(json!([
            "Core/echo",
            {"#a": reference.clone(), "#b": reference},
            format!("c{i}")
        ]));
    }
    calls
}

async fn request(app: &TestApp, user: &TestAccount, calls: Vec<Value>) -> (u16, Value) {
    app.api_raw(user, &json!({"using": [CORE, MAIL], "methodCalls": calls}))
        .await
}

#[tokio::test]
async fn result_references_that_amplify_a_request_get_the_limit_error_and_the_next_request_works() {
    let (app, [ann]) = spawn_with_accounts(["ann@example.com"]).await;
    let calls = amplifying_calls();
    let size = serde_json::to_vec(&calls).unwrap().len();
    assert!(size < 8 << 10, "a small request: {size} octets");
    let (status, problem) = request(&app, &ann, calls).await;
    assert_eq!(status, 413, "{problem}");
    assert_eq!(problem["type"], "urn:ietf:params:jmap:error:limit");
    assert_eq!(problem["limit"], "maxSizeRequest");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("result references"),
        "{problem}"
    );
    // The same account is served at once, and references within the budget resolve.
    let (status, response) = request(
        &app,
        &ann,
        vec![
            json!(["Core/echo", {"seed": "x".repeat(4096)}, "c0"]),
            json!(["Core/echo", {"#a": {"resultOf": "c0", "name": "Core/echo", "path": "/seed"}}, "c1"]),
            json!(["Mailbox/get", {"accountId": ann.account_id, "ids": null}, "m"]),
        ],
    )
    .await;
    assert_eq!(status, 200, "{response}");
    let responses = response["methodResponses"].as_array().unwrap();
    assert_eq!(responses[1][1]["a"], json!("x".repeat(4096)));
    assert_eq!(responses[2][0], "Mailbox/get");
}

#[tokio::test]
async fn after_a_write_calls_over_the_budget_get_request_too_large_and_the_write_is_answered() {
    let (app, [ann]) = spawn_with_accounts(["ann@example.com"]).await;
    let mut calls = vec![json!([
        "Mailbox/set",
        {"accountId": ann.account_id, "create": {"k": {"name": "Kept"}}},
        "set"
    ])];
    calls.extend(amplifying_calls());
    calls.push(json!(["Mailbox/get", {"accountId": ann.account_id, "ids": null, "properties": ["name"]}, "get"]));
    let (status, response) = request(&app, &ann, calls).await;
    assert_eq!(status, 200, "{response}");
    let responses = response["methodResponses"].as_array().unwrap();
    assert_eq!(responses.len(), 33);
    assert_eq!(responses[0][0], "Mailbox/set");
    assert!(responses[0][1]["created"]["k"]["id"].is_string());
    // The first call over the budget is requestTooLarge; the calls that
    // reference it then fail to resolve (its response is an error).
    let first = responses
        .iter()
        .position(|r| r[0] == "error")
        .expect("a refusal");
    assert!(first > 5, "{first}");
    assert_eq!(
        responses[first][1]["type"], "requestTooLarge",
        "{}",
        responses[first]
    );
    for error in &responses[first + 1..32] {
        assert_eq!(error[1]["type"], "invalidResultReference", "{error}");
    }
    // Calls after the refused ones still run (RFC 8620 §3.6.2).
    assert_eq!(responses[32][0], "Mailbox/get");
    let names: Vec<&Value> = responses[32][1]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|mailbox| &mailbox["name"])
        .collect();
    assert!(names.contains(&&json!("Kept")), "{names:?}");
    let built = serde_json::to_vec(&response).unwrap().len() as u64;
    assert!(
        built <= app.state.jmap.limits.max_size_built() + (64 << 10),
        "{built}"
    );
}

/// A message with `lines` header fields `X-Line: n` (and a subject).
fn many_header_lines(lines: usize) -> Vec<u8> {
    let mut raw = String::from("From: heavy@example.com\r\nSubject: heavy\r\n");
    for n in 0..lines {
        raw.push_str(&format!("X-Line: {n}\r\n"));
    }
    raw.push_str("\r\nbody\r\n");
    raw.into_bytes()
}

#[tokio::test]
async fn thirty_thousand_header_all_properties_of_a_huge_header_get_request_too_large() {
    let (app, [ann]) = spawn_with_accounts(["ann@example.com"]).await;
    let ids = app
        .ingest(&ann, &[many_header_lines(100_000)], 1_700_000_000)
        .await;
    // 3 × 100,001 units for the X-Line properties: past the 250,000 budget.
    let mut properties = vec![
        "header:X-Line:all".to_string(),
        "header:X-Line:asText:all".into(),
        "header:X-Line:asRaw:all".into(),
    ];
    properties.extend((0..29_997).map(|n| format!("header:X-Absent-{n}:all")));
    let get = |properties: &[String]| json!(["Email/get", {"accountId": ann.account_id, "ids": ids, "properties": properties}, "g"]);
    let (status, response) = request(&app, &ann, vec![get(&properties)]).await;
    assert_eq!(status, 200, "{response}");
    let error = &response["methodResponses"][0];
    assert_eq!(error[0], "error", "{error}");
    assert_eq!(error[1]["type"], "requestTooLarge");
    assert!(
        error[1]["description"]
            .as_str()
            .unwrap()
            .contains("render work"),
        "{error}"
    );
    // Within the budget, the same message renders every one of its fields.
    let (status, response) = request(&app, &ann, vec![get(&properties[..1])]).await;
    assert_eq!(status, 200, "{response}");
    let email = &response["methodResponses"][0][1]["list"][0];
    let lines = email["header:X-Line:all"].as_array().expect("a list");
    assert_eq!(lines.len(), 100_000);
    assert_eq!(lines[99_999], " 99999");
    // Over many ids the budget is checked before anything is loaded.
    let many: Vec<String> = (0..1000).map(|n| format!("e{n}")).collect();
    let properties: Vec<String> = (0..300).map(|n| format!("header:X-{n}")).collect();
    let calls = vec![
        json!(["Email/get", {"accountId": ann.account_id, "ids": many, "properties": properties}, "g"]),
    ];
    let (_, response) = request(&app, &ann, calls).await;
    assert_eq!(response["methodResponses"][0][1]["type"], "requestTooLarge");
}

#[tokio::test(flavor = "current_thread")]
async fn another_accounts_list_view_completes_while_heavy_requests_run() {
    // One async worker: were the heavy work on it, nothing else would run
    // until it ended.
    let (app, [heavy, light]) =
        spawn_with_accounts(["heavy@example.com", "light@example.com"]).await;
    let heavy_ids = app
        .ingest(&heavy, &[many_header_lines(100_000)], 1_700_000_000)
        .await;
    let light_ids = app
        .ingest(&light, &crate::support::demo_messages(), 1_700_000_000)
        .await;
    let pool = app.state.jmap.work.clone();
    let flood: Vec<_> = (0..3)
        .map(|_| {
            let body = json!({"using": [CORE, MAIL], "methodCalls": [["Email/get", {
                "accountId": heavy.account_id, "ids": heavy_ids,
                "properties": ["header:X-Line:all", "header:X-Line:asText:all"],
            }, "g"]]});
            app.api_raw_spawned(&heavy, body)
        })
        .collect();
    // Wait until the heavy work is on the pool (were it run in place, the
    // flood would instead finish first, and the assertion below fail).
    while pool.busy_threads() == 0 && !flood.iter().all(|task| task.is_finished()) {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    let list_view = app
        .email_get(
            &light,
            &light_ids,
            &[
                "subject",
                "from",
                "receivedAt",
                "preview",
                "hasAttachment",
                "keywords",
            ],
        )
        .await;
    assert_eq!(list_view["list"].as_array().unwrap().len(), light_ids.len());
    let unfinished = flood.iter().filter(|task| !task.is_finished()).count();
    assert!(
        unfinished > 0,
        "the light list view waited for every heavy request"
    );
    for task in flood {
        let (status, response) = task.await.unwrap();
        assert_eq!(status, 200);
        let email = &response["methodResponses"][0][1]["list"][0];
        assert_eq!(
            email["header:X-Line:all"].as_array().unwrap().len(),
            100_000
        );
    }
}

/// The full-level Email/get of `ids`: bodyValues and the three partitions.
fn full_get(user: &TestAccount, ids: &[String]) -> Vec<Value> {
    vec![json!(["Email/get", {
        "accountId": user.account_id, "ids": ids,
        "properties": ["id", "bodyValues", "textBody", "htmlBody", "attachments"],
        "fetchAllBodyValues": true,
    }, "g"])]
}

/// The octets of messages parsed whole are weighed from their stored sizes
/// before a blob is read: a request over the parse budget reads nothing.
#[tokio::test]
async fn a_full_read_over_the_parse_budget_is_refused_before_any_blob_is_read() {
    let limits = fastview::jmap::Limits {
        max_size_upload: 2_000,
        ..fastview::jmap::Limits::default()
    };
    let app = crate::support::spawn_app_with(fastview::app::ServeOptions {
        limits,
        ..fastview::app::ServeOptions::default()
    })
    .await;
    let ann = app.account("ann@example.com").await;
    let big = format!(
        "From: a@example.com\r\nSubject: big\r\n\r\n{}\r\n",
        "word ".repeat(2_500)
    );
    assert!(big.len() as u64 > limits.max_parse_bytes());
    let ids = app.ingest(&ann, &[big.into_bytes()], 1_700_000_000).await;
    let (status, response) = request(&app, &ann, full_get(&ann, &ids)).await;
    assert_eq!(status, 200);
    let error = &response["methodResponses"][0];
    assert_eq!(error[0], "error");
    assert_eq!(error[1]["type"], "requestTooLarge", "{error}");
    assert_eq!(app.metric("fastview_blob_reads_total").await, 0.0);
    // A small message of the same account is read and answered.
    let small = app
        .ingest(&ann, &crate::support::demo_messages()[..1], 1_700_000_100)
        .await;
    let (_, response) = request(&app, &ann, full_get(&ann, &small)).await;
    assert_eq!(response["methodResponses"][0][0], "Email/get");
    assert_eq!(app.metric("fastview_blob_reads_total").await, 1.0);
}

/// What one account's requests in flight hold is bounded: while they hold
/// the account's whole share, its next heavy call gets `serverUnavailable`
/// (and nothing of the earlier ones is lost), another account is served,
/// and once they end the same call is answered.
#[tokio::test]
async fn an_account_whose_requests_hold_their_share_gets_server_unavailable_and_others_go_on() {
    let (app, [ann, bob]) = spawn_with_accounts(["ann@example.com", "bob@example.com"]).await;
    let messages = crate::support::demo_messages();
    let ann_ids = app.ingest(&ann, &messages, 1_700_000_000).await;
    let bob_ids = app.ingest(&bob, &messages, 1_700_000_000).await;
    let jmap = &app.state.jmap;
    let share = jmap.limits.max_held_per_account();
    // Requests of ann in flight elsewhere hold all but 1,000 octets of her share.
    let mut in_flight =
        fastview::jmap::budget::RequestBudget::held(&jmap.limits, &jmap.holdings, ann.id);
    in_flight
        .charge_bytes(jmap.limits.max_size_built())
        .unwrap();
    in_flight
        .charge_parse(share - jmap.limits.max_size_built() - 1_000)
        .unwrap();
    assert_eq!(jmap.holdings.held(ann.id).0, share - 1_000);

    let (status, response) = request(&app, &ann, full_get(&ann, &ann_ids)).await;
    assert_eq!(status, 200);
    assert_eq!(
        response["methodResponses"][0][1]["type"],
        "serverUnavailable"
    );
    // A light call of hers (under 1,000 octets held) still runs.
    let light = app
        .call_in(&ann, "Email/get", json!({"ids": [], "properties": ["id"]}))
        .await;
    assert_eq!(light["list"], json!([]));
    // Bob is served whole.
    let (_, response) = request(&app, &bob, full_get(&bob, &bob_ids)).await;
    assert_eq!(response["methodResponses"][0][0], "Email/get");
    assert_eq!(
        response["methodResponses"][0][1]["list"]
            .as_array()
            .unwrap()
            .len(),
        bob_ids.len()
    );
    // Every finished request gave back what it held.
    assert_eq!(jmap.holdings.held(bob.id).0, 0);
    drop(in_flight);
    assert_eq!(jmap.holdings.held(ann.id), (0, 0));
    let (_, response) = request(&app, &ann, full_get(&ann, &ann_ids)).await;
    assert_eq!(response["methodResponses"][0][0], "Email/get");
    assert_eq!(jmap.holdings.held(ann.id), (0, 0));
}

/// A client that hangs up while its full-level render runs on the pool
/// leaves nothing held: the render's octets are given back when its result
/// finds no one waiting (found by a fresh reviewer: 28 hang-ups locked an
/// account out until restart).
#[tokio::test]
async fn a_client_that_hangs_up_mid_render_leaves_nothing_held() {
    use tokio::io::AsyncWriteExt;
    let (app, [ann]) = spawn_with_accounts(["ann@example.com"]).await;
    let big = format!(
        "From: a@example.com\r\nSubject: big\r\n\r\n{}\r\n",
        "many words in a long body\r\n".repeat(120_000)
    );
    let ids = app
        .ingest(&ann, &vec![big.into_bytes(); 1], 1_700_000_000)
        .await;
    let body = json!({"using": [CORE, MAIL], "methodCalls": [["Email/get", {
        "accountId": ann.account_id, "ids": [&ids[0], &ids[0], &ids[0]],
        "properties": ["id", "bodyValues", "textBody"], "fetchAllBodyValues": true}, "g"]]})
    .to_string();
    let auth = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        format!("{}:{}", ann.email, crate::support::PASSWORD),
    );
    let pool = app.state.jmap.work.clone();
    for _ in 0..3 {
        let mut stream = tokio::net::TcpStream::connect(app.base.trim_start_matches("http://"))
            .await
            .unwrap();
        let request = format!(
            "POST /jmap/api HTTP/1.1\r\nHost: a\r\nAuthorization: Basic {auth}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        // Hang up once the render runs on the pool.
        for _ in 0..2_000 {
            if pool.busy_threads() > 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        drop(stream);
    }
    // Once the pool is idle, nothing of ann's is held.
    for _ in 0..2_000 {
        if pool.busy_threads() == 0 && app.state.jmap.holdings.held(ann.id) == (0, 0) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert_eq!(app.state.jmap.holdings.held(ann.id), (0, 0));
    let (_, response) = request(&app, &ann, full_get(&ann, &ids)).await;
    assert_eq!(response["methodResponses"][0][0], "Email/get");
}

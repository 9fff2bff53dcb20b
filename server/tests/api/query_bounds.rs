//! Bounded Email/query filters (issue 43 items 2 and 3, ADR 0005): a
//! filter's values and conditions are bounded (`invalidArguments`,
//! `unsupportedFilter`), header filters are charged to the request's render
//! work (`requestTooLarge`) and evaluated on the work pool, so another
//! account is served while they run; full-text conditions are bounded per
//! filter and per request and run at most two at once per account.

use serde_json::{Value, json};

use crate::support::{TestAccount, TestApp, spawn_app, spawn_sqlite_app, spawn_with_accounts};

const CORE: &str = "urn:ietf:params:jmap:core";
const MAIL: &str = "urn:ietf:params:jmap:mail";

/// The README's bounds, as a client sees them.
const MAX_VALUE_OCTETS: usize = 4096;
const MAX_FILTER_NODES: usize = 128;
const MAX_TEXT_CONDITIONS: usize = 16;

async fn query(app: &TestApp, user: &TestAccount, filter: Value) -> Value {
    let responses = app
        .call(
            user,
            json!([["Email/query", {"accountId": user.account_id, "filter": filter}]]),
        )
        .await;
    responses[0].clone()
}

/// `(error type, description)` of an error response, or panics.
fn error(response: &Value) -> (&str, &str) {
    assert_eq!(response[0], "error", "{response}");
    (
        response[1]["type"].as_str().unwrap(),
        response[1]["description"].as_str().unwrap_or(""),
    )
}

fn ids(response: &Value) -> usize {
    assert_eq!(response[0], "Email/query", "{response}");
    response[1]["ids"].as_array().unwrap().len()
}

/// A message with `lines` header fields `X-Line: n`.
fn many_header_lines(n: usize, lines: usize) -> Vec<u8> {
    let mut raw = format!("From: heavy@example.com\r\nSubject: heavy {n}\r\n");
    for line in 0..lines {
        raw.push_str(&format!("X-Line: {line}\r\n"));
    }
    raw.push_str("\r\nbody\r\n");
    raw.into_bytes()
}

#[tokio::test]
async fn header_filter_values_past_the_bound_are_invalid_arguments() {
    let (app, [ann]) = spawn_with_accounts(["ann@example.com"]).await;
    app.ingest(&ann, &crate::support::demo_messages(), 1_700_000_000)
        .await;
    let at_bound = "a".repeat(MAX_VALUE_OCTETS);
    let past = "a".repeat(MAX_VALUE_OCTETS + 1);
    for name in ["subject", "from", "to", "cc", "bcc", "text", "hasKeyword"] {
        let answered = query(&app, &ann, json!({ name: at_bound })).await;
        assert_eq!(ids(&answered), 0, "{name}");
        let refused = query(&app, &ann, json!({ name: past })).await;
        let (kind, description) = error(&refused);
        assert_eq!(kind, "invalidArguments", "{name}");
        assert!(description.contains("4096"), "{description}");
    }
    for header in [json!(["Subject", past]), json!([past])] {
        let refused = query(&app, &ann, json!({ "header": header })).await;
        assert_eq!(error(&refused).0, "invalidArguments");
    }
    let answered = query(&app, &ann, json!({"header": ["Subject", at_bound]})).await;
    assert_eq!(ids(&answered), 0);
    // A list of mailbox ids is bounded too: every id is compared per email.
    let many: Vec<String> = (0..1025).map(|n| format!("unknown{n}")).collect();
    let refused = query(&app, &ann, json!({"inMailboxOtherThan": many})).await;
    let (kind, description) = error(&refused);
    assert_eq!(kind, "invalidArguments");
    assert!(description.contains("1024"), "{description}");
    let answered = query(&app, &ann, json!({"inMailboxOtherThan": many[..1024]})).await;
    assert_eq!(ids(&answered), crate::support::demo_messages().len());
}

#[tokio::test]
async fn a_filter_of_more_than_128_conditions_and_operators_is_unsupported_filter() {
    let (app, [ann]) = spawn_with_accounts(["ann@example.com"]).await;
    let stored = app
        .ingest(&ann, &crate::support::demo_messages(), 1_700_000_000)
        .await;
    let conditions = |n: usize| -> Vec<Value> {
        (0..n)
            .map(|i| json!({"subject": format!("no such subject {i}")}))
            .chain([json!({"inMailbox": ann.inbox})])
            .collect()
    };
    // The operator and 127 conditions: 128.
    let answered = query(
        &app,
        &ann,
        json!({"operator": "OR", "conditions": conditions(MAX_FILTER_NODES - 2)}),
    )
    .await;
    assert_eq!(ids(&answered), stored.len());
    let refused = query(
        &app,
        &ann,
        json!({"operator": "OR", "conditions": conditions(MAX_FILTER_NODES - 1)}),
    )
    .await;
    let (kind, description) = error(&refused);
    assert_eq!(kind, "unsupportedFilter");
    assert!(description.contains("128"), "{description}");
    // Operators count: an OR of 63 ANDs of one condition each is 127,
    // of 64 is 129.
    let ands = |n: usize| -> Value {
        let conditions: Vec<Value> = (0..n)
            .map(|_| json!({"operator": "AND", "conditions": [{"inMailbox": ann.inbox}]}))
            .collect();
        json!({"operator": "OR", "conditions": conditions})
    };
    assert_eq!(ids(&query(&app, &ann, ands(63)).await), stored.len());
    assert_eq!(
        error(&query(&app, &ann, ands(64)).await).0,
        "unsupportedFilter"
    );
}

/// `count` messages of 2,000 header fields each, in `user`'s inbox.
async fn heavy_mail(app: &TestApp, user: &TestAccount, count: usize) -> Vec<String> {
    let raws: Vec<Vec<u8>> = (0..count).map(|n| many_header_lines(n, 2_000)).collect();
    app.ingest(user, &raws, 1_700_000_000).await
}

#[tokio::test]
async fn a_header_filter_over_the_render_work_budget_gets_request_too_large() {
    let (app, [ann]) = spawn_with_accounts(["ann@example.com"]).await;
    heavy_mail(&app, &ann, 100).await;
    // 100 emails × 2,001 units (the condition and its 2,000 field values):
    // within the request's 250,000.
    let one = json!({"header": ["X-Line", "no such line"]});
    assert_eq!(ids(&query(&app, &ann, one.clone()).await), 0);
    let found = query(&app, &ann, json!({"header": ["X-Line", "1999"]})).await;
    assert_eq!(ids(&found), 100);
    // Two such conditions: 400,200 units.
    let two = json!({"operator": "OR", "conditions": [one, {"header": ["X-Line", "none"]}]});
    let refused = query(&app, &ann, two).await;
    let (kind, description) = error(&refused);
    assert_eq!(kind, "requestTooLarge");
    assert!(description.contains("250000"), "{description}");
    // The subject and address filters are charged one unit per email.
    let subjects = query(&app, &ann, json!({"subject": "heavy"})).await;
    assert_eq!(ids(&subjects), 100);
}

#[tokio::test(flavor = "current_thread")]
async fn another_account_is_served_while_header_filters_run() {
    // One async worker: were the filters evaluated on it, nothing else
    // would run until they ended.
    let (app, [heavy, light]) =
        spawn_with_accounts(["heavy@example.com", "light@example.com"]).await;
    heavy_mail(&app, &heavy, 100).await;
    let light_ids = app
        .ingest(&light, &crate::support::demo_messages(), 1_700_000_000)
        .await;
    let pool = app.state.jmap.work.clone();
    let flood: Vec<_> = (0..3)
        .map(|_| {
            let body = json!({"using": [CORE, MAIL], "methodCalls": [["Email/query", {
                "accountId": heavy.account_id,
                "filter": {"header": ["X-Line", "no such line"]},
            }, "q"]]});
            app.api_raw_spawned(&heavy, body)
        })
        .collect();
    // Wait until the filters are on the pool (were they evaluated in place,
    // the flood would finish first, and the assertion below fail).
    while pool.busy_threads() == 0 && !flood.iter().all(|task| task.is_finished()) {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    let session = app.session(&light).await;
    assert!(session["accounts"][&light.account_id].is_object());
    let found = query(&app, &light, json!({"subject": "a"})).await;
    assert!(ids(&found) > 0, "{found}");
    let list = app.email_get(&light, &light_ids, &["subject"]).await;
    assert_eq!(list["list"].as_array().unwrap().len(), light_ids.len());
    let unfinished = flood.iter().filter(|task| !task.is_finished()).count();
    assert!(
        unfinished > 0,
        "the light calls waited for every header filter"
    );
    for task in flood {
        let (status, response) = task.await.unwrap();
        assert_eq!(status, 200);
        assert_eq!(
            response["methodResponses"][0][1]["ids"],
            json!([]),
            "{response}"
        );
    }
}

/// Messages with words to search for: message n holds `word{n}x` (no
/// word a prefix of another).
async fn searchable(app: &TestApp, user: &TestAccount) -> Vec<String> {
    let raws: Vec<Vec<u8>> = (0..20)
        .map(|n| {
            format!(
                "From: s@example.com\r\nSubject: message {n}\r\n\r\nthe body holds word{n}x and common\r\n"
            )
            .into_bytes()
        })
        .collect();
    app.ingest(user, &raws, 1_700_000_000).await
}

fn text_or(from: usize, count: usize) -> Value {
    let conditions: Vec<Value> = (from..from + count)
        .map(|n| json!({"text": format!("word{n}x")}))
        .collect();
    json!({"operator": "OR", "conditions": conditions})
}

async fn check_full_text_bounds(app: TestApp) {
    let ann = app.account("ann@example.com").await;
    searchable(&app, &ann).await;
    // Sixteen full-text conditions in a filter: answered, and right.
    let answered = query(&app, &ann, text_or(0, MAX_TEXT_CONDITIONS)).await;
    assert_eq!(ids(&answered), MAX_TEXT_CONDITIONS);
    // Seventeen: unsupportedFilter, naming the bound.
    let refused = query(&app, &ann, text_or(0, MAX_TEXT_CONDITIONS + 1)).await;
    let (kind, description) = error(&refused);
    assert_eq!(kind, "unsupportedFilter");
    assert!(description.contains("16"), "{description}");
    // `body` conditions count alike.
    let mut bodies = text_or(0, MAX_TEXT_CONDITIONS + 1);
    for condition in bodies["conditions"].as_array_mut().unwrap() {
        let word = condition["text"].take();
        *condition = json!({ "body": word });
    }
    assert_eq!(
        error(&query(&app, &ann, bodies).await).0,
        "unsupportedFilter"
    );
    // A request runs at most sixteen in all: the call that would pass it
    // gets requestTooLarge; the calls before are answered.
    let calls = json!([
        ["Email/query", {"accountId": ann.account_id, "filter": text_or(0, 9)}],
        ["Email/query", {"accountId": ann.account_id, "filter": {"text": "common"}}],
        ["Email/query", {"accountId": ann.account_id, "filter": text_or(9, 9)}],
    ]);
    let responses = app.call(&ann, calls).await;
    assert_eq!(ids(&responses[0]), 9);
    assert_eq!(ids(&responses[1]), 20);
    let (kind, description) = error(&responses[2]);
    assert_eq!(kind, "requestTooLarge");
    assert!(description.contains("16"), "{description}");
    // The next request has its own sixteen.
    assert_eq!(ids(&query(&app, &ann, text_or(4, 9)).await), 9);
}

#[tokio::test]
async fn full_text_conditions_are_bounded_per_filter_and_request_on_the_configured_store() {
    check_full_text_bounds(spawn_app().await).await;
}

#[tokio::test]
async fn full_text_conditions_are_bounded_per_filter_and_request_on_sqlite() {
    check_full_text_bounds(spawn_sqlite_app().await).await;
}

async fn check_searches_at_once(app: TestApp) {
    let ann = app.account("ann@example.com").await;
    let bob = app.account("bob@example.com").await;
    searchable(&app, &ann).await;
    searchable(&app, &bob).await;
    // Ann's searches at once are all out (as if two ran now): hers wait…
    let slots = &app.state.jmap.searches;
    let held = [slots.try_acquire(ann.id), slots.try_acquire(ann.id)];
    assert!(held.iter().all(Option::is_some));
    assert!(
        slots.try_acquire(ann.id).is_none(),
        "two at once per account"
    );
    let waiting = {
        let (client, url) = (app.client.clone(), format!("{}/jmap/api", app.base));
        let body = json!({"using": [CORE, MAIL], "methodCalls": [
            ["Email/query", {"accountId": ann.account_id, "filter": text_or(0, 3)}, "a"],
            ["Email/query", {"accountId": ann.account_id, "filter": {"text": "word5x"}}, "b"],
        ]});
        let email = ann.email.clone();
        tokio::spawn(async move {
            client
                .post(url)
                .basic_auth(email, Some(crate::support::PASSWORD))
                .json(&body)
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        })
    };
    // …while Bob's, of either shape, do not.
    assert_eq!(ids(&query(&app, &bob, text_or(0, 3)).await), 3);
    assert_eq!(ids(&query(&app, &bob, json!({"text": "word7x"})).await), 1);
    assert!(!waiting.is_finished(), "ann's search ran past her slots");
    drop(held);
    let answered = waiting.await.unwrap();
    let responses = &answered["methodResponses"];
    assert_eq!(
        responses[0][1]["ids"].as_array().unwrap().len(),
        3,
        "{answered}"
    );
    assert_eq!(
        responses[1][1]["ids"].as_array().unwrap().len(),
        1,
        "{answered}"
    );
    assert_eq!(slots.in_use(ann.id), 0);
}

#[tokio::test]
async fn an_account_runs_at_most_two_full_text_searches_at_once_on_the_configured_store() {
    check_searches_at_once(spawn_app().await).await;
}

#[tokio::test]
async fn an_account_runs_at_most_two_full_text_searches_at_once_on_sqlite() {
    check_searches_at_once(spawn_sqlite_app().await).await;
}

//! Overload: beyond maxConcurrentRequests for an account, or the node's
//! in-flight bound, requests are shed at once with 429 and Retry-After
//! instead of queueing, other accounts are unaffected, and nothing is a 500.
//!
//! A request is held in flight the way a slow client holds it: headers sent,
//! the chunked body still streaming (the slot is taken before the body is read).

use std::time::Duration;

use fastview::app::ServeOptions;
use fastview::jmap::Limits;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::bad_input::base64_basic;
use crate::support::{
    PASSWORD, TestAccount, TestApp, spawn_app_with, spawn_app_with_limits, spawn_with_accounts,
};

/// Opens a connection and sends an API request whose chunked body never
/// finishes; the server holds the request's slots until it is dropped.
async fn stalled_request(app: &TestApp, user: &TestAccount) -> TcpStream {
    let address = app.base.trim_start_matches("http://").to_string();
    let mut stream = TcpStream::connect(&address).await.unwrap();
    let head = format!(
        "POST /jmap/api HTTP/1.1\r\nHost: {address}\r\nAuthorization: Basic {}\r\n\
         Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{{\r\n",
        base64_basic(&user.email, PASSWORD)
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream
}

/// One Core/echo request: (status, Retry-After, body).
async fn echo(app: &TestApp, user: &TestAccount) -> (u16, Option<String>, Value) {
    let response = app
        .client
        .post(format!("{}/jmap/api", app.base))
        .basic_auth(&user.email, Some(PASSWORD))
        .json(&json!({"using": ["urn:ietf:params:jmap:core"], "methodCalls": [["Core/echo", {}, "c"]]}))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    (
        status,
        retry_after,
        response.json().await.unwrap_or(Value::Null),
    )
}

/// Repeats `echo` until it answers `status` (the stalled requests reach the
/// handler asynchronously), within 30 s (CI machines are busy).
async fn until_status(
    app: &TestApp,
    user: &TestAccount,
    status: u16,
) -> (u16, Option<String>, Value) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let got = echo(app, user).await;
        if got.0 == status || tokio::time::Instant::now() > deadline {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Holds one slot per entry of `holders` with a stalled request, then probes
/// with Core/echo as `probe` until the probe is shed (429), within 30 s.
/// A probe can take a slot just before a stalled request reaches the handler,
/// which then is the one shed: a stalled request that got an answer is
/// opened again. Returns the held connections and the last probe's answer.
async fn hold_until_shed(
    app: &TestApp,
    holders: &[&TestAccount],
    probe: &TestAccount,
) -> (Vec<TcpStream>, (u16, Option<String>, Value)) {
    let mut held = Vec::new();
    for user in holders {
        held.push(stalled_request(app, user).await);
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let got = echo(app, probe).await;
        if got.0 == 429 || tokio::time::Instant::now() > deadline {
            return (held, got);
        }
        for (stream, user) in held.iter_mut().zip(holders) {
            let mut buf = [0u8; 64];
            let answered = !matches!(
                stream.try_read(&mut buf),
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock
            );
            if answered {
                *stream = stalled_request(app, user).await;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn assert_shed(got: &(u16, Option<String>, Value)) {
    assert_eq!(got.0, 429, "{:?}", got.2);
    assert_eq!(got.1.as_deref(), Some("1"), "Retry-After");
    assert_eq!(got.2["type"], json!("urn:ietf:params:jmap:error:limit"));
    assert_eq!(got.2["status"], json!(429));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_32_requests_per_account_are_served_and_the_33rd_is_shed() {
    let (app, [ann, bob]) = spawn_with_accounts(["ann@example.com", "bob@example.com"]).await;
    assert_eq!(Limits::default().max_concurrent_requests, 32);
    // Warm the credential cache so the stalled requests authenticate at once.
    assert_eq!(echo(&app, &ann).await.0, 200);
    let (held, shed) = hold_until_shed(&app, &[&ann; 32], &ann).await;
    assert_shed(&shed);
    // Another account is not affected.
    assert_eq!(echo(&app, &bob).await.0, 200);
    // Once the slow clients go, the account is served again.
    drop(held);
    assert_eq!(until_status(&app, &ann, 200).await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_beyond_max_concurrent_requests_gets_429_or_200_never_500() {
    let app = spawn_app_with_limits(Limits {
        max_concurrent_requests: 2,
        ..Limits::default()
    })
    .await;
    let ann = app.account("ann@example.com").await;
    // A legitimately slow request: a large message read with every body value.
    let body = "All work and no play makes Jack a dull boy.\r\n".repeat(100_000);
    let raw =
        format!("From: ann@example.com\r\nSubject: big\r\nContent-Type: text/plain\r\n\r\n{body}");
    let ids = app.ingest(&ann, &[raw.into_bytes()], 1_700_000_000).await;
    assert_eq!(echo(&app, &ann).await.0, 200);
    let request = json!({
        "using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
        "methodCalls": [["Email/get", {"accountId": ann.account_id, "ids": ids,
            "properties": ["bodyValues", "bodyStructure", "preview"], "fetchAllBodyValues": true}, "g"]],
    });
    // Two requests held by slow clients fill the account's slots.
    let (held, shed) = hold_until_shed(&app, &[&ann, &ann], &ann).await;
    assert_shed(&shed);
    drop(held);
    assert_eq!(until_status(&app, &ann, 200).await.0, 200);
    // Then 40 real slow requests at once: each is served or shed at once.
    let started = std::time::Instant::now();
    let outcomes = futures::future::join_all((0..40).map(|_| {
        let (client, url, request, user) = (
            app.client.clone(),
            format!("{}/jmap/api", app.base),
            request.clone(),
            ann.email.clone(),
        );
        tokio::spawn(async move {
            let response = client
                .post(url)
                .basic_auth(user, Some(PASSWORD))
                .json(&request)
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            let retry_after = response.headers().get("retry-after").is_some();
            let body: Value = response.json().await.unwrap();
            (status, retry_after, body)
        })
    }))
    .await;
    let mut counts = std::collections::BTreeMap::new();
    for outcome in outcomes {
        let (status, retry_after, body) = outcome.unwrap();
        *counts.entry(status).or_insert(0) += 1;
        match status {
            200 => assert_eq!(body["methodResponses"][0][0], json!("Email/get")),
            429 => {
                assert!(retry_after);
                assert_eq!(body["type"], json!("urn:ietf:params:jmap:error:limit"));
            }
            other => panic!("status {other}: {body}"),
        }
    }
    eprintln!(
        "40 concurrent slow requests with maxConcurrentRequests 2: {counts:?} in {:?}",
        started.elapsed()
    );
    assert!(counts.get(&200).copied().unwrap_or(0) >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_in_flight_bound_sheds_every_account() {
    let app = spawn_app_with(ServeOptions {
        max_in_flight: 3,
        ..ServeOptions::default()
    })
    .await;
    let mut users = Vec::new();
    for name in ["ann", "bob", "cy", "dee"] {
        let user = app.account(&format!("{name}@example.com")).await;
        assert_eq!(echo(&app, &user).await.0, 200);
        users.push(user);
    }
    let (held, shed) = hold_until_shed(&app, &[&users[0], &users[1], &users[2]], &users[3]).await;
    assert_shed(&shed);
    drop(held);
    assert_eq!(until_status(&app, &users[3], 200).await.0, 200);
}

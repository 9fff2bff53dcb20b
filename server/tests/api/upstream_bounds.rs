//! First syncs must not take an upstream down (issue 45 item 7): in front
//! of a JMAP server, the background syncs run at most
//! `--upstream-syncs-at-once` at a time, a client's own call never waits
//! behind them, and a 429 with Retry-After holds the next try back.
//!
//! The upstream is a standalone Fastview, as in `upstream_jmap.rs`, seen
//! through a [`Gate`]: a small HTTP stub that passes every request on to
//! it and counts, at the upstream's side, the API requests and downloads
//! in flight, and that answers 429 with Retry-After when told to. A stub,
//! because no real JMAP server here can be made to answer 429 or 503 on
//! demand, nor tells how many requests it holds at once; it answers
//! nothing itself but those 429s (the rest is the real upstream's).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use fastview::app::ServeOptions;
use fastview::proxy::ProxyOptions;
use fastview::proxy::jmap::{JmapUpstreamOptions, JmapUpstreamUrl};
use serde_json::json;

use crate::support::{TestAccount, TestApp, demo_messages, spawn_app, spawn_in_front_of};

/// What tells a test's own (interactive) calls from the syncs' at the
/// gate: they ask an Email's subject, which a sync never reads (it asks
/// metadata and `bodyStructure`, then downloads the message). The proxy
/// renames call ids, so the id cannot tell.
const INTERACTIVE: &str = "\"subject\"";

/// What the gate saw and what it is told to do.
#[derive(Default)]
struct Gate {
    upstream: String,
    base: Mutex<String>,
    /// API requests and downloads of the syncs in flight now, and the
    /// most at once.
    in_flight: AtomicUsize,
    most_in_flight: AtomicUsize,
    /// How many API requests to answer 429 next, and with what Retry-After.
    throttle_next: AtomicUsize,
    /// How many of a client's own API requests to answer 429 next.
    throttle_clients: AtomicUsize,
    retry_after: Mutex<String>,
    /// Each sync request as it arrived: when, and whether it was answered 429.
    arrivals: Mutex<Vec<(Instant, bool)>>,
    /// Held on each sync request before it is passed on, so that syncs
    /// overlap as they would against a slower server.
    delay: Mutex<Duration>,
    client: reqwest::Client,
}

/// Starts a gate in front of `upstream`: its base URL and its state.
async fn spawn_gate(upstream: &TestApp) -> Arc<Gate> {
    let gate = Arc::new(Gate {
        upstream: upstream.base.clone(),
        ..Gate::default()
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    *gate.base.lock().unwrap() = format!("http://{}", listener.local_addr().unwrap());
    let router = axum::Router::new()
        .fallback(pass_on)
        .with_state(gate.clone());
    tokio::spawn(async move { axum::serve(listener, router).await });
    gate
}

impl Gate {
    fn base(&self) -> String {
        self.base.lock().unwrap().clone()
    }

    fn most_in_flight(&self) -> usize {
        self.most_in_flight.load(Ordering::SeqCst)
    }
}

/// Counts the request when it is a sync's API request or download, holds
/// or throttles it as told, and passes it on; the session's URLs are
/// rewritten to the gate's.
async fn pass_on(State(gate): State<Arc<Gate>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_string();
    let target = format!(
        "{}{}",
        gate.upstream,
        parts.uri.path_and_query().map_or("/", |p| p.as_str())
    );
    let body = axum::body::to_bytes(body, 64 << 20).await.unwrap();
    let counted = (path == "/jmap/api" || path.starts_with("/jmap/download/"))
        && !String::from_utf8_lossy(&body).contains(INTERACTIVE);
    if counted {
        let now = gate.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        gate.most_in_flight.fetch_max(now, Ordering::SeqCst);
        let throttle = path == "/jmap/api"
            && gate
                .throttle_next
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
        gate.arrivals
            .lock()
            .unwrap()
            .push((Instant::now(), throttle));
        let delay = *gate.delay.lock().unwrap();
        tokio::time::sleep(delay).await;
        let answer = if throttle {
            Response::builder()
                .status(StatusCode::TOO_MANY_REQUESTS)
                .header("retry-after", gate.retry_after.lock().unwrap().clone())
                .body(Body::empty())
                .unwrap()
        } else {
            forward(&gate, parts.method, &target, &parts.headers, body).await
        };
        gate.in_flight.fetch_sub(1, Ordering::SeqCst);
        return answer;
    }
    if path == "/jmap/api"
        && gate
            .throttle_clients
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    {
        return Response::builder()
            .status(StatusCode::TOO_MANY_REQUESTS)
            .header("retry-after", gate.retry_after.lock().unwrap().clone())
            .body(Body::from(r#"{"type":"urn:ietf:params:jmap:error:limit"}"#))
            .unwrap();
    }
    let response = forward(&gate, parts.method, &target, &parts.headers, body).await;
    if path == "/jmap/session" || path == "/.well-known/jmap" {
        let (parts, body) = response.into_parts();
        let text = axum::body::to_bytes(body, 1 << 20).await.unwrap();
        let text = String::from_utf8_lossy(&text).replace(&gate.upstream, &gate.base());
        return Response::from_parts(parts, Body::from(text));
    }
    response
}

/// `body` sent on to the upstream with the request's headers; its answer,
/// streamed (the event source lasts).
async fn forward(
    gate: &Gate,
    method: axum::http::Method,
    target: &str,
    headers: &HeaderMap,
    body: bytes::Bytes,
) -> Response {
    let method = reqwest::Method::from_bytes(method.as_str().as_bytes()).unwrap();
    let mut request = gate.client.request(method, target).body(body);
    for (name, value) in headers {
        if name != "host" && name != "content-length" {
            request = request.header(name.as_str(), value.as_bytes());
        }
    }
    let answer = request.send().await.unwrap();
    let mut response = Response::builder().status(answer.status().as_u16());
    for (name, value) in answer.headers() {
        if name != "content-length" && name != "transfer-encoding" {
            response = response.header(name.as_str(), value.as_bytes());
        }
    }
    response
        .body(Body::from_stream(answer.bytes_stream()))
        .unwrap()
}

/// An upstream with `count` accounts holding the demo messages, a gate in
/// front of it, and a proxy in front of the gate with `syncs_at_once`.
async fn upstream_gate_and_proxy(
    count: usize,
    syncs_at_once: usize,
) -> (TestApp, Arc<Gate>, TestApp, Vec<(TestAccount, Vec<String>)>) {
    let upstream = spawn_app().await;
    let mut accounts = Vec::new();
    for n in 0..count {
        let account = upstream.account(&format!("user{n}@example.com")).await;
        let ids = upstream
            .ingest(&account, &demo_messages(), 1_700_000_000)
            .await;
        accounts.push((account, ids));
    }
    let gate = spawn_gate(&upstream).await;
    let url = JmapUpstreamUrl::parse(&format!("{}/.well-known/jmap", gate.base())).unwrap();
    let mut options = JmapUpstreamOptions::new(url);
    options.syncs_at_once = syncs_at_once;
    let proxy = spawn_in_front_of(ServeOptions::default(), Some(ProxyOptions::Jmap(options))).await;
    (upstream, gate, proxy, accounts)
}

/// Waits until the proxy has stored `messages` messages from the
/// upstream (every account's first sync done); panics after a minute.
async fn wait_for_fetched(proxy: &TestApp, messages: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let fetched = proxy
            .metric("fastview_upstream_fetched_messages_total")
            .await;
        if fetched as usize >= messages {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{fetched} of {messages} messages mirrored"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn first_syncs_take_turns_and_a_clients_call_does_not_wait_for_them() {
    let (_upstream, gate, proxy, accounts) = upstream_gate_and_proxy(20, 2).await;
    *gate.delay.lock().unwrap() = Duration::from_millis(30);
    // Twenty accounts log in: each starts its first sync.
    for (account, _) in &accounts {
        proxy.session(account).await;
    }
    // A client reads an email its mirror does not hold yet: forwarded at
    // once, though most first syncs are still waiting for their turn.
    let (last, ids) = accounts.last().unwrap();
    let answer = proxy
        .call(
            last,
            json!([["Email/get", {"accountId": last.account_id, "ids": [ids[0]],
                "properties": ["subject"]}, "0"]]),
        )
        .await;
    assert_eq!(answer[0][1]["list"][0]["id"], ids[0], "{answer:?}");
    let waiting = proxy.metric("fastview_upstream_syncs_waiting").await;
    assert!(
        waiting > 0.0,
        "the syncs were done before the call: {waiting}"
    );

    let messages = accounts.iter().map(|(_, ids)| ids.len()).sum();
    wait_for_fetched(&proxy, messages).await;
    // Never more than two of the syncs' requests at the upstream at once,
    // and two did run side by side.
    assert_eq!(gate.most_in_flight(), 2);
    assert_eq!(proxy.metric("fastview_upstream_syncs_waiting").await, 0.0);
}

#[tokio::test]
async fn a_429_with_retry_after_holds_the_next_sync_back() {
    let (_upstream, gate, proxy, accounts) = upstream_gate_and_proxy(1, 4).await;
    *gate.retry_after.lock().unwrap() = "2".into();
    gate.throttle_next.store(1, Ordering::SeqCst);
    let (account, ids) = &accounts[0];
    proxy.session(account).await;
    wait_for_fetched(&proxy, ids.len()).await;
    let arrivals = gate.arrivals.lock().unwrap().clone();
    let throttled = arrivals
        .iter()
        .position(|(_, throttled)| *throttled)
        .expect("a 429 was answered");
    let (answered_429, _) = arrivals[throttled];
    let (next_try, _) = arrivals.get(throttled + 1).expect("a try after the 429");
    assert!(
        next_try.duration_since(answered_429) >= Duration::from_secs(2),
        "the next try came {:?} after the 429",
        next_try.duration_since(answered_429)
    );
    assert_eq!(
        proxy
            .metric("fastview_upstream_backoffs_total{reason=\"throttled\"}")
            .await,
        1.0
    );
}

/// A client's call the proxy forwards and the upstream answers 429 reaches
/// the client as 429 with the upstream's Retry-After, so that it knows when
/// to try again.
#[tokio::test]
async fn a_429_for_a_clients_call_reaches_it_with_retry_after() {
    let (_upstream, gate, proxy, accounts) = upstream_gate_and_proxy(1, 4).await;
    let (account, ids) = &accounts[0];
    proxy.session(account).await;
    wait_for_fetched(&proxy, ids.len()).await;
    *gate.retry_after.lock().unwrap() = "7".into();
    gate.throttle_clients.store(1, Ordering::SeqCst);
    // A text filter is always forwarded (ADR 0009).
    let body = json!({"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
        "methodCalls": [["Email/query", {"accountId": account.account_id,
            "filter": {"subject": "anything"}}, "q"]]});
    let response = proxy.post_api(account, &body).await;
    assert_eq!(response.status(), 429);
    assert_eq!(
        response
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap()),
        Some("7")
    );
    let again = proxy.post_api(account, &body).await;
    assert_eq!(again.status(), 200);
}

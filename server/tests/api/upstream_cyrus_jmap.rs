//! The JMAP proxy in front of a real Cyrus IMAP 3.6's JMAP (issue 45),
//! started here from Debian's unpacked packages (`tests/common/cyrus.rs`):
//! Cyrus's event source gives no stream (`204 No Content`: Debian builds
//! it without WebSockets, so its push never turns on), and the proxy's
//! mirror polls instead while a client is active. Skipped without
//! `FASTVIEW_TEST_CYRUS_ROOT`, unless `FASTVIEW_TEST_REQUIRE` names `cyrus`.

use std::time::{Duration, Instant};

use fastview::app::ServeOptions;
use fastview::proxy::jmap::{JmapUpstreamOptions, JmapUpstreamUrl};
use fastview::proxy::{Proxy, ProxyOptions};
use serde_json::{Value, json};

use crate::support::cyrus::Cyrus;
use crate::support::{PASSWORD, TestAccount, TestApp, spawn_in_front_of};

const ANN: &str = "ann@example.com";

/// INTERNALDATE of the first message appended; the next are a second apart.
const BASE_TIME: i64 = 1_700_000_000;

/// How long a test waits for a change to show: generous, never a bound
/// that is measured (the lag is measured by `tools/jmap-upstream-lag.py`).
const DEADLINE: Duration = Duration::from_secs(20);

const USING: [&str; 2] = ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"];

/// `count` small plain-text messages, CRLF line ends (as IMAP carries them).
fn messages(count: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|n| {
            format!(
                "From: Bob <bob@example.com>\r\nTo: ann@example.com\r\n\
                 Subject: Message {n}\r\nMessage-ID: <lag-{n}@example.com>\r\n\
                 Date: Tue, 14 Nov 2023 22:13:20 +0000\r\n\r\nBody {n}.\r\n"
            )
            .into_bytes()
        })
        .collect()
}

/// Cyrus's JMAP API, called directly as [`ANN`]: another client.
struct Direct {
    client: reqwest::Client,
    api_url: String,
}

impl Direct {
    async fn new(cyrus: &Cyrus) -> Self {
        let (_, api_url) = cyrus.session(ANN, PASSWORD).await;
        Self {
            client: reqwest::Client::new(),
            api_url,
        }
    }

    /// One call's arguments, asserting it answered `method`.
    async fn call1(&self, method: &str, arguments: Value) -> Value {
        let body = json!({"using": USING, "methodCalls": [[method, arguments, "0"]]});
        let response = self
            .client
            .post(&self.api_url)
            .basic_auth(ANN, Some(PASSWORD))
            .json(&body)
            .send()
            .await
            .expect("Cyrus's JMAP API");
        assert_eq!(response.status(), 200);
        let answer: Value = response.json().await.expect("JSON");
        let (name, arguments) = (
            &answer["methodResponses"][0][0],
            &answer["methodResponses"][0][1],
        );
        assert_eq!(name, method, "{answer}");
        arguments.clone()
    }
}

/// The proxy in front of `cyrus`, polling with `edit`'s options.
async fn proxy_in_front_of(cyrus: &Cyrus, edit: impl FnOnce(&mut JmapUpstreamOptions)) -> TestApp {
    let url = JmapUpstreamUrl::parse(&cyrus.jmap_url()).unwrap();
    let mut options = JmapUpstreamOptions::new(url);
    edit(&mut options);
    spawn_in_front_of(ServeOptions::default(), Some(ProxyOptions::Jmap(options))).await
}

/// [`ANN`] as the proxy's session names her account.
async fn login(proxy: &TestApp) -> TestAccount {
    let response = proxy
        .get_as(format!("{}/jmap/session", proxy.base), ANN, PASSWORD)
        .await;
    assert_eq!(response.status(), 200);
    let session: Value = response.json().await.unwrap();
    let account_id = session["primaryAccounts"]["urn:ietf:params:jmap:mail"]
        .as_str()
        .unwrap()
        .to_string();
    TestAccount {
        id: 0,
        email: ANN.to_string(),
        account_id,
        inbox: String::new(),
    }
}

/// The upstream Email state the proxy's mirror of `account` is at, when
/// it may be answered from.
fn mirror_state(proxy: &TestApp, account: &str) -> Option<String> {
    let Some(Proxy::Jmap(jmap_proxy)) = &proxy.proxy else {
        panic!("a JMAP proxy");
    };
    let mirror = jmap_proxy.mirror.as_deref().expect("a mirror");
    mirror.ready(account).map(|ready| ready.email_state)
}

/// Asks `ask` (as a client of the account would, through the proxy, which
/// keeps the account active) until it gives `Some`, within [`DEADLINE`].
async fn until<T>(what: &str, mut ask: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(found) = ask().await {
            return found;
        }
        assert!(Instant::now() < deadline, "{what} within {DEADLINE:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn forwarded_email_gets(proxy: &TestApp) -> f64 {
    proxy
        .metric("fastview_upstream_round_trips_total{method=\"Email/get\",command=\"api\"}")
        .await
}

/// Another client's write at Cyrus (a keyword set through Cyrus's own
/// JMAP) shows through the proxy while its client is active, though the
/// idle poll is five minutes and Cyrus pushes nothing: the mirror found the
/// event source without a stream, said so in the metrics, and polls every
/// `--upstream-poll-active` (2 s) instead.
#[tokio::test]
async fn another_clients_write_at_cyrus_shows_through_the_proxy_without_an_event_source() {
    let Some(cyrus) = Cyrus::start(&[(ANN, PASSWORD)]) else {
        return;
    };
    cyrus.append((ANN, PASSWORD), "INBOX", &messages(3), "", BASE_TIME);
    let direct = Direct::new(&cyrus).await;
    let proxy = proxy_in_front_of(&cyrus, |options| {
        options.poll = Duration::from_secs(300);
    })
    .await;
    let ann = login(&proxy).await;
    let account = ann.account_id.clone();
    let get = json!({"accountId": account, "ids": []});
    let before = direct.call1("Email/get", get.clone()).await["state"].clone();
    until("the mirror's first sync", async || {
        (mirror_state(&proxy, &account).as_deref() == before.as_str()).then_some(())
    })
    .await;
    let ids = direct
        .call1("Email/query", json!({"accountId": account}))
        .await["ids"]
        .clone();
    let first = ids[0].as_str().unwrap();
    assert_eq!(ids.as_array().unwrap().len(), 3, "{ids}");

    // The event source was asked for and gave no stream: counted, and the
    // mirror polls instead.
    assert!(
        proxy
            .metric("fastview_upstream_event_source_fallbacks_total")
            .await
            >= 1.0
    );
    let polls = "fastview_upstream_polls_total{event_source=\"none\"}";
    let polls_before = proxy.metric(polls).await;

    let set = direct
        .call1(
            "Email/set",
            json!({"accountId": account, "update": {first: {"keywords/$flagged": true}}}),
        )
        .await;
    assert!(set["updated"].get(first).is_some(), "{set}");
    let after = set["newState"].as_str().unwrap().to_string();

    // The client keeps reading through the proxy; the mirror reaches
    // Cyrus's new state by a poll, well before the five-minute one.
    let read = json!({"accountId": account, "ids": [first], "properties": ["keywords"]});
    until("the mirror at Cyrus's new state", async || {
        proxy.call1(&ann, "Email/get", read.clone()).await;
        (mirror_state(&proxy, &account).as_deref() == Some(after.as_str())).then_some(())
    })
    .await;
    assert!(proxy.metric(polls).await > polls_before);
    assert_eq!(
        proxy
            .metric("fastview_upstream_polls_total{event_source=\"open\"}")
            .await,
        0.0
    );

    // Answered by the mirror (no Email/get forwarded), with the keyword.
    let forwarded = forwarded_email_gets(&proxy).await;
    let email = proxy.call1(&ann, "Email/get", read.clone()).await;
    assert_eq!(email["state"], after.as_str());
    assert_eq!(
        email["list"][0]["keywords"],
        json!({"$flagged": true}),
        "{email}"
    );
    assert_eq!(forwarded_email_gets(&proxy).await, forwarded);

    // Email/changes through the proxy names it.
    let changes = proxy
        .call1(
            &ann,
            "Email/changes",
            json!({"accountId": account, "sinceState": before}),
        )
        .await;
    assert_eq!(changes["newState"], after.as_str());
    assert_eq!(changes["updated"], json!([first]), "{changes}");
}

//! Fastview in front of a JMAP server (issue 19): the upstream is a real
//! JMAP server started here, a standalone Fastview on its own data dir.
//! Through the proxy a client sees the upstream's own answers (accounts,
//! ids, states, blobs, capabilities), with the session's URLs pointing at
//! the proxy, and logs in with the upstream's credentials.

use std::time::Duration;

use fastview::app::ServeOptions;
use fastview::proxy::jmap::client::SESSION_GET_REUSE;
use fastview::proxy::jmap::{JmapUpstreamOptions, JmapUpstreamUrl};
use serde_json::{Value, json};

use crate::support::{
    PASSWORD, TestAccount, TestApp, demo_messages, spawn_app, spawn_app_with, spawn_in_front_of,
};
use fastview::proxy::{Proxy, ProxyOptions};

/// A standalone Fastview with `ann@example.com` holding the demo messages,
/// and a proxy in front of it.
async fn upstream_and_proxy() -> (TestApp, TestApp, TestAccount, Vec<String>) {
    upstream_and_proxy_with(|_| {}).await
}

/// [`upstream_and_proxy`] with the proxy's upstream options changed by `edit`.
async fn upstream_and_proxy_with(
    edit: impl FnOnce(&mut JmapUpstreamOptions),
) -> (TestApp, TestApp, TestAccount, Vec<String>) {
    let upstream = spawn_app().await;
    let ann = upstream.account("ann@example.com").await;
    let ids = upstream.ingest(&ann, &demo_messages(), 1_700_000_000).await;
    let url = JmapUpstreamUrl::parse(&format!("{}/.well-known/jmap", upstream.base)).unwrap();
    let mut options = JmapUpstreamOptions::new(url);
    edit(&mut options);
    let proxy = spawn_in_front_of(ServeOptions::default(), Some(ProxyOptions::Jmap(options))).await;
    (upstream, proxy, ann, ids)
}

/// `body` POSTed to `app`'s API as `account`: (status, JSON).
async fn post(app: &TestApp, account: &TestAccount, body: &Value) -> (u16, Value) {
    app.api_raw(account, body).await
}

#[tokio::test]
async fn the_session_is_the_upstreams_with_the_proxys_urls() {
    let (upstream, proxy, ann, _) = upstream_and_proxy().await;
    let direct = upstream.session(&ann).await;
    let mut proxied = proxy.session(&ann).await;
    assert_eq!(proxied["apiUrl"], format!("{}/jmap/api", proxy.base));
    assert_eq!(
        proxied["uploadUrl"],
        format!("{}/jmap/upload/{{accountId}}/", proxy.base)
    );
    assert!(
        proxied["downloadUrl"]
            .as_str()
            .unwrap()
            .starts_with(&format!(
                "{}/jmap/download/{{accountId}}/{{blobId}}/{{name}}?",
                proxy.base
            )),
        "{proxied}"
    );
    // The event source keeps the upstream's query, its push access included.
    let direct_query = direct["eventSourceUrl"]
        .as_str()
        .unwrap()
        .split_once('?')
        .unwrap()
        .1;
    assert_eq!(
        proxied["eventSourceUrl"],
        format!("{}/jmap/eventsource?{direct_query}", proxy.base)
    );
    // Everything else is the upstream's, unchanged.
    let mut direct = direct;
    for url in ["apiUrl", "downloadUrl", "uploadUrl", "eventSourceUrl"] {
        direct.as_object_mut().unwrap().remove(url);
        proxied.as_object_mut().unwrap().remove(url);
    }
    assert_eq!(proxied, direct);
}

#[tokio::test]
async fn read_requests_through_the_proxy_get_the_upstreams_answers() {
    let (upstream, proxy, ann, ids) = upstream_and_proxy().await;
    let account = ann.account_id.clone();
    let requests = [
        json!([["Mailbox/get", {"accountId": account}, "0"]]),
        json!([
            ["Email/query", {"accountId": account, "sort": [{"property": "receivedAt", "isAscending": false}], "calculateTotal": true}, "0"],
            ["Email/get", {"accountId": account, "#ids": {"resultOf": "0", "name": "Email/query", "path": "/ids"},
                "properties": ["threadId", "mailboxIds", "keywords", "from", "subject", "receivedAt", "preview", "hasAttachment", "size"]}, "1"],
            ["Thread/get", {"accountId": account, "#ids": {"resultOf": "1", "name": "Email/get", "path": "/list/*/threadId"}}, "2"],
        ]),
        json!([["Email/get", {"accountId": account, "ids": [ids[0], ids[1], "e999999"],
            "properties": ["bodyStructure", "textBody", "htmlBody", "attachments", "bodyValues"],
            "fetchAllBodyValues": true}, "0"]]),
        json!([["Email/changes", {"accountId": account, "sinceState": "0"}, "0"]]),
        json!([["Email/query", {"accountId": account, "filter": {"text": "the"}}, "0"],
               ["SearchSnippet/get", {"accountId": account, "filter": {"text": "the"},
                "#emailIds": {"resultOf": "0", "name": "Email/query", "path": "/ids"}}, "1"]]),
        json!([["Foo/bar", {}, "0"], ["Email/get", {"accountId": "a999", "ids": []}, "1"]]),
    ];
    for calls in requests {
        let body = json!({
            "using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
            "methodCalls": calls,
        });
        let direct = post(&upstream, &ann, &body).await;
        let proxied = post(&proxy, &ann, &body).await;
        assert_eq!(direct.0, 200, "{}", direct.1);
        assert_eq!(proxied, direct, "{calls}");
    }
    // A request-level error is the upstream's too.
    let body = json!({"using": ["urn:example:nothing"], "methodCalls": []});
    let direct = post(&upstream, &ann, &body).await;
    assert_eq!(direct.0, 400);
    assert_eq!(post(&proxy, &ann, &body).await, direct);

    // So is the answer to a body not declared JSON.
    let as_text = |app: &TestApp| {
        app.client
            .post(format!("{}/jmap/api", app.base))
            .basic_auth(&ann.email, Some(PASSWORD))
            .header("Content-Type", "text/plain")
            .body(r#"{"using":[],"methodCalls":[]}"#)
            .send()
    };
    let direct = as_text(&upstream).await.unwrap();
    let proxied = as_text(&proxy).await.unwrap();
    assert_eq!(direct.status(), 400);
    assert_eq!(proxied.status(), direct.status());
    assert_eq!(proxied.text().await.unwrap(), direct.text().await.unwrap());

    // A message downloads byte for byte.
    let email = &upstream
        .call1(
            &ann,
            "Email/get",
            json!({"accountId": account, "ids": [ids[2]], "properties": ["blobId"]}),
        )
        .await["list"][0];
    let blob = email["blobId"].as_str().unwrap();
    let direct = upstream.download(&ann, blob, "m.eml").await;
    assert_eq!(direct.0, 200);
    assert_eq!(proxy.download(&ann, blob, "m.eml").await, direct);
    assert_eq!(proxy.download(&ann, "f00", "m.eml").await.0, 404);
}

#[tokio::test]
async fn writes_through_the_proxy_are_the_upstreams() {
    let (upstream, proxy, ann, _) = upstream_and_proxy().await;
    let account = ann.account_id.clone();
    let raw = b"From: bob@example.com\r\nTo: ann@example.com\r\nSubject: Through the proxy\r\n\
Message-ID: <proxy-1@example.com>\r\n\r\nUploaded and imported through Fastview.\r\n"
        .to_vec();
    let (status, uploaded) = proxy.upload(&ann, raw.clone()).await;
    assert_eq!(status, 201, "{uploaded}");
    assert_eq!(uploaded["accountId"], account);
    assert_eq!(uploaded["size"], raw.len());
    let imported = proxy
        .call1(&ann, "Email/import", json!({"accountId": account, "emails": {"k": {
            "blobId": uploaded["blobId"], "mailboxIds": {ann.inbox.clone(): true}, "keywords": {"$seen": true}}}}))
        .await;
    let id = imported["created"]["k"]["id"]
        .as_str()
        .expect("imported")
        .to_string();
    // The upstream holds it, and the proxy reads it back at once.
    let direct = upstream
        .call1(&ann, "Email/get", json!({"accountId": account, "ids": [id], "properties": ["subject", "keywords", "blobId"]}))
        .await;
    assert_eq!(direct["list"][0]["subject"], "Through the proxy");
    assert_eq!(direct["list"][0]["blobId"], uploaded["blobId"]);
    let proxied = proxy
        .call1(&ann, "Email/get", json!({"accountId": account, "ids": [id], "properties": ["subject", "keywords", "blobId"]}))
        .await;
    assert_eq!(proxied, direct);
    assert_eq!(
        proxy
            .download(&ann, uploaded["blobId"].as_str().unwrap(), "x.eml")
            .await,
        (200, raw)
    );
}

#[tokio::test]
async fn logins_are_checked_by_the_upstream_and_kept_a_minute() {
    let (_upstream, proxy, ann, _) = upstream_and_proxy().await;
    let checks = "fastview_upstream_round_trips_total{method=\"session\",command=\"session\"}";
    let body = json!({"using": ["urn:ietf:params:jmap:core"], "methodCalls": [["Core/echo", {"n": 1}, "0"]]});
    for _ in 0..3 {
        let (status, answer) = post(&proxy, &ann, &body).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(
            answer["methodResponses"][0],
            json!(["Core/echo", {"n": 1}, "0"])
        );
    }
    assert_eq!(
        proxy.metric(checks).await,
        1.0,
        "one session fetch for three requests"
    );
    assert_eq!(
        proxy
            .metric("fastview_upstream_round_trips_total{method=\"Core/echo\",command=\"api\"}")
            .await,
        3.0
    );

    // A wrong password is the upstream's 401, with a challenge; no header at
    // all is 401 here, without a round trip.
    let wrong = proxy
        .client
        .post(format!("{}/jmap/api", proxy.base))
        .basic_auth(&ann.email, Some("not-the-password"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    assert!(wrong.headers().contains_key("www-authenticate"));
    assert_eq!(proxy.metric(checks).await, 2.0);
    let none = proxy
        .client
        .get(format!("{}/.well-known/jmap", proxy.base))
        .send()
        .await
        .unwrap();
    assert_eq!(none.status(), 401);
    assert_eq!(proxy.metric(checks).await, 2.0);
}

/// A client's session GET is answered from a session the upstream gave the
/// credential within `SESSION_GET_REUSE`; an older one is asked again.
#[tokio::test]
async fn the_session_get_reuses_a_session_fetched_seconds_ago() {
    let (upstream, proxy, ann, _) = upstream_and_proxy().await;
    let checks = "fastview_upstream_round_trips_total{method=\"session\",command=\"session\"}";
    let first = proxy.session(&ann).await;
    let again = proxy.session(&ann).await;
    assert_eq!(again, first);
    assert_eq!(first["state"], upstream.session(&ann).await["state"]);
    assert_eq!(proxy.metric(checks).await, 1.0, "one fetch for two GETs");
    tokio::time::sleep(SESSION_GET_REUSE + Duration::from_millis(100)).await;
    assert_eq!(proxy.session(&ann).await, first);
    assert_eq!(
        proxy.metric(checks).await,
        2.0,
        "a session older than SESSION_GET_REUSE is fetched again"
    );
}

#[tokio::test]
async fn an_upstream_that_is_gone_is_503_not_a_refused_login() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let url = JmapUpstreamUrl::parse(&format!("http://{address}/.well-known/jmap")).unwrap();
    let upstream = ProxyOptions::Jmap(JmapUpstreamOptions::new(url));
    let proxy = spawn_in_front_of(ServeOptions::default(), Some(upstream)).await;
    let response = proxy
        .get_as(
            format!("{}/.well-known/jmap", proxy.base),
            "ann@example.com",
            PASSWORD,
        )
        .await;
    assert_eq!(response.status(), 503);
    assert!(response.headers().contains_key("retry-after"));
}

#[tokio::test]
async fn the_event_source_streams_the_upstreams_state_changes() {
    let (upstream, proxy, ann, ids) = upstream_and_proxy().await;
    // A browser's EventSource sends no Authorization: the push access the
    // upstream put in the URL's query is what it carries.
    let session = proxy.session(&ann).await;
    let url = session["eventSourceUrl"]
        .as_str()
        .unwrap()
        .replace("{types}", "Email")
        .replace("{closeafter}", "state")
        .replace("{ping}", "0");
    let mut events = proxy.client.get(url).send().await.unwrap();
    assert_eq!(events.status(), 200);
    assert!(
        events.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    let set = upstream
        .update_email(&ann, &ids[0], json!({"keywords/$flagged": true}))
        .await;
    let mut text = String::new();
    let read = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(chunk) = events.chunk().await.unwrap() {
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
    });
    read.await.expect("closeafter=state ends the stream");
    let data = text
        .lines()
        .find_map(|line| line.strip_prefix("data: "))
        .expect("a state event");
    let data: Value = serde_json::from_str(data).unwrap();
    assert_eq!(data["changed"][&ann.account_id]["Email"], set["newState"]);
}

/// The proxy's count of Email/get calls it forwarded to the upstream.
/// Asserts the upstream answers `read` (an Email/get) with `id` not found,
/// that the proxy gives the same answer, and that it asked the upstream
/// (`forwarded` Email/gets forwarded so far; `why` if not).
async fn assert_upstream_says_not_found(
    upstream: &TestApp,
    proxy: &TestApp,
    user: &TestAccount,
    read: &Value,
    id: &str,
    forwarded: f64,
    why: &str,
) {
    let direct = post(upstream, user, read).await;
    let not_found = &direct.1["methodResponses"][0][1]["notFound"];
    assert_eq!(*not_found, json!([id]));
    assert_eq!(post(proxy, user, read).await, direct);
    assert_eq!(forwarded_email_gets(proxy).await, forwarded, "{why}");
}

async fn forwarded_email_gets(proxy: &TestApp) -> f64 {
    proxy
        .metric("fastview_upstream_round_trips_total{method=\"Email/get\",command=\"api\"}")
        .await
}

/// The mirror of a JMAP proxy's upstream.
fn mirror_of(proxy: &TestApp) -> &fastview::proxy::jmap::mirror::Mirror {
    let Some(Proxy::Jmap(jmap_proxy)) = &proxy.proxy else {
        panic!("a JMAP proxy");
    };
    jmap_proxy.mirror.as_deref().expect("a mirror")
}

/// Waits until the proxy's mirror of `account` has finished a sync at
/// upstream Email state `state` (or any, when `None`).
async fn mirror_at(proxy: &TestApp, account: &str, state: Option<&Value>) {
    let mirror = mirror_of(proxy);
    for _ in 0..200 {
        if let Some(ready) = mirror.ready(account)
            && state.is_none_or(|state| *state == ready.email_state)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the mirror of {account} did not reach {state:?}");
}

/// Fetches `ann`'s session through the proxy (its mirror starts following)
/// and waits until the mirror has synced to the upstream's Email state,
/// which it returns.
async fn mirror_synced(upstream: &TestApp, proxy: &TestApp, ann: &TestAccount) -> Value {
    proxy.session(ann).await;
    let state = upstream
        .call1(
            ann,
            "Email/get",
            json!({"accountId": ann.account_id, "ids": []}),
        )
        .await["state"]
        .clone();
    mirror_at(proxy, &ann.account_id, Some(&state)).await;
    state
}

#[tokio::test]
async fn the_mirror_answers_email_get_with_the_upstreams_ids_and_states() {
    let (upstream, proxy, ann, ids) = upstream_and_proxy().await;
    let account = ann.account_id.clone();
    // The first request makes the mirror and starts its sync.
    proxy.session(&ann).await;
    proxy.call1(&ann, "Core/echo", json!({})).await;
    let state = upstream
        .call1(&ann, "Email/get", json!({"accountId": account, "ids": []}))
        .await["state"]
        .clone();
    mirror_at(&proxy, &account, Some(&state)).await;

    let list_view = json!({
        "using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
        "methodCalls": [
            ["Mailbox/get", {"accountId": account, "ids": null}, "m"],
            ["Mailbox/get", {"accountId": account, "ids": [ann.inbox, "nope"], "properties": ["name", "totalEmails", "unreadEmails"]}, "n"],
            ["Email/query", {"accountId": account, "sort": [{"property": "receivedAt", "isAscending": false}]}, "0"],
            ["Email/get", {"accountId": account, "#ids": {"resultOf": "0", "name": "Email/query", "path": "/ids"},
                "properties": ["id", "blobId", "threadId", "mailboxIds", "keywords", "size", "receivedAt",
                    "messageId", "from", "to", "subject", "sentAt", "preview", "hasAttachment",
                    "header:List-Id:asText"]}, "1"],
            ["Thread/get", {"accountId": account, "#ids": {"resultOf": "1", "name": "Email/get", "path": "/list/*/threadId"}}, "2"],
        ],
    });
    let forwarded = forwarded_email_gets(&proxy).await;
    let mailbox_gets =
        "fastview_upstream_round_trips_total{method=\"Mailbox/get\",command=\"api\"}";
    let forwarded_mailbox_gets = proxy.metric(mailbox_gets).await;
    let direct = post(&upstream, &ann, &list_view).await;
    let proxied = post(&proxy, &ann, &list_view).await;
    assert_eq!(direct.0, 200);
    assert_eq!(
        direct.1["methodResponses"][1][1]["notFound"],
        json!(["nope"])
    );
    assert_eq!(proxied, direct);
    assert_eq!(
        forwarded_email_gets(&proxy).await,
        forwarded,
        "the Email/get was answered by the mirror"
    );
    assert_eq!(
        proxy.metric(mailbox_gets).await,
        forwarded_mailbox_gets,
        "so were the Mailbox/gets"
    );
    // So are the body properties: the upstream splits these messages into
    // the same partIds.
    let bodies = json!({"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
        "methodCalls": [["Email/get", {"accountId": account, "ids": ids,
            "properties": ["bodyStructure", "textBody", "htmlBody", "attachments", "bodyValues"],
            "fetchAllBodyValues": true, "maxBodyValueBytes": 200}, "0"]]});
    let direct = post(&upstream, &ann, &bodies).await;
    assert_eq!(post(&proxy, &ann, &bodies).await, direct);
    assert_eq!(forwarded_email_gets(&proxy).await, forwarded);
    // Any other property is the upstream's to answer.
    let other = json!({"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
        "methodCalls": [["Email/get", {"accountId": account, "ids": [ids[0]]}, "0"]]});
    assert_eq!(
        post(&proxy, &ann, &other).await,
        post(&upstream, &ann, &other).await
    );
    assert_eq!(forwarded_email_gets(&proxy).await, forwarded + 1.0);

    // A write through the proxy is read back through it at once, with the
    // upstream's new state.
    let set = proxy
        .call1(
            &ann,
            "Email/set",
            json!({"accountId": account, "update": {ids[1].clone(): {"keywords/$flagged": true, "keywords/$seen": true}}}),
        )
        .await;
    let read = json!({"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
        "methodCalls": [["Email/get", {"accountId": account, "ids": [ids[1]], "properties": ["keywords", "mailboxIds"]}, "0"]]});
    let forwarded = forwarded_email_gets(&proxy).await;
    let proxied = post(&proxy, &ann, &read).await;
    assert_eq!(proxied.1["methodResponses"][0][1]["state"], set["newState"]);
    assert_eq!(
        proxied.1["methodResponses"][0][1]["list"][0]["keywords"]["$flagged"],
        true
    );
    assert_eq!(proxied, post(&upstream, &ann, &read).await);
    assert_eq!(forwarded_email_gets(&proxy).await, forwarded);
    // A request of Mailbox/get alone is the mirror's too.
    let mailboxes = json!({"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
        "methodCalls": [["Mailbox/get", {"accountId": account}, "0"]]});
    let forwarded_mailbox_gets = proxy.metric(mailbox_gets).await;
    assert_eq!(
        post(&proxy, &ann, &mailboxes).await,
        post(&upstream, &ann, &mailboxes).await
    );
    assert_eq!(proxy.metric(mailbox_gets).await, forwarded_mailbox_gets);
    // The mailboxes' counts too (the catch-up read them again).
    let unread = json!({"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
        "methodCalls": [["Mailbox/get", {"accountId": account, "ids": [ann.inbox], "properties": ["unreadEmails", "totalEmails"]}, "0"]]});
    assert_eq!(
        post(&proxy, &ann, &unread).await,
        post(&upstream, &ann, &unread).await
    );

    // Another client's change at the upstream reaches the mirror through
    // the upstream's event source.
    let set = upstream
        .call1(&ann, "Email/set", json!({"accountId": account, "update": {ids[2].clone(): {"keywords/$seen": true}}, "destroy": [ids[3]]}))
        .await;
    mirror_at(&proxy, &account, Some(&set["newState"])).await;
    let read = json!({"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
        "methodCalls": [["Email/get", {"accountId": account, "ids": [ids[2], ids[3]], "properties": ["keywords"]}, "0"]]});
    let proxied = post(&proxy, &ann, &read).await;
    assert_eq!(proxied, post(&upstream, &ann, &read).await);
    assert_eq!(
        proxied.1["methodResponses"][0][1]["notFound"],
        json!([ids[3]])
    );
}

/// Local answers read the mirror side by side: requests arriving together
/// are all the mirror's (a sync alone holds them off). On several worker
/// threads, as a server runs: one thread's answer reads the mirror while
/// another's does.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn requests_at_once_are_all_answered_by_the_mirror() {
    let (upstream, proxy, ann, ids) = upstream_and_proxy().await;
    mirror_synced(&upstream, &proxy, &ann).await;
    let list_view = json!({
        "using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
        "methodCalls": [["Email/get", {"accountId": ann.account_id, "ids": ids,
            "properties": ["id", "threadId", "mailboxIds", "keywords", "from", "subject",
                "receivedAt", "preview", "hasAttachment"]}, "0"]],
    });
    let direct = post(&upstream, &ann, &list_view).await;
    assert_eq!(direct.0, 200);
    let forwarded = forwarded_email_gets(&proxy).await;
    let answers = futures::future::join_all((0..16).map(|_| post(&proxy, &ann, &list_view))).await;
    for answer in &answers {
        assert_eq!(*answer, direct);
    }
    assert_eq!(
        forwarded_email_gets(&proxy).await,
        forwarded,
        "none of the 16 was forwarded"
    );
}

/// The mirror's names of emails are kept in memory once read and forgotten
/// by each sync: an email the upstream destroyed is not named any more
/// (the call is the upstream's), and a name kept for one account is not
/// another's.
#[tokio::test]
async fn kept_names_answer_as_the_mirror_does() {
    let (upstream, proxy, ann, ids) = upstream_and_proxy().await;
    let account = ann.account_id.clone();
    mirror_synced(&upstream, &proxy, &ann).await;
    let read = json!({"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
        "methodCalls": [["Email/get", {"accountId": account, "ids": [ids[0], ids[1]],
            "properties": ["threadId", "blobId", "mailboxIds", "subject"]}, "0"]]});
    let direct = post(&upstream, &ann, &read).await;
    assert_eq!(direct.0, 200);
    let forwarded = forwarded_email_gets(&proxy).await;
    assert_eq!(post(&proxy, &ann, &read).await, direct);
    assert_eq!(post(&proxy, &ann, &read).await, direct);
    // One entry, the account's, naming the two emails.
    assert_eq!(
        proxy
            .metric("fastview_cache_entries{cache=\"mirror_names\"}")
            .await,
        1.0
    );
    let set = upstream
        .call1(
            &ann,
            "Email/set",
            json!({"accountId": account, "destroy": [ids[0]]}),
        )
        .await;
    mirror_at(&proxy, &account, Some(&set["newState"])).await;
    // The sync forgot the account's names: read again from the store.
    assert_eq!(
        proxy
            .metric("fastview_cache_entries{cache=\"mirror_names\"}")
            .await,
        0.0
    );
    assert_upstream_says_not_found(
        &upstream,
        &proxy,
        &ann,
        &read,
        &ids[0],
        forwarded + 1.0,
        "an id the mirror no longer maps is the upstream's to answer",
    )
    .await;
    // Another account asking for the same upstream ids: its own mirror
    // holds none of them.
    let bob = upstream.account("bob@example.com").await;
    let theirs = json!({"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
        "methodCalls": [["Email/get", {"accountId": bob.account_id, "ids": [ids[1]],
            "properties": ["threadId", "subject"]}, "0"]]});
    mirror_synced(&upstream, &proxy, &bob).await;
    assert_upstream_says_not_found(
        &upstream,
        &proxy,
        &bob,
        &theirs,
        &ids[1],
        forwarded + 2.0,
        "bob's mirror names no such email: the upstream's to answer",
    )
    .await;
}

#[tokio::test]
async fn the_mirror_answers_only_accounts_the_credential_may_read() {
    let (upstream, proxy, ann, ids) = upstream_and_proxy().await;
    let bob = upstream.account("bob@example.com").await;
    proxy.session(&ann).await;
    let state = upstream.state(&ann, "Email").await;
    mirror_at(&proxy, &ann.account_id, Some(&json!(state))).await;
    // Bob asks for ann's mailbox through the proxy: the upstream's answer
    // (accountNotFound), not the mirror's.
    let body = json!({"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
        "methodCalls": [["Email/get", {"accountId": ann.account_id, "ids": [ids[0]], "properties": ["subject"]}, "0"]]});
    let direct = post(&upstream, &bob, &body).await;
    assert_eq!(direct.1["methodResponses"][0][0], "error", "{}", direct.1);
    assert_eq!(post(&proxy, &bob, &body).await, direct);
}

#[tokio::test]
async fn changes_then_get_in_one_request_read_the_changes() {
    let (upstream, proxy, ann, ids) = upstream_and_proxy().await;
    let account = ann.account_id.clone();
    let state = mirror_synced(&upstream, &proxy, &ann).await;
    // Another client changes a message; at once, a client syncs through the
    // proxy the way RFC 8620 §5.2 suggests: changes, then the changed ones.
    upstream
        .call1(
            &ann,
            "Email/set",
            json!({"accountId": account, "update": {ids[4].clone(): {"keywords/$seen": true}}}),
        )
        .await;
    let body = json!({"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
    "methodCalls": [
        ["Email/changes", {"accountId": account, "sinceState": state}, "0"],
        ["Email/get", {"accountId": account, "#ids": {"resultOf": "0", "name": "Email/changes", "path": "/updated"},
            "properties": ["keywords"]}, "1"],
    ]});
    let proxied = post(&proxy, &ann, &body).await;
    let direct = post(&upstream, &ann, &body).await;
    assert_eq!(proxied, direct);
    assert_eq!(
        proxied.1["methodResponses"][1][1]["list"][0]["keywords"],
        json!({"$seen": true})
    );
}

#[tokio::test]
async fn a_message_the_mirror_cannot_take_is_the_upstreams_and_blocks_nothing() {
    let upstream = spawn_app().await;
    let ann = upstream.account("ann@example.com").await;
    let mut big = b"From: bob@example.com\r\nSubject: big\r\n\r\n".to_vec();
    big.extend(std::iter::repeat_n(b'x', 4096));
    let mut messages = demo_messages();
    messages.push(big);
    let ids = upstream.ingest(&ann, &messages, 1_700_000_000).await;
    let url = JmapUpstreamUrl::parse(&format!("{}/.well-known/jmap", upstream.base)).unwrap();
    let mut options = ServeOptions::default();
    // The proxy takes no message over 2 KiB: the big one is not mirrored.
    options.limits.max_size_upload = 2048;
    let upstream_options = ProxyOptions::Jmap(JmapUpstreamOptions::new(url));
    let proxy = spawn_in_front_of(options, Some(upstream_options)).await;
    proxy.session(&ann).await;
    let state = upstream.state(&ann, "Email").await;
    mirror_at(&proxy, &ann.account_id, Some(&json!(state))).await;
    // A write is answered as the upstream answered it.
    proxy
        .update_email(&ann, &ids[0], json!({"keywords/$flagged": true}))
        .await;
    let read = |ids: Value| {
        json!({"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
        "methodCalls": [["Email/get", {"accountId": ann.account_id, "ids": ids, "properties": ["subject", "keywords", "size"]}, "0"]]})
    };
    let forwarded = forwarded_email_gets(&proxy).await;
    let mirrored = read(json!([ids[0]]));
    assert_eq!(
        post(&proxy, &ann, &mirrored).await,
        post(&upstream, &ann, &mirrored).await
    );
    assert_eq!(forwarded_email_gets(&proxy).await, forwarded);
    let big = read(json!([ids[0], ids.last().unwrap()]));
    assert_eq!(
        post(&proxy, &ann, &big).await,
        post(&upstream, &ann, &big).await
    );
    assert_eq!(forwarded_email_gets(&proxy).await, forwarded + 1.0);
    // Without the mail capability in `using`, Email/get is the upstream's
    // unknownMethod, not the mirror's answer.
    let bare = json!({"using": ["urn:ietf:params:jmap:core"],
        "methodCalls": [["Email/get", {"accountId": ann.account_id, "ids": [ids[0]], "properties": ["subject"]}, "0"]]});
    let direct = post(&upstream, &ann, &bare).await;
    assert_eq!(direct.1["methodResponses"][0][1]["type"], "unknownMethod");
    assert_eq!(post(&proxy, &ann, &bare).await, direct);
}

/// The proxy's count of requests it forwarded whose first call is `method`.
async fn forwarded_calls(proxy: &TestApp, method: &str) -> f64 {
    proxy
        .metric(&format!(
            "fastview_upstream_round_trips_total{{method=\"{method}\",command=\"api\"}}"
        ))
        .await
}

#[tokio::test]
async fn threads_and_queries_are_the_mirrors_once_it_answered_them_alike() {
    let (upstream, proxy, ann, ids) = upstream_and_proxy().await;
    let account = ann.account_id.clone();
    mirror_synced(&upstream, &proxy, &ann).await;
    let census = mirror_of(&proxy).ready(&account).unwrap().census;
    let census = census.expect("a census at the mirror's state");
    assert!(census.complete, "{census:?}");

    let list_view = |mailbox: &str, ascending: bool| {
        json!({"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
        "methodCalls": [
            ["Email/query", {"accountId": account, "filter": {"inMailbox": mailbox},
                "sort": [{"property": "receivedAt", "isAscending": ascending}],
                "limit": 30, "position": 1, "calculateTotal": true}, "0"],
            ["Email/get", {"accountId": account, "#ids": {"resultOf": "0", "name": "Email/query", "path": "/ids"},
                "properties": ["threadId", "subject"]}, "1"],
            ["Thread/get", {"accountId": account, "#ids": {"resultOf": "1", "name": "Email/get", "path": "/list/*/threadId"}}, "2"],
        ]})
    };
    let counts = async || {
        (
            forwarded_calls(&proxy, "Email/query").await,
            forwarded_calls(&proxy, "Thread/get").await,
        )
    };
    // The first of a shape is forwarded, and compared.
    let before = counts().await;
    let direct = post(&upstream, &ann, &list_view(&ann.inbox, false)).await;
    assert_eq!(direct.0, 200);
    assert_eq!(direct.1["methodResponses"][0][1]["total"], ids.len());
    assert_eq!(
        direct.1["methodResponses"][0][1]["ids"]
            .as_array()
            .unwrap()
            .len(),
        ids.len() - 1
    );
    // Among them a thread of several emails: the Thread/get shows an order.
    assert!(
        direct.1["methodResponses"][2][1]["list"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["emailIds"].as_array().unwrap().len() >= 2),
        "{}",
        direct.1
    );
    assert_eq!(
        post(&proxy, &ann, &list_view(&ann.inbox, false)).await,
        direct
    );
    assert_eq!(counts().await, (before.0 + 1.0, before.1 + 1.0));
    // Then it is the mirror's, with the upstream's ids and states.
    assert_eq!(
        post(&proxy, &ann, &list_view(&ann.inbox, false)).await,
        direct
    );
    assert_eq!(counts().await, (before.0 + 1.0, before.1 + 1.0));
    // Another sort is another shape: forwarded once.
    let ascending = post(&upstream, &ann, &list_view(&ann.inbox, true)).await;
    assert_ne!(ascending, direct);
    assert_eq!(
        post(&proxy, &ann, &list_view(&ann.inbox, true)).await,
        ascending
    );
    assert_eq!(
        post(&proxy, &ann, &list_view(&ann.inbox, true)).await,
        ascending
    );
    assert_eq!(counts().await.0, before.0 + 2.0);

    // After a write through the proxy the mirror's answers are the
    // upstream's new ones: a message archived leaves the inbox's list.
    let archive = upstream
        .call1(
            &ann,
            "Mailbox/query",
            json!({"accountId": account, "filter": {"role": "archive"}}),
        )
        .await["ids"][0]
        .clone();
    let first = direct.1["methodResponses"][0][1]["ids"][0].clone();
    let moved = proxy
        .call1(
            &ann,
            "Email/set",
            json!({"accountId": account, "update": {first.as_str().unwrap(): {"mailboxIds": {archive.as_str().unwrap(): true}}}}),
        )
        .await;
    assert_eq!(moved["updated"].as_object().unwrap().len(), 1, "{moved}");
    let direct = post(&upstream, &ann, &list_view(&ann.inbox, false)).await;
    assert_eq!(direct.1["methodResponses"][0][1]["total"], ids.len() - 1);
    assert_eq!(
        post(&proxy, &ann, &list_view(&ann.inbox, false)).await,
        direct
    );
    assert_eq!(counts().await.0, before.0 + 2.0);

    // Collapsed threads are the mirror's once answered alike, collapsed by
    // the upstream's threadIds: the inbox holds a thread of several emails,
    // so collapsing drops some; each page, its position, the total and an
    // anchor as the upstream gives them.
    let mut collapsed_pages = Vec::new();
    for query in [
        json!({"accountId": account, "filter": {"inMailbox": ann.inbox}, "collapseThreads": true,
            "sort": [{"property": "receivedAt", "isAscending": false}], "calculateTotal": true}),
        json!({"accountId": account, "filter": {"inMailbox": ann.inbox}, "collapseThreads": true,
            "sort": [{"property": "receivedAt", "isAscending": false}], "calculateTotal": true,
            "position": 1, "limit": 2}),
        json!({"accountId": account, "filter": {"inMailbox": ann.inbox}, "collapseThreads": true,
            "sort": [{"property": "receivedAt", "isAscending": true}], "calculateTotal": true,
            "position": -2}),
    ] {
        let body = json!({"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
            "methodCalls": [["Email/query", query, "0"]]});
        let direct = post(&upstream, &ann, &body).await;
        assert_eq!(direct.0, 200);
        let forwarded = counts().await.0;
        assert_eq!(post(&proxy, &ann, &body).await, direct, "{query}");
        assert_eq!(counts().await.0, forwarded + 1.0, "{query}");
        assert_eq!(post(&proxy, &ann, &body).await, direct, "{query}");
        assert_eq!(counts().await.0, forwarded + 1.0, "{query}");
        collapsed_pages.push(direct.1["methodResponses"][0][1].clone());
    }
    let all = &collapsed_pages[0];
    assert!(
        all["total"].as_u64().unwrap() < ids.len() as u64 - 1,
        "collapsing dropped no email: {all}"
    );
    assert_eq!(
        collapsed_pages[1]["ids"],
        json!(all["ids"].as_array().unwrap()[1..3])
    );
    // An anchor: found among the collapsed matches, offset from there.
    let anchored = json!({"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
        "methodCalls": [["Email/query", {"accountId": account, "filter": {"inMailbox": ann.inbox},
            "collapseThreads": true, "sort": [{"property": "receivedAt", "isAscending": false}],
            "calculateTotal": true, "anchor": all["ids"][2], "anchorOffset": -1, "limit": 2}, "0"]]});
    let direct = post(&upstream, &ann, &anchored).await;
    assert_eq!(
        direct.1["methodResponses"][0][1]["position"], 1,
        "{direct:?}"
    );
    let forwarded = counts().await.0;
    assert_eq!(post(&proxy, &ann, &anchored).await, direct);
    assert_eq!(post(&proxy, &ann, &anchored).await, direct);
    assert_eq!(counts().await.0, forwarded + 1.0);

    // A text filter (each server's own matching) and a shape whose
    // forwarded answers never showed an order (a mailbox of one email:
    // compared) stay the upstream's.
    for query in [
        json!({"accountId": account, "filter": {"text": "the"}}),
        json!({"accountId": account, "filter": {"inMailbox": archive}, "limit": 5}),
        // Not a boolean, or a paging argument not of its type: the
        // upstream's to judge (Fastview answers invalidArguments).
        json!({"accountId": account, "filter": {"inMailbox": ann.inbox}, "collapseThreads": null,
            "sort": [{"property": "receivedAt", "isAscending": false}], "calculateTotal": true}),
        json!({"accountId": account, "filter": {"inMailbox": ann.inbox}, "collapseThreads": true,
            "sort": [{"property": "receivedAt", "isAscending": false}], "calculateTotal": "yes"}),
    ] {
        let body = json!({"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
            "methodCalls": [["Email/query", query, "0"]]});
        let direct = post(&upstream, &ann, &body).await;
        let forwarded = counts().await.0;
        assert_eq!(post(&proxy, &ann, &body).await, direct);
        assert_eq!(post(&proxy, &ann, &body).await, direct);
        assert_eq!(counts().await.0, forwarded + 2.0, "{query}");
    }
    // A thread the mirror does not know (it may not have stored its emails
    // yet) is the upstream's to answer.
    let unknown = json!({"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
        "methodCalls": [["Thread/get", {"accountId": account, "ids": ["T-unknown"]}, "0"]]});
    let forwarded = counts().await.1;
    assert_eq!(
        post(&proxy, &ann, &unknown).await,
        post(&upstream, &ann, &unknown).await
    );
    assert_eq!(counts().await.1, forwarded + 1.0);
}

#[tokio::test]
async fn a_shape_the_mirror_answers_unlike_the_upstream_stays_forwarded() {
    let (upstream, proxy, ann, _) = upstream_and_proxy().await;
    let account = ann.account_id.clone();
    mirror_synced(&upstream, &proxy, &ann).await;
    // The mirror's copy of one inbox message is moved out of the inbox
    // behind its back: it still believes it is at the upstream's state.
    let ready = mirror_of(&proxy).ready(&account).unwrap();
    let store = &proxy.state.jmap.store;
    let local_inbox = ready
        .mailboxes
        .iter()
        .find(|(_, upstream)| **upstream == ann.inbox)
        .map(|(local, _)| *local)
        .unwrap();
    let elsewhere = *ready.mailboxes.keys().find(|m| **m != local_inbox).unwrap();
    let email = store
        .mirror_emails(ready.account.id, None, None)
        .await
        .unwrap()[0]
        .email_id;
    store
        .update_emails(
            ready.account.id,
            &[fastview::store::EmailUpdate::replace(
                email,
                None,
                Some(vec![elsewhere]),
            )],
        )
        .await
        .unwrap();

    let body = json!({"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
        "methodCalls": [["Email/query", {"accountId": account, "filter": {"inMailbox": ann.inbox},
            "calculateTotal": true}, "0"]]});
    let direct = post(&upstream, &ann, &body).await;
    let forwarded = forwarded_calls(&proxy, "Email/query").await;
    for _ in 0..3 {
        assert_eq!(post(&proxy, &ann, &body).await, direct);
    }
    assert_eq!(
        forwarded_calls(&proxy, "Email/query").await,
        forwarded + 3.0,
        "every one forwarded: the mirror's answer was not the upstream's"
    );
}

/// A Fastview upstream's queryState is its Email state: the census says
/// so, and the mirror's lists carry that state, none minted. It lists a
/// thread asked twice once (RFC 8620 §5.1): a Thread/get with a repeated
/// id is compared once and then answered by the mirror the same way,
/// beside the shape without a repeat.
#[tokio::test]
async fn a_fastview_upstream_keeps_its_query_states_and_lists_repeated_threads_once() {
    let (upstream, proxy, ann, _) = upstream_and_proxy().await;
    let account = ann.account_id.clone();
    let state = mirror_synced(&upstream, &proxy, &ann).await;
    let census = mirror_of(&proxy).ready(&account).unwrap().census.unwrap();
    assert!(!census.mints_query_states, "{census:?}");
    let query = json!({"accountId": account, "filter": {"inMailbox": ann.inbox}});
    for _ in 0..2 {
        let answer = proxy.call1(&ann, "Email/query", query.clone()).await;
        assert_eq!(answer["queryState"], state);
    }

    // A thread of several emails, asked twice.
    let emails = upstream
        .call1(
            &ann,
            "Email/get",
            json!({"accountId": account, "ids": null, "properties": ["threadId"]}),
        )
        .await["list"]
        .clone();
    let threads: Vec<&Value> = emails
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["threadId"])
        .collect();
    let thread = *threads
        .iter()
        .find(|t| threads.iter().filter(|u| u == t).count() >= 2)
        .expect("a thread of two");
    let repeated = json!({"accountId": account, "ids": [thread, thread]});
    let direct = upstream.call1(&ann, "Thread/get", repeated.clone()).await;
    assert_eq!(direct["list"].as_array().unwrap().len(), 1, "{direct}");
    let before = forwarded_calls(&proxy, "Thread/get").await;
    for _ in 0..3 {
        assert_eq!(
            proxy.call1(&ann, "Thread/get", repeated.clone()).await,
            direct
        );
    }
    assert_eq!(forwarded_calls(&proxy, "Thread/get").await, before + 1.0);
}

#[tokio::test]
async fn a_poll_that_finds_the_upstream_unchanged_runs_no_sync() {
    let (upstream, proxy, ann, ids) =
        upstream_and_proxy_with(|options| options.poll = Duration::from_millis(200)).await;
    let account = ann.account_id.clone();
    mirror_synced(&upstream, &proxy, &ann).await;
    let syncs = async || {
        proxy
            .metric("fastview_upstream_round_trips_total{method=\"sync\",command=\"sync\"}")
            .await
    };
    let polls = async || {
        proxy
            .metric("fastview_upstream_round_trips_total{method=\"poll\",command=\"api\"}")
            .await
    };
    let (syncs_before, polls_before) = (syncs().await, polls().await);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // Several polls (200–250 ms apart), each one round trip, no sync.
    assert!(polls().await >= polls_before + 3.0, "{}", polls().await);
    assert_eq!(syncs().await, syncs_before);
    // A change at the upstream itself is still caught up with.
    let set = upstream
        .call1(
            &ann,
            "Email/set",
            json!({"accountId": account, "update": {ids[0].as_str(): {"keywords/$flagged": true}}}),
        )
        .await;
    mirror_at(&proxy, &account, Some(&set["newState"])).await;
    assert!(syncs().await > syncs_before);
}

/// With an event source that streams (a standalone Fastview upstream), the
/// mirror follows it as before issue 45: no poll without it, no fallback
/// counted, though the client is active and the active poll is 50 ms.
#[tokio::test]
async fn with_an_event_source_the_mirror_does_not_poll_while_the_client_is_active() {
    let (upstream, proxy, ann, ids) =
        upstream_and_proxy_with(|options| options.poll_active = Duration::from_millis(50)).await;
    let account = ann.account_id.clone();
    mirror_synced(&upstream, &proxy, &ann).await;
    let set = upstream
        .call1(
            &ann,
            "Email/set",
            json!({"accountId": account, "update": {ids[0].as_str(): {"keywords/$flagged": true}}}),
        )
        .await;
    // The client reads through the proxy over ten active polls' time.
    let read = json!({"accountId": account, "ids": [ids[0]], "properties": ["keywords"]});
    for _ in 0..10 {
        proxy.call1(&ann, "Email/get", read.clone()).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    mirror_at(&proxy, &account, Some(&set["newState"])).await;
    for metric in [
        "fastview_upstream_event_source_fallbacks_total",
        "fastview_upstream_polls_total{event_source=\"none\"}",
        "fastview_upstream_polls_total{event_source=\"open\"}",
    ] {
        assert_eq!(proxy.metric(metric).await, 0.0, "{metric}");
    }
    let email = proxy.call1(&ann, "Email/get", read).await;
    assert_eq!(email["list"][0]["keywords"], json!({"$flagged": true}));
}

/// Wrong guesses through the proxy lock out only the guesser (issue 43
/// item 7): the proxy brakes (user, client address) itself before the
/// upstream sees the guess, and tells an upstream that trusts it
/// (`trusts_forwarded`) each client's address, so the upstream brakes the
/// guesser's address, not the proxy's. Through a proxy that does not tell
/// it, the upstream's brake falls on every login from the proxy, and its
/// 429 is passed on as 429, not 503.
#[tokio::test]
async fn wrong_guesses_through_the_proxy_lock_out_only_the_guesser() {
    use fastview::http::auth::MAX_FAILURES;
    const GUESSER: &str = "192.0.2.66";
    const KIM: &str = "198.51.100.7";
    let loopback: ipnet::IpNet = "127.0.0.1/32".parse().unwrap();
    let upstream = spawn_app_with(ServeOptions {
        trusted_proxies: vec![loopback],
        ..ServeOptions::default()
    })
    .await;
    let kim = upstream.account("kim@example.com").await;
    let url = JmapUpstreamUrl::parse(&format!("{}/.well-known/jmap", upstream.base)).unwrap();
    let proxy_telling = |tells: bool| {
        let mut options = JmapUpstreamOptions::new(url.clone());
        options.trusts_forwarded = tells;
        let serve = ServeOptions {
            trusted_proxies: vec![loopback],
            ..ServeOptions::default()
        };
        spawn_in_front_of(serve, Some(ProxyOptions::Jmap(options)))
    };
    let (telling, blind) = (proxy_telling(true).await, proxy_telling(false).await);
    let login = |proxy: &TestApp, from: &str, password: &str| {
        proxy
            .client
            .get(format!("{}/.well-known/jmap", proxy.base))
            .basic_auth(&kim.email, Some(password))
            .header("x-forwarded-for", from)
            .send()
    };
    let status = |response: reqwest::Response| response.status().as_u16();
    let checks = "fastview_upstream_round_trips_total{method=\"session\",command=\"session\"}";
    for _ in 0..MAX_FAILURES {
        assert_eq!(
            status(login(&telling, GUESSER, "guess").await.unwrap()),
            401
        );
    }
    let asked = telling.metric(checks).await;
    let braked = login(&telling, GUESSER, "guess").await.unwrap();
    assert_eq!(braked.status(), 429);
    assert!(braked.headers().contains_key("retry-after"));
    // Even the right password, braked here: the brake tells no guess apart.
    assert_eq!(
        status(login(&telling, GUESSER, PASSWORD).await.unwrap()),
        429
    );
    assert_eq!(telling.metric(checks).await, asked, "the upstream saw none");
    // Kim, from her own address, is let in: the upstream braked the
    // guesser's address, not the proxy's.
    assert_eq!(status(login(&telling, KIM, PASSWORD).await.unwrap()), 200);

    // Through the proxy that does not tell, the upstream counts every
    // guess against the proxy's address; once it brakes, Kim gets its 429.
    for _ in 0..MAX_FAILURES {
        assert_eq!(status(login(&blind, GUESSER, "guess").await.unwrap()), 401);
    }
    let refused = login(&blind, KIM, PASSWORD).await.unwrap();
    assert_eq!(refused.status(), 429, "the upstream's 429 is not a 503");
    assert!(refused.headers().contains_key("retry-after"));
}

/// What a client saw through the JMAP proxy before its upstream went
/// down (issue 45 item 2): the session, and the answers to `reads`.
pub(crate) struct BeforeOutage {
    session: Value,
    reads: Value,
    /// The reads' method responses.
    pub(crate) answers: Value,
}

impl BeforeOutage {
    /// Asks the session and `reads` (method calls) as `ann`.
    pub(crate) async fn ask(proxy: &TestApp, ann: &TestAccount, reads: Value) -> Self {
        let answers = proxy.call(ann, reads.clone()).await;
        assert!(
            answers.iter().all(|answer| answer[0] != "error"),
            "{answers:?}"
        );
        Self {
            session: proxy.session(ann).await,
            reads,
            answers: Value::Array(answers),
        }
    }

    /// With the upstream down: the session, asked afresh (past the session
    /// GET's reuse), is what it was for the credential the upstream accepted
    /// and 503 (not a refusal) for one it never saw; the reads are the
    /// mirror's answers as before; `write` (Email/set arguments) after them
    /// is serverUnavailable, and so is it in a request of its own.
    pub(crate) async fn assert_answered_while_down(
        &self,
        proxy: &TestApp,
        ann: &TestAccount,
        write: &Value,
    ) {
        tokio::time::sleep(SESSION_GET_REUSE + Duration::from_millis(500)).await;
        let session = |password: &'static str| {
            proxy.get_as(format!("{}/jmap/session", proxy.base), &ann.email, password)
        };
        let response = session(PASSWORD).await;
        assert_eq!(response.status(), 200);
        assert_eq!(response.json::<Value>().await.unwrap(), self.session);
        assert_eq!(session("a guess").await.status(), 503);
        assert!(proxy.metric("fastview_upstream_outage_logins_total").await >= 1.0);
        let mut calls = self.reads.as_array().unwrap().clone();
        calls.push(json!(["Email/set", write, "w"]));
        let answered = proxy.call(ann, Value::Array(calls)).await;
        let (reads, last) = answered.split_at(answered.len() - 1);
        assert_eq!(Value::Array(reads.to_vec()), self.answers);
        assert_eq!(
            (last[0][0].as_str(), last[0][1]["type"].as_str()),
            (Some("error"), Some("serverUnavailable")),
            "{answered:?}"
        );
        let (status, alone) = post(
            proxy,
            ann,
            &json!({"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
                "methodCalls": [["Email/set", write, "0"]]}),
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(
            alone["methodResponses"][0][1]["type"], "serverUnavailable",
            "{alone}"
        );
    }
}

#[tokio::test]
async fn reads_from_the_mirror_go_on_while_the_upstream_is_down() {
    let (upstream, proxy, ann, ids) = upstream_and_proxy().await;
    mirror_synced(&upstream, &proxy, &ann).await;
    let get = json!({"accountId": ann.account_id, "ids": ids, "properties": ["subject"]});
    let before = BeforeOutage::ask(&proxy, &ann, json!([["Email/get", get, "0"]])).await;
    assert_eq!(
        before.answers[0][1]["list"].as_array().unwrap().len(),
        ids.len()
    );
    drop(upstream);
    let update = json!({"accountId": ann.account_id,
        "update": {ids[0].clone(): {"keywords/$flagged": true}}});
    before
        .assert_answered_while_down(&proxy, &ann, &update)
        .await;
}

//! The JMAP proxy in front of a real Cyrus IMAP 3.6's JMAP (issue 45),
//! started here from Debian's unpacked packages (`tests/common/cyrus.rs`):
//! Cyrus's event source gives no stream (`204 No Content`: Debian builds
//! it without WebSockets, so its push never turns on), and the proxy's
//! mirror polls instead while a client is active. Skipped without
//! `FASTVIEW_TEST_CYRUS_ROOT`, unless `FASTVIEW_TEST_REQUIRE` names `cyrus`.

use std::time::{Duration, Instant};

use fastview::app::ServeOptions;
use fastview::proxy::jmap::mirror::Census;
use fastview::proxy::jmap::{JmapUpstreamOptions, JmapUpstreamUrl};
use fastview::proxy::{Proxy, ProxyOptions};
use serde_json::{Value, json};

use crate::support::cyrus::Cyrus;
use crate::support::{PASSWORD, TestAccount, TestApp, spawn_in_front_of};
use crate::upstream_jmap::BeforeOutage;

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
        let (name, arguments) = self.call(method, arguments).await;
        assert_eq!(name, method, "{arguments}");
        arguments
    }

    /// One call: the response's name and arguments.
    async fn call(&self, method: &str, arguments: Value) -> (String, Value) {
        let responses = self.calls(json!([[method, arguments, "0"]])).await;
        let name = responses[0][0].as_str().unwrap_or_default();
        (name.to_string(), responses[0][1].clone())
    }

    /// A request of `method_calls`: its method responses.
    async fn calls(&self, method_calls: Value) -> Vec<Value> {
        let body = json!({"using": USING, "methodCalls": method_calls});
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
        answer["methodResponses"]
            .as_array()
            .cloned()
            .unwrap_or_default()
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

/// The proxy's count of requests it forwarded whose first call is `method`.
async fn forwarded_calls(proxy: &TestApp, method: &str) -> f64 {
    proxy
        .metric(&format!(
            "fastview_upstream_round_trips_total{{method=\"{method}\",command=\"api\"}}"
        ))
        .await
}

/// The webmail's list view: the inbox, newest first, 30 at a time.
fn list_view(account: &str, inbox: &str) -> Value {
    json!({"accountId": account, "filter": {"inMailbox": inbox},
        "sort": [{"property": "receivedAt", "isAscending": false}], "limit": 30})
}

/// A proxy in front of `cyrus` whose mirror of [`ANN`]'s account is at
/// Cyrus's Email state with a complete census (the account and its inbox
/// returned).
async fn mirrored(cyrus: &Cyrus, direct: &Direct) -> (TestApp, TestAccount, String) {
    let proxy = proxy_in_front_of(cyrus, |_| {}).await;
    let ann = login(&proxy).await;
    let account = ann.account_id.clone();
    let state = direct
        .call1("Email/get", json!({"accountId": account, "ids": []}))
        .await["state"]
        .clone();
    until("the mirror's census at Cyrus's state", async || {
        let census = mirror_census(&proxy, &account)?;
        (mirror_state(&proxy, &account).as_deref() == state.as_str() && census.complete)
            .then_some(())
    })
    .await;
    let inbox = direct
        .call1(
            "Mailbox/query",
            json!({"accountId": account, "filter": {"role": "inbox"}}),
        )
        .await["ids"][0]
        .as_str()
        .unwrap()
        .to_string();
    (proxy, ann, inbox)
}

/// A Cyrus whose [`ANN`] has `mail` in her INBOX, Cyrus's JMAP called
/// directly, and [`mirrored`]'s proxy, account and inbox; `None` without a
/// Cyrus (the test is skipped). The Cyrus is returned to keep it running.
async fn cyrus_mirrored(mail: &[Vec<u8>]) -> Option<(Cyrus, Direct, TestApp, TestAccount, String)> {
    let cyrus = Cyrus::start(&[(ANN, PASSWORD)])?;
    cyrus.append((ANN, PASSWORD), "INBOX", mail, "", BASE_TIME);
    let direct = Direct::new(&cyrus).await;
    let (proxy, ann, inbox) = mirrored(&cyrus, &direct).await;
    Some((cyrus, direct, proxy, ann, inbox))
}

/// The census of the proxy's mirror of `account` at its state, if any.
fn mirror_census(proxy: &TestApp, account: &str) -> Option<std::sync::Arc<Census>> {
    let Some(Proxy::Jmap(jmap_proxy)) = &proxy.proxy else {
        panic!("a JMAP proxy");
    };
    jmap_proxy.mirror.as_deref()?.ready(account)?.census
}

/// Asks the list view through the proxy until it is answered without a
/// forwarded Email/query (its shape compared with Cyrus's answer at the
/// mirror's state), then five times more: none forwarded. Returns the last
/// answer.
async fn list_view_answered_here(proxy: &TestApp, ann: &TestAccount, query: &Value) -> Value {
    until("a list view answered by the mirror", async || {
        let before = forwarded_calls(proxy, "Email/query").await;
        proxy.call1(ann, "Email/query", query.clone()).await;
        (forwarded_calls(proxy, "Email/query").await == before).then_some(())
    })
    .await;
    let forwarded = forwarded_calls(proxy, "Email/query").await;
    let mut answer = Value::Null;
    for _ in 0..5 {
        answer = proxy.call1(ann, "Email/query", query.clone()).await;
    }
    assert_eq!(forwarded_calls(proxy, "Email/query").await, forwarded);
    answer
}

/// Cyrus's queryState is not its Email state (`5:0` beside `5`), so the
/// mirror verified the list view's shape by comparing Cyrus's answer
/// without it, at a moment it knew Cyrus's Email state (an Email/get of no
/// ids on either side of the forwarded query), and answers the list views
/// after that itself: the same ids, position and canCalculateChanges as
/// Cyrus, with a query state the proxy minted, never Cyrus's.
#[tokio::test]
async fn list_views_in_front_of_cyrus_are_answered_by_the_mirror_with_minted_query_states() {
    let Some((_cyrus, direct, proxy, ann, inbox)) = cyrus_mirrored(&messages(5)).await else {
        return;
    };
    let account = ann.account_id.clone();
    let census = mirror_census(&proxy, &account).unwrap();
    assert!(census.mints_query_states, "{census:?}");

    let query = list_view(&account, &inbox);
    let at_cyrus = direct.call1("Email/query", query.clone()).await;
    let email_state = direct
        .call1("Email/get", json!({"accountId": account, "ids": []}))
        .await["state"]
        .clone();
    assert_eq!(
        at_cyrus["queryState"],
        format!("{}:0", email_state.as_str().unwrap())
    );
    assert_eq!(at_cyrus["ids"].as_array().unwrap().len(), 5, "{at_cyrus}");
    // Cyrus answers besides what RFC 8620 §5.5 names: not compared.
    assert_eq!(at_cyrus["total"], 5);
    assert_eq!(at_cyrus["collapseThreads"], false);

    let here = list_view_answered_here(&proxy, &ann, &query).await;
    for name in ["accountId", "ids", "position", "canCalculateChanges"] {
        assert_eq!(here[name], at_cyrus[name], "{name}: {here}");
    }
    let minted = here["queryState"].as_str().unwrap();
    assert!(minted.starts_with("fastview~mirror~"), "{here}");
    assert_eq!(here.get("total"), None, "not asked: {here}");
    // The second page too, and a total asked: other shapes, each forwarded
    // once, then the mirror's.
    let mut counted = query.clone();
    counted["calculateTotal"] = json!(true);
    counted["limit"] = json!(2);
    let here = list_view_answered_here(&proxy, &ann, &counted).await;
    assert_eq!(here["total"], 5);
    assert_eq!(here["ids"], json!(at_cyrus["ids"].as_array().unwrap()[..2]));
}

/// A query state the proxy minted gives Email/queryChanges through the
/// proxy (answered from the mirror, the ids Cyrus's), and
/// `cannotCalculateChanges` at Cyrus itself, so a client that goes direct
/// queries again (RFC 8620 §5.6); changes that destroyed an email (whose
/// Cyrus id the mirror no longer has) are `cannotCalculateChanges` through
/// the proxy too.
#[tokio::test]
async fn a_minted_query_state_gives_query_changes_through_the_proxy_and_not_at_cyrus() {
    let Some((cyrus, direct, proxy, ann, inbox)) = cyrus_mirrored(&messages(4)).await else {
        return;
    };
    let account = ann.account_id.clone();
    let query = list_view(&account, &inbox);
    let here = list_view_answered_here(&proxy, &ann, &query).await;
    let minted = here["queryState"].clone();
    let since = |state: &Value| {
        let mut changes = query.clone();
        changes.as_object_mut().unwrap().remove("limit");
        changes["sinceQueryState"] = state.clone();
        changes
    };

    // Nothing changed: the same state back, through the proxy only.
    let unchanged = proxy
        .call1(&ann, "Email/queryChanges", since(&minted))
        .await;
    assert_eq!(unchanged["accountId"], account.as_str());
    assert_eq!(unchanged["oldQueryState"], minted);
    assert_eq!(unchanged["newQueryState"], minted);
    assert_eq!(unchanged["removed"], json!([]));
    assert_eq!(unchanged["added"], json!([]));
    let (name, refused) = direct.call("Email/queryChanges", since(&minted)).await;
    assert_eq!(
        (name.as_str(), &refused["type"]),
        ("error", &json!("cannotCalculateChanges")),
        "{refused}"
    );

    // A new message at Cyrus: added at the top, under Cyrus's id.
    cyrus.append(
        (ANN, PASSWORD),
        "INBOX",
        &[b"From: Bob <bob@example.com>\r\nSubject: New\r\n\r\nNew.\r\n".to_vec()],
        "",
        BASE_TIME + 100,
    );
    let newest = direct.call1("Email/query", query.clone()).await["ids"][0].clone();
    let changes = until("the new message in the changes", async || {
        let changes = proxy
            .call1(&ann, "Email/queryChanges", since(&minted))
            .await;
        (changes["newQueryState"] != minted).then_some(changes)
    })
    .await;
    assert_eq!(
        changes["added"],
        json!([{"id": newest, "index": 0}]),
        "{changes}"
    );
    assert_eq!(changes["removed"], json!([]), "{changes}");
    let next = changes["newQueryState"].clone();
    assert!(next.as_str().unwrap().starts_with("fastview~mirror~"));
    let again = proxy.call1(&ann, "Email/query", query.clone()).await;
    assert_eq!(again["queryState"], next);
    assert_eq!(again["ids"][0], newest);

    // An email destroyed at Cyrus: its id is gone from the mirror.
    let destroyed = direct
        .call1(
            "Email/set",
            json!({"accountId": account, "destroy": [newest]}),
        )
        .await;
    assert_eq!(destroyed["destroyed"], json!([newest]), "{destroyed}");
    let refused = until("the destruction in the mirror", async || {
        let responses = proxy
            .call(&ann, json!([["Email/queryChanges", since(&next)]]))
            .await;
        (responses[0][0] == "error").then(|| responses[0][1].clone())
    })
    .await;
    assert_eq!(refused["type"], "cannotCalculateChanges", "{refused}");
}

/// A multipart/related message whose HTML shows its image by Content-ID,
/// and a subject in GB2312 under Python's label for it (`eucgb2312_cn`).
fn rendered_differently() -> Vec<Vec<u8>> {
    let related = b"From: Kate <kate@example.com>\r\nTo: ann@example.com\r\n\
        Subject: Image embedded\r\nMessage-ID: <related-1@example.com>\r\n\
        Date: Tue, 14 Nov 2023 22:13:20 +0000\r\nMIME-Version: 1.0\r\n\
        Content-Type: multipart/related; boundary=\"r\"\r\n\r\n\
        --r\r\nContent-Type: text/html; charset=utf-8\r\n\r\n\
        <html><body><p>See the image below:</p><img src=\"cid:image1@example.com\"></body></html>\r\n\
        --r\r\nContent-Type: image/png\r\nContent-ID: <image1@example.com>\r\n\
        Content-Disposition: inline\r\nContent-Transfer-Encoding: base64\r\n\r\n\
        iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==\r\n\
        --r--\r\n";
    let labelled = b"From: Li <li@example.com>\r\nTo: ann@example.com\r\n\
        Subject: =?eucgb2312_cn?q?=D6=D0=CE=C4?= notes\r\nMessage-ID: <labelled-1@example.com>\r\n\
        Date: Tue, 14 Nov 2023 22:13:21 +0000\r\n\r\nNotes.\r\n";
    vec![related.to_vec(), labelled.to_vec()]
}

/// Whose rendering stands (ADR 0009): `hasAttachment` and `preview`, which
/// RFC 8621 §4.1.4 leaves to the server's judgement, are Cyrus's (it
/// counts an image shown inline as an attachment, Fastview does not), so a
/// client sees one value whichever of the two answers, and the value a
/// client going to Cyrus directly sees; a header's text is the mirror's, decoded
/// from the same octets (Cyrus gives U+FFFD for a charset label it does not
/// know).
#[tokio::test]
async fn the_mirror_answers_cyruss_heuristics_and_its_own_header_text() {
    let Some((_cyrus, direct, proxy, ann, _)) = cyrus_mirrored(&rendered_differently()).await
    else {
        return;
    };
    let account = ann.account_id.clone();
    let ids = direct
        .call1(
            "Email/query",
            json!({"accountId": account, "sort": [{"property": "receivedAt", "isAscending": true}]}),
        )
        .await["ids"]
        .clone();
    let get = json!({"accountId": account, "ids": ids,
        "properties": ["hasAttachment", "preview", "subject"]});
    let at_cyrus = direct.call1("Email/get", get.clone()).await["list"].clone();
    assert_eq!(at_cyrus[0]["hasAttachment"], true, "{at_cyrus}");
    assert_ne!(at_cyrus[1]["subject"], "中文 notes", "{at_cyrus}");

    let before = forwarded_email_gets(&proxy).await;
    let here = proxy.call1(&ann, "Email/get", get).await["list"].clone();
    assert_eq!(
        forwarded_email_gets(&proxy).await,
        before,
        "the mirror's answer"
    );
    for n in 0..2 {
        assert_eq!(
            here[n]["hasAttachment"], at_cyrus[n]["hasAttachment"],
            "{here}"
        );
        assert_eq!(here[n]["preview"], at_cyrus[n]["preview"], "{here}");
    }
    assert_eq!(here[0]["subject"], "Image embedded");
    assert_eq!(here[1]["subject"], "中文 notes");
}

/// Cyrus numbers parts as IMAP sections (`1`, `2`), Fastview by leaf
/// index: the mirror keeps a part map for mail the two split alike, so the
/// opened message (body structure, part lists and body values) is the
/// mirror's answer with Cyrus's partIds and blobIds, not a forwarded call.
#[tokio::test]
async fn the_opened_message_is_the_mirrors_with_cyruss_part_names() {
    let opened = b"From: Bob <bob@example.com>\r\nTo: ann@example.com\r\n\
        Subject: Report\r\nMessage-ID: <report-1@example.com>\r\n\
        Date: Tue, 14 Nov 2023 22:13:20 +0000\r\nMIME-Version: 1.0\r\n\
        Content-Type: multipart/mixed; boundary=\"m\"\r\n\r\n\
        --m\r\nContent-Type: multipart/alternative; boundary=\"a\"\r\n\r\n\
        --a\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nThe report, caf\xc3\xa9.\r\n\
        --a\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>The report.</p>\r\n\
        --a--\r\n--m\r\nContent-Type: text/csv; name=\"r.csv\"\r\n\
        Content-Disposition: attachment; filename=\"r.csv\"\r\n\r\na,b\r\n1,2\r\n--m--\r\n";
    let Some((_cyrus, direct, proxy, ann, _)) = cyrus_mirrored(&[opened.to_vec()]).await else {
        return;
    };
    let account = ann.account_id.clone();
    let ids = direct
        .call1("Email/query", json!({"accountId": account}))
        .await["ids"]
        .clone();
    let get = json!({"accountId": account, "ids": ids,
        "properties": ["bodyStructure", "textBody", "htmlBody", "attachments", "bodyValues"],
        "bodyProperties": ["partId", "blobId", "type", "subParts"],
        "fetchAllBodyValues": true});
    let at_cyrus = direct.call1("Email/get", get.clone()).await["list"][0].clone();
    let structure = &at_cyrus["bodyStructure"];
    assert_eq!(
        structure["subParts"][0]["subParts"][0]["partId"], "1.1",
        "{at_cyrus}"
    );

    let before = forwarded_email_gets(&proxy).await;
    let here = proxy.call1(&ann, "Email/get", get).await["list"][0].clone();
    assert_eq!(
        forwarded_email_gets(&proxy).await,
        before,
        "the mirror's answer"
    );
    // Cyrus writes a leaf's subParts as `[]`; RFC 8621 §4.1.4 and the
    // mirror, null (the mirror's rendering stands: ADR 0009).
    let mut at_cyrus = at_cyrus;
    leaves_without_sub_parts(&mut at_cyrus);
    for property in [
        "bodyStructure",
        "textBody",
        "htmlBody",
        "attachments",
        "bodyValues",
    ] {
        assert_eq!(here[property], at_cyrus[property], "{property}: {here}");
    }
    assert_eq!(here["bodyValues"]["1.1"]["value"], "The report, café.");
}

/// Every `subParts: []` in `value` made null.
fn leaves_without_sub_parts(value: &mut Value) {
    match value {
        Value::Object(object) => {
            if object.get("subParts") == Some(&json!([])) {
                object.insert("subParts".into(), Value::Null);
            }
            object.values_mut().for_each(leaves_without_sub_parts);
        }
        Value::Array(items) => items.iter_mut().for_each(leaves_without_sub_parts),
        _ => {}
    }
}

/// Cyrus lists a thread asked twice twice (RFC 8620 §5.1 says once): the
/// mirror learns that from the first Thread/get with a repeated id, as it
/// learns a shape, and answers such calls after it as Cyrus does, instead
/// of forwarding Thread/get for good.
#[tokio::test]
async fn thread_get_with_repeated_ids_is_answered_as_cyrus_answers_it() {
    let mut mail = messages(2);
    mail.push(
        b"From: Ann <ann@example.com>\r\nTo: bob@example.com\r\nSubject: Re: Message 0\r\n\
          Message-ID: <reply-0@example.com>\r\nIn-Reply-To: <lag-0@example.com>\r\n\
          References: <lag-0@example.com>\r\nDate: Tue, 14 Nov 2023 23:13:20 +0000\r\n\r\nReply.\r\n"
            .to_vec(),
    );
    let Some((_cyrus, direct, proxy, ann, _)) = cyrus_mirrored(&mail).await else {
        return;
    };
    let account = ann.account_id.clone();
    let ids = direct
        .call1(
            "Email/query",
            json!({"accountId": account, "sort": [{"property": "receivedAt", "isAscending": true}]}),
        )
        .await["ids"]
        .clone();
    let threads = direct
        .call1(
            "Email/get",
            json!({"accountId": account, "ids": ids, "properties": ["threadId"]}),
        )
        .await["list"]
        .clone();
    let (thread, other) = (&threads[0]["threadId"], &threads[1]["threadId"]);
    assert_eq!(
        threads[2]["threadId"], *thread,
        "the reply joins: {threads}"
    );

    let repeated = json!({"accountId": account, "ids": [thread, thread, other]});
    let at_cyrus = direct.call1("Thread/get", repeated.clone()).await;
    assert_eq!(
        at_cyrus["list"],
        json!([
            {"id": thread, "emailIds": [ids[0], ids[2]]},
            {"id": thread, "emailIds": [ids[0], ids[2]]},
            {"id": other, "emailIds": [ids[1]]},
        ]),
        "{at_cyrus}"
    );
    assert_eq!(at_cyrus["notFound"], json!([]));

    // Forwarded once and compared; then the mirror's, as Cyrus answers.
    let before = forwarded_calls(&proxy, "Thread/get").await;
    assert_eq!(
        proxy.call1(&ann, "Thread/get", repeated.clone()).await,
        at_cyrus
    );
    assert_eq!(forwarded_calls(&proxy, "Thread/get").await, before + 1.0);
    for _ in 0..3 {
        assert_eq!(
            proxy.call1(&ann, "Thread/get", repeated.clone()).await,
            at_cyrus
        );
    }
    assert_eq!(forwarded_calls(&proxy, "Thread/get").await, before + 1.0);
    // Without a repeat it is its own shape: forwarded once, then the mirror's.
    let once = json!({"accountId": account, "ids": [other, thread]});
    let at_cyrus = direct.call1("Thread/get", once.clone()).await;
    for _ in 0..3 {
        assert_eq!(
            proxy.call1(&ann, "Thread/get", once.clone()).await,
            at_cyrus
        );
    }
    assert_eq!(forwarded_calls(&proxy, "Thread/get").await, before + 2.0);
}

/// Golden fixtures by name: each message with CRLF line ends (as IMAP
/// carries it) and the subject its `.json` gives.
fn fixtures(names: &[&str]) -> Vec<(Vec<u8>, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/golden");
    names
        .iter()
        .map(|name| {
            let raw = std::fs::read(dir.join(format!("{name}.eml"))).unwrap();
            let golden: Value =
                serde_json::from_slice(&std::fs::read(dir.join(format!("{name}.json"))).unwrap())
                    .unwrap();
            let subject = golden["subject"].as_str().unwrap().to_string();
            (crate::support::crlf(&raw), subject)
        })
        .collect()
}

/// Email/query (receivedAt ascending) and Email/get of what it finds.
fn query_and_get(account_id: &str) -> Value {
    json!([
        ["Email/query", {"accountId": account_id,
            "sort": [{"property": "receivedAt", "isAscending": true}]}, "0"],
        ["Email/get", {"accountId": account_id,
            "#ids": {"resultOf": "0", "name": "Email/query", "path": "/ids"},
            "properties": ["id", "subject", "mailboxIds", "keywords", "receivedAt"]}, "1"]
    ])
}

#[tokio::test]
async fn the_jmap_proxy_in_front_of_cyrus_answers_cyrus_ids() {
    let Some(cyrus) = Cyrus::start(&[(ANN, PASSWORD)]) else {
        return;
    };
    let inbox = fixtures(&[
        "plain_ascii",
        "alternative",
        "message_ids",
        "legacy_iso2022jp",
    ]);
    let raw: Vec<Vec<u8>> = inbox.iter().map(|(raw, _)| raw.clone()).collect();
    cyrus.append((ANN, PASSWORD), "INBOX", &raw, "", BASE_TIME);
    let (direct_session, _) = cyrus.session(ANN, PASSWORD).await;

    let proxy = proxy_in_front_of(&cyrus, |_| {}).await;
    let refused = proxy
        .get_as(format!("{}/jmap/session", proxy.base), ANN, "wrong")
        .await;
    assert_eq!(refused.status(), 401);
    let ann = login(&proxy).await;
    let session = proxy.session(&ann).await;
    assert_eq!(
        session["primaryAccounts"],
        direct_session["primaryAccounts"]
    );
    assert_eq!(session["username"], ANN);
    assert_eq!(session["apiUrl"], format!("{}/jmap/api", proxy.base));

    let direct = Direct::new(&cyrus)
        .await
        .calls(query_and_get(&ann.account_id))
        .await;
    let proxied = proxy.call(&ann, query_and_get(&ann.account_id)).await;
    assert_eq!(proxied[0][1]["ids"], direct[0][1]["ids"]);
    let ids = direct[0][1]["ids"].as_array().unwrap();
    assert_eq!(ids.len(), inbox.len(), "{direct:#?}");
    assert_eq!(proxied[1][1]["list"], direct[1][1]["list"]);
    let subjects: Vec<&Value> = proxied[1][1]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|email| &email["subject"])
        .collect();
    let expected: Vec<Value> = inbox.iter().map(|(_, subject)| json!(subject)).collect();
    assert_eq!(subjects, expected.iter().collect::<Vec<_>>());
}

/// Issue 45 item 2 in front of Cyrus's JMAP: while Cyrus is stopped, the
/// list view (an Email/query the mirror answers, and Email/get of its ids)
/// goes on from the mirror, a write is serverUnavailable and the session
/// says nothing false (`BeforeOutage`, the Fastview upstream's check too);
/// once Cyrus is back, a write goes through within seconds.
#[tokio::test]
async fn list_views_from_the_mirror_go_on_while_cyrus_is_down_and_writes_wait_for_its_return() {
    let Some((cyrus, direct, proxy, ann, inbox)) = cyrus_mirrored(&messages(3)).await else {
        return;
    };
    let account = ann.account_id.clone();
    let query = list_view(&account, &inbox);
    list_view_answered_here(&proxy, &ann, &query).await;
    let reads = json!([
        ["Email/query", query, "0"],
        ["Email/get", {"accountId": account,
            "#ids": {"resultOf": "0", "name": "Email/query", "path": "/ids"},
            "properties": ["subject", "keywords"]}, "1"]
    ]);
    let before = BeforeOutage::ask(&proxy, &ann, reads).await;
    assert_eq!(before.answers[1][1]["list"].as_array().unwrap().len(), 3);
    let first = before.answers[0][1]["ids"][0].as_str().unwrap().to_string();
    let update = json!({"accountId": account,
        "update": {first.clone(): {"keywords/$flagged": true}}});

    cyrus.stop();
    before
        .assert_answered_while_down(&proxy, &ann, &update)
        .await;

    cyrus.start_again();
    let back = Instant::now();
    let write = json!({"using": USING, "methodCalls": [["Email/set", update, "0"]]});
    until("the write once Cyrus is back", async || {
        let (status, answer) = proxy.api_raw(&ann, &write).await;
        let updated = &answer["methodResponses"][0][1]["updated"];
        (status == 200 && updated.get(&first).is_some()).then_some(())
    })
    .await;
    assert!(
        back.elapsed() < Duration::from_secs(10),
        "{:?}",
        back.elapsed()
    );
    let at_cyrus = direct
        .call1(
            "Email/get",
            json!({"accountId": account, "ids": [first], "properties": ["keywords"]}),
        )
        .await;
    assert_eq!(
        at_cyrus["list"][0]["keywords"]["$flagged"], true,
        "{at_cyrus}"
    );
}

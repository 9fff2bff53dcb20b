//! Sending (issue 17, RFC 8621 §7): a draft created and submitted in one
//! request reaches a local recipient's inbox (Bcc gone, a Received field
//! on top, one copy for all the local recipients' octets), the sender's copy moves to Sent without `$draft` through the
//! implicit Email/set, and the submission reads back through /get,
//! /changes and /query; every SetError of §7.5 where it applies; a delivery
//! that failed is retried from the queue and delivered once.

use serde_json::{Value, json};

use crate::delivery_queue::{nothing_to_take, queue_delivery};
use fastview::mail::delivery;

use crate::support::{TestAccount, TestApp, spawn_with_accounts};

const SUBMISSION: &str = "urn:ietf:params:jmap:submission";

async fn calls(app: &TestApp, user: &TestAccount, calls: Value) -> Vec<Value> {
    app.call_using(user, &[SUBMISSION], calls).await
}

/// The id of `user`'s own Identity (RFC 8621 §6).
pub(crate) async fn own_identity(app: &TestApp, user: &TestAccount) -> String {
    let got = calls(
        app,
        user,
        json!([["Identity/get", {"accountId": user.account_id}]]),
    )
    .await;
    got[0][1]["list"][0]["id"].as_str().unwrap().to_string()
}

/// A draft in Drafts from `from` to `to`, with `bcc`.
fn draft(drafts: &str, from: &str, to: &str, bcc: &str, subject: &str) -> Value {
    json!({
        "mailboxIds": {drafts: true},
        "keywords": {"$draft": true},
        "from": [{"name": "Ann", "email": from}],
        "to": [{"email": to}],
        "bcc": [{"email": bcc}],
        "subject": subject,
        "bodyValues": {"1": {"value": "See you at noon."}},
        "textBody": [{"partId": "1", "type": "text/plain"}],
    })
}

#[tokio::test]
async fn a_draft_is_sent_to_a_local_account_and_filed_in_sent() {
    let (app, [ann, bob]) = spawn_with_accounts(["ann@example.com", "bob@example.com"]).await;
    let output = app
        .cli()
        .args([
            "account",
            "alias",
            "add",
            "bob@example.com",
            "robert@example.com",
        ])
        .output()
        .unwrap();
    assert!(output.status.success());
    let (drafts, sent) = (
        app.mailbox_with_role(&ann, "drafts").await,
        app.mailbox_with_role(&ann, "sent").await,
    );
    let identity = own_identity(&app, &ann).await;
    let before = calls(
        &app,
        &ann,
        json!([["EmailSubmission/get", {"accountId": ann.account_id, "ids": []}]]),
    )
    .await[0][1]["state"]
        .clone();
    let bob_before = app.state(&bob, "Email").await;

    let responses = calls(
        &app,
        &ann,
        json!([
            ["Email/set", {"accountId": ann.account_id, "create": {
                "d": draft(&drafts, "ann@example.com", "bob@example.com", "robert@example.com", "Lunch")}}],
            ["EmailSubmission/set", {"accountId": ann.account_id,
                "create": {"send": {"identityId": identity, "emailId": "#d"}},
                "onSuccessUpdateEmail": {"#send": {
                    "keywords/$draft": null,
                    format!("mailboxIds/{drafts}"): null,
                    format!("mailboxIds/{sent}"): true}}}],
        ]),
    )
    .await;
    assert_eq!(responses.len(), 3, "{responses:?}");
    let email_id = responses[0][1]["created"]["d"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(responses[1][0], "EmailSubmission/set");
    let created = responses[1][1]["created"]["send"].clone();
    assert_eq!(created["undoStatus"], "final", "{created}");
    let yes = json!({"smtpReply": "250 2.1.5 Delivered to a mailbox on this server",
        "delivered": "yes", "displayed": "unknown"});
    assert_eq!(
        created["deliveryStatus"],
        json!({"bob@example.com": yes, "robert@example.com": yes})
    );
    // The implicit Email/set, answered under the same call id.
    assert_eq!(responses[2][0], "Email/set");
    assert_eq!(responses[2][2], responses[1][2]);
    assert_eq!(responses[2][1]["updated"], json!({email_id.clone(): null}));

    let got = app
        .email_get(&ann, &[&email_id], &["mailboxIds", "keywords"])
        .await;
    assert_eq!(got["list"][0]["mailboxIds"], json!({sent.clone(): true}));
    assert_eq!(got["list"][0]["keywords"], json!({}));

    // Bob's inbox has one copy for both his addresses (the same octets: the
    // Received field names the submission, not the recipient, so the Bcc
    // address is in no copy): a Received field on top, no Bcc, the rest as
    // Ann wrote it.
    let changes = app
        .call_in(&bob, "Email/changes", json!({"sinceState": bob_before}))
        .await;
    let arrived = changes["created"].as_array().unwrap().clone();
    assert_eq!(arrived.len(), 1, "{changes}");
    let got = app
        .email_get(
            &bob,
            &arrived,
            &[
                "subject",
                "mailboxIds",
                "from",
                "bcc",
                "blobId",
                "header:Received",
            ],
        )
        .await;
    for email in got["list"].as_array().unwrap() {
        assert_eq!(email["subject"], "Lunch");
        assert_eq!(email["mailboxIds"], json!({bob.inbox.clone(): true}));
        assert_eq!(
            email["from"],
            json!([{"name": "Ann", "email": "ann@example.com"}])
        );
        assert_eq!(email["bcc"], Value::Null);
        let received = email["header:Received"].as_str().unwrap();
        assert!(
            received.starts_with(" by fastview (Fastview) with JMAP id "),
            "{received}"
        );
        assert!(!received.contains('@'), "{received}");
        let (status, raw) = app
            .download(&bob, email["blobId"].as_str().unwrap(), "m.eml")
            .await;
        assert_eq!(status, 200);
        let raw = String::from_utf8(raw).unwrap();
        assert!(raw.starts_with("Received: by fastview"), "{raw}");
        assert!(!raw.to_lowercase().contains("\nbcc:"), "{raw}");
        assert!(!raw.contains("robert@"), "{raw}");
        assert!(raw.contains("\r\nSubject: Lunch\r\n"), "{raw}");
    }

    // The submission reads back.
    let submission = created["id"].as_str().unwrap().to_string();
    let responses = calls(
        &app,
        &ann,
        json!([
            ["EmailSubmission/get", {"accountId": ann.account_id, "ids": [submission, "s999999"]}],
            ["EmailSubmission/changes", {"accountId": ann.account_id, "sinceState": before}],
            ["EmailSubmission/query", {"accountId": ann.account_id,
                "filter": {"emailIds": [email_id], "undoStatus": "final"},
                "sort": [{"property": "sentAt", "isAscending": false}], "calculateTotal": true}],
            ["EmailSubmission/query", {"accountId": ann.account_id,
                "filter": {"identityIds": ["i999999"]}}],
        ]),
    )
    .await;
    let record = &responses[0][1]["list"][0];
    assert_eq!(record["identityId"], json!(identity));
    assert_eq!(record["emailId"], json!(email_id));
    assert_eq!(
        record["envelope"],
        json!({"mailFrom": {"email": "ann@example.com", "parameters": null},
            "rcptTo": [{"email": "bob@example.com", "parameters": null},
                {"email": "robert@example.com", "parameters": null}]})
    );
    assert_eq!(record["deliveryStatus"], created["deliveryStatus"]);
    assert_eq!(responses[0][1]["notFound"], json!(["s999999"]));
    assert_eq!(responses[1][1]["created"], json!([submission]));
    assert_eq!(responses[2][1]["ids"], json!([submission]));
    assert_eq!(responses[2][1]["total"], 1);
    assert_eq!(responses[3][1]["ids"], json!([]));

    // Sent at once: it cannot be canceled. Destroying the record leaves
    // the mail where it is.
    let responses = calls(
        &app,
        &ann,
        json!([["EmailSubmission/set", {"accountId": ann.account_id,
            "update": {submission.clone(): {"undoStatus": "canceled"}}}],
            ["EmailSubmission/set", {"accountId": ann.account_id, "destroy": [submission]}],
            ["EmailSubmission/get", {"accountId": ann.account_id, "ids": [submission]}]]),
    )
    .await;
    assert_eq!(
        responses[0][1]["notUpdated"][&submission]["type"],
        "cannotUnsend"
    );
    assert_eq!(responses[1][1]["destroyed"], json!([submission]));
    assert_eq!(responses[2][1]["notFound"], json!([submission]));
}

#[tokio::test]
async fn a_submission_that_cannot_be_sent_says_why() {
    let (app, [ann]) = spawn_with_accounts(["ann@example.com"]).await;
    app.account("bob@example.com").await;
    let drafts = app.mailbox_with_role(&ann, "drafts").await;
    let identity = own_identity(&app, &ann).await;
    let responses = calls(
        &app,
        &ann,
        json!([
            ["Email/set", {"accountId": ann.account_id, "create": {
                "ok": draft(&drafts, "ann@example.com", "bob@example.com", "bob@example.com", "ok"),
                "remote": draft(&drafts, "ann@example.com", "bob@example.com", "zed@elsewhere.example", "r"),
                "forged": draft(&drafts, "boss@example.com", "bob@example.com", "bob@example.com", "f"),
            }}],
            ["EmailSubmission/set", {"accountId": ann.account_id, "create": {
                "noIdentity": {"identityId": "i999999", "emailId": "#ok"},
                "noEmail": {"identityId": identity, "emailId": "e999999"},
                "remote": {"identityId": identity, "emailId": "#remote"},
                "forged": {"identityId": identity, "emailId": "#forged"},
                "mailFrom": {"identityId": identity, "emailId": "#ok", "envelope": {
                    "mailFrom": {"email": "boss@example.com"},
                    "rcptTo": [{"email": "bob@example.com"}]}},
                "nobody": {"identityId": identity, "emailId": "#ok", "envelope": {
                    "mailFrom": {"email": "ann@example.com"}, "rcptTo": []}},
                "many": {"identityId": identity, "emailId": "#ok", "envelope": {
                    "mailFrom": {"email": "ann@example.com"},
                    "rcptTo": (0..101).map(|i| json!({"email": format!("u{i}@example.com")})).collect::<Vec<_>>()}},
                "serverSet": {"identityId": identity, "emailId": "#ok", "undoStatus": "pending"},
            }}],
        ]),
    )
    .await;
    let not_created = &responses[1][1]["notCreated"];
    assert_eq!(responses[1][1]["created"], Value::Null, "{not_created}");
    let kind = |name: &str| not_created[name]["type"].as_str().unwrap().to_string();
    assert_eq!(kind("noIdentity"), "invalidProperties");
    assert_eq!(
        not_created["noIdentity"]["properties"],
        json!(["identityId"])
    );
    assert_eq!(not_created["noEmail"]["properties"], json!(["emailId"]));
    assert_eq!(kind("remote"), "invalidRecipients");
    assert_eq!(
        not_created["remote"]["invalidRecipients"],
        json!(["zed@elsewhere.example"])
    );
    assert_eq!(kind("forged"), "forbiddenFrom");
    assert_eq!(kind("mailFrom"), "forbiddenMailFrom");
    assert_eq!(kind("nobody"), "noRecipients");
    assert_eq!(kind("many"), "tooManyRecipients");
    assert_eq!(not_created["many"]["maxRecipients"], 100);
    assert_eq!(
        not_created["serverSet"]["properties"],
        json!(["undoStatus"])
    );
    // Nothing was sent, so nothing implicit followed.
    assert_eq!(responses.len(), 2);

    // A Sender not the account's is refused like a From; a recipient the
    // envelope names twice (in any case) gets one copy.
    let mut forged_sender = draft(
        &drafts,
        "ann@example.com",
        "bob@example.com",
        "bob@example.com",
        "s",
    );
    forged_sender["sender"] = json!([{"email": "boss@example.com"}]);
    let responses = calls(
        &app,
        &ann,
        json!([
            ["Email/set", {"accountId": ann.account_id, "create": {
                "sender": forged_sender,
                "twice": draft(&drafts, "ann@example.com", "bob@example.com", "bob@example.com", "t"),
            }}],
            ["EmailSubmission/set", {"accountId": ann.account_id, "create": {
                "sender": {"identityId": identity, "emailId": "#sender"},
                "twice": {"identityId": identity, "emailId": "#twice", "envelope": {
                    "mailFrom": {"email": "ann@example.com"},
                    "rcptTo": [{"email": "bob@example.com"}, {"email": "BOB@example.com"}]}},
            }}],
        ]),
    )
    .await;
    assert_eq!(
        responses[1][1]["notCreated"]["sender"]["type"],
        "forbiddenFrom"
    );
    let status = &responses[1][1]["created"]["twice"]["deliveryStatus"];
    assert_eq!(status.as_object().unwrap().len(), 1, "{status}");
}

#[tokio::test]
async fn a_failed_delivery_is_retried_from_the_queue_and_delivered_once() {
    let (app, [ann, bob]) = spawn_with_accounts(["ann@example.com", "bob@example.com"]).await;
    let store = app.app.store.as_ref();
    let message =
        b"From: ann@example.com\r\nTo: bob@example.com\r\nSubject: Later\r\n\r\nhi\r\n".to_vec();
    let blob_id = fastview::blob::blob_id_of(&message);
    let send_at = 1_800_000_000;
    // The message is not in the blob store yet: the first attempt fails.
    let (submission, _) = queue_delivery(
        store,
        ann.id,
        blob_id.clone(),
        &["bob@example.com"],
        send_at,
        json!({"bob@example.com": serde_json::from_str::<Value>(&delivery::queued()).unwrap()})
            .to_string(),
    )
    .await;
    // Held by its maker for ten minutes: not due for anyone else before.
    assert_eq!(
        delivery::deliver_due(store, &app.app.blobs, None, "test", send_at)
            .await
            .unwrap(),
        0
    );
    let taken = store.take_deliveries(send_at + 601, 60, 10).await.unwrap();
    assert_eq!(taken.len(), 1);
    assert_eq!(
        store.take_deliveries(send_at + 602, 60, 10).await.unwrap(),
        vec![]
    );
    delivery::deliver(
        store,
        &app.app.blobs,
        None,
        "test",
        &taken[0],
        send_at + 601,
    )
    .await
    .unwrap();
    // Retried a minute later, not before.
    assert!(nothing_to_take(store, send_at + 640, 60).await);
    app.app.blobs.put(message).await.unwrap();
    let done = delivery::deliver_due(store, &app.app.blobs, None, "test", send_at + 662)
        .await
        .unwrap();
    assert_eq!(done, 1);
    assert_eq!(
        delivery::deliver_due(store, &app.app.blobs, None, "test", send_at + 9_999)
            .await
            .unwrap(),
        0
    );
    let rows = store.submissions(ann.id).await.unwrap();
    let status: Value = serde_json::from_str(
        &rows
            .iter()
            .find(|r| r.id == submission)
            .unwrap()
            .delivery_status,
    )
    .unwrap();
    assert_eq!(status["bob@example.com"]["delivered"], "yes");
    let inbox = app.query_inbox(&bob).await;
    assert_eq!(inbox["ids"].as_array().unwrap().len(), 1, "{inbox}");
}

#[tokio::test]
async fn a_vacation_response_answers_each_sender_once_and_never_a_list() {
    let (app, [ann, bob, carol]) =
        spawn_with_accounts(["ann@example.com", "bob@example.com", "carol@example.com"]).await;
    let set = app
        .call_using(
            &bob,
            &["urn:ietf:params:jmap:vacationresponse"],
            json!([["VacationResponse/set", {"accountId": bob.account_id, "update": {"singleton": {
                "isEnabled": true, "subject": "Away", "textBody": "Back on Monday."}}}]]),
        )
        .await;
    assert_eq!(set[0][1]["updated"], json!({"singleton": null}), "{set:?}");
    let send = |user: TestAccount, list: bool, subject: &'static str| {
        let app = &app;
        async move {
            let drafts = app.mailbox_with_role(&user, "drafts").await;
            let identity = own_identity(app, &user).await;
            let mut email = draft(
                &drafts,
                &user.email,
                "bob@example.com",
                "bob@example.com",
                subject,
            );
            email.as_object_mut().unwrap().remove("bcc");
            if list {
                email["header:List-Id:asText"] = json!("Team <team.example.com>");
            }
            let responses = calls(
                app,
                &user,
                json!([
                    ["Email/set", {"accountId": user.account_id, "create": {"d": email}}],
                    ["EmailSubmission/set", {"accountId": user.account_id,
                        "create": {"s": {"identityId": identity, "emailId": "#d"}}}],
                ]),
            )
            .await;
            assert!(responses[1][1]["created"]["s"].is_object(), "{responses:?}");
        }
    };
    let replies = |user: TestAccount| {
        let app = &app;
        async move {
            let got = app
                .inbox_emails(
                    &user,
                    &[
                        "subject",
                        "from",
                        "header:Auto-Submitted:asText",
                        "inReplyTo",
                        "preview",
                    ],
                )
                .await;
            got["list"].as_array().unwrap().clone()
        }
    };
    send(ann.clone(), false, "Lunch").await;
    send(ann.clone(), false, "Lunch again").await;
    send(carol.clone(), true, "Team news").await;
    let to_ann = replies(ann.clone()).await;
    assert_eq!(to_ann.len(), 1, "{to_ann:?}");
    assert_eq!(to_ann[0]["subject"], "Away");
    assert_eq!(
        to_ann[0]["from"],
        json!([{"name": null, "email": "bob@example.com"}])
    );
    assert_eq!(to_ann[0]["header:Auto-Submitted:asText"], "auto-replied");
    assert_eq!(to_ann[0]["preview"], "Back on Monday.");
    assert!(to_ann[0]["inReplyTo"].is_array(), "{:?}", to_ann[0]);
    assert_eq!(replies(carol.clone()).await.len(), 0);
    send(carol.clone(), false, "Hello").await;
    assert_eq!(replies(carol).await.len(), 1);
    assert_eq!(replies(bob).await.len(), 4);
}

/// Issue 43, item 6: a local recipient's copy is charged to its quota;
/// every local recipient of a submission gets the same octets, stored once
/// (one blob however many recipients); a recipient over its quota gets
/// nothing, is `delivered: "no"`, and the sender gets a bounce.
#[tokio::test]
async fn local_copies_are_stored_once_charged_to_each_recipient_and_bounced_when_full() {
    let (app, [ann]) = spawn_with_accounts(["ann@example.com"]).await;
    let store = app.app.store.clone();
    let mut recipients = Vec::new();
    for name in ["bob", "cat", "dan"] {
        let email = format!("{name}@example.com");
        recipients.push(app.account(&email).await);
        store.set_quota(&email, Some(10 << 20)).await.unwrap();
    }
    let eve = app.account("eve@example.com").await;
    store
        .set_quota("eve@example.com", Some(1_000))
        .await
        .unwrap();
    let drafts = app.mailbox_with_role(&ann, "drafts").await;
    let identity = own_identity(&app, &ann).await;
    let body = "A long letter. ".repeat(4_000);
    let to: Vec<Value> = ["bob", "cat", "dan", "eve"]
        .iter()
        .map(|name| json!({"email": format!("{name}@example.com")}))
        .collect();
    let responses = calls(
        &app,
        &ann,
        json!([
            ["Email/set", {"accountId": ann.account_id, "create": {"d": {
                "mailboxIds": {drafts: true},
                "from": [{"email": "ann@example.com"}],
                "to": to,
                "subject": "News",
                "bodyValues": {"1": {"value": body}},
                "textBody": [{"partId": "1", "type": "text/plain"}],
            }}}],
            ["EmailSubmission/set", {"accountId": ann.account_id,
                "create": {"s": {"identityId": identity, "emailId": "#d"}}}],
        ]),
    )
    .await;
    let status = &responses[1][1]["created"]["s"]["deliveryStatus"];
    for name in ["bob", "cat", "dan"] {
        assert_eq!(
            status[format!("{name}@example.com")]["delivered"],
            "yes",
            "{responses:?}"
        );
    }
    assert_eq!(
        status["eve@example.com"]["delivered"], "no",
        "{responses:?}"
    );
    assert!(
        status["eve@example.com"]["smtpReply"]
            .as_str()
            .unwrap()
            .starts_with("552 5.2.2"),
        "{responses:?}"
    );

    // One copy each, the same octets, charged to each recipient's quota.
    let mut blobs = Vec::new();
    for user in &recipients {
        let inbox = app
            .call1(
                user,
                "Email/query",
                json!({"accountId": user.account_id, "filter": {"inMailbox": user.inbox}}),
            )
            .await;
        let got = app
            .call1(
                user,
                "Email/get",
                json!({"accountId": user.account_id, "ids": inbox["ids"],
                    "properties": ["blobId", "size"]}),
            )
            .await;
        let list = got["list"].as_array().unwrap();
        assert_eq!(list.len(), 1, "{got}");
        let size = list[0]["size"].as_i64().unwrap();
        assert!(size > 60_000, "{got}");
        assert_eq!(store.quota(user.id).await.unwrap().used, size);
        blobs.push(list[0]["blobId"].as_str().unwrap().to_string());
    }
    blobs.dedup();
    assert_eq!(blobs.len(), 1, "{blobs:?}");

    // Eve got nothing and was charged nothing; Ann got the bounce.
    assert_eq!(store.quota(eve.id).await.unwrap().used, 0);
    let eve_inbox = app.query_inbox(&eve).await;
    assert_eq!(eve_inbox["ids"], json!([]));
    let got = app.inbox_emails(&ann, &["subject"]).await;
    assert_eq!(
        got["list"],
        json!([{"id": got["list"][0]["id"], "subject": "Undelivered Mail Returned to Sender"}]),
        "{got}"
    );
}

/// Issue 43, item 5: an account sends at most so many messages and
/// recipients an hour (local recipients too): past the recipients the
/// create is `tooManyRecipients` with the number left as `maxRecipients`,
/// past the messages `overQuota`; nothing is delivered for a refused one,
/// and another account is not held back.
#[tokio::test]
async fn sending_is_bounded_per_account_per_hour() {
    let app = crate::support::spawn_app_with(fastview::app::ServeOptions {
        limits: fastview::jmap::Limits {
            max_sent_messages_per_hour: 2,
            max_sent_recipients_per_hour: 3,
            ..fastview::jmap::Limits::default()
        },
        ..fastview::app::ServeOptions::default()
    })
    .await;
    let ann = app.account("ann@example.com").await;
    let bob = app.account("bob@example.com").await;
    app.account("cat@example.com").await;
    let drafts = app.mailbox_with_role(&ann, "drafts").await;
    let identity = own_identity(&app, &ann).await;
    let send = |to: &'static [&'static str]| {
        let (app, ann, drafts, identity) = (&app, &ann, drafts.clone(), identity.clone());
        async move {
            let to: Vec<Value> = to.iter().map(|a| json!({"email": a})).collect();
            let responses = calls(
                app,
                ann,
                json!([
                    ["Email/set", {"accountId": ann.account_id, "create": {"d": {
                        "mailboxIds": {drafts: true},
                        "from": [{"email": "ann@example.com"}],
                        "to": to,
                        "subject": "Hi",
                        "bodyValues": {"1": {"value": "hi"}},
                        "textBody": [{"partId": "1", "type": "text/plain"}],
                    }}}],
                    ["EmailSubmission/set", {"accountId": ann.account_id,
                        "create": {"s": {"identityId": identity, "emailId": "#d"}}}],
                ]),
            )
            .await;
            responses[1][1].clone()
        }
    };
    let both: &[&str] = &["bob@example.com", "cat@example.com"];
    let first = send(both).await;
    assert!(first["created"]["s"].is_object(), "{first}");
    let second = send(both).await;
    let error = &second["notCreated"]["s"];
    assert_eq!(error["type"], "tooManyRecipients", "{second}");
    assert_eq!(error["maxRecipients"], 1, "{second}");
    assert!(second["created"].is_null(), "{second}");
    let third = send(&["bob@example.com"]).await;
    assert!(third["created"]["s"].is_object(), "{third}");
    let fourth = send(&["bob@example.com"]).await;
    assert_eq!(fourth["notCreated"]["s"]["type"], "overQuota", "{fourth}");
    // Bob got the two that were sent, no more.
    let inbox = app.query_inbox(&bob).await;
    assert_eq!(inbox["ids"].as_array().unwrap().len(), 2, "{inbox}");
    let got = calls(
        &app,
        &ann,
        json!([["EmailSubmission/get", {"accountId": ann.account_id}]]),
    )
    .await;
    assert_eq!(got[0][1]["list"].as_array().unwrap().len(), 2, "{got:?}");
    // Bob's own hour is his.
    let drafts = app.mailbox_with_role(&bob, "drafts").await;
    let identity = own_identity(&app, &bob).await;
    let responses = calls(
        &app,
        &bob,
        json!([
            ["Email/set", {"accountId": bob.account_id, "create": {"d": {
                "mailboxIds": {drafts: true},
                "from": [{"email": "bob@example.com"}],
                "to": [{"email": "ann@example.com"}],
                "subject": "Re: Hi",
                "bodyValues": {"1": {"value": "hi"}},
                "textBody": [{"partId": "1", "type": "text/plain"}],
            }}}],
            ["EmailSubmission/set", {"accountId": bob.account_id,
                "create": {"s": {"identityId": identity, "emailId": "#d"}}}],
        ]),
    )
    .await;
    assert!(responses[1][1]["created"]["s"].is_object(), "{responses:?}");
}

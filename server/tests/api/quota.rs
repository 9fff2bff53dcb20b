//! Per-account quota (RFC 9425): `account add|set --quota`, the quota
//! capability in the session, `Quota/get` and `Quota/changes`, uploads over
//! quota refused with 507 and nothing kept, Email/import over quota refused
//! with `overQuota` (RFC 8621 §4.8).

use fastview::blob::blob_id_of;
use serde_json::{Value, json};

use crate::support::{
    PASSWORD, TestAccount, TestApp, demo_messages, run_ok, spawn_app, spawn_with_accounts,
};
use crate::uploads::{staged, upload};

const QUOTA: &str = "urn:ietf:params:jmap:quota";

/// Calls with the quota capability named in `using`.
async fn quota_call(app: &TestApp, user: &TestAccount, method: &str, arguments: Value) -> Value {
    let body = json!({
        "using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail", QUOTA],
        "methodCalls": [[method, arguments, "q"]],
    });
    let (status, response) = app.api_raw(user, &body).await;
    assert_eq!(status, 200, "{response}");
    response["methodResponses"][0].clone()
}

async fn quota_changes(app: &TestApp, user: &TestAccount, since: &impl serde::Serialize) -> Value {
    let arguments = json!({"accountId": user.account_id, "sinceState": since});
    quota_call(app, user, "Quota/changes", arguments).await
}

async fn quota_get(app: &TestApp, user: &TestAccount) -> Value {
    let response = quota_call(
        app,
        user,
        "Quota/get",
        json!({"accountId": user.account_id, "ids": null}),
    )
    .await;
    assert_eq!(response[0], "Quota/get", "{response}");
    response[1].clone()
}

fn set_quota(app: &TestApp, email: &str, quota: &str) {
    run_ok(app.cli().args(["account", "set", email, "--quota", quota]));
}

#[tokio::test]
async fn quota_get_reports_usage_and_limit_and_quota_changes_follow_them() {
    let (app, [user]) = spawn_with_accounts(["ann@example.com"]).await;
    let session = app.session(&user).await;
    assert_eq!(session["capabilities"][QUOTA], json!({}));
    assert_eq!(
        session["accounts"][&user.account_id]["accountCapabilities"][QUOTA],
        json!({})
    );
    assert_eq!(session["primaryAccounts"][QUOTA], json!(user.account_id));

    let messages = demo_messages();
    app.ingest(&user, &messages[..2], 1_700_000_000).await;
    let used = (messages[0].len() + messages[1].len()) as i64;
    // No quota: no Quota object.
    let got = quota_get(&app, &user).await;
    assert_eq!(got["list"], json!([]));
    assert_eq!(got["state"], json!("none"));
    let none_state = got["state"].clone();

    set_quota(&app, &user.email, "1M");
    let got = quota_get(&app, &user).await;
    let quota = &got["list"][0];
    assert_eq!(quota["id"], json!("octets"));
    assert_eq!(quota["resourceType"], json!("octets"));
    assert_eq!(quota["scope"], json!("account"));
    assert_eq!(quota["used"], json!(used));
    assert_eq!(quota["hardLimit"], json!(1 << 20));
    assert_eq!(quota["types"], json!(["Email"]));
    let state = got["state"].clone();
    let changes = quota_changes(&app, &user, &none_state).await;
    assert_eq!(changes[1]["created"], json!(["octets"]), "{changes}");

    // An upload counts: the object changes, and so does the state.
    let extra = b"an upload counts until it expires".to_vec();
    assert_eq!(upload(&app, &user, extra.clone()).await.0, 201);
    let changes = quota_changes(&app, &user, &state).await;
    assert_eq!(changes[1]["updated"], json!(["octets"]), "{changes}");
    assert_eq!(changes[1]["created"], json!([]));
    let got = quota_get(&app, &user).await;
    assert_eq!(got["list"][0]["used"], json!(used + extra.len() as i64));
    assert_eq!(changes[1]["newState"], got["state"]);
    let unchanged = quota_changes(&app, &user, &got["state"]).await;
    assert_eq!(unchanged[1]["updated"], json!([]), "{unchanged}");
    let bad = quota_changes(&app, &user, &"12").await;
    assert_eq!(bad[1]["type"], json!("cannotCalculateChanges"), "{bad}");
    // Properties are filtered; ids not there are notFound.
    let some = quota_call(
        &app,
        &user,
        "Quota/get",
        json!({"accountId": user.account_id,
        "ids": ["octets", "other"], "properties": ["used"]}),
    )
    .await;
    assert_eq!(
        some[1]["list"],
        json!([{"id": "octets", "used": used + extra.len() as i64}])
    );
    assert_eq!(some[1]["notFound"], json!(["other"]));
    // Without the capability in `using`, the method is unknown.
    let responses = app
        .call(
            &user,
            json!([["Quota/get", {"accountId": user.account_id, "ids": null}]]),
        )
        .await;
    assert_eq!(responses[0][1]["type"], json!("unknownMethod"));
}

#[tokio::test]
async fn uploads_and_imports_over_quota_are_refused_and_keep_nothing() {
    let app = spawn_app().await;
    run_ok(app.cli().args([
        "account",
        "add",
        "cap@example.com",
        "--password",
        PASSWORD,
        "--quota",
        "8K",
    ]));
    let account = app
        .app
        .store
        .account_by_email("cap@example.com")
        .await
        .unwrap()
        .unwrap();
    let inbox = app
        .app
        .store
        .mailboxes(account.id)
        .await
        .unwrap()
        .into_iter()
        .find(|m| m.role.as_deref() == Some("inbox"))
        .unwrap();
    let user = TestAccount {
        id: account.id,
        email: account.email.clone(),
        account_id: fastview::jmap::ids::account_id(account.id),
        inbox: fastview::jmap::ids::mailbox_id(inbox.id),
    };
    // Over the quota: 507, no blob and no staging object left.
    let big = vec![b'a'; 9 << 10];
    let (status, problem) = upload(&app, &user, big.clone()).await;
    assert_eq!(status, 507, "{problem}");
    assert!(
        problem["detail"].as_str().unwrap().contains("quota"),
        "{problem}"
    );
    assert!(!app.app.blobs.exists(&blob_id_of(&big)).await.unwrap());
    assert_eq!(staged(&app.app.blobs).await, 0);

    // Under it: stored. Then the quota is lowered below what the account
    // holds: importing the upload would keep it over quota, so it is refused.
    let message = demo_messages()
        .into_iter()
        .find(|m| m.len() < 8 << 10)
        .expect("a small demo message");
    let (status, uploaded) = upload(&app, &user, message.clone()).await;
    assert_eq!(status, 201, "{uploaded}");
    set_quota(&app, &user.email, "1K");
    let import = app.import_to_inbox(&user, &uploaded["blobId"]).await;
    assert_eq!(
        import["notCreated"]["i"]["type"],
        json!("overQuota"),
        "{import}"
    );
    // Uploading bytes the account already holds adds nothing: accepted.
    assert_eq!(upload(&app, &user, message.clone()).await.0, 201);
    assert_eq!(
        upload(&app, &user, b"one more octet string".to_vec())
            .await
            .0,
        507
    );
    // Lifted: the import goes through.
    set_quota(&app, &user.email, "none");
    let import = app.import_to_inbox(&user, &uploaded["blobId"]).await;
    assert!(import["created"]["i"].is_object(), "{import}");
}

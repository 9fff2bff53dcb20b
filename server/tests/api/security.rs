//! Isolation between accounts and the brute-force brake on logins.

use serde_json::{Value, json};

use crate::support::{PASSWORD, demo_messages, spawn_with_accounts};

#[tokio::test]
async fn another_accounts_ids_are_never_served_or_changed() {
    let (app, [ann, bob]) = spawn_with_accounts(["ann@example.com", "bob@example.com"]).await;
    let bob_ids = app.ingest(&bob, &demo_messages(), 1_700_000_000).await;
    let bob_email = app
        .email_get(&bob, &[&bob_ids[0]], &["threadId", "blobId"])
        .await["list"][0]
        .clone();
    let responses = app
        .call(&ann, json!([
            ["Email/get", {"accountId": ann.account_id, "ids": [bob_ids[0]], "properties": ["subject", "preview", "textBody"]}],
            ["Mailbox/get", {"accountId": ann.account_id, "ids": [bob.inbox]}],
            ["Thread/get", {"accountId": ann.account_id, "ids": [bob_email["threadId"]]}],
            ["Email/query", {"accountId": ann.account_id, "filter": {"inMailbox": bob.inbox}, "calculateTotal": true}],
            ["Email/query", {"accountId": ann.account_id, "filter": {"inMailbox": bob.inbox, "hasAttachment": true}, "calculateTotal": true}],
            ["Email/set", {"accountId": ann.account_id, "update": {bob_ids[0].clone(): {"keywords/$seen": true}}, "destroy": [bob_ids[1]]}],
            ["Email/set", {"accountId": ann.account_id, "update": {}}],
            ["Mailbox/set", {"accountId": ann.account_id, "update": {bob.inbox.clone(): {"name": "x"}}, "destroy": [bob.inbox]}],
            ["Mailbox/set", {"accountId": ann.account_id, "create": {"c": {"name": "x", "parentId": bob.inbox}}}],
            ["Email/import", {"accountId": ann.account_id, "emails": {"i": {"blobId": bob_email["blobId"], "mailboxIds": {ann.inbox.clone(): true}}}}],
            ["Email/get", {"accountId": bob.account_id, "ids": [bob_ids[0]]}],
        ]))
        .await;
    assert_eq!(responses[0][1]["notFound"], json!([bob_ids[0]]));
    assert_eq!(responses[1][1]["notFound"], json!([bob.inbox]));
    assert_eq!(responses[2][1]["notFound"], json!([bob_email["threadId"]]));
    assert_eq!(responses[3][1]["total"], json!(0));
    assert_eq!(responses[4][1]["total"], json!(0));
    assert_eq!(
        responses[5][1]["notUpdated"][&bob_ids[0]]["type"],
        json!("notFound")
    );
    assert_eq!(
        responses[5][1]["notDestroyed"][&bob_ids[1]]["type"],
        json!("notFound")
    );
    assert_eq!(
        responses[7][1]["notUpdated"][&bob.inbox]["type"],
        json!("notFound")
    );
    assert_eq!(
        responses[7][1]["notDestroyed"][&bob.inbox]["type"],
        json!("notFound")
    );
    assert_eq!(
        responses[8][1]["notCreated"]["c"]["type"],
        json!("invalidProperties")
    );
    assert_eq!(
        responses[9][1]["notCreated"]["i"]["type"],
        json!("invalidProperties")
    );
    assert_eq!(
        responses[10],
        json!(["error", {"type": "accountNotFound", "description": "account not found"}, "10"])
    );
    // Bob's mail is untouched.
    let bob_view = app
        .email_get(&bob, &[&bob_ids[0], &bob_ids[1]], &["keywords"])
        .await;
    assert_eq!(bob_view["list"].as_array().unwrap().len(), 2);
    assert_eq!(bob_view["list"][0]["keywords"], json!({}));
    // Downloads and uploads through Bob's account id are 404 for Ann.
    let blob = bob_email["blobId"].as_str().unwrap();
    for url in [
        format!("{}/jmap/download/{}/{blob}/m.eml", app.base, bob.account_id),
        format!("{}/jmap/download/{}/{blob}/m.eml", app.base, ann.account_id),
        format!("{}/jmap/download/{}/{blob}_1/p", app.base, ann.account_id),
    ] {
        let response = app.get_as(&url, &ann.email, PASSWORD).await;
        assert_eq!(response.status(), 404, "{url}");
    }
    let upload = app
        .client
        .post(format!("{}/jmap/upload/{}/", app.base, bob.account_id))
        .basic_auth(&ann.email, Some(PASSWORD))
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(upload.status(), 404);
}

#[tokio::test]
async fn repeated_failed_logins_are_braked_but_valid_ones_are_not() {
    let (app, [ann]) = spawn_with_accounts(["ann@example.com"]).await;
    app.account("bob@example.com").await;
    let session = |user: &str, password: &str| {
        app.client
            .get(format!("{}/.well-known/jmap", app.base))
            .basic_auth(user.to_string(), Some(password.to_string()))
            .send()
    };
    // Ann logs in before the attack: her verified credentials are cached.
    assert_eq!(session(&ann.email, PASSWORD).await.unwrap().status(), 200);
    for _ in 0..10 {
        assert_eq!(
            session("bob@example.com", "guess").await.unwrap().status(),
            401
        );
    }
    let braked = session("bob@example.com", "guess").await.unwrap();
    assert_eq!(braked.status(), 429);
    assert_eq!(braked.headers()["retry-after"], "60");
    let body: Value = braked.json().await.unwrap();
    assert_eq!(body["status"], json!(429));
    // Still braked with the right password from this address: no oracle for the attacker.
    assert_eq!(
        session("bob@example.com", PASSWORD).await.unwrap().status(),
        429
    );
    // Ann, verified before, is never slowed.
    assert_eq!(session(&ann.email, PASSWORD).await.unwrap().status(), 200);
}

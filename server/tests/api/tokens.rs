//! API tokens (`fastview token`, `Authorization: Bearer`) and push in a
//! browser: the session's `eventSourceUrl` carries a signed access that
//! opens the event source without an `Authorization` header; a revoked
//! token or a changed password ends both (issue 14).

use std::time::Duration;

use fastview::account::{TOKEN_RECHECK, hash_password};
use fastview::store::NewToken;
use serde_json::{Value, json};

use crate::support::{TestAccount, TestApp, run_ok, spawn_with_accounts};
use crate::sync::read_events;

/// `fastview token create` for `user`: the secret it prints.
fn create_token(app: &TestApp, user: &TestAccount, extra: &[&str]) -> String {
    let output = run_ok(
        app.cli()
            .args([
                "token",
                "create",
                "--account",
                &user.email.to_uppercase(),
                "--name",
                "webmail",
            ])
            .args(extra),
    );
    let secret = String::from_utf8(output.stdout).unwrap().trim().to_string();
    assert!(secret.starts_with("fvt_") && secret.len() == 47, "{secret}");
    secret
}

/// GET the session with a Bearer token: (status, body).
async fn session_with(app: &TestApp, token: &str) -> (u16, Value) {
    let response = app
        .client
        .get(format!("{}/.well-known/jmap", app.base))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The session's event source URL, filled in as the reference webmail does.
fn event_url(session: &Value) -> String {
    session["eventSourceUrl"]
        .as_str()
        .unwrap()
        .replace("{types}", "*")
        .replace("{closeafter}", "no")
        .replace("{ping}", "0")
}

/// Waits past the token and credential recheck interval.
async fn past_recheck() {
    tokio::time::sleep(TOKEN_RECHECK + Duration::from_millis(1_500)).await;
}

#[tokio::test]
async fn a_bearer_token_works_until_it_is_revoked_and_lists_without_its_secret() {
    let (app, [user]) = spawn_with_accounts(["ann@example.com"]).await;
    let token = create_token(&app, &user, &["--expires-days", "30"]);
    let (status, session) = session_with(&app, &token).await;
    assert_eq!(status, 200);
    assert_eq!(session["username"], "ann@example.com");
    let response = app
        .client
        .post(format!("{}/jmap/api", app.base))
        .bearer_auth(&token)
        .json(&json!({"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
                      "methodCalls": [["Mailbox/get", {"accountId": user.account_id, "ids": null}, "m"]]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body["methodResponses"][0][1]["list"]
            .as_array()
            .unwrap()
            .len(),
        6
    );
    // Listed with its name and expiry, never its secret.
    let listed = app
        .cli()
        .args(["token", "list", "--account", &user.email])
        .output()
        .unwrap();
    let listed = String::from_utf8(listed.stdout).unwrap();
    assert_eq!(listed.lines().count(), 1, "{listed}");
    assert!(listed.starts_with("1\twebmail\tcreated "), "{listed}");
    assert!(listed.contains("expires "), "{listed}");
    assert!(!listed.contains(&token[4..]));
    // Unknown and malformed tokens are 401 like a wrong password.
    assert_eq!(session_with(&app, "fvt_nope").await.0, 401);
    assert_eq!(session_with(&app, "").await.0, 401);
    // Revoked: refused on this server within the recheck interval.
    let revoked = app
        .cli()
        .args(["token", "revoke", "--account", &user.email, "1"])
        .output()
        .unwrap();
    assert!(revoked.status.success());
    past_recheck().await;
    assert_eq!(session_with(&app, &token).await.0, 401);
    let again = app
        .cli()
        .args(["token", "revoke", "--account", &user.email, "1"])
        .output()
        .unwrap();
    assert!(!again.status.success(), "revoking twice is an error");
}

#[tokio::test]
async fn an_expired_token_and_a_removed_accounts_tokens_are_refused() {
    let (app, [user]) = spawn_with_accounts(["bob@example.com"]).await;
    let secret = fastview::account::new_token_secret();
    let now = chrono::Utc::now().timestamp();
    app.app
        .store
        .create_token(
            user.id,
            NewToken {
                secret_sha256: &fastview::account::token_digest(&secret),
                name: "old",
                created_at: now - 100,
                expires_at: Some(now - 1),
            },
        )
        .await
        .unwrap();
    assert_eq!(session_with(&app, &secret).await.0, 401);
    let live = create_token(&app, &user, &[]);
    assert_eq!(session_with(&app, &live).await.0, 200);
    let removed = app
        .cli()
        .args(["account", "remove", &user.email])
        .output()
        .unwrap();
    assert!(removed.status.success());
    assert!(app.app.store.tokens(user.id).await.unwrap().is_empty());
    past_recheck().await;
    assert_eq!(session_with(&app, &live).await.0, 401);
}

/// The reference webmail opens `eventSourceUrl` with a browser EventSource:
/// no Authorization header. The URL's access opens the stream, pushes
/// changes, and stops when the password changes; an altered access is 401.
#[tokio::test]
async fn a_browser_event_source_opens_with_the_sessions_access_and_stops_with_the_password() {
    let (app, [user]) = spawn_with_accounts(["ann@example.com"]).await;
    let ids = app
        .ingest(&user, &crate::support::demo_messages()[..1], 1_700_000_000)
        .await;
    let session = app.session(&user).await;
    let url = event_url(&session);
    assert!(url.contains("&access="), "{url}");
    // The session (and its access) is the same all day.
    assert_eq!(
        app.session(&user).await["eventSourceUrl"],
        session["eventSourceUrl"]
    );
    let stream = app.client.get(&url).send().await.unwrap();
    assert_eq!(stream.status(), 200);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let set = app
        .call_in(
            &user,
            "Email/set",
            json!({"update": {(ids[0].clone()): {"keywords/$seen": true}}}),
        )
        .await;
    let events = read_events(stream, Duration::from_secs(3), |events| !events.is_empty()).await;
    let data: Value = serde_json::from_str(&events[0].1).unwrap();
    assert_eq!(data["changed"][&user.account_id]["Email"], set["newState"]);
    // Without the access, or with it altered, 401.
    let bare = url.split("&access=").next().unwrap().to_string();
    assert_eq!(app.client.get(&bare).send().await.unwrap().status(), 401);
    let mut altered = url.clone();
    let last = altered.pop().unwrap();
    altered.push(if last == 'A' { 'B' } else { 'A' });
    assert_eq!(app.client.get(&altered).send().await.unwrap().status(), 401);
    // A wrong Authorization header is not rescued by a valid access.
    let wrong = app.get_as(&url, &user.email, "wrong").await;
    assert_eq!(wrong.status(), 401);
    // A changed password ends an open stream and the access it was made with.
    let open = app.client.get(&url).send().await.unwrap();
    assert_eq!(open.status(), 200);
    change_password(&app, &user, "a new password").await;
    assert_push_ends(&app, open, &url, "the password changed").await;
}

/// Sets `user`'s password to `password` in the store, as `fastview account
/// password` does.
async fn change_password(app: &TestApp, user: &TestAccount, password: &str) {
    let hash = hash_password(password).unwrap();
    app.app
        .store
        .set_password(&user.email, &hash)
        .await
        .unwrap();
}

/// Asserts the `open` event stream ends within three credential rechecks
/// (after `why`), and that `url` is refused from then on.
async fn assert_push_ends(app: &TestApp, open: reqwest::Response, url: &str, why: &str) {
    let ended = tokio::time::timeout(TOKEN_RECHECK * 3, open.bytes()).await;
    assert!(ended.is_ok(), "the stream stayed open after {why}");
    assert_eq!(app.client.get(url).send().await.unwrap().status(), 401);
}

/// A session fetched with a token carries an access tied to that token:
/// revoking it ends the browser's stream.
#[tokio::test]
async fn revoking_a_token_ends_the_push_its_session_opened() {
    let (app, [user]) = spawn_with_accounts(["ann@example.com"]).await;
    let token = create_token(&app, &user, &[]);
    let (_, session) = session_with(&app, &token).await;
    let url = event_url(&session);
    let open = app.client.get(&url).send().await.unwrap();
    assert_eq!(open.status(), 200);
    let revoked = app
        .cli()
        .args(["token", "revoke", "--account", &user.email, "1"])
        .output()
        .unwrap();
    assert!(revoked.status.success());
    assert_push_ends(&app, open, &url, "the token was revoked").await;
}

/// The Session checks its credential against the store, not the credential
/// cache: within the minute after a password change the old password gets
/// 401 there (not a session whose push access is already dead), and the new
/// one a session whose access works (found by a new-user trial).
#[tokio::test]
async fn a_session_fetched_after_a_password_change_carries_a_working_access() {
    let (app, [user]) = spawn_with_accounts(["ann@example.com"]).await;
    // The old password is cached by this server.
    assert_eq!(app.session(&user).await["username"], "ann@example.com");
    change_password(&app, &user, "the new one").await;
    let stale = app
        .get_as(
            format!("{}/.well-known/jmap", app.base),
            &user.email,
            crate::support::PASSWORD,
        )
        .await;
    assert_eq!(stale.status(), 401);
    let fresh: Value = app
        .get_as(
            format!("{}/.well-known/jmap", app.base),
            &user.email,
            "the new one",
        )
        .await
        .json()
        .await
        .unwrap();
    let url = event_url(&fresh);
    let open = app.client.get(&url).send().await.unwrap();
    assert_eq!(open.status(), 200);
    drop(open);
    // An access that no longer stands says what to do.
    change_password(&app, &user, "third").await;
    let refused = app.client.get(&url).send().await.unwrap();
    assert_eq!(refused.status(), 401);
    let problem: Value = refused.json().await.unwrap();
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("fetch the session again"),
        "{problem}"
    );
}

/// A malformed event source query is a 400 problem JSON like every other
/// refusal (it was axum's text/plain; found by a new-user trial).
#[tokio::test]
async fn a_malformed_event_source_query_is_a_problem_json() {
    let (app, [user]) = spawn_with_accounts(["ann@example.com"]).await;
    let response = app
        .get_as(
            format!("{}/jmap/eventsource?types=*&ping=abc", app.base),
            &user.email,
            crate::support::PASSWORD,
        )
        .await;
    assert_eq!(response.status(), 400);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .contains("problem+json")
    );
    let problem: Value = response.json().await.unwrap();
    assert!(
        problem["detail"].as_str().unwrap().contains("ping"),
        "{problem}"
    );
}

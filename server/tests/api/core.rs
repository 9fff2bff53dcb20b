//! RFC 8620 core: session, authentication, request-level and method-level
//! errors, result references, upload and download.

use serde_json::{Value, json};

use crate::support::{PASSWORD, spawn_app, spawn_with_accounts};

#[tokio::test]
async fn session_advertises_limits_urls_and_the_account() {
    let (app, [user]) = spawn_with_accounts(["ann@example.com"]).await;
    let session: Value = app
        .get_as(
            format!("{}/.well-known/jmap", app.base),
            &user.email,
            PASSWORD,
        )
        .await
        .json()
        .await
        .unwrap();
    let core = &session["capabilities"]["urn:ietf:params:jmap:core"];
    for limit in [
        "maxSizeUpload",
        "maxConcurrentUpload",
        "maxSizeRequest",
        "maxConcurrentRequests",
        "maxCallsInRequest",
        "maxObjectsInGet",
        "maxObjectsInSet",
    ] {
        assert!(core[limit].as_u64().unwrap() > 0, "{limit}");
    }
    assert_eq!(
        session["capabilities"]["urn:ietf:params:jmap:mail"],
        json!({})
    );
    assert_eq!(
        session["primaryAccounts"]["urn:ietf:params:jmap:mail"],
        json!(user.account_id)
    );
    assert_eq!(session["username"], json!("ann@example.com"));
    assert_eq!(session["apiUrl"], json!(format!("{}/jmap/api", app.base)));
    assert!(
        session["eventSourceUrl"]
            .as_str()
            .unwrap()
            .starts_with(&app.base)
    );
    let mail =
        &session["accounts"][&user.account_id]["accountCapabilities"]["urn:ietf:params:jmap:mail"];
    assert_eq!(mail["maxSizeMailboxName"], json!(255));
}

#[tokio::test]
async fn wrong_credentials_get_401_with_a_basic_challenge_and_no_hint() {
    let app = spawn_app().await;
    app.account("ann@example.com").await;
    let url = format!("{}/.well-known/jmap", app.base);
    let cases = [
        app.client
            .get(&url)
            .basic_auth("ann@example.com", Some("wrong")),
        app.client
            .get(&url)
            .basic_auth("nobody@example.com", Some(PASSWORD)),
        app.client.get(&url).header("Authorization", "Basic %%%"),
        app.client.get(&url),
    ];
    let mut bodies = Vec::new();
    for request in cases {
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 401);
        assert_eq!(
            response.headers()["www-authenticate"],
            "Basic realm=\"Fastview\", charset=\"UTF-8\""
        );
        bodies.push(response.text().await.unwrap());
    }
    assert!(bodies.windows(2).all(|w| w[0] == w[1]), "{bodies:?}");
}

#[tokio::test]
async fn request_level_errors_are_problem_json() {
    let (app, [user]) = spawn_with_accounts(["ann@example.com"]).await;
    let post = |body: Vec<u8>, content_type: &'static str| {
        app.client
            .post(format!("{}/jmap/api", app.base))
            .basic_auth(&user.email, Some(PASSWORD))
            .header("Content-Type", content_type)
            .body(body)
            .send()
    };
    let core = r#""using":["urn:ietf:params:jmap:core"]"#;
    let too_many: Vec<String> = (0..65)
        .map(|i| format!(r#"["Core/echo",{{}},"{i}"]"#))
        .collect();
    let cases: Vec<(Vec<u8>, &str, u16, &str)> = vec![
        (b"{not json".to_vec(), "application/json", 400, "notJSON"),
        (vec![0xff, 0xfe, 0x00], "application/json", 400, "notJSON"),
        (b"{}".to_vec(), "text/plain", 400, "notJSON"),
        (b"[1,2]".to_vec(), "application/json", 400, "notRequest"),
        (
            format!("{{{core}}}").into_bytes(),
            "application/json",
            400,
            "notRequest",
        ),
        (
            br#"{"using":["urn:x"],"methodCalls":[]}"#.to_vec(),
            "application/json",
            400,
            "unknownCapability",
        ),
        (
            format!(r#"{{{core},"methodCalls":[{}]}}"#, too_many.join(",")).into_bytes(),
            "application/json",
            400,
            "limit",
        ),
        (vec![b' '; 11 << 20], "application/json", 413, "limit"),
    ];
    for (body, content_type, status, kind) in cases {
        let response = post(body, content_type).await.unwrap();
        assert_eq!(response.status().as_u16(), status, "{kind}");
        assert_eq!(
            response.headers()["content-type"],
            "application/problem+json"
        );
        let problem: Value = response.json().await.unwrap();
        assert_eq!(
            problem["type"],
            json!(format!("urn:ietf:params:jmap:error:{kind}"))
        );
        assert_eq!(problem["status"], json!(status));
    }
}

#[tokio::test]
async fn method_errors_fail_only_their_call_and_references_resolve() {
    let (app, [user, other]) = spawn_with_accounts(["ann@example.com", "bob@example.com"]).await;
    let responses = app
        .call(
            &user,
            json!([
                ["Core/echo", {"hello": [1, 2]}],
                ["Nope/get", {}],
                ["Mailbox/get", {"accountId": other.account_id}],
                ["Mailbox/get", {"accountId": user.account_id, "ids": 7}],
                ["Mailbox/get", {"accountId": user.account_id, "#ids": {"resultOf": "9", "name": "Mailbox/get", "path": "/ids"}}],
                ["Mailbox/query", {"accountId": user.account_id, "filter": {"role": "inbox"}}],
                ["Mailbox/get", {"accountId": user.account_id, "#ids": {"resultOf": "5", "name": "Mailbox/query", "path": "/ids"}, "properties": ["role"]}],
                ["Email/query", {"accountId": user.account_id, "filter": {"attachmentType": "x"}}],
                ["Email/query", {"accountId": user.account_id, "sort": [{"property": "nope"}]}],
                ["Email/get", {"accountId": user.account_id, "ids": [], "properties": ["nope", "header:From:asDate"]}],
            ]),
        )
        .await;
    assert_eq!(responses[0], json!(["Core/echo", {"hello": [1, 2]}, "0"]));
    let error = |i: usize| (responses[i][0].clone(), responses[i][1]["type"].clone());
    assert_eq!(error(1), (json!("error"), json!("unknownMethod")));
    assert_eq!(error(2), (json!("error"), json!("accountNotFound")));
    assert_eq!(error(3), (json!("error"), json!("invalidArguments")));
    assert_eq!(error(4), (json!("error"), json!("invalidResultReference")));
    assert_eq!(
        responses[6][1]["list"],
        json!([{"id": user.inbox, "role": "inbox"}])
    );
    assert_eq!(error(7), (json!("error"), json!("unsupportedFilter")));
    assert_eq!(error(8), (json!("error"), json!("unsupportedSort")));
    assert_eq!(error(9), (json!("error"), json!("invalidArguments")));
    let description = responses[9][1]["description"].as_str().unwrap();
    assert!(
        description.contains("nope") && description.contains("header:From:asDate"),
        "{description}"
    );
}

#[tokio::test]
async fn upload_and_download_round_trip_byte_identical_and_stay_private() {
    let (app, [user, other]) = spawn_with_accounts(["ann@example.com", "bob@example.com"]).await;
    let bytes: Vec<u8> = (0..=255u8).cycle().take(100_000).collect();
    let uploaded: Value = app
        .upload_typed(&user, "application/octet-stream", bytes.clone())
        .await;
    assert_eq!(uploaded["size"], json!(100_000));
    assert_eq!(uploaded["type"], json!("application/octet-stream"));
    let blob_id = uploaded["blobId"].as_str().unwrap();
    let url = format!(
        "{}/jmap/download/{}/{blob_id}/data.bin?type=image/png",
        app.base, user.account_id
    );
    let response = app.get_as(&url, &user.email, PASSWORD).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "image/png");
    assert!(
        response.headers()["content-disposition"]
            .to_str()
            .unwrap()
            .contains("data.bin")
    );
    assert_eq!(response.bytes().await.unwrap().to_vec(), bytes);
    // The other account sees nothing, through its own URL or ours.
    let theirs = format!(
        "{}/jmap/download/{}/{blob_id}/data.bin",
        app.base, other.account_id
    );
    for url in [theirs, url] {
        let response = app.get_as(&url, &other.email, PASSWORD).await;
        assert_eq!(response.status(), 404);
    }
}

#[tokio::test]
async fn cors_answers_the_configured_origins_only() {
    let app = crate::support::spawn_app_with(fastview::app::ServeOptions {
        cors_origins: vec!["https://mail.example.com".into()],
        ..Default::default()
    })
    .await;
    let preflight = |origin: &'static str| {
        app.client
            .request(reqwest::Method::OPTIONS, format!("{}/jmap/api", app.base))
            .header("Origin", origin)
            .header("Access-Control-Request-Method", "POST")
            .header(
                "Access-Control-Request-Headers",
                "authorization, content-type",
            )
            .send()
    };
    let allowed = preflight("https://mail.example.com").await.unwrap();
    assert_eq!(
        allowed.headers()["access-control-allow-origin"],
        "https://mail.example.com"
    );
    let methods = allowed.headers()["access-control-allow-methods"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(methods.contains("POST"), "{methods}");
    let other = preflight("https://evil.example.net").await.unwrap();
    assert!(other.headers().get("access-control-allow-origin").is_none());
}

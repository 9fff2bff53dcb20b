//! Bad requests: each gets the exact RFC 8620 error (a request-level problem
//! JSON with its status and type, or a method-level error for that call
//! only), never a 500, a panic or a hang.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{
    PASSWORD, TestAccount, TestApp, demo_messages, spawn_with_accounts, spawn_with_messages,
};

const USING: &str = r#""using":["urn:ietf:params:jmap:core","urn:ietf:params:jmap:mail"]"#;

/// POSTs raw bytes to the API; returns (status, content type, body text).
async fn post(
    app: &TestApp,
    user: &TestAccount,
    body: Vec<u8>,
    content_type: Option<&str>,
) -> (u16, String, String) {
    let mut request = app
        .client
        .post(format!("{}/jmap/api", app.base))
        .basic_auth(&user.email, Some(PASSWORD))
        .body(body);
    if let Some(content_type) = content_type {
        request = request.header("Content-Type", content_type);
    }
    let response = tokio::time::timeout(Duration::from_secs(60), request.send())
        .await
        .expect("no hang")
        .expect("send");
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (status, content_type, response.text().await.expect("body"))
}

/// Asserts a request-level error: `status`, problem JSON of `type` `…:error:{kind}`.
async fn expect_problem(
    app: &TestApp,
    user: &TestAccount,
    body: Vec<u8>,
    content_type: Option<&str>,
    status: u16,
    kind: &str,
) {
    let shown = String::from_utf8_lossy(&body[..body.len().min(80)]).to_string();
    let (got, content_type, text) = post(app, user, body, content_type).await;
    assert_eq!(got, status, "{shown}: {text}");
    assert_eq!(content_type, "application/problem+json", "{shown}");
    let problem: Value = serde_json::from_str(&text).expect("problem JSON");
    assert_eq!(
        problem["type"],
        json!(format!("urn:ietf:params:jmap:error:{kind}")),
        "{shown}"
    );
    assert_eq!(problem["status"], json!(status), "{shown}");
}

/// POSTs a request of raw method-call JSON; returns the method responses, asserting 200.
async fn calls(app: &TestApp, user: &TestAccount, method_calls: &str) -> Vec<Value> {
    let body = format!(r#"{{{USING},"methodCalls":{method_calls}}}"#).into_bytes();
    let (status, _, text) = post(app, user, body, Some("application/json")).await;
    assert_eq!(status, 200, "{}", &text[..text.len().min(500)]);
    let response: Value = serde_json::from_str(&text).expect("response JSON");
    response["methodResponses"]
        .as_array()
        .expect("methodResponses")
        .clone()
}

/// The `[name, type]` of a response: `["error", type]` for a method error.
fn outcome(response: &Value) -> (String, String) {
    (
        response[0].as_str().unwrap_or_default().to_string(),
        response[1]["type"].as_str().unwrap_or_default().to_string(),
    )
}

fn method_error(kind: &str) -> (String, String) {
    ("error".to_string(), kind.to_string())
}

#[tokio::test]
async fn bodies_that_are_not_json_are_not_json() {
    let (app, [user]) = spawn_with_accounts(["ann@example.com"]).await;
    let valid = format!(r#"{{{USING},"methodCalls":[["Core/echo",{{}},"c"]]}}"#);
    let json = Some("application/json");
    // Not JSON at all.
    for body in [
        b"".to_vec(),
        b"{not json".to_vec(),
        b"null x".to_vec(),
        b"\x00".to_vec(),
        format!("{valid}\x00").into_bytes(),
        valid.replace(r#""c""#, "\"c\x00\"").into_bytes(),
        [
            b"{\"using\":[\"".as_slice(),
            &[0xff, 0xfe],
            b"\"],\"methodCalls\":[]}",
        ]
        .concat(),
        [b"\xef\xbb\xbf".as_slice(), valid.as_bytes()].concat(),
        b"{\"using\":[],\"methodCalls\":[],\"x\":1e999}".to_vec(),
        // Deep nesting: over serde_json's recursion limit, never a stack overflow.
        "[".repeat(100_000).into_bytes(),
        ["[".repeat(100_000), "]".repeat(100_000)]
            .concat()
            .into_bytes(),
        "{\"a\":".repeat(100_000).into_bytes(),
        format!(
            r#"{{{USING},"methodCalls":[["Core/echo",{{"x":{}}},"c"]]}}"#,
            ["[".repeat(200), "]".repeat(200)].concat()
        )
        .into_bytes(),
    ] {
        expect_problem(&app, &user, body, json, 400, "notJSON").await;
    }
    // The right JSON with the wrong (or no) Content-Type.
    for content_type in [
        Some("text/plain"),
        Some("application/jsonx"),
        Some("multipart/form-data"),
        Some(""),
        None,
    ] {
        expect_problem(
            &app,
            &user,
            valid.clone().into_bytes(),
            content_type,
            400,
            "notJSON",
        )
        .await;
    }
    // Parameters and case do not matter; JSON escapes of NUL are fine.
    for content_type in ["application/json; charset=utf-8", "Application/JSON"] {
        let (status, _, _) =
            post(&app, &user, valid.clone().into_bytes(), Some(content_type)).await;
        assert_eq!(status, 200, "{content_type}");
    }
    let responses = calls(
        &app,
        &user,
        r#"[["Core/echo",{"a\u0000b":"\u0000"},"c\u0000"],["Core\u0000/echo",{},"d"]]"#,
    )
    .await;
    assert_eq!(
        responses[0],
        json!(["Core/echo", {"a\u{0}b": "\u{0}"}, "c\u{0}"])
    );
    assert_eq!(outcome(&responses[1]), method_error("unknownMethod"));
    // Nesting under the limit is echoed as it came.
    let nested = ["[".repeat(100), "]".repeat(100)].concat();
    let responses = calls(
        &app,
        &user,
        &format!(r#"[["Core/echo",{{"x":{nested}}},"c"]]"#),
    )
    .await;
    assert_eq!(
        serde_json::to_string(&responses[0][1]["x"]).unwrap(),
        nested
    );
}

#[tokio::test]
async fn json_of_the_wrong_shape_is_not_a_request() {
    let (app, [user]) = spawn_with_accounts(["ann@example.com"]).await;
    let json = Some("application/json");
    for body in [
        "[]",
        "\"request\"",
        "null",
        "{}",
        r#"{"using":["urn:ietf:params:jmap:core"]}"#,
        r#"{"methodCalls":[]}"#,
        r#"{"using":"urn:ietf:params:jmap:core","methodCalls":[]}"#,
        r#"{"using":[1],"methodCalls":[]}"#,
        r#"{"using":[],"methodCalls":{}}"#,
        r#"{"using":[],"methodCalls":[[]]}"#,
        r#"{"using":[],"methodCalls":["Core/echo"]}"#,
        r#"{"using":[],"methodCalls":[["Core/echo",{}]]}"#,
        r#"{"using":[],"methodCalls":[["Core/echo",{},"c","d"]]}"#,
        r#"{"using":[],"methodCalls":[["Core/echo",{},1]]}"#,
        r#"{"using":[],"methodCalls":[[1,{},"c"]]}"#,
        r#"{"using":[],"methodCalls":[["Core/echo",[],"c"]]}"#,
        r#"{"using":[],"methodCalls":[["Core/echo",null,"c"]]}"#,
        r#"{"using":[],"methodCalls":[],"createdIds":[]}"#,
        r#"{"using":[],"methodCalls":[],"createdIds":{"a":1}}"#,
    ] {
        expect_problem(
            &app,
            &user,
            body.as_bytes().to_vec(),
            json,
            400,
            "notRequest",
        )
        .await;
    }
    for using in [
        r#"["urn:example:nope"]"#,
        r#"["urn:ietf:params:jmap:core","urn:ietf:params:jmap:core:x"]"#,
        r#"["URN:IETF:PARAMS:JMAP:CORE"]"#,
    ] {
        let body = format!(r#"{{"using":{using},"methodCalls":[["Core/echo",{{}},"c"]]}}"#);
        expect_problem(
            &app,
            &user,
            body.into_bytes(),
            json,
            400,
            "unknownCapability",
        )
        .await;
    }
    // Unknown members of the Request object are ignored (RFC 8620 §3.3 does not forbid them).
    let body = format!(r#"{{{USING},"methodCalls":[],"extra":{{}}}}"#);
    assert_eq!(post(&app, &user, body.into_bytes(), json).await.0, 200);
}

#[tokio::test]
async fn wrong_arguments_fail_only_their_call_for_every_method() {
    let (app, [ann, bob]) = spawn_with_accounts(["ann@example.com", "bob@example.com"]).await;
    let me = &ann.account_id;
    let theirs = &bob.account_id;
    // (method, arguments that are fine but for the account)
    let methods: Vec<(&str, Value)> = vec![
        ("Email/get", json!({"ids": []})),
        ("Email/query", json!({})),
        ("Email/set", json!({})),
        ("Email/import", json!({"emails": {}})),
        ("Mailbox/get", json!({"ids": []})),
        ("Mailbox/query", json!({})),
        ("Mailbox/set", json!({})),
        ("Thread/get", json!({"ids": []})),
    ];
    // Arguments of the wrong type, one set per method.
    let wrong: Vec<(&str, Vec<Value>)> = vec![
        (
            "Email/get",
            vec![
                json!({"accountId": me, "ids": "x"}),
                json!({"accountId": me, "ids": [1]}),
                json!({"accountId": me, "ids": [], "properties": "subject"}),
                json!({"accountId": me, "ids": [], "properties": [null]}),
                json!({"accountId": me, "ids": [], "bodyProperties": {}}),
                json!({"accountId": me, "ids": [], "fetchAllBodyValues": "yes"}),
                json!({"accountId": me, "ids": [], "maxBodyValueBytes": -1}),
                json!({"accountId": me, "ids": [], "maxBodyValueBytes": 1.5}),
                json!({"accountId": 1, "ids": []}),
            ],
        ),
        (
            "Email/query",
            vec![
                json!({"accountId": me, "filter": []}),
                json!({"accountId": me, "filter": {"inMailbox": 3}}),
                json!({"accountId": me, "sort": {}}),
                json!({"accountId": me, "position": "0"}),
                json!({"accountId": me, "limit": -1}),
                json!({"accountId": me, "calculateTotal": 1}),
            ],
        ),
        (
            "Email/set",
            vec![
                json!({"accountId": me, "create": []}),
                json!({"accountId": me, "update": [1]}),
                json!({"accountId": me, "destroy": "x"}),
                json!({"accountId": me, "ifInState": 5}),
            ],
        ),
        (
            "Email/import",
            vec![
                json!({"accountId": me}),
                json!({"accountId": me, "emails": []}),
                json!({"accountId": me, "emails": {"a": 1}}),
                json!({"accountId": me, "emails": {}, "ifInState": []}),
            ],
        ),
        (
            "Mailbox/get",
            vec![
                json!({"accountId": me, "ids": {}}),
                json!({"accountId": me, "ids": [true]}),
                json!({"accountId": me, "properties": [1]}),
            ],
        ),
        (
            "Mailbox/query",
            vec![
                json!({"accountId": me, "filter": "inbox"}),
                json!({"accountId": me, "sort": [1]}),
                json!({"accountId": me, "limit": "10"}),
            ],
        ),
        (
            "Mailbox/set",
            vec![
                json!({"accountId": me, "create": "x"}),
                json!({"accountId": me, "update": []}),
                json!({"accountId": me, "destroy": {}}),
                json!({"accountId": me, "onDestroyRemoveEmails": "yes"}),
            ],
        ),
        (
            "Thread/get",
            vec![
                json!({"accountId": me, "ids": "x"}),
                json!({"accountId": me, "ids": [[]]}),
            ],
        ),
    ];
    for (method, cases) in &wrong {
        let mut method_calls: Vec<Value> = cases.iter().map(|args| json!([method, args])).collect();
        // Then a valid call, which must still succeed.
        let (_, fine) = methods.iter().find(|(m, _)| m == method).unwrap();
        let mut valid = fine.clone();
        valid["accountId"] = json!(me);
        method_calls.push(json!([method, valid]));
        let responses = app.call(&ann, Value::Array(method_calls)).await;
        for (i, args) in cases.iter().enumerate() {
            assert_eq!(
                outcome(&responses[i]),
                method_error("invalidArguments"),
                "{method} {args}: {}",
                responses[i]
            );
        }
        assert_eq!(
            responses[cases.len()][0],
            json!(method),
            "{}",
            responses[cases.len()]
        );
    }
    // Missing accountId, another user's, a malformed one: per method.
    for (method, arguments) in &methods {
        let with = |account: Option<&str>| {
            let mut arguments = arguments.clone();
            if let Some(account) = account {
                arguments["accountId"] = json!(account);
            }
            json!([method, arguments])
        };
        let responses = app
            .call(
                &ann,
                json!([
                    with(None),
                    with(Some(theirs)),
                    with(Some("nope")),
                    with(Some("")),
                    with(Some(me))
                ]),
            )
            .await;
        assert_eq!(
            outcome(&responses[0]),
            method_error("invalidArguments"),
            "{method}"
        );
        for (i, response) in responses.iter().enumerate().take(4).skip(1) {
            assert_eq!(
                outcome(response),
                method_error("accountNotFound"),
                "{method} {i}"
            );
        }
        assert_eq!(responses[4][0], json!(method), "{method}: {}", responses[4]);
    }
    // Unknown methods, including near misses.
    let responses = app
        .call(&ann, json!([["Email/nope", {}], ["email/get", {"accountId": me}], ["", {}], ["Core/echo/", {}], ["Email/get ", {"accountId": me}]]))
        .await;
    for response in &responses {
        assert_eq!(
            outcome(response),
            method_error("unknownMethod"),
            "{response}"
        );
    }
}

#[tokio::test]
async fn limits_on_calls_and_objects_are_enforced() {
    let (app, [user]) = spawn_with_accounts(["ann@example.com"]).await;
    let echo = |n: usize| {
        (0..n)
            .map(|i| format!(r#"["Core/echo",{{}},"{i}"]"#))
            .collect::<Vec<_>>()
            .join(",")
    };
    let ok = calls(&app, &user, &format!("[{}]", echo(64))).await;
    assert_eq!(ok.len(), 64);
    for n in [65, 10_000] {
        let body = format!(r#"{{{USING},"methodCalls":[{}]}}"#, echo(n)).into_bytes();
        expect_problem(&app, &user, body, Some("application/json"), 400, "limit").await;
    }
    let a = &user.account_id;
    let ids = |n: usize| (0..n).map(|i| format!("x{i}")).collect::<Vec<_>>();
    let responses = app
        .call(
            &user,
            json!([
                ["Email/get", {"accountId": a, "ids": ids(1001), "properties": ["id"]}],
                ["Mailbox/get", {"accountId": a, "ids": ids(1001)}],
                ["Thread/get", {"accountId": a, "ids": ids(1001)}],
                ["Email/get", {"accountId": a, "ids": ids(1000), "properties": ["id"]}],
                ["Mailbox/get", {"accountId": a, "ids": ids(1000)}],
                ["Thread/get", {"accountId": a, "ids": ids(1000)}],
            ]),
        )
        .await;
    for response in &responses[..3] {
        assert_eq!(
            outcome(response),
            method_error("requestTooLarge"),
            "{response}"
        );
    }
    for response in &responses[3..] {
        assert_eq!(
            response[1]["notFound"].as_array().map(Vec::len),
            Some(1000),
            "{}",
            response[0]
        );
    }
}

#[tokio::test]
async fn invalid_forward_and_cyclic_result_references_are_invalid_result_references() {
    let (app, user, _) = spawn_with_messages(&demo_messages()).await;
    let a = &user.account_id;
    let reference = |result_of: &str, name: &str, path: &str| json!({"resultOf": result_of, "name": name, "path": path});
    let responses = app
        .call(&user, json!([
            // 0: forward reference to call 1.
            ["Email/get", {"accountId": a, "#ids": reference("1", "Email/query", "/ids")}],
            // 1: the query itself.
            ["Email/query", {"accountId": a}],
            // 2: a reference to itself.
            ["Email/get", {"accountId": a, "#ids": reference("2", "Email/get", "/list/*/id")}],
            // 3, 4: a cycle: each refers to the other.
            ["Email/get", {"accountId": a, "#ids": reference("4", "Email/get", "/list/*/id")}],
            ["Email/get", {"accountId": a, "#ids": reference("3", "Email/get", "/list/*/id")}],
            // 5: a reference to an error response (call 0).
            ["Email/get", {"accountId": a, "#ids": reference("0", "Email/get", "/list/*/id")}],
            // 6: the wrong name.
            ["Email/get", {"accountId": a, "#ids": reference("1", "Email/get", "/ids")}],
            // 7-11: bad paths and malformed references.
            ["Email/get", {"accountId": a, "#ids": reference("1", "Email/query", "ids")}],
            ["Email/get", {"accountId": a, "#ids": reference("1", "Email/query", "/ids/99999")}],
            ["Email/get", {"accountId": a, "#ids": reference("1", "Email/query", "/ids/-1")}],
            ["Email/get", {"accountId": a, "#ids": {"resultOf": "1", "name": "Email/query"}}],
            ["Email/get", {"accountId": a, "#ids": [1, 2]}],
            // 12: both ids and #ids.
            ["Email/get", {"accountId": a, "ids": [], "#ids": reference("1", "Email/query", "/ids")}],
            // 13: a reference whose value has the wrong type for the argument.
            ["Email/get", {"accountId": a, "#ids": reference("1", "Email/query", "/position")}],
            // 14: a deep path of wildcards and a huge path.
            ["Email/get", {"accountId": a, "#ids": reference("1", "Email/query", &"/*".repeat(100_000))}],
            // 15: a valid backward reference still works.
            ["Email/get", {"accountId": a, "#ids": reference("1", "Email/query", "/ids"), "properties": ["id"]}],
        ]))
        .await;
    for i in (0..=11).filter(|i| *i != 1) {
        assert_eq!(
            outcome(&responses[i]),
            method_error("invalidResultReference"),
            "call {i}: {}",
            responses[i]
        );
    }
    assert_eq!(responses[1][0], json!("Email/query"));
    assert_eq!(outcome(&responses[12]), method_error("invalidArguments"));
    assert_eq!(outcome(&responses[13]), method_error("invalidArguments"));
    assert_eq!(
        outcome(&responses[14]),
        method_error("invalidResultReference")
    );
    assert_eq!(
        responses[15][1]["list"].as_array().unwrap().len(),
        demo_messages().len()
    );
}

#[tokio::test]
async fn huge_strings_are_answered_without_failing_the_request() {
    let (app, [user]) = spawn_with_accounts(["ann@example.com"]).await;
    let a = &user.account_id;
    // 5 MiB, one per request (maxSizeRequest is 10 MiB).
    let huge = "p".repeat(5 << 20);
    let one = |method: &str, arguments: Value| {
        let (app, user) = (&app, &user);
        let call = json!([[method, arguments]]);
        async move { app.call(user, call).await.remove(0) }
    };
    let response = one(
        "Email/get",
        json!({"accountId": a, "ids": [], "properties": [huge]}),
    )
    .await;
    assert_eq!(outcome(&response), method_error("invalidArguments"));
    // The description does not echo megabytes back.
    assert!(response[1]["description"].as_str().unwrap().len() < 10_000);
    let response = one(
        "Email/get",
        json!({"accountId": a, "ids": [], "bodyProperties": [huge]}),
    )
    .await;
    assert_eq!(outcome(&response), method_error("invalidArguments"));
    assert!(response[1]["description"].as_str().unwrap().len() < 10_000);
    let response = one(
        "Email/get",
        json!({"accountId": a, "ids": [], "properties": [format!("header:{huge}")]}),
    )
    .await;
    assert_eq!(
        response[0],
        json!("Email/get"),
        "a header property may have any name"
    );
    let response = one("Email/get", json!({"accountId": a, "ids": [huge]})).await;
    assert_eq!(response[1]["notFound"], json!([huge]));
    let response = one("Mailbox/get", json!({"accountId": a, "ids": [huge]})).await;
    assert_eq!(response[1]["notFound"], json!([huge]));
    // A filter value is bounded (issue 43): refused, not run.
    let response = one(
        "Email/query",
        json!({"accountId": a, "filter": {"subject": huge}}),
    )
    .await;
    assert_eq!(outcome(&response), method_error("invalidArguments"));
    assert!(response[1]["description"].as_str().unwrap().len() < 10_000);
    let response = one(
        "Mailbox/set",
        json!({"accountId": a, "create": {"m": {"name": huge}}}),
    )
    .await;
    assert_eq!(
        response[1]["notCreated"]["m"]["type"],
        json!("invalidProperties")
    );
    // A huge key and value, call id and method name.
    let huge = "p".repeat(4 << 20);
    let response = one("Core/echo", json!({huge.clone(): huge})).await;
    assert_eq!(response[1][&huge], json!(huge));
    let body = format!(r#"{{{USING},"methodCalls":[["{huge}",{{}},"{huge}"]]}}"#).into_bytes();
    let (status, _, text) = post(&app, &user, body, Some("application/json")).await;
    assert_eq!(status, 200);
    let response: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        outcome(&response["methodResponses"][0]),
        method_error("unknownMethod")
    );
    assert_eq!(response["methodResponses"][0][2], json!(huge));
}

#[tokio::test]
async fn bodies_over_max_size_request_are_rejected_while_streaming() {
    let (app, [user]) = spawn_with_accounts(["ann@example.com"]).await;
    // A chunked body without Content-Length that never ends: the 413 must
    // arrive while the client is still sending.
    let address = app.base.trim_start_matches("http://").to_string();
    let stream = tokio::net::TcpStream::connect(&address).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    let auth = base64_basic(&user.email, PASSWORD);
    let head = format!(
        "POST /jmap/api HTTP/1.1\r\nHost: {address}\r\nAuthorization: Basic {auth}\r\n\
         Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    writer.write_all(head.as_bytes()).await.unwrap();
    let sender = tokio::spawn(async move {
        let chunk = [
            format!("{:x}\r\n", 64 << 10).into_bytes(),
            vec![b' '; 64 << 10],
            b"\r\n".to_vec(),
        ]
        .concat();
        let mut sent: u64 = 0;
        // Forever, until the server closes the connection (bounded for safety).
        while sent < 1 << 30 {
            if writer.write_all(&chunk).await.is_err() {
                break;
            }
            sent += 64 << 10;
        }
        sent
    });
    let response = tokio::time::timeout(Duration::from_secs(30), async {
        let mut response = Vec::new();
        let mut buffer = [0u8; 4096];
        loop {
            let n = reader.read(&mut buffer).await.unwrap_or(0);
            if n == 0 {
                break;
            }
            response.extend_from_slice(&buffer[..n]);
            if response.windows(4).any(|w| w == b"\r\n\r\n") && response.ends_with(b"}") {
                break;
            }
        }
        String::from_utf8_lossy(&response).to_string()
    })
    .await
    .expect("the 413 arrives while the body is still streaming");
    assert!(response.starts_with("HTTP/1.1 413"), "{response}");
    assert!(
        response.contains("urn:ietf:params:jmap:error:limit"),
        "{response}"
    );
    let sent = tokio::time::timeout(Duration::from_secs(30), sender)
        .await
        .expect("the server closed the connection")
        .unwrap();
    assert!(sent < 1 << 30, "the server read the whole gigabyte");
    // A declared Content-Length over the limit is refused before the body is read.
    let (status, _, _) = post(
        &app,
        &user,
        vec![b' '; (10 << 20) + 1],
        Some("application/json"),
    )
    .await;
    assert_eq!(status, 413);
    // Exactly the limit is fine (whitespace around a valid request).
    let valid = format!(r#"{{{USING},"methodCalls":[["Core/echo",{{}},"c"]]}}"#);
    let mut body = valid.into_bytes();
    body.resize(10 << 20, b' ');
    let (status, _, _) = post(&app, &user, body, Some("application/json")).await;
    assert_eq!(status, 200);
    // The server still serves this account afterwards.
    assert_eq!(app.call(&user, json!([["Core/echo", {}]])).await.len(), 1);
}

/// `base64(user:password)` for a hand-written Authorization header.
pub fn base64_basic(user: &str, password: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
}

//! Identities and the VacationResponse (issue 17, RFC 8621 §6, §8): the
//! session advertises both capabilities; an account starts with one
//! identity for its own address that it cannot delete; it may add
//! identities for its address and the aliases the operator grants with
//! `fastview account alias add`, and no other (`forbiddenFrom`); every
//! change shows in Identity/changes. The VacationResponse is one object,
//! disabled until set.

use serde_json::{Value, json};

use crate::support::{TestAccount, TestApp, spawn_with_accounts};

const SUBMISSION: &str = "urn:ietf:params:jmap:submission";
const VACATION: &str = "urn:ietf:params:jmap:vacationresponse";

async fn call(app: &TestApp, user: &TestAccount, method: &str, arguments: Value) -> Value {
    let responses = app
        .call_using(user, &[SUBMISSION, VACATION], json!([[method, arguments]]))
        .await;
    assert_eq!(responses[0][0], method, "{}", responses[0]);
    responses[0][1].clone()
}

fn alias(app: &TestApp, args: &[&str]) -> (bool, String) {
    let output = app
        .cli()
        .args(["account", "alias"])
        .args(args)
        .output()
        .expect("account alias");
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.success(), text)
}

#[tokio::test]
async fn identities_follow_what_the_account_may_send_as() {
    let (app, [ann, bob]) = spawn_with_accounts(["ann@example.com", "bob@example.com"]).await;

    let session = app.session(&ann).await;
    assert_eq!(
        session["accounts"][&ann.account_id]["accountCapabilities"][SUBMISSION],
        json!({"maxDelayedSend": 0, "submissionExtensions": {}})
    );
    assert_eq!(session["primaryAccounts"][VACATION], json!(ann.account_id));

    // Without the capability in `using`, the methods are unknown.
    let responses = app
        .call(
            &ann,
            json!([["Identity/get", {"accountId": ann.account_id}]]),
        )
        .await;
    assert_eq!(responses[0][1]["type"], "unknownMethod");

    let got = call(
        &app,
        &ann,
        "Identity/get",
        json!({"accountId": ann.account_id}),
    )
    .await;
    let own = got["list"][0].clone();
    assert_eq!(got["list"].as_array().unwrap().len(), 1);
    let own_id = own["id"].as_str().unwrap().to_string();
    assert_eq!(
        own,
        json!({"id": own_id, "name": "", "email": "ann@example.com", "replyTo": null,
            "bcc": null, "textSignature": "", "htmlSignature": "", "mayDelete": false})
    );
    let start = got["state"].as_str().unwrap().to_string();

    let set = call(
        &app,
        &ann,
        "Identity/set",
        json!({"accountId": ann.account_id, "create": {
            "work": {"name": "Ann at Work", "email": "ann@example.com",
                "replyTo": [{"name": "Desk", "email": "desk@example.com"}],
                "textSignature": "-- \nAnn"},
            "sales": {"email": "sales@example.com"},
            "bob": {"email": "BOB@example.com"},
            "bad": {"email": "ann@example.com", "bcc": "everyone"},
            "server": {"email": "ann@example.com", "mayDelete": false},
        }}),
    )
    .await;
    let work = set["created"]["work"]["id"].as_str().unwrap().to_string();
    assert_eq!(set["created"]["work"]["mayDelete"], true);
    assert_eq!(set["notCreated"]["sales"]["type"], "forbiddenFrom");
    assert_eq!(set["notCreated"]["bob"]["type"], "forbiddenFrom");
    assert_eq!(set["notCreated"]["bad"]["type"], "invalidProperties");
    assert_eq!(set["notCreated"]["bad"]["properties"], json!(["bcc"]));
    assert_eq!(
        set["notCreated"]["server"]["properties"],
        json!(["mayDelete"])
    );

    // The operator grants an alias and a whole domain; bob's login is not
    // anyone else's to take.
    assert_eq!(
        alias(&app, &["add", "ann@example.com", "Sales@Example.com"]),
        (
            true,
            "ann@example.com may send as sales@example.com\n".into()
        )
    );
    assert!(alias(&app, &["add", "ann@example.com", "*@ann.example"]).0);
    let (ok, text) = alias(&app, &["add", "ann@example.com", "bob@example.com"]);
    assert!(!ok && text.contains("another account's login"), "{text}");
    let (ok, text) = alias(&app, &["add", "bob@example.com", "sales@example.com"]);
    assert!(!ok && text.contains("another account's alias"), "{text}");
    assert_eq!(
        alias(&app, &["list", "ann@example.com"]),
        (true, "*@ann.example\nsales@example.com\n".into())
    );
    let set = call(
        &app,
        &ann,
        "Identity/set",
        json!({"accountId": ann.account_id, "create": {
            "sales": {"email": "sales@example.com", "name": "Sales"},
            "any": {"email": "anything@ann.example"},
        }}),
    )
    .await;
    let sales = set["created"]["sales"]["id"].as_str().unwrap().to_string();
    assert!(set["created"]["any"]["id"].is_string(), "{set}");

    let set = call(
        &app,
        &ann,
        "Identity/set",
        json!({"accountId": ann.account_id,
            "update": {
                work.as_str(): {"name": "Ann (work)", "bcc": [{"email": "archive@example.com"}]},
                own_id.as_str(): {"email": "other@example.com"},
                "i999999": {"name": "x"},
            },
            "destroy": [own_id.clone(), sales.clone(), "i999999"]}),
    )
    .await;
    assert_eq!(set["updated"], json!({work.as_str(): null}));
    assert_eq!(set["notUpdated"][&own_id]["properties"], json!(["email"]));
    assert_eq!(set["notUpdated"]["i999999"]["type"], "notFound");
    assert_eq!(set["destroyed"], json!([sales]));
    assert_eq!(set["notDestroyed"][&own_id]["type"], "forbidden");
    assert_eq!(set["notDestroyed"]["i999999"]["type"], "notFound");

    let got = call(
        &app,
        &ann,
        "Identity/get",
        json!({"accountId": ann.account_id, "ids": [work, sales],
            "properties": ["name", "bcc", "replyTo"]}),
    )
    .await;
    assert_eq!(
        got["list"],
        json!([{"id": work, "name": "Ann (work)",
            "bcc": [{"name": null, "email": "archive@example.com"}],
            "replyTo": [{"name": "Desk", "email": "desk@example.com"}]}])
    );
    assert_eq!(got["notFound"], json!([sales]));

    // Created and destroyed in between: not reported (RFC 8620 §5.2).
    let changes = call(
        &app,
        &ann,
        "Identity/changes",
        json!({"accountId": ann.account_id, "sinceState": start}),
    )
    .await;
    let mut created: Vec<String> = serde_json::from_value(changes["created"].clone()).unwrap();
    created.sort();
    assert_eq!(created.len(), 2, "{changes}");
    assert!(created.contains(&work));
    assert_eq!(changes["updated"], json!([]));
    assert_eq!(changes["destroyed"], json!([]));
    assert_eq!(changes["newState"], got["state"]);

    // Bob sees only his own.
    let got = call(
        &app,
        &bob,
        "Identity/get",
        json!({"accountId": bob.account_id}),
    )
    .await;
    assert_eq!(got["list"].as_array().unwrap().len(), 1);
    assert_eq!(got["list"][0]["email"], "bob@example.com");
    let got = call(
        &app,
        &bob,
        "Identity/get",
        json!({"accountId": bob.account_id, "ids": [work]}),
    )
    .await;
    assert_eq!(got["notFound"], json!([work]));

    // Removing the alias keeps its identities; a new one is refused.
    assert!(alias(&app, &["remove", "ann@example.com", "*@ann.example"]).0);
    let (ok, text) = alias(&app, &["remove", "ann@example.com", "*@ann.example"]);
    assert!(!ok && text.contains("has no alias"), "{text}");
    let set = call(
        &app,
        &ann,
        "Identity/set",
        json!({"accountId": ann.account_id, "create": {"x": {"email": "x@ann.example"}}}),
    )
    .await;
    assert_eq!(set["notCreated"]["x"]["type"], "forbiddenFrom");
}

#[tokio::test]
async fn the_vacation_response_is_one_object_disabled_until_set() {
    let (app, [ann]) = spawn_with_accounts(["ann@example.com"]).await;
    let got = call(
        &app,
        &ann,
        "VacationResponse/get",
        json!({"accountId": ann.account_id, "ids": null}),
    )
    .await;
    assert_eq!(
        got["list"],
        json!([{"id": "singleton", "isEnabled": false, "fromDate": null, "toDate": null,
            "subject": null, "textBody": null, "htmlBody": null}])
    );
    let before = got["state"].clone();
    let set = call(
        &app,
        &ann,
        "VacationResponse/set",
        json!({"accountId": ann.account_id, "ifInState": before,
            "create": {"new": {"isEnabled": true}},
            "update": {"singleton": {"isEnabled": true, "toDate": "2027-01-05T00:00:00Z",
                "subject": "Away", "textBody": "Back on the 5th."}},
            "destroy": ["singleton"]}),
    )
    .await;
    assert_eq!(set["updated"], json!({"singleton": null}));
    assert_eq!(set["notCreated"]["new"]["type"], "singleton");
    assert_eq!(set["notDestroyed"]["singleton"]["type"], "singleton");
    assert_ne!(set["newState"], before);
    let set = call(
        &app,
        &ann,
        "VacationResponse/set",
        json!({"accountId": ann.account_id,
            "update": {"singleton": {"fromDate": "soon"}, "other": {"isEnabled": false}}}),
    )
    .await;
    assert_eq!(
        set["notUpdated"]["singleton"]["properties"],
        json!(["fromDate"])
    );
    assert_eq!(set["notUpdated"]["other"]["type"], "notFound");
    let got = call(
        &app,
        &ann,
        "VacationResponse/get",
        json!({"accountId": ann.account_id, "ids": ["singleton", "other"],
            "properties": ["isEnabled", "toDate", "subject", "textBody"]}),
    )
    .await;
    assert_eq!(
        got["list"],
        json!([{"id": "singleton", "isEnabled": true, "toDate": "2027-01-05T00:00:00Z",
            "subject": "Away", "textBody": "Back on the 5th."}])
    );
    assert_eq!(got["notFound"], json!(["other"]));
    let stale = app
        .call_using(
            &ann,
            &[VACATION],
            json!([["VacationResponse/set", {"accountId": ann.account_id, "ifInState": before,
                "update": {"singleton": {"isEnabled": false}}}]]),
        )
        .await;
    assert_eq!(stale[0][0], "error");
    assert_eq!(stale[0][1]["type"], "stateMismatch", "{stale:?}");
}

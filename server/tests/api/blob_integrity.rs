//! A blob whose bytes are missing or do not hash to its id is never served:
//! a download answers a 5xx problem naming it, an Email/get of body values,
//! Email/parse and Email/import answer `serverFail`; `fastview fsck` lists
//! it and exits 2; writing the right bytes again (an upload, an import)
//! repairs it.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::support::{TestAccount, TestApp, demo_messages, spawn_with_accounts};
use crate::uploads::{blob_root, upload};

/// The file of a blob in a test server's local blob store.
fn blob_file(app: &TestApp, blob_id: &str) -> PathBuf {
    blob_root(app)
        .join(&blob_id[0..2])
        .join(&blob_id[2..4])
        .join(blob_id)
}

async fn download(app: &TestApp, user: &TestAccount, blob_id: &str) -> (u16, Vec<u8>) {
    app.download(user, blob_id, "m.eml").await
}

/// The type of the error each read of the blob answers, or "ok":
/// [Email/get of body values (a range read, checked against the part's
/// digest), Email/parse, Email/import (whole reads, checked against the id)].
async fn whole_reads(
    app: &TestApp,
    user: &TestAccount,
    email_id: &str,
    blob_id: &str,
) -> Vec<String> {
    let responses = app
        .call(
            user,
            json!([
                ["Email/get", {"accountId": user.account_id, "ids": [email_id],
                    "properties": ["bodyValues"], "fetchAllBodyValues": true}],
                ["Email/parse", {"accountId": user.account_id, "blobIds": [blob_id]}],
                ["Email/import", {"accountId": user.account_id, "emails": {"i": {
                    "blobId": blob_id, "mailboxIds": {user.inbox.clone(): true}}}}],
            ]),
        )
        .await;
    responses
        .iter()
        .map(|response| match response[0].as_str() {
            Some("error") => response[1]["type"].as_str().unwrap().to_string(),
            _ => "ok".to_string(),
        })
        .collect()
}

/// Runs `fastview fsck` on the server's storage: (exit code, stdout).
fn fsck(app: &TestApp) -> (i32, String) {
    let output = app.cli().arg("fsck").output().expect("fsck");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

#[tokio::test]
async fn a_corrupt_or_missing_blob_is_refused_where_read_whole_and_the_right_bytes_repair_it() {
    let (app, [user]) = spawn_with_accounts(["ann@example.com"]).await;
    let raw = demo_messages().remove(0);
    let email_id = app
        .ingest(&user, std::slice::from_ref(&raw), 1_700_000_000)
        .await
        .remove(0);
    let got = app.email_get(&user, &[&email_id], &["blobId"]).await;
    let blob_id = got["list"][0]["blobId"].as_str().unwrap().to_string();
    assert_eq!(download(&app, &user, &blob_id).await, (200, raw.clone()));
    assert_eq!(fsck(&app).0, 0);

    // Altered in place, same length.
    let mut altered = raw.clone();
    let last = altered.len() - 3;
    altered[last] ^= 0x20;
    std::fs::write(blob_file(&app, &blob_id), &altered).unwrap();
    let (status, body) = download(&app, &user, &blob_id).await;
    assert_eq!(status, 500);
    let problem: Value = serde_json::from_slice(&body).unwrap();
    let detail = problem["detail"].as_str().unwrap();
    assert!(
        detail.contains(&blob_id) && detail.contains("corrupt"),
        "{problem}"
    );
    assert_eq!(
        whole_reads(&app, &user, &email_id, &blob_id).await,
        ["serverFail", "serverFail", "serverFail"]
    );
    let (code, out) = fsck(&app);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains(&format!("corrupt {blob_id}")), "{out}");

    // Uploading the original bytes repairs it.
    let (status, uploaded) = upload(&app, &user, raw.clone()).await;
    assert_eq!(status, 201);
    assert_eq!(uploaded["blobId"], json!(blob_id));
    assert_eq!(download(&app, &user, &blob_id).await, (200, raw.clone()));
    // (Email/import of it now answers alreadyExists: the message is there.)
    assert_eq!(
        whole_reads(&app, &user, &email_id, &blob_id).await,
        ["ok", "ok", "ok"]
    );
    assert_eq!(fsck(&app).0, 0);

    // Missing (truncated to nothing, then removed): refused the same way,
    // repaired by importing the same message again.
    std::fs::write(blob_file(&app, &blob_id), b"").unwrap();
    assert_eq!(download(&app, &user, &blob_id).await.0, 500);
    std::fs::remove_file(blob_file(&app, &blob_id)).unwrap();
    let (status, body) = download(&app, &user, &blob_id).await;
    assert_eq!(status, 500);
    let problem: Value = serde_json::from_slice(&body).unwrap();
    assert!(
        problem["detail"].as_str().unwrap().contains("missing"),
        "{problem}"
    );
    assert_eq!(
        whole_reads(&app, &user, &email_id, &blob_id).await,
        ["serverFail", "serverFail", "serverFail"]
    );
    let (code, out) = fsck(&app);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains(&format!("missing {blob_id}")), "{out}");
    app.ingest(&user, std::slice::from_ref(&raw), 1_700_000_000)
        .await;
    assert_eq!(download(&app, &user, &blob_id).await, (200, raw));
    assert_eq!(fsck(&app).0, 0);
}

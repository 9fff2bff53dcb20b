//! A full disk seen by a client (issue 13 item 3): on a store that cannot
//! grow, Email/import answers `serverUnavailable` with a description that
//! says why, reads go on, and once the user deletes mail, imports work
//! again on the same running server. The store is SQLite capped with
//! `max_page_count`, which fails exactly as a full disk does (`SQLITE_FULL`).

use std::sync::Arc;

use fastview::app::App;
use fastview::blob::BlobStore;
use fastview::store::sqlite::SqliteStore;
use serde_json::{Value, json};

use crate::migrate::upload;
use crate::support::spawn_app_on;

/// A message with a header block of about 40 KiB.
fn big(n: usize) -> Vec<u8> {
    let filler = "x".repeat(1000);
    let mut raw = format!("From: a@example.com\r\nSubject: big {n}\r\n");
    for line in 0..40 {
        raw.push_str(&format!("X-Filler-{line}: {filler}\r\n"));
    }
    raw.push_str("\r\nbody\r\n");
    raw.into_bytes()
}

fn import(blob_id: &Value, inbox: &str) -> Value {
    json!({"m": {"blobId": blob_id, "mailboxIds": {inbox: true}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn import_on_a_full_store_is_server_unavailable_and_recovers_after_deleting_mail() {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}", dir.path().join("fastview.db").display());
    let store = SqliteStore::connect_capped(&url, 4, Some(1024 * 1024))
        .await
        .expect("open capped sqlite");
    let app = App {
        store: Arc::new(store),
        blobs: Arc::new(BlobStore::local(dir.path().join("blobs")).expect("blobs")),
        data_dir: dir.path().to_path_buf(),
    };
    let server = spawn_app_on(app, dir, None).await;
    let ann = server.account("ann@example.com").await;
    let mut blobs = Vec::new();
    for n in 0..60 {
        blobs.push(upload(&server, &ann, big(n)).await["blobId"].clone());
    }

    let mut imported = Vec::new();
    let refusal = loop {
        let blob = &blobs[imported.len()];
        assert!(imported.len() + 1 < blobs.len(), "1 MiB never filled up");
        let response = server
            .call(
                &ann,
                json!([["Email/import", {"accountId": ann.account_id, "emails": import(blob, &ann.inbox)}]]),
            )
            .await;
        match response[0][0].as_str() {
            Some("Email/import") => {
                imported.push(response[0][1]["created"]["m"]["id"].clone());
            }
            _ => break response[0].clone(),
        }
    };
    assert_eq!(refusal[0], "error", "{refusal}");
    assert_eq!(refusal[1]["type"], "serverUnavailable", "{refusal}");
    let description = refusal[1]["description"].as_str().unwrap_or_default();
    assert!(description.contains("storage is full"), "{description}");
    assert!(imported.len() >= 5, "only {} imports fit", imported.len());

    // Reads go on.
    let got = server.email_get(&ann, &imported, &["subject"]).await;
    assert_eq!(got["list"].as_array().unwrap().len(), imported.len());

    // The user deletes half the mail; the same server imports again.
    let gone: Vec<Value> = imported[..imported.len() / 2].to_vec();
    let set = server
        .call_in(&ann, "Email/set", json!({"destroy": gone}))
        .await;
    assert_eq!(
        set["destroyed"].as_array().unwrap().len(),
        gone.len(),
        "{set}"
    );
    let again = server
        .call_in(
            &ann,
            "Email/import",
            json!({"emails": import(&blobs[blobs.len() - 1], &ann.inbox)}),
        )
        .await;
    assert!(again["created"]["m"]["id"].is_string(), "{again}");
}

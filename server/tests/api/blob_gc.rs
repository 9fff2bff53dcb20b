//! The blob garbage collector: blobs nothing refers to are deleted (of
//! destroyed emails, of removed accounts, uploads unused past their TTL),
//! blobs another account still refers to stay, and a blob a writer starts to
//! refer to while the collector is deleting it ends up in place.

use std::time::Duration;

use fastview::blob::{DELETING_PREFIX, blob_id_of};
use fastview::mail::gc::{GcOptions, collect};
use serde_json::json;

use crate::support::{TestAccount, TestApp, demo_messages, spawn_with_accounts};
use crate::uploads::upload;

async fn gc(app: &TestApp, options: GcOptions) -> fastview::mail::gc::GcReport {
    collect(app.app.store.as_ref(), &app.app.blobs, options)
        .await
        .expect("gc")
}

/// Asserts an Email/get of `ids` with every body value lists `count` emails
/// (their blobs are read).
async fn assert_bodies_read(app: &TestApp, user: &TestAccount, ids: &[String], count: usize) {
    let got = app
        .call_in(
            user,
            "Email/get",
            json!({"ids": ids, "properties": ["bodyValues"], "fetchAllBodyValues": true}),
        )
        .await;
    assert_eq!(got["list"].as_array().unwrap().len(), count, "{got}");
}

async fn destroy(app: &TestApp, user: &TestAccount, ids: &[String]) {
    let set = app
        .call1(
            user,
            "Email/set",
            json!({"accountId": user.account_id, "destroy": ids}),
        )
        .await;
    assert_eq!(
        set["destroyed"].as_array().unwrap().len(),
        ids.len(),
        "{set}"
    );
}

async fn present(app: &TestApp, raw: &[u8]) -> bool {
    let id = blob_id_of(raw);
    app.app.blobs.exists(&id).await.unwrap()
}

#[tokio::test]
async fn blobs_of_destroyed_emails_go_and_blobs_another_account_holds_stay() {
    let (app, [ann, bob]) = spawn_with_accounts(["ann@example.com", "bob@example.com"]).await;
    let messages = demo_messages();
    let (shared, own) = (messages[0].clone(), messages[1].clone());
    let ann_ids = app
        .ingest(&ann, &[shared.clone(), own.clone()], 1_700_000_000)
        .await;
    let bob_ids = app
        .ingest(&bob, std::slice::from_ref(&shared), 1_700_000_000)
        .await;
    let report = gc(&app, GcOptions::default()).await;
    assert_eq!((report.blobs_scanned, report.blobs_deleted), (2, 0));

    destroy(&app, &ann, &ann_ids).await;
    let report = gc(&app, GcOptions::default()).await;
    assert_eq!(report.blobs_deleted, 1);
    assert!(!present(&app, &own).await);
    assert!(present(&app, &shared).await, "bob still holds it");
    assert_bodies_read(&app, &bob, &bob_ids, 1).await;

    destroy(&app, &bob, &bob_ids).await;
    assert_eq!(gc(&app, GcOptions::default()).await.blobs_deleted, 1);
    assert!(!present(&app, &shared).await);
}

#[tokio::test]
async fn account_remove_deletes_its_mail_and_the_blobs_only_it_held() {
    let (app, [ann, bob]) = spawn_with_accounts(["ann@example.com", "bob@example.com"]).await;
    let messages = demo_messages();
    let (shared, own) = (messages[0].clone(), messages[1].clone());
    app.ingest(&ann, &[shared.clone(), own.clone()], 1_700_000_000)
        .await;
    let bob_ids = app
        .ingest(&bob, std::slice::from_ref(&shared), 1_700_000_000)
        .await;
    let upload_only = b"an upload ann never used".to_vec();
    assert_eq!(upload(&app, &ann, upload_only.clone()).await.0, 201);

    let output = app
        .cli()
        .args(["account", "remove", &ann.email])
        .output()
        .expect("account remove");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("2 blobs"), "{stdout}");
    assert!(!present(&app, &own).await, "ann's own message is gone");
    assert!(!present(&app, &upload_only).await, "ann's upload is gone");
    assert!(present(&app, &shared).await, "bob's copy stays");
    let counts = app.app.store.raw_counts(Some(ann.id)).await.unwrap();
    assert_eq!((counts.emails, counts.account_blobs), (0, 0), "{counts:?}");
    assert_bodies_read(&app, &bob, &bob_ids, 1).await;
}

#[tokio::test]
async fn unused_uploads_expire_after_their_ttl_and_imported_ones_stay() {
    let (app, [ann]) = spawn_with_accounts(["ann@example.com"]).await;
    let messages = demo_messages();
    let (unused, imported) = (messages[0].clone(), messages[1].clone());
    assert_eq!(upload(&app, &ann, unused.clone()).await.0, 201);
    let (_, uploaded) = upload(&app, &ann, imported.clone()).await;
    let import = app.import_to_inbox(&ann, &uploaded["blobId"]).await;
    assert!(import["created"]["i"].is_object(), "{import}");

    // Younger than the TTL: kept.
    let report = gc(&app, GcOptions::default()).await;
    assert_eq!((report.uploads_expired, report.blobs_deleted), (0, 0));
    // Past a TTL (0 here; the CLI's least is an hour): the unused upload goes.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let expired = GcOptions {
        upload_ttl: Duration::ZERO,
    };
    let report = gc(&app, expired).await;
    assert_eq!((report.uploads_expired, report.blobs_deleted), (1, 1));
    assert!(!present(&app, &unused).await);
    assert!(present(&app, &imported).await);
    let download = app
        .get_as(
            format!(
                "{}/jmap/download/{}/{}/x",
                app.base,
                ann.account_id,
                blob_id_of(&unused)
            ),
            &ann.email,
            crate::support::PASSWORD,
        )
        .await;
    assert_eq!(download.status(), 404);
}

#[tokio::test]
async fn a_blob_referred_to_while_the_collector_deletes_it_ends_up_in_place() {
    let (app, [ann, bob]) = spawn_with_accounts(["ann@example.com", "bob@example.com"]).await;
    let messages = demo_messages();
    let blobs = &app.app.blobs;
    for (i, raw) in messages[..2].iter().enumerate() {
        let ids = app
            .ingest(&ann, std::slice::from_ref(raw), 1_700_000_000)
            .await;
        destroy(&app, &ann, &ids).await;
        let id = blob_id_of(raw);
        // The collector's first phase: unreferenced, set aside.
        assert!(blobs.set_aside(&id).await.unwrap());
        assert!(!blobs.exists(&id).await.unwrap());
        if i == 0 {
            // A writer imports the same bytes meanwhile: its ingest writes the
            // blob again and commits its reference.
            app.ingest(&bob, std::slice::from_ref(raw), 1_700_000_000)
                .await;
        } else {
            // A reference committed without writing the blob (an upload's
            // grant, committed before its rename).
            app.app
                .store
                .add_blob(bob.id, &id, raw.len() as i64)
                .await
                .unwrap();
        }
        // The second phase (here: the next run finishing what was set aside).
        let report = gc(&app, GcOptions::default()).await;
        assert_eq!(report.blobs_deleted, 0, "{i}");
        assert_eq!(
            blobs.get(&id).await.unwrap().as_deref(),
            Some(&raw[..]),
            "{i}"
        );
        assert!(blobs.list(Some(DELETING_PREFIX)).await.unwrap().is_empty());
    }
}

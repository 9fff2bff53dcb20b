//! The API round trip on the S3 blob store (only when `FASTVIEW_TEST_S3_URL`
//! names a bucket, e.g. `s3://fastview-test` on the local S3-compatible
//! server `.ci/run` starts, with the `AWS_*` variables set): upload,
//! Email/import, Email/get at the full level, download byte-identical, and a
//! second node with its own data dir reading the same blobs. Without the
//! variable the test is skipped, or fails when `FASTVIEW_TEST_REQUIRE` names `s3`.

use fastview::blob::{BlobStore, blob_id_of};
use serde_json::json;

use crate::migrate::upload;
use crate::support::{PASSWORD, require, spawn_app_with_blob_url, spawn_second_node};

/// A prefix no other run uses under `FASTVIEW_TEST_S3_URL`; `None` (after
/// [`require`]) when that is not set.
fn fresh_s3_prefix() -> Option<String> {
    let Some(base) = std::env::var("FASTVIEW_TEST_S3_URL")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        require("s3", "FASTVIEW_TEST_S3_URL is not set");
        return None;
    };
    Some(format!(
        "{}/t-{}-{:08x}",
        base.trim_end_matches('/'),
        std::process::id(),
        rand::random::<u32>()
    ))
}

#[tokio::test]
async fn the_api_round_trip_runs_on_the_s3_blob_store() {
    let Some(url) = fresh_s3_prefix() else {
        return;
    };
    let app = spawn_app_with_blob_url(&url).await;
    assert!(app.app.blobs.url().starts_with("s3://"));
    let user = app.account("ann@example.com").await;
    let raw = b"From: Ann <ann@example.com>\r\nTo: bob@example.org\r\nSubject: Stored in S3\r\n\
        MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n\
        --b\r\nContent-Type: text/plain\r\n\r\nThe body.\r\n\
        --b\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=x.bin\r\n\
        Content-Transfer-Encoding: base64\r\n\r\nAAECAwQF\r\n--b--\r\n"
        .to_vec();
    let uploaded = upload(&app, &user, raw.clone()).await;
    let blob_id = blob_id_of(&raw);
    assert_eq!(uploaded["blobId"], json!(blob_id));
    // The object is in the bucket under the sharded key.
    let s3 = BlobStore::open(&url).unwrap();
    assert_eq!(s3.get(&blob_id).await.unwrap(), Some(raw.clone()));

    let imported = app.import_to_inbox(&user, &blob_id).await;
    let id = imported["created"]["i"]["id"].clone();
    assert!(id.is_string(), "{imported}");
    let reads = app.metric("fastview_blob_reads_total").await;
    let got = app
        .call_in(&user, "Email/get", json!({"ids": [id],
            "properties": ["subject", "bodyValues", "attachments", "preview"], "fetchAllBodyValues": true}))
        .await;
    let email = &got["list"][0];
    assert_eq!(email["subject"], json!("Stored in S3"));
    let values: Vec<&serde_json::Value> = email["bodyValues"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| &v["value"])
        .collect();
    assert_eq!(values, vec![&json!("The body.")], "{email}");
    assert_eq!(app.metric("fastview_blob_reads_total").await, reads + 1.0);
    let part_blob = email["attachments"][0]["blobId"]
        .as_str()
        .unwrap()
        .to_string();

    let download = |app_base: String, blob: String| {
        let client = app.client.clone();
        let account_id = user.account_id.clone();
        let email = user.email.clone();
        async move {
            let response = client
                .get(format!("{app_base}/jmap/download/{account_id}/{blob}/x"))
                .basic_auth(email, Some(PASSWORD))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 200);
            response.bytes().await.unwrap().to_vec()
        }
    };
    assert_eq!(download(app.base.clone(), blob_id.clone()).await, raw);
    assert_eq!(
        download(app.base.clone(), part_blob.clone()).await,
        vec![0, 1, 2, 3, 4, 5]
    );

    // Another node on the same database and bucket serves the same bytes.
    let second = spawn_second_node(&app).await;
    assert_eq!(second.app.blobs.url(), app.app.blobs.url());
    assert_eq!(download(second.base.clone(), blob_id.clone()).await, raw);
}

#[tokio::test]
async fn uploads_stream_in_parts_and_the_collector_deletes_on_the_s3_blob_store() {
    let Some(url) = fresh_s3_prefix() else {
        return;
    };
    let app = spawn_app_with_blob_url(&url).await;
    let user = app.account("big@example.com").await;
    // Three multipart parts (5 MiB each on S3), renamed into place.
    let bytes: Vec<u8> = (0..12u32 << 20).map(|i| (i % 251) as u8).collect();
    let (status, uploaded) = crate::uploads::upload(&app, &user, bytes.clone()).await;
    assert_eq!(status, 201, "{uploaded}");
    let blob_id = blob_id_of(&bytes);
    assert_eq!(uploaded["blobId"], json!(blob_id));
    let s3 = BlobStore::open(&url).unwrap();
    assert_eq!(s3.get(&blob_id).await.unwrap(), Some(bytes));
    assert_eq!(crate::uploads::staged(&s3).await, 0);
    // Unused past its TTL: the collector deletes it from the bucket.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let options = fastview::mail::gc::GcOptions {
        upload_ttl: std::time::Duration::ZERO,
    };
    let report = fastview::mail::gc::collect(app.app.store.as_ref(), &app.app.blobs, options)
        .await
        .unwrap();
    assert_eq!((report.uploads_expired, report.blobs_deleted), (1, 1));
    assert!(!s3.exists(&blob_id).await.unwrap());
    let aside = s3
        .list(Some(fastview::blob::DELETING_PREFIX))
        .await
        .unwrap();
    assert!(aside.is_empty(), "{aside:?}");
}

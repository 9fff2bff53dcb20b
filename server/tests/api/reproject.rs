//! `fastview reproject`: rebuilds the fast-view projection; resumable from
//! its checkpoint, idempotent, and the rebuilt rows equal the ingest rows.

use serde_json::json;

use crate::support::{demo_messages, run_ok, spawn_with_messages};

#[tokio::test]
async fn reproject_rebuilds_resumes_and_is_idempotent() {
    let (app, user, ids) = spawn_with_messages(&demo_messages()).await;
    let fast_view = json!({"accountId": user.account_id, "ids": ids, "properties": ["preview", "hasAttachment"]});
    let before = app.call1(&user, "Email/get", fast_view.clone()).await;
    let store = &app.app.store;
    let missing = || async {
        store
            .email_blobs(Some(user.id), 0, 1000, true)
            .await
            .unwrap()
            .len()
    };
    let reproject = || {
        let output = run_ok(
            app.cli()
                .args(["reproject", "--account", "ann@example.com"]),
        );
        String::from_utf8(output.stdout).unwrap()
    };

    assert_eq!(
        store.clear_fast_views(Some(user.id)).await.unwrap(),
        ids.len() as u64
    );
    assert_eq!(missing().await, ids.len());
    // An interrupted run left a checkpoint after the 5th email: the next run resumes after it.
    let fifth = fastview::jmap::ids::parse_email_id(&ids[4]).unwrap();
    let checkpoint = app
        .app
        .data_dir
        .join(format!("reproject.checkpoint.{}", user.id));
    // Written under another schema (or with no version): not resumed.
    let schema = fastview::store::schema_version();
    for stale in [fifth.to_string(), format!("{fifth} {}", schema - 1)] {
        std::fs::write(&checkpoint, stale).unwrap();
        assert_eq!(reproject(), format!("reprojected {} emails\n", ids.len()));
    }
    assert_eq!(
        store.clear_fast_views(Some(user.id)).await.unwrap(),
        ids.len() as u64
    );
    std::fs::write(&checkpoint, format!("{fifth} {schema}")).unwrap();
    assert_eq!(
        reproject(),
        format!("reprojected {} emails\n", ids.len() - 5)
    );
    assert_eq!(missing().await, 5);
    // A full run rebuilds everything; a second one changes nothing.
    assert_eq!(reproject(), format!("reprojected {} emails\n", ids.len()));
    assert_eq!(missing().await, 0);
    assert_eq!(reproject(), format!("reprojected {} emails\n", ids.len()));
    let fresh = crate::support::spawn_sibling(&app, Default::default()).await;
    assert_eq!(fresh.call1(&user, "Email/get", fast_view).await, before);
    assert_eq!(fresh.metric("fastview_fast_view_misses_total").await, 0.0);
}

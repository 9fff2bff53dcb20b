//! kill -9 during `fastview import`: no partial message, no projection row
//! or header block without its message, no orphan visible to clients; the
//! next import completes the rest. And processes started together on a new
//! SQLite data dir all start.

use std::process::Stdio;
use std::time::Duration;

use serde_json::json;

use crate::support::spawn_with_accounts;

const MESSAGES: usize = 3000;

fn write_mbox(path: &std::path::Path) {
    let mut mbox = String::new();
    for i in 0..MESSAGES {
        mbox.push_str(&format!(
            "From sender{i}@example.com Mon Sep  2 10:00:00 2024\n\
             From: Sender {i} <sender{i}@example.com>\nTo: r@example.org\nSubject: Crash test {i}\n\
             Message-ID: <crash{i}@example.com>\nDate: Mon, 2 Sep 2024 10:00:00 +0000\n\n\
             Body of message {i}, long enough to make the blob write take a moment.\n{}\n\n",
            "x".repeat(2000)
        ));
    }
    std::fs::write(path, mbox).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_import_loses_nothing_and_the_next_import_completes() {
    let (app, [user]) = spawn_with_accounts(["ann@example.com"]).await;
    let dir = tempfile::tempdir().unwrap();
    let mbox = dir.path().join("big.mbox");
    write_mbox(&mbox);
    let import = || {
        let mut command = app.cli();
        command
            .args(["import", "--account", "ann@example.com"])
            .arg(&mbox)
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        command
    };
    let mut counts = Vec::new();
    for delay_ms in [150u64, 400, 700, 250, 900, 1500, 2500] {
        let mut child = import().spawn().unwrap();
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        counts.push(check_consistent(&app, &user).await);
    }
    // The kills did land mid-import.
    assert!(counts.iter().any(|n| *n > 0 && *n < MESSAGES), "{counts:?}");
    let output = import().output().unwrap();
    assert!(output.status.success());
    check_consistent(&app, &user).await;
    let total = app
        .call_in(
            &user,
            "Email/query",
            json!({"filter": {"inMailbox": user.inbox}, "calculateTotal": true, "limit": 0}),
        )
        .await["total"]
        .clone();
    assert_eq!(total, json!(MESSAGES));
}

/// Every visible email has its header block, its projection row and its blob,
/// and Email/get serves all of them in full.
async fn check_consistent(
    app: &crate::support::TestApp,
    user: &crate::support::TestAccount,
) -> usize {
    let store = &app.app.store;
    let rows = store
        .email_blobs(Some(user.id), 0, i64::MAX, false)
        .await
        .unwrap();
    let ids: Vec<i64> = rows.iter().map(|(id, _)| *id).collect();
    assert!(
        store
            .email_blobs(Some(user.id), 0, i64::MAX, true)
            .await
            .unwrap()
            .is_empty(),
        "projection rows missing"
    );
    for chunk in ids.chunks(500) {
        assert_eq!(
            store.header_blocks(user.id, chunk).await.unwrap().len(),
            chunk.len(),
            "header blocks missing"
        );
    }
    for (_, blob_id) in &rows {
        assert!(
            app.app.blobs.get(blob_id).await.unwrap().is_some(),
            "blob {blob_id} missing"
        );
    }
    let query = app
        .call1(user, "Email/query", json!({"accountId": user.account_id, "filter": {"inMailbox": user.inbox}, "calculateTotal": true, "limit": 0}))
        .await;
    assert_eq!(query["total"], json!(rows.len()));
    rows.len()
}

/// Six `fastview account add` processes started at once on a new data dir
/// race to create the schema: every one of them starts and adds its account.
#[test]
fn processes_started_together_on_a_new_data_dir_all_start() {
    for _ in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let children: Vec<_> = (0..6)
            .map(|n| {
                std::process::Command::new(env!("CARGO_BIN_EXE_fastview"))
                    .arg("--data-dir")
                    .arg(dir.path())
                    .args([
                        "account",
                        "add",
                        &format!("user{n}@example.com"),
                        "--password-stdin",
                    ])
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut child in children {
            use std::io::Write;
            // A child that failed before reading its password closed its
            // stdin: its exit status and stderr below say why.
            let _ = child.stdin.take().unwrap().write_all(b"secret\n");
            let output = child.wait_with_output().unwrap();
            assert!(
                output.status.success(),
                "{}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let list = std::process::Command::new(env!("CARGO_BIN_EXE_fastview"))
            .arg("--data-dir")
            .arg(dir.path())
            .args(["account", "list"])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&list.stdout).lines().count(), 6);
    }
}

/// kill -9 between a submission's commit and its delivery (the queue row
/// written, nothing delivered yet), and again after a copy was stored but
/// before the delivery was recorded: `fastview serve` delivers what was
/// left, each recipient gets exactly one copy, and a restart delivers
/// nothing again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_between_queue_and_send_neither_loses_nor_doubles() {
    use crate::delivery_queue::{first_delivery_status, nothing_to_take, queue_delivery};
    use fastview::mail::{delivery, submission};

    let (app, [ann, bob, carol]) =
        spawn_with_accounts(["ann@example.com", "bob@example.com", "carol@example.com"]).await;
    let store = app.app.store.as_ref();
    let message =
        b"From: ann@example.com\r\nTo: bob@example.com, carol@example.com\r\nSubject: Queued\r\n\r\nhi\r\n"
            .to_vec();
    let blob_id = app.app.blobs.put(message.clone()).await.unwrap();
    // Sent a quarter of an hour ago: the lease of the node that crashed
    // ran out.
    let send_at = chrono::Utc::now().timestamp() - 900;
    let (submission, _) = queue_delivery(
        store,
        ann.id,
        blob_id,
        &["bob@example.com", "carol@example.com"],
        send_at,
        "{}".into(),
    )
    .await;
    // Carol's copy was stored before the crash; the record of it was not.
    let copy =
        submission::received_copy(&message, delivery::HOST, &submission.to_string(), send_at);
    app.ingest(&carol, &[copy], send_at).await;

    let inbox_count = |user: &crate::support::TestAccount| {
        let user = user.clone();
        let app = &app;
        async move {
            app.call_in(
                &user,
                "Email/query",
                json!({"filter": {"inMailbox": user.inbox},
                    "calculateTotal": true}),
            )
            .await["total"]
                .as_i64()
                .unwrap()
        }
    };
    let serve = || {
        let mut command = app.cli();
        command
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--metrics-listen",
                "off",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        command.spawn().unwrap()
    };
    let mut server = serve();
    let mut delivered = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if inbox_count(&bob).await == 1 {
            delivered = true;
            break;
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.kill().unwrap(); // SIGKILL
    server.wait().unwrap();
    assert!(delivered, "the queued delivery was not made");
    let mut server = serve();
    tokio::time::sleep(Duration::from_secs(2)).await;
    server.kill().unwrap();
    server.wait().unwrap();
    assert_eq!(inbox_count(&bob).await, 1);
    assert_eq!(inbox_count(&carol).await, 1);
    let now = chrono::Utc::now().timestamp();
    assert!(nothing_to_take(store, now + 3_600, 60).await);
    let status = first_delivery_status(store, ann.id).await;
    assert_eq!(status["bob@example.com"]["delivered"], "yes");
    assert_eq!(status["carol@example.com"]["delivered"], "yes");
}

//! Uploads (RFC 8620 §6.1) bounded and streamed: `maxConcurrentUpload` is
//! enforced per account with the `limit` problem, a large upload streams into
//! the blob store byte-identical under its SHA-256, an upload by an account
//! removed while its credentials were cached leaves nothing behind, and a
//! full disk answers 507 with a problem JSON (and uploads work again once
//! space frees).

use std::path::{Path, PathBuf};
use std::time::Duration;

use fastview::blob::{BlobStore, STAGING_PREFIX, blob_id_of};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::bad_input::base64_basic;
use crate::support::{
    PASSWORD, TestAccount, TestApp, require, spawn_app_with_blob_url, spawn_with_accounts,
};

/// Uploads `bytes` as `account`: (status, body).
pub async fn upload(app: &TestApp, account: &TestAccount, bytes: Vec<u8>) -> (u16, Value) {
    app.upload(account, bytes).await
}

/// The local directory of a test server's blob store.
pub fn blob_root(app: &TestApp) -> PathBuf {
    PathBuf::from(
        app.app
            .blobs
            .url()
            .strip_prefix("file://")
            .expect("a local blob store"),
    )
}

/// Objects left under `staging/` (uploads not moved into place).
pub async fn staged(blobs: &BlobStore) -> usize {
    blobs.list(Some(STAGING_PREFIX)).await.expect("list").len()
}

/// An upload whose body is still arriving: headers and the first `sent`
/// octets of a `total`-octet body written on a raw connection.
async fn open_upload(app: &TestApp, account: &TestAccount, total: usize, sent: usize) -> TcpStream {
    let address = app.base.strip_prefix("http://").unwrap();
    let mut stream = TcpStream::connect(address).await.expect("connect");
    let head = format!(
        "POST /jmap/upload/{}/ HTTP/1.1\r\nHost: {address}\r\nAuthorization: Basic {}\r\n\
         Content-Type: application/octet-stream\r\nContent-Length: {total}\r\n\
         Connection: close\r\n\r\n",
        account.account_id,
        base64_basic(&account.email, PASSWORD)
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&vec![b'x'; sent]).await.unwrap();
    stream
}

/// Sends the rest of an [`open_upload`] body and reads the status code.
async fn finish_upload(mut stream: TcpStream, rest: usize) -> u16 {
    stream.write_all(&vec![b'x'; rest]).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    let text = String::from_utf8_lossy(&response);
    text.split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn a_fifth_concurrent_upload_of_one_account_is_refused_with_the_limit_error() {
    let (app, [user, other]) = spawn_with_accounts(["up@example.com", "other@example.com"]).await;
    let session: Value = app
        .get_as(format!("{}/jmap/session", app.base), &user.email, PASSWORD)
        .await
        .json()
        .await
        .unwrap();
    let limit = session["capabilities"]["urn:ietf:params:jmap:core"]["maxConcurrentUpload"]
        .as_u64()
        .unwrap() as usize;
    assert_eq!(limit, 4);
    let (total, sent) = (64 << 10, 1 << 10);
    let mut open = Vec::new();
    for _ in 0..limit {
        open.push(open_upload(&app, &user, total, sent).await);
    }
    // Wait until the server holds every slot of the account (no timing is
    // asserted: the loop only lets the four requests arrive).
    let mut waited = 0;
    loop {
        if app.state.upload_slots.in_use(user.id) == limit {
            break;
        }
        waited += 1;
        assert!(waited < 500, "the four uploads never started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (status, problem) = upload(&app, &user, b"fifth".to_vec()).await;
    assert_eq!(status, 429, "{problem}");
    assert_eq!(problem["type"], json!("urn:ietf:params:jmap:error:limit"));
    assert_eq!(problem["limit"], json!("maxConcurrentUpload"));
    // Per account: another account uploads meanwhile.
    assert_eq!(upload(&app, &other, b"other".to_vec()).await.0, 201);
    // Each of the four completes, and then the account uploads again.
    for stream in open {
        assert_eq!(finish_upload(stream, total - sent).await, 201);
    }
    let (status, uploaded) = upload(&app, &user, b"sixth".to_vec()).await;
    assert_eq!(status, 201, "{uploaded}");
    assert_eq!(staged(&app.app.blobs).await, 0);
}

#[tokio::test]
async fn a_large_upload_streams_into_the_store_byte_identical_under_its_sha256() {
    let (app, [user]) = spawn_with_accounts(["big@example.com"]).await;
    let bytes: Vec<u8> = (0..24u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let expected_id = blob_id_of(&bytes);
    let (status, uploaded) = upload(&app, &user, bytes.clone()).await;
    assert_eq!(status, 201, "{uploaded}");
    assert_eq!(uploaded["blobId"], json!(expected_id));
    assert_eq!(uploaded["size"], json!(bytes.len()));
    let root = blob_root(&app);
    let stored = root
        .join(&expected_id[0..2])
        .join(&expected_id[2..4])
        .join(&expected_id);
    assert_eq!(std::fs::read(&stored).unwrap(), bytes);
    let downloaded = app
        .get_as(
            format!(
                "{}/jmap/download/{}/{expected_id}/big.bin",
                app.base, user.account_id
            ),
            &user.email,
            PASSWORD,
        )
        .await;
    assert_eq!(downloaded.status(), 200);
    assert_eq!(downloaded.bytes().await.unwrap().to_vec(), bytes);
    assert_eq!(staged(&app.app.blobs).await, 0);
    // Over maxSizeUpload (50 MiB) while streaming, without a Content-Length
    // that gives it away: 413, nothing kept.
    let (status, problem) = raw_upload(&app, &user, 51 << 20, true).await;
    assert_eq!(status, 413, "{problem}");
    assert_eq!(staged(&app.app.blobs).await, 0);
}

/// Uploads `total` octets in 64 KiB chunks on a raw connection, with
/// chunked transfer encoding (no Content-Length) or a Content-Length, reading
/// the response while the body is still being sent (the server may answer
/// and close before it ends). Returns (status, problem JSON).
async fn raw_upload(
    app: &TestApp,
    account: &TestAccount,
    total: usize,
    chunked: bool,
) -> (u16, Value) {
    let address = app.base.strip_prefix("http://").unwrap();
    let stream = TcpStream::connect(address).await.expect("connect");
    let (mut reader, mut writer) = stream.into_split();
    let response = tokio::spawn(async move {
        let mut response = Vec::new();
        let _ = reader.read_to_end(&mut response).await;
        response
    });
    let framing = if chunked {
        "Transfer-Encoding: chunked".to_string()
    } else {
        format!("Content-Length: {total}")
    };
    let head = format!(
        "POST /jmap/upload/{}/ HTTP/1.1\r\nHost: {address}\r\nAuthorization: Basic {}\r\n\
         {framing}\r\nConnection: close\r\n\r\n",
        account.account_id,
        base64_basic(&account.email, PASSWORD)
    );
    let _ = writer.write_all(head.as_bytes()).await;
    let size = 64 << 10;
    let chunk = if chunked {
        [
            format!("{size:x}\r\n").into_bytes(),
            vec![7u8; size],
            b"\r\n".to_vec(),
        ]
        .concat()
    } else {
        vec![7u8; size]
    };
    for _ in 0..total.div_ceil(size) {
        if writer.write_all(&chunk).await.is_err() {
            break;
        }
    }
    if chunked {
        let _ = writer.write_all(b"0\r\n\r\n").await;
    }
    let response = response.await.unwrap();
    let text = String::from_utf8_lossy(&response);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .and_then(|(_, body)| serde_json::from_str(body).ok())
        .unwrap_or(Value::Null);
    (status, body)
}

#[tokio::test]
async fn an_upload_by_a_removed_account_is_refused_and_leaves_no_blob() {
    let (app, [user]) = spawn_with_accounts(["gone@example.com"]).await;
    // The credentials are verified and cached by this request.
    assert_eq!(upload(&app, &user, b"before".to_vec()).await.0, 201);
    app.app.store.remove_account(&user.email).await.unwrap();
    let bytes = b"uploaded inside the credential window".to_vec();
    let (status, problem) = upload(&app, &user, bytes.clone()).await;
    assert!(status == 404 || status == 401, "{status} {problem}");
    assert!(problem["type"].is_string(), "{problem}");
    assert!(!app.app.blobs.exists(&blob_id_of(&bytes)).await.unwrap());
    assert_eq!(staged(&app.app.blobs).await, 0);
}

/// A tmpfs of `octets` mounted at `path`, unmounted when dropped.
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(path: &Path, octets: usize) -> Option<Self> {
        std::fs::create_dir_all(path).ok()?;
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={octets}"), "tmpfs"])
            .arg(path)
            .stderr(std::process::Stdio::null())
            .status()
            .ok()?;
        status.success().then(|| Self(path.to_path_buf()))
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

#[tokio::test]
async fn an_upload_to_a_full_disk_is_507_and_uploads_work_again_when_space_frees() {
    let dir = tempfile::tempdir().unwrap();
    let Some(disk) = SmallDisk::mount(&dir.path().join("blobs"), 1 << 20) else {
        require("tmpfs", "cannot mount a tmpfs (needs root)");
        return;
    };
    let app = spawn_app_with_blob_url(&format!("file://{}", disk.0.display())).await;
    let user = app.account("full@example.com").await;
    let (status, problem) = raw_upload(&app, &user, 2 << 20, false).await;
    assert_eq!(status, 507, "{problem}");
    assert_eq!(problem["status"], json!(507));
    assert!(
        problem["detail"].as_str().unwrap().contains("full"),
        "{problem}"
    );
    // The failed upload's staging file goes (asynchronously, on drop); then
    // a small upload fits again.
    let mut attempts = 0;
    let status = loop {
        let (status, _) = upload(&app, &user, vec![2u8; 100 << 10]).await;
        attempts += 1;
        if status == 201 || attempts == 50 {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(status, 201);
    drop(app);
}

/// An upload is never idle, so it must keep a pace: after the body deadline
/// (twice the header-read timeout) it must average `--min-upload-rate`,
/// else 408, the connection closes and nothing is staged; a quick upload on
/// the same server is unaffected.
#[tokio::test]
async fn an_upload_that_trickles_in_gets_408_and_leaves_nothing() {
    let app = crate::support::spawn_app_with(fastview::app::ServeOptions {
        connections: fastview::app::ConnectionLimits {
            header_read_timeout: Duration::from_secs(1),
            min_upload_rate: 1 << 20,
            ..fastview::app::ConnectionLimits::default()
        },
        ..fastview::app::ServeOptions::default()
    })
    .await;
    let user = app.account("slow@example.com").await;
    let mut stream = open_upload(&app, &user, 64 << 10, 10).await;
    // Ten octets a quarter second: never idle, far under 1 MiB/s.
    let trickle = async {
        for _ in 0..40 {
            tokio::time::sleep(Duration::from_millis(250)).await;
            if stream.write_all(&[b'x'; 10]).await.is_err() {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(4), trickle).await;
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response).await;
    assert!(
        response.starts_with(b"HTTP/1.1 408"),
        "{}",
        String::from_utf8_lossy(&response)
    );
    assert_eq!(staged(&app.app.blobs).await, 0);
    let (status, uploaded) = upload(&app, &user, vec![b'y'; 256 << 10]).await;
    assert_eq!(status, 201, "{uploaded}");
}

/// A burst then silence: however much arrived, a silence longer than the
/// body deadline (twice the header-read timeout) is 408 (found by a fresh
/// reviewer: a 50 MiB burst bought almost two hours of silence).
#[tokio::test]
async fn an_upload_that_bursts_then_goes_silent_gets_408() {
    let app = crate::support::spawn_app_with(fastview::app::ServeOptions {
        connections: fastview::app::ConnectionLimits {
            header_read_timeout: Duration::from_secs(1),
            min_upload_rate: 1,
            ..fastview::app::ConnectionLimits::default()
        },
        ..fastview::app::ServeOptions::default()
    })
    .await;
    let user = app.account("burst@example.com").await;
    // 256 KiB at 1 octet/s would allow days of silence by the average alone.
    let mut stream = open_upload(&app, &user, 512 << 10, 256 << 10).await;
    let mut response = Vec::new();
    let read =
        tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut response)).await;
    assert!(read.is_ok(), "the silent upload was never cut off");
    assert!(
        response.starts_with(b"HTTP/1.1 408"),
        "{}",
        String::from_utf8_lossy(&response)
    );
    assert_eq!(staged(&app.app.blobs).await, 0);
}

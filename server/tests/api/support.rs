//! Test support: `spawn_app()` starts a real server on port 0 with a
//! temporary data dir; helpers create accounts, ingest fixture messages and
//! make JMAP calls. When `FASTVIEW_TEST_POSTGRES_URL` is set, each server
//! stores its rows in a fresh PostgreSQL database on that server (dropped at
//! the end of the test) and only its blobs in the temporary data dir.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use fastview::account::hash_password;
use fastview::app::{App, ServeOptions};
use fastview::http::AppState;
use fastview::jmap::ids;
use fastview::mail::ingest::{prepare, store_batch};
use fastview::proxy::ProxyOptions;
use serde_json::{Value, json};

#[path = "../common/cyrus.rs"]
pub mod cyrus;
#[path = "../common/dovecot.rs"]
pub mod dovecot;
#[path = "../common/imaplib.rs"]
pub mod imaplib;
#[path = "../common/pg_db.rs"]
mod pg_db;
#[path = "../common/require.rs"]
mod require;

pub use pg_db::TestDatabase;
pub use require::require;

/// The password of every test account.
pub const PASSWORD: &str = "test-password";

/// The Email properties of the metadata read level: what the rows hold.
pub const METADATA_PROPERTIES: [&str; 7] = [
    "id",
    "blobId",
    "threadId",
    "mailboxIds",
    "keywords",
    "size",
    "receivedAt",
];

/// The Email properties of RFC 8621 §4.1 up to `preview`, in its order
/// (the metadata, the header convenience properties, the fast view), then
/// `more`.
pub fn email_properties_and(more: &[&str]) -> Value {
    let headers = [
        "messageId",
        "inReplyTo",
        "references",
        "sender",
        "from",
        "to",
        "cc",
        "bcc",
        "replyTo",
        "subject",
        "sentAt",
        "hasAttachment",
        "preview",
    ];
    let all: Vec<&str> = METADATA_PROPERTIES
        .iter()
        .chain(&headers)
        .chain(more)
        .copied()
        .collect();
    json!(all)
}

/// A running server and what a test needs to talk to it.
pub struct TestApp {
    pub base: String,
    /// The base URL of the metrics listener (`GET /metrics`).
    pub metrics_base: String,
    pub app: App,
    /// The server's shared state (metrics, JMAP side), for white-box checks.
    pub state: Arc<AppState>,
    /// In front of an upstream: the proxy wing, for white-box checks.
    pub proxy: Option<fastview::proxy::Proxy>,
    pub client: reqwest::Client,
    /// The PostgreSQL database URL of this server's rows; `None` on SQLite.
    pub database_url: Option<String>,
    _dir: tempfile::TempDir,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    /// Declared last: dropped after the server is told to stop.
    _database: Option<TestDatabase>,
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

/// One test account.
#[derive(Debug, Clone)]
pub struct TestAccount {
    pub id: i64,
    pub email: String,
    pub account_id: String,
    pub inbox: String,
}

/// The account `user` (password [`PASSWORD`]) logs in to on a proxy, as
/// its session names it (the login makes it, in front of IMAP); `id` is
/// the local account number when the id is one of Fastview's, else 0.
pub async fn proxy_login(proxy: &TestApp, user: &str) -> TestAccount {
    let stub = TestAccount {
        id: 0,
        email: user.to_string(),
        account_id: String::new(),
        inbox: String::new(),
    };
    let session = proxy.session(&stub).await;
    let account_id = session["primaryAccounts"]["urn:ietf:params:jmap:mail"]
        .as_str()
        .unwrap_or_else(|| panic!("a session: {session}"))
        .to_string();
    TestAccount {
        id: fastview::jmap::ids::parse_account_id(&account_id).unwrap_or(0),
        account_id,
        ..stub
    }
}

/// A message as IMAP carries it: CRLF line ends (RFC 3501 §4.3).
pub fn crlf(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len() + raw.len() / 32);
    for (i, &byte) in raw.iter().enumerate() {
        if byte == b'\n' && (i == 0 || raw[i - 1] != b'\r') {
            out.push(b'\r');
        }
        out.push(byte);
    }
    out
}

/// Starts a server with default options.
pub async fn spawn_app() -> TestApp {
    spawn_app_with(ServeOptions::default()).await
}

/// Starts a server with default options and one account per address, in
/// that order.
pub async fn spawn_with_accounts<const N: usize>(emails: [&str; N]) -> (TestApp, [TestAccount; N]) {
    let app = spawn_app().await;
    let mut accounts = Vec::with_capacity(N);
    for email in emails {
        accounts.push(app.account(email).await);
    }
    let accounts = accounts.try_into().expect("one account per address");
    (app, accounts)
}

/// Starts a server with default options and one account, ann@example.com,
/// holding `messages` in its inbox (receivedAt from 1,700,000,000 on):
/// (server, account, email ids).
pub async fn spawn_with_messages(messages: &[Vec<u8>]) -> (TestApp, TestAccount, Vec<String>) {
    let (app, [user]) = spawn_with_accounts(["ann@example.com"]).await;
    let ids = app.ingest(&user, messages, 1_700_000_000).await;
    (app, user, ids)
}

/// Starts a server whose JMAP limits are `limits`, other options default.
pub async fn spawn_app_with_limits(limits: fastview::jmap::Limits) -> TestApp {
    spawn_app_with(ServeOptions {
        limits,
        ..ServeOptions::default()
    })
    .await
}

/// Starts a server with the given options: on a fresh PostgreSQL database
/// when `FASTVIEW_TEST_POSTGRES_URL` is set, else on SQLite in the temp dir.
pub async fn spawn_app_with(options: ServeOptions) -> TestApp {
    spawn_in_front_of(options, None).await
}

/// [`spawn_app_with`], in front of an upstream when `upstream` is given
/// (the proxy wing, `serve --upstream`).
pub async fn spawn_in_front_of(options: ServeOptions, upstream: Option<ProxyOptions>) -> TestApp {
    let dir = tempfile::tempdir().expect("temp dir");
    let Some(database) = TestDatabase::create().await else {
        let app = App::open(dir.path(), None).await.expect("open store");
        return spawn_proxy_on(app, dir, options, upstream, None).await;
    };
    let app = App::open_with(dir.path(), Some(&database.url), Some(8))
        .await
        .expect("open store");
    spawn_proxy_on(app, dir, options, upstream, Some(database)).await
}

/// Starts a server on SQLite in a temp dir whatever `FASTVIEW_TEST_POSTGRES_URL`
/// says: for the corpus-wide tests, which run once.
pub async fn spawn_sqlite_app() -> TestApp {
    let dir = tempfile::tempdir().expect("temp dir");
    let app = App::open(dir.path(), None).await.expect("open store");
    spawn_on(app, dir, ServeOptions::default(), None).await
}

/// Starts another server on the same storage as `other` (e.g. with switches off).
pub async fn spawn_sibling(other: &TestApp, options: ServeOptions) -> TestApp {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut sibling = spawn_on(other.app.clone(), dir, options, None).await;
    sibling.database_url = other.database_url.clone();
    sibling
}

/// [`spawn_sibling`] with read levels off: every Email/get at the full
/// level, rendered through the `Value` tree (ADR 0002's "before"), to
/// compare answers with.
pub async fn spawn_full_level_sibling(other: &TestApp) -> TestApp {
    let options = ServeOptions {
        switches: fastview::mail::read_level::ReadSwitches {
            read_levels: false,
            fast_view: true,
        },
        ..ServeOptions::default()
    };
    spawn_sibling(other, options).await
}

/// Starts another node on the same database and blob store as `other`,
/// as a second process would: its own `App` (own pool), caches and
/// credential cache. `other` keeps owning the test database.
pub async fn spawn_second_node(other: &TestApp) -> TestApp {
    let app = App::open_storage(
        &other.app.data_dir,
        other.database_url.as_deref(),
        Some(4),
        Some(other.app.blobs.url()),
    )
    .await
    .expect("open second node");
    let mut node = spawn_on(
        app,
        tempfile::tempdir().expect("temp dir"),
        ServeOptions::default(),
        None,
    )
    .await;
    node.database_url = other.database_url.clone();
    node
}

/// Starts a server like [`spawn_app`] whose blobs live in the blob store
/// `blob_url` names (e.g. `s3://bucket/prefix`) instead of the data dir.
pub async fn spawn_app_with_blob_url(blob_url: &str) -> TestApp {
    let dir = tempfile::tempdir().expect("temp dir");
    let database = TestDatabase::create().await;
    let url = database.as_ref().map(|d| d.url.clone());
    let app = App::open_storage(dir.path(), url.as_deref(), Some(8), Some(blob_url))
        .await
        .expect("open store");
    spawn_on(app, dir, ServeOptions::default(), database).await
}

/// Starts a server on an already opened `app` (its data dir in `dir`);
/// `database_url` is its PostgreSQL database, if any (not dropped by it).
pub async fn spawn_app_on(
    app: App,
    dir: tempfile::TempDir,
    database_url: Option<String>,
) -> TestApp {
    let mut node = spawn_on(app, dir, ServeOptions::default(), None).await;
    node.database_url = database_url;
    node
}

async fn spawn_on(
    app: App,
    dir: tempfile::TempDir,
    options: ServeOptions,
    database: Option<TestDatabase>,
) -> TestApp {
    spawn_proxy_on(app, dir, options, None, database).await
}

async fn spawn_proxy_on(
    app: App,
    dir: tempfile::TempDir,
    options: ServeOptions,
    upstream: Option<ProxyOptions>,
    database: Option<TestDatabase>,
) -> TestApp {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    let metrics_listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind metrics");
    let metrics_address = metrics_listener.local_addr().expect("metrics address");
    let fastview::assembly::Instance {
        router,
        state,
        proxy,
    } = fastview::assembly::assemble(&app, &options, upstream.as_ref());
    let (shutdown, signal) = tokio::sync::oneshot::channel::<()>();
    let (metrics_shutdown, metrics_signal) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(fastview::http::serve(
        listener,
        router,
        options.connections,
        async move {
            let _ = signal.await;
            let _ = metrics_shutdown.send(());
        },
    ));
    tokio::spawn(fastview::http::serve(
        metrics_listener,
        fastview::http::metrics_router(state.clone()),
        options.connections,
        async move {
            let _ = metrics_signal.await;
        },
    ));
    TestApp {
        base: format!("http://{address}"),
        metrics_base: format!("http://{metrics_address}"),
        app,
        state,
        proxy,
        client: reqwest::Client::new(),
        database_url: database.as_ref().map(|d| d.url.clone()),
        _dir: dir,
        shutdown: Some(shutdown),
        _database: database,
    }
}

/// The shared corpus, when present (it is on CI). When it is absent the
/// caller returns at once: [`require`] fails the test if
/// `FASTVIEW_TEST_REQUIRE` names `corpus`, else notes the skip.
pub fn corpus() -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus");
    if !path.is_dir() {
        require("corpus", &format!("no corpus at {}", path.display()));
        return None;
    }
    Some(path)
}

/// Up to `count` messages of the corpus, distinct bytes, in the order
/// `fastview import` reads them (the first of each mailbox file first).
pub fn corpus_sample(corpus: &Path, count: usize) -> Vec<Vec<u8>> {
    let mut seen = std::collections::HashSet::new();
    fastview::mail::import_source::walk(&[corpus.to_path_buf()])
        .filter_map(|item| match item {
            fastview::mail::import_source::SourceItem::Message(message) => Some(message.raw),
            _ => None,
        })
        .filter(|raw| seen.insert(fastview::blob::blob_id_of(raw)))
        .take(count)
        .collect()
}

impl TestApp {
    /// The `fastview` command line on this server's storage: `--data-dir`
    /// and, on PostgreSQL, `--database-url`.
    pub fn cli(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_fastview"));
        command.arg("--data-dir").arg(&self.app.data_dir);
        if let Some(url) = &self.database_url {
            command.arg("--database-url").arg(url);
        }
        command
    }

    /// Creates an account with [`PASSWORD`].
    pub async fn account(&self, email: &str) -> TestAccount {
        let hash = hash_password(PASSWORD).expect("hash");
        let account = self
            .app
            .store
            .create_account(email, &hash)
            .await
            .expect("create account");
        let inbox = self
            .app
            .store
            .mailboxes(account.id)
            .await
            .expect("mailboxes")
            .into_iter()
            .find(|m| m.role.as_deref() == Some("inbox"))
            .expect("inbox");
        TestAccount {
            id: account.id,
            email: email.to_string(),
            account_id: ids::account_id(account.id),
            inbox: ids::mailbox_id(inbox.id),
        }
    }

    /// Stores raw messages in the account's inbox through the ingest path;
    /// receivedAt is `base_time + index` seconds. Returns the email ids.
    pub async fn ingest(
        &self,
        account: &TestAccount,
        messages: &[Vec<u8>],
        base_time: i64,
    ) -> Vec<String> {
        let inbox = ids::parse_mailbox_id(&account.inbox).expect("inbox id");
        let batch = messages
            .iter()
            .enumerate()
            .map(|(i, raw)| {
                prepare(raw.clone(), vec![inbox], Vec::new(), |_| {
                    base_time + i as i64
                })
            })
            .collect();
        store_batch(self.app.store.as_ref(), &self.app.blobs, account.id, batch)
            .await
            .expect("store batch")
            .into_iter()
            .map(|outcome| match outcome {
                fastview::store::Inserted::New(id) | fastview::store::Inserted::Duplicate(id) => {
                    ids::email_id(id)
                }
            })
            .collect()
    }

    /// Uploads `bytes` as `account` (RFC 8620 §6.1): (status, body, `Null`
    /// when the body is not JSON).
    pub async fn upload(&self, account: &TestAccount, bytes: Vec<u8>) -> (u16, Value) {
        let response = self
            .client
            .post(format!("{}/jmap/upload/{}/", self.base, account.account_id))
            .basic_auth(&account.email, Some(PASSWORD))
            .header("Content-Type", "application/octet-stream")
            .body(bytes)
            .send()
            .await
            .expect("upload");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// Uploads `bytes` as `account` with `content_type`; returns the upload
    /// object, asserting HTTP 201 (RFC 8620 §6.1).
    pub async fn upload_typed(
        &self,
        account: &TestAccount,
        content_type: &str,
        bytes: impl Into<reqwest::Body>,
    ) -> Value {
        let response = self
            .client
            .post(format!("{}/jmap/upload/{}/", self.base, account.account_id))
            .basic_auth(&account.email, Some(PASSWORD))
            .header("Content-Type", content_type)
            .body(bytes)
            .send()
            .await
            .expect("upload");
        assert_eq!(response.status(), 201);
        response.json().await.expect("upload JSON")
    }

    /// `GET url` with Basic credentials: the response, whatever its status.
    pub async fn get_as(
        &self,
        url: impl reqwest::IntoUrl,
        login: &str,
        password: &str,
    ) -> reqwest::Response {
        self.client
            .get(url)
            .basic_auth(login, Some(password))
            .send()
            .await
            .expect("GET")
    }

    /// The Session object `account` is given (RFC 8620 §2).
    pub async fn session(&self, account: &TestAccount) -> Value {
        self.client
            .get(format!("{}/jmap/session", self.base))
            .basic_auth(&account.email, Some(PASSWORD))
            .send()
            .await
            .expect("session")
            .json()
            .await
            .expect("session JSON")
    }

    /// POSTs a JMAP request as `account`; returns (status, body).
    pub async fn api_raw(&self, account: &TestAccount, body: &Value) -> (u16, Value) {
        let response = self.post_api(account, body).await;
        let status = response.status().as_u16();
        let body = response.json().await.unwrap_or(Value::Null);
        (status, body)
    }

    /// POSTs a JMAP request as `account` on a task of its own, so the
    /// caller goes on while it runs; its (status, body).
    pub fn api_raw_spawned(
        &self,
        account: &TestAccount,
        body: Value,
    ) -> tokio::task::JoinHandle<(u16, Value)> {
        let request = self
            .client
            .post(format!("{}/jmap/api", self.base))
            .basic_auth(&account.email, Some(PASSWORD))
            .json(&body);
        tokio::spawn(async move {
            let response = request.send().await.expect("send");
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.expect("JSON"))
        })
    }

    /// POSTs a JMAP request as `account`; returns the body's octets as
    /// text, asserting HTTP 200 (for comparing servers' octets).
    pub async fn api_text(&self, account: &TestAccount, body: &Value) -> String {
        let response = self.post_api(account, body).await;
        assert_eq!(response.status(), 200);
        response.text().await.expect("body")
    }

    /// POSTs a JMAP request body as `account`.
    pub async fn post_api(&self, account: &TestAccount, body: &Value) -> reqwest::Response {
        self.client
            .post(format!("{}/jmap/api", self.base))
            .basic_auth(&account.email, Some(PASSWORD))
            .json(body)
            .send()
            .await
            .expect("send")
    }

    /// Makes method calls (`[name, args]`, call ids "0", "1", …) and returns
    /// the method responses, asserting HTTP 200.
    pub async fn call(&self, account: &TestAccount, calls: Value) -> Vec<Value> {
        self.call_using(account, &[], calls).await
    }

    /// [`TestApp::call`] naming further capabilities in `using` besides
    /// core and mail.
    pub async fn call_using(
        &self,
        account: &TestAccount,
        using: &[&str],
        calls: Value,
    ) -> Vec<Value> {
        let mut capabilities = vec!["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"];
        capabilities.extend_from_slice(using);
        let calls: Vec<Value> = calls
            .as_array()
            .expect("calls")
            .iter()
            .enumerate()
            .map(|(i, call)| json!([call[0], call[1], i.to_string()]))
            .collect();
        let body = json!({
            "using": capabilities,
            "methodCalls": calls,
        });
        let (status, response) = self.api_raw(account, &body).await;
        assert_eq!(status, 200, "{response}");
        response["methodResponses"]
            .as_array()
            .expect("methodResponses")
            .clone()
    }

    /// One method call; returns its response arguments, asserting the response name.
    pub async fn call1(&self, account: &TestAccount, method: &str, arguments: Value) -> Value {
        let responses = self.call(account, json!([[method, arguments]])).await;
        assert_eq!(responses[0][0], method, "{}", responses[0]);
        responses[0][1].clone()
    }

    /// [`TestApp::call1`] on `account`'s own account: `"accountId"` is
    /// added to `arguments` (which must not name one).
    pub async fn call_in(
        &self,
        account: &TestAccount,
        method: &str,
        mut arguments: Value,
    ) -> Value {
        let object = arguments.as_object_mut().expect("arguments object");
        assert!(!object.contains_key("accountId"), "{arguments}");
        object.insert("accountId".into(), json!(account.account_id));
        self.call1(account, method, arguments).await
    }

    /// The `state` a `{type}/get` of no ids answers in `account` (e.g.
    /// `"Email"`, `"Mailbox"`).
    pub async fn state(&self, account: &TestAccount, type_name: &str) -> String {
        let method = format!("{type_name}/get");
        let got = self.call_in(account, &method, json!({"ids": []})).await;
        got["state"].as_str().expect("state").to_string()
    }

    /// Email/get of `ids` (a list) with `properties` in `account`; the
    /// response arguments.
    pub async fn email_get(
        &self,
        account: &TestAccount,
        ids: &impl serde::Serialize,
        properties: &[&str],
    ) -> Value {
        let arguments = json!({"ids": ids, "properties": properties});
        self.call_in(account, "Email/get", arguments).await
    }

    /// Email/set updating email `id` with `patch`; the response arguments,
    /// asserting `id` is among the updated.
    pub async fn update_email(&self, account: &TestAccount, id: &str, patch: Value) -> Value {
        let set = self
            .call_in(account, "Email/set", json!({"update": {id: patch}}))
            .await;
        assert!(set["updated"].get(id).is_some(), "{set}");
        set
    }

    /// The id of `account`'s mailbox with `role`, read by Mailbox/get.
    pub async fn mailbox_with_role(&self, account: &TestAccount, role: &str) -> String {
        let got = self.call_in(account, "Mailbox/get", json!({})).await;
        let list = got["list"].as_array().expect("list");
        let mailbox = list.iter().find(|m| m["role"] == role).expect("the role");
        mailbox["id"].as_str().expect("id").to_string()
    }

    /// Email/query of the emails in `account`'s inbox; the response arguments.
    pub async fn query_inbox(&self, account: &TestAccount) -> Value {
        let filter = json!({"filter": {"inMailbox": account.inbox}});
        self.call_in(account, "Email/query", filter).await
    }

    /// Email/get of `properties` of every email in `account`'s inbox (after
    /// [`TestApp::query_inbox`]); the response arguments.
    pub async fn inbox_emails(&self, account: &TestAccount, properties: &[&str]) -> Value {
        let found = self.query_inbox(account).await;
        self.email_get(account, &found["ids"], properties).await
    }

    /// Mailbox/set creating a mailbox `name` at the top; its id, asserting
    /// it was created.
    pub async fn create_mailbox(&self, account: &TestAccount, name: &str) -> String {
        let set = self
            .call_in(
                account,
                "Mailbox/set",
                json!({"create": {"m": {"name": name}}}),
            )
            .await;
        let id = set["created"]["m"]["id"].as_str();
        id.unwrap_or_else(|| panic!("{set}")).to_string()
    }

    /// Email/import of the uploaded `blob_id` into `account`'s inbox, as
    /// creation id `"i"`; the method's response arguments.
    pub async fn import_to_inbox(
        &self,
        account: &TestAccount,
        blob_id: &impl serde::Serialize,
    ) -> Value {
        let email = json!({"blobId": blob_id, "mailboxIds": {account.inbox.clone(): true}});
        self.call_in(account, "Email/import", json!({"emails": {"i": email}}))
            .await
    }

    /// `GET {downloadUrl}` of `blob_id` as `name`: (status, body).
    pub async fn download(
        &self,
        account: &TestAccount,
        blob_id: &str,
        name: &str,
    ) -> (u16, Vec<u8>) {
        let response = self
            .client
            .get(format!(
                "{}/jmap/download/{}/{blob_id}/{name}",
                self.base, account.account_id
            ))
            .basic_auth(&account.email, Some(PASSWORD))
            .send()
            .await
            .expect("download");
        let status = response.status().as_u16();
        (status, response.bytes().await.expect("body").to_vec())
    }

    /// The value of a metric line `name` (exact, with labels), 0 when absent.
    pub async fn metric(&self, name: &str) -> f64 {
        let text = self
            .client
            .get(format!("{}/metrics", self.metrics_base))
            .send()
            .await
            .expect("metrics")
            .text()
            .await
            .expect("metrics text");
        text.lines()
            .find_map(|line| {
                line.strip_prefix(name)
                    .and_then(|rest| rest.strip_prefix(' '))
            })
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or(0.0)
    }
}

/// Runs `command` to its end, asserting it succeeded (its stderr in the
/// message); its output.
pub fn run_ok(command: &mut Command) -> std::process::Output {
    let output = command.output().expect("run");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// The demo messages the project ships (`server/fixtures/demo/*.eml`), sorted by name.
pub fn demo_messages() -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("demo fixtures")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "eml"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| std::fs::read(p).expect("read fixture"))
        .collect()
}

//! Store conformance: one set of checks of the [`Store`] trait's documented
//! semantics, run against SQLite (a temporary data dir) always and against
//! PostgreSQL (a fresh database per test) when `FASTVIEW_TEST_POSTGRES_URL`
//! is set (and required when `FASTVIEW_TEST_REQUIRE` names `postgres`). Each
//! check `foo` becomes the tests `foo::sqlite` and `foo::postgres`; the
//! checks live in one module per concern.
//! Ids are compared relative to each other, never as literals: PostgreSQL
//! identities may leave gaps where SQLite's do not.

#[path = "../common/pg_db.rs"]
mod pg_db;
#[path = "../common/require.rs"]
mod require;

use std::sync::Arc;

use fastview::blob::blob_id_of;
use fastview::mail::fast_view::FastView;
use fastview::mail::ingest::prepare;
use fastview::store::postgres::PostgresStore;
use fastview::store::prelude::*;
use fastview::store::sqlite::SqliteStore;
use fastview::store::{
    Account, ChangeType, Changes, EmailIndex, EmailUpdate, Inserted, ListPatch, LogPosition,
    MailboxPatch, MailboxRow, NewEmail, NewMailbox, States, Store, StoreError, UpdateOutcome,
};
use pg_db::TestDatabase;
use sqlx::Connection;

/// A store under test and what keeps its database alive.
struct Harness {
    store: Arc<dyn Store>,
    postgres: Option<(Arc<PostgresStore>, String)>,
    _dir: tempfile::TempDir,
    _database: Option<TestDatabase>,
}

impl Harness {
    async fn sqlite() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("fastview.db").display());
        let store = SqliteStore::connect(&url, 4).await.expect("open sqlite");
        Self {
            store: Arc::new(store),
            postgres: None,
            _dir: dir,
            _database: None,
        }
    }

    /// `None` (and a note on stderr) when `FASTVIEW_TEST_POSTGRES_URL` is unset.
    async fn postgres() -> Option<Self> {
        let database = TestDatabase::create().await?;
        let store = Arc::new(
            PostgresStore::connect(&database.url, 8)
                .await
                .expect("open postgres"),
        );
        Some(Self {
            store: store.clone(),
            postgres: Some((store, database.url.clone())),
            _dir: tempfile::tempdir().expect("temp dir"),
            _database: Some(database),
        })
    }
}

/// Declares each check of a concern module as a module with a `sqlite` and
/// a `postgres` test (`emails::blob_grants::sqlite`).
macro_rules! conformance {
    ($($check:ident),* $(,)?) => {$(
        mod $check {
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn sqlite() {
                let harness = crate::Harness::sqlite().await;
                super::$check(harness.store.clone()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn postgres() {
                let Some(harness) = crate::Harness::postgres().await else { return };
                super::$check(harness.store.clone()).await;
            }
        }
    )*};
}

macro_rules! assert_err {
    ($result:expr, $pattern:pat) => {
        match $result {
            Err($pattern) => {}
            Err(other) => panic!("expected {}, got error {other:?}", stringify!($pattern)),
            Ok(value) => panic!("expected {}, got Ok({value:?})", stringify!($pattern)),
        }
    };
}

mod accounts;
mod blobs;
mod change_log;
mod deliveries;
mod edges;
mod emails;
mod jmap_mirror;
mod mailboxes;
mod plans;
mod search;
mod storage_full;
mod threads;
mod upstream;

// ---- messages -------------------------------------------------------------

const DATE: &str = "Tue, 1 Oct 2024 10:00:00 +0200";
const DATE_UNIX: i64 = 1_727_769_600;

/// A small RFC 5322 message. `refs` are (In-Reply-To, References).
fn message(
    message_id: Option<&str>,
    refs: (Option<&str>, Option<&str>),
    subject: &str,
    body: &str,
) -> Vec<u8> {
    let mut raw = String::from("From: Ann Example <ann@example.com>\r\nTo: bob@example.org\r\n");
    raw.push_str(&format!("Subject: {subject}\r\nDate: {DATE}\r\n"));
    if let Some(id) = message_id {
        raw.push_str(&format!("Message-ID: <{id}>\r\n"));
    }
    if let Some(id) = refs.0 {
        raw.push_str(&format!("In-Reply-To: <{id}>\r\n"));
    }
    if let Some(ids) = refs.1 {
        raw.push_str(&format!("References: {ids}\r\n"));
    }
    raw.push_str("\r\n");
    raw.push_str(body);
    raw.push_str("\r\n");
    raw.into_bytes()
}

/// A message with no Message-ID, distinguished by its body.
fn plain(body: &str) -> Vec<u8> {
    message(None, (None, None), "Hello", body)
}

/// A multipart message with a PDF attachment.
fn with_attachment() -> Vec<u8> {
    concat!(
        "From: Cy <cy@example.net>\r\n",
        "To: Ann <ann@example.com>, dan@example.com\r\n",
        "Cc: Eve <eve@example.com>\r\n",
        "Subject: [team] Fwd: Report\r\n",
        "Message-ID: <report@example.net>\r\n",
        "MIME-Version: 1.0\r\n",
        "Content-Type: multipart/mixed; boundary=\"b1\"\r\n",
        "\r\n",
        "--b1\r\n",
        "Content-Type: text/plain; charset=utf-8\r\n",
        "\r\n",
        "See   the\r\n  attached report.\r\n",
        "--b1\r\n",
        "Content-Type: application/pdf; name=\"r.pdf\"\r\n",
        "Content-Disposition: attachment; filename=\"r.pdf\"\r\n",
        "Content-Transfer-Encoding: base64\r\n",
        "\r\n",
        "JVBERi0xLjQK\r\n",
        "--b1--\r\n"
    )
    .as_bytes()
    .to_vec()
}

fn email(raw: &[u8], mailboxes: &[i64], keywords: &[&str], received_at: i64) -> NewEmail {
    prepare(
        raw.to_vec(),
        mailboxes.to_vec(),
        keywords.iter().map(|k| k.to_string()).collect(),
        |_| received_at,
    )
    .email
}

fn header_block_of(raw: &[u8]) -> Vec<u8> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("blank line")
        + 4;
    raw[..end].to_vec()
}

fn new_id(outcome: Inserted) -> i64 {
    match outcome {
        Inserted::New(id) => id,
        Inserted::Duplicate(id) => panic!("expected a new email, got duplicate {id}"),
    }
}

async fn insert(store: &dyn Store, account: i64, emails: &[NewEmail]) -> Vec<i64> {
    store
        .insert_emails(account, emails)
        .await
        .expect("insert")
        .into_iter()
        .map(new_id)
        .collect()
}

// ---- accounts -------------------------------------------------------------

/// An account's role mailbox ids.
struct Roles {
    inbox: i64,
    drafts: i64,
    sent: i64,
    trash: i64,
    junk: i64,
    archive: i64,
}

async fn account(store: &dyn Store, email: &str) -> (Account, Roles) {
    let account = store
        .create_account(email, "hash")
        .await
        .expect("create account");
    let mailboxes = store.mailboxes(account.id).await.expect("mailboxes");
    let role = |name: &str| {
        mailboxes
            .iter()
            .find(|m| m.role.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("{name} mailbox"))
            .id
    };
    let roles = Roles {
        inbox: role("inbox"),
        drafts: role("drafts"),
        sent: role("sent"),
        trash: role("trash"),
        junk: role("junk"),
        archive: role("archive"),
    };
    (account, roles)
}

/// Applies one email update in `account`; its outcome.
async fn update_one(store: &dyn Store, account: i64, update: EmailUpdate) -> Vec<UpdateOutcome> {
    store.update_emails(account, &[update]).await.unwrap()
}

/// A subscribed mailbox `name` under `parent` (at the top when `None`),
/// with no role, sorted first.
fn new_mailbox(parent: Option<i64>, name: &str) -> NewMailbox {
    NewMailbox {
        parent_id: parent,
        name: name.into(),
        role: None,
        sort_order: 0,
        is_subscribed: true,
    }
}

async fn mailbox(store: &dyn Store, account: i64, id: i64) -> Option<MailboxRow> {
    store
        .mailboxes(account)
        .await
        .expect("mailboxes")
        .into_iter()
        .find(|m| m.id == id)
}

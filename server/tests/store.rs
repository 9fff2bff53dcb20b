//! Store conformance: one set of checks of the [`Store`] trait's documented
//! semantics, run against SQLite (a temporary data dir) always and against
//! PostgreSQL (a fresh database per test) when `FASTVIEW_TEST_POSTGRES_URL`
//! is set. Each check `foo` becomes the tests `foo::sqlite` and `foo::postgres`.
//! Ids are compared relative to each other, never as literals: PostgreSQL
//! identities may leave gaps where SQLite's do not.

#[path = "common/pg_db.rs"]
mod pg_db;

use std::sync::Arc;

use fastview::blob::blob_id_of;
use fastview::mail::fast_view::FastView;
use fastview::mail::ingest::prepare;
use fastview::store::postgres::PostgresStore;
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
        let Some(database) = TestDatabase::create().await else {
            eprintln!(
                "{} is unset: PostgreSQL check skipped",
                pg_db::POSTGRES_URL_VAR
            );
            return None;
        };
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

/// Declares each check as a module with a `sqlite` and a `postgres` test.
macro_rules! conformance {
    ($($check:ident),* $(,)?) => {$(
        mod $check {
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn sqlite() {
                let harness = super::Harness::sqlite().await;
                super::$check(harness.store.clone()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn postgres() {
                let Some(harness) = super::Harness::postgres().await else { return };
                super::$check(harness.store.clone()).await;
            }
        }
    )*};
}

conformance!(
    accounts,
    role_mailboxes_and_mailbox_changes,
    states_advance_per_type,
    duplicates_in_and_across_batches,
    batched_reads_are_account_isolated,
    threading,
    mailbox_counts,
    update_emails_semantics,
    destroy_emails_semantics,
    destroy_mailbox_semantics,
    projection_maintenance,
    blob_grants,
    listing_by_received,
    concurrent_writers,
    hostile_headers,
    change_log,
    change_log_paging_and_retention,
    concurrent_keyword_patches,
    mailbox_positions,
);

macro_rules! assert_err {
    ($result:expr, $pattern:pat) => {
        match $result {
            Err($pattern) => {}
            Err(other) => panic!("expected {}, got error {other:?}", stringify!($pattern)),
            Ok(value) => panic!("expected {}, got Ok({value:?})", stringify!($pattern)),
        }
    };
}

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

async fn mailbox(store: &dyn Store, account: i64, id: i64) -> Option<MailboxRow> {
    store
        .mailboxes(account)
        .await
        .expect("mailboxes")
        .into_iter()
        .find(|m| m.id == id)
}

async fn accounts(store: Arc<dyn Store>) {
    let store = store.as_ref();
    let ann = store.create_account("Ann@Example.com", "h1").await.unwrap();
    assert_eq!(ann.email, "Ann@Example.com");
    assert_eq!(ann.password_hash, "h1");
    assert_err!(
        store.create_account("ann@example.com", "x").await,
        StoreError::Conflict(_)
    );
    assert_err!(
        store.create_account("ANN@EXAMPLE.COM", "x").await,
        StoreError::Conflict(_)
    );
    let bob = store.create_account("bob@example.org", "h2").await.unwrap();
    assert!(bob.id > ann.id);

    let found = store
        .account_by_email("aNN@example.COM")
        .await
        .unwrap()
        .expect("case-insensitive login");
    assert_eq!(
        (found.id, found.email.as_str(), found.password_hash.as_str()),
        (ann.id, "Ann@Example.com", "h1")
    );
    assert!(
        store
            .account_by_email("nobody@example.com")
            .await
            .unwrap()
            .is_none()
    );
    let listed: Vec<(i64, String)> = store
        .list_accounts()
        .await
        .unwrap()
        .into_iter()
        .map(|a| (a.id, a.email))
        .collect();
    assert_eq!(
        listed,
        vec![
            (ann.id, "Ann@Example.com".to_string()),
            (bob.id, "bob@example.org".to_string())
        ]
    );

    store.set_password("ANN@example.com", "h3").await.unwrap();
    assert_eq!(
        store
            .account_by_email("ann@example.com")
            .await
            .unwrap()
            .unwrap()
            .password_hash,
        "h3"
    );
    assert_eq!(
        store
            .account_by_email("bob@example.org")
            .await
            .unwrap()
            .unwrap()
            .password_hash,
        "h2"
    );
    assert_err!(
        store.set_password("nobody@example.com", "x").await,
        StoreError::NotFound
    );
    assert_eq!(
        store.states(ann.id).await.unwrap(),
        States {
            email: 1,
            mailbox: 1,
            thread: 1
        }
    );

    // Removal takes the account's rows with it; the other account keeps its own.
    let inbox = store.mailboxes(ann.id).await.unwrap()[0].id;
    let child = store
        .create_mailbox(
            ann.id,
            &NewMailbox {
                parent_id: Some(inbox),
                name: "Sub".into(),
                role: None,
                sort_order: 0,
                is_subscribed: true,
            },
        )
        .await
        .unwrap();
    let raw = plain("removed with the account");
    insert(store, ann.id, &[email(&raw, &[inbox, child], &[], 10)]).await;
    let bob_inbox = store.mailboxes(bob.id).await.unwrap()[0].id;
    let bobs = insert(store, bob.id, &[email(&raw, &[bob_inbox], &[], 10)]).await;
    store.remove_account("ann@EXAMPLE.com").await.unwrap();
    assert!(
        store
            .account_by_email("ann@example.com")
            .await
            .unwrap()
            .is_none()
    );
    assert_err!(
        store.remove_account("ann@example.com").await,
        StoreError::NotFound
    );
    assert_err!(store.states(ann.id).await, StoreError::NotFound);
    assert!(store.mailboxes(ann.id).await.unwrap().is_empty());
    assert!(!store.has_blob(ann.id, &blob_id_of(&raw)).await.unwrap());
    assert!(store.has_blob(bob.id, &blob_id_of(&raw)).await.unwrap());
    assert_eq!(store.email_meta(bob.id, &bobs).await.unwrap().len(), 1);
    let listed: Vec<i64> = store
        .list_accounts()
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.id)
        .collect();
    assert_eq!(listed, vec![bob.id]);

    // The login is free again, under a new id (ids are never reused).
    let again = store.create_account("ann@example.com", "h4").await.unwrap();
    assert!(again.id > bob.id);
}

async fn role_mailboxes_and_mailbox_changes(store: Arc<dyn Store>) {
    let store = store.as_ref();
    let (ann, roles) = account(store, "ann@example.com").await;
    let mailboxes = store.mailboxes(ann.id).await.unwrap();
    type Shape<'a> = (Option<&'a str>, &'a str, i64, bool, Option<i64>, [i64; 4]);
    let shape: Vec<Shape> = mailboxes
        .iter()
        .map(|m| {
            (
                m.role.as_deref(),
                m.name.as_str(),
                m.sort_order,
                m.is_subscribed,
                m.parent_id,
                [
                    m.total_emails,
                    m.unread_emails,
                    m.total_threads,
                    m.unread_threads,
                ],
            )
        })
        .collect();
    assert_eq!(
        shape,
        vec![
            (Some("inbox"), "Inbox", 1, true, None, [0; 4]),
            (Some("drafts"), "Drafts", 2, true, None, [0; 4]),
            (Some("sent"), "Sent", 3, true, None, [0; 4]),
            (Some("trash"), "Trash", 4, true, None, [0; 4]),
            (Some("junk"), "Junk", 5, true, None, [0; 4]),
            (Some("archive"), "Archive", 6, true, None, [0; 4]),
        ]
    );
    assert!(mailboxes.windows(2).all(|w| w[0].id < w[1].id), "by id");
    assert_eq!(roles.inbox, mailboxes[0].id);

    let projects = store
        .create_mailbox(
            ann.id,
            &NewMailbox {
                parent_id: None,
                name: "Projects".into(),
                role: None,
                sort_order: 10,
                is_subscribed: false,
            },
        )
        .await
        .unwrap();
    let sub = store
        .create_mailbox(
            ann.id,
            &NewMailbox {
                parent_id: Some(projects),
                name: "2024".into(),
                role: None,
                sort_order: 0,
                is_subscribed: true,
            },
        )
        .await
        .unwrap();
    assert!(store.owns_mailbox(ann.id, sub).await.unwrap());
    assert_eq!(
        mailbox(store, ann.id, sub).await.unwrap(),
        MailboxRow {
            id: sub,
            parent_id: Some(projects),
            name: "2024".into(),
            role: None,
            sort_order: 0,
            is_subscribed: true,
            total_emails: 0,
            unread_emails: 0,
            total_threads: 0,
            unread_threads: 0,
        }
    );

    // A patch changes what it names and nothing else.
    let patch = MailboxPatch {
        parent_id: Some(None),
        name: Some("Done".into()),
        role: Some(Some("important".into())),
        sort_order: Some(3),
        is_subscribed: Some(false),
    };
    store.update_mailbox(ann.id, sub, &patch).await.unwrap();
    let row = mailbox(store, ann.id, sub).await.unwrap();
    assert_eq!(
        (
            row.parent_id,
            row.name.as_str(),
            row.role.as_deref(),
            row.sort_order,
            row.is_subscribed
        ),
        (None, "Done", Some("important"), 3, false)
    );
    store
        .update_mailbox(
            ann.id,
            sub,
            &MailboxPatch {
                parent_id: Some(Some(projects)),
                role: Some(None),
                ..MailboxPatch::default()
            },
        )
        .await
        .unwrap();
    let row = mailbox(store, ann.id, sub).await.unwrap();
    assert_eq!(
        (
            row.parent_id,
            row.name.as_str(),
            row.role.as_deref(),
            row.sort_order,
            row.is_subscribed
        ),
        (Some(projects), "Done", None, 3, false)
    );
    store
        .update_mailbox(ann.id, sub, &MailboxPatch::default())
        .await
        .unwrap();
    assert_eq!(mailbox(store, ann.id, sub).await.unwrap(), row);

    // Another account's mailboxes are out of reach.
    let (bob, bob_roles) = account(store, "bob@example.com").await;
    assert!(!store.owns_mailbox(bob.id, sub).await.unwrap());
    assert!(!store.owns_mailbox(ann.id, bob_roles.inbox).await.unwrap());
    assert!(!store.owns_mailbox(ann.id, i64::MAX).await.unwrap());
    let bobs_child = NewMailbox {
        parent_id: Some(projects),
        name: "x".into(),
        role: None,
        sort_order: 0,
        is_subscribed: true,
    };
    assert_err!(
        store.create_mailbox(bob.id, &bobs_child).await,
        StoreError::NotFound
    );
    assert_err!(
        store
            .update_mailbox(
                bob.id,
                sub,
                &MailboxPatch {
                    name: Some("x".into()),
                    ..MailboxPatch::default()
                }
            )
            .await,
        StoreError::NotFound
    );
    assert_err!(
        store
            .update_mailbox(
                ann.id,
                sub,
                &MailboxPatch {
                    parent_id: Some(Some(bob_roles.inbox)),
                    ..MailboxPatch::default()
                }
            )
            .await,
        StoreError::NotFound
    );
    assert_eq!(mailbox(store, ann.id, sub).await.unwrap(), row);
    assert_eq!(store.mailboxes(bob.id).await.unwrap().len(), 6);
}

async fn states_advance_per_type(store: Arc<dyn Store>) {
    let store = store.as_ref();
    let (ann, roles) = account(store, "ann@example.com").await;
    let states = |email, mailbox, thread| States {
        email,
        mailbox,
        thread,
    };
    assert_eq!(store.states(ann.id).await.unwrap(), states(1, 1, 1));
    let folder = store
        .create_mailbox(
            ann.id,
            &NewMailbox {
                parent_id: None,
                name: "F".into(),
                role: None,
                sort_order: 0,
                is_subscribed: true,
            },
        )
        .await
        .unwrap();
    assert_eq!(store.states(ann.id).await.unwrap(), states(1, 2, 1));
    store
        .update_mailbox(
            ann.id,
            folder,
            &MailboxPatch {
                name: Some("G".into()),
                ..MailboxPatch::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(store.states(ann.id).await.unwrap(), states(1, 3, 1));
    let a = plain("a");
    let ids = insert(store, ann.id, &[email(&a, &[roles.inbox], &[], 1)]).await;
    assert_eq!(store.states(ann.id).await.unwrap(), states(4, 4, 4));
    // Nothing new, nothing changed: no state moves.
    assert_eq!(
        store
            .insert_emails(ann.id, &[email(&a, &[roles.inbox], &[], 1)])
            .await
            .unwrap(),
        vec![Inserted::Duplicate(ids[0])]
    );
    assert_eq!(store.insert_emails(ann.id, &[]).await.unwrap(), vec![]);
    store.update_emails(ann.id, &[]).await.unwrap();
    assert_eq!(
        store.destroy_emails(ann.id, &[]).await.unwrap(),
        Vec::<i64>::new()
    );
    assert_eq!(
        store.destroy_emails(ann.id, &[i64::MAX]).await.unwrap(),
        Vec::<i64>::new()
    );
    store.add_blob(ann.id, "upload", 3).await.unwrap();
    store
        .put_fast_views(&[(
            ids[0],
            FastView {
                preview: "p".into(),
                has_attachment: false,
            },
        )])
        .await
        .unwrap();
    store.clear_fast_views(Some(ann.id)).await.unwrap();
    assert_eq!(store.states(ann.id).await.unwrap(), states(4, 4, 4));
    // Failed writes leave no trace.
    assert_err!(
        store
            .insert_emails(ann.id, &[email(&plain("b"), &[i64::MAX], &[], 2)])
            .await,
        StoreError::NotFound
    );
    assert_eq!(
        store
            .update_emails(
                ann.id,
                &[EmailUpdate::replace(i64::MAX, Some(vec![]), None)]
            )
            .await
            .unwrap(),
        vec![UpdateOutcome::NotFound]
    );
    // An update that changes nothing advances nothing.
    assert_eq!(
        store
            .update_emails(ann.id, &[EmailUpdate::replace(ids[0], Some(vec![]), None)])
            .await
            .unwrap(),
        vec![UpdateOutcome::Updated]
    );
    assert_eq!(store.states(ann.id).await.unwrap(), states(4, 4, 4));

    store
        .update_emails(
            ann.id,
            &[EmailUpdate::replace(
                ids[0],
                Some(vec!["$seen".into()]),
                None,
            )],
        )
        .await
        .unwrap();
    assert_eq!(store.states(ann.id).await.unwrap(), states(5, 5, 4));
    store
        .update_emails(
            ann.id,
            &[EmailUpdate::replace(
                ids[0],
                None,
                Some(vec![roles.inbox, folder]),
            )],
        )
        .await
        .unwrap();
    assert_eq!(store.states(ann.id).await.unwrap(), states(6, 6, 4));
    // Destroying a mailbox whose emails are elsewhere too: emails change, threads do not.
    store.destroy_mailbox(ann.id, folder, true).await.unwrap();
    assert_eq!(store.states(ann.id).await.unwrap(), states(7, 7, 4));
    let empty = store
        .create_mailbox(
            ann.id,
            &NewMailbox {
                parent_id: None,
                name: "E".into(),
                role: None,
                sort_order: 0,
                is_subscribed: true,
            },
        )
        .await
        .unwrap();
    assert_eq!(store.states(ann.id).await.unwrap(), states(7, 8, 4));
    store.destroy_mailbox(ann.id, empty, false).await.unwrap();
    assert_eq!(store.states(ann.id).await.unwrap(), states(7, 9, 4));
    assert_eq!(store.destroy_emails(ann.id, &ids).await.unwrap(), ids);
    assert_eq!(store.states(ann.id).await.unwrap(), states(10, 10, 10));
    // Destroying a mailbox whose emails are only there destroys them: all three types move.
    let only = store
        .create_mailbox(
            ann.id,
            &NewMailbox {
                parent_id: None,
                name: "O".into(),
                role: None,
                sort_order: 0,
                is_subscribed: true,
            },
        )
        .await
        .unwrap();
    insert(store, ann.id, &[email(&plain("c"), &[only], &[], 3)]).await;
    assert_eq!(store.states(ann.id).await.unwrap(), states(12, 12, 12));
    store.destroy_mailbox(ann.id, only, true).await.unwrap();
    assert_eq!(store.states(ann.id).await.unwrap(), states(13, 13, 13));

    // Another account's writes do not move this account's states.
    let (bob, bob_roles) = account(store, "bob@example.com").await;
    insert(store, bob.id, &[email(&a, &[bob_roles.inbox], &[], 1)]).await;
    assert_eq!(store.states(ann.id).await.unwrap(), states(13, 13, 13));
    assert_eq!(store.states(bob.id).await.unwrap(), states(2, 2, 2));
    assert_err!(store.states(i64::MAX).await, StoreError::NotFound);
}

async fn duplicates_in_and_across_batches(store: Arc<dyn Store>) {
    let store = store.as_ref();
    let (ann, roles) = account(store, "ann@example.com").await;
    let (a, b, c) = (plain("a"), plain("b"), plain("c"));
    let first = store
        .insert_emails(
            ann.id,
            &[
                email(&a, &[roles.inbox], &[], 1),
                email(&b, &[roles.inbox], &[], 2),
                email(&a, &[roles.archive], &[], 3),
            ],
        )
        .await
        .unwrap();
    let (ia, ib) = (new_id(first[0]), new_id(first[1]));
    assert!(ib > ia);
    assert_eq!(first[2], Inserted::Duplicate(ia));
    let second = store
        .insert_emails(
            ann.id,
            &[
                email(&b, &[roles.archive], &["$seen"], 4),
                email(&c, &[roles.inbox], &[], 5),
            ],
        )
        .await
        .unwrap();
    assert_eq!(second[0], Inserted::Duplicate(ib));
    let ic = new_id(second[1]);
    assert!(ic > ib);
    // The duplicate changed nothing about the stored email.
    let meta = store.email_meta(ann.id, &[ia, ib]).await.unwrap();
    let mut summary: Vec<(i64, i64, Vec<i64>, Vec<String>)> = meta
        .into_iter()
        .map(|m| (m.id, m.received_at, m.mailbox_ids, m.keywords))
        .collect();
    summary.sort();
    assert_eq!(
        summary,
        vec![
            (ia, 1, vec![roles.inbox], vec![]),
            (ib, 2, vec![roles.inbox], vec![])
        ]
    );
    assert_eq!(
        store
            .mailbox_emails_by_received(roles.inbox, false, 0, 10)
            .await
            .unwrap()
            .1,
        3
    );
    assert_eq!(
        store
            .mailbox_emails_by_received(roles.archive, false, 0, 10)
            .await
            .unwrap()
            .1,
        0
    );

    // The same bytes in another account are that account's own new email.
    let (bob, bob_roles) = account(store, "bob@example.com").await;
    let bobs = insert(store, bob.id, &[email(&a, &[bob_roles.inbox], &[], 1)]).await;
    assert!(bobs[0] > ic);
    // A destroyed email's bytes come back as a new email with a new id.
    assert_eq!(store.destroy_emails(ann.id, &[ia]).await.unwrap(), vec![ia]);
    let back = insert(store, ann.id, &[email(&a, &[roles.inbox], &[], 6)]).await;
    assert!(back[0] > bobs[0]);
    // A batch naming a mailbox the account does not own stores nothing.
    let d = plain("d");
    assert_err!(
        store
            .insert_emails(
                ann.id,
                &[
                    email(&d, &[roles.inbox], &[], 7),
                    email(&plain("e"), &[bob_roles.inbox], &[], 8)
                ]
            )
            .await,
        StoreError::NotFound
    );
    assert!(!store.has_blob(ann.id, &blob_id_of(&d)).await.unwrap());
    assert_eq!(
        store
            .mailbox_emails_by_received(roles.inbox, false, 0, 10)
            .await
            .unwrap()
            .1,
        3
    );
    // An email may be stored in no mailbox.
    let nowhere = insert(store, ann.id, &[email(&d, &[], &[], 9)]).await;
    assert_eq!(
        store.email_meta(ann.id, &nowhere).await.unwrap()[0].mailbox_ids,
        Vec::<i64>::new()
    );
}

async fn batched_reads_are_account_isolated(store: Arc<dyn Store>) {
    let store = store.as_ref();
    let (ann, roles) = account(store, "ann@example.com").await;
    let (bob, bob_roles) = account(store, "bob@example.com").await;
    let text = message(
        Some("m1@example.com"),
        (None, None),
        "Re: [list] Plans",
        "Body text.",
    );
    let attached = with_attachment();
    let ids = insert(
        store,
        ann.id,
        &[
            email(
                &text,
                &[roles.archive, roles.inbox, roles.archive],
                &["$Seen", "$flagged", "$seen"],
                100,
            ),
            email(&attached, &[roles.inbox], &[], 200),
        ],
    )
    .await;
    let bobs = insert(
        store,
        bob.id,
        &[email(&plain("bob's"), &[bob_roles.inbox], &[], 300)],
    )
    .await;
    let asked = [ids[1], bobs[0], ids[0], i64::MAX, ids[0]];

    let mut meta = store.email_meta(ann.id, &asked).await.unwrap();
    meta.sort_by_key(|m| m.id);
    assert_eq!(meta.len(), 2);
    // The one-statement read gives the same rows and the current Email state.
    let (mut together, state) = store.email_meta_and_state(ann.id, &asked).await.unwrap();
    together.sort_by_key(|m| m.id);
    assert_eq!(together, meta);
    assert_eq!(state, store.states(ann.id).await.unwrap().email);
    let (none, _) = store
        .email_meta_and_state(ann.id, &[bobs[0]])
        .await
        .unwrap();
    assert!(none.is_empty());
    assert_eq!(
        (
            meta[0].id,
            meta[0].blob_id.as_str(),
            meta[0].thread_id,
            meta[0].size,
            meta[0].received_at
        ),
        (
            ids[0],
            blob_id_of(&text).as_str(),
            ids[0],
            text.len() as i64,
            100
        )
    );
    assert_eq!(meta[0].mailbox_ids, {
        let mut m = vec![roles.inbox, roles.archive];
        m.sort();
        m
    });
    assert_eq!(
        meta[0].keywords,
        vec!["$flagged".to_string(), "$seen".to_string()]
    );
    assert_eq!(
        (
            meta[1].id,
            meta[1].blob_id.as_str(),
            meta[1].thread_id,
            meta[1].size,
            meta[1].received_at
        ),
        (
            ids[1],
            blob_id_of(&attached).as_str(),
            ids[1],
            attached.len() as i64,
            200
        )
    );
    assert_eq!(meta[1].mailbox_ids, vec![roles.inbox]);
    assert!(meta[1].keywords.is_empty());

    let mut headers = store.header_blocks(ann.id, &asked).await.unwrap();
    headers.sort();
    assert_eq!(
        headers,
        vec![
            (ids[0], header_block_of(&text)),
            (ids[1], header_block_of(&attached))
        ]
    );
    let mut views = store.fast_views(ann.id, &asked).await.unwrap();
    views.sort_by_key(|(id, _)| *id);
    assert_eq!(
        views,
        vec![
            (
                ids[0],
                FastView {
                    preview: "Body text.".into(),
                    has_attachment: false
                }
            ),
            (
                ids[1],
                FastView {
                    preview: "See the attached report.".into(),
                    has_attachment: true
                }
            ),
        ]
    );

    // Another account's ids return nothing; no ids, nothing.
    assert!(store.email_meta(bob.id, &ids).await.unwrap().is_empty());
    assert!(store.header_blocks(bob.id, &ids).await.unwrap().is_empty());
    assert!(store.fast_views(bob.id, &ids).await.unwrap().is_empty());
    assert!(store.thread_emails(bob.id, &ids).await.unwrap().is_empty());
    assert!(store.email_meta(ann.id, &[]).await.unwrap().is_empty());
    assert!(store.header_blocks(ann.id, &[]).await.unwrap().is_empty());
    assert!(store.fast_views(ann.id, &[]).await.unwrap().is_empty());
    assert_eq!(store.email_meta(bob.id, &bobs).await.unwrap().len(), 1);

    // Query rows carry the index facts.
    let mut rows = store.query_rows(ann.id, None).await.unwrap();
    rows.sort_by_key(|r| r.meta.id);
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].meta, meta[0]);
    assert_eq!(rows[0].sent_at, Some(DATE_UNIX));
    assert_eq!(
        rows[0].index,
        EmailIndex {
            message_id: Some("m1@example.com".into()),
            referenced_ids: vec![],
            base_subject: "plans".into(),
            subject: "re: [list] plans".into(),
            from_sort: "ann example".into(),
            to_sort: "bob@example.org".into(),
            from_text: "ann example\nann@example.com\n".into(),
            to_text: "bob@example.org\n".into(),
            cc_text: String::new(),
            bcc_text: String::new(),
            has_attachment: false,
        }
    );
    assert_eq!(rows[1].meta, meta[1]);
    assert_eq!(rows[1].sent_at, None);
    assert_eq!(
        rows[1].index,
        EmailIndex {
            message_id: Some("report@example.net".into()),
            referenced_ids: vec![],
            base_subject: "report".into(),
            subject: "[team] fwd: report".into(),
            from_sort: "cy".into(),
            to_sort: "ann".into(),
            from_text: "cy\ncy@example.net\n".into(),
            to_text: "ann\nann@example.com\ndan@example.com\n".into(),
            cc_text: "eve\neve@example.com\n".into(),
            bcc_text: String::new(),
            has_attachment: true,
        }
    );
    let archived: Vec<i64> = store
        .query_rows(ann.id, Some(roles.archive))
        .await
        .unwrap()
        .iter()
        .map(|r| r.meta.id)
        .collect();
    assert_eq!(archived, vec![ids[0]]);
    assert!(
        store
            .query_rows(ann.id, Some(bob_roles.inbox))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .query_rows(ann.id, Some(roles.trash))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.query_rows(bob.id, None).await.unwrap().len(), 1);
}

async fn threading(store: Arc<dyn Store>) {
    let store = store.as_ref();
    let (ann, roles) = account(store, "ann@example.com").await;
    let inbox = [roles.inbox];
    let parent = message(Some("p@x"), (None, None), "Plans", "parent");
    let reply = message(
        Some("r@x"),
        (Some("p@x"), Some("<p@x>")),
        "Re: Plans",
        "reply",
    );
    // The reply arrives (is stored) before its parent.
    let r = insert(store, ann.id, &[email(&reply, &inbox, &[], 200)]).await[0];
    let p = insert(store, ann.id, &[email(&parent, &inbox, &[], 100)]).await[0];
    let batch = insert(
        store,
        ann.id,
        &[
            // Refers to the parent but is about something else: a thread of its own.
            email(
                &message(Some("d@x"), (Some("p@x"), None), "Other topic", "d"),
                &inbox,
                &[],
                300,
            ),
            // Refers to the reply only: joins through the reply's own id.
            email(
                &message(
                    Some("r2@x"),
                    (Some("r@x"), Some("<p@x> <r@x>")),
                    "RE: Re: Plans",
                    "r2",
                ),
                &inbox,
                &[],
                400,
            ),
            // A parent and its reply within one batch.
            email(
                &message(Some("x@x"), (None, None), "Lunch", "x"),
                &inbox,
                &[],
                500,
            ),
            email(
                &message(Some("y@x"), (Some("x@x"), None), "Re: Lunch", "y"),
                &inbox,
                &[],
                600,
            ),
            // Same subject, no ids in common: a thread of its own.
            email(&message(None, (None, None), "Plans", "u"), &inbox, &[], 700),
            email(
                &message(Some("a@x"), (None, None), "Merge", "a"),
                &inbox,
                &[],
                800,
            ),
            email(
                &message(Some("b@x"), (None, None), "Merge", "b"),
                &inbox,
                &[],
                900,
            ),
            // Links two threads: joins the older one; the threads are not merged.
            email(
                &message(Some("c@x"), (None, Some("<b@x> <a@x>")), "Re: Merge", "c"),
                &inbox,
                &[],
                1000,
            ),
        ],
    )
    .await;
    let [d, r2, x, y, u, a, b, c] = batch[..] else {
        panic!("{batch:?}")
    };
    let all = [r, p, d, r2, x, y, u, a, b, c];
    let mut threads: Vec<(i64, i64)> = store
        .email_meta(ann.id, &all)
        .await
        .unwrap()
        .into_iter()
        .map(|m| (m.id, m.thread_id))
        .collect();
    threads.sort();
    let mut expected = vec![
        (r, r),
        (p, r),
        (d, d),
        (r2, r),
        (x, x),
        (y, x),
        (u, u),
        (a, a),
        (b, b),
        (c, a),
    ];
    expected.sort();
    assert_eq!(threads, expected);
    // A later message referring to the linking message's id joins the older thread too.
    let later = insert(
        store,
        ann.id,
        &[email(
            &message(Some("z@x"), (Some("c@x"), None), "Re: Merge", "z"),
            &inbox,
            &[],
            50,
        )],
    )
    .await[0];
    assert_eq!(
        store.email_meta(ann.id, &[later]).await.unwrap()[0].thread_id,
        a
    );

    let listed = store
        .thread_emails(ann.id, &[x, r, i64::MAX, b, a])
        .await
        .unwrap();
    assert_eq!(
        listed,
        vec![
            (r, vec![p, r, r2]),
            (x, vec![x, y]),
            (a, vec![later, a, c]),
            (b, vec![b])
        ]
    );
    assert!(store.thread_emails(ann.id, &[]).await.unwrap().is_empty());

    // Another account's messages with the same ids thread on their own.
    let (bob, bob_roles) = account(store, "bob@example.com").await;
    let bobs = insert(
        store,
        bob.id,
        &[email(
            &message(Some("r3@x"), (Some("p@x"), None), "Re: Plans", "bob"),
            &[bob_roles.inbox],
            &[],
            1,
        )],
    )
    .await[0];
    assert_eq!(
        store.email_meta(bob.id, &[bobs]).await.unwrap()[0].thread_id,
        bobs
    );
    assert_eq!(
        store.thread_emails(ann.id, &[r]).await.unwrap(),
        vec![(r, vec![p, r, r2])]
    );
}

async fn mailbox_counts(store: Arc<dyn Store>) {
    let store = store.as_ref();
    let (ann, roles) = account(store, "ann@example.com").await;
    let thread_a = message(Some("a@x"), (None, None), "A", "1");
    let thread_a2 = message(Some("a2@x"), (Some("a@x"), None), "Re: A", "2");
    let ids = insert(
        store,
        ann.id,
        &[
            email(&thread_a, &[roles.inbox], &[], 1),
            email(&thread_a2, &[roles.inbox], &["$seen"], 2),
            email(
                &message(Some("b@x"), (None, None), "B", "3"),
                &[roles.inbox],
                &["$draft"],
                3,
            ),
            email(
                &message(Some("c@x"), (None, None), "C", "4"),
                &[roles.inbox, roles.archive],
                &["$flagged"],
                4,
            ),
            email(
                &message(Some("d@x"), (None, None), "D", "5"),
                &[roles.archive],
                &["$seen", "$flagged"],
                5,
            ),
            email(
                &message(Some("e@x"), (None, None), "E", "6"),
                &[roles.drafts],
                &["$seenx"],
                6,
            ),
        ],
    )
    .await;
    let counts = |rows: Vec<MailboxRow>| -> Vec<(i64, [i64; 4])> {
        rows.into_iter()
            .map(|m| {
                (
                    m.id,
                    [
                        m.total_emails,
                        m.unread_emails,
                        m.total_threads,
                        m.unread_threads,
                    ],
                )
            })
            .collect()
    };
    let expected = |inbox: [i64; 4], archive: [i64; 4], drafts: [i64; 4]| {
        let mut rows = vec![
            (roles.inbox, inbox),
            (roles.drafts, drafts),
            (roles.sent, [0; 4]),
            (roles.trash, [0; 4]),
            (roles.junk, [0; 4]),
            (roles.archive, archive),
        ];
        rows.sort();
        rows
    };
    assert_eq!(
        counts(store.mailboxes(ann.id).await.unwrap()),
        expected([4, 2, 3, 2], [2, 1, 2, 1], [1, 1, 1, 1])
    );
    // Reading the unread message of thread A leaves A without unread messages.
    store
        .update_emails(
            ann.id,
            &[EmailUpdate::replace(
                ids[0],
                Some(vec!["$seen".into()]),
                None,
            )],
        )
        .await
        .unwrap();
    assert_eq!(
        counts(store.mailboxes(ann.id).await.unwrap()),
        expected([4, 1, 3, 1], [2, 1, 2, 1], [1, 1, 1, 1])
    );
    // Other accounts' counts are their own.
    let (bob, _) = account(store, "bob@example.com").await;
    assert!(
        store
            .mailboxes(bob.id)
            .await
            .unwrap()
            .iter()
            .all(|m| m.total_emails == 0 && m.total_threads == 0)
    );
}

async fn update_emails_semantics(store: Arc<dyn Store>) {
    let store = store.as_ref();
    let (ann, roles) = account(store, "ann@example.com").await;
    let (bob, bob_roles) = account(store, "bob@example.com").await;
    let ids = insert(
        store,
        ann.id,
        &[
            email(&plain("1"), &[roles.inbox], &["$seen"], 10),
            email(&plain("2"), &[roles.inbox], &[], 20),
        ],
    )
    .await;
    let bobs = insert(
        store,
        bob.id,
        &[email(&plain("3"), &[bob_roles.inbox], &[], 30)],
    )
    .await;
    let summary = |id: i64| async move {
        let meta = store.email_meta(ann.id, &[id]).await.unwrap().remove(0);
        (meta.mailbox_ids, meta.keywords)
    };

    store
        .update_emails(
            ann.id,
            &[
                EmailUpdate::replace(
                    ids[0],
                    Some(vec!["Foo".into(), "$Seen".into(), "foo".into()]),
                    None,
                ),
                EmailUpdate::replace(
                    ids[1],
                    None,
                    Some(vec![roles.archive, roles.inbox, roles.archive]),
                ),
            ],
        )
        .await
        .unwrap();
    assert_eq!(
        summary(ids[0]).await,
        (
            vec![roles.inbox],
            vec!["$seen".to_string(), "foo".to_string()]
        )
    );
    let mut both = vec![roles.inbox, roles.archive];
    both.sort();
    assert_eq!(summary(ids[1]).await, (both, vec![]));
    // The membership keeps the email's receivedAt for the listing.
    assert_eq!(
        store
            .mailbox_emails_by_received(roles.archive, true, 0, 10)
            .await
            .unwrap(),
        (vec![(ids[1], ids[1])], 1)
    );

    // In one call, the last update of an id wins for each property.
    store
        .update_emails(
            ann.id,
            &[
                EmailUpdate::replace(
                    ids[0],
                    Some(vec!["$flagged".into()]),
                    Some(vec![roles.trash]),
                ),
                EmailUpdate::replace(ids[0], None, Some(vec![roles.sent])),
                EmailUpdate::replace(ids[0], Some(vec!["$answered".into()]), None),
            ],
        )
        .await
        .unwrap();
    assert_eq!(
        summary(ids[0]).await,
        (vec![roles.sent], vec!["$answered".to_string()])
    );
    assert_eq!(
        store
            .mailbox_emails_by_received(roles.trash, true, 0, 10)
            .await
            .unwrap()
            .1,
        0
    );
    // An email left in no mailbox, an email outside the account, a mailbox
    // outside it: that update changes nothing, the others apply.
    let before = store.states(ann.id).await.unwrap();
    assert_eq!(
        store
            .update_emails(
                ann.id,
                &[
                    EmailUpdate::replace(ids[0], Some(vec![]), Some(vec![])),
                    EmailUpdate::replace(bobs[0], Some(vec!["$seen".into()]), None),
                    EmailUpdate::replace(
                        ids[1],
                        Some(vec!["$seen".into()]),
                        Some(vec![bob_roles.inbox])
                    ),
                ]
            )
            .await
            .unwrap(),
        vec![
            UpdateOutcome::NoMailbox,
            UpdateOutcome::NotFound,
            UpdateOutcome::UnknownMailbox
        ]
    );
    assert_eq!(
        summary(ids[0]).await,
        (vec![roles.sent], vec!["$answered".to_string()])
    );
    let mut both = vec![roles.inbox, roles.archive];
    both.sort();
    assert_eq!(summary(ids[1]).await, (both.clone(), vec![]));
    assert_eq!(store.states(ann.id).await.unwrap(), before);
    assert!(
        store.email_meta(bob.id, &bobs).await.unwrap()[0]
            .keywords
            .is_empty()
    );

    // Patches apply to the values inside the transaction: add and remove
    // members, removing the last mailbox is refused, adding one not owned too.
    let patch = |keywords: ListPatch<String>, mailbox_ids: ListPatch<i64>| EmailUpdate {
        id: ids[1],
        keywords,
        mailbox_ids,
    };
    let add = |k: &str| ListPatch {
        add: vec![k.to_string()],
        ..ListPatch::default()
    };
    assert_eq!(
        store
            .update_emails(
                ann.id,
                &[
                    patch(add("$Seen"), ListPatch::default()),
                    patch(
                        add("$flagged"),
                        ListPatch {
                            remove: vec![roles.inbox],
                            ..ListPatch::default()
                        }
                    ),
                    patch(
                        ListPatch::default(),
                        ListPatch {
                            remove: vec![roles.archive],
                            ..ListPatch::default()
                        }
                    ),
                    patch(
                        ListPatch::default(),
                        ListPatch {
                            add: vec![bob_roles.inbox],
                            ..ListPatch::default()
                        }
                    ),
                ]
            )
            .await
            .unwrap(),
        vec![
            UpdateOutcome::Updated,
            UpdateOutcome::Updated,
            UpdateOutcome::NoMailbox,
            UpdateOutcome::UnknownMailbox
        ]
    );
    assert_eq!(
        summary(ids[1]).await,
        (
            vec![roles.archive],
            vec!["$flagged".to_string(), "$seen".to_string()]
        )
    );
    let after = store.states(ann.id).await.unwrap();
    assert_eq!(after.email, before.email + 1);
    assert_eq!(after.thread, before.thread);
}

async fn destroy_emails_semantics(store: Arc<dyn Store>) {
    let store = store.as_ref();
    let (ann, roles) = account(store, "ann@example.com").await;
    let (bob, bob_roles) = account(store, "bob@example.com").await;
    let (one, two) = (plain("1"), plain("2"));
    let ids = insert(
        store,
        ann.id,
        &[
            email(&one, &[roles.inbox, roles.archive], &[], 1),
            email(&two, &[roles.inbox], &[], 2),
        ],
    )
    .await;
    let bobs = insert(store, bob.id, &[email(&one, &[bob_roles.inbox], &[], 1)]).await;
    let mut destroyed = store
        .destroy_emails(ann.id, &[ids[0], bobs[0], i64::MAX])
        .await
        .unwrap();
    destroyed.sort();
    assert_eq!(destroyed, vec![ids[0]]);
    assert!(
        store
            .email_meta(ann.id, &ids[..1])
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .header_blocks(ann.id, &ids[..1])
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .fast_views(ann.id, &ids[..1])
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .thread_emails(ann.id, &ids[..1])
            .await
            .unwrap()
            .is_empty()
    );
    assert!(!store.has_blob(ann.id, &blob_id_of(&one)).await.unwrap());
    assert!(store.has_blob(ann.id, &blob_id_of(&two)).await.unwrap());
    assert_eq!(
        store
            .mailbox_emails_by_received(roles.inbox, false, 0, 10)
            .await
            .unwrap(),
        (vec![(ids[1], ids[1])], 1)
    );
    assert_eq!(
        store
            .mailbox_emails_by_received(roles.archive, false, 0, 10)
            .await
            .unwrap(),
        (vec![], 0)
    );
    // The other account's copy is untouched.
    assert!(store.has_blob(bob.id, &blob_id_of(&one)).await.unwrap());
    assert_eq!(store.email_meta(bob.id, &bobs).await.unwrap().len(), 1);
    assert_eq!(
        store.destroy_emails(ann.id, &[ids[0]]).await.unwrap(),
        Vec::<i64>::new()
    );
    let mut both = store
        .destroy_emails(ann.id, &[ids[1], ids[1]])
        .await
        .unwrap();
    both.dedup();
    assert_eq!(both, vec![ids[1]]);
}

async fn destroy_mailbox_semantics(store: Arc<dyn Store>) {
    let store = store.as_ref();
    let (ann, roles) = account(store, "ann@example.com").await;
    let (bob, bob_roles) = account(store, "bob@example.com").await;
    let new = |parent: Option<i64>, name: &str| NewMailbox {
        parent_id: parent,
        name: name.into(),
        role: None,
        sort_order: 0,
        is_subscribed: true,
    };
    let projects = store
        .create_mailbox(ann.id, &new(None, "Projects"))
        .await
        .unwrap();
    let child = store
        .create_mailbox(ann.id, &new(Some(projects), "2024"))
        .await
        .unwrap();
    assert_err!(
        store.destroy_mailbox(ann.id, projects, true).await,
        StoreError::MailboxHasChild
    );
    let (only, shared) = (plain("only in child"), plain("also in inbox"));
    let ids = insert(
        store,
        ann.id,
        &[
            email(&only, &[child], &["$seen"], 1),
            email(&shared, &[child, roles.inbox], &[], 2),
        ],
    )
    .await;
    let before = store.states(ann.id).await.unwrap();
    assert_err!(
        store.destroy_mailbox(ann.id, child, false).await,
        StoreError::MailboxHasEmail
    );
    assert_err!(
        store.destroy_mailbox(bob.id, child, true).await,
        StoreError::NotFound
    );
    assert_err!(
        store.destroy_mailbox(ann.id, bob_roles.inbox, true).await,
        StoreError::NotFound
    );
    assert_err!(
        store.destroy_mailbox(ann.id, i64::MAX, true).await,
        StoreError::NotFound
    );
    assert_eq!(store.states(ann.id).await.unwrap(), before);
    assert!(store.owns_mailbox(ann.id, child).await.unwrap());
    assert_eq!(store.email_meta(ann.id, &ids).await.unwrap().len(), 2);

    store.destroy_mailbox(ann.id, child, true).await.unwrap();
    assert!(!store.owns_mailbox(ann.id, child).await.unwrap());
    let meta = store.email_meta(ann.id, &ids).await.unwrap();
    assert_eq!(
        meta.iter()
            .map(|m| (m.id, m.mailbox_ids.clone()))
            .collect::<Vec<_>>(),
        vec![(ids[1], vec![roles.inbox])]
    );
    assert!(!store.has_blob(ann.id, &blob_id_of(&only)).await.unwrap());
    assert!(store.has_blob(ann.id, &blob_id_of(&shared)).await.unwrap());
    // Now childless and empty: destroyed without removing anything.
    store
        .destroy_mailbox(ann.id, projects, false)
        .await
        .unwrap();
    let left: Vec<i64> = store
        .mailboxes(ann.id)
        .await
        .unwrap()
        .iter()
        .map(|m| m.id)
        .collect();
    assert!(
        !left.contains(&projects) && !left.contains(&child) && left.len() == 6,
        "{left:?}"
    );
    assert_eq!(store.mailboxes(bob.id).await.unwrap().len(), 6);
}

async fn projection_maintenance(store: Arc<dyn Store>) {
    let store = store.as_ref();
    let (ann, roles) = account(store, "ann@example.com").await;
    let (bob, bob_roles) = account(store, "bob@example.com").await;
    let (a1, a2, b1) = (plain("a1"), plain("a2"), plain("b1"));
    let anns = insert(
        store,
        ann.id,
        &[
            email(&a1, &[roles.inbox], &[], 1),
            email(&a2, &[roles.inbox], &[], 2),
        ],
    )
    .await;
    let bobs = insert(store, bob.id, &[email(&b1, &[bob_roles.inbox], &[], 3)]).await;
    let all = vec![
        (anns[0], blob_id_of(&a1)),
        (anns[1], blob_id_of(&a2)),
        (bobs[0], blob_id_of(&b1)),
    ];
    assert_eq!(store.email_blobs(None, 0, 10, false).await.unwrap(), all);
    assert_eq!(
        store.email_blobs(Some(ann.id), 0, 10, false).await.unwrap(),
        all[..2]
    );
    assert_eq!(
        store
            .email_blobs(Some(ann.id), anns[0], 10, false)
            .await
            .unwrap(),
        all[1..2]
    );
    assert_eq!(
        store.email_blobs(None, 0, 1, false).await.unwrap(),
        all[..1]
    );
    assert_eq!(
        store.email_blobs(Some(bob.id), 0, 10, false).await.unwrap(),
        all[2..]
    );
    assert!(
        store
            .email_blobs(None, 0, 10, true)
            .await
            .unwrap()
            .is_empty()
    );

    assert_eq!(store.clear_fast_views(Some(ann.id)).await.unwrap(), 2);
    assert_eq!(
        store.email_blobs(None, 0, 10, true).await.unwrap(),
        all[..2]
    );
    assert!(store.fast_views(ann.id, &anns).await.unwrap().is_empty());
    assert_eq!(store.fast_views(bob.id, &bobs).await.unwrap().len(), 1);

    let view = |preview: &str, has_attachment| FastView {
        preview: preview.into(),
        has_attachment,
    };
    // Rows of missing emails are skipped; the last row of an id wins.
    store
        .put_fast_views(&[
            (anns[0], view("first", false)),
            (i64::MAX, view("ghost", false)),
            (anns[0], view("second", true)),
        ])
        .await
        .unwrap();
    assert_eq!(
        store.fast_views(ann.id, &anns).await.unwrap(),
        vec![(anns[0], view("second", true))]
    );
    assert_eq!(
        store.email_blobs(Some(ann.id), 0, 10, true).await.unwrap(),
        all[1..2]
    );
    // Insert or replace.
    store
        .put_fast_views(&[
            (anns[0], view("third", false)),
            (anns[1], view("fourth", false)),
        ])
        .await
        .unwrap();
    let mut views = store.fast_views(ann.id, &anns).await.unwrap();
    views.sort_by_key(|(id, _)| *id);
    assert_eq!(
        views,
        vec![
            (anns[0], view("third", false)),
            (anns[1], view("fourth", false))
        ]
    );
    store.put_fast_views(&[]).await.unwrap();
    assert_eq!(store.clear_fast_views(None).await.unwrap(), 3);
    assert_eq!(store.clear_fast_views(None).await.unwrap(), 0);
    assert_eq!(store.email_blobs(None, 0, 10, true).await.unwrap(), all);
}

async fn blob_grants(store: Arc<dyn Store>) {
    let store = store.as_ref();
    let (ann, roles) = account(store, "ann@example.com").await;
    let (bob, _) = account(store, "bob@example.com").await;
    store.add_blob(ann.id, "upload-1", 10).await.unwrap();
    store.add_blob(ann.id, "upload-1", 10).await.unwrap();
    assert!(store.has_blob(ann.id, "upload-1").await.unwrap());
    assert!(!store.has_blob(bob.id, "upload-1").await.unwrap());
    assert!(!store.has_blob(ann.id, "upload-2").await.unwrap());
    let raw = plain("message blob");
    insert(store, ann.id, &[email(&raw, &[roles.inbox], &[], 1)]).await;
    assert!(store.has_blob(ann.id, &blob_id_of(&raw)).await.unwrap());
    assert!(!store.has_blob(bob.id, &blob_id_of(&raw)).await.unwrap());
    // An upload of bytes that later arrive as a message: one grant, kept.
    let uploaded = plain("uploaded then imported");
    store
        .add_blob(bob.id, &blob_id_of(&uploaded), uploaded.len() as i64)
        .await
        .unwrap();
    let bob_inbox = store.mailboxes(bob.id).await.unwrap()[0].id;
    insert(store, bob.id, &[email(&uploaded, &[bob_inbox], &[], 1)]).await;
    assert!(
        store
            .has_blob(bob.id, &blob_id_of(&uploaded))
            .await
            .unwrap()
    );
}

async fn listing_by_received(store: Arc<dyn Store>) {
    let store = store.as_ref();
    let (ann, roles) = account(store, "ann@example.com").await;
    let times = [300, 100, 200, 200, 50];
    let batch: Vec<NewEmail> = times
        .iter()
        .enumerate()
        .map(|(i, t)| {
            email(
                &message(
                    Some(&format!("m{i}@x")),
                    (None, None),
                    &format!("S{i}"),
                    "b",
                ),
                &[roles.inbox],
                &[],
                *t,
            )
        })
        .collect();
    let ids = insert(store, ann.id, &batch).await;
    let mut ascending: Vec<(i64, i64, i64)> =
        ids.iter().zip(times).map(|(id, t)| (t, *id, *id)).collect();
    ascending.sort();
    let ascending: Vec<(i64, i64)> = ascending
        .into_iter()
        .map(|(_, id, thread)| (id, thread))
        .collect();
    let descending: Vec<(i64, i64)> = ascending.iter().rev().copied().collect();
    assert_eq!(
        ascending.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
        vec![ids[4], ids[1], ids[2], ids[3], ids[0]]
    );
    assert_eq!(
        store
            .mailbox_emails_by_received(roles.inbox, false, 0, 10)
            .await
            .unwrap(),
        (ascending.clone(), 5)
    );
    assert_eq!(
        store
            .mailbox_emails_by_received(roles.inbox, true, 0, 10)
            .await
            .unwrap(),
        (descending.clone(), 5)
    );
    assert_eq!(
        store
            .mailbox_emails_by_received(roles.inbox, false, 1, 2)
            .await
            .unwrap(),
        (ascending[1..3].to_vec(), 5)
    );
    assert_eq!(
        store
            .mailbox_emails_by_received(roles.inbox, true, 3, 5)
            .await
            .unwrap(),
        (descending[3..].to_vec(), 5)
    );
    assert_eq!(
        store
            .mailbox_emails_by_received(roles.inbox, true, 5, 5)
            .await
            .unwrap(),
        (vec![], 5)
    );
    assert_eq!(
        store
            .mailbox_emails_by_received(roles.inbox, true, 0, 0)
            .await
            .unwrap(),
        (vec![], 5)
    );
    assert_eq!(
        store
            .mailbox_emails_by_received(roles.archive, true, 0, 10)
            .await
            .unwrap(),
        (vec![], 0)
    );
    // A reply lists with its thread id.
    let reply = insert(
        store,
        ann.id,
        &[email(
            &message(Some("r@x"), (Some("m0@x"), None), "Re: S0", "r"),
            &[roles.inbox, roles.archive],
            &[],
            400,
        )],
    )
    .await[0];
    assert_eq!(
        store
            .mailbox_emails_by_received(roles.inbox, true, 0, 1)
            .await
            .unwrap(),
        (vec![(reply, ids[0])], 6)
    );
    assert_eq!(
        store
            .mailbox_emails_by_received(roles.archive, false, 0, 10)
            .await
            .unwrap(),
        (vec![(reply, ids[0])], 1)
    );
}

async fn concurrent_writers(store: Arc<dyn Store>) {
    let (ann, roles) = account(store.as_ref(), "ann@example.com").await;
    let shared = plain("everyone imports this");
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let store = store.clone();
            let batch = vec![
                email(&shared, &[roles.inbox], &[], 1),
                email(&plain(&format!("own {i}")), &[roles.inbox], &[], 2),
            ];
            tokio::spawn(async move {
                store
                    .insert_emails(ann.id, &batch)
                    .await
                    .expect("concurrent insert")
            })
        })
        .collect();
    let mut shared_outcomes = Vec::new();
    let mut own = Vec::new();
    for task in tasks {
        let outcome = task.await.unwrap();
        shared_outcomes.push(outcome[0]);
        own.push(new_id(outcome[1]));
    }
    let news: Vec<i64> = shared_outcomes
        .iter()
        .filter_map(|o| match o {
            Inserted::New(id) => Some(*id),
            _ => None,
        })
        .collect();
    assert_eq!(news.len(), 1, "{shared_outcomes:?}");
    assert!(
        shared_outcomes
            .iter()
            .all(|o| matches!(o, Inserted::New(id) | Inserted::Duplicate(id) if *id == news[0])),
        "{shared_outcomes:?}"
    );
    own.sort();
    own.dedup();
    assert_eq!(own.len(), 8);
    // Every batch stored something new: each advanced the states once.
    assert_eq!(
        store.states(ann.id).await.unwrap(),
        States {
            email: 9,
            mailbox: 9,
            thread: 9
        }
    );
    assert_eq!(
        store
            .mailbox_emails_by_received(roles.inbox, true, 0, 100)
            .await
            .unwrap()
            .1,
        9
    );

    // Concurrent sign-ups of one login, in different case: exactly one wins.
    let tasks: Vec<_> = [
        "Cy@example.com",
        "cy@example.com",
        "CY@EXAMPLE.COM",
        "cY@example.com",
    ]
    .into_iter()
    .map(|login| {
        let store = store.clone();
        tokio::spawn(async move { store.create_account(login, "h").await.is_ok() })
    })
    .collect();
    let mut created = 0;
    for task in tasks {
        created += usize::from(task.await.unwrap());
    }
    assert_eq!(created, 1);
    let cy = store
        .account_by_email("cy@example.com")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(store.mailboxes(cy.id).await.unwrap().len(), 6);
}

async fn hostile_headers(store: Arc<dyn Store>) {
    let store = store.as_ref();
    let (ann, roles) = account(store, "ann@example.com").await;
    // A NUL in a decoded header (PostgreSQL text cannot hold one) and a
    // Message-ID far longer than a btree key may be.
    let long_id = format!("{}@example.com", "x".repeat(4000));
    let nul = message(
        Some(&long_id),
        (None, None),
        "=?utf-8?q?Nul=00Subject?=",
        "body",
    );
    let reply = message(
        Some("reply@x"),
        (Some(&long_id), None),
        "Re: =?utf-8?q?Nul=00Subject?=",
        "reply",
    );
    let other = message(
        Some("other@x"),
        (Some(&long_id), None),
        "Unrelated",
        "other",
    );
    let ids = insert(
        store,
        ann.id,
        &[
            email(&nul, &[roles.inbox], &[], 1),
            email(&reply, &[roles.inbox], &[], 2),
        ],
    )
    .await;
    let other = insert(store, ann.id, &[email(&other, &[roles.inbox], &[], 3)]).await[0];
    let mut threads: Vec<(i64, i64)> = store
        .email_meta(ann.id, &[ids[0], ids[1], other])
        .await
        .unwrap()
        .into_iter()
        .map(|m| (m.id, m.thread_id))
        .collect();
    threads.sort();
    assert_eq!(
        threads,
        vec![(ids[0], ids[0]), (ids[1], ids[0]), (other, other)]
    );
    let rows = store.query_rows(ann.id, None).await.unwrap();
    let first = rows.iter().find(|r| r.meta.id == ids[0]).unwrap();
    assert_eq!(first.index.subject.replace('\0', ""), "nulsubject");
    assert_eq!(first.index.message_id.as_deref(), Some(long_id.as_str()));
    // Arriving later, a message naming the long id still finds the thread.
    let late = message(
        Some("late@x"),
        (None, Some(&format!("<{long_id}>"))),
        "Re: Re: =?utf-8?q?Nul=00Subject?=",
        "late",
    );
    let late = insert(store, ann.id, &[email(&late, &[roles.inbox], &[], 4)]).await[0];
    assert_eq!(
        store.email_meta(ann.id, &[late]).await.unwrap()[0].thread_id,
        ids[0]
    );
}

// ---- change log -----------------------------------------------------------

async fn changes_of(store: &dyn Store, account: i64, kind: ChangeType, since: i64) -> Changes {
    let changes = store
        .changes(account, kind, LogPosition::at(since), 1000)
        .await
        .expect("changes");
    assert!(!changes.has_more);
    changes
}

fn new_folder(name: &str) -> NewMailbox {
    NewMailbox {
        parent_id: None,
        name: name.into(),
        role: None,
        sort_order: 0,
        is_subscribed: true,
    }
}

async fn change_log(store: Arc<dyn Store>) {
    let store = store.as_ref();
    let (ann, roles) = account(store, "ann@example.com").await;
    let (bob, bob_roles) = account(store, "bob@example.com").await;
    // From the account's beginning: its role mailboxes were created.
    let mut role_ids = vec![
        roles.inbox,
        roles.drafts,
        roles.sent,
        roles.trash,
        roles.junk,
        roles.archive,
    ];
    role_ids.sort();
    let first = changes_of(store, ann.id, ChangeType::Mailbox, 0).await;
    assert_eq!(first.created, role_ids);
    let start = store.states(ann.id).await.unwrap();
    assert_eq!(first.new_state, LogPosition::at(start.mailbox));
    assert!(
        changes_of(store, ann.id, ChangeType::Email, start.email)
            .await
            .is_empty()
    );

    // Three new emails, two in one thread: emails and threads created, the
    // inbox's counts changed.
    let a = message(Some("a@x"), (None, None), "A", "1");
    let b = message(Some("b@x"), (Some("a@x"), None), "Re: A", "2");
    let ids = insert(
        store,
        ann.id,
        &[
            email(&a, &[roles.inbox], &[], 1),
            email(&b, &[roles.inbox], &[], 2),
            email(&plain("c"), &[roles.inbox], &[], 3),
        ],
    )
    .await;
    insert(store, bob.id, &[email(&a, &[bob_roles.inbox], &[], 1)]).await;
    let emails = changes_of(store, ann.id, ChangeType::Email, start.email).await;
    assert_eq!(emails.created, ids);
    assert!(emails.updated.is_empty() && emails.destroyed.is_empty());
    let s1 = store.states(ann.id).await.unwrap();
    assert_eq!(emails.new_state, LogPosition::at(s1.email));
    let threads = changes_of(store, ann.id, ChangeType::Thread, start.thread).await;
    assert_eq!(threads.created, vec![ids[0], ids[2]]);
    let mailboxes = changes_of(store, ann.id, ChangeType::Mailbox, start.mailbox).await;
    assert_eq!(
        (mailboxes.updated.clone(), mailboxes.counts_only.clone()),
        (vec![roles.inbox], vec![roles.inbox])
    );
    assert!(mailboxes.created.is_empty());

    // Reading b changes the inbox's counts; flagging c does not.
    let outcomes = store
        .update_emails(
            ann.id,
            &[
                EmailUpdate::replace(ids[1], Some(vec!["$seen".into()]), None),
                EmailUpdate::replace(ids[2], Some(vec!["$flagged".into()]), None),
            ],
        )
        .await
        .unwrap();
    assert_eq!(outcomes, vec![UpdateOutcome::Updated; 2]);
    let s2 = store.states(ann.id).await.unwrap();
    assert_eq!(
        (s2.email, s2.mailbox, s2.thread),
        (s1.email + 1, s1.email + 1, s1.thread)
    );
    assert_eq!(
        changes_of(store, ann.id, ChangeType::Email, s1.email)
            .await
            .updated,
        vec![ids[1], ids[2]]
    );
    assert_eq!(
        changes_of(store, ann.id, ChangeType::Mailbox, s1.mailbox)
            .await
            .counts_only,
        vec![roles.inbox]
    );
    store
        .update_emails(
            ann.id,
            &[EmailUpdate::replace(
                ids[2],
                Some(vec!["$answered".into()]),
                None,
            )],
        )
        .await
        .unwrap();
    assert_eq!(store.states(ann.id).await.unwrap().mailbox, s2.mailbox);

    // Destroying a leaves its thread to b (updated); destroying b ends it.
    assert_eq!(
        store.destroy_emails(ann.id, &[ids[0]]).await.unwrap(),
        vec![ids[0]]
    );
    let s3 = store.states(ann.id).await.unwrap();
    assert_eq!(
        changes_of(store, ann.id, ChangeType::Thread, s2.thread)
            .await
            .updated,
        vec![ids[0]]
    );
    store.destroy_emails(ann.id, &[ids[1]]).await.unwrap();
    let threads = changes_of(store, ann.id, ChangeType::Thread, s3.thread).await;
    assert_eq!(threads.destroyed, vec![ids[0]]);
    // Collapsed over the window: created then destroyed is gone, updated
    // then destroyed is destroyed, created then updated is created.
    let emails = changes_of(store, ann.id, ChangeType::Email, start.email).await;
    assert_eq!(
        (
            emails.created.clone(),
            emails.updated.clone(),
            emails.destroyed.clone()
        ),
        (vec![ids[2]], vec![], vec![])
    );
    let emails = changes_of(store, ann.id, ChangeType::Email, s1.email).await;
    assert_eq!(
        (
            emails.created.clone(),
            emails.updated.clone(),
            emails.destroyed.clone()
        ),
        (vec![], vec![ids[2]], vec![ids[0], ids[1]])
    );
    let threads = changes_of(store, ann.id, ChangeType::Thread, start.thread).await;
    assert_eq!((threads.created, threads.destroyed), (vec![ids[2]], vec![]));

    // Mailboxes: created, renamed (not counts only), destroyed with its emails.
    let s4 = store.states(ann.id).await.unwrap();
    let folder = store
        .create_mailbox(ann.id, &new_folder("F"))
        .await
        .unwrap();
    let after_create = store.states(ann.id).await.unwrap();
    store
        .update_mailbox(
            ann.id,
            roles.archive,
            &MailboxPatch {
                name: Some("Old".into()),
                ..MailboxPatch::default()
            },
        )
        .await
        .unwrap();
    let moved = insert(store, ann.id, &[email(&plain("d"), &[folder], &[], 4)]).await;
    let mailboxes = changes_of(store, ann.id, ChangeType::Mailbox, s4.mailbox).await;
    assert_eq!(mailboxes.created, vec![folder]);
    assert_eq!(mailboxes.updated, vec![roles.archive]);
    assert!(mailboxes.counts_only.is_empty());
    let mailboxes = changes_of(store, ann.id, ChangeType::Mailbox, after_create.mailbox).await;
    let mut updated = vec![roles.archive, folder];
    updated.sort();
    assert_eq!(mailboxes.updated, updated);
    assert_eq!(mailboxes.counts_only, vec![folder]);
    let s5 = store.states(ann.id).await.unwrap();
    store.destroy_mailbox(ann.id, folder, true).await.unwrap();
    let mailboxes = changes_of(store, ann.id, ChangeType::Mailbox, s5.mailbox).await;
    assert_eq!(mailboxes.destroyed, vec![folder]);
    assert!(mailboxes.updated.is_empty());
    assert_eq!(
        changes_of(store, ann.id, ChangeType::Email, s5.email)
            .await
            .destroyed,
        moved
    );
    assert_eq!(
        changes_of(store, ann.id, ChangeType::Thread, s5.thread)
            .await
            .destroyed,
        moved
    );
    // Created and destroyed within the window: not reported at all.
    let mailboxes = changes_of(store, ann.id, ChangeType::Mailbox, s4.mailbox).await;
    assert!(mailboxes.created.is_empty() && mailboxes.destroyed.is_empty());

    // Bob's log is his own.
    let bobs = changes_of(store, bob.id, ChangeType::Email, 0).await;
    assert_eq!(bobs.created.len(), 1);
    assert!(!bobs.created.iter().any(|id| ids.contains(id)));
}

async fn change_log_paging_and_retention(store: Arc<dyn Store>) {
    let store = store.as_ref();
    let (ann, roles) = account(store, "ann@example.com").await;
    let start = store.states(ann.id).await.unwrap();
    let batch: Vec<NewEmail> = (0..5)
        .map(|i| email(&plain(&format!("batch {i}")), &[roles.inbox], &[], i))
        .collect();
    let mut expected = insert(store, ann.id, &batch).await;
    expected.extend(
        insert(
            store,
            ann.id,
            &[email(&plain("single"), &[roles.inbox], &[], 9)],
        )
        .await,
    );
    expected.extend(
        insert(
            store,
            ann.id,
            &[email(&plain("other"), &[roles.inbox], &[], 9)],
        )
        .await,
    );
    let end = store.states(ann.id).await.unwrap();
    // Pages of at most 2: the 5-email write is cut inside, at "modseq:id".
    let mut since = LogPosition::at(start.email);
    let (mut seen, mut pages, mut intermediate) = (Vec::new(), 0, false);
    loop {
        let page = store
            .changes(ann.id, ChangeType::Email, since, 2)
            .await
            .unwrap();
        assert!(page.len() <= 2 && !page.is_empty(), "{page:?}");
        seen.extend(page.created.iter().copied());
        pages += 1;
        intermediate |= page.new_state.object.is_some();
        let state = page.new_state.to_string();
        assert_eq!(LogPosition::parse(&state), Some(page.new_state));
        since = page.new_state;
        if !page.has_more {
            assert_eq!(page.new_state, LogPosition::at(end.email));
            break;
        }
    }
    assert!(intermediate);
    assert_eq!(pages, 4);
    seen.sort();
    assert_eq!(seen, expected);
    // A page never splits a write it can take whole: with room for 6, the
    // batch and the single come together, the last email next.
    let page = store
        .changes(ann.id, ChangeType::Email, LogPosition::at(start.email), 6)
        .await
        .unwrap();
    assert_eq!(page.created, expected[..6]);
    assert!(page.has_more);

    // States in the future are not states.
    assert_err!(
        store
            .changes(
                ann.id,
                ChangeType::Email,
                LogPosition::at(end.email + 1),
                10
            )
            .await,
        StoreError::CannotCalculateChanges
    );
    assert_err!(
        store
            .changes(i64::MAX, ChangeType::Email, LogPosition::at(0), 10)
            .await,
        StoreError::NotFound
    );
    // After truncation, earlier states cannot be calculated from; later can.
    let dropped = store.truncate_changes(ann.id, end.email - 1).await.unwrap();
    assert!(dropped >= 6, "{dropped}");
    assert_err!(
        store
            .changes(ann.id, ChangeType::Email, LogPosition::at(start.email), 10)
            .await,
        StoreError::CannotCalculateChanges
    );
    let last = changes_of(store, ann.id, ChangeType::Email, end.email - 1).await;
    assert_eq!(last.created, vec![expected[6]]);
    assert!(
        changes_of(store, ann.id, ChangeType::Email, end.email)
            .await
            .is_empty()
    );
}

async fn concurrent_keyword_patches(store: Arc<dyn Store>) {
    let (ann, roles) = account(store.as_ref(), "ann@example.com").await;
    let id = insert(
        store.as_ref(),
        ann.id,
        &[email(&plain("x"), &[roles.inbox], &[], 1)],
    )
    .await[0];
    let before = store.states(ann.id).await.unwrap();
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                let update = EmailUpdate {
                    id,
                    keywords: ListPatch {
                        add: vec![format!("k{i}")],
                        ..ListPatch::default()
                    },
                    ..EmailUpdate::default()
                };
                store
                    .update_emails(ann.id, &[update])
                    .await
                    .expect("update")
            })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap(), vec![UpdateOutcome::Updated]);
    }
    let keywords = store.email_meta(ann.id, &[id]).await.unwrap()[0]
        .keywords
        .clone();
    assert_eq!(keywords.len(), 16, "{keywords:?}");
    assert_eq!(store.states(ann.id).await.unwrap().email, before.email + 16);
}

async fn mailbox_positions(store: Arc<dyn Store>) {
    let store = store.as_ref();
    let (ann, roles) = account(store, "ann@example.com").await;
    let ids = insert(
        store,
        ann.id,
        &[
            email(&plain("1"), &[roles.inbox], &[], 30),
            email(&plain("2"), &[roles.inbox], &[], 10),
            email(&plain("3"), &[roles.inbox], &[], 20),
            email(&plain("4"), &[roles.archive], &[], 15),
            email(&plain("5"), &[roles.inbox], &[], 20),
        ],
    )
    .await;
    let mut newest_first = store
        .mailbox_positions(roles.inbox, true, &[ids[0], ids[1], ids[2], ids[3], ids[4]])
        .await
        .unwrap();
    newest_first.sort();
    assert_eq!(
        newest_first,
        vec![(ids[0], 0), (ids[1], 3), (ids[2], 2), (ids[4], 1)]
    );
    let (listing, _) = store
        .mailbox_emails_by_received(roles.inbox, false, 0, 10)
        .await
        .unwrap();
    let mut oldest_first = store
        .mailbox_positions(roles.inbox, false, &ids)
        .await
        .unwrap();
    oldest_first.sort_by_key(|(_, index)| *index);
    assert_eq!(
        oldest_first.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
        listing.iter().map(|(id, _)| *id).collect::<Vec<_>>()
    );
}

// ---- PostgreSQL plans -----------------------------------------------------

/// With ≥ 10k emails in one mailbox and fresh statistics, the listing and the
/// projection read are index(-only) scans, never sequential scans.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_plans_use_covering_indexes() {
    let Some(harness) = Harness::postgres().await else {
        return;
    };
    let (postgres, url) = harness.postgres.clone().unwrap();
    let store = harness.store.as_ref();
    let (ann, roles) = account(store, "ann@example.com").await;
    let (bob, bob_roles) = account(store, "bob@example.com").await;
    let template = email(&plain("one message, many copies"), &[roles.inbox], &[], 0);
    let mut ids = Vec::new();
    for chunk in 0..11 {
        let batch: Vec<NewEmail> = (0..1000)
            .map(|i| {
                let n = chunk * 1000 + i;
                let mut copy = template.clone();
                copy.blob_id = format!("{n:064x}");
                copy.received_at = 1_700_000_000 + n;
                copy.keywords = if n % 3 == 0 {
                    vec!["$seen".into()]
                } else {
                    vec![]
                };
                copy.fast_view.preview = format!("copy {n}");
                copy
            })
            .collect();
        ids.extend(insert(store, ann.id, &batch).await);
    }
    // Some other rows, so the big mailbox is not the whole table.
    let others: Vec<NewEmail> = (0..500)
        .map(|n| {
            let mut copy = template.clone();
            copy.blob_id = format!("b{n:063x}");
            copy.mailbox_ids = vec![bob_roles.inbox];
            copy
        })
        .collect();
    insert(store, bob.id, &others).await;
    let mut connection = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::query("VACUUM ANALYZE")
        .execute(&mut connection)
        .await
        .unwrap();

    let (page, total) = store
        .mailbox_emails_by_received(roles.inbox, true, 0, 30)
        .await
        .unwrap();
    assert_eq!(total, 11_000);
    let newest: Vec<i64> = ids.iter().rev().take(30).copied().collect();
    assert_eq!(page.iter().map(|(id, _)| *id).collect::<Vec<_>>(), newest);
    assert!(
        page.iter().all(|(id, thread)| id == thread),
        "no Message-ID: each its own thread"
    );

    for (position, limit) in [(0, 30), (5_000, 50)] {
        let plan = postgres
            .mailbox_listing_plan(roles.inbox, position, limit)
            .await
            .unwrap()
            .join("\n");
        eprintln!("listing at {position}, {limit}:\n{plan}");
        assert!(
            plan.contains("Index Only Scan Backward using email_mailboxes_pkey on email_mailboxes"),
            "{plan}"
        );
        assert!(
            plan.contains("Index Only Scan using emails_pkey on emails"),
            "{plan}"
        );
        assert!(!plan.contains("Seq Scan"), "{plan}");
        assert!(!plan.contains("Sort"), "{plan}");
    }
    let asked: Vec<i64> = ids.iter().step_by(97).take(50).copied().collect();
    let plan = postgres
        .fast_view_plan(ann.id, &asked)
        .await
        .unwrap()
        .join("\n");
    eprintln!("projection:\n{plan}");
    assert!(
        plan.contains("Index Only Scan using fast_view_pkey on fast_view"),
        "{plan}"
    );
    assert!(
        plan.contains("Index Only Scan using emails_pkey on emails"),
        "{plan}"
    );
    assert!(!plan.contains("Seq Scan"), "{plan}");
    let views = store.fast_views(ann.id, &asked).await.unwrap();
    assert_eq!(views.len(), 50);
    assert!(
        views.iter().all(|(id, view)| view.preview
            == format!("copy {}", ids.iter().position(|x| x == id).unwrap()))
    );
    let _ = connection.close().await;
}

//! Edge cases of the one store: raw rows for migrate-store (existing rows
//! kept, id sources never moved back, parents later in a page), batches
//! larger than one statement, NUL and over-long strings, message ids
//! written without angle brackets.

use super::*;
use fastview::store::raw::{BlobRecord, MailboxRecord, RawCursor, RawRows, RawTable};

conformance!(
    raw_import_keeps_existing_projection,
    raw_import_never_reuses_email_ids,
    raw_import_mailbox_child_before_parent,
    large_batches,
    nul_login_is_not_found,
    nul_keyword_update,
    long_and_nul_message_ids_thread,
    nul_message_id_threads,
    bare_message_id_threads,
);

/// `import_raw` skips rows already there (trait doc; the old stores used
/// ON CONFLICT DO NOTHING for fast_view): re-importing an email must not
/// replace its projection row.
pub async fn raw_import_keeps_existing_projection(store: Arc<dyn Store>) {
    let store = store.as_ref();
    let (ann, roles) = account(store, "ann@example.com").await;
    let ids = insert(store, ann.id, &[email(&plain("a"), &[roles.inbox], &[], 1)]).await;
    let before = store.fast_views(ann.id, &ids).await.unwrap();
    let RawRows::Emails(mut rows) = store
        .export_raw(RawTable::Emails, ann.id, &RawCursor::default(), 10)
        .await
        .unwrap()
    else {
        panic!("emails page")
    };
    rows[0].fast_view = Some(FastView {
        preview: "from another store".into(),
        has_attachment: true,
    });
    let written = store.import_raw(&RawRows::Emails(rows)).await.unwrap();
    assert_eq!(written, 0, "the email was already there");
    assert_eq!(store.fast_views(ann.id, &ids).await.unwrap(), before);
}

/// Email ids are never reused (SQLite AUTOINCREMENT; the PostgreSQL
/// migration promises the same of its identity). Importing rows of an
/// unrelated table must not move the emails id sequence back.
pub async fn raw_import_never_reuses_email_ids(store: Arc<dyn Store>) {
    let store = store.as_ref();
    let (ann, roles) = account(store, "ann@example.com").await;
    let ids = insert(
        store,
        ann.id,
        &[
            email(&plain("a"), &[roles.inbox], &[], 1),
            email(&plain("b"), &[roles.inbox], &[], 2),
        ],
    )
    .await;
    assert_eq!(
        store.destroy_emails(ann.id, &ids[1..]).await.unwrap(),
        ids[1..]
    );
    store
        .import_raw(&RawRows::AccountBlobs(
            ann.id,
            vec![BlobRecord {
                blob_id: "upload".into(),
                size: 1,
                created_at: 0,
            }],
        ))
        .await
        .unwrap();
    let next = insert(store, ann.id, &[email(&plain("c"), &[roles.inbox], &[], 3)]).await;
    assert!(
        next[0] > ids[1],
        "id {} reused (destroyed {})",
        next[0],
        ids[1]
    );
}

/// A page where a child mailbox comes before its parent (the old SQLite
/// import inserted without parents, then linked them).
pub async fn raw_import_mailbox_child_before_parent(store: Arc<dyn Store>) {
    let store = store.as_ref();
    let (ann, _) = account(store, "ann@example.com").await;
    let base = store
        .mailboxes(ann.id)
        .await
        .unwrap()
        .iter()
        .map(|m| m.id)
        .max()
        .unwrap();
    let record = |id: i64, parent_id: Option<i64>, name: &str| MailboxRecord {
        id,
        account_id: ann.id,
        parent_id,
        name: name.into(),
        role: None,
        sort_order: 0,
        is_subscribed: true,
    };
    let rows = vec![
        record(base + 10, Some(base + 20), "child"),
        record(base + 20, None, "parent"),
    ];
    assert_eq!(
        store.import_raw(&RawRows::Mailboxes(rows)).await.unwrap(),
        2
    );
    let child = mailbox(store, ann.id, base + 10).await.expect("child");
    assert_eq!(child.parent_id, Some(base + 20));
}

/// Batches past one multi-row statement (MAX_BINDS / columns rows): insert,
/// keyword update and destroy of 2,000 emails, 3,000 membership rows.
pub async fn large_batches(store: Arc<dyn Store>) {
    let store = store.as_ref();
    let (ann, roles) = account(store, "ann@example.com").await;
    let n = 2000;
    let emails: Vec<NewEmail> = (0..n)
        .map(|i| {
            let mailboxes = if i % 2 == 0 {
                vec![roles.inbox, roles.archive]
            } else {
                vec![roles.inbox]
            };
            email(&plain(&format!("body {i}")), &mailboxes, &[], i as i64)
        })
        .collect();
    let started = std::time::Instant::now();
    let ids = insert(store, ann.id, &emails).await;
    eprintln!("insert {n}: {:?}", started.elapsed());
    assert_eq!(ids.len(), n);
    let inbox = mailbox(store, ann.id, roles.inbox).await.unwrap();
    assert_eq!(
        (inbox.total_emails, inbox.unread_emails),
        (n as i64, n as i64)
    );
    let updates: Vec<EmailUpdate> = ids
        .iter()
        .map(|id| EmailUpdate::replace(*id, Some(vec!["$seen".into(), "x".into()]), None))
        .collect();
    let started = std::time::Instant::now();
    let outcomes = store.update_emails(ann.id, &updates).await.unwrap();
    eprintln!("update {n}: {:?}", started.elapsed());
    assert!(outcomes.iter().all(|o| *o == UpdateOutcome::Updated));
    let inbox = mailbox(store, ann.id, roles.inbox).await.unwrap();
    assert_eq!((inbox.total_emails, inbox.unread_emails), (n as i64, 0));
    let meta = store.email_meta(ann.id, &ids).await.unwrap();
    assert!(meta.iter().all(|m| m.keywords == ["$seen", "x"]));
    let destroyed = store.destroy_emails(ann.id, &ids).await.unwrap();
    assert_eq!(destroyed.len(), n);
}

/// A login holding NUL is simply unknown (Basic auth passes the user
/// name straight to account_by_email; an error there is a 500).
pub async fn nul_login_is_not_found(store: Arc<dyn Store>) {
    let store = store.as_ref();
    account(store, "ann@example.com").await;
    assert!(
        store
            .account_by_email("ann\0@example.com")
            .await
            .unwrap()
            .is_none()
    );
}

/// Keywords with NUL: ingest strips NUL on PostgreSQL (write_emails runs
/// the keywords column through Dialect::text), update does not.
pub async fn nul_keyword_update(store: Arc<dyn Store>) {
    let store = store.as_ref();
    let (ann, roles) = account(store, "ann@example.com").await;
    let ids = insert(
        store,
        ann.id,
        &[email(&plain("a"), &[roles.inbox], &["a\0b"], 1)],
    )
    .await;
    let outcome = store
        .update_emails(
            ann.id,
            &[EmailUpdate::replace(
                ids[0],
                Some(vec!["c\0d".into()]),
                None,
            )],
        )
        .await;
    assert!(outcome.is_ok(), "{outcome:?}");
}

/// Message ids longer than a btree key and with NUL still thread.
pub async fn long_and_nul_message_ids_thread(store: Arc<dyn Store>) {
    let store = store.as_ref();
    let (ann, roles) = account(store, "ann@example.com").await;
    let long = format!("{}@example.com", "x".repeat(4000));
    let first = message(Some(&long), (None, None), "Long", "1");
    let reply = message(Some("r@x"), (Some(&long), None), "Re: Long", "2");
    let ids = insert(store, ann.id, &[email(&first, &[roles.inbox], &[], 1)]).await;
    let reply_ids = insert(store, ann.id, &[email(&reply, &[roles.inbox], &[], 2)]).await;
    let meta = store
        .email_meta(ann.id, &[ids[0], reply_ids[0]])
        .await
        .unwrap();
    let threads: Vec<i64> = meta.iter().map(|m| m.thread_id).collect();
    assert_eq!(threads[0], threads[1], "{meta:?}");
}

/// A message id holding NUL (store level: the index as given) threads its
/// reply on both databases.
pub async fn nul_message_id_threads(store: Arc<dyn Store>) {
    let store = store.as_ref();
    let (ann, roles) = account(store, "ann@example.com").await;
    let mut first = email(
        &message(None, (None, None), "Nul", "1"),
        &[roles.inbox],
        &[],
        1,
    );
    first.index.message_id = Some("a\0b@x".into());
    let mut reply = email(
        &message(None, (None, None), "Re: Nul", "2"),
        &[roles.inbox],
        &[],
        2,
    );
    reply.index.referenced_ids = vec!["a\0b@x".into()];
    let a = insert(store, ann.id, &[first]).await;
    let b = insert(store, ann.id, &[reply]).await;
    let meta = store.email_meta(ann.id, &[a[0], b[0]]).await.unwrap();
    assert_eq!(meta[0].thread_id, meta[1].thread_id, "{meta:?}");
}

/// An original whose Message-ID a mailer wrote without angle brackets, and
/// a reply naming it (bare, as ingest's threading fallback now reads it, or
/// bracketed): one thread.
pub async fn bare_message_id_threads(store: Arc<dyn Store>) {
    let store = store.as_ref();
    let (ann, roles) = account(store, "ann@example.com").await;
    let raw = |headers: &str, body: &str| {
        format!("From: a@x\r\nSubject: Plans\r\n{headers}\r\n\r\n{body}\r\n").into_bytes()
    };
    let original = raw("Message-ID: CAKo1dg@mail.gmail.com", "1");
    let bare_reply = raw(
        "Message-ID: <r1@x>\r\nIn-Reply-To: CAKo1dg@mail.gmail.com",
        "2",
    );
    let reply = raw(
        "Message-ID: <r2@x>\r\nIn-Reply-To: <CAKo1dg@mail.gmail.com>",
        "3",
    );
    let o = email(&original, &[roles.inbox], &[], 1);
    eprintln!("original index: {:?}", o.index.message_id);
    let ids = insert(
        store,
        ann.id,
        &[
            o,
            email(&bare_reply, &[roles.inbox], &[], 2),
            email(&reply, &[roles.inbox], &[], 3),
        ],
    )
    .await;
    let meta = store.email_meta(ann.id, &ids).await.unwrap();
    let mut threads: Vec<(i64, i64)> = meta.iter().map(|m| (m.id, m.thread_id)).collect();
    threads.sort();
    assert!(threads.iter().all(|t| t.1 == threads[0].1), "{threads:?}");
}

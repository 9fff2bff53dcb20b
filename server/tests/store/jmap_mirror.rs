//! What the store keeps of a JMAP upstream (issue 19, migration 0310): the
//! upstream account a local account mirrors and the Email state it is at;
//! the upstream id of each mailbox (only the account's own); the upstream
//! Email id, blobId and threadId of each email, looked up by local or by
//! upstream ids, the first mapping kept, never another account's; and the
//! rows going with their email.

use fastview::store::MirroredEmail;

use super::*;

fn mirrored(email_id: i64, upstream_id: &str) -> MirroredEmail {
    MirroredEmail {
        email_id,
        upstream_id: upstream_id.into(),
        blob_id: format!("B{upstream_id}"),
        thread_id: format!("T{upstream_id}"),
        parts: (upstream_id == "E2").then(|| r#"{"1":"P1"}"#.to_string()),
    }
}

async fn mirror_rows_name_accounts_mailboxes_and_emails_as_the_upstream(store: Arc<dyn Store>) {
    let (ann, ann_roles) = account(store.as_ref(), "ann@example.com").await;
    let (bob, bob_roles) = account(store.as_ref(), "bob@example.com").await;
    assert_eq!(store.mirror_account("u-ann").await.unwrap(), None);
    store.put_mirror_account(ann.id, "u-ann").await.unwrap();
    store.put_mirror_account(ann.id, "u-other").await.unwrap();
    store.put_mirror_account(bob.id, "u-bob").await.unwrap();
    assert_eq!(
        store.mirror_account("u-ann").await.unwrap(),
        Some((ann.id, None))
    );
    assert_eq!(store.mirror_account("u-other").await.unwrap(), None);
    store.set_mirror_state(ann.id, "s1").await.unwrap();
    store.set_mirror_state(ann.id, "s2").await.unwrap();
    assert_eq!(
        store.mirror_account("u-ann").await.unwrap(),
        Some((ann.id, Some("s2".into())))
    );
    assert_eq!(
        store.mirror_account("u-bob").await.unwrap(),
        Some((bob.id, None))
    );

    store
        .put_mirror_mailbox(ann.id, ann_roles.inbox, "M1")
        .await
        .unwrap();
    store
        .put_mirror_mailbox(ann.id, bob_roles.inbox, "M2")
        .await
        .unwrap();
    store
        .put_mirror_mailbox(ann.id, ann_roles.archive, "M3")
        .await
        .unwrap();
    let mut mailboxes = vec![
        (ann_roles.inbox, "M1".to_string()),
        (ann_roles.archive, "M3".to_string()),
    ];
    mailboxes.sort();
    assert_eq!(store.mirror_mailboxes(ann.id).await.unwrap(), mailboxes);
    assert!(store.mirror_mailboxes(bob.id).await.unwrap().is_empty());

    let ids = insert(
        store.as_ref(),
        ann.id,
        &[
            email(
                &message(Some("one@example.com"), (None, None), "one", "first"),
                &[ann_roles.inbox],
                &[],
                10,
            ),
            email(
                &message(Some("two@example.com"), (None, None), "two", "second"),
                &[ann_roles.inbox],
                &[],
                20,
            ),
        ],
    )
    .await;
    let bobs = insert(
        store.as_ref(),
        bob.id,
        &[email(
            &message(Some("three@example.com"), (None, None), "three", "third"),
            &[bob_roles.inbox],
            &[],
            30,
        )],
    )
    .await;
    store
        .put_mirror_emails(
            ann.id,
            &[
                mirrored(ids[0], "E1"),
                mirrored(ids[1], "E2"),
                // Another account's email, an email mapped twice, an upstream
                // id mapped twice: none is recorded.
                mirrored(bobs[0], "E3"),
                mirrored(ids[0], "E9"),
            ],
        )
        .await
        .unwrap();
    store
        .put_mirror_emails(ann.id, &[mirrored(ids[1], "E1")])
        .await
        .unwrap();
    let mut all = store.mirror_emails(ann.id, None, None).await.unwrap();
    all.sort_by_key(|m| m.email_id);
    assert_eq!(all, [mirrored(ids[0], "E1"), mirrored(ids[1], "E2")]);
    assert_eq!(
        store
            .mirror_emails(ann.id, Some(&[ids[1], bobs[0]]), None)
            .await
            .unwrap(),
        [mirrored(ids[1], "E2")]
    );
    assert_eq!(
        store
            .mirror_emails(ann.id, None, Some(&["E1", "E3", "E9"]))
            .await
            .unwrap(),
        [mirrored(ids[0], "E1")]
    );
    assert!(
        store
            .mirror_emails(bob.id, None, Some(&["E1", "E3"]))
            .await
            .unwrap()
            .is_empty()
    );

    // A destroyed email takes its mapping with it.
    store.destroy_emails(ann.id, &[ids[0]]).await.unwrap();
    assert_eq!(
        store.mirror_emails(ann.id, None, None).await.unwrap(),
        [mirrored(ids[1], "E2")]
    );
}

conformance!(mirror_rows_name_accounts_mailboxes_and_emails_as_the_upstream);

async fn mirror_threads_list_upstream_ids_oldest_first_and_census_counts(store: Arc<dyn Store>) {
    let (ann, roles) = account(store.as_ref(), "ann@example.com").await;
    let (bob, bob_roles) = account(store.as_ref(), "bob@example.com").await;
    let raw = |n: &str| message(Some(&format!("{n}@example.com")), (None, None), n, n);
    let ids = insert(
        store.as_ref(),
        ann.id,
        &[
            email(&raw("late"), &[roles.inbox], &[], 30),
            email(&raw("early"), &[roles.inbox], &[], 10),
            email(&raw("middle"), &[roles.inbox], &[], 20),
            email(&raw("unmapped"), &[roles.inbox], &[], 40),
        ],
    )
    .await;
    let bobs = insert(
        store.as_ref(),
        bob.id,
        &[email(&raw("bobs"), &[bob_roles.inbox], &[], 5)],
    )
    .await;
    assert_eq!(store.mirror_census(ann.id).await.unwrap(), (0, 4));
    let in_thread = |email_id: i64, upstream: &str, thread: &str| MirroredEmail {
        thread_id: thread.into(),
        ..mirrored(email_id, upstream)
    };
    store
        .put_mirror_emails(
            ann.id,
            &[
                in_thread(ids[0], "E-late", "Ta"),
                in_thread(ids[1], "E-early", "Ta"),
                in_thread(ids[2], "E-middle", "Tb"),
            ],
        )
        .await
        .unwrap();
    store
        .put_mirror_emails(bob.id, &[in_thread(bobs[0], "E-bob", "Ta")])
        .await
        .unwrap();
    assert_eq!(store.mirror_census(ann.id).await.unwrap(), (3, 4));
    assert_eq!(store.mirror_census(bob.id).await.unwrap(), (1, 1));
    let mut threads = store
        .mirror_threads(ann.id, &["Ta", "Tb", "Tnone"])
        .await
        .unwrap();
    threads.sort();
    assert_eq!(
        threads,
        [
            (
                "Ta".to_string(),
                vec!["E-early".to_string(), "E-late".to_string()]
            ),
            ("Tb".to_string(), vec!["E-middle".to_string()]),
        ]
    );
    assert_eq!(
        store.mirror_threads(bob.id, &["Ta"]).await.unwrap(),
        [("Ta".to_string(), vec!["E-bob".to_string()])]
    );
}

conformance!(mirror_threads_list_upstream_ids_oldest_first_and_census_counts);

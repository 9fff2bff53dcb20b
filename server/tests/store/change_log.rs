//! The change log: Foo/changes per type, paging and retention.

use super::*;

conformance!(change_log, change_log_paging_and_retention);

pub async fn changes_of(store: &dyn Store, account: i64, kind: ChangeType, since: i64) -> Changes {
    let changes = store
        .changes(account, kind, LogPosition::at(since), 1000)
        .await
        .expect("changes");
    assert!(!changes.has_more);
    changes
}

pub async fn change_log(store: Arc<dyn Store>) {
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
    update_one(
        store,
        ann.id,
        EmailUpdate::replace(ids[2], Some(vec!["$answered".into()]), None),
    )
    .await;
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
        .create_mailbox(ann.id, &new_mailbox(None, "F"))
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

pub async fn change_log_paging_and_retention(store: Arc<dyn Store>) {
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

//! Mailbox counts, destroying mailboxes, the receivedAt listing and positions in it.

use super::*;

conformance!(
    mailbox_counts,
    destroy_mailbox_semantics,
    listing_by_received,
    mailbox_positions
);

pub async fn mailbox_counts(store: Arc<dyn Store>) {
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
    update_one(
        store,
        ann.id,
        EmailUpdate::replace(ids[0], Some(vec!["$seen".into()]), None),
    )
    .await;
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

pub async fn destroy_mailbox_semantics(store: Arc<dyn Store>) {
    let store = store.as_ref();
    let (ann, roles) = account(store, "ann@example.com").await;
    let (bob, bob_roles) = account(store, "bob@example.com").await;
    let projects = store
        .create_mailbox(ann.id, &new_mailbox(None, "Projects"))
        .await
        .unwrap();
    let child = store
        .create_mailbox(ann.id, &new_mailbox(Some(projects), "2024"))
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

pub async fn listing_by_received(store: Arc<dyn Store>) {
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

pub async fn mailbox_positions(store: Arc<dyn Store>) {
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

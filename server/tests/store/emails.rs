//! Storing, reading, updating and destroying emails: duplicates, account isolation, patches, projection rows, blob grants, concurrency, hostile headers.

use super::*;

conformance!(
    duplicates_in_and_across_batches,
    batched_reads_are_account_isolated,
    update_emails_semantics,
    destroy_emails_semantics,
    projection_maintenance,
    blob_grants,
    concurrent_writers,
    hostile_headers,
    concurrent_keyword_patches
);

pub async fn duplicates_in_and_across_batches(store: Arc<dyn Store>) {
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
    assert_eq!(by_received(store, roles.inbox, false).await.1, 3);
    assert_eq!(by_received(store, roles.archive, false).await.1, 0);

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
    assert_eq!(by_received(store, roles.inbox, false).await.1, 3);
    // An email may be stored in no mailbox.
    let nowhere = insert(store, ann.id, &[email(&d, &[], &[], 9)]).await;
    assert_eq!(
        store.email_meta(ann.id, &nowhere).await.unwrap()[0].mailbox_ids,
        Vec::<i64>::new()
    );
}

pub async fn batched_reads_are_account_isolated(store: Arc<dyn Store>) {
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
    let (together, state) = store
        .email_meta_unless_state(ann.id, &asked, None)
        .await
        .unwrap();
    let mut together = together.expect("rows when no state is known");
    together.sort_by_key(|m| m.id);
    assert_eq!(together, meta);
    assert_eq!(state, store.states(ann.id).await.unwrap().email);
    let (none, _) = store
        .email_meta_unless_state(ann.id, &[bobs[0]], None)
        .await
        .unwrap();
    assert_eq!(none, Some(Vec::new()));
    // Told the current state, the statement builds no rows; told an older
    // one (or none), the rows of the current state.
    assert_eq!(
        store
            .email_meta_unless_state(ann.id, &asked, Some(state))
            .await
            .unwrap(),
        (None, state)
    );
    let (stale, current) = store
        .email_meta_unless_state(ann.id, &asked, Some(state - 1))
        .await
        .unwrap();
    let mut stale = stale.expect("rows for a state that moved");
    stale.sort_by_key(|m| m.id);
    assert_eq!((stale, current), (meta.clone(), state));
    assert!(matches!(
        store
            .email_meta_unless_state(i64::MAX, &asked, Some(state))
            .await,
        Err(StoreError::NotFound)
    ));
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

pub async fn update_emails_semantics(store: Arc<dyn Store>) {
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
        by_received(store, roles.archive, true).await,
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
    assert_eq!(by_received(store, roles.trash, true).await.1, 0);
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

/// The first ten of `mailbox`'s listing by receivedAt, and its total.
async fn by_received(store: &dyn Store, mailbox: i64, descending: bool) -> (Vec<(i64, i64)>, i64) {
    let page = store.mailbox_emails_by_received(mailbox, descending, 0, 10);
    page.await.unwrap()
}

/// How many rows of each kind the emails `ids` of `account` have: (meta,
/// header blocks, fast views, thread rows).
async fn rows_of(store: &dyn Store, account: i64, ids: &[i64]) -> [usize; 4] {
    [
        store.email_meta(account, ids).await.unwrap().len(),
        store.header_blocks(account, ids).await.unwrap().len(),
        store.fast_views(account, ids).await.unwrap().len(),
        store.thread_emails(account, ids).await.unwrap().len(),
    ]
}

pub async fn destroy_emails_semantics(store: Arc<dyn Store>) {
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
    assert_eq!(rows_of(store, ann.id, &ids[..1]).await, [0, 0, 0, 0]);
    assert!(!store.has_blob(ann.id, &blob_id_of(&one)).await.unwrap());
    assert!(store.has_blob(ann.id, &blob_id_of(&two)).await.unwrap());
    assert_eq!(
        by_received(store, roles.inbox, false).await,
        (vec![(ids[1], ids[1])], 1)
    );
    assert_eq!(by_received(store, roles.archive, false).await, (vec![], 0));
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

pub async fn projection_maintenance(store: Arc<dyn Store>) {
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

pub async fn blob_grants(store: Arc<dyn Store>) {
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
    assert_eq!(store.blob_size(ann.id, "upload-1").await.unwrap(), Some(10));
    // The list form: one query, only what the account holds.
    let asked = vec![
        "upload-1".to_string(),
        blob_id_of(&raw),
        "upload-2".to_string(),
    ];
    let held = store.held_blobs(ann.id, &asked).await.unwrap();
    let mut held: Vec<String> = held.into_iter().collect();
    held.sort();
    let mut expected = vec!["upload-1".to_string(), blob_id_of(&raw)];
    expected.sort();
    assert_eq!(held, expected);
    assert!(store.held_blobs(bob.id, &asked).await.unwrap().is_empty());
    assert!(store.held_blobs(ann.id, &[]).await.unwrap().is_empty());
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

pub async fn concurrent_writers(store: Arc<dyn Store>) {
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
            thread: 9,
            identity: 1,
            vacation_response: 1,
            email_submission: 1,
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

pub async fn hostile_headers(store: Arc<dyn Store>) {
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

pub async fn concurrent_keyword_patches(store: Arc<dyn Store>) {
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

//! Threading: which thread a new message joins.

use super::*;

conformance!(threading);

pub async fn threading(store: Arc<dyn Store>) {
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

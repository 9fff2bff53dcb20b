//! Accounts, role mailboxes, mailbox writes and per-type states.

use super::*;

conformance!(
    accounts,
    role_mailboxes_and_mailbox_changes,
    states_advance_per_type
);

pub async fn accounts(store: Arc<dyn Store>) {
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
            thread: 1,
            identity: 1,
            vacation_response: 1,
            email_submission: 1,
        }
    );

    // Removal takes the account's rows with it; the other account keeps its own.
    let inbox = store.mailboxes(ann.id).await.unwrap()[0].id;
    let child = store
        .create_mailbox(ann.id, &new_mailbox(Some(inbox), "Sub"))
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

pub async fn role_mailboxes_and_mailbox_changes(store: Arc<dyn Store>) {
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
        .create_mailbox(ann.id, &new_mailbox(Some(projects), "2024"))
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
    assert_eq!(patchable(&row), (None, "Done", Some("important"), 3, false));
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
    assert_eq!(patchable(&row), (Some(projects), "Done", None, 3, false));
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
    let bobs_child = new_mailbox(Some(projects), "x");
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

pub async fn states_advance_per_type(store: Arc<dyn Store>) {
    let store = store.as_ref();
    let (ann, roles) = account(store, "ann@example.com").await;
    // The account's creation set every state; these writes touch none of
    // Identity and VacationResponse.
    let states = |email, mailbox, thread| States {
        email,
        mailbox,
        thread,
        identity: 1,
        vacation_response: 1,
        email_submission: 1,
    };
    assert_eq!(store.states(ann.id).await.unwrap(), states(1, 1, 1));
    let folder = store
        .create_mailbox(ann.id, &new_mailbox(None, "F"))
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
        update_one(
            store,
            ann.id,
            EmailUpdate::replace(i64::MAX, Some(vec![]), None)
        )
        .await,
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

    update_one(
        store,
        ann.id,
        EmailUpdate::replace(ids[0], Some(vec!["$seen".into()]), None),
    )
    .await;
    assert_eq!(store.states(ann.id).await.unwrap(), states(5, 5, 4));
    update_one(
        store,
        ann.id,
        EmailUpdate::replace(ids[0], None, Some(vec![roles.inbox, folder])),
    )
    .await;
    assert_eq!(store.states(ann.id).await.unwrap(), states(6, 6, 4));
    // Destroying a mailbox whose emails are elsewhere too: emails change, threads do not.
    store.destroy_mailbox(ann.id, folder, true).await.unwrap();
    assert_eq!(store.states(ann.id).await.unwrap(), states(7, 7, 4));
    let empty = store
        .create_mailbox(ann.id, &new_mailbox(None, "E"))
        .await
        .unwrap();
    assert_eq!(store.states(ann.id).await.unwrap(), states(7, 8, 4));
    store.destroy_mailbox(ann.id, empty, false).await.unwrap();
    assert_eq!(store.states(ann.id).await.unwrap(), states(7, 9, 4));
    assert_eq!(store.destroy_emails(ann.id, &ids).await.unwrap(), ids);
    assert_eq!(store.states(ann.id).await.unwrap(), states(10, 10, 10));
    // Destroying a mailbox whose emails are only there destroys them: all three types move.
    let only = store
        .create_mailbox(ann.id, &new_mailbox(None, "O"))
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

/// What a [`MailboxPatch`] may change of a mailbox row: (parent, name,
/// role, sort order, subscribed).
fn patchable(row: &MailboxRow) -> (Option<i64>, &str, Option<&str>, i64, bool) {
    (
        row.parent_id,
        row.name.as_str(),
        row.role.as_deref(),
        row.sort_order,
        row.is_subscribed,
    )
}

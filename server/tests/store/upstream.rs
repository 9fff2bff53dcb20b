//! What the store keeps of an IMAP upstream (issue 18, migration 0309): the
//! upstream a data dir serves; which upstream mailbox a mailbox mirrors
//! (only the account's own), at which UIDVALIDITY and HIGHESTMODSEQ; which
//! email and flags each UID is, updated in place and forgotten by UID or
//! whole; where an account's emails are, never another account's; and the
//! rows going with their email and their mailbox.

use fastview::store::{UpstreamCopy, UpstreamMailbox};

use super::*;

async fn upstream_rows_map_mailboxes_uids_and_emails(store: Arc<dyn Store>) {
    assert_eq!(store.upstream_source().await.unwrap(), None);
    store
        .set_upstream_source("imap://127.0.0.1:143")
        .await
        .unwrap();
    store
        .set_upstream_source("imaps://imap.example.com:993")
        .await
        .unwrap();
    assert_eq!(
        store.upstream_source().await.unwrap().as_deref(),
        Some("imaps://imap.example.com:993")
    );
    let (ann, ann_roles) = account(store.as_ref(), "ann@example.com").await;
    let (bob, bob_roles) = account(store.as_ref(), "bob@example.com").await;
    let inbox = UpstreamMailbox {
        mailbox_id: ann_roles.inbox,
        name: "INBOX".into(),
        uid_validity: 7,
        highest_modseq: Some(41),
    };
    store.put_upstream_mailbox(ann.id, &inbox).await.unwrap();
    // Another account's mailbox is not mapped for ann.
    let foreign = UpstreamMailbox {
        mailbox_id: bob_roles.inbox,
        ..inbox.clone()
    };
    store.put_upstream_mailbox(ann.id, &foreign).await.unwrap();
    assert_eq!(
        store.upstream_mailboxes(ann.id).await.unwrap(),
        std::slice::from_ref(&inbox)
    );
    assert!(store.upstream_mailboxes(bob.id).await.unwrap().is_empty());
    let archived = UpstreamMailbox {
        mailbox_id: ann_roles.archive,
        name: "Archive/2024 &AOk-t&AOk-".into(),
        uid_validity: 9,
        highest_modseq: None,
    };
    store.put_upstream_mailbox(ann.id, &archived).await.unwrap();
    let renewed = UpstreamMailbox {
        uid_validity: 8,
        highest_modseq: Some(50),
        ..inbox.clone()
    };
    store.put_upstream_mailbox(ann.id, &renewed).await.unwrap();
    assert_eq!(
        store.upstream_mailboxes(ann.id).await.unwrap(),
        [renewed, archived]
    );

    let ids = insert(
        store.as_ref(),
        ann.id,
        &[
            email(
                &message(Some("one@example.com"), (None, None), "one", "first"),
                &[ann_roles.inbox, ann_roles.archive],
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
    let copy = |uid: i64, email_id: i64, keywords: &[&str]| UpstreamCopy {
        uid,
        email_id,
        keywords: keywords.iter().map(|k| k.to_string()).collect(),
    };
    store
        .record_upstream_uids(
            ann_roles.inbox,
            &[copy(3, ids[0], &["$seen"]), copy(4, ids[1], &[])],
        )
        .await
        .unwrap();
    store
        .record_upstream_uids(
            ann_roles.archive,
            &[copy(1, ids[0], &["$flagged", "$seen"])],
        )
        .await
        .unwrap();
    // A flag change updates the row in place.
    store
        .record_upstream_uids(ann_roles.inbox, &[copy(4, ids[1], &["work"])])
        .await
        .unwrap();
    assert_eq!(
        store.upstream_uids(ann_roles.inbox, None).await.unwrap(),
        [copy(3, ids[0], &["$seen"]), copy(4, ids[1], &["work"])]
    );
    // Some copies by UID (one not mapped is absent), and the count.
    assert_eq!(
        store
            .upstream_uids(ann_roles.inbox, Some(&[4, 9]))
            .await
            .unwrap(),
        [copy(4, ids[1], &["work"])]
    );
    assert!(
        store
            .upstream_uids(ann_roles.inbox, Some(&[]))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.upstream_uid_count(ann_roles.inbox).await.unwrap(), 2);
    assert_eq!(
        store.upstream_uid_count(ann_roles.archive).await.unwrap(),
        1
    );
    assert_eq!(
        store.upstream_locations(ann.id, &ids).await.unwrap(),
        [
            (ids[0], ann_roles.inbox, 3, "$seen".to_string()),
            (ids[1], ann_roles.inbox, 4, "work".to_string()),
            (ids[0], ann_roles.archive, 1, "$flagged $seen".to_string())
        ],
        "by mailbox, then UID"
    );
    assert!(
        store
            .upstream_locations(bob.id, &ids)
            .await
            .unwrap()
            .is_empty()
    );
    let blob = fastview::blob::blob_id_of(&message(
        Some("two@example.com"),
        (None, None),
        "two",
        "second",
    ));
    assert_eq!(
        store
            .emails_of_blobs(ann.id, &[blob.as_str()])
            .await
            .unwrap(),
        [(blob.clone(), ids[1])]
    );
    assert!(
        store
            .emails_of_blobs(bob.id, &[blob.as_str()])
            .await
            .unwrap()
            .is_empty()
    );

    // Forgotten by UID, or whole (a UIDVALIDITY change); emails stay.
    store
        .forget_upstream_uids(ann_roles.inbox, Some(&[3]))
        .await
        .unwrap();
    assert_eq!(
        store.upstream_uids(ann_roles.inbox, None).await.unwrap(),
        [copy(4, ids[1], &["work"])]
    );
    store
        .forget_upstream_uids(ann_roles.archive, None)
        .await
        .unwrap();
    assert!(
        store
            .upstream_uids(ann_roles.archive, None)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.email_meta(ann.id, &ids).await.unwrap().len(), 2);

    // A destroyed email takes its rows along; so does a destroyed mailbox.
    store.destroy_emails(ann.id, &[ids[1]]).await.unwrap();
    assert!(
        store
            .upstream_uids(ann_roles.inbox, None)
            .await
            .unwrap()
            .is_empty()
    );
    store
        .destroy_mailbox(ann.id, ann_roles.archive, true)
        .await
        .unwrap();
    let left: Vec<i64> = store
        .upstream_mailboxes(ann.id)
        .await
        .unwrap()
        .iter()
        .map(|m| m.mailbox_id)
        .collect();
    assert_eq!(left, [ann_roles.inbox]);
}

conformance!(upstream_rows_map_mailboxes_uids_and_emails);

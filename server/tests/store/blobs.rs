//! Blob grants, quota and the collector's lookups: usage counts each
//! distinct blob of an account once, writes over the quota are refused
//! inside the account's lock, `referenced_blobs` sees every account's
//! emails and grants, expired upload grants go and message grants stay.

use super::*;

conformance!(
    quota_counts_each_blob_once_and_refuses_writes_over_it,
    references_and_upload_expiry_span_accounts
);

pub async fn quota_counts_each_blob_once_and_refuses_writes_over_it(store: Arc<dyn Store>) {
    let store = store.as_ref();
    let ann = store.create_account("ann@example.com", "h").await.unwrap();
    let inbox = store.mailboxes(ann.id).await.unwrap()[0].id;
    let quota = store.quota(ann.id).await.unwrap();
    assert_eq!((quota.limit, quota.used), (None, 0));
    let (first, second) = (plain("first message"), plain("second message, longer"));
    insert(store, ann.id, &[email(&first, &[inbox], &[], 10)]).await;
    // An upload of the same bytes is the same grant: counted once.
    store
        .add_blob(ann.id, &blob_id_of(&first), first.len() as i64)
        .await
        .unwrap();
    assert_eq!(store.quota(ann.id).await.unwrap().used, first.len() as i64);

    store
        .set_quota("ANN@example.com", Some(first.len() as i64 + 5))
        .await
        .unwrap();
    let quota = store.quota(ann.id).await.unwrap();
    assert_eq!(quota.limit, Some(first.len() as i64 + 5));
    assert!(quota.would_exceed(6) && !quota.would_exceed(5));
    assert_err!(
        store
            .insert_emails(ann.id, &[email(&second, &[inbox], &[], 11)])
            .await,
        StoreError::OverQuota
    );
    assert_err!(
        store.add_blob(ann.id, &blob_id_of(&second), 6).await,
        StoreError::OverQuota
    );
    // Nothing of the refused writes is left.
    assert!(!store.has_blob(ann.id, &blob_id_of(&second)).await.unwrap());
    assert_eq!(store.quota(ann.id).await.unwrap().used, first.len() as i64);
    // A blob it already holds adds nothing and is accepted; 5 octets fit.
    store
        .add_blob(ann.id, &blob_id_of(&first), first.len() as i64)
        .await
        .unwrap();
    store.add_blob(ann.id, &"5".repeat(64), 5).await.unwrap();
    store.set_quota("ann@example.com", None).await.unwrap();
    insert(store, ann.id, &[email(&second, &[inbox], &[], 11)]).await;
    assert_err!(
        store.set_quota("nobody@example.com", Some(1)).await,
        StoreError::NotFound
    );
    assert_err!(store.quota(ann.id + 1000).await, StoreError::NotFound);
    assert_err!(
        store.add_blob(ann.id + 1000, &"6".repeat(64), 1).await,
        StoreError::NotFound
    );
}

pub async fn references_and_upload_expiry_span_accounts(store: Arc<dyn Store>) {
    let store = store.as_ref();
    let ann = store.create_account("ann@example.com", "h").await.unwrap();
    let bob = store.create_account("bob@example.com", "h").await.unwrap();
    let ann_inbox = store.mailboxes(ann.id).await.unwrap()[0].id;
    let shared = plain("shared");
    let ids = insert(store, ann.id, &[email(&shared, &[ann_inbox], &[], 10)]).await;
    let (upload, nobody) = ("a".repeat(64), "b".repeat(64));
    store.add_blob(bob.id, &upload, 3).await.unwrap();
    let asked = [blob_id_of(&shared), upload.clone(), nobody.clone()];
    let referenced = store.referenced_blobs(&asked).await.unwrap();
    assert_eq!(
        referenced,
        [blob_id_of(&shared), upload.clone()].into_iter().collect()
    );
    let page = store.referenced_blob_page("", 10).await.unwrap();
    let mut expected = vec![blob_id_of(&shared), upload.clone()];
    expected.sort();
    assert_eq!(page, expected);
    assert_eq!(
        store.referenced_blob_page(&expected[0], 10).await.unwrap(),
        expected[1..]
    );

    // Expiry keeps grants younger than the cut and grants of messages.
    assert_eq!(store.expire_uploads(0).await.unwrap(), 0);
    let later = chrono::Utc::now().timestamp() + 10;
    assert_eq!(store.expire_uploads(later).await.unwrap(), 1);
    assert!(!store.has_blob(bob.id, &upload).await.unwrap());
    assert!(store.has_blob(ann.id, &blob_id_of(&shared)).await.unwrap());

    // A destroyed email's blob is referred to no more; a removed account
    // hands back the blobs it held.
    store.add_blob(ann.id, &upload, 3).await.unwrap();
    store.destroy_emails(ann.id, &ids).await.unwrap();
    assert!(
        store.referenced_blobs(&asked).await.unwrap() == [upload.clone()].into_iter().collect()
    );
    assert_eq!(
        store.remove_account("ann@example.com").await.unwrap(),
        vec![upload]
    );
    assert!(store.referenced_blobs(&asked).await.unwrap().is_empty());
}

//! The delivery queue (issue 17, migration 0307): a submission and its
//! deliveries land together; a node takes a due delivery for the length of
//! its lease and no other node takes it meanwhile, also when two take at
//! the same moment; a recorded retry waits for its time; a finished one is
//! gone and its statuses are in the submission. A lease is fenced: once
//! another node took a delivery over, its old holder can neither renew nor
//! record it (issue 43). Sending is bounded per account per hour, counted
//! under the account's lock (issue 43).

use fastview::store::{Delivery, SendLimitHit, SendLimits, SubmissionRow};

use super::*;

#[path = "../common/queue_rows.rs"]
mod queue_rows;

fn submission(send_at: i64) -> SubmissionRow {
    queue_rows::submission_row(send_at, "{}".into())
}

fn delivery(account: i64, n: usize) -> Delivery {
    let recipients = format!("[\"r{n}@example.com\"]");
    queue_rows::delivery_row(account, format!("{n:064x}"), recipients, 0)
}

async fn deliveries_are_taken_by_one_node_at_a_time(store: Arc<dyn Store>) {
    let (ann, _) = account(store.as_ref(), "ann@example.com").await;
    let send_at = 1_000_000;
    let batch: Vec<Delivery> = (0..40).map(|n| delivery(ann.id, n)).collect();
    let (id, stored) = store
        .create_submission(ann.id, &submission(send_at), &batch, Default::default())
        .await
        .unwrap();
    assert_eq!(stored.len(), 40);
    assert!(
        stored
            .iter()
            .all(|d| d.submission_id == id && d.send_at == send_at)
    );
    // Held by their maker for ten minutes.
    assert!(
        store
            .take_deliveries(send_at + 599, 60, 100)
            .await
            .unwrap()
            .is_empty()
    );
    // Two nodes at once: every delivery to exactly one of them.
    let now = send_at + 601;
    let (one, two) = tokio::join!(
        store.take_deliveries(now, 60, 25),
        store.take_deliveries(now, 60, 25)
    );
    let (one, two) = (one.unwrap(), two.unwrap());
    let mut ids: Vec<i64> = one.iter().chain(&two).map(|d| d.id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), one.len() + two.len(), "a delivery taken twice");
    let rest = store.take_deliveries(now, 60, 100).await.unwrap();
    assert_eq!(one.len() + two.len() + rest.len(), 40);
    // Until the lease runs out nobody takes them again.
    assert!(
        store
            .take_deliveries(now + 59, 60, 100)
            .await
            .unwrap()
            .is_empty()
    );
    // One finished, one put off for ten minutes, the rest left to lapse.
    let taken: Vec<Delivery> = one.into_iter().chain(two).chain(rest).collect();
    store
        .finish_delivery(
            &taken[0],
            &[("r0@example.com".into(), "{\"delivered\":\"yes\"}".into())],
            None,
        )
        .await
        .unwrap();
    store
        .finish_delivery(
            &taken[1],
            &[],
            Some((now + 600, "[\"later@example.com\"]".into())),
        )
        .await
        .unwrap();
    let again = store.take_deliveries(now + 61, 60, 100).await.unwrap();
    assert_eq!(again.len(), 38);
    assert!(again.iter().all(|d| d.id != taken[1].id));
    // At its time the retry is due again, with what is left to do (and the
    // 38 whose lease lapsed once more).
    let later = store.take_deliveries(now + 600, 60, 100).await.unwrap();
    assert_eq!(later.len(), 39);
    let retried = later.iter().find(|d| d.id == taken[1].id).unwrap();
    assert_eq!(
        (retried.attempts, retried.recipients.as_str()),
        (1, "[\"later@example.com\"]")
    );
    let rows = store.submissions(ann.id).await.unwrap();
    assert_eq!(
        rows[0].delivery_status,
        "{\"r0@example.com\":{\"delivered\":\"yes\"}}"
    );
}

conformance!(deliveries_are_taken_by_one_node_at_a_time);

async fn a_delivery_taken_over_is_neither_renewed_nor_recorded_by_its_old_holder(
    store: Arc<dyn Store>,
) {
    let (ann, _) = account(store.as_ref(), "ann@example.com").await;
    let send_at = 1_000_000;
    let (id, made) = store
        .create_submission(
            ann.id,
            &submission(send_at),
            &[delivery(ann.id, 1)],
            SendLimits::default(),
        )
        .await
        .unwrap();
    let made = made.into_iter().next().unwrap();
    // Its maker holds it and may renew the hold.
    assert_eq!(made.lease, 0);
    assert!(
        store
            .renew_delivery(made.id, made.lease, send_at + 600)
            .await
            .unwrap()
    );
    // The maker stalls past its lease: another node takes the delivery.
    let taken = store.take_deliveries(send_at + 601, 60, 10).await.unwrap();
    assert_eq!(taken.len(), 1);
    let taken = taken.into_iter().next().unwrap();
    assert_ne!(taken.lease, made.lease);
    // The maker's hold and record are refused, and change nothing.
    assert!(
        !store
            .renew_delivery(made.id, made.lease, send_at + 100_000)
            .await
            .unwrap()
    );
    let yes = "{\"delivered\":\"yes\"}".to_string();
    assert!(
        !store
            .finish_delivery(&made, &[("r1@example.com".into(), yes.clone())], None)
            .await
            .unwrap()
    );
    assert!(
        !store
            .finish_delivery(&made, &[], Some((send_at + 700, "[]".into())))
            .await
            .unwrap()
    );
    assert_eq!(
        store.submissions(ann.id).await.unwrap()[0].delivery_status,
        "{}"
    );
    // The new holder still holds it, under its own token.
    assert!(
        store
            .take_deliveries(send_at + 660, 60, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .renew_delivery(taken.id, taken.lease, send_at + 700)
            .await
            .unwrap()
    );
    assert!(
        store
            .finish_delivery(&taken, &[("r1@example.com".into(), yes)], None)
            .await
            .unwrap()
    );
    let rows = store.submissions(ann.id).await.unwrap();
    assert_eq!(rows[0].id, id);
    assert_eq!(
        rows[0].delivery_status,
        "{\"r1@example.com\":{\"delivered\":\"yes\"}}"
    );
    assert!(
        store
            .take_deliveries(send_at + 100_000, 60, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

/// A delivery of `ann` to `count` recipients.
fn to_many(account: i64, count: usize) -> Delivery {
    let recipients: Vec<String> = (0..count).map(|n| format!("r{n}@example.com")).collect();
    Delivery {
        recipients: serde_json::to_string(&recipients).unwrap(),
        ..delivery(account, count)
    }
}

async fn sending_is_bounded_per_account_per_hour(store: Arc<dyn Store>) {
    let (ann, _) = account(store.as_ref(), "ann@example.com").await;
    let (bob, _) = account(store.as_ref(), "bob@example.com").await;
    let now = 2_000_000;
    let limits = SendLimits {
        now,
        messages_per_hour: Some(3),
        recipients_per_hour: Some(5),
    };
    let send = |account: i64, recipients: usize, limits: SendLimits| {
        let store = store.clone();
        async move {
            store
                .create_submission(
                    account,
                    &submission(limits.now),
                    &[to_many(account, recipients)],
                    limits,
                )
                .await
                .map(|(id, _)| id)
        }
    };
    let first = send(ann.id, 2, limits).await.unwrap();
    send(ann.id, 2, limits).await.unwrap();
    // Two more would be six recipients this hour: one is left.
    assert!(matches!(
        send(ann.id, 2, limits).await,
        Err(StoreError::SendLimit(SendLimitHit::Recipients {
            limit: 5,
            left: 1
        }))
    ));
    send(ann.id, 1, limits).await.unwrap();
    // A fourth message is one too many, whatever its recipients.
    assert!(matches!(
        send(ann.id, 1, limits).await,
        Err(StoreError::SendLimit(SendLimitHit::Messages { limit: 3 }))
    ));
    // Refused submissions left nothing behind.
    assert_eq!(store.submissions(ann.id).await.unwrap().len(), 3);
    assert_eq!(store.sent_in_hour(ann.id, now).await.unwrap(), (3, 5));
    assert_eq!(
        store
            .take_deliveries(now + 601, 60, 100)
            .await
            .unwrap()
            .len(),
        3
    );
    // Another account has its own hour.
    send(bob.id, 5, limits).await.unwrap();
    // Destroying a submission's record gives no room back.
    store.destroy_submission(ann.id, first).await.unwrap();
    assert!(matches!(
        send(ann.id, 1, limits).await,
        Err(StoreError::SendLimit(SendLimitHit::Messages { limit: 3 }))
    ));
    // No limit, no bound.
    send(
        ann.id,
        50,
        SendLimits {
            now,
            ..SendLimits::default()
        },
    )
    .await
    .unwrap();
    // An hour later there is room again, and two at once with room for one
    // more message: exactly one passes.
    let later = SendLimits {
        now: now + 3_600,
        messages_per_hour: Some(1),
        recipients_per_hour: Some(5),
    };
    assert_eq!(store.sent_in_hour(ann.id, later.now).await.unwrap(), (0, 0));
    let (one, two) = tokio::join!(send(ann.id, 1, later), send(ann.id, 1, later));
    assert_eq!(
        [one.is_ok(), two.is_ok()].iter().filter(|ok| **ok).count(),
        1,
        "{one:?} {two:?}"
    );
    assert_eq!(store.sent_in_hour(ann.id, later.now).await.unwrap(), (1, 1));
}

conformance!(
    a_delivery_taken_over_is_neither_renewed_nor_recorded_by_its_old_holder,
    sending_is_bounded_per_account_per_hour
);

//! The delivery queue (issue 17, migration 0307): a submission and its
//! deliveries land together; a node takes a due delivery for the length of
//! its lease and no other node takes it meanwhile, also when two take at
//! the same moment; a recorded retry waits for its time; a finished one is
//! gone and its statuses are in the submission.

use fastview::store::{Delivery, SubmissionRow};

use super::*;

fn submission(send_at: i64) -> SubmissionRow {
    SubmissionRow {
        id: 0,
        identity_id: 1,
        email_id: 1,
        thread_id: 1,
        envelope: "{}".into(),
        send_at,
        undo_status: "final".into(),
        delivery_status: "{}".into(),
    }
}

fn delivery(account: i64, n: usize) -> Delivery {
    Delivery {
        id: 0,
        submission_id: 0,
        account_id: account,
        blob_id: format!("{n:064x}"),
        mail_from: "ann@example.com".into(),
        recipients: format!("[\"r{n}@example.com\"]"),
        send_at: 0,
        attempts: 0,
    }
}

async fn deliveries_are_taken_by_one_node_at_a_time(store: Arc<dyn Store>) {
    let (ann, _) = account(store.as_ref(), "ann@example.com").await;
    let send_at = 1_000_000;
    let batch: Vec<Delivery> = (0..40).map(|n| delivery(ann.id, n)).collect();
    let (id, stored) = store
        .create_submission(ann.id, &submission(send_at), &batch)
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

//! Test support for the tests that play a node of the delivery queue (a
//! crash, a takeover, a retry): the rows `EmailSubmission/set` would have
//! written, put straight into the store, and what the queue holds after.

use fastview::store::{Delivery, Store};
use serde_json::{Value, json};

#[path = "../common/queue_rows.rs"]
mod queue_rows;

/// Queues one delivery of `blob_id` from ann@example.com to `recipients`
/// in `account`, due at `send_at`, its submission's `deliveryStatus` being
/// `delivery_status` (JSON); (the submission's id, the deliveries as stored).
pub async fn queue_delivery(
    store: &dyn Store,
    account: i64,
    blob_id: String,
    recipients: &[&str],
    send_at: i64,
    delivery_status: String,
) -> (i64, Vec<Delivery>) {
    let row = queue_rows::submission_row(send_at, delivery_status);
    let recipients = json!(recipients).to_string();
    let queued = queue_rows::delivery_row(account, blob_id, recipients, send_at);
    store
        .create_submission(account, &row, &[queued], Default::default())
        .await
        .expect("create submission")
}

/// Whether a node taking due deliveries at `now` for `lease` seconds finds
/// none.
pub async fn nothing_to_take(store: &dyn Store, now: i64, lease: i64) -> bool {
    let taken = store.take_deliveries(now, lease, 10).await.expect("take");
    taken.is_empty()
}

/// The `deliveryStatus` of `account`'s first submission.
pub async fn first_delivery_status(store: &dyn Store, account: i64) -> Value {
    let rows = store.submissions(account).await.expect("submissions");
    serde_json::from_str(&rows[0].delivery_status).expect("delivery status JSON")
}

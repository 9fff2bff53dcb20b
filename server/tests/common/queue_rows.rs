//! Rows of the delivery queue as `EmailSubmission/set` writes them: one
//! submission, its deliveries. Shared by the test binaries that put them
//! straight into a store (included with `#[path]`).

use fastview::store::{Delivery, SubmissionRow};

/// A final submission due at `send_at`, its `deliveryStatus` being
/// `delivery_status` (JSON).
pub fn submission_row(send_at: i64, delivery_status: String) -> SubmissionRow {
    SubmissionRow {
        id: 0,
        identity_id: 1,
        email_id: 1,
        thread_id: 1,
        envelope: "{}".into(),
        send_at,
        undo_status: "final".into(),
        delivery_status,
    }
}

/// A delivery of `blob_id` from ann@example.com to `recipients` (a JSON
/// list) in `account`, due at `send_at`, not yet tried.
pub fn delivery_row(account: i64, blob_id: String, recipients: String, send_at: i64) -> Delivery {
    Delivery {
        id: 0,
        submission_id: 0,
        account_id: account,
        blob_id,
        mail_from: "ann@example.com".into(),
        recipients,
        send_at,
        attempts: 0,
        lease: 0,
    }
}

//! Delivering submitted mail (issue 17): one [`Delivery`] of the queue at a
//! time. A recipient that is an account on this server (its login or an
//! alias) gets a copy in its inbox through the ingest path, with a Received
//! field stamped with the submission's sendAt: a retried delivery makes the
//! same octets, which the store recognises as the copy it already has, so
//! a crash between the copy and the record of it never doubles a message.
//!
//! A delivery that fails for a reason of this server (a blob or store
//! error) is tried again with backoff (1 minute, doubling, at most an
//! hour) for [`GIVE_UP_AFTER`] seconds after sendAt; then each recipient
//! left gets `delivered: "no"`.

use std::sync::Arc;

use serde_json::json;

use super::ingest::{prepare, store_batch};
use super::submission::received_copy;
use crate::blob::BlobStore;
use crate::store::{Delivery, Store, StoreResult};

/// How long a delivery is retried, in seconds after its sendAt: 5 days
/// (RFC 5321 §4.5.4.1 suggests at least 4–5).
pub const GIVE_UP_AFTER: i64 = 5 * 86_400;

/// The name this server gives itself in the Received field of local copies.
pub const HOST: &str = "fastview";

/// How long a node holds a delivery it took, in seconds.
pub const LEASE: i64 = 60;

/// A DeliveryStatus (RFC 8621 §7) as JSON text.
fn status(smtp_reply: &str, delivered: &str) -> String {
    json!({"smtpReply": smtp_reply, "delivered": delivered, "displayed": "unknown"}).to_string()
}

/// The status of a recipient whose copy is in its inbox.
pub fn delivered_locally() -> String {
    status("250 2.1.5 Delivered to a mailbox on this server", "yes")
}

/// The status of a recipient not delivered yet.
pub fn queued() -> String {
    status("250 2.0.0 Queued", "queued")
}

/// Why one recipient's copy could not be stored now.
enum Outcome {
    /// Final: the recipient's status.
    Done(String),
    /// Try again later.
    Again,
}

/// Delivers what it can of `delivery` and records it: the statuses of the
/// recipients done, a retry for the others. `host` names this server in the
/// Received field; `now` is Unix seconds.
pub async fn deliver(
    store: &dyn Store,
    blobs: &Arc<BlobStore>,
    host: &str,
    delivery: &Delivery,
    now: i64,
) -> StoreResult<()> {
    let recipients: Vec<String> = serde_json::from_str(&delivery.recipients).unwrap_or_default();
    let message = match blobs.get(&delivery.blob_id).await {
        Ok(Some(message)) => Some(message),
        Ok(None) => None,
        Err(error) => {
            tracing::warn!(delivery = delivery.id, %error, "reading a message to deliver");
            None
        }
    };
    let mut statuses = Vec::new();
    let mut again = Vec::new();
    for recipient in recipients {
        let outcome = match &message {
            Some(message) => {
                deliver_one(store, blobs, host, delivery, &recipient, message, now).await
            }
            None => Outcome::Again,
        };
        match outcome {
            Outcome::Done(status) => statuses.push((recipient, status)),
            Outcome::Again => again.push(recipient),
        }
    }
    let retry = if again.is_empty() {
        None
    } else if now >= delivery.send_at + GIVE_UP_AFTER {
        let expired = status("550 4.4.7 Delivery time expired", "no");
        statuses.extend(
            again
                .drain(..)
                .map(|recipient| (recipient, expired.clone())),
        );
        None
    } else {
        let backoff = (60_i64 << delivery.attempts.clamp(0, 6)).min(3_600);
        Some((
            now + backoff,
            serde_json::to_string(&again).unwrap_or_default(),
        ))
    };
    store.finish_delivery(delivery, &statuses, retry).await
}

/// Stores `recipient`'s copy in its inbox, if it is an account here.
async fn deliver_one(
    store: &dyn Store,
    blobs: &Arc<BlobStore>,
    host: &str,
    delivery: &Delivery,
    recipient: &str,
    message: &[u8],
    now: i64,
) -> Outcome {
    let account = match store.account_for_address(recipient).await {
        Ok(Some(account)) => account,
        Ok(None) => {
            return Outcome::Done(status("550 5.1.1 No such mailbox on this server", "no"));
        }
        Err(_) => return Outcome::Again,
    };
    let inbox = match store.mailboxes(account).await {
        Ok(mailboxes) => mailboxes
            .into_iter()
            .find(|m| m.role.as_deref() == Some("inbox"))
            .map(|m| m.id),
        Err(_) => return Outcome::Again,
    };
    let Some(inbox) = inbox else {
        return Outcome::Done(status("550 5.2.1 The recipient has no inbox", "no"));
    };
    let submission = delivery.submission_id.to_string();
    let copy = received_copy(message, host, &submission, recipient, delivery.send_at);
    let prepared = prepare(copy, vec![inbox], Vec::new(), |_| now);
    match store_batch(store, blobs, account, vec![prepared]).await {
        Ok(_) => Outcome::Done(delivered_locally()),
        Err(super::ingest::IngestError::Store(crate::store::StoreError::OverQuota)) => {
            Outcome::Done(status("552 5.2.2 The recipient's mailbox is full", "no"))
        }
        Err(error) => {
            tracing::warn!(delivery = delivery.id, %error, "storing a local copy");
            Outcome::Again
        }
    }
}

/// One pass of the queue: takes up to 32 due deliveries no node holds and
/// delivers them; how many it took.
pub async fn deliver_due(
    store: &dyn Store,
    blobs: &Arc<BlobStore>,
    host: &str,
    now: i64,
) -> StoreResult<usize> {
    let due = store.take_deliveries(now, LEASE, 32).await?;
    for delivery in &due {
        deliver(store, blobs, host, delivery, now).await?;
    }
    Ok(due.len())
}

/// Runs [`deliver_due`] every `every` until the task is dropped: what a
/// submission could not deliver at once, after a restart too.
pub fn spawn_periodic(
    store: Arc<dyn Store>,
    blobs: Arc<BlobStore>,
    every: std::time::Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let now = chrono::Utc::now().timestamp();
            match deliver_due(store.as_ref(), &blobs, HOST, now).await {
                Ok(0) => {}
                Ok(done) => tracing::info!(done, "queued deliveries"),
                Err(error) => tracing::warn!(%error, "delivering the queue failed"),
            }
        }
    })
}

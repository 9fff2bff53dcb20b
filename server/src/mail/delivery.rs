//! Delivering submitted mail (issue 17): one [`Delivery`] of the queue at a
//! time. A recipient that is an account on this server (its login or an
//! alias) gets a copy in its inbox through the ingest path, with a Received
//! field stamped with the submission's sendAt: a retried delivery makes the
//! same octets, which the store recognises as the copy it already has, so
//! a crash between the copy and the record of it never doubles a message.
//! Any other recipient is sent to the relay ([`Relay`]), one SMTP
//! transaction each: accepted is `delivered: "unknown"` (RFC 8621 §7: the
//! relay is not the recipient's mail store), a 5xx is `"no"` and a bounce
//! (RFC 3464) in the sender's inbox.
//!
//! A local recipient's copy is charged to its quota like any message it
//! receives; over it (or without an inbox) the copy is not stored, the
//! recipient is `delivered: "no"` and the sender gets a bounce. The copy's
//! Received field names the submission, not the recipient, so every local
//! recipient of one submission gets the same octets, which the
//! content-addressed blob store keeps once (issue 43).
//!
//! A node works on a delivery under a fenced lease (`Store::take_deliveries`):
//! it renews the hold every [`RENEW_EVERY`] while it works and before each
//! recipient, and stops, recording nothing, as soon as a renewal finds that
//! another node took the delivery over; the store refuses the record of an
//! attempt under a lease that is no longer the row's. So a delivery in
//! flight is neither taken by another node (its hold never lapses while
//! its node lives) nor recorded twice.
//!
//! A 4xx, an unreachable relay, or a failure of this server (a blob or
//! store error) is tried again with backoff (1 minute, doubling, at most
//! an hour) for [`GIVE_UP_AFTER`] seconds after sendAt; then each
//! recipient left gets `delivered: "no"`. A crash after the relay accepted
//! and before that was recorded sends that recipient's copy again on the
//! retry: SMTP cannot make a hand-over and its record one step.
//!
//! Behind an IMAP upstream (`serve --upstream … --upstream-smtp …`, ADR
//! 0008) every recipient goes to the upstream's submission server with the
//! account's own credentials ([`Outbound::PerAccount`], the proxy wing's
//! [`AccountSubmission`]): the upstream's
//! server delivers to its own users, and a bounce is APPENDed to the
//! upstream INBOX. Without credentials (the user has not logged in lately,
//! no master login) a delivery waits queued.

use std::sync::Arc;

use serde_json::json;

use super::ingest::{prepare, store_batch};
use super::relay::{Refusal, Relay};
use super::submission::{bounce, header_end, received_copy};
use super::vacation;
use super::work::spawn_every;
use crate::blob::BlobStore;
use crate::store::{Delivery, Store, StoreResult};

/// How long a delivery is retried, in seconds after its sendAt: 5 days
/// (RFC 5321 §4.5.4.1 suggests at least 4–5).
pub const GIVE_UP_AFTER: i64 = 5 * 86_400;

/// The name this server gives itself in the Received field of local copies.
pub const HOST: &str = "fastview";

/// How long a node holds a delivery it took, in seconds: renewed every
/// [`RENEW_EVERY`] while it works and before each recipient, so no other
/// node takes a delivery that is still being worked on.
pub const LEASE: i64 = 600;

/// How often a node renews the hold of the delivery it works on: a quarter
/// of [`LEASE`], so three renewals can fail (a busy database) before the
/// hold lapses.
pub const RENEW_EVERY: std::time::Duration = std::time::Duration::from_secs(LEASE as u64 / 4);

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

/// What became of one recipient.
enum Outcome {
    /// Final: the recipient's status.
    Done(String),
    /// Try again later; the status to show meanwhile, if there is news.
    Again(Option<String>),
}

/// Where mail to other servers goes.
#[derive(Clone, Copy)]
pub enum Outbound<'a> {
    /// The operator's relay (`--smtp-relay`), if any; accounts here get
    /// their copies through ingest.
    Relay(Option<&'a Relay>),
    /// Each account's own submission server, for every recipient.
    PerAccount(&'a dyn AccountSubmission),
}

/// Each account's own submission server (the proxy wing's, in front of an
/// IMAP server with `--upstream-smtp`, ADR 0008): mail leaves as the
/// account's user, and that server delivers to its own users too.
#[async_trait::async_trait]
pub trait AccountSubmission: Send + Sync {
    /// The relay that sends as the account's user; `None` while its
    /// credentials are not here (the delivery waits queued).
    fn submission_for(&self, account: i64) -> Option<Relay>;
    /// Files a bounce (a DSN the submission server's refusal gave) in the
    /// account's inbox; the error's words on failure (the delivery is
    /// tried again).
    async fn file_bounce(&self, account: i64, dsn: Vec<u8>) -> Result<(), String>;
    /// Whether mail can leave at all (a submission server is set): without
    /// one, the instance does not offer sending (RFC 8621 §1.3.2).
    fn sends(&self) -> bool;
}

/// Where a serving instance sends mail to other servers, chosen once at
/// assembly: the owned form of [`Outbound`].
#[derive(Clone)]
pub enum Route {
    /// The operator's relay (`--smtp-relay`), if any.
    Relay(Option<Arc<Relay>>),
    /// Each account's own submission server.
    PerAccount(Arc<dyn AccountSubmission>),
}

impl Default for Route {
    /// No relay: only accounts here can be sent to.
    fn default() -> Self {
        Route::Relay(None)
    }
}

impl Route {
    /// The borrowed form, for [`deliver_through`].
    pub fn outbound(&self) -> Outbound<'_> {
        match self {
            Route::Relay(relay) => Outbound::Relay(relay.as_deref()),
            Route::PerAccount(server) => Outbound::PerAccount(server.as_ref()),
        }
    }

    /// Whether this instance offers `urn:ietf:params:jmap:submission` (RFC
    /// 8621 §1.3.2; the session advertises it, its methods run): always
    /// through the relay or to the accounts here; through each account's
    /// own server only when there is one ([`AccountSubmission::sends`]).
    pub fn offers_submission(&self) -> bool {
        match self {
            Route::Relay(_) => true,
            Route::PerAccount(server) => server.sends(),
        }
    }

    /// Whether any address may be sent to (a relay, or each account's own
    /// server); without, only the accounts here.
    pub fn reaches_any_address(&self) -> bool {
        !matches!(self, Route::Relay(None))
    }

    /// Whether recipients that are accounts here get their copies through
    /// ingest; not when every recipient goes to each account's own server.
    pub fn delivers_here(&self) -> bool {
        matches!(self, Route::Relay(_))
    }

    /// The operator's relay, if mail goes through one.
    pub fn relay(&self) -> Option<&Arc<Relay>> {
        match self {
            Route::Relay(relay) => relay.as_ref(),
            Route::PerAccount(_) => None,
        }
    }
}

/// [`deliver_through`] the operator's relay.
pub async fn deliver(
    store: &dyn Store,
    blobs: &Arc<BlobStore>,
    relay: Option<&Relay>,
    host: &str,
    delivery: &Delivery,
    now: i64,
) -> StoreResult<()> {
    let courier = Courier {
        store,
        blobs,
        outbound: Outbound::Relay(relay),
        host,
    };
    deliver_through(courier, delivery, now).await
}

/// What a delivery goes out with: the store and blobs it reads and
/// records in, where mail to other servers goes, and `host`, the name of
/// this server in the Received field.
#[derive(Clone, Copy)]
pub struct Courier<'a> {
    pub store: &'a dyn Store,
    pub blobs: &'a Arc<BlobStore>,
    pub outbound: Outbound<'a>,
    pub host: &'a str,
}

/// Delivers what it can of `delivery` and records it: the statuses of the
/// recipients done, a retry for the others, through `courier`; `now` is
/// Unix seconds. Holds the delivery's lease while
/// it works ([`RENEW_EVERY`]); once another node has taken it over, stops
/// and records nothing (that node delivers it).
pub async fn deliver_through(
    courier: Courier<'_>,
    delivery: &Delivery,
    now: i64,
) -> StoreResult<()> {
    deliver_holding(courier, delivery, now, Hold::default()).await
}

/// How a node holds the delivery it works on: each renewal holds it for
/// `lease` seconds from then, every `renew_every` and before each
/// recipient.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hold {
    /// Seconds.
    pub lease: i64,
    pub renew_every: std::time::Duration,
}

impl Default for Hold {
    /// [`LEASE`], renewed every [`RENEW_EVERY`].
    fn default() -> Self {
        Self {
            lease: LEASE,
            renew_every: RENEW_EVERY,
        }
    }
}

/// [`deliver_through`] under `hold` (tests hold briefly and renew often;
/// everything else uses [`Hold::default`]).
pub async fn deliver_holding(
    courier: Courier<'_>,
    delivery: &Delivery,
    now: i64,
    hold: Hold,
) -> StoreResult<()> {
    let store = courier.store;
    let work = attempt(courier, delivery, now, hold.lease);
    let heartbeat = async {
        loop {
            tokio::time::sleep(hold.renew_every).await;
            let until = chrono::Utc::now().timestamp() + hold.lease;
            match store
                .renew_delivery(delivery.id, delivery.lease, until)
                .await
            {
                Ok(true) => {}
                Ok(false) => return,
                Err(error) => {
                    tracing::warn!(delivery = delivery.id, %error, "renewing a delivery's lease");
                }
            }
        }
    };
    tokio::select! {
        result = work => result,
        () = heartbeat => {
            tracing::warn!(
                delivery = delivery.id,
                "another node took this delivery over: the attempt here stops, unrecorded"
            );
            Ok(())
        }
    }
}

/// One attempt at `delivery` ([`deliver_through`] without the heartbeat),
/// renewing its hold for `lease` seconds before each recipient.
async fn attempt(
    courier: Courier<'_>,
    delivery: &Delivery,
    now: i64,
    lease: i64,
) -> StoreResult<()> {
    let Courier {
        store,
        blobs,
        outbound,
        host,
    } = courier;
    let recipients: Vec<String> = serde_json::from_str(&delivery.recipients).unwrap_or_default();
    let message = match blobs.get(&delivery.blob_id).await {
        Ok(Some(message)) => Some(message),
        Ok(None) => None,
        Err(error) => {
            tracing::warn!(delivery = delivery.id, %error, "reading a message to deliver");
            None
        }
    };
    // Every local recipient's copy, made once.
    let local_copy = std::sync::OnceLock::new();
    let mut statuses = Vec::new();
    let mut again = Vec::new();
    for recipient in recipients {
        let until = chrono::Utc::now().timestamp() + lease;
        if !store
            .renew_delivery(delivery.id, delivery.lease, until)
            .await?
        {
            tracing::warn!(
                delivery = delivery.id,
                "another node took this delivery over: the attempt here stops, unrecorded"
            );
            return Ok(());
        }
        let outcome = match &message {
            Some(message) => {
                let to = Recipient {
                    address: &recipient,
                    message,
                    local_copy: &local_copy,
                };
                match outbound {
                    Outbound::Relay(relay) => {
                        deliver_one(store, blobs, relay, host, delivery, to, now).await
                    }
                    Outbound::PerAccount(server) => {
                        send_per_account(server, host, delivery, to).await
                    }
                }
            }
            None => Outcome::Again(None),
        };
        match outcome {
            Outcome::Done(status) => statuses.push((recipient, status)),
            Outcome::Again(news) => {
                if let Some(news) = news {
                    statuses.push((recipient.clone(), news));
                }
                again.push(recipient)
            }
        }
    }
    let retry = if again.is_empty() {
        None
    } else if now >= delivery.send_at + GIVE_UP_AFTER {
        let expired = status("554 5.4.7 Delivery time expired", "no");
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
    if !store.finish_delivery(delivery, &statuses, retry).await? {
        tracing::warn!(
            delivery = delivery.id,
            "another node took this delivery over: this attempt is not recorded"
        );
    }
    Ok(())
}

/// One recipient of a delivery and the message as it leaves.
struct Recipient<'a> {
    address: &'a str,
    message: &'a [u8],
    /// The copy local recipients get (made by the first of them).
    local_copy: &'a std::sync::OnceLock<Vec<u8>>,
}

/// Sends to one recipient through the account's own submission server;
/// a permanent refusal is a bounce filed in the account's inbox.
async fn send_per_account(
    server: &dyn AccountSubmission,
    host: &str,
    delivery: &Delivery,
    to: Recipient<'_>,
) -> Outcome {
    let Some(relay) = server.submission_for(delivery.account_id) else {
        return Outcome::Again(Some(status(
            "451 4.7.0 No credentials for the upstream's submission server until the user logs in",
            "queued",
        )));
    };
    match relay
        .send(&delivery.mail_from, to.address, to.message)
        .await
    {
        Ok(reply) => Outcome::Done(status(&reply, "unknown")),
        Err(Refusal::Temporary(reply)) => Outcome::Again(Some(status(&reply, "queued"))),
        Err(Refusal::Permanent(reply)) => {
            let submission = delivery.submission_id.to_string();
            let (from, at) = (&delivery.mail_from, delivery.send_at);
            let dsn = bounce(host, &submission, from, to.address, &reply, to.message, at);
            match server.file_bounce(delivery.account_id, dsn).await {
                Ok(()) => Outcome::Done(status(&reply, "no")),
                Err(_) => Outcome::Again(None),
            }
        }
    }
}

/// Delivers to one recipient: into its inbox when it is an account here,
/// else through the relay.
async fn deliver_one(
    store: &dyn Store,
    blobs: &Arc<BlobStore>,
    relay: Option<&Relay>,
    host: &str,
    delivery: &Delivery,
    to: Recipient<'_>,
    now: i64,
) -> Outcome {
    let account = match store.account_for_address(to.address).await {
        Ok(account) => account,
        Err(_) => return Outcome::Again(None),
    };
    let submission = delivery.submission_id.to_string();
    let Some(account) = account else {
        let Some(relay) = relay else {
            return Outcome::Done(status(
                "550 5.7.1 No relay to other servers is set up",
                "no",
            ));
        };
        return match relay
            .send(&delivery.mail_from, to.address, to.message)
            .await
        {
            Ok(reply) => Outcome::Done(status(&reply, "unknown")),
            Err(Refusal::Temporary(reply)) => Outcome::Again(Some(status(&reply, "queued"))),
            Err(Refusal::Permanent(reply)) => {
                refused(store, blobs, host, delivery, &to, &reply, now).await
            }
        };
    };
    let copy = to
        .local_copy
        .get_or_init(|| received_copy(to.message, host, &submission, delivery.send_at));
    match store_in_inbox(store, blobs, account, copy.clone(), now).await {
        Ok(()) => {
            answer_if_away(store, blobs, relay, account, &to, &delivery.mail_from, now).await;
            Outcome::Done(delivered_locally())
        }
        Err(Stored::NoInbox) => {
            let reply = "550 5.2.1 The recipient has no inbox";
            refused(store, blobs, host, delivery, &to, reply, now).await
        }
        Err(Stored::OverQuota) => {
            let reply = "552 5.2.2 The recipient's mailbox is full";
            refused(store, blobs, host, delivery, &to, reply, now).await
        }
        Err(Stored::Failed) => Outcome::Again(None),
    }
}

/// A recipient refused for good with `reply`: a bounce (RFC 3464) to the
/// sender's inbox, and `delivered: "no"`. A bounce the sender's account
/// cannot take (no inbox, over its quota) is dropped; one that failed to
/// be stored is tried again with the recipient.
async fn refused(
    store: &dyn Store,
    blobs: &Arc<BlobStore>,
    host: &str,
    delivery: &Delivery,
    to: &Recipient<'_>,
    reply: &str,
    now: i64,
) -> Outcome {
    let submission = delivery.submission_id.to_string();
    let (from, at) = (&delivery.mail_from, delivery.send_at);
    let dsn = bounce(host, &submission, from, to.address, reply, to.message, at);
    match store_in_inbox(store, blobs, delivery.account_id, dsn, now).await {
        Ok(()) | Err(Stored::NoInbox | Stored::OverQuota) => Outcome::Done(status(reply, "no")),
        Err(Stored::Failed) => Outcome::Again(None),
    }
}

/// Sends `sender` the vacation reply of `account` (the recipient `to`),
/// if it has one on and may answer this message now (`mail/vacation.rs`).
/// Best effort: a reply that cannot be stored or sent is not retried.
async fn answer_if_away(
    store: &dyn Store,
    blobs: &Arc<BlobStore>,
    relay: Option<&Relay>,
    account: i64,
    to: &Recipient<'_>,
    sender: &str,
    now: i64,
) {
    let Ok(response) = store.vacation_response(account).await else {
        return;
    };
    let header = &to.message[..header_end(to.message)];
    if !vacation::active(&response, now) || !vacation::answerable(header, sender, to.address) {
        return;
    }
    // Never to the account itself, under any of its addresses.
    let sender_account = match store.account_for_address(sender).await {
        Ok(found) if found == Some(account) => return,
        Ok(found) => found,
        Err(_) => return,
    };
    if !matches!(
        store
            .vacation_reply_due(account, sender, now, vacation::PERIOD)
            .await,
        Ok(true)
    ) {
        return;
    }
    let Some(reply) = vacation::reply(&response, to.address, sender, header, chrono::Utc::now())
    else {
        return;
    };
    match sender_account {
        Some(sender_account) => {
            let _ = store_in_inbox(store, blobs, sender_account, reply, now).await;
        }
        None => {
            if let Some(relay) = relay
                && let Err(refusal) = relay.send("", sender, &reply).await
            {
                tracing::info!(?refusal, "a vacation reply was refused");
            }
        }
    }
}

/// Why a message could not be put in an inbox.
enum Stored {
    NoInbox,
    OverQuota,
    Failed,
}

/// Stores `message` in `account`'s inbox through the ingest path
/// (receivedAt `now`); a message it already has is not stored twice.
async fn store_in_inbox(
    store: &dyn Store,
    blobs: &Arc<BlobStore>,
    account: i64,
    message: Vec<u8>,
    now: i64,
) -> Result<(), Stored> {
    let inbox = store
        .role_mailbox(account, "inbox")
        .await
        .map_err(|_| Stored::Failed)?
        .ok_or(Stored::NoInbox)?;
    let prepared = prepare(message, vec![inbox], Vec::new(), |_| now);
    match store_batch(store, blobs, account, vec![prepared]).await {
        Ok(_) => Ok(()),
        Err(super::ingest::IngestError::Store(crate::store::StoreError::OverQuota)) => {
            Err(Stored::OverQuota)
        }
        Err(error) => {
            tracing::warn!(account, %error, "storing a delivered message");
            Err(Stored::Failed)
        }
    }
}

/// One pass of the queue: takes up to 32 due deliveries no node holds and
/// delivers them; how many it took.
pub async fn deliver_due(
    store: &dyn Store,
    blobs: &Arc<BlobStore>,
    relay: Option<&Relay>,
    host: &str,
    now: i64,
) -> StoreResult<usize> {
    let courier = Courier {
        store,
        blobs,
        outbound: Outbound::Relay(relay),
        host,
    };
    deliver_due_through(courier, now).await
}

/// [`deliver_due`] through `courier`.
pub async fn deliver_due_through(courier: Courier<'_>, now: i64) -> StoreResult<usize> {
    let due = courier.store.take_deliveries(now, LEASE, 32).await?;
    for delivery in &due {
        deliver_through(courier, delivery, now).await?;
    }
    Ok(due.len())
}

/// Runs [`deliver_due`] every `every` until the task is dropped: what a
/// submission could not deliver at once, after a restart too.
pub fn spawn_periodic(
    store: Arc<dyn Store>,
    blobs: Arc<BlobStore>,
    route: Route,
    every: std::time::Duration,
) -> tokio::task::JoinHandle<()> {
    spawn_every(every, move || {
        let (store, blobs, route) = (store.clone(), blobs.clone(), route.clone());
        async move {
            let now = chrono::Utc::now().timestamp();
            let courier = Courier {
                store: store.as_ref(),
                blobs: &blobs,
                outbound: route.outbound(),
                host: HOST,
            };
            match deliver_due_through(courier, now).await {
                Ok(0) => {}
                Ok(done) => tracing::info!(done, "queued deliveries"),
                Err(error) => tracing::warn!(%error, "delivering the queue failed"),
            }
        }
    })
}

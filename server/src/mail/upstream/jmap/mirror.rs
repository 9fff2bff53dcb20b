//! The local mirror of a JMAP upstream's accounts (issue 19, ADR 0009).
//!
//! Each upstream account a client uses gets a local account whose emails
//! are the upstream's, stored through the ordinary ingest path (one
//! download per new message), so the projection, part tree and search
//! index are Fastview's own, and mapped to the upstream's ids
//! (`store::jmap_mirror`). A sync is one of two:
//!
//! - **whole**, the first time or when the upstream cannot calculate
//!   changes from the mirror's state: every Email id and its metadata
//!   (Email/query + Email/get by result reference, a page of
//!   `maxObjectsInGet` per round trip), compared with the mapped ones: new
//!   ones downloaded and stored, changed keywords or mailboxIds set, ones
//!   the upstream no longer lists destroyed;
//! - **from a state**: Email/changes from the state the mirror is at until
//!   `hasMoreChanges` is false, the created and updated ones read and
//!   applied as above, the destroyed ones destroyed.
//!
//! The state the mirror is at is recorded after what it names is applied,
//! so a mirror is never ahead of its state string; it may be behind the
//! upstream, and then answers as of that state. Each account's syncs run
//! one at a time ([`Mirror::catch_up`]); after a client's first request an
//! account task follows the upstream's event source (or polls) and syncs on
//! each Email change, until the account has been idle for
//! `--upstream-idle-minutes`. Credentials live in memory only, as long as
//! that task.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::header::HeaderValue;
use serde_json::{Value, json};

use super::client::{JmapUpstream, UpstreamSession};
use crate::blob::BlobStore;
use crate::mail::body;
use crate::mail::ingest;
use crate::mail::message::parse_message;
use crate::mail::upstream::UpstreamError;
use crate::metrics::Metrics;
use crate::store::{EmailUpdate, Inserted, MirroredEmail, NewMailbox, Store};

/// The Email properties a sync reads of each message.
const METADATA: [&str; 6] = [
    "id",
    "blobId",
    "threadId",
    "mailboxIds",
    "keywords",
    "receivedAt",
];

/// The most messages downloaded and stored in one batch.
const STORE_BATCH: usize = 64;

/// `using` of the mirror's own requests.
const USING: [&str; 2] = [super::CAPABILITY_CORE, super::CAPABILITY_MAIL];

/// An upstream account's mirror: its local account and the state it is at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorState {
    /// The local account.
    pub account: i64,
    /// The upstream Email state the mirror holds.
    pub email_state: String,
}

/// One mirrored account in use on this node.
struct Mirrored {
    upstream_id: String,
    account: i64,
    /// Held by every sync of the account.
    syncing: tokio::sync::Mutex<()>,
    /// The latest credential a request for the account came with, and when.
    authorization: Mutex<(HeaderValue, Instant)>,
    /// Whether the account's follow task runs.
    following: Mutex<bool>,
}

/// The mirrors of one serving instance.
pub struct Mirror {
    upstream: Arc<JmapUpstream>,
    store: Arc<dyn Store>,
    blobs: Arc<BlobStore>,
    metrics: Arc<Metrics>,
    /// How long a followed account waits between syncs without an event.
    poll: Duration,
    /// How long after its last request an account is followed.
    idle: Duration,
    /// The largest message downloaded (`maxSizeUpload` of this server).
    max_message: usize,
    accounts: Mutex<HashMap<String, Arc<Mirrored>>>,
}

impl Mirror {
    /// Mirrors of `upstream`'s accounts in `store` and `blobs`.
    pub fn new(
        upstream: Arc<JmapUpstream>,
        store: Arc<dyn Store>,
        blobs: Arc<BlobStore>,
        metrics: Arc<Metrics>,
        poll: Duration,
        idle: Duration,
        max_message: u64,
    ) -> Self {
        Self {
            upstream,
            store,
            blobs,
            metrics,
            poll,
            idle,
            max_message: usize::try_from(max_message).unwrap_or(usize::MAX),
            accounts: Mutex::new(HashMap::new()),
        }
    }

    /// The mirror of upstream account `upstream_id` when it has finished a
    /// sync: what a call may be answered from.
    pub async fn ready(&self, upstream_id: &str) -> Result<Option<MirrorState>, UpstreamError> {
        Ok(match self.store.mirror_account(upstream_id).await? {
            Some((account, Some(email_state))) => Some(MirrorState {
                account,
                email_state,
            }),
            _ => None,
        })
    }

    /// Notes a request for the upstream accounts of `session` with
    /// `authorization`: each mail account gets its local account and its
    /// follow task (a first sync, then one per Email change) if it has none.
    pub async fn use_accounts(
        self: &Arc<Self>,
        session: &Arc<UpstreamSession>,
        authorization: &HeaderValue,
    ) -> Result<(), UpstreamError> {
        for upstream_id in mail_accounts(session) {
            let mirrored = self.mirrored(&upstream_id).await?;
            if let Ok(mut latest) = mirrored.authorization.lock() {
                *latest = (authorization.clone(), Instant::now());
            }
            let start = mirrored
                .following
                .lock()
                .map(|mut following| !std::mem::replace(&mut *following, true))
                .unwrap_or(false);
            if start {
                let mirror = self.clone();
                let session = session.clone();
                tokio::spawn(async move { mirror.follow(mirrored, session).await });
            }
        }
        Ok(())
    }

    /// Syncs upstream account `upstream_id` now, when it is mirrored (after
    /// a write, so that the client reads it back).
    pub async fn catch_up(
        &self,
        session: &UpstreamSession,
        authorization: &HeaderValue,
        upstream_id: &str,
    ) -> Result<(), UpstreamError> {
        let mirrored = self
            .accounts
            .lock()
            .ok()
            .and_then(|accounts| accounts.get(upstream_id).cloned());
        match mirrored {
            Some(mirrored) => self.sync(&mirrored, session, authorization).await,
            None => Ok(()),
        }
    }

    /// The account's entry, its local account made on first use.
    async fn mirrored(&self, upstream_id: &str) -> Result<Arc<Mirrored>, UpstreamError> {
        if let Some(found) = self
            .accounts
            .lock()
            .ok()
            .and_then(|a| a.get(upstream_id).cloned())
        {
            return Ok(found);
        }
        let account = match self.store.mirror_account(upstream_id).await? {
            Some((account, _)) => account,
            None => {
                let login = format!("{upstream_id}@upstream.invalid");
                let account = match self.store.account_by_email(&login).await? {
                    Some(account) => account,
                    None => {
                        self.store
                            .create_account(
                                &login,
                                crate::mail::upstream::link::UPSTREAM_PASSWORD_HASH,
                            )
                            .await?
                    }
                };
                self.store
                    .put_mirror_account(account.id, upstream_id)
                    .await?;
                account.id
            }
        };
        let mut accounts = self
            .accounts
            .lock()
            .map_err(|_| UpstreamError::Refused("mirror lock poisoned".into()))?;
        Ok(accounts
            .entry(upstream_id.to_string())
            .or_insert_with(|| {
                Arc::new(Mirrored {
                    upstream_id: upstream_id.to_string(),
                    account,
                    syncing: tokio::sync::Mutex::new(()),
                    authorization: Mutex::new((HeaderValue::from_static(""), Instant::now())),
                    following: Mutex::new(false),
                })
            })
            .clone())
    }

    /// The account task: a sync, then one after each Email change the
    /// upstream's event source tells of (or every `poll` without one), until
    /// the account has been idle for `idle` or the credential is refused.
    async fn follow(self: Arc<Self>, mirrored: Arc<Mirrored>, session: Arc<UpstreamSession>) {
        loop {
            let Ok((authorization, last_used)) = mirrored.authorization.lock().map(|a| a.clone())
            else {
                break;
            };
            if last_used.elapsed() > self.idle {
                break;
            }
            match self.sync(&mirrored, &session, &authorization).await {
                Ok(()) => {}
                Err(UpstreamError::LoginRefused) => break,
                Err(error) => {
                    tracing::warn!(account = %mirrored.upstream_id, %error, "mirror sync failed");
                }
            }
            self.wait_for_change(&session, &authorization).await;
        }
        if let Ok(mut following) = mirrored.following.lock() {
            *following = false;
        }
    }

    /// Waits until the upstream's event source tells of an Email change,
    /// or `poll` passes.
    async fn wait_for_change(&self, session: &UpstreamSession, authorization: &HeaderValue) {
        let url = session.event_source_target(Some("types=Email&closeafter=state&ping=0"));
        let listen = async {
            let Ok(url) = url else { return };
            let request = self
                .upstream
                .stream(reqwest::Method::GET, url)
                .header(reqwest::header::AUTHORIZATION, authorization.clone());
            let Ok(mut response) = self.upstream.forward(request, "eventsource").await else {
                return std::future::pending().await;
            };
            if !response.status().is_success() {
                return std::future::pending().await;
            }
            // closeafter=state: the stream ends after the first change.
            while let Ok(Some(_)) = response.chunk().await {}
        };
        let _ = tokio::time::timeout(self.poll, listen).await;
    }

    /// One sync of the account (module doc).
    async fn sync(
        &self,
        mirrored: &Mirrored,
        session: &UpstreamSession,
        authorization: &HeaderValue,
    ) -> Result<(), UpstreamError> {
        let _one_at_a_time = mirrored.syncing.lock().await;
        let started = Instant::now();
        let sync = Sync {
            mirror: self,
            session,
            authorization,
            upstream_id: &mirrored.upstream_id,
            account: mirrored.account,
        };
        let mailboxes = sync.mailboxes().await?;
        let state = self
            .store
            .mirror_account(&mirrored.upstream_id)
            .await?
            .and_then(|(_, state)| state);
        let stored = match state {
            Some(state) => match sync.since(&mailboxes, state).await? {
                Some(stored) => stored,
                None => sync.whole(&mailboxes).await?,
            },
            None => sync.whole(&mailboxes).await?,
        };
        self.metrics.upstream_synced(
            "sync",
            mailboxes.len(),
            stored.0,
            stored.1,
            started.elapsed(),
        );
        Ok(())
    }
}

/// The upstream accounts of a session that have the mail capability.
fn mail_accounts(session: &UpstreamSession) -> Vec<String> {
    session
        .object
        .get("accounts")
        .and_then(Value::as_object)
        .map(|accounts| {
            accounts
                .iter()
                .filter(|(_, account)| {
                    account
                        .get("accountCapabilities")
                        .and_then(|capabilities| capabilities.get(super::CAPABILITY_MAIL))
                        .is_some()
                })
                .map(|(id, _)| id.clone())
                .collect()
        })
        .unwrap_or_default()
}

/// The upstream's part blobIds by partId (a JSON object), when its
/// partIds are `local`'s in the same order; `None` otherwise (mail the two
/// servers split differently is the upstream's to answer about).
fn part_map(
    local: &[Option<String>],
    upstream: &[(Option<String>, Option<String>)],
) -> Option<String> {
    let same = local.len() == upstream.len()
        && local
            .iter()
            .zip(upstream)
            .all(|(local, (upstream, _))| local == upstream);
    if !same {
        return None;
    }
    let map: serde_json::Map<String, Value> = upstream
        .iter()
        .filter_map(|(part, blob)| Some((part.clone()?, Value::String(blob.clone()?))))
        .collect();
    Some(Value::Object(map).to_string())
}

/// One sync of one account.
struct Sync<'a> {
    mirror: &'a Mirror,
    session: &'a UpstreamSession,
    authorization: &'a HeaderValue,
    upstream_id: &'a str,
    account: i64,
}

/// An email's metadata as the upstream gave it.
struct Listed {
    id: String,
    blob_id: String,
    thread_id: String,
    mailbox_ids: Vec<String>,
    keywords: Vec<String>,
    received_at: i64,
}

impl Listed {
    fn read(value: &Value) -> Option<Self> {
        let text = |name: &str| value.get(name).and_then(Value::as_str).map(str::to_string);
        let keys = |name: &str| -> Vec<String> {
            let mut keys: Vec<String> = value
                .get(name)
                .and_then(Value::as_object)
                .map(|map| {
                    map.iter()
                        .filter(|(_, v)| **v == Value::Bool(true))
                        .map(|(k, _)| k.clone())
                        .collect()
                })
                .unwrap_or_default();
            keys.sort();
            keys
        };
        let received_at = chrono::DateTime::parse_from_rfc3339(&text("receivedAt")?).ok()?;
        Some(Self {
            id: text("id")?,
            blob_id: text("blobId")?,
            thread_id: text("threadId")?,
            mailbox_ids: keys("mailboxIds"),
            keywords: keys("keywords")
                .into_iter()
                .map(|k| k.to_ascii_lowercase())
                .collect(),
            received_at: received_at.timestamp(),
        })
    }
}

impl Sync<'_> {
    /// One round trip: `calls` as `[name, arguments, call id]`; the method
    /// responses. A call answered with `error` is [`UpstreamError::Refused`]
    /// naming its type, except `cannotCalculateChanges`, which is `Ok(None)`.
    async fn call(&self, calls: Value) -> Result<Option<Vec<Value>>, UpstreamError> {
        let request = json!({"using": USING, "methodCalls": calls});
        let response = self
            .mirror
            .upstream
            .call(self.session, self.authorization, &request, "sync")
            .await?;
        let responses = response
            .get("methodResponses")
            .and_then(Value::as_array)
            .cloned()
            .ok_or_else(|| UpstreamError::Refused("no methodResponses".into()))?;
        for response in &responses {
            if response[0] == "error" {
                let kind = response[1]["type"].as_str().unwrap_or("?");
                if kind == "cannotCalculateChanges" {
                    return Ok(None);
                }
                return Err(UpstreamError::Refused(format!("{}: {kind}", response[2])));
            }
        }
        Ok(Some(responses))
    }

    /// Maps every upstream mailbox to a local one (made when new); returns
    /// upstream id → local id.
    async fn mailboxes(&self) -> Result<HashMap<String, i64>, UpstreamError> {
        let calls = json!([["Mailbox/get", {"accountId": self.upstream_id, "ids": null, "properties": ["id"]}, "m"]]);
        let responses = self.call(calls).await?.unwrap_or_default();
        let listed: Vec<String> = responses
            .first()
            .and_then(|r| r[1]["list"].as_array())
            .map(|list| {
                list.iter()
                    .filter_map(|m| m["id"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let store = &self.mirror.store;
        let mut mapped: HashMap<String, i64> = store
            .mirror_mailboxes(self.account)
            .await?
            .into_iter()
            .map(|(local, upstream)| (upstream, local))
            .collect();
        for upstream in listed {
            if mapped.contains_key(&upstream) {
                continue;
            }
            // The local mailbox is only a handle for mailboxIds: named by
            // the upstream id, which is unique in the account.
            let local = store
                .create_mailbox(
                    self.account,
                    &NewMailbox {
                        parent_id: None,
                        name: format!("upstream {upstream}"),
                        role: None,
                        sort_order: 0,
                        is_subscribed: false,
                    },
                )
                .await?;
            store
                .put_mirror_mailbox(self.account, local, &upstream)
                .await?;
            mapped.insert(upstream, local);
        }
        Ok(mapped)
    }

    /// A whole sync; returns (messages stored, octets downloaded).
    async fn whole(&self, mailboxes: &HashMap<String, i64>) -> Result<(usize, u64), UpstreamError> {
        let page = self.session.max_objects_in_get;
        let mut listed = Vec::new();
        let mut state: Option<String> = None;
        let mut position = 0usize;
        loop {
            let calls = json!([
                ["Email/query", {"accountId": self.upstream_id, "position": position, "limit": page,
                    "sort": [{"property": "receivedAt", "isAscending": true}]}, "q"],
                ["Email/get", {"accountId": self.upstream_id, "properties": METADATA,
                    "#ids": {"resultOf": "q", "name": "Email/query", "path": "/ids"}}, "g"],
            ]);
            let responses = self.call(calls).await?.unwrap_or_default();
            let got = responses.get(1).map(|r| &r[1]);
            let list = got
                .and_then(|g| g["list"].as_array())
                .cloned()
                .unwrap_or_default();
            if state.is_none() {
                state = got.and_then(|g| g["state"].as_str()).map(str::to_string);
            }
            let count = responses
                .first()
                .and_then(|r| r[1]["ids"].as_array())
                .map_or(0, Vec::len);
            listed.extend(list.iter().filter_map(Listed::read));
            position += count;
            if count < page {
                break;
            }
        }
        let state =
            state.ok_or_else(|| UpstreamError::Refused("Email/get gave no state".into()))?;
        let held: HashSet<&str> = listed.iter().map(|l| l.id.as_str()).collect();
        let gone: Vec<i64> = self
            .mirror
            .store
            .mirror_emails(self.account, None, None)
            .await?
            .into_iter()
            .filter(|m| !held.contains(m.upstream_id.as_str()))
            .map(|m| m.email_id)
            .collect();
        let stored = self.apply(mailboxes, listed).await?;
        if !gone.is_empty() {
            self.mirror
                .store
                .destroy_emails(self.account, &gone)
                .await?;
        }
        self.mirror
            .store
            .set_mirror_state(self.account, &state)
            .await?;
        Ok(stored)
    }

    /// A sync from `state`; `None` when the upstream cannot calculate the
    /// changes from it.
    async fn since(
        &self,
        mailboxes: &HashMap<String, i64>,
        mut state: String,
    ) -> Result<Option<(usize, u64)>, UpstreamError> {
        let mut stored = (0, 0);
        loop {
            let calls = json!([
                ["Email/changes", {"accountId": self.upstream_id, "sinceState": state,
                    "maxChanges": self.session.max_objects_in_get}, "c"],
            ]);
            let Some(responses) = self.call(calls).await? else {
                return Ok(None);
            };
            let changes = &responses[0][1];
            let ids = |name: &str| -> Vec<String> {
                changes[name]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default()
            };
            let mut touched = ids("created");
            touched.extend(ids("updated"));
            let destroyed = ids("destroyed");
            let mut listed = Vec::new();
            for chunk in touched.chunks(self.session.max_objects_in_get) {
                let calls = json!([["Email/get", {"accountId": self.upstream_id, "ids": chunk, "properties": METADATA}, "g"]]);
                let responses = self.call(calls).await?.unwrap_or_default();
                let list = responses
                    .first()
                    .and_then(|r| r[1]["list"].as_array())
                    .cloned()
                    .unwrap_or_default();
                listed.extend(list.iter().filter_map(Listed::read));
            }
            let (count, octets) = self.apply(mailboxes, listed).await?;
            stored = (stored.0 + count, stored.1 + octets);
            if !destroyed.is_empty() {
                let destroyed: Vec<&str> = destroyed.iter().map(String::as_str).collect();
                let local: Vec<i64> = self
                    .mirror
                    .store
                    .mirror_emails(self.account, None, Some(&destroyed))
                    .await?
                    .into_iter()
                    .map(|m| m.email_id)
                    .collect();
                self.mirror
                    .store
                    .destroy_emails(self.account, &local)
                    .await?;
            }
            state = changes["newState"]
                .as_str()
                .ok_or_else(|| UpstreamError::Refused("Email/changes gave no newState".into()))?
                .to_string();
            self.mirror
                .store
                .set_mirror_state(self.account, &state)
                .await?;
            if changes["hasMoreChanges"] != Value::Bool(true) {
                return Ok(Some(stored));
            }
        }
    }

    /// The upstream's `bodyStructure` of each of `batch`: Email id →
    /// (partId, blobId) of each part in document order.
    async fn parts(
        &self,
        batch: &[&Listed],
    ) -> Result<HashMap<String, Vec<(Option<String>, Option<String>)>>, UpstreamError> {
        let ids: Vec<&str> = batch.iter().map(|l| l.id.as_str()).collect();
        let calls = json!([["Email/get", {"accountId": self.upstream_id, "ids": ids,
            "properties": ["id", "bodyStructure"], "bodyProperties": ["partId", "blobId", "subParts"]}, "p"]]);
        let responses = self.call(calls).await?.unwrap_or_default();
        let list = responses
            .first()
            .and_then(|r| r[1]["list"].as_array())
            .cloned()
            .unwrap_or_default();
        Ok(list
            .iter()
            .filter_map(|email| {
                let id = email["id"].as_str()?.to_string();
                let mut parts = Vec::new();
                let mut stack = vec![&email["bodyStructure"]];
                while let Some(part) = stack.pop() {
                    let part_id = part["partId"].as_str().map(str::to_string);
                    parts.push((part_id, part["blobId"].as_str().map(str::to_string)));
                    if let Some(children) = part["subParts"].as_array() {
                        stack.extend(children.iter().rev());
                    }
                }
                Some((id, parts))
            })
            .collect())
    }

    /// Makes the mirror hold `listed` as the upstream does: new emails
    /// downloaded and stored, mapped ones given the upstream's keywords and
    /// mailboxIds. Returns (messages stored, octets downloaded).
    async fn apply(
        &self,
        mailboxes: &HashMap<String, i64>,
        listed: Vec<Listed>,
    ) -> Result<(usize, u64), UpstreamError> {
        let store = &self.mirror.store;
        let local_mailboxes = |listed: &Listed| -> Vec<i64> {
            let mut ids: Vec<i64> = listed
                .mailbox_ids
                .iter()
                .filter_map(|m| mailboxes.get(m).copied())
                .collect();
            ids.sort_unstable();
            ids
        };
        let upstream_ids: Vec<&str> = listed.iter().map(|l| l.id.as_str()).collect();
        let mut mapped: HashMap<String, i64> = HashMap::new();
        for chunk in upstream_ids.chunks(1000) {
            for m in store.mirror_emails(self.account, None, Some(chunk)).await? {
                mapped.insert(m.upstream_id, m.email_id);
            }
        }
        let (known, new): (Vec<&Listed>, Vec<&Listed>) =
            listed.iter().partition(|l| mapped.contains_key(&l.id));
        // Known ones: keywords and mailboxIds set to the upstream's.
        let wanted: BTreeMap<i64, &Listed> = known.iter().map(|l| (mapped[&l.id], *l)).collect();
        let ids: Vec<i64> = wanted.keys().copied().collect();
        let mut updates = Vec::new();
        for chunk in ids.chunks(1000) {
            for meta in store.email_meta(self.account, chunk).await? {
                let Some(listed) = wanted.get(&meta.id) else {
                    continue;
                };
                let mailbox_ids = local_mailboxes(listed);
                if mailbox_ids != meta.mailbox_ids || listed.keywords != meta.keywords {
                    updates.push(EmailUpdate::replace(
                        meta.id,
                        Some(listed.keywords.clone()),
                        Some(mailbox_ids),
                    ));
                }
            }
        }
        if !updates.is_empty() {
            store.update_emails(self.account, &updates).await?;
        }
        // New ones: downloaded, stored through ingest, mapped.
        let mut stored = (0, 0u64);
        for batch in new.chunks(STORE_BATCH) {
            let mut upstream_parts = self.parts(batch).await?;
            let mut raws = Vec::with_capacity(batch.len());
            for listed in batch {
                let raw = self
                    .mirror
                    .upstream
                    .message(
                        self.session,
                        self.authorization,
                        self.upstream_id,
                        &listed.blob_id,
                        self.mirror.max_message,
                    )
                    .await?;
                stored.1 += raw.len() as u64;
                raws.push((
                    raw,
                    local_mailboxes(listed),
                    listed.keywords.clone(),
                    listed.received_at,
                ));
            }
            let prepared = tokio::task::spawn_blocking(move || {
                raws.into_iter()
                    .map(|(raw, mailboxes, keywords, at)| {
                        let part_ids = body::part_ids(&parse_message(&raw));
                        (ingest::prepare(raw, mailboxes, keywords, |_| at), part_ids)
                    })
                    .unzip::<_, _, Vec<_>, Vec<_>>()
            })
            .await
            .map_err(|error| UpstreamError::Refused(format!("preparing messages: {error}")))?;
            let (prepared, local_part_ids) = prepared;
            let inserted =
                ingest::store_batch(store.as_ref(), &self.mirror.blobs, self.account, prepared)
                    .await?;
            let names: Vec<MirroredEmail> = batch
                .iter()
                .zip(inserted)
                .zip(local_part_ids)
                .map(|((listed, inserted), local_part_ids)| {
                    let (Inserted::New(email_id) | Inserted::Duplicate(email_id)) = inserted;
                    let parts = upstream_parts
                        .remove(&listed.id)
                        .and_then(|parts| part_map(&local_part_ids, &parts));
                    MirroredEmail {
                        email_id,
                        upstream_id: listed.id.clone(),
                        blob_id: listed.blob_id.clone(),
                        thread_id: listed.thread_id.clone(),
                        parts,
                    }
                })
                .collect();
            store.put_mirror_emails(self.account, &names).await?;
            stored.0 += batch.len();
        }
        Ok(stored)
    }
}

#[cfg(test)]
mod tests {
    use super::part_map;

    #[test]
    fn part_blob_ids_are_kept_only_for_mail_split_alike() {
        let some = |id: &str| Some(id.to_string());
        let local = vec![None, some("1"), some("2")];
        let upstream = vec![
            (None, None),
            (some("1"), some("B1")),
            (some("2"), some("B2")),
        ];
        assert_eq!(
            part_map(&local, &upstream).as_deref(),
            Some(r#"{"1":"B1","2":"B2"}"#)
        );
        let numbered_otherwise = vec![(None, None), (some("0"), some("B")), (some("1"), some("C"))];
        assert_eq!(part_map(&local, &numbered_otherwise), None);
        assert_eq!(part_map(&local, &upstream[..2]), None);
    }
}

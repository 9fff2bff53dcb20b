//! One sync of one account (the module doc of `mirror.rs`): the
//! mailboxes, then the emails, whole or from the state the mirror is at.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use reqwest::header::HeaderValue;
use serde_json::{Value, json};

use crate::proxy::jmap::client::UpstreamSession;
use crate::proxy::jmap::mirror::mirrored::{MailboxSnapshot, Mirror, Mirrored, USING};
use crate::proxy::upstream::UpstreamError;
use crate::store::NewMailbox;

/// The Email properties a sync reads of each message.
const METADATA: [&str; 6] = [
    "id",
    "blobId",
    "threadId",
    "mailboxIds",
    "keywords",
    "receivedAt",
];

impl Mirror {
    /// One sync of the account under its `syncing` guard (the module doc of
    /// `mirror.rs`); the mirror is answered from only after one succeeds.
    /// A sync that could not reach the upstream and changed nothing leaves
    /// the mirror answering at the state it holds (an outage, issue 45);
    /// any other failure stops its answers until a sync succeeds.
    pub(super) async fn sync_locked(
        &self,
        mirrored: &Mirrored,
        _one_at_a_time: tokio::sync::RwLockWriteGuard<'_, ()>,
        session: &UpstreamSession,
        authorization: &HeaderValue,
    ) -> Result<(), UpstreamError> {
        let writes = mirrored.writes.load(Ordering::Acquire);
        let started = Instant::now();
        // No local answer reads while this sync holds the lock; the next
        // reads the names the sync leaves (`names.rs`).
        self.names.forget(mirrored.account.id).await;
        let sync = Sync {
            mirror: self,
            session,
            authorization,
            upstream_id: &mirrored.upstream_id,
            account: mirrored.account.id,
        };
        let before = self.store.states(mirrored.account.id).await.ok();
        let (state, (mailboxes, snapshot), stored) = match sync.run().await {
            Ok(done) => done,
            Err(error) => {
                let untouched = matches!(error, UpstreamError::Unreachable(_))
                    && before.is_some()
                    && self.store.states(mirrored.account.id).await.ok() == before;
                if !untouched {
                    mirrored.set_fresh(None);
                }
                return Err(error);
            }
        };
        if let Ok(mut kept) = mirrored.mailbox_snapshot.lock() {
            *kept = Some(Arc::new(snapshot));
        }
        let census = match sync.census(&state).await {
            Ok(census) => census,
            Err(error) => {
                tracing::warn!(account = %mirrored.upstream_id, %error, "no census after the sync");
                None
            }
        };
        if let Ok(mut kept) = mirrored.census.lock() {
            *kept = census.map(Arc::new);
        }
        if let Ok(mut mapped) = mirrored.mailboxes.lock() {
            *mapped = Arc::new(
                mailboxes
                    .iter()
                    .map(|(upstream, local)| (*local, upstream.clone()))
                    .collect(),
            );
        }
        mirrored.set_fresh(Some(state));
        mirrored.synced_through.fetch_max(writes, Ordering::AcqRel);
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

/// One sync of one account.
pub(super) struct Sync<'a> {
    pub(super) mirror: &'a Mirror,
    pub(super) session: &'a UpstreamSession,
    pub(super) authorization: &'a HeaderValue,
    pub(super) upstream_id: &'a str,
    pub(super) account: i64,
}

/// An email's metadata as the upstream gave it.
pub(super) struct Listed {
    pub(super) id: String,
    pub(super) blob_id: String,
    pub(super) thread_id: String,
    pub(super) mailbox_ids: Vec<String>,
    pub(super) keywords: Vec<String>,
    pub(super) received_at: i64,
}

impl Listed {
    pub(super) fn read(value: &Value) -> Option<Self> {
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
    pub(super) async fn call(&self, calls: Value) -> Result<Option<Vec<Value>>, UpstreamError> {
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
    pub(super) async fn mailboxes(
        &self,
    ) -> Result<(HashMap<String, i64>, MailboxSnapshot), UpstreamError> {
        let calls = json!([["Mailbox/get", {"accountId": self.upstream_id, "ids": null}, "m"]]);
        let responses = self.call(calls).await?.unwrap_or_default();
        let answer = responses.first().map(|r| &r[1]);
        let snapshot = MailboxSnapshot {
            state: answer
                .and_then(|a| a["state"].as_str())
                .ok_or_else(|| UpstreamError::Refused("Mailbox/get gave no state".into()))?
                .to_string(),
            list: list_of(answer),
        };
        let listed: Vec<String> = snapshot
            .list
            .iter()
            .filter_map(|m| m["id"].as_str().map(str::to_string))
            .collect();
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
        Ok((mapped, snapshot))
    }

    /// One sync: the mailboxes, then the emails from the state the mirror
    /// is at (whole when it has none, or the upstream cannot calculate the
    /// changes from it). Returns the upstream Email state reached, the
    /// mailboxes (upstream id → local id) and (messages stored, octets
    /// downloaded).
    async fn run(
        &self,
    ) -> Result<
        (
            String,
            (HashMap<String, i64>, MailboxSnapshot),
            (usize, u64),
        ),
        UpstreamError,
    > {
        let (mut mailboxes, snapshot) = self.mailboxes().await?;
        let state = self
            .mirror
            .store
            .mirror_account(self.upstream_id)
            .await?
            .and_then(|(_, state)| state);
        let (state, stored) = match state {
            Some(state) => match self.since(&mut mailboxes, state).await? {
                Some(done) => done,
                None => self.whole(&mut mailboxes).await?,
            },
            None => self.whole(&mut mailboxes).await?,
        };
        Ok((state, (mailboxes, snapshot), stored))
    }

    /// A whole sync; returns the state reached and (messages stored,
    /// octets downloaded). Pages until the upstream lists no more ids or
    /// its total is reached (a server may cap `limit` below the page).
    async fn whole(
        &self,
        mailboxes: &mut HashMap<String, i64>,
    ) -> Result<(String, (usize, u64)), UpstreamError> {
        let page = self.session.max_objects_in_get;
        let mut listed = Vec::new();
        let mut state: Option<String> = None;
        let mut position = 0usize;
        loop {
            let calls = json!([
                ["Email/query", {"accountId": self.upstream_id, "position": position, "limit": page,
                    "sort": [{"property": "receivedAt", "isAscending": true}], "calculateTotal": true}, "q"],
                ["Email/get", {"accountId": self.upstream_id, "properties": METADATA,
                    "#ids": {"resultOf": "q", "name": "Email/query", "path": "/ids"}}, "g"],
            ]);
            let responses = self.call(calls).await?.unwrap_or_default();
            let got = responses.get(1).map(|r| &r[1]);
            let list = list_of(got);
            if state.is_none() {
                state = got.and_then(|g| g["state"].as_str()).map(str::to_string);
            }
            let query = responses.first().map(|r| &r[1]);
            let count = query.and_then(|q| q["ids"].as_array()).map_or(0, Vec::len);
            let total = query.and_then(|q| q["total"].as_u64());
            listed.extend(list.iter().filter_map(Listed::read));
            position += count;
            if count == 0 || total.is_some_and(|total| position as u64 >= total) {
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
        Ok((state, stored))
    }

    /// A sync from `state`; `None` when the upstream cannot calculate the
    /// changes from it.
    async fn since(
        &self,
        mailboxes: &mut HashMap<String, i64>,
        mut state: String,
    ) -> Result<Option<(String, (usize, u64))>, UpstreamError> {
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
                let list = list_of(responses.first().map(|r| &r[1]));
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
                return Ok(Some((state, stored)));
            }
        }
    }
}

/// The `list` of a /get answer (RFC 8620 §5.1), empty when there is none.
pub(super) fn list_of(answer: Option<&Value>) -> Vec<Value> {
    answer
        .and_then(|answer| answer["list"].as_array())
        .cloned()
        .unwrap_or_default()
}

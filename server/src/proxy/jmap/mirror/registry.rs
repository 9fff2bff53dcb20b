//! The accounts a node mirrors: each made on first use with its local
//! account and follow task, and the syncs a forwarded request asks for
//! (after a write, or to reach a state it saw).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use reqwest::header::HeaderValue;
use serde_json::Value;
use tokio::sync::Notify;

use crate::proxy::jmap::CAPABILITY_MAIL;
use crate::proxy::jmap::client::UpstreamSession;
use crate::proxy::jmap::mirror::mirrored::{ACTIVE_CLIENT, Mirror, Mirrored};
use crate::proxy::upstream::UpstreamError;
use crate::proxy::upstream::create_upstream_account;
use crate::store::{Account, StoreError};

impl Mirror {
    /// Notes a request for the upstream accounts of `session` with
    /// `authorization`: each personal mail account gets its local account
    /// and its follow task (a first sync, then one per Email change) if it
    /// has none. Only personal accounts (`isPersonal`) are mirrored: an
    /// account shared with the user may show each user a different part of
    /// itself, which one mirror cannot.
    pub async fn use_accounts(
        self: &Arc<Self>,
        session: &Arc<UpstreamSession>,
        authorization: &HeaderValue,
    ) -> Result<(), UpstreamError> {
        for upstream_id in mail_accounts(session) {
            let mirrored = self.mirrored(&upstream_id).await?;
            if let Ok(mut latest) = mirrored.authorization.lock() {
                let returned = latest
                    .as_ref()
                    .is_some_and(|(_, at)| at.elapsed() >= ACTIVE_CLIENT);
                *latest = Some((authorization.clone(), Instant::now()));
                if returned {
                    mirrored.client_returned.notify_one();
                }
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

    /// After a write forwarded for upstream account `upstream_id`: syncs it
    /// now when no sync runs (so that the client reads its write back),
    /// else leaves it to the follow task, woken; until a sync started after
    /// the write succeeds, the account's calls are forwarded. A failed sync
    /// is logged, not the write's failure.
    pub async fn catch_up(
        &self,
        session: &UpstreamSession,
        authorization: &HeaderValue,
        upstream_id: &str,
    ) {
        let Some(mirrored) = self.entry(upstream_id) else {
            return;
        };
        mirrored.writes.fetch_add(1, Ordering::AcqRel);
        let Ok(guard) = mirrored.syncing.try_write() else {
            mirrored.wake.notify_one();
            return;
        };
        if let Err(error) = self
            .sync_locked(&mirrored, guard, session, authorization)
            .await
        {
            tracing::warn!(account = %upstream_id, %error, "mirror catch-up failed");
            mirrored.wake.notify_one();
        }
    }

    /// Brings the mirror of `upstream_id` up to the upstream Email state
    /// `state` a forwarded call of the same request showed, when its task
    /// follows it (waiting for a sync in progress); whether it got there.
    pub async fn reach(
        &self,
        session: &UpstreamSession,
        authorization: &HeaderValue,
        upstream_id: &str,
        state: &str,
    ) -> bool {
        let Some(mirrored) = self.entry(upstream_id) else {
            return false;
        };
        // A mirror not answered from yet (its first sync runs or waits its
        // turn) cannot answer this request: forwarded, not waited for.
        if mirrored
            .fresh_state
            .lock()
            .map_or(true, |state| state.is_none())
        {
            return false;
        }
        let guard = mirrored.syncing.write().await;
        match self.ready(upstream_id) {
            None => return false,
            Some(ready) if ready.email_state == state => return true,
            Some(_) => {}
        }
        match self
            .sync_locked(&mirrored, guard, session, authorization)
            .await
        {
            Ok(()) => self
                .ready(upstream_id)
                .is_some_and(|ready| ready.email_state == state),
            Err(error) => {
                tracing::warn!(account = %upstream_id, %error, "mirror sync failed");
                false
            }
        }
    }

    /// The account's entry, its local account made on first use.
    async fn mirrored(&self, upstream_id: &str) -> Result<Arc<Mirrored>, UpstreamError> {
        if let Some(found) = self.entry(upstream_id) {
            return Ok(found);
        }
        let account = match self.store.mirror_account(upstream_id).await? {
            Some((account, _)) => self.store.account_by_id(account).await?.ok_or_else(|| {
                UpstreamError::Refused(format!("the mirror of {upstream_id} is gone"))
            })?,
            None => {
                let login = format!("{upstream_id}@upstream.invalid");
                let account = match self.store.account_by_email(&login).await? {
                    Some(account) => account,
                    None => self.create_account(&login).await?,
                };
                self.store
                    .put_mirror_account(account.id, upstream_id)
                    .await?;
                account
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
                    mailboxes: Mutex::new(Arc::new(HashMap::new())),
                    syncing: Arc::new(tokio::sync::RwLock::new(())),
                    authorization: Mutex::new(None),
                    following: Mutex::new(false),
                    fresh_state: Mutex::new(None),
                    writes: AtomicU64::new(0),
                    synced_through: AtomicU64::new(0),
                    wake: Notify::new(),
                    client_returned: Notify::new(),
                    mailbox_snapshot: Mutex::new(None),
                    census: Mutex::new(None),
                    verified: Mutex::new(HashMap::new()),
                })
            })
            .clone())
    }
}

impl Mirror {
    /// The local account `login` of a mirror ([`create_upstream_account`]);
    /// one made and gone again at once is the upstream's refusal.
    async fn create_account(&self, login: &str) -> Result<Account, UpstreamError> {
        let created = create_upstream_account(self.store.as_ref(), login).await;
        created.map_err(|error| match error {
            StoreError::Conflict(why) => UpstreamError::Refused(why),
            error => error.into(),
        })
    }
}

/// The personal upstream accounts of a session that have the mail capability.
fn mail_accounts(session: &UpstreamSession) -> Vec<String> {
    session
        .object
        .get("accounts")
        .and_then(Value::as_object)
        .map(|accounts| {
            accounts
                .iter()
                .filter(|(_, account)| {
                    account.get("isPersonal") == Some(&Value::Bool(true))
                        && account
                            .get("accountCapabilities")
                            .and_then(|capabilities| capabilities.get(CAPABILITY_MAIL))
                            .is_some()
                })
                .map(|(id, _)| id.clone())
                .collect()
        })
        .unwrap_or_default()
}

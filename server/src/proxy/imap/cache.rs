//! The blob store of an upstream data dir as a bounded cache (issue 18,
//! ADR 0008): `--upstream-cache-mb` bounds the octets of message blobs it
//! keeps. The eviction pass ([`Upstream::evict`], every minute under
//! `serve`) deletes the blobs of the oldest mail (by receivedAt) beyond the
//! bound, recording each in `upstream_evicted` before deleting it; rows,
//! projection and part trees stay, so list views and structure never notice.
//! A read that finds an evicted blob absent asks [`Upstream`] as the blob
//! store's [`Refill`]: it reads the message again by UID (over the
//! account's writer connection, under its lock), checks that the octets
//! hash to the blob id, and puts them back.

use std::sync::Arc;
use std::time::Duration;

use super::link::Upstream;
use crate::blob::{Refill, blob_id_of};
use crate::proxy::upstream::UpstreamError;

/// Blobs evicted per store round trip.
const EVICT_BATCH: i64 = 256;

impl Upstream {
    /// One eviction pass: while the cached message blobs take more than the
    /// bound, those of the oldest mail are recorded as evicted and deleted.
    /// Returns how many were evicted.
    pub async fn evict(&self) -> Result<usize, UpstreamError> {
        let bound = self.cache_bytes();
        if bound == 0 {
            return Ok(0);
        }
        let store = self.store();
        let mut total = u64::try_from(store.upstream_cache_total().await?).unwrap_or(0);
        let mut evicted = 0;
        while total > bound {
            let oldest = store.upstream_cache_oldest(EVICT_BATCH).await?;
            if oldest.is_empty() {
                break;
            }
            let mut batch = Vec::new();
            for (blob, size) in oldest {
                if total <= bound {
                    break;
                }
                total = total.saturating_sub(u64::try_from(size).unwrap_or(0));
                batch.push((blob, size));
            }
            // Recorded first: a read that finds the blob gone refills it.
            store.mark_evicted(&batch).await?;
            for (blob, _) in &batch {
                self.blobs()
                    .evict(blob)
                    .await
                    .map_err(|error| UpstreamError::Refused(format!("evicting {blob}: {error}")))?;
            }
            evicted += batch.len();
        }
        Ok(evicted)
    }

    /// Runs [`Upstream::evict`] every `every` until the upstream is dropped.
    pub fn spawn_eviction(self: &Arc<Self>, every: Duration) -> tokio::task::JoinHandle<()> {
        let upstream = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(upstream) = upstream.upgrade() else {
                    return;
                };
                match upstream.evict().await {
                    Ok(0) => {}
                    Ok(evicted) => tracing::info!(evicted, "upstream cache eviction"),
                    Err(error) => tracing::warn!(%error, "upstream cache eviction failed"),
                }
            }
        })
    }

    /// Reads an evicted message again from the upstream and puts it back.
    async fn read_again(&self, blob_id: &str) -> Result<bool, UpstreamError> {
        let store = self.store();
        let Some((account, mailbox, uid)) = store.upstream_blob_location(blob_id).await? else {
            return Ok(false);
        };
        let Ok(uid) = u32::try_from(uid) else {
            return Ok(false);
        };
        let link = self.link(account)?;
        let mut slot = link.writer.lock().await;
        let connection = self.writer(&link, &mut slot).await?;
        self.count("refill");
        let fetched = async {
            connection.examine(&mailbox).await?;
            let fetched = connection.fetch(&[uid]).await?;
            connection.unselect().await?;
            Ok::<_, UpstreamError>(fetched)
        }
        .await;
        let fetched = match fetched {
            Ok(fetched) => fetched,
            Err(error) => {
                *slot = None;
                return Err(error);
            }
        };
        let Some(message) = fetched.into_iter().find(|m| m.uid == uid) else {
            return Ok(false);
        };
        if blob_id_of(&message.raw) != blob_id {
            return Ok(false);
        }
        self.count_refill();
        self.count_bytes(message.raw.len());
        self.blobs()
            .put_with_id(blob_id, bytes::Bytes::from(message.raw))
            .await
            .map_err(|error| UpstreamError::Refused(format!("storing {blob_id}: {error}")))?;
        store.unmark_evicted(&[blob_id]).await?;
        Ok(true)
    }
}

#[async_trait::async_trait]
impl Refill for Upstream {
    async fn refill(&self, blob_id: &str) -> bool {
        match self.read_again(blob_id).await {
            Ok(done) => done,
            Err(error) => {
                tracing::warn!(blob_id, %error, "an evicted message could not be read again");
                false
            }
        }
    }
}

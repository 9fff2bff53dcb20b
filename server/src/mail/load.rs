//! Batched loading for Email/get: executes a [`ReadPlan`] for all ids of a
//! call with a fixed number of store queries (never one per id), reading the
//! blob store only at the full level.
//!
//! The moka caches hold only immutable data (parsed header blocks and
//! projection rows, keyed by email id), never keywords or mailboxIds, so
//! several server nodes need no cache invalidation. They are bounded in bytes.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use moka::future::Cache;

use super::fast_view::FastView;
use super::header::HeaderFields;
use super::message::parse_message;
use super::read_level::ReadPlan;
use super::work::{INLINE_PARSE_BYTES, WorkPool};
use crate::blob::{BlobError, BlobStore};
use crate::metrics::Metrics;
use crate::store::{EmailMeta, Store, StoreError};

/// Why a load failed: the store, or a message blob that is missing,
/// corrupt (does not hash to its id) or unreadable. Never served as an
/// empty or altered message.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The blob of an email could not be read whole and checked.
    #[error("reading blob {blob_id}: {error}")]
    Blob { blob_id: String, error: BlobError },
}

/// The bytes of a blob read for `blob_id`, or the [`LoadError`] naming it.
fn checked(blob_id: &str, read: Result<Option<Vec<u8>>, BlobError>) -> Result<Vec<u8>, LoadError> {
    match read {
        Ok(Some(raw)) => Ok(raw),
        Ok(None) => Err(LoadError::Blob {
            blob_id: blob_id.to_string(),
            error: BlobError::Missing(blob_id.to_string()),
        }),
        Err(error) => Err(LoadError::Blob {
            blob_id: blob_id.to_string(),
            error,
        }),
    }
}

/// How many projection misses of one call are computed at once.
const MISS_CONCURRENCY: usize = 4;

/// One email with the sources its call's plan asked for.
pub struct LoadedEmail {
    pub meta: EmailMeta,
    /// The header block split into fields (header level).
    pub header: Option<Arc<HeaderFields>>,
    /// The projection row (fast-view level).
    pub fast_view: Option<FastView>,
    /// The raw message (full level); the caller parses it once.
    pub raw: Option<Vec<u8>>,
}

/// Cache sizes in bytes (`serve --header-cache-mb`, `--fast-view-cache-mb`).
#[derive(Debug, Clone, Copy)]
pub struct CacheSizes {
    /// Header blocks split into fields with their memo of rendered values,
    /// about 5 KiB per message of real mail: 256 MiB by default, about
    /// 50,000 messages (the newest 30 of ~1,700 mailboxes).
    pub header_bytes: u64,
    /// Projection rows, about 300 octets per message: 32 MiB by default.
    pub fast_view_bytes: u64,
}

impl Default for CacheSizes {
    fn default() -> Self {
        Self {
            header_bytes: 256 << 20,
            fast_view_bytes: 32 << 20,
        }
    }
}

/// Loads emails for Email/get through the store, the blob store and the caches.
pub struct EmailLoader {
    store: Arc<dyn Store>,
    blobs: Arc<BlobStore>,
    metrics: Arc<Metrics>,
    headers: Cache<i64, Arc<HeaderFields>>,
    fast_views: Cache<i64, FastView>,
    work: Arc<WorkPool>,
}

impl EmailLoader {
    /// A loader with empty caches of the given sizes; header blocks of more
    /// than [`INLINE_PARSE_BYTES`] (together) are split on `work`.
    pub fn new(
        store: Arc<dyn Store>,
        blobs: Arc<BlobStore>,
        metrics: Arc<Metrics>,
        sizes: CacheSizes,
        work: Arc<WorkPool>,
    ) -> Self {
        let headers = Cache::builder()
            .max_capacity(sizes.header_bytes)
            .weigher(|_: &i64, fields: &Arc<HeaderFields>| {
                fields.weight().min(u32::MAX as usize) as u32
            })
            .build();
        let fast_views = Cache::builder()
            .max_capacity(sizes.fast_view_bytes)
            .weigher(|_: &i64, view: &FastView| (view.preview.len() + 48) as u32)
            .build();
        Self {
            store,
            blobs,
            metrics,
            headers,
            fast_views,
            work,
        }
    }

    /// Loads the given ids of the account at the plan's level. Ids not in the
    /// account are absent from the result; order follows the metadata query.
    /// Also returns the account's Email state, read with the metadata.
    pub async fn load(
        &self,
        account: i64,
        ids: &[i64],
        plan: ReadPlan,
    ) -> Result<(Vec<LoadedEmail>, i64), LoadError> {
        let (mut loaded, email_state) = self.load_meta(account, ids).await?;
        self.complete(account, &mut loaded, plan).await?;
        Ok((loaded, email_state))
    }

    /// The first step of [`EmailLoader::load`]: the metadata of the ids in
    /// the account (with each message's stored size, so a caller can weigh
    /// a full read before it happens) and the account's Email state.
    pub async fn load_meta(
        &self,
        account: i64,
        ids: &[i64],
    ) -> Result<(Vec<LoadedEmail>, i64), LoadError> {
        let (metas, email_state) = self.store.email_meta_and_state(account, ids).await?;
        let loaded = metas
            .into_iter()
            .map(|meta| LoadedEmail {
                meta,
                header: None,
                fast_view: None,
                raw: None,
            })
            .collect();
        Ok((loaded, email_state))
    }

    /// The rest of [`EmailLoader::load`]: what the plan's level needs of
    /// emails whose metadata [`EmailLoader::load_meta`] read.
    pub async fn complete(
        &self,
        account: i64,
        loaded: &mut [LoadedEmail],
        plan: ReadPlan,
    ) -> Result<(), LoadError> {
        let found: Vec<i64> = loaded.iter().map(|email| email.meta.id).collect();
        if plan.full {
            self.load_raw(loaded).await?;
        }
        if plan.header {
            let headers = self.load_headers(account, &found).await?;
            for (email, header) in loaded.iter_mut().zip(headers) {
                email.header = header;
            }
        }
        if plan.fast_view {
            let views = self.load_fast_views(account, loaded).await?;
            for (email, view) in loaded.iter_mut().zip(views) {
                email.fast_view = Some(view);
            }
        }
        Ok(())
    }

    /// Reads every email's message, each checked against its id; the first
    /// missing or corrupt one fails the load.
    async fn load_raw(&self, loaded: &mut [LoadedEmail]) -> Result<(), LoadError> {
        let blob_ids: Vec<String> = loaded.iter().map(|e| e.meta.blob_id.clone()).collect();
        let raws = self.blobs.get_many(&blob_ids).await;
        for (email, raw) in loaded.iter_mut().zip(raws) {
            let raw = checked(&email.meta.blob_id, raw)?;
            self.metrics.count_blob_read(raw.len());
            email.raw = Some(raw);
        }
        Ok(())
    }

    /// Header blocks split into fields, in the order of `ids`; `None` for an
    /// email without one.
    async fn load_headers(
        &self,
        account: i64,
        ids: &[i64],
    ) -> Result<Vec<Option<Arc<HeaderFields>>>, StoreError> {
        let mut out: Vec<Option<Arc<HeaderFields>>> = Vec::with_capacity(ids.len());
        let mut missing = Vec::new();
        for id in ids {
            let cached = self.headers.get(id).await;
            if cached.is_none() {
                missing.push(*id);
            }
            out.push(cached);
        }
        if missing.is_empty() {
            return Ok(out);
        }
        let slots: HashMap<i64, usize> = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
        let blocks = self.store.header_blocks(account, &missing).await?;
        let octets: usize = blocks.iter().map(|(_, block)| block.len()).sum();
        let split = |blocks: Vec<(i64, Vec<u8>)>| -> Vec<(i64, Arc<HeaderFields>)> {
            blocks
                .into_iter()
                .map(|(id, block)| (id, Arc::new(HeaderFields::parse(block))))
                .collect()
        };
        // The list view's few short blocks inline; anything larger on the pool.
        let parsed = if octets <= INLINE_PARSE_BYTES {
            split(blocks)
        } else {
            self.work.run(account, move || split(blocks)).await
        };
        for (id, fields) in parsed {
            self.metrics.count_parse("header");
            self.headers.insert(id, fields.clone()).await;
            if let Some(slot) = slots.get(&id) {
                out[*slot] = Some(fields);
            }
        }
        Ok(out)
    }

    /// Projection rows in the order of `loaded`; misses are computed from the
    /// full message with bounded concurrency, served, and written back.
    async fn load_fast_views(
        &self,
        account: i64,
        loaded: &[LoadedEmail],
    ) -> Result<Vec<FastView>, LoadError> {
        let mut out: Vec<Option<FastView>> = Vec::with_capacity(loaded.len());
        let mut uncached = Vec::new();
        for email in loaded {
            let cached = self.fast_views.get(&email.meta.id).await;
            if cached.is_none() {
                uncached.push(email.meta.id);
            }
            out.push(cached);
        }
        if !uncached.is_empty() {
            let slots: HashMap<i64, usize> = loaded
                .iter()
                .enumerate()
                .map(|(i, e)| (e.meta.id, i))
                .collect();
            for (id, view) in self.store.fast_views(account, &uncached).await? {
                self.fast_views.insert(id, view.clone()).await;
                if let Some(slot) = slots.get(&id) {
                    out[*slot] = Some(view);
                }
            }
        }
        let hits = out.iter().filter(|v| v.is_some()).count();
        self.metrics.fast_view_hits.inc_by(hits as u64);
        let misses: Vec<(usize, i64, String, Option<Vec<u8>>)> = loaded
            .iter()
            .enumerate()
            .filter(|(slot, _)| out[*slot].is_none())
            .map(|(slot, email)| {
                (
                    slot,
                    email.meta.id,
                    email.meta.blob_id.clone(),
                    email.raw.clone(),
                )
            })
            .collect();
        if !misses.is_empty() {
            self.metrics.fast_view_misses.inc_by(misses.len() as u64);
            let computed: Vec<(usize, i64, Result<FastView, LoadError>)> =
                futures::stream::iter(misses)
                    .map(|(slot, id, blob_id, raw)| async move {
                        let view = self.compute_fast_view(account, blob_id, raw).await;
                        (slot, id, view)
                    })
                    .buffer_unordered(MISS_CONCURRENCY)
                    .collect()
                    .await;
            let mut rows = Vec::with_capacity(computed.len());
            for (slot, id, view) in computed {
                let view = view?;
                self.fast_views.insert(id, view.clone()).await;
                out[slot] = Some(view.clone());
                rows.push((id, view));
            }
            self.store.put_fast_views(&rows).await?;
        }
        Ok(out.into_iter().map(Option::unwrap_or_default).collect())
    }

    /// Computes one projection row from the full message (the miss path),
    /// reading the blob unless the call already loaded it; parsed on the
    /// work pool. A missing or corrupt blob is an error, never a projection
    /// of nothing.
    async fn compute_fast_view(
        &self,
        account: i64,
        blob_id: String,
        raw: Option<Vec<u8>>,
    ) -> Result<FastView, LoadError> {
        let raw = match raw {
            Some(raw) => raw,
            None => {
                let raw = checked(&blob_id, self.blobs.get(&blob_id).await)?;
                self.metrics.count_blob_read(raw.len());
                raw
            }
        };
        self.metrics.count_parse("full");
        Ok(self
            .work
            .run(account, move || FastView::compute(&parse_message(&raw)))
            .await)
    }
}

//! Batched loading for Email/get: executes a [`ReadPlan`] for all ids of a
//! call with a fixed number of store queries (never one per id), reading the
//! blob store only for body values (the byte ranges of the parts decoded,
//! [`EmailLoader::load_bodies`]) and at the full level (whole messages).
//!
//! The moka caches hold only immutable data, so several server nodes need
//! no cache invalidation: parsed header blocks, projection rows and part
//! trees, keyed by email id; and metadata snapshots, keyed by account,
//! each the mailboxIds and keywords of emails as they were at one Email
//! state of the account. A snapshot is served only when the store's current
//! Email state is the one it was read at (every change to an email's
//! mailboxIds or keywords advances that state in the same transaction,
//! RFC 8620 §5.1): the statement that reads the state builds the metadata
//! rows only when the state has moved. The caches are bounded in bytes.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use moka::future::Cache;
use rustc_hash::{FxHashMap, FxHashSet};

use super::body::{PartBodies, PartContent, resolve_part, value_parts};
use super::fast_view::FastView;
use super::header::HeaderFields;
use super::message::parse_message;
use super::read_level::{BodyValueFlags, ReadPlan};
use super::structure::BodyStructure;
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

/// How many projection or part-tree misses of one call are computed at once.
const MISS_CONCURRENCY: usize = 4;

/// How many messages' part bodies one call reads at once.
const BODY_READ_CONCURRENCY: usize = 16;

/// A part body to read: its part index, octet range and digest.
type PartRange = (usize, std::ops::Range<u64>, [u8; 16]);

/// The part bodies a body-values read takes, per email: (slot in the
/// loaded emails, blob id, ranges). Planned once from the stored trees, so
/// the octets a caller charges are the octets [`EmailLoader::load_bodies`]
/// reads.
pub struct BodyReads(Vec<(usize, String, Vec<PartRange>)>);

impl BodyReads {
    /// The ranges of the parts whose values `flags` ask for, from the trees
    /// [`EmailLoader::complete`] loaded.
    pub fn plan(loaded: &[LoadedEmail], flags: BodyValueFlags) -> Self {
        let reads = loaded
            .iter()
            .enumerate()
            .filter_map(|(slot, email)| {
                let tree = email.structure.as_deref()?;
                let lists = tree.partition();
                let ranges: Vec<_> = value_parts(tree.root()?, &lists, flags)
                    .into_iter()
                    .filter_map(|part| {
                        let (range, digest) = part.stored_range()?;
                        Some((part.index(), range, digest))
                    })
                    .collect();
                Some((slot, email.meta.blob_id.clone(), ranges))
            })
            .collect();
        Self(reads)
    }

    /// The octets these reads take.
    pub fn octets(&self) -> u64 {
        self.0
            .iter()
            .flat_map(|(_, _, ranges)| ranges.iter().map(|(_, range, _)| range.end - range.start))
            .fold(0u64, u64::saturating_add)
    }
}

/// One email with the sources its call's plan asked for.
pub struct LoadedEmail {
    /// Shared with the account's metadata snapshot: a call copies none.
    pub meta: Arc<EmailMeta>,
    /// The header block split into fields (header level).
    pub header: Option<Arc<HeaderFields>>,
    /// The projection row (fast-view level).
    pub fast_view: Option<FastView>,
    /// The stored part tree (structure level); its root part carries its
    /// header octets when the plan asked for part headers.
    pub structure: Option<Arc<BodyStructure>>,
    /// The raw bodies of the parts whose values are asked (body-values level).
    pub bodies: Option<PartBodies>,
    /// The raw message (full level); the caller parses it once.
    pub raw: Option<Vec<u8>>,
}

/// A cache keyed by email id holding at most `capacity` bytes, each entry
/// weighing what `weigh` says.
fn weighed<V: Clone + Send + Sync + 'static>(
    capacity: u64,
    weigh: impl Fn(&V) -> u32 + Send + Sync + 'static,
) -> Cache<i64, V> {
    Cache::builder()
        .max_capacity(capacity)
        .weigher(move |_: &i64, value: &V| weigh(value))
        .build()
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
    /// Part trees, about 1 KiB per message of real mail: 64 MiB by default.
    pub structure_bytes: u64,
    /// Metadata snapshots, one per account, about 250 octets per message
    /// held: 64 MiB by default, about 250,000 messages (the newest 30 of
    /// 8,000 mailboxes).
    pub metadata_bytes: u64,
    /// The list view's texts per account (`jmap::mail::email::render_text::ListTexts`),
    /// about 600 octets per message of real mail: 64 MiB by default, about
    /// 100,000 messages.
    pub list_text_bytes: u64,
}

impl Default for CacheSizes {
    fn default() -> Self {
        Self {
            header_bytes: 256 << 20,
            fast_view_bytes: 32 << 20,
            structure_bytes: 64 << 20,
            metadata_bytes: 64 << 20,
            list_text_bytes: 64 << 20,
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
    structures: Cache<i64, Arc<BodyStructure>>,
    /// account → (Email state, metadata of emails read at that state).
    metas: Cache<i64, Arc<Snapshot>>,
    work: Arc<WorkPool>,
}

/// The metadata of an account's emails as read at one Email state: what
/// calls at that state read again (a list view asks for the same page
/// again and again). Immutable: rows read later at the same state make a
/// new snapshot with them added, up to [`SNAPSHOT_EMAILS`].
struct Snapshot {
    state: i64,
    metas: FxHashMap<i64, Arc<EmailMeta>>,
    /// Octets held, for the cache's bound ([`Snapshot::new`]).
    weight: u32,
}

/// The most emails one account's snapshot holds: a few pages of a list
/// view and the emails opened from them; a call that would add more starts
/// a new snapshot with its own rows.
const SNAPSHOT_EMAILS: usize = 1_000;

impl Snapshot {
    /// A snapshot of `metas` at `state`, weighed: the `Arc` and the map
    /// (128), moka's entry (about 128: key, entry info, its nodes in the
    /// access and write orders), and per email its fixed fields and map
    /// slot (128) and heap parts (blob id, mailbox ids, keywords).
    fn new(state: i64, metas: FxHashMap<i64, Arc<EmailMeta>>) -> Self {
        let heap: usize = metas
            .values()
            .map(|meta| {
                let keywords: usize = meta.keywords.iter().map(|k| k.len() + 24).sum();
                128 + meta.blob_id.len() + 8 * meta.mailbox_ids.len() + keywords
            })
            .sum();
        let weight = (256 + heap).min(u32::MAX as usize) as u32;
        Self {
            state,
            metas,
            weight,
        }
    }

    /// The metadata of each of `ids` (each once), if the snapshot holds all.
    fn all_of(&self, ids: &[i64]) -> Option<Vec<Arc<EmailMeta>>> {
        // Usually distinct already (Email/get's are): told by sorting a
        // copy, without hashing.
        let mut sorted = ids.to_vec();
        sorted.sort_unstable();
        if sorted.windows(2).all(|pair| pair[0] != pair[1]) {
            return ids.iter().map(|id| self.metas.get(id).cloned()).collect();
        }
        let mut seen = FxHashSet::with_capacity_and_hasher(ids.len(), Default::default());
        ids.iter()
            .filter(|id| seen.insert(**id))
            .map(|id| self.metas.get(id).cloned())
            .collect()
    }
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
        let headers = weighed(sizes.header_bytes, |fields: &Arc<HeaderFields>| {
            fields.weight().min(u32::MAX as usize) as u32
        });
        let fast_views = weighed(sizes.fast_view_bytes, |view: &FastView| {
            (view.preview.len() + 48) as u32
        });
        let structures = weighed(sizes.structure_bytes, |tree: &Arc<BodyStructure>| {
            tree.weight().min(u32::MAX as usize) as u32
        });
        let metas = weighed(sizes.metadata_bytes, |snapshot: &Arc<Snapshot>| {
            snapshot.weight
        });
        Self {
            store,
            blobs,
            metrics,
            headers,
            fast_views,
            structures,
            metas,
            work,
        }
    }

    /// Sets the cache gauges of [`Metrics`] (`fastview_cache_entries`,
    /// `fastview_cache_bytes`) to what each cache holds now.
    pub async fn report_caches(&self) {
        let metrics = &self.metrics;
        metrics.report_cache("header", &self.headers).await;
        metrics.report_cache("fast_view", &self.fast_views).await;
        metrics.report_cache("structure", &self.structures).await;
        metrics.report_cache("metadata", &self.metas).await;
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
        let (metas, email_state) = self.metas_and_state(account, ids).await?;
        let loaded = metas
            .into_iter()
            .map(|meta| LoadedEmail {
                meta,
                header: None,
                fast_view: None,
                structure: None,
                bodies: None,
                raw: None,
            })
            .collect();
        Ok((loaded, email_state))
    }

    /// The account's Email state now: `known` while nothing changed (on
    /// SQLite with hot readers, told without a read while nothing was
    /// committed at all). What a caller holding text rendered at `known`
    /// asks before answering from it (issue 20).
    pub async fn email_state(&self, account: i64, known: i64) -> Result<i64, LoadError> {
        let (_, state) = self
            .store
            .email_meta_unless_state(account, &[], Some(known))
            .await?;
        Ok(state)
    }

    /// The metadata of the ids in the account (each once) and its Email
    /// state, in one statement: when the account's snapshot holds every id,
    /// the statement reads the rows only if the snapshot's state is no
    /// longer the account's (a hit reads one row, the state); rows read
    /// join the snapshot at the state read with them (one cache entry per
    /// account: a call looks up one entry, not one per id).
    async fn metas_and_state(
        &self,
        account: i64,
        ids: &[i64],
    ) -> Result<(Vec<Arc<EmailMeta>>, i64), LoadError> {
        let snapshot = self.metas.get(&account).await;
        let held = snapshot
            .as_ref()
            .and_then(|snapshot| Some((snapshot.state, snapshot.all_of(ids)?)));
        let known = held.as_ref().map(|(state, _)| *state);
        let (rows, state) = self
            .store
            .email_meta_unless_state(account, ids, known)
            .await?;
        let Some(metas) = rows else {
            self.metrics.count_snapshot("hit");
            let (_, metas) = held.unwrap_or_default();
            return Ok((metas, state));
        };
        let metas: Vec<Arc<EmailMeta>> = metas.into_iter().map(Arc::new).collect();
        self.metrics
            .count_snapshot(if known.is_some() { "stale" } else { "miss" });
        let mut kept = match snapshot {
            // Rows it holds already (a call naming an id the account does
            // not have): nothing to add, nothing copied.
            Some(snapshot)
                if snapshot.state == state
                    && metas
                        .iter()
                        .all(|meta| snapshot.metas.contains_key(&meta.id)) =>
            {
                return Ok((metas, state));
            }
            Some(snapshot)
                if snapshot.state == state
                    && snapshot.metas.len() + metas.len() <= SNAPSHOT_EMAILS =>
            {
                snapshot.metas.clone()
            }
            _ => FxHashMap::with_capacity_and_hasher(metas.len(), Default::default()),
        };
        if metas.len() <= SNAPSHOT_EMAILS {
            kept.extend(metas.iter().map(|meta| (meta.id, meta.clone())));
            let snapshot = Arc::new(Snapshot::new(state, kept));
            self.metas.insert(account, snapshot).await;
        }
        Ok((metas, state))
    }

    /// The rest of [`EmailLoader::load`]: what the plan's level needs of
    /// emails whose metadata [`EmailLoader::load_meta`] read, but the part
    /// bodies of the body-values level: a caller weighs them
    /// ([`EmailLoader::body_octets`]) and reads them ([`EmailLoader::load_bodies`]).
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
        // The header blocks and the projection rows are independent reads:
        // on a cache miss both go to the database at once (on PostgreSQL a
        // call waits for one round trip instead of two).
        let (headers, views) = futures::try_join!(
            async {
                if plan.header {
                    return Ok(Some(self.load_headers(account, &found).await?));
                }
                Ok::<_, LoadError>(None)
            },
            async {
                if plan.fast_view {
                    return Ok(Some(self.load_fast_views(account, loaded).await?));
                }
                Ok(None)
            },
        )?;
        if let Some(headers) = headers {
            for (email, header) in loaded.iter_mut().zip(headers) {
                email.header = header;
            }
        }
        if plan.structure {
            let trees = self.load_structures(account, loaded).await?;
            for (email, tree) in loaded.iter_mut().zip(trees) {
                email.structure = Some(match (&email.header, plan.part_headers) {
                    (Some(header), true) if tree.needs_header_block() => {
                        Arc::new(tree.with_header_block(header.block()))
                    }
                    _ => tree,
                });
            }
        }
        if let Some(views) = views {
            for (email, view) in loaded.iter_mut().zip(views) {
                email.fast_view = Some(view);
            }
        }
        Ok(())
    }

    /// Reads the raw bodies of the parts `reads` names
    /// ([`BodyReads::plan`], weighed before by [`BodyReads::octets`]): byte
    /// ranges of each message, checked against the digests of its stored
    /// tree; nothing else of the message. A missing blob, or a range that is
    /// past its end or does not match, fails the load.
    pub async fn load_bodies(
        &self,
        loaded: &mut [LoadedEmail],
        reads: BodyReads,
    ) -> Result<(), LoadError> {
        // Empty ranges are not read; the rest of every message in one call
        // of the blob store.
        let mut wanted = Vec::with_capacity(reads.0.len());
        let mut asked = Vec::with_capacity(reads.0.len());
        for (slot, blob_id, ranges) in reads.0 {
            let mut bodies = PartBodies::default();
            let (empty, ranges): (Vec<_>, Vec<_>) = ranges
                .into_iter()
                .partition(|(_, range, _)| range.is_empty());
            for (index, _, _) in empty {
                bodies.insert(index, bytes::Bytes::new());
            }
            if ranges.is_empty() {
                loaded[slot].bodies = Some(bodies);
                continue;
            }
            let read_ranges = ranges
                .iter()
                .map(|(_, range, digest)| (range.clone(), *digest))
                .collect();
            asked.push((blob_id.clone(), read_ranges));
            wanted.push((slot, blob_id, ranges, bodies));
        }
        let read = self.blobs.get_ranges_of(asked, BODY_READ_CONCURRENCY).await;
        for ((slot, blob_id, ranges, mut bodies), result) in wanted.into_iter().zip(read) {
            let read = result.map_err(|error| LoadError::Blob { blob_id, error })?;
            for ((index, _, _), body) in ranges.into_iter().zip(read) {
                bodies.insert(index, body);
            }
            if bodies.octets() > 0 {
                self.metrics.count_blob_read(bodies.octets());
            }
            loaded[slot].bodies = Some(bodies);
        }
        Ok(())
    }

    /// Stored part trees in the order of `loaded`: from the cache, the
    /// store, or (an email stored before trees were, or whose tree does not
    /// decode) computed from the whole message on the work pool, served and
    /// written back.
    async fn load_structures(
        &self,
        account: i64,
        loaded: &[LoadedEmail],
    ) -> Result<Vec<Arc<BodyStructure>>, LoadError> {
        let (mut out, uncached) = cached_entries(&self.structures, loaded).await;
        if !uncached.is_empty() {
            let slots = slots_by_id(loaded);
            for (id, stored) in self.store.body_structures(account, &uncached).await? {
                let Some(tree) = BodyStructure::decode(&stored) else {
                    continue;
                };
                let tree = Arc::new(tree);
                self.structures.insert(id, tree.clone()).await;
                if let Some(slot) = slots.get(&id) {
                    out[*slot] = Some(tree);
                }
            }
        }
        let misses: Vec<(usize, i64, String)> = loaded
            .iter()
            .enumerate()
            .filter(|(slot, _)| out[*slot].is_none())
            .map(|(slot, email)| (slot, email.meta.id, email.meta.blob_id.clone()))
            .collect();
        if !misses.is_empty() {
            let computed: Vec<(usize, i64, Result<BodyStructure, LoadError>)> =
                futures::stream::iter(misses)
                    .map(|(slot, id, blob_id)| async move {
                        (slot, id, self.compute_structure(account, blob_id).await)
                    })
                    .buffer_unordered(MISS_CONCURRENCY)
                    .collect()
                    .await;
            let mut rows = Vec::with_capacity(computed.len());
            for (slot, id, tree) in computed {
                let tree = Arc::new(tree?);
                rows.push((id, tree.encode()));
                self.structures.insert(id, tree.clone()).await;
                out[slot] = Some(tree);
            }
            self.store.put_body_structures(&rows).await?;
        }
        Ok(out.into_iter().flatten().collect())
    }

    /// The content of part `path` of message blob `blob_id` of the account,
    /// for download (`{blobId}_{path}`, RFC 8621 §4.1.4): through an email's
    /// stored tree when one has it, reading only the part's range (checked
    /// against its digest); else (an upload, or a message stored before
    /// trees were) from the whole blob, checked against its id. A path into
    /// an attached message (`3_2`) continues in the decoded part. `Ok(None)`
    /// for no such part or a multipart part.
    pub async fn part_content(
        &self,
        account: i64,
        blob_id: &str,
        path: &str,
    ) -> Result<Option<PartContent>, LoadError> {
        let (first, rest) = path
            .split_once('_')
            .map_or((path, None), |(a, b)| (a, Some(b)));
        let stored = self.store.body_structure_of_blob(account, blob_id).await?;
        let tree = stored.and_then(|(_, stored)| BodyStructure::decode(&stored));
        let content = match tree {
            Some(tree) => {
                let Some(leaf) = tree.leaf(first) else {
                    return Ok(None);
                };
                let Some((range, digest)) = leaf.stored_range() else {
                    return Ok(None);
                };
                let body = if range.is_empty() {
                    bytes::Bytes::new()
                } else {
                    let read = self.blobs.get_ranges(blob_id, &[(range, digest)]).await;
                    let read = read.map_err(|error| LoadError::Blob {
                        blob_id: blob_id.to_string(),
                        error,
                    })?;
                    read.into_iter().next().unwrap_or_default()
                };
                self.metrics.count_blob_read(body.len());
                leaf.content(&body)
            }
            None => {
                let raw = checked(blob_id, self.blobs.get(blob_id).await)?;
                self.metrics.count_blob_read(raw.len());
                self.metrics.count_parse("full");
                let first = first.to_string();
                let found = self
                    .work
                    .run(account, move || resolve_part(&raw, &first))
                    .await;
                match found {
                    Some(content) => content,
                    None => return Ok(None),
                }
            }
        };
        match rest {
            None => Ok(Some(content)),
            Some(rest) => {
                self.metrics.count_parse("full");
                let rest = rest.to_string();
                let bytes = content.bytes;
                Ok(self
                    .work
                    .run(account, move || resolve_part(&bytes, &rest))
                    .await)
            }
        }
    }

    /// The part tree of a message stored without one: the whole blob read
    /// (checked) and parsed on the work pool.
    async fn compute_structure(
        &self,
        account: i64,
        blob_id: String,
    ) -> Result<BodyStructure, LoadError> {
        let raw = checked(&blob_id, self.blobs.get(&blob_id).await)?;
        self.metrics.count_blob_read(raw.len());
        self.metrics.count_parse("full");
        Ok(self
            .work
            .run(account, move || {
                BodyStructure::of_message(&parse_message(&raw))
            })
            .await)
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
        let (mut out, uncached) = cached_entries(&self.fast_views, loaded).await;
        if !uncached.is_empty() {
            let slots = slots_by_id(loaded);
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

/// Each email's entry in `cache` (`None` where it has none), and the ids of
/// the emails it has none for.
async fn cached_entries<V: Clone + Send + Sync + 'static>(
    cache: &Cache<i64, V>,
    loaded: &[LoadedEmail],
) -> (Vec<Option<V>>, Vec<i64>) {
    let mut out = Vec::with_capacity(loaded.len());
    let mut uncached = Vec::new();
    for email in loaded {
        let cached = cache.get(&email.meta.id).await;
        if cached.is_none() {
            uncached.push(email.meta.id);
        }
        out.push(cached);
    }
    (out, uncached)
}

/// The position of each email in `loaded`, by its id.
fn slots_by_id(loaded: &[LoadedEmail]) -> HashMap<i64, usize> {
    loaded
        .iter()
        .enumerate()
        .map(|(i, e)| (e.meta.id, i))
        .collect()
}

//! The blob garbage collector: deletes the blobs nothing refers to any more.
//!
//! Blobs are content-addressed and shared between accounts, so a blob is
//! deleted only when no email of any account and no upload grant
//! (`account_blobs`) refers to it. What becomes unreferenced:
//!
//! - the message of a destroyed email (Email/set destroy, Mailbox/set
//!   destroy with `onDestroyRemoveEmails`);
//! - the mail and uploads of a removed account (`fastview account remove`
//!   hands them to [`delete_unreferenced`] at once);
//! - an upload nobody imported: its grant expires after
//!   [`GcOptions::upload_ttl`] (24 h by default; RFC 8620 §6.1 asks that an
//!   unused upload be kept at least an hour) — [`Store::expire_uploads`];
//! - a staging object of an upload that never finished (after the same TTL).
//!
//! **Races.** A writer may start referring to a blob while the collector
//! decides to delete it (an import of the same bytes into another account,
//! an upload). Deletion is therefore two-phase: the collector moves the blob
//! aside ([`BlobStore::set_aside`]), then asks the database again; a blob
//! referred to by then is put back ([`BlobStore::restore`]), any other one is
//! deleted ([`BlobStore::purge`]). A writer commits its reference and then
//! makes sure the blob is in place (an ingest checks after its commit and
//! writes it again, [`super::ingest::store_batch`]; an upload renames its
//! staging object into place after its grant commits). Whichever order the
//! two interleave in, a committed reference ends with its blob in place: a
//! commit before the collector's second look is seen by it, one after it
//! is followed by the writer's own check, which comes after the blob was set
//! aside. Blobs left under `deleting/` by a collector that stopped between
//! the phases are finished by the next run.

use std::collections::HashSet;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};

use super::work::spawn_every;
use crate::blob::{BlobError, BlobStore, DELETING_PREFIX, STAGING_PREFIX};
use crate::store::{Store, StoreError};

/// Blob ids asked about in one database query.
const CHECK_BATCH: usize = 1000;
/// Blob store operations of one run in flight at once.
const CONCURRENCY: usize = 16;

/// How the collector treats uploads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcOptions {
    /// How long an upload that no email uses is kept (RFC 8620 §6.1: at
    /// least an hour). Default 24 hours.
    pub upload_ttl: Duration,
}

impl Default for GcOptions {
    fn default() -> Self {
        Self {
            upload_ttl: Duration::from_secs(24 * 3600),
        }
    }
}

/// What one run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Upload grants expired (unused for longer than the TTL).
    pub uploads_expired: u64,
    /// Blobs in the store looked at.
    pub blobs_scanned: u64,
    /// Blobs deleted because nothing referred to them.
    pub blobs_deleted: u64,
    /// Staging objects of abandoned uploads deleted.
    pub staging_deleted: u64,
}

/// Why a maintenance run stopped: a collection here, or a check
/// (`fsck.rs`, for which a broken blob is a finding, not an error).
#[derive(Debug, thiserror::Error)]
pub enum MaintenanceError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Blob(#[from] BlobError),
}

/// One full run: expires unused uploads, then deletes every blob of the
/// store that nothing refers to, abandoned staging objects, and whatever
/// an interrupted run left set aside.
pub async fn collect(
    store: &dyn Store,
    blobs: &BlobStore,
    options: GcOptions,
) -> Result<GcReport, MaintenanceError> {
    let now = chrono::Utc::now().timestamp();
    let ttl = i64::try_from(options.upload_ttl.as_secs()).unwrap_or(i64::MAX);
    let mut report = GcReport {
        uploads_expired: store.expire_uploads(now.saturating_sub(ttl)).await?,
        ..GcReport::default()
    };
    let left_aside: Vec<String> = blobs
        .list(Some(DELETING_PREFIX))
        .await?
        .into_iter()
        .map(|listed| listed.name)
        .filter(|name| crate::blob::is_blob_id(name))
        .collect();
    finish_set_aside(store, blobs, &left_aside).await?;
    let listed = blobs.list(None).await?;
    report.blobs_scanned = listed.len() as u64;
    for chunk in listed.chunks(CHECK_BATCH) {
        let ids: Vec<String> = chunk.iter().map(|listed| listed.name.clone()).collect();
        report.blobs_deleted += delete_unreferenced(store, blobs, &ids).await?;
    }
    let stale: Vec<String> = blobs
        .list(Some(STAGING_PREFIX))
        .await?
        .into_iter()
        .filter(|listed| listed.modified < now.saturating_sub(ttl))
        .map(|listed| listed.name)
        .collect();
    futures::stream::iter(stale.clone())
        .map(|name| async move { blobs.delete_staged(&name).await })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    report.staging_deleted = stale.len() as u64;
    Ok(report)
}

/// Deletes those of `blob_ids` that no email or grant of any account refers
/// to, race-free against writers (see the module doc). Returns how many
/// were deleted.
pub async fn delete_unreferenced(
    store: &dyn Store,
    blobs: &BlobStore,
    blob_ids: &[String],
) -> Result<u64, MaintenanceError> {
    let mut deleted = 0;
    for chunk in blob_ids.chunks(CHECK_BATCH) {
        let referenced = store.referenced_blobs(chunk).await?;
        let candidates: Vec<String> = chunk
            .iter()
            .filter(|id| !referenced.contains(*id) && crate::blob::is_blob_id(id))
            .cloned()
            .collect();
        let moved: Vec<String> = futures::stream::iter(candidates)
            .map(|id| async move { Ok::<_, BlobError>(blobs.set_aside(&id).await?.then_some(id)) })
            .buffer_unordered(CONCURRENCY)
            .try_filter_map(|id| async move { Ok(id) })
            .try_collect()
            .await?;
        deleted += finish_set_aside(store, blobs, &moved).await?;
    }
    Ok(deleted)
}

/// The second phase: asks the database again about blobs set aside, puts
/// back those referred to and purges the rest. Returns how many were purged.
async fn finish_set_aside(
    store: &dyn Store,
    blobs: &BlobStore,
    set_aside: &[String],
) -> Result<u64, MaintenanceError> {
    let mut purged = 0;
    for chunk in set_aside.chunks(CHECK_BATCH) {
        let referenced: HashSet<String> = store.referenced_blobs(chunk).await?;
        futures::stream::iter(chunk.to_vec())
            .map(|id| {
                let keep = referenced.contains(&id);
                async move {
                    if keep {
                        blobs.restore(&id).await
                    } else {
                        blobs.purge(&id).await
                    }
                }
            })
            .buffer_unordered(CONCURRENCY)
            .try_collect::<Vec<()>>()
            .await?;
        purged += chunk.iter().filter(|id| !referenced.contains(*id)).count() as u64;
    }
    Ok(purged)
}

/// Runs [`collect`] every `every` until the process ends (`fastview serve`),
/// logging each run's report, or its error (the next run tries again).
pub fn spawn_periodic(
    store: std::sync::Arc<dyn Store>,
    blobs: std::sync::Arc<BlobStore>,
    options: GcOptions,
    every: Duration,
) -> tokio::task::JoinHandle<()> {
    spawn_every(every, move || {
        let (store, blobs) = (store.clone(), blobs.clone());
        async move {
            match collect(store.as_ref(), &blobs, options).await {
                Ok(report) => tracing::info!(?report, "blob garbage collection"),
                Err(error) => tracing::warn!(%error, "blob garbage collection failed"),
            }
        }
    })
}

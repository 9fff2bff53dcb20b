//! `fastview fsck`: checks every blob the database refers to (emails and
//! upload grants of every account) — that it is in the blob store and that
//! its bytes hash to its id — and reports the broken ones. A broken blob is
//! repaired by writing the right bytes again: an upload or an import of the
//! original message replaces a missing or corrupt copy
//! ([`crate::blob::BlobStore::put_with_id`], [`crate::blob::StagedBlob::commit`]).

use futures::StreamExt;

use super::gc::MaintenanceError;
use crate::blob::{BlobError, BlobStore};
use crate::store::Store;

/// Blob ids read from the database at once.
const PAGE: i64 = 500;
/// Blobs read and hashed at once (each is held in memory while it is checked).
const CONCURRENCY: usize = 4;

/// What a check found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FsckReport {
    /// Blobs checked.
    pub checked: u64,
    /// Referred to, not in the blob store.
    pub missing: Vec<String>,
    /// In the blob store, with bytes that do not hash to the id.
    pub corrupt: Vec<String>,
}

impl FsckReport {
    /// Whether every blob was present and whole.
    pub fn is_clean(&self) -> bool {
        self.missing.is_empty() && self.corrupt.is_empty()
    }
}

/// The state of one blob.
enum Found {
    Whole,
    Missing,
    Corrupt,
}

/// Checks every referenced blob, `CONCURRENCY` at a time; `progress` is
/// called with the running count after each page.
pub async fn check(
    store: &dyn Store,
    blobs: &BlobStore,
    mut progress: impl FnMut(u64),
) -> Result<FsckReport, MaintenanceError> {
    let mut report = FsckReport::default();
    let mut after = String::new();
    loop {
        let page = store.referenced_blob_page(&after, PAGE).await?;
        let Some(last) = page.last().cloned() else {
            break;
        };
        let found: Vec<(String, Result<Found, BlobError>)> = futures::stream::iter(page)
            .map(|id| async move {
                let found = match blobs.get(&id).await {
                    Ok(Some(_)) => Ok(Found::Whole),
                    Ok(None) => Ok(Found::Missing),
                    Err(BlobError::Corrupt(_)) => Ok(Found::Corrupt),
                    Err(error) => Err(error),
                };
                (id, found)
            })
            .buffered(CONCURRENCY)
            .collect()
            .await;
        let mut missing = Vec::new();
        for (id, found) in found {
            report.checked += 1;
            match found? {
                Found::Whole => {}
                Found::Missing => missing.push(id),
                Found::Corrupt => report.corrupt.push(id),
            }
        }
        // Behind an IMAP upstream the cache evicts messages on purpose.
        let names: Vec<&str> = missing.iter().map(String::as_str).collect();
        let evicted: std::collections::HashSet<String> = if names.is_empty() {
            Default::default()
        } else {
            store.evicted_among(&names).await?.into_iter().collect()
        };
        report
            .missing
            .extend(missing.into_iter().filter(|id| !evicted.contains(id)));
        progress(report.checked);
        after = last;
    }
    Ok(report)
}

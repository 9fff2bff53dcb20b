//! The blob store: raw messages and uploads, content-addressed, on a local
//! disk or in S3, through the [`object_store`] crate.
//!
//! A blob's id is the lowercase hex SHA-256 of its bytes; it lives at the key
//! `{id[0..2]}/{id[2..4]}/{id}` under the store's root, so no local directory
//! grows past a few hundred entries (a flat directory degrades past ~10k
//! files) and data dirs written by earlier versions keep working.
//!
//! - Local (the default, `{data-dir}/blobs`, or `--blob-url file:///path` or a
//!   plain path): `object_store`'s `LocalFileSystem`, which writes a staging
//!   file beside the target and renames it into place, so a blob is either
//!   absent or complete.
//! - S3 (`--blob-url s3://bucket/prefix`): `AmazonS3` configured from the
//!   usual `AWS_*` environment variables (`AWS_ACCESS_KEY_ID`,
//!   `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT_URL` for an
//!   S3-compatible server, `AWS_ALLOW_HTTP=true` for a plain-HTTP one), so
//!   every node of a deployment shares one store.
//!
//! One code path serves both: blobs are read only at the full read level, on
//! download, by Email/import and by the tools, never by the hot metadata,
//! header or fast-view levels.
//!
//! - **Reads are checked.** Every whole read ([`BlobStore::get`],
//!   [`BlobStore::read`]) hashes the bytes: content that does not hash to its
//!   id is [`BlobError::Corrupt`], never served; a blob the database refers to
//!   that is absent is [`BlobError::Missing`] ([`BlobStore::read`]).
//! - **Writes repair.** [`BlobStore::put_with_id`] leaves a blob alone only
//!   when the stored bytes are the same; a missing, truncated or altered copy
//!   is replaced. An upload ([`BlobStore::begin_upload`]) streams into a
//!   staging object under `staging/` while it is hashed, and
//!   [`StagedBlob::commit`] renames it over whatever is at its id.
//! - **Deletion** is two-phase for the garbage collector
//!   ([`crate::mail::gc`]): [`BlobStore::set_aside`] moves a blob to
//!   `deleting/{id}`, and after the collector has re-checked the database it
//!   either [`BlobStore::purge`]s or [`BlobStore::restore`]s it. Writers that
//!   reference a blob check after their commit that it is still there
//!   ([`BlobStore::ensure_present`]).

use std::fmt;
use std::path::Path as FsPath;
use std::sync::Arc;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::prefix::PrefixStore;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload, WriteMultipart};
use sha2::{Digest, Sha256};

/// How many blobs one batch read ([`BlobStore::get_many`]) fetches at once.
const READ_CONCURRENCY: usize = 16;

/// Blobs at least this large are hashed off the async workers.
const HASH_INLINE_BYTES: usize = 256 << 10;

/// Parts of a streaming upload to S3 (its least part size).
const S3_PART_BYTES: usize = 5 << 20;
/// Parts of one S3 upload being written at once.
const PARTS_IN_FLIGHT: usize = 2;

/// Where uploads are written before they are named by their hash.
pub const STAGING_PREFIX: &str = "staging";
/// Where the garbage collector sets a blob aside before deleting it.
pub const DELETING_PREFIX: &str = "deleting";

/// Hex SHA-256 of `bytes`: the blobId of a message or upload (RFC 8620 §6).
pub fn blob_id_of(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// An octet range of a blob and the digest ([`range_digest`]) its octets
/// must have: what a stored part tree knows of a part's body.
pub type CheckedRange = (std::ops::Range<u64>, [u8; 16]);

/// The digest a range of a blob is checked against: the first 16 octets of
/// the SHA-256 of `bytes`. Taken of each leaf body at ingest
/// ([`crate::mail::structure`]) and checked by [`BlobStore::get_ranges`].
pub fn range_digest(bytes: &[u8]) -> [u8; 16] {
    let digest = Sha256::digest(bytes);
    let mut out = [0u8; 16];
    out.copy_from_slice(&digest[..16]);
    out
}

/// Whether `bytes`, read for `range`, are its octets: all of them, with
/// its digest.
fn range_intact(bytes: &[u8], (range, digest): &CheckedRange) -> bool {
    bytes.len() as u64 == range.end.saturating_sub(range.start) && range_digest(bytes) == *digest
}

/// The ranges of blob `blob_id`, the local file at `path`, each checked
/// ([`range_intact`]): `None` when the file is not there, for the caller
/// to read it the way that can refill it.
fn read_local_ranges(
    blob_id: &str,
    path: &std::path::Path,
    ranges: &[CheckedRange],
) -> Option<Result<Vec<Bytes>, BlobError>> {
    use std::os::unix::fs::FileExt;
    let corrupt = || Some(Err(BlobError::Corrupt(blob_id.to_string())));
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return None,
        Err(error) => return Some(Err(error.into())),
    };
    let mut out = Vec::with_capacity(ranges.len());
    for checked in ranges {
        let range = &checked.0;
        let Ok(length) = usize::try_from(range.end.saturating_sub(range.start)) else {
            return corrupt();
        };
        let mut bytes = vec![0u8; length];
        match file.read_exact_at(&mut bytes, range.start) {
            Ok(()) if range_intact(&bytes, checked) => out.push(Bytes::from(bytes)),
            // Other octets than the tree's, or fewer (truncated).
            Ok(()) => return corrupt(),
            Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => return corrupt(),
            Err(error) => return Some(Err(error.into())),
        }
    }
    Some(Ok(out))
}

fn hex(digest: &[u8]) -> String {
    let mut out = String::with_capacity(64);
    for byte in digest {
        use std::fmt::Write;
        let _ = write!(out, "{byte:02x}");
    }
    out
}

/// Whether `blob_id` is a blob id: 64 lowercase hex digits.
pub fn is_blob_id(blob_id: &str) -> bool {
    blob_id.len() == 64
        && blob_id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Errors of the blob store.
#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    /// The blob id is not 64 lowercase hex digits.
    #[error("invalid blob id")]
    InvalidId,
    /// The `--blob-url` could not be understood.
    #[error("unsupported blob URL {0} (expected s3://bucket/prefix, file:///path or a path)")]
    UnsupportedUrl(String),
    /// The local root could not be created.
    #[error("cannot create the blob directory {0}: {1}")]
    Root(String, std::io::Error),
    /// A blob the database refers to is not in the blob store.
    #[error("blob {0} is missing from the blob store")]
    Missing(String),
    /// The stored bytes do not hash to the blob's id (altered or truncated).
    #[error("blob {0} is corrupt: its content does not hash to its id")]
    Corrupt(String),
    /// The backing store failed.
    #[error("blob store: {0}")]
    Backend(#[from] object_store::Error),
    /// Writing a local staging file failed.
    #[error("blob store: {0}")]
    Io(#[from] std::io::Error),
}

impl BlobError {
    /// Whether the store failed because its device is full (`ENOSPC`) or
    /// over a disk quota (`EDQUOT`): the HTTP edge answers 507 for it.
    pub fn is_storage_full(&self) -> bool {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(self);
        while let Some(error) = source {
            if let Some(io) = error.downcast_ref::<std::io::Error>()
                && (io.kind() == std::io::ErrorKind::StorageFull
                    || matches!(io.raw_os_error(), Some(28 | 122)))
            {
                return true;
            }
            source = error.source();
        }
        false
    }
}

/// One object of a store listing ([`BlobStore::list`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// The blob id (or, under `staging/`, the staging name).
    pub name: String,
    /// Unix seconds, UTC.
    pub modified: i64,
}

/// Puts back a blob the database refers to that is absent on purpose: a
/// message the IMAP upstream's bounded cache evicted (ADR 0008), read again
/// from the upstream. Implemented above this module (`proxy::imap::cache`).
#[async_trait::async_trait]
pub trait Refill: Send + Sync {
    /// Puts `blob_id` back in the store when it can; whether it did.
    async fn refill(&self, blob_id: &str) -> bool;
}

/// Content-addressed blobs under one root, local or in S3.
#[derive(Clone)]
pub struct BlobStore {
    inner: Arc<dyn ObjectStore>,
    /// Asked once when a read finds a blob absent (see [`Refill`]); shared
    /// by clones, weak so that it does not keep its owner alive.
    refill: Arc<std::sync::OnceLock<std::sync::Weak<dyn Refill>>>,
    /// `file:///…` or `s3://bucket/prefix`: for messages and logs.
    url: String,
    /// The root directory of a local store: uploads are written to a
    /// staging file there directly. `None` for S3 (multipart uploads).
    local_root: Option<std::path::PathBuf>,
}

impl fmt::Debug for BlobStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlobStore").field("url", &self.url).finish()
    }
}

impl BlobStore {
    /// A blob store in the local directory `root` (created if missing), with
    /// the sharded layout of earlier versions.
    pub fn local(root: impl AsRef<FsPath>) -> Result<Self, BlobError> {
        let root = root.as_ref();
        std::fs::create_dir_all(root)
            .map_err(|e| BlobError::Root(root.display().to_string(), e))?;
        let store = LocalFileSystem::new_with_prefix(root)?;
        let absolute = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
        Ok(Self {
            inner: Arc::new(store),
            url: format!("file://{}", absolute.display()),
            local_root: Some(absolute),
            refill: Arc::default(),
        })
    }

    /// The blob store a `--blob-url` names: `s3://bucket[/prefix]` (AWS
    /// settings from the environment), `file:///path`, or a plain path.
    pub fn open(url: &str) -> Result<Self, BlobError> {
        if let Some(rest) = url.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(BlobError::UnsupportedUrl(url.to_string()));
            }
            let s3 = AmazonS3Builder::from_env()
                .with_bucket_name(bucket)
                .build()?;
            let prefix = prefix.trim_matches('/');
            let inner: Arc<dyn ObjectStore> = if prefix.is_empty() {
                Arc::new(s3)
            } else {
                Arc::new(PrefixStore::new(s3, prefix))
            };
            let url = if prefix.is_empty() {
                format!("s3://{bucket}")
            } else {
                format!("s3://{bucket}/{prefix}")
            };
            return Ok(Self {
                inner,
                url,
                local_root: None,
                refill: Arc::default(),
            });
        }
        if let Some(path) = url.strip_prefix("file://") {
            return Self::local(path);
        }
        if url.contains("://") || url.is_empty() {
            return Err(BlobError::UnsupportedUrl(url.to_string()));
        }
        Self::local(url)
    }

    /// Where the blobs live: `file:///…` or `s3://bucket/prefix`.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn key_of(blob_id: &str) -> Option<Path> {
        is_blob_id(blob_id)
            .then(|| Path::from(format!("{}/{}/{blob_id}", &blob_id[0..2], &blob_id[2..4])))
    }

    fn set_aside_key(blob_id: &str) -> Path {
        Path::from(format!("{DELETING_PREFIX}/{blob_id}"))
    }

    /// Stores `bytes` and returns its blob id.
    pub async fn put(&self, bytes: Vec<u8>) -> Result<String, BlobError> {
        let blob_id = blob_id_of(&bytes);
        self.put_with_id(&blob_id, bytes).await?;
        Ok(blob_id)
    }

    /// Stores `bytes` under an id the caller computed with [`blob_id_of`].
    /// Nothing is written when the same bytes are already there; a missing
    /// or different (corrupt) copy is replaced, atomically.
    pub async fn put_with_id(
        &self,
        blob_id: &str,
        bytes: impl Into<PutPayload>,
    ) -> Result<(), BlobError> {
        let key = Self::key_of(blob_id).ok_or(BlobError::InvalidId)?;
        let payload: PutPayload = bytes.into();
        if let Some(stored) = self.fetch(&key).await?
            && stored.len() == payload.content_length()
            && payload
                .iter()
                .scan(0, |offset, part| {
                    let same = stored.get(*offset..*offset + part.len()) == Some(&part[..]);
                    *offset += part.len();
                    Some(same)
                })
                .all(|same| same)
        {
            return Ok(());
        }
        self.inner.put(&key, payload).await?;
        Ok(())
    }

    /// After a commit that refers to `blob_id`: writes the blob again if it
    /// is no longer there (the garbage collector set it aside meanwhile).
    pub async fn ensure_present(
        &self,
        blob_id: &str,
        bytes: impl Into<PutPayload>,
    ) -> Result<(), BlobError> {
        let key = Self::key_of(blob_id).ok_or(BlobError::InvalidId)?;
        if !self.exists_at(&key).await? {
            self.inner.put(&key, bytes.into()).await?;
        }
        Ok(())
    }

    /// Whether the blob is in the store.
    pub async fn exists(&self, blob_id: &str) -> Result<bool, BlobError> {
        match Self::key_of(blob_id) {
            Some(key) => self.exists_at(&key).await,
            None => Ok(false),
        }
    }

    async fn exists_at(&self, key: &Path) -> Result<bool, BlobError> {
        match self.inner.head(key).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(error) => Err(error.into()),
        }
    }

    /// The stored bytes at `key`, unchecked; `None` when absent.
    async fn fetch(&self, key: &Path) -> Result<Option<Vec<u8>>, BlobError> {
        let result = match self.inner.get(key).await {
            Ok(result) => result,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(error) => return Err(error.into()),
        };
        match result.bytes().await {
            Ok(bytes) => Ok(Some(Vec::from(bytes))),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(error) => Err(error.into()),
        }
    }

    /// Reads a whole blob and checks that it hashes to its id; `Ok(None)`
    /// when there is no such blob, [`BlobError::Corrupt`] when its bytes are
    /// not the ones its id names.
    pub async fn get(&self, blob_id: &str) -> Result<Option<Vec<u8>>, BlobError> {
        let Some(key) = Self::key_of(blob_id) else {
            return Ok(None);
        };
        let bytes = match self.fetch(&key).await? {
            Some(bytes) => bytes,
            None if self.refilled(blob_id).await => match self.fetch(&key).await? {
                Some(bytes) => bytes,
                None => return Ok(None),
            },
            None => return Ok(None),
        };
        let (bytes, matches) = hash_matches(bytes, blob_id.to_string()).await;
        if !matches {
            return Err(BlobError::Corrupt(blob_id.to_string()));
        }
        Ok(Some(bytes))
    }

    /// Reads a whole blob that the database refers to: [`BlobError::Missing`]
    /// when it is absent, [`BlobError::Corrupt`] when it does not hash to its id.
    pub async fn read(&self, blob_id: &str) -> Result<Vec<u8>, BlobError> {
        self.get(blob_id)
            .await?
            .ok_or_else(|| BlobError::Missing(blob_id.to_string()))
    }

    /// Reads several blobs at once (a bounded number in flight), in the order
    /// of `blob_ids`, each checked as [`BlobStore::get`] does.
    pub async fn get_many(&self, blob_ids: &[String]) -> Vec<Result<Option<Vec<u8>>, BlobError>> {
        // Owned ids: a future borrowing the iterator's items would not be
        // `Send` for every lifetime, which axum handlers need.
        futures::stream::iter(blob_ids.to_vec())
            .map(|id| async move { self.get(&id).await })
            .buffered(READ_CONCURRENCY)
            .collect()
            .await
    }

    /// Reads octet ranges of a blob, each checked against the digest it was
    /// stored with ([`range_digest`]), in the order given: the parts of a
    /// message a call decodes, without the rest (on S3 one ranged GET per
    /// range, nearby ones coalesced by `object_store`). [`BlobError::Missing`]
    /// when the blob is absent, [`BlobError::Corrupt`] when a range is past
    /// its end or its octets do not match their digest.
    pub async fn get_ranges(
        &self,
        blob_id: &str,
        ranges: &[CheckedRange],
    ) -> Result<Vec<Bytes>, BlobError> {
        let key = Self::key_of(blob_id).ok_or(BlobError::InvalidId)?;
        let wanted: Vec<std::ops::Range<u64>> =
            ranges.iter().map(|(range, _)| range.clone()).collect();
        let mut read = self.inner.get_ranges(&key, &wanted).await;
        if matches!(read, Err(object_store::Error::NotFound { .. })) && self.refilled(blob_id).await
        {
            read = self.inner.get_ranges(&key, &wanted).await;
        }
        let read = match read {
            Ok(read) => read,
            Err(object_store::Error::NotFound { .. }) => {
                return Err(BlobError::Missing(blob_id.to_string()));
            }
            Err(error) => {
                // A range past the end means the blob was truncated.
                let end = wanted.iter().map(|range| range.end).max().unwrap_or(0);
                return match self.inner.head(&key).await {
                    Ok(meta) if meta.size < end => Err(BlobError::Corrupt(blob_id.to_string())),
                    Err(object_store::Error::NotFound { .. }) => {
                        Err(BlobError::Missing(blob_id.to_string()))
                    }
                    _ => Err(error.into()),
                };
            }
        };
        let intact = read.len() == ranges.len()
            && read
                .iter()
                .zip(ranges)
                .all(|(bytes, checked)| range_intact(bytes, checked));
        if !intact {
            return Err(BlobError::Corrupt(blob_id.to_string()));
        }
        Ok(read)
    }

    /// [`BlobStore::get_ranges`] of several blobs at once, the results in
    /// the order of `reads`: the parts one Email/get decodes. On the local
    /// store every range of every blob is read in one blocking task
    /// (positioned reads, each checked against its digest there), one
    /// thread hop per call rather than one per blob; a blob not found
    /// there, and every blob on S3, takes [`BlobStore::get_ranges`]
    /// (`concurrency` at once), which asks the [`Refill`] for a missing one.
    pub async fn get_ranges_of(
        &self,
        reads: Vec<(String, Vec<CheckedRange>)>,
        concurrency: usize,
    ) -> Vec<Result<Vec<Bytes>, BlobError>> {
        // Locally: every blob's file in one blocking task; `None` for one
        // that is not there (or the task failed).
        let local: Vec<Option<Result<Vec<Bytes>, BlobError>>> = match &self.local_root {
            Some(root) => {
                let root = root.clone();
                let reads = reads.clone();
                tokio::task::spawn_blocking(move || {
                    reads
                        .iter()
                        .map(|(blob_id, ranges)| {
                            let key = Self::key_of(blob_id)?;
                            read_local_ranges(blob_id, &root.join(key.as_ref()), ranges)
                        })
                        .collect()
                })
                .await
                .unwrap_or_default()
            }
            None => Vec::new(),
        };
        let local = local.into_iter().chain(std::iter::repeat_with(|| None));
        futures::stream::iter(reads.into_iter().zip(local))
            .map(|((blob_id, ranges), read)| async move {
                match read {
                    Some(read) => read,
                    None => self.get_ranges(&blob_id, &ranges).await,
                }
            })
            .buffered(concurrency.max(1))
            .collect()
            .await
    }

    /// Starts a streaming upload into a staging object; the bytes are hashed
    /// as they are written. Locally they go to a staging file through one
    /// reused buffer; on S3 into a multipart upload, at most
    /// [`PARTS_IN_FLIGHT`] parts of [`S3_PART_BYTES`] in memory.
    pub async fn begin_upload(&self) -> Result<BlobUpload, BlobError> {
        let name = format!(
            "{}-{:016x}",
            chrono::Utc::now().timestamp(),
            rand::random::<u64>()
        );
        let staging = Path::from(format!("{STAGING_PREFIX}/{name}"));
        let sink = match &self.local_root {
            Some(root) => {
                let dir = root.join(STAGING_PREFIX);
                tokio::fs::create_dir_all(&dir).await?;
                let path = dir.join(&name);
                let file = tokio::fs::File::create_new(&path).await?;
                Sink::File(file, path)
            }
            None => {
                let upload = self.inner.put_multipart(&staging).await?;
                Sink::Multipart(WriteMultipart::new_with_chunk_size(upload, S3_PART_BYTES))
            }
        };
        Ok(BlobUpload {
            staged: StagedBlob {
                store: self.clone(),
                staging: Some(staging),
                id: String::new(),
                size: 0,
            },
            sink,
            hasher: Sha256::new(),
        })
    }

    /// Every object under the root's blob shards (`prefix: None`) or under
    /// [`STAGING_PREFIX`] / [`DELETING_PREFIX`], with its modification time.
    /// Objects whose name is not a blob id are skipped in the shards.
    pub async fn list(&self, prefix: Option<&str>) -> Result<Vec<Listed>, BlobError> {
        let under = prefix.map(Path::from);
        let objects: Vec<object_store::ObjectMeta> =
            self.inner.list(under.as_ref()).try_collect().await?;
        Ok(objects
            .into_iter()
            .filter_map(|meta| {
                let parts: Vec<String> = meta
                    .location
                    .parts()
                    .map(|p| p.as_ref().to_string())
                    .collect();
                let name = match (prefix, parts.as_slice()) {
                    (None, [a, b, id]) if is_blob_id(id) && id[0..2] == *a && id[2..4] == *b => {
                        id.clone()
                    }
                    (Some(_), [_, name]) => name.clone(),
                    _ => return None,
                };
                Some(Listed {
                    name,
                    modified: meta.last_modified.timestamp(),
                })
            })
            .collect())
    }

    /// Deletes an object under [`STAGING_PREFIX`] (an abandoned upload).
    pub async fn delete_staged(&self, name: &str) -> Result<(), BlobError> {
        ignore_not_found(
            self.inner
                .delete(&Path::from(format!("{STAGING_PREFIX}/{name}")))
                .await,
        )
    }

    /// Sets what puts back a referred-to blob found absent (once; later
    /// calls are ignored).
    pub fn set_refill(&self, refill: std::sync::Weak<dyn Refill>) {
        let _ = self.refill.set(refill);
    }

    /// Asks the [`Refill`] (if any) to put `blob_id` back.
    async fn refilled(&self, blob_id: &str) -> bool {
        match self.refill.get().and_then(std::sync::Weak::upgrade) {
            Some(refill) => refill.refill(blob_id).await,
            None => false,
        }
    }

    /// Deletes a blob at once, for a cache that evicts it (its bytes can
    /// be had again elsewhere: [`Refill`]).
    pub async fn evict(&self, blob_id: &str) -> Result<(), BlobError> {
        let key = Self::key_of(blob_id).ok_or(BlobError::InvalidId)?;
        ignore_not_found(self.inner.delete(&key).await)
    }

    /// Moves a blob out of its place to `deleting/{id}` (the first phase of
    /// a deletion); `false` when it was not there.
    pub async fn set_aside(&self, blob_id: &str) -> Result<bool, BlobError> {
        let key = Self::key_of(blob_id).ok_or(BlobError::InvalidId)?;
        match self.inner.rename(&key, &Self::set_aside_key(blob_id)).await {
            Ok(()) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(error) => Err(error.into()),
        }
    }

    /// Puts a blob set aside back in place (something referred to it again),
    /// unless a writer already put it back.
    pub async fn restore(&self, blob_id: &str) -> Result<(), BlobError> {
        let key = Self::key_of(blob_id).ok_or(BlobError::InvalidId)?;
        let aside = Self::set_aside_key(blob_id);
        if self.exists_at(&key).await? {
            return ignore_not_found(self.inner.delete(&aside).await);
        }
        ignore_not_found(self.inner.rename(&aside, &key).await)
    }

    /// Deletes a blob set aside (the second phase of a deletion).
    pub async fn purge(&self, blob_id: &str) -> Result<(), BlobError> {
        if !is_blob_id(blob_id) {
            return Err(BlobError::InvalidId);
        }
        ignore_not_found(self.inner.delete(&Self::set_aside_key(blob_id)).await)
    }
}

fn ignore_not_found(result: object_store::Result<()>) -> Result<(), BlobError> {
    match result {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(error) => Err(error.into()),
    }
}

/// Whether `bytes` hash to `blob_id`; large blobs are hashed on the blocking
/// pool, not on an async worker.
async fn hash_matches(bytes: Vec<u8>, blob_id: String) -> (Vec<u8>, bool) {
    if bytes.len() < HASH_INLINE_BYTES {
        let matches = blob_id_of(&bytes) == blob_id;
        return (bytes, matches);
    }
    let (sender, receiver) = tokio::sync::oneshot::channel();
    tokio::task::spawn_blocking(move || {
        let matches = blob_id_of(&bytes) == blob_id;
        let _ = sender.send((bytes, matches));
    });
    receiver.await.unwrap_or((Vec::new(), false))
}

/// A streaming upload in progress ([`BlobStore::begin_upload`]): chunks are
/// hashed and written to a staging object; dropped unfinished, the staging
/// object is removed.
pub struct BlobUpload {
    staged: StagedBlob,
    sink: Sink,
    hasher: Sha256,
}

/// Where an upload's bytes go.
enum Sink {
    /// A local staging file (and its path).
    File(tokio::fs::File, std::path::PathBuf),
    /// An S3 multipart upload.
    Multipart(WriteMultipart),
}

impl BlobUpload {
    /// Appends a chunk (copied: a chunk of a request body is a slice of the
    /// connection's read buffer). On S3, waits while [`PARTS_IN_FLIGHT`]
    /// parts are being written.
    pub async fn write(&mut self, chunk: &[u8]) -> Result<(), BlobError> {
        self.hasher.update(chunk);
        self.staged.size += chunk.len() as u64;
        match &mut self.sink {
            Sink::File(file, _) => {
                use tokio::io::AsyncWriteExt;
                file.write_all(chunk).await?;
            }
            Sink::Multipart(writer) => {
                writer.wait_for_capacity(PARTS_IN_FLIGHT).await?;
                writer.write(chunk);
            }
        }
        Ok(())
    }

    /// Octets written so far.
    pub fn size(&self) -> u64 {
        self.staged.size
    }

    /// Abandons the upload: the parts written are removed (on S3 the
    /// multipart upload is aborted, not left to a lifecycle rule).
    pub async fn abort(self) {
        match self.sink {
            Sink::File(file, path) => {
                drop(file);
                let _ = tokio::fs::remove_file(path).await;
            }
            Sink::Multipart(writer) => {
                let _ = writer.abort().await;
            }
        }
    }

    /// Completes the staging object and names it by its hash.
    pub async fn finish(self) -> Result<StagedBlob, BlobError> {
        let Self {
            mut staged,
            sink,
            hasher,
        } = self;
        match sink {
            Sink::File(mut file, _) => {
                use tokio::io::AsyncWriteExt;
                file.flush().await?;
            }
            Sink::Multipart(writer) => {
                writer.finish().await?;
            }
        }
        staged.id = hex(&hasher.finalize());
        Ok(staged)
    }
}

/// A complete upload in its staging object, named by its SHA-256; moved into
/// place by [`StagedBlob::commit`], removed by [`StagedBlob::discard`] or
/// when dropped.
pub struct StagedBlob {
    store: BlobStore,
    staging: Option<Path>,
    /// The blob id: hex SHA-256 of the bytes.
    pub id: String,
    /// Octets.
    pub size: u64,
}

impl StagedBlob {
    /// Renames the staging object over the blob's place, replacing whatever
    /// is there (so a corrupt copy is repaired by uploading the right bytes).
    pub async fn commit(mut self) -> Result<(), BlobError> {
        let key = BlobStore::key_of(&self.id).ok_or(BlobError::InvalidId)?;
        if let Some(staging) = self.staging.take() {
            self.store.inner.rename(&staging, &key).await?;
        }
        Ok(())
    }

    /// Removes the staging object.
    pub async fn discard(mut self) -> Result<(), BlobError> {
        match self.staging.take() {
            Some(staging) => ignore_not_found(self.store.inner.delete(&staging).await),
            None => Ok(()),
        }
    }
}

impl Drop for StagedBlob {
    fn drop(&mut self) {
        if let Some(staging) = self.staging.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let inner = self.store.inner.clone();
            runtime.spawn(async move {
                let _ = inner.delete(&staging).await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn blobs_are_sharded_by_hash_and_read_back_byte_identical() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::local(dir.path()).unwrap();
        let bytes = b"Subject: hi\r\n\r\nbody\r\n".to_vec();
        let id = store.put(bytes.clone()).await.unwrap();
        assert_eq!(id, blob_id_of(&bytes));
        assert!(
            dir.path()
                .join(&id[0..2])
                .join(&id[2..4])
                .join(&id)
                .is_file()
        );
        assert_eq!(store.get(&id).await.unwrap(), Some(bytes.clone()));
        assert!(store.exists(&id).await.unwrap());
        assert_eq!(store.put(bytes.clone()).await.unwrap(), id);
        assert_eq!(store.get(&"0".repeat(64)).await.unwrap(), None);
        assert!(!store.exists(&"0".repeat(64)).await.unwrap());
        assert_eq!(store.get("../../etc/passwd").await.unwrap(), None);
        assert!(matches!(
            store.put_with_id("../x", b"x".to_vec()).await,
            Err(BlobError::InvalidId)
        ));
        let many = store.get_many(&[id.clone(), "1".repeat(64)]).await;
        assert_eq!(many[0].as_ref().unwrap(), &Some(bytes));
        assert_eq!(many[1].as_ref().unwrap(), &None);
        assert_eq!(
            blob_id_of(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[tokio::test]
    async fn ranges_of_many_blobs_are_read_checked_and_kept_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::local(dir.path()).unwrap();
        let first = b"Subject: one\r\n\r\nfirst body\r\n".to_vec();
        let second = b"Subject: two\r\n\r\nsecond, longer body\r\n".to_vec();
        let (a, b) = (
            store.put(first.clone()).await.unwrap(),
            store.put(second.clone()).await.unwrap(),
        );
        let range = |bytes: &[u8], from: usize, to: usize| {
            ((from as u64..to as u64), range_digest(&bytes[from..to]))
        };
        let missing = "2".repeat(64);
        let read = store
            .get_ranges_of(
                vec![
                    (
                        b.clone(),
                        vec![range(&second, 16, 22), range(&second, 0, 12)],
                    ),
                    (missing.clone(), vec![range(&first, 0, 3)]),
                    (a.clone(), vec![range(&first, 16, 26)]),
                    // A digest that does not match the octets: corrupt.
                    (a.clone(), vec![(0..3, range_digest(b"xyz"))]),
                    // Past the end of the blob: truncated, corrupt.
                    (a.clone(), vec![range(&second, 0, second.len())]),
                ],
                4,
            )
            .await;
        assert_eq!(
            read[0].as_ref().unwrap(),
            &vec![
                Bytes::from_static(b"second"),
                Bytes::from_static(b"Subject: two")
            ]
        );
        assert!(matches!(&read[1], Err(BlobError::Missing(id)) if *id == missing));
        assert_eq!(
            read[2].as_ref().unwrap(),
            &vec![Bytes::from_static(b"first body")]
        );
        assert!(matches!(&read[3], Err(BlobError::Corrupt(id)) if *id == a));
        assert!(matches!(&read[4], Err(BlobError::Corrupt(id)) if *id == a));
        assert_eq!(read.len(), 5);
    }

    #[tokio::test]
    async fn blobs_written_by_the_old_layout_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = b"old".to_vec();
        let id = blob_id_of(&bytes);
        let shard = dir.path().join(&id[0..2]).join(&id[2..4]);
        std::fs::create_dir_all(&shard).unwrap();
        std::fs::write(shard.join(&id), &bytes).unwrap();
        let store = BlobStore::open(&format!("file://{}", dir.path().display())).unwrap();
        assert_eq!(store.get(&id).await.unwrap(), Some(bytes));
    }

    #[test]
    fn blob_urls_are_checked() {
        assert!(matches!(
            BlobStore::open("gs://bucket"),
            Err(BlobError::UnsupportedUrl(_))
        ));
        assert!(matches!(
            BlobStore::open("s3:///prefix"),
            Err(BlobError::UnsupportedUrl(_))
        ));
    }
}

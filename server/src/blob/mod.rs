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
//! header or fast-view levels. Writing the same bytes twice is harmless (a
//! blob that exists is not written again).

use std::fmt;
use std::path::Path as FsPath;
use std::sync::Arc;

use futures::StreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::prefix::PrefixStore;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use sha2::{Digest, Sha256};

/// How many blobs one batch read ([`BlobStore::get_many`]) fetches at once.
const READ_CONCURRENCY: usize = 16;

/// Hex SHA-256 of `bytes`: the blobId of a message or upload (RFC 8620 §6).
pub fn blob_id_of(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for byte in digest {
        use std::fmt::Write;
        let _ = write!(out, "{byte:02x}");
    }
    out
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
    /// The backing store failed.
    #[error("blob store: {0}")]
    Backend(#[from] object_store::Error),
}

/// Content-addressed blobs under one root, local or in S3.
#[derive(Clone)]
pub struct BlobStore {
    inner: Arc<dyn ObjectStore>,
    /// `file:///…` or `s3://bucket/prefix`: for messages and logs.
    url: String,
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
            return Ok(Self { inner, url });
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
        let valid = blob_id.len() == 64
            && blob_id
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        valid.then(|| Path::from(format!("{}/{}/{blob_id}", &blob_id[0..2], &blob_id[2..4])))
    }

    /// Stores `bytes` and returns its blob id.
    pub async fn put(&self, bytes: Vec<u8>) -> Result<String, BlobError> {
        let blob_id = blob_id_of(&bytes);
        self.put_with_id(&blob_id, bytes).await?;
        Ok(blob_id)
    }

    /// Stores `bytes` under an id the caller computed with [`blob_id_of`];
    /// nothing is written when the blob is already there.
    pub async fn put_with_id(
        &self,
        blob_id: &str,
        bytes: impl Into<PutPayload>,
    ) -> Result<(), BlobError> {
        let key = Self::key_of(blob_id).ok_or(BlobError::InvalidId)?;
        if self.exists_at(&key).await? {
            return Ok(());
        }
        self.inner.put(&key, bytes.into()).await?;
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

    /// Reads a whole blob; `Ok(None)` when there is no such blob.
    pub async fn get(&self, blob_id: &str) -> Result<Option<Vec<u8>>, BlobError> {
        let Some(key) = Self::key_of(blob_id) else {
            return Ok(None);
        };
        let result = match self.inner.get(&key).await {
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

    /// Reads several blobs at once (a bounded number in flight), in the order
    /// of `blob_ids`.
    pub async fn get_many(&self, blob_ids: &[String]) -> Vec<Result<Option<Vec<u8>>, BlobError>> {
        // Owned ids: a future borrowing the iterator's items would not be
        // `Send` for every lifetime, which axum handlers need.
        futures::stream::iter(blob_ids.to_vec())
            .map(|id| async move { self.get(&id).await })
            .buffered(READ_CONCURRENCY)
            .collect()
            .await
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

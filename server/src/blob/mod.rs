//! The blob store: raw messages and uploads on disk, content-addressed.
//!
//! A blob's id is the lowercase hex SHA-256 of its bytes; it lives at
//! `{root}/{id[0..2]}/{id[2..4]}/{id}`, so no directory grows past a few
//! hundred entries (a flat directory degrades past ~10k files). Writes go to a
//! temporary file in the same directory and are renamed into place, so a blob
//! is either absent or complete, and writing the same bytes twice is harmless.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};

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

/// Content-addressed blobs in sharded directories under one root.
#[derive(Debug)]
pub struct BlobStore {
    root: PathBuf,
    temp_counter: AtomicU64,
}

impl BlobStore {
    /// A blob store rooted at `root` (created on first write).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            temp_counter: AtomicU64::new(0),
        }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn path_of(&self, blob_id: &str) -> Option<PathBuf> {
        let valid = blob_id.len() == 64
            && blob_id
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        valid.then(|| {
            self.root
                .join(&blob_id[0..2])
                .join(&blob_id[2..4])
                .join(blob_id)
        })
    }

    /// Stores `bytes` and returns its blob id. Blocking file I/O: call from a
    /// blocking context (`spawn_blocking`) on the async path.
    pub fn put(&self, bytes: &[u8]) -> io::Result<String> {
        let blob_id = blob_id_of(bytes);
        self.put_with_id(&blob_id, bytes)?;
        Ok(blob_id)
    }

    /// Stores `bytes` under an id the caller computed with [`blob_id_of`].
    pub fn put_with_id(&self, blob_id: &str, bytes: &[u8]) -> io::Result<()> {
        let path = self
            .path_of(blob_id)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "invalid blob id"))?;
        if path.exists() {
            return Ok(());
        }
        let dir = path.parent().expect("sharded path has a parent");
        std::fs::create_dir_all(dir)?;
        let temp = dir.join(format!(
            ".{blob_id}.{}.{}.tmp",
            std::process::id(),
            self.temp_counter.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&temp, bytes)?;
        std::fs::rename(&temp, &path).inspect_err(|_| {
            let _ = std::fs::remove_file(&temp);
        })
    }

    /// Reads a whole blob; `Ok(None)` when there is no such blob.
    pub fn get(&self, blob_id: &str) -> io::Result<Option<Vec<u8>>> {
        let Some(path) = self.path_of(blob_id) else {
            return Ok(None);
        };
        match std::fs::read(path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blobs_are_sharded_by_hash_and_read_back_byte_identical() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::new(dir.path());
        let bytes = b"Subject: hi\r\n\r\nbody\r\n".to_vec();
        let id = store.put(&bytes).unwrap();
        assert_eq!(id, blob_id_of(&bytes));
        assert!(dir.path().join(&id[0..2]).join(&id[2..4]).join(&id).is_file());
        assert_eq!(store.get(&id).unwrap(), Some(bytes.clone()));
        assert_eq!(store.put(&bytes).unwrap(), id);
        assert_eq!(store.get(&"0".repeat(64)).unwrap(), None);
        assert_eq!(store.get("../../etc/passwd").unwrap(), None);
        assert_eq!(
            blob_id_of(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}

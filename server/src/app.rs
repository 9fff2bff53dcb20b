//! The storage of a server instance and the options it serves with: [`App`]
//! opens a data dir's store and blob store, [`ServeOptions`] is the
//! configuration of one serving instance. `fastview serve`, `demo`, the
//! benchmarks and the integration tests all start servers from an [`App`],
//! through `assembly::assemble`, which builds the metrics, the JMAP side
//! and the router (this module names no HTTP type: only `http` imports
//! axum).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::blob::{BlobError, BlobStore};
use crate::jmap::Limits;
use crate::mail::load::CacheSizes;
use crate::mail::read_level::ReadSwitches;
use crate::store::postgres::PostgresStore;
use crate::store::sqlite::SqliteStore;
use crate::store::{Store, StoreError};

/// The default database URL for a data dir: `sqlite://{data_dir}/fastview.db`.
pub fn default_database_url(data_dir: &Path) -> String {
    format!("sqlite://{}", data_dir.join("fastview.db").display())
}

/// Connections in the PostgreSQL pool unless `--database-max-connections` says otherwise.
pub const DEFAULT_POSTGRES_CONNECTIONS: u32 = 16;

/// Connections in the SQLite pool unless `--database-max-connections` says otherwise
/// (SQLite runs one writer at a time; the rest serve reads).
pub const DEFAULT_SQLITE_CONNECTIONS: u32 = 8;

/// Whether a database URL names a PostgreSQL database (`postgres://…` or `postgresql://…`).
pub fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// Opens (creating and migrating if needed) the database at `url`: a
/// `sqlite:` URL selects the SQLite store, a `postgres://` or `postgresql://`
/// URL the PostgreSQL store; `max_connections` as in [`App::open_with`].
pub async fn open_store(
    url: &str,
    max_connections: Option<u32>,
) -> Result<Arc<dyn Store>, OpenError> {
    Ok(if url.starts_with("sqlite:") {
        let connections = max_connections.unwrap_or(DEFAULT_SQLITE_CONNECTIONS);
        Arc::new(SqliteStore::connect(url, connections).await?)
    } else if is_postgres_url(url) {
        let connections = max_connections.unwrap_or(DEFAULT_POSTGRES_CONNECTIONS);
        Arc::new(PostgresStore::connect(url, connections).await?)
    } else {
        return Err(OpenError::UnsupportedUrl(url.to_string()));
    })
}

/// Errors opening the storage.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot create the data dir {0}: {1}")]
    DataDir(PathBuf, std::io::Error),
    #[error("unsupported database URL {0} (expected sqlite://…, postgres://… or postgresql://…)")]
    UnsupportedUrl(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Blob(#[from] BlobError),
}

/// Options of a serving instance.
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    pub switches: ReadSwitches,
    pub limits: Limits,
    pub public_url: Option<String>,
    pub cors_origins: Vec<String>,
    pub cache_sizes: CacheSizes,
    /// API requests in flight on this node before 429 (0: 1024).
    pub max_in_flight: usize,
    /// Bounds on the connections this instance holds open.
    pub connections: ConnectionLimits,
    /// Peers whose `X-Forwarded-For` names the client (reverse proxies);
    /// from any other peer the header is ignored.
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// The SMTP relay mail to other servers goes through (`--smtp-relay`).
    pub smtp_relay: Option<std::sync::Arc<crate::mail::relay::Relay>>,
}

/// Bounds on the connections of one serving instance (`serve` flags
/// `--header-read-timeout`, `--idle-timeout`, `--max-connections`,
/// `--min-upload-rate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// How long a request's header may take to arrive in full, counted from
    /// when the server starts waiting for it: from accept on a new
    /// connection, from the end of the previous response on a kept-alive
    /// one. A connection that sends nothing or half a header is closed then.
    pub header_read_timeout: std::time::Duration,
    /// A connection with no request in progress on which nothing has
    /// arrived for this long is closed (an idle kept-alive or a silent new
    /// connection). Only shortens the wait when under `header_read_timeout`.
    pub idle_timeout: std::time::Duration,
    /// Connections open at once. At the cap the connection idle the longest
    /// (no request in progress) is closed for the new one; when none is idle
    /// the new one waits in the listen backlog until one closes.
    pub max_connections: usize,
    /// The slowest an upload body may arrive, in octets per second, once
    /// the body deadline (twice `header_read_timeout`) has passed: at any
    /// time `t` after the upload began, at least `min_upload_rate × (t −
    /// deadline)` octets must have arrived, else 408 and the upload is
    /// dropped. An upload is never idle, so without a rate a trickling one
    /// would hold its connection and upload slot for ever. 0: no minimum.
    pub min_upload_rate: u64,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: std::time::Duration::from_secs(30),
            idle_timeout: std::time::Duration::from_secs(15),
            max_connections: 4096,
            min_upload_rate: 8 << 10,
        }
    }
}

/// The storage of one data dir: database and blob store.
#[derive(Clone)]
pub struct App {
    pub store: Arc<dyn Store>,
    pub blobs: Arc<BlobStore>,
    pub data_dir: PathBuf,
}

impl App {
    /// Opens (creating and migrating if needed) the database at
    /// `database_url` (default: in `data_dir`) and the blob store in
    /// `data_dir/blobs`, with the default pool size of the database's kind.
    pub async fn open(data_dir: &Path, database_url: Option<&str>) -> Result<Self, OpenError> {
        Self::open_with(data_dir, database_url, None).await
    }

    /// [`App::open`] with a pool of at most `max_connections` database
    /// connections (`None`: [`DEFAULT_SQLITE_CONNECTIONS`] or
    /// [`DEFAULT_POSTGRES_CONNECTIONS`]). A `sqlite:` URL selects the SQLite
    /// store, a `postgres://` or `postgresql://` URL the PostgreSQL store
    /// (migrated on connect); blobs are in `data_dir/blobs`.
    pub async fn open_with(
        data_dir: &Path,
        database_url: Option<&str>,
        max_connections: Option<u32>,
    ) -> Result<Self, OpenError> {
        Self::open_storage(data_dir, database_url, max_connections, None).await
    }

    /// [`App::open_with`] with the blob store `blob_url` names
    /// ([`BlobStore::open`]: `s3://bucket/prefix`, `file:///path` or a path;
    /// `None`: the local directory `data_dir/blobs`).
    pub async fn open_storage(
        data_dir: &Path,
        database_url: Option<&str>,
        max_connections: Option<u32>,
        blob_url: Option<&str>,
    ) -> Result<Self, OpenError> {
        std::fs::create_dir_all(data_dir)
            .map_err(|e| OpenError::DataDir(data_dir.to_path_buf(), e))?;
        let url = database_url
            .map(str::to_string)
            .unwrap_or_else(|| default_database_url(data_dir));
        let store = open_store(&url, max_connections).await?;
        let blobs = match blob_url {
            Some(blob_url) => BlobStore::open(blob_url)?,
            None => BlobStore::local(data_dir.join("blobs"))?,
        };
        Ok(Self {
            store,
            blobs: Arc::new(blobs),
            data_dir: data_dir.to_path_buf(),
        })
    }
}

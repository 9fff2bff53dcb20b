//! Assembling a server instance from its parts: the store, the blob store,
//! the metrics, the JMAP side and the HTTP router. `fastview serve`, `demo`
//! and the integration tests all start servers through [`App`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::Router;

use crate::blob::BlobStore;
use crate::http::auth::Authenticator;
use crate::http::{self, AppState};
use crate::jmap::{Jmap, Limits};
use crate::mail::load::{CacheSizes, EmailLoader};
use crate::mail::read_level::ReadSwitches;
use crate::metrics::Metrics;
use crate::store::sqlite::SqliteStore;
use crate::store::{Store, StoreError};

/// The default database URL for a data dir: `sqlite://{data_dir}/fastview.db`.
pub fn default_database_url(data_dir: &Path) -> String {
    format!("sqlite://{}", data_dir.join("fastview.db").display())
}

/// Errors opening the storage.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot create the data dir {0}: {1}")]
    DataDir(PathBuf, std::io::Error),
    #[error("unsupported database URL {0} (expected sqlite://…)")]
    UnsupportedUrl(String),
    #[error(transparent)]
    Store(#[from] StoreError),
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
    /// `database_url` (default: in `data_dir`) and the blob store in `data_dir/blobs`.
    pub async fn open(data_dir: &Path, database_url: Option<&str>) -> Result<Self, OpenError> {
        std::fs::create_dir_all(data_dir).map_err(|e| OpenError::DataDir(data_dir.to_path_buf(), e))?;
        let url = database_url
            .map(str::to_string)
            .unwrap_or_else(|| default_database_url(data_dir));
        let store: Arc<dyn Store> = if url.starts_with("sqlite:") {
            Arc::new(SqliteStore::connect(&url, 8).await?)
        } else {
            return Err(OpenError::UnsupportedUrl(url));
        };
        Ok(Self {
            store,
            blobs: Arc::new(BlobStore::new(data_dir.join("blobs"))),
            data_dir: data_dir.to_path_buf(),
        })
    }

    /// Builds the JMAP side and the router of a serving instance.
    pub fn router(&self, options: &ServeOptions) -> (Router, Arc<AppState>) {
        let metrics = Arc::new(Metrics::new());
        let loader = EmailLoader::new(
            self.store.clone(),
            self.blobs.clone(),
            metrics.clone(),
            options.cache_sizes,
        );
        let jmap = Arc::new(Jmap {
            store: self.store.clone(),
            blobs: self.blobs.clone(),
            metrics,
            loader,
            limits: options.limits,
            switches: options.switches,
        });
        let max_in_flight = if options.max_in_flight == 0 { 1024 } else { options.max_in_flight };
        let state = Arc::new(AppState {
            jmap,
            auth: Authenticator::new(self.store.clone()),
            public_url: options.public_url.as_ref().map(|u| u.trim_end_matches('/').to_string()),
            in_flight: tokio::sync::Semaphore::new(max_in_flight),
        });
        (http::router(state.clone(), &options.cors_origins), state)
    }
}

//! JMAP protocol (RFC 8620): wire types, errors, result references, dispatch,
//! and the mail methods (RFC 8621) under [`mail`].
//!
//! [`Jmap`] is everything a method needs; the HTTP layer owns one and hands
//! each authenticated request to [`dispatch::handle`].

pub mod args;
pub mod core;
pub mod dispatch;
pub mod error;
pub mod ids;
pub mod mail;
pub mod quota;
pub mod reference;
pub mod request;
pub mod session;

use std::sync::Arc;

use crate::blob::BlobStore;
use crate::mail::load::{CacheSizes, EmailLoader};
use crate::mail::read_level::ReadSwitches;
use crate::metrics::Metrics;
use crate::store::Store;

/// Server limits advertised in the session (RFC 8620 §2, RFC 8621 §1.3.1) and enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Octets.
    pub max_size_upload: u64,
    pub max_concurrent_upload: u64,
    /// Octets.
    pub max_size_request: u64,
    pub max_concurrent_requests: u64,
    pub max_calls_in_request: u64,
    pub max_objects_in_get: u64,
    pub max_objects_in_set: u64,
    /// Characters (RFC 8621 `maxSizeMailboxName`).
    pub max_size_mailbox_name: u64,
    pub max_mailbox_depth: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_size_upload: 50 << 20,
            max_concurrent_upload: 4,
            max_size_request: 10 << 20,
            max_concurrent_requests: 32,
            max_calls_in_request: 64,
            max_objects_in_get: 1000,
            max_objects_in_set: 1000,
            max_size_mailbox_name: 255,
            max_mailbox_depth: 10,
        }
    }
}

/// The JMAP side of a server instance.
pub struct Jmap {
    pub store: Arc<dyn Store>,
    pub blobs: Arc<BlobStore>,
    pub metrics: Arc<Metrics>,
    pub loader: EmailLoader,
    pub limits: Limits,
    pub switches: ReadSwitches,
}

impl Jmap {
    /// The JMAP side of a new serving instance over `store` and `blobs`: its
    /// own metrics and empty caches of `cache_sizes`.
    pub fn new(
        store: Arc<dyn Store>,
        blobs: Arc<BlobStore>,
        limits: Limits,
        switches: ReadSwitches,
        cache_sizes: CacheSizes,
    ) -> Self {
        let metrics = Arc::new(Metrics::new());
        let loader = EmailLoader::new(store.clone(), blobs.clone(), metrics.clone(), cache_sizes);
        Self {
            store,
            blobs,
            metrics,
            loader,
            limits,
            switches,
        }
    }
}

//! Fastview: a JMAP mail server (RFC 8620 core, RFC 8621 mail) whose
//! `Email/get` reads only what the requested properties need.
//!
//! # Layout
//!
//! Layers point one way: `cli → assembly → proxy → http → jmap → mail →
//! store / blob` (`tests/tidy.rs` fails on an import against them).
//!
//! - [`app`]: the storage of a server instance (store and blob store of a
//!   data dir) and the options it serves with.
//! - [`assembly`]: one serving instance of an [`app::App`], standalone or in
//!   front of an upstream: the one place that chooses.
//! - [`cli`]: the `fastview` command line (clap); every command is a function here.
//! - [`proxy`]: the proxy wing: everything that exists only in front of an
//!   IMAP or JMAP server (the upstream).
//! - [`http`]: the HTTP edge (axum): the state of a serving instance,
//!   session, API, upload, download, auth, metrics, problem-JSON errors.
//! - [`jmap`]: wire types, RFC 8620 errors, result references, method dispatch,
//!   and one file per method under `jmap::mail`.
//! - [`mail`]: the domain: the RFC 8621 message model (properties, header
//!   forms, body parts), the read-level planner ([`mail::read_level`]), the
//!   fast-view projection ([`mail::fast_view`]), ingest, threading, query
//!   evaluation, import sources.
//! - [`store`]: the only module that imports sqlx: the [`store::Store`] trait
//!   and its SQLite and PostgreSQL implementations.
//! - [`blob`]: the content-addressed blob store, on disk or in S3.
//! - [`metrics`]: per-server-instance Prometheus counters.
//!
//! `server/ARCHITECTURE.md` is the code map with its invariants.

pub mod account;
pub mod app;
pub mod assembly;
pub mod blob;
pub mod cli;
pub mod http;
pub mod jmap;
pub mod mail;
pub mod metrics;
pub mod proxy;
pub mod store;

//! The API test binary: every test starts the real server on 127.0.0.1:0
//! with a temporary data dir and talks JMAP over HTTP.

mod support;

mod bad_input;
mod bad_messages;
mod blob_gc;
mod blob_integrity;
mod budget;
mod client;
mod client_features;
mod core;
mod corpus;
mod crash;
mod delivery_queue;
mod drafts;
mod email;
mod front_door;
mod header_index;
mod hostile;
mod identity;
#[macro_use]
mod imap_server;
mod loadtest;
mod migrate;
mod overload;
mod paging;
mod query_bounds;
mod quota;
mod read_levels;
mod relay;
mod reproject;
mod s3;
mod scale_out;
mod search;
mod security;
mod storage_full;
mod submission;
mod sync;
mod tokens;
mod uploads;
mod upstream_bounds;
mod upstream_cyrus_jmap;
mod upstream_imap;
mod upstream_imap_writes;
mod upstream_jmap;

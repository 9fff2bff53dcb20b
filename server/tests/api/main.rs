//! The API test binary: every test starts the real server on 127.0.0.1:0
//! with a temporary data dir and talks JMAP over HTTP.

mod support;

mod bad_input;
mod bad_messages;
mod core;
mod crash;
mod email;
mod overload;
mod loadtest;
mod client;
mod corpus;
mod read_levels;
mod reproject;
mod security;
mod sync;
mod migrate;
mod s3;
mod scale_out;

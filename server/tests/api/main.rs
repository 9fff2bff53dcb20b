//! The API test binary: every test starts the real server on 127.0.0.1:0
//! with a temporary data dir and talks JMAP over HTTP.

mod support;

mod core;
mod crash;
mod email;
mod loadtest;
mod client;
mod corpus;
mod read_levels;
mod reproject;
mod security;

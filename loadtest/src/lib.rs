//! Fastview's load test: replays the ADR scenarios against a JMAP server with
//! [goose](https://book.goose.rs), at a constant arrival rate, and reports per
//! JMAP call count, failures and response times with sub-millisecond precision.
//!
//! # Layout
//!
//! | module        | what it holds |
//! |---------------|---------------|
//! | [`cli`]       | the command line (`clap`), and [`cli::execute`] which runs it |
//! | [`config`]    | [`RunConfig`], duration parsing, the loopback guard, users/hour → goose settings |
//! | [`jmap`]      | tiny JMAP client helpers: session, request building, response checks |
//! | [`stats`]     | HDR histograms in microseconds shared by all users, and the tables |
//! | [`scenario`]  | the scenarios, one module each: `adr_0012`, `adr_0013`, `webmail`, `full` |
//! | [`run`]       | goose wiring: [`run_scenario`] and its [`RunReport`] |
//! | [`compare`]   | `--compare`: two hosts side by side |
//! | [`capacity`]  | `capacity`: the highest rate that holds a p99 |
//! | [`floor`]     | `floor`: the HTTP + JSON floor the fast view is measured against |
//!
//! # Use from a test
//!
//! ```no_run
//! use std::time::Duration;
//! use fastview_loadtest::{RunConfig, Scenario, run_scenario, scenario::EMAIL_GET_METADATA};
//!
//! # async fn example() -> anyhow::Result<()> {
//! // 7200 users/hour for 5 s: 10 users, each running adr-0012 once.
//! let config = RunConfig::new("http://127.0.0.1:8080", Scenario::Adr0012, 7200,
//!     Duration::from_secs(5), 10, "secret");
//! let report = run_scenario(config).await?;
//! assert!(report.is_clean(), "{}", report.render());
//! assert_eq!(report.request(EMAIL_GET_METADATA).unwrap().count, 10 * 10);
//! # Ok(())
//! # }
//! ```
//!
//! Runs need a multi-threaded tokio runtime, and runs in one process take
//! turns (goose keeps global state).

pub mod capacity;
pub mod cli;
pub mod compare;
pub mod config;
pub mod floor;
pub mod jmap;
pub mod run;
pub mod scenario;
pub mod stats;

pub use capacity::{CapacityConfig, CapacityReport, CapacityStep, find_capacity};
pub use compare::{Comparison, run_comparison};
pub use config::RunConfig;
pub use run::{RunReport, run_scenario};
pub use scenario::Scenario;
pub use stats::{RequestStats, SCENARIO_ROW};

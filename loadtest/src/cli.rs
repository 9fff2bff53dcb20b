//! The command line: [`Cli`] parses it, [`execute`] runs it and returns the
//! exit status.
//!
//! ```text
//! fastview-loadtest --host URL --scenario NAME --users-per-hour N --duration 10s \
//!     --accounts N --password PW [--report-file F]... [--compare URL]
//! fastview-loadtest capacity --host URL --scenario NAME --p99-ms X --accounts N --password PW
//! ```
//!
//! Exit status: 0 when every request succeeded (and, for `capacity`, some
//! rate held), 1 when a request failed or the run was incomplete, 2 when the
//! run could not start.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::capacity::{
    CapacityConfig, DEFAULT_MAX_USERS_PER_HOUR, DEFAULT_REFINE_STEPS, DEFAULT_START_USERS_PER_HOUR,
    find_capacity, render_step,
};
use crate::compare::run_comparison;
use crate::config::{self, RunConfig, parse_duration};
use crate::run::run_scenario;
use crate::scenario::Scenario;

/// Load-tests a Fastview JMAP server with the ADR scenarios.
#[derive(Parser, Debug)]
#[command(
    name = "fastview-loadtest",
    version,
    about,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
pub struct Cli {
    /// `capacity`, or none for a single run.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Where, what and as whom, for a single run.
    #[command(flatten)]
    pub target: Option<TargetArgs>,
    /// The rest of a single run's options.
    #[command(flatten)]
    pub run: Option<RunArgs>,
}

/// Subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Find the highest users/hour at which the whole-scenario p99 stays
    /// under --p99-ms with no failure.
    Capacity(CapacityArgs),
    /// Serve the HTTP + JSON floor: a fixed answer to every JSON POST on
    /// /jmap/api (issue 20; loadtest/floor-ratio.sh).
    Floor(FloorArgs),
}

/// Options of `floor`.
#[derive(Args, Debug, Clone)]
pub struct FloorArgs {
    /// Loopback address to listen on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:18110")]
    pub listen: std::net::SocketAddr,
    /// File holding the octets to answer with (a real server's answer).
    #[arg(long, value_name = "FILE")]
    pub answer: PathBuf,
}

/// Options every mode shares: where, what and as whom.
#[derive(Args, Debug, Clone)]
pub struct TargetArgs {
    /// Base URL of the server, such as http://127.0.0.1:8080. Must be a
    /// loopback address unless --allow-remote-host is given.
    #[arg(long, value_name = "URL")]
    pub host: String,
    /// Scenario: adr-0012, adr-0013, webmail or full.
    #[arg(long, value_name = "NAME")]
    pub scenario: Scenario,
    /// Accounts user1..userN@example.com; users take them round-robin.
    #[arg(long, value_name = "N")]
    pub accounts: u64,
    /// Password of every account.
    #[arg(
        long,
        value_name = "PW",
        env = "FASTVIEW_LOADTEST_PASSWORD",
        hide_env_values = true
    )]
    pub password: String,
    /// Allow a --host (or --compare) that is not a loopback address.
    #[arg(long)]
    pub allow_remote_host: bool,
    /// Timeout of each HTTP request.
    #[arg(long, value_name = "TIME", default_value = "30s", value_parser = duration_arg)]
    pub request_timeout: Duration,
    /// How long a run may go on past its duration before it is stopped.
    #[arg(long, value_name = "TIME", default_value = "30s", value_parser = duration_arg)]
    pub grace: Duration,
    /// Show goose's log (user launches and so on).
    #[arg(long, short)]
    pub verbose: bool,
    /// Skip logging in once as every account before measuring (measure a cold start).
    #[arg(long)]
    pub no_warm_up: bool,
}

/// Options of a single run (and of `--compare`), beside [`TargetArgs`].
///
/// (Kept apart from [`TargetArgs`]: clap can tell whether an optional
/// flattened group was given only when it nests no other group.)
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Arrival rate: users started per hour, each running the scenario once.
    #[arg(long, value_name = "N")]
    pub users_per_hour: u64,
    /// How long users keep arriving, such as 10s, 2m or 1h30m.
    #[arg(long, value_name = "TIME", value_parser = duration_arg)]
    pub duration: Duration,
    /// Write a goose report; .html, .md or .json by extension. Repeatable.
    #[arg(long, value_name = "FILE")]
    pub report_file: Vec<PathBuf>,
    /// Run again against this host and print both side by side, with B/A ratios.
    #[arg(long, value_name = "URL")]
    pub compare: Option<String>,
}

/// Options of `capacity`.
#[derive(Args, Debug, Clone)]
pub struct CapacityArgs {
    /// Where, what and as whom.
    #[command(flatten)]
    pub target: TargetArgs,
    /// Whole-scenario p99 limit, in milliseconds.
    #[arg(long, value_name = "X")]
    pub p99_ms: f64,
    /// First rate tried; then doubled until a step fails.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_START_USERS_PER_HOUR)]
    pub start_users_per_hour: u64,
    /// Highest rate tried.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_USERS_PER_HOUR)]
    pub max_users_per_hour: u64,
    /// Duration of each step.
    #[arg(long, value_name = "TIME", default_value = "10s", value_parser = duration_arg)]
    pub step_duration: Duration,
    /// Steps between the last rate that held and the first that failed.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_REFINE_STEPS)]
    pub refine_steps: u32,
}

fn duration_arg(text: &str) -> Result<Duration, String> {
    parse_duration(text).map_err(|e| e.to_string())
}

impl TargetArgs {
    fn run_config(&self, users_per_hour: u64, duration: Duration) -> RunConfig {
        let mut config = RunConfig::new(
            self.host.clone(),
            self.scenario,
            users_per_hour,
            duration,
            self.accounts,
            self.password.clone(),
        );
        config.allow_remote_host = self.allow_remote_host;
        config.request_timeout = self.request_timeout;
        config.grace = self.grace;
        config.verbose = self.verbose;
        config.warm_up = !self.no_warm_up;
        config
    }
}

impl RunArgs {
    /// The library configuration these options describe, with `target`.
    pub fn run_config(&self, target: &TargetArgs) -> RunConfig {
        let mut config = target.run_config(self.users_per_hour, self.duration);
        config.report_files = self.report_file.clone();
        config
    }
}

impl CapacityArgs {
    /// The library configuration these options describe.
    pub fn capacity_config(&self) -> CapacityConfig {
        CapacityConfig {
            run: self
                .target
                .run_config(self.start_users_per_hour, self.step_duration),
            p99_ms: self.p99_ms,
            start_users_per_hour: self.start_users_per_hour,
            max_users_per_hour: self.max_users_per_hour,
            refine_steps: self.refine_steps,
        }
    }
}

/// Runs what the command line asks for, prints the results and returns the
/// exit status.
pub async fn execute(cli: Cli) -> ExitCode {
    let outcome = match (cli.command, cli.target, cli.run) {
        (Some(Command::Capacity(args)), _, _) => capacity(args).await,
        (Some(Command::Floor(args)), _, _) => crate::floor::serve_floor(args.listen, &args.answer)
            .await
            .map(|()| true),
        (None, Some(target), Some(args)) => run(&target, args).await,
        // clap requires both when there is no subcommand.
        (None, _, _) => Err(anyhow::anyhow!(
            "missing options; see fastview-loadtest --help"
        )),
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(error) => {
            eprintln!("fastview-loadtest: {error:#}");
            ExitCode::from(2)
        }
    }
}

async fn run(target: &TargetArgs, args: RunArgs) -> anyhow::Result<bool> {
    let config = args.run_config(target);
    config.validate()?;
    if let Some(host_b) = &args.compare {
        config::parse_host(host_b, config.allow_remote_host)?;
        let comparison = run_comparison(config, host_b).await?;
        print!("{}", comparison.render());
        Ok(comparison.is_clean())
    } else {
        let report = run_scenario(config).await?;
        print!("{}", report.render());
        Ok(report.is_clean())
    }
}

async fn capacity(args: CapacityArgs) -> anyhow::Result<bool> {
    let config = args.capacity_config();
    anyhow::ensure!(
        config.p99_ms.is_finite() && config.p99_ms > 0.0,
        "--p99-ms must be a positive number of milliseconds"
    );
    let p99_ms = config.p99_ms;
    println!(
        "{}: searching the highest users/hour with whole-scenario p99 <= {p99_ms} ms",
        config.run.scenario
    );
    let report = find_capacity(config, |step| println!("{}", render_step(step, p99_ms))).await?;
    match report.highest_held {
        Some(rate) => println!(
            "highest rate that held: {rate} users/hour ({:.2} users/s)",
            rate as f64 / 3600.0
        ),
        None => {
            println!("no rate held: even the first step failed; try a lower --start-users-per-hour")
        }
    }
    if let Some(last_failure) = report.steps.iter().rev().find(|step| !step.held) {
        print!(
            "last failing step in detail:\n{}",
            last_failure.report.render()
        );
    }
    Ok(report.highest_held.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("fastview-loadtest").chain(args.iter().copied()))
    }

    #[test]
    fn cli_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn parses_a_run() {
        let cli = parse(&[
            "--host",
            "http://127.0.0.1:8080",
            "--scenario",
            "adr-0013",
            "--users-per-hour",
            "36000",
            "--duration",
            "10s",
            "--accounts",
            "50",
            "--password",
            "pw",
            "--report-file",
            "r.html",
            "--report-file",
            "r.md",
            "--compare",
            "http://127.0.0.1:8081",
        ])
        .unwrap();
        assert!(cli.command.is_none());
        let run = cli.run.unwrap();
        assert_eq!(run.compare.as_deref(), Some("http://127.0.0.1:8081"));
        let config = run.run_config(&cli.target.unwrap());
        assert_eq!(config.scenario, Scenario::Adr0013);
        assert_eq!(config.users_per_hour, 36000);
        assert_eq!(config.duration, Duration::from_secs(10));
        assert_eq!(config.accounts, 50);
        assert_eq!(config.password, "pw");
        assert_eq!(
            config.report_files,
            [PathBuf::from("r.html"), PathBuf::from("r.md")]
        );
        assert!(!config.allow_remote_host);
        let (_, plan) = config.validate().unwrap();
        assert_eq!(plan.users, 100);
    }

    #[test]
    fn parses_capacity() {
        let cli = parse(&[
            "capacity",
            "--host",
            "http://127.0.0.1:8080",
            "--scenario",
            "webmail",
            "--p99-ms",
            "50",
            "--accounts",
            "10",
            "--password",
            "pw",
        ])
        .unwrap();
        let Some(Command::Capacity(args)) = cli.command else {
            panic!("not capacity");
        };
        let config = args.capacity_config();
        assert_eq!(config.run.scenario, Scenario::Webmail);
        assert_eq!(config.p99_ms, 50.0);
        assert_eq!(config.start_users_per_hour, DEFAULT_START_USERS_PER_HOUR);
        assert_eq!(config.run.duration, Duration::from_secs(10));
    }

    #[test]
    fn refuses_incomplete_or_wrong_runs() {
        // Missing --duration.
        assert!(
            parse(&[
                "--host",
                "http://127.0.0.1:8080",
                "--scenario",
                "full",
                "--users-per-hour",
                "10",
                "--accounts",
                "1",
                "--password",
                "pw",
            ])
            .is_err()
        );
        // Unknown scenario.
        assert!(
            parse(&[
                "--host",
                "http://127.0.0.1:8080",
                "--scenario",
                "nope",
                "--users-per-hour",
                "10",
                "--duration",
                "1s",
                "--accounts",
                "1",
                "--password",
                "pw",
            ])
            .is_err()
        );
        // Nothing at all.
        assert!(parse(&[]).is_err());
        // capacity without --p99-ms.
        assert!(
            parse(&[
                "capacity",
                "--host",
                "http://127.0.0.1:8080",
                "--scenario",
                "full",
                "--accounts",
                "1",
                "--password",
                "pw",
            ])
            .is_err()
        );
    }
}

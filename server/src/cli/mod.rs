//! The `fastview` command line (clap). Every flag can also come from an
//! environment variable `FASTVIEW_<NAME>`; the global flags `--data-dir`,
//! `--database-url`, `--database-max-connections` and `--blob-url` are
//! accepted by every subcommand, anywhere on the line.

mod account;
mod demo;
mod fsck;
mod gc;
mod import;
mod migrate_store;
mod reproject;
mod seed;
mod serve;
mod token;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::app::App;

/// A JMAP mail server whose Email/get reads only what it needs.
#[derive(Debug, Parser)]
#[command(name = "fastview", version, about)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Flags every subcommand accepts.
#[derive(Debug, Clone, clap::Args)]
pub struct GlobalArgs {
    /// Where the blobs (and, by default, the SQLite database) live.
    #[arg(
        long,
        global = true,
        env = "FASTVIEW_DATA_DIR",
        default_value = "./fastview-data"
    )]
    pub data_dir: PathBuf,
    /// Database URL: `sqlite://…` (default `sqlite://<data-dir>/fastview.db`) or
    /// `postgres://user@host/db` (the database must exist); migrated on first use.
    #[arg(long, global = true, env = "FASTVIEW_DATABASE_URL")]
    pub database_url: Option<String>,
    /// Connections in the database pool [default: 16 for PostgreSQL, 8 for SQLite].
    #[arg(long, global = true, env = "FASTVIEW_DATABASE_MAX_CONNECTIONS", value_parser = clap::value_parser!(u32).range(1..))]
    pub database_max_connections: Option<u32>,
    /// Where the blobs live: `s3://bucket/prefix` (shared by every node; AWS
    /// settings from `AWS_*` variables, `AWS_ENDPOINT_URL` for an
    /// S3-compatible server), `file:///path` or a path [default: `<data-dir>/blobs`].
    #[arg(long, global = true, env = "FASTVIEW_BLOB_URL")]
    pub blob_url: Option<String>,
}

impl GlobalArgs {
    /// Opens the storage these flags name.
    pub async fn open(&self) -> anyhow::Result<App> {
        Ok(App::open_storage(
            &self.data_dir,
            self.database_url.as_deref(),
            self.database_max_connections,
            self.blob_url.as_deref(),
        )
        .await?)
    }

    /// Opens the storage for a command that adds accounts or mail of its
    /// own: refused on a data dir that mirrors an upstream (`serve
    /// --upstream`), whose accounts and mail come from there.
    pub async fn open_own(&self, command: &str) -> anyhow::Result<App> {
        let app = self.open().await?;
        if let Some(upstream) = app.store.upstream_source().await? {
            anyhow::bail!(
                "{}: {} mirrors the IMAP server {upstream}; its accounts and mail come \
                 from there (users log in with their IMAP credentials), so `{command}` \
                 cannot add any",
                command,
                app.data_dir.display()
            );
        }
        Ok(app)
    }
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve JMAP over HTTP.
    Serve(serve::ServeArgs),
    /// Manage accounts.
    #[command(subcommand)]
    Account(account::AccountCommand),
    /// Manage API tokens (`Authorization: Bearer`).
    #[command(subcommand)]
    Token(token::TokenCommand),
    /// Import Maildir folders, .mbox files and .eml files into an account.
    Import(import::ImportArgs),
    /// Create demo@example.com with the shipped demo mail (if missing) and serve.
    Demo(serve::ServeArgs),
    /// Rebuild the fast-view projection table.
    Reproject(reproject::ReprojectArgs),
    /// Create user1..userN@example.com, each with M messages from real mail (load tests).
    Seed(seed::SeedArgs),
    /// Copy a store into another (e.g. SQLite into PostgreSQL), ids and states
    /// kept, resumable; with --to-blob-url also the blobs.
    MigrateStore(migrate_store::MigrateStoreArgs),
    /// Delete the blobs nothing refers to: of destroyed emails, removed
    /// accounts and uploads unused for --upload-ttl-hours (serve also runs this).
    Gc(gc::GcArgs),
    /// Check that every blob the database refers to is present and hashes to
    /// its id; exit status 2 when one is missing or corrupt.
    Fsck,
}

/// Parses the command line, runs the command, and maps errors to exit code 1.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let global = cli.global;
    match cli.command {
        Command::Serve(args) => serve::serve(&global, args).await,
        Command::Account(command) => account::run(&global, command).await,
        Command::Token(command) => token::run(&global, command).await,
        Command::Import(args) => import::import(&global, args).await,
        Command::Demo(args) => demo::demo(&global, args).await,
        Command::Reproject(args) => reproject::reproject(&global, args).await,
        Command::Seed(args) => seed::seed(&global, args).await,
        Command::MigrateStore(args) => migrate_store::migrate_store(&global, args).await,
        Command::Gc(args) => gc::gc(&global, args).await,
        Command::Fsck => fsck::fsck(&global).await,
    }
}

fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("FASTVIEW_LOG")
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn"));
    // Colours only on a terminal: a log redirected to a file stays plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .try_init();
}

//! `fastview serve`: JMAP over HTTP until SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::process::ExitCode;

use anyhow::Context;
use clap::ValueEnum;

use super::GlobalArgs;
use crate::app::{App, ServeOptions};
use crate::mail::load::CacheSizes;
use crate::mail::read_level::ReadSwitches;

/// An optimisation switch (`on` by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Switch {
    On,
    Off,
}

/// Flags of `fastview serve` (and `fastview demo`).
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "FASTVIEW_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Absolute URL clients reach this server at (for session URLs); default: from the Host header.
    #[arg(long, env = "FASTVIEW_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Browser origins allowed by CORS (repeatable, or comma-separated).
    #[arg(
        long = "cors-origin",
        env = "FASTVIEW_CORS_ORIGIN",
        value_delimiter = ','
    )]
    pub cors_origin: Vec<String>,
    /// `off` reads and parses the full message for every Email/get (the "before" of ADR 0002).
    #[arg(long, env = "FASTVIEW_READ_LEVELS", value_enum, default_value = "on")]
    pub read_levels: Switch,
    /// `off` computes preview and hasAttachment from the full message (the "before" of ADR 0003).
    #[arg(long, env = "FASTVIEW_FAST_VIEW", value_enum, default_value = "on")]
    pub fast_view: Switch,
    /// Memory for header blocks split into fields (header read level), in MiB:
    /// 256 holds about 50,000 messages of real mail (5 KiB each).
    #[arg(long, env = "FASTVIEW_HEADER_CACHE_MB", default_value_t = CacheSizes::default().header_bytes >> 20)]
    pub header_cache_mb: u64,
    /// Memory for fast-view projection rows, in MiB.
    #[arg(long, env = "FASTVIEW_FAST_VIEW_CACHE_MB", default_value_t = CacheSizes::default().fast_view_bytes >> 20)]
    pub fast_view_cache_mb: u64,
    /// Minutes between runs of the blob garbage collector (as `fastview gc`;
    /// the first run starts with the server); 0 turns it off.
    #[arg(long, env = "FASTVIEW_GC_EVERY_MINUTES", default_value_t = 60)]
    pub gc_every_minutes: u64,
    #[command(flatten)]
    pub gc: super::gc::GcArgs,
}

impl ServeArgs {
    /// The serve options these flags give.
    pub fn options(&self) -> ServeOptions {
        ServeOptions {
            switches: ReadSwitches {
                read_levels: self.read_levels == Switch::On,
                fast_view: self.fast_view == Switch::On,
            },
            public_url: self.public_url.clone(),
            cors_origins: self.cors_origin.clone(),
            cache_sizes: CacheSizes {
                header_bytes: self.header_cache_mb << 20,
                fast_view_bytes: self.fast_view_cache_mb << 20,
            },
            ..ServeOptions::default()
        }
    }
}

/// Completes on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {},
        () = terminate => {},
    }
    tracing::info!("shutting down");
}

/// Serves an opened app with the given flags.
pub async fn serve_app(app: &App, args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let (router, _) = crate::http::assemble(app, &args.options());
    let _collector = (args.gc_every_minutes > 0).then(|| {
        crate::mail::gc::spawn_periodic(
            app.store.clone(),
            app.blobs.clone(),
            args.gc.options(),
            std::time::Duration::from_secs(args.gc_every_minutes * 60),
        )
    });
    let address = listener.local_addr()?;
    tracing::info!(%address, read_levels = ?args.read_levels, fast_view = ?args.fast_view, "serving JMAP");
    eprintln!("serving JMAP at http://{address}/.well-known/jmap");
    crate::http::serve(listener, router, shutdown_signal()).await?;
    Ok(ExitCode::SUCCESS)
}

/// `fastview serve`.
pub async fn serve(global: &GlobalArgs, args: ServeArgs) -> anyhow::Result<ExitCode> {
    let app = global.open().await?;
    serve_app(&app, &args).await
}

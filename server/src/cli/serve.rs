//! `fastview serve`: JMAP over HTTP until SIGINT or SIGTERM.

use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::ValueEnum;
use futures::FutureExt;
use ipnet::IpNet;

use super::GlobalArgs;
use crate::app::{App, ConnectionLimits, ServeOptions};
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
    /// Absolute URL clients reach this server at (for session URLs), e.g.
    /// `https://mail.example.com`: `http(s)://host[:port][/path]`, no query;
    /// default: from the Host header.
    #[arg(long, env = "FASTVIEW_PUBLIC_URL", value_parser = parse_public_url)]
    pub public_url: Option<String>,
    /// Browser origins allowed by CORS, each `http(s)://host[:port]` as the
    /// browser sends it (repeatable, or comma-separated); `*` is refused,
    /// since requests carry credentials.
    #[arg(
        long = "cors-origin",
        env = "FASTVIEW_CORS_ORIGIN",
        value_delimiter = ',',
        value_parser = parse_cors_origin
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
    /// Stored part trees (the structure read level) cached in memory, MiB.
    #[arg(long, env = "FASTVIEW_STRUCTURE_CACHE_MB", default_value_t = CacheSizes::default().structure_bytes >> 20)]
    pub structure_cache_mb: u64,
    /// Snapshots of mailboxIds and keywords at an account's Email state,
    /// one per account, checked against the state on every Email/get, MiB
    /// (about 250 bytes a message).
    #[arg(long, env = "FASTVIEW_METADATA_CACHE_MB", default_value_t = CacheSizes::default().metadata_bytes >> 20)]
    pub metadata_cache_mb: u64,
    /// The list view's Email objects kept as JSON text, per account, but
    /// for their mailboxIds and keywords, MiB (about 600 bytes a message);
    /// objects of metadata alone kept whole at one Email state, beside
    /// them (about 200 bytes a message).
    #[arg(long, env = "FASTVIEW_LIST_TEXT_CACHE_MB", default_value_t = CacheSizes::default().list_text_bytes >> 20)]
    pub list_text_cache_mb: u64,
    /// Minutes between runs of the blob garbage collector (as `fastview gc`;
    /// the first run starts with the server); 0 turns it off.
    #[arg(long, env = "FASTVIEW_GC_EVERY_MINUTES", default_value_t = 60)]
    pub gc_every_minutes: u64,
    #[command(flatten)]
    pub gc: super::gc::GcArgs,
    /// Seconds a request's header may take to arrive in full, counted from
    /// when the server starts waiting for it (accept, or the end of the
    /// previous response on a kept-alive connection); then the connection is closed.
    #[arg(long, env = "FASTVIEW_HEADER_READ_TIMEOUT", default_value_t = ConnectionLimits::default().header_read_timeout.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    pub header_read_timeout: u64,
    /// Seconds a connection with no request in progress may stay open with
    /// nothing arriving (an idle kept-alive or silent new connection).
    #[arg(long, env = "FASTVIEW_IDLE_TIMEOUT", default_value_t = ConnectionLimits::default().idle_timeout.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_timeout: u64,
    /// Connections open at once; at the cap the longest idle one is closed
    /// for a new one. Keep it under the open-file limit (`ulimit -n`) less
    /// the database pool.
    #[arg(long, env = "FASTVIEW_MAX_CONNECTIONS", default_value_t = ConnectionLimits::default().max_connections, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_connections: usize,
    /// The slowest an upload may arrive once twice the header-read timeout
    /// has passed, in KiB per second (the average since that time); slower
    /// uploads get 408. 0: no minimum.
    #[arg(long, env = "FASTVIEW_MIN_UPLOAD_RATE", default_value_t = ConnectionLimits::default().min_upload_rate >> 10)]
    pub min_upload_rate: u64,
    /// Reverse proxies (IP or CIDR, repeatable or comma-separated) whose
    /// `X-Forwarded-For` names the client; from other peers it is ignored.
    #[arg(long = "trusted-proxy", env = "FASTVIEW_TRUSTED_PROXY", value_delimiter = ',', value_parser = parse_trusted_proxy)]
    pub trusted_proxy: Vec<IpNet>,
    /// The SMTP relay mail to other servers is sent through:
    /// `smtp://user:password@host:587` (STARTTLS, required unless the host
    /// is loopback) or `smtps://user:password@host:465`. Without it,
    /// EmailSubmission sends only to accounts on this server.
    #[arg(long, env = "FASTVIEW_SMTP_RELAY", value_parser = parse_smtp_relay)]
    pub smtp_relay: Option<String>,
    /// Seconds each step of an SMTP transaction with the relay may take:
    /// connecting, the greeting, EHLO, STARTTLS, AUTH, MAIL, RCPT, DATA;
    /// the reply to the message gets at least 10 minutes (RFC 5321
    /// §4.5.3.2.6) plus its size at 32 KiB/s.
    /// A step past it is a temporary failure, retried from the queue.
    #[arg(long, env = "FASTVIEW_SMTP_TIMEOUT", default_value_t = crate::mail::relay::RelayTimeouts::default().step.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    pub smtp_timeout: u64,
    /// EmailSubmissions one account may create per hour (on all nodes
    /// together); more are refused with `overQuota`. 0: no bound.
    #[arg(long, env = "FASTVIEW_MAX_SENT_MESSAGES_PER_HOUR", default_value_t = crate::jmap::DEFAULT_SENT_MESSAGES_PER_HOUR)]
    pub max_sent_messages_per_hour: u64,
    /// Recipients one account may send to per hour, local accounts
    /// included, summed over its submissions (on all nodes together); a
    /// submission past it is refused with `tooManyRecipients`. 0: no bound.
    #[arg(long, env = "FASTVIEW_MAX_SENT_RECIPIENTS_PER_HOUR", default_value_t = crate::jmap::DEFAULT_SENT_RECIPIENTS_PER_HOUR)]
    pub max_sent_recipients_per_hour: u64,
    /// Mirror an existing IMAP server: `imaps://host[:993]`, or
    /// `imap://host[:143]` (STARTTLS required unless the host is loopback).
    /// Users log in with their IMAP credentials; accounts are made on their
    /// first login and synced while in use. Or front an existing JMAP server:
    /// its session URL, `https://host/.well-known/jmap`
    /// (`http://` only to loopback); clients see its accounts, ids and
    /// states, and log in with its credentials. A data dir serves one
    /// upstream.
    #[arg(long, env = "FASTVIEW_UPSTREAM", value_parser = crate::proxy::UpstreamTarget::parse)]
    pub upstream: Option<crate::proxy::UpstreamTarget>,
    /// The upstream's submission server: `smtps://host[:465]` or
    /// `smtp://host[:587]` (STARTTLS unless loopback), no credentials in it:
    /// mail is sent with each user's own (or the master login's). Without
    /// it EmailSubmission/set is refused behind an upstream.
    #[arg(long, env = "FASTVIEW_UPSTREAM_SMTP", value_parser = parse_upstream_smtp, requires = "upstream")]
    pub upstream_smtp: Option<String>,
    /// The most megabytes of message blobs an upstream data dir keeps: the
    /// oldest mail's beyond it are evicted (every minute) and read again
    /// from the upstream by UID when opened. 0: no bound.
    #[arg(long, env = "FASTVIEW_UPSTREAM_CACHE_MB", default_value_t = 4096)]
    pub upstream_cache_mb: u64,
    /// Seconds a listening account waits for the upstream between syncs
    /// (the IDLE timeout; without IDLE, the poll interval).
    #[arg(long, env = "FASTVIEW_UPSTREAM_POLL", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub upstream_poll: u64,
    /// Seconds between polls of the upstream while a client of the account
    /// made a request within the last minute; idle, every `--upstream-poll`
    /// (a JMAP mirror's wait doubles up to it). A JMAP upstream whose event
    /// source gives no stream (Cyrus 3.6 without WebSockets answers 204):
    /// one small request (three `/get`s of no ids). An IMAP upstream
    /// without NOTIFY (Cyrus): STATUS of every folder but INBOX, which is
    /// IDLEd (`fastview account list` tells each account's watch). A sync
    /// follows only when something moved.
    #[arg(long, env = "FASTVIEW_UPSTREAM_POLL_ACTIVE", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub upstream_poll_active: u64,
    /// A JMAP upstream trusts this node's `Forwarded` / `X-Forwarded-For`:
    /// each client's address goes with its requests, so the upstream
    /// brakes failed logins per client rather than per proxy (a Fastview
    /// upstream: `--trusted-proxy` naming this node). Off by default: an
    /// upstream that does not trust it ignores it, or worse.
    #[arg(
        long,
        env = "FASTVIEW_UPSTREAM_TRUSTS_FORWARDED",
        requires = "upstream"
    )]
    pub upstream_trusts_forwarded: bool,
    /// Minutes after the upstream last accepted a user's password that the
    /// same password still logs in while the upstream cannot be reached, so
    /// the mirror keeps serving reads through an outage (writes answer
    /// `serverUnavailable`). Only the exact password the upstream accepted
    /// last, never one it refused since. 0: no login without the upstream.
    #[arg(
        long,
        env = "FASTVIEW_UPSTREAM_OUTAGE_GRACE_MINUTES",
        default_value_t = 240
    )]
    pub upstream_outage_grace_minutes: u64,
    /// Background syncs (an account's first sync, the syncs and polls that
    /// follow changes, the message downloads inside them) run against the
    /// upstream at once; more wait their turn (`fastview_upstream_syncs_waiting`).
    /// Clients' own requests, writes and downloads take no turn. An upstream
    /// that answers 429 or 503 (or IMAP `[UNAVAILABLE]`) pauses them all
    /// for its Retry-After.
    #[arg(long, env = "FASTVIEW_UPSTREAM_SYNCS_AT_ONCE", default_value_t = crate::proxy::turns::DEFAULT_SYNCS_AT_ONCE, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1024))]
    pub upstream_syncs_at_once: usize,
    /// Minutes after its last request that an account stays synced (and
    /// its credentials kept in memory).
    #[arg(long, env = "FASTVIEW_UPSTREAM_IDLE_MINUTES", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub upstream_idle_minutes: u64,
    /// A master login of the upstream (Dovecot: a passdb with `master =
    /// yes`; Cyrus: one of its `admins`), which acts as each user by SASL
    /// PLAIN's authorization identity: every account is synced all the
    /// time, and users' passwords are checked but never kept. Needs
    /// `--upstream-master-password`.
    #[arg(
        long,
        env = "FASTVIEW_UPSTREAM_MASTER_USER",
        requires = "upstream_master_password"
    )]
    pub upstream_master_user: Option<String>,
    /// The master login's password (better from the environment: a flag is
    /// visible in the process list).
    #[arg(
        long,
        env = "FASTVIEW_UPSTREAM_MASTER_PASSWORD",
        hide_env_values = true,
        requires = "upstream_master_user"
    )]
    pub upstream_master_password: Option<String>,
    /// Address of the Prometheus metrics listener (`GET /metrics`, no auth),
    /// or `off`. Not served on the API port.
    #[arg(long, env = "FASTVIEW_METRICS_LISTEN", default_value = "127.0.0.1:9090", value_parser = parse_metrics_listen)]
    pub metrics_listen: MetricsListen,
}

/// `--metrics-listen`: an address, or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricsListen(pub Option<SocketAddr>);

fn parse_metrics_listen(value: &str) -> Result<MetricsListen, String> {
    if value.eq_ignore_ascii_case("off") {
        return Ok(MetricsListen(None));
    }
    value
        .parse()
        .map(|address| MetricsListen(Some(address)))
        .map_err(|_| format!("expected an address such as 127.0.0.1:9090, or off: {value}"))
}

fn parse_upstream_smtp(value: &str) -> Result<String, String> {
    let parsed = url::Url::parse(value).map_err(|error| format!("{value}: {error}"))?;
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(format!("{value}: no credentials: each user's own are used"));
    }
    crate::mail::relay::Relay::from_url(value)
        .map(|_| value.to_string())
        .map_err(|error| error.to_string())
}

fn parse_smtp_relay(value: &str) -> Result<String, String> {
    crate::mail::relay::Relay::from_url(value)
        .map(|_| value.to_string())
        .map_err(|error| error.to_string())
}

fn parse_trusted_proxy(value: &str) -> Result<IpNet, String> {
    let value = value.trim();
    value
        .parse::<IpNet>()
        .or_else(|_| value.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| format!("expected an IP address or CIDR such as 10.0.0.0/8: {value}"))
}

impl ServeArgs {
    /// Flags that only an IMAP upstream takes, given with a JMAP one.
    fn imap_only_flags(&self) -> Option<&'static str> {
        if !matches!(self.upstream, Some(crate::proxy::UpstreamTarget::Jmap(_))) {
            return None;
        }
        if self.upstream_smtp.is_some() {
            Some("--upstream-smtp (a JMAP upstream's own EmailSubmission sends)")
        } else if self.upstream_master_user.is_some() {
            Some("--upstream-master-user")
        } else {
            None
        }
    }

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
                structure_bytes: self.structure_cache_mb << 20,
                metadata_bytes: self.metadata_cache_mb << 20,
                list_text_bytes: self.list_text_cache_mb << 20,
            },
            connections: ConnectionLimits {
                header_read_timeout: Duration::from_secs(self.header_read_timeout),
                idle_timeout: Duration::from_secs(self.idle_timeout),
                max_connections: self.max_connections,
                min_upload_rate: self.min_upload_rate.saturating_mul(1024),
            },
            trusted_proxies: self.trusted_proxy.clone(),
            limits: crate::jmap::Limits {
                max_sent_messages_per_hour: self.max_sent_messages_per_hour,
                max_sent_recipients_per_hour: self.max_sent_recipients_per_hour,
                ..crate::jmap::Limits::default()
            },
            // Checked when parsed.
            smtp_relay: self.smtp_relay.as_deref().and_then(|url| {
                let timeouts = crate::mail::relay::RelayTimeouts {
                    step: Duration::from_secs(self.smtp_timeout),
                    ..Default::default()
                };
                crate::mail::relay::Relay::from_url(url)
                    .ok()
                    .map(|relay| std::sync::Arc::new(relay.with_timeouts(timeouts)))
            }),
            ..ServeOptions::default()
        }
    }

    /// The proxy wing's options these flags give, when `--upstream` is set.
    pub fn proxy_options(&self) -> Option<crate::proxy::ProxyOptions> {
        let poll = std::time::Duration::from_secs(self.upstream_poll);
        let idle = std::time::Duration::from_secs(self.upstream_idle_minutes * 60);
        match self.upstream.as_ref()? {
            crate::proxy::UpstreamTarget::Jmap(url) => Some(crate::proxy::ProxyOptions::Jmap(
                crate::proxy::jmap::JmapUpstreamOptions {
                    url: url.clone(),
                    poll,
                    poll_active: std::time::Duration::from_secs(self.upstream_poll_active),
                    idle,
                    trusts_forwarded: self.upstream_trusts_forwarded,
                    outage_grace: std::time::Duration::from_secs(
                        self.upstream_outage_grace_minutes.saturating_mul(60),
                    ),
                    syncs_at_once: self.upstream_syncs_at_once,
                },
            )),
            crate::proxy::UpstreamTarget::Imap(url) => Some(crate::proxy::ProxyOptions::Imap(
                crate::proxy::imap::UpstreamOptions {
                    url: url.clone(),
                    poll,
                    poll_active: std::time::Duration::from_secs(self.upstream_poll_active),
                    idle,
                    cache_bytes: self.upstream_cache_mb.saturating_mul(1 << 20),
                    outage_grace: std::time::Duration::from_secs(
                        self.upstream_outage_grace_minutes.saturating_mul(60),
                    ),
                    smtp: self.upstream_smtp.clone(),
                    syncs_at_once: self.upstream_syncs_at_once,
                    master: self
                        .upstream_master_user
                        .clone()
                        .zip(self.upstream_master_password.clone())
                        .map(|(user, password)| crate::proxy::imap::MasterLogin { user, password }),
                },
            )),
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
    check_before_serving(app, args).await?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let mut options = args.options();
    options.connections.max_connections = connections_within_open_files(args.max_connections);
    let proxy_options = args.proxy_options();
    let crate::assembly::Instance {
        router,
        state,
        proxy,
    } = crate::assembly::assemble(app, &options, proxy_options.as_ref());
    // One route for the calls and the queue: one set of relay connections.
    let route = state.jmap.route.clone();
    if let Some(crate::proxy::Proxy::Imap(upstream)) = &proxy {
        upstream.spawn_eviction(std::time::Duration::from_secs(60));
        let started = upstream.start_all().await?;
        if started > 0 {
            eprintln!("syncing {started} accounts with the upstream's master login");
        }
    }
    let shutdown = shutdown_signal().shared();
    let metrics = serve_metrics(args, state, options.connections, shutdown.clone()).await?;
    let _collector = (args.gc_every_minutes > 0).then(|| {
        crate::mail::gc::spawn_periodic(
            app.store.clone(),
            app.blobs.clone(),
            args.gc.options(),
            std::time::Duration::from_secs(args.gc_every_minutes * 60),
        )
    });
    // Deliveries a submission left queued (a failure, a restart).
    let _deliveries = crate::mail::delivery::spawn_periodic(
        app.store.clone(),
        app.blobs.clone(),
        route.clone(),
        std::time::Duration::from_secs(15),
    );
    announce(args, &route, listener.local_addr()?);
    crate::http::serve(listener, router, options.connections, shutdown).await?;
    if let Some(metrics) = metrics {
        metrics.await??;
    }
    Ok(ExitCode::SUCCESS)
}

/// What must hold before `serve` binds anything: the flags agree with the
/// upstream they name, a JMAP upstream's client can be made (a TLS set-up
/// that cannot work stops the command, not each request), and the data
/// dir serves the upstream it recorded, or none (one data dir, one
/// upstream; recorded on its first `serve --upstream`).
async fn check_before_serving(app: &App, args: &ServeArgs) -> anyhow::Result<()> {
    if let Some(flag) = args.imap_only_flags() {
        anyhow::bail!("{flag} is for an IMAP upstream, not a JMAP one");
    }
    if let Some(crate::proxy::UpstreamTarget::Jmap(url)) = &args.upstream {
        crate::proxy::jmap::JmapUpstream::new(
            url.clone(),
            std::sync::Arc::new(crate::metrics::Metrics::new()),
        )?;
    }
    if app.store.search_index_unfilled().await? {
        tracing::warn!(
            "no stored email is in the full-text index: text searches find nothing \
             until `fastview reproject` indexes them (after migration 0312, once)"
        );
    }
    let recorded = app.store.upstream_source().await?;
    match (&args.upstream, &recorded) {
        (Some(url), None) => {
            if !app.store.list_accounts().await?.is_empty() {
                anyhow::bail!(
                    "{} has accounts of its own; --upstream {url} needs a data dir of its own",
                    app.data_dir.display()
                );
            }
            app.store.set_upstream_source(&url.to_string()).await?;
        }
        (Some(url), Some(recorded)) if url.to_string() != *recorded => anyhow::bail!(
            "{} mirrors {recorded}, not {url}: one data dir serves one upstream",
            app.data_dir.display()
        ),
        (None, Some(recorded)) => anyhow::bail!(
            "{} mirrors {recorded}: serve it with --upstream {recorded}",
            app.data_dir.display()
        ),
        _ => {}
    }
    Ok(())
}

/// Serves `GET /metrics` on `--metrics-listen` (64 connections at most),
/// unless it is `off`.
async fn serve_metrics(
    args: &ServeArgs,
    state: std::sync::Arc<crate::http::AppState>,
    connections: ConnectionLimits,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<Option<tokio::task::JoinHandle<std::io::Result<()>>>> {
    let Some(metrics_address) = args.metrics_listen.0 else {
        return Ok(None);
    };
    let metrics_listener = tokio::net::TcpListener::bind(metrics_address)
        .await
        .with_context(|| {
            format!(
                "cannot listen on {metrics_address} for metrics (--metrics-listen off disables it)"
            )
        })?;
    tracing::info!(address = %metrics_listener.local_addr()?, "serving metrics");
    let limits = ConnectionLimits {
        max_connections: 64,
        ..connections
    };
    Ok(Some(tokio::spawn(crate::http::serve(
        metrics_listener,
        crate::http::metrics_router(state),
        limits,
        shutdown,
    ))))
}

/// Says on stderr what this instance serves: the upstream it stands in
/// front of, the relay, the address.
fn announce(args: &ServeArgs, route: &crate::mail::delivery::Route, address: std::net::SocketAddr) {
    match &args.upstream {
        Some(crate::proxy::UpstreamTarget::Imap(upstream)) => {
            eprintln!("mirroring the IMAP server {upstream}: users log in with its credentials");
        }
        Some(crate::proxy::UpstreamTarget::Jmap(upstream)) => {
            eprintln!("in front of the JMAP server {upstream}: users log in with its credentials");
        }
        None => {}
    }
    if let Some(relay) = route.relay() {
        eprintln!("mail to other servers goes through the SMTP relay {relay}");
    }
    tracing::info!(%address, read_levels = ?args.read_levels, fast_view = ?args.fast_view, "serving JMAP");
    match &args.public_url {
        Some(public) => eprintln!(
            "serving JMAP on {address}, for clients at {}/.well-known/jmap",
            public.trim_end_matches('/')
        ),
        None => eprintln!("serving JMAP at http://{address}/.well-known/jmap"),
    }
}

/// File descriptors kept for everything but client connections: the
/// database pool, blob files, the metrics listener's 64 connections, SMTP
/// and upstream connections, the log.
pub const DESCRIPTORS_KEPT: u64 = 256;

/// The connection cap a process may keep with `open_files` descriptors:
/// `requested`, or fewer so that [`DESCRIPTORS_KEPT`] stay for the rest
/// (at least 1).
pub fn connection_cap(requested: usize, open_files: u64) -> usize {
    let room = open_files.saturating_sub(DESCRIPTORS_KEPT).max(1);
    requested.min(usize::try_from(room).unwrap_or(usize::MAX))
}

/// Raises the soft limit on open files to the hard limit (issue 43: the
/// usual soft limit, 1,024, is under the default `--max-connections` of
/// 4,096, and past it every accept and file open fails) and returns the
/// connection cap that fits under it ([`connection_cap`]), saying in the
/// log when it is lower than asked.
fn connections_within_open_files(requested: usize) -> usize {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let (soft, hard) = (limit.current, limit.maximum);
    if soft != hard {
        let raised = rustix::process::Rlimit {
            current: hard,
            maximum: hard,
        };
        match setrlimit(Resource::Nofile, raised) {
            Ok(()) => tracing::info!(from = ?soft, to = ?hard, "raised the open-file limit"),
            Err(error) => tracing::warn!(%error, "could not raise the open-file limit"),
        }
    }
    let open_files = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
    let cap = connection_cap(requested, open_files);
    if cap < requested {
        tracing::warn!(
            open_files,
            "--max-connections {requested} capped at {cap}: the open-file limit is \
             {open_files} and {DESCRIPTORS_KEPT} stay for the database, blobs and upstreams \
             (raise the hard limit, e.g. LimitNOFILE=, to allow more)"
        );
    }
    cap
}

/// `fastview serve`.
pub async fn serve(global: &GlobalArgs, args: ServeArgs) -> anyhow::Result<ExitCode> {
    let app = global.open().await?;
    serve_app(&app, &args).await
}

/// `--public-url`: an absolute `http` or `https` URL with a host and no
/// query or fragment (the session's URLs are built by appending to it).
fn parse_public_url(value: &str) -> Result<String, String> {
    let rest = value
        .strip_prefix("https://")
        .or_else(|| value.strip_prefix("http://"))
        .ok_or_else(|| format!("{value:?} must start with https:// or http://"))?;
    let host = rest.split('/').next().unwrap_or_default();
    if host.is_empty() || host.contains(['@', ' ']) {
        return Err(format!("{value:?} has no host"));
    }
    if value.contains(['?', '#']) {
        return Err(format!("{value:?} must have no query or fragment"));
    }
    Ok(value.trim_end_matches('/').to_string())
}

/// `--cors-origin`: an origin as a browser sends it, `http(s)://host[:port]`
/// (no path); `*` is refused (with credentials, CORS forbids it, and it
/// would let any site act for a logged-in user).
fn parse_cors_origin(value: &str) -> Result<String, String> {
    let value = value.trim();
    if value == "*" {
        return Err(
            "`*` cannot be used: name each origin, e.g. https://webmail.example.com".into(),
        );
    }
    let rest = value
        .strip_prefix("https://")
        .or_else(|| value.strip_prefix("http://"))
        .ok_or_else(|| format!("{value:?} must be an origin: https://host[:port]"))?;
    let host = rest.trim_end_matches('/');
    if host.is_empty() || host.contains(['/', '?', '#', '@', ' ', '*']) {
        return Err(format!(
            "{value:?} must be an origin: https://host[:port], no path"
        ));
    }
    Ok(value.trim_end_matches('/').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_urls_and_origins_are_checked_when_parsed() {
        assert_eq!(
            parse_public_url("https://mail.example.com/").unwrap(),
            "https://mail.example.com"
        );
        assert_eq!(
            parse_public_url("http://127.0.0.1:8080/jmap").unwrap(),
            "http://127.0.0.1:8080/jmap"
        );
        assert!(parse_public_url("mail.example.net").is_err());
        assert!(parse_public_url("https://x.example/?a").is_err());
        assert!(parse_public_url("https:///path").is_err());
        assert_eq!(
            parse_cors_origin("http://127.0.0.1:8795").unwrap(),
            "http://127.0.0.1:8795"
        );
        assert!(parse_cors_origin("*").is_err());
        assert!(parse_cors_origin("webmail.example.com").is_err());
        assert!(parse_cors_origin("https://a.example/app").is_err());
    }

    #[test]
    fn the_connection_cap_leaves_descriptors_for_the_rest() {
        assert_eq!(connection_cap(4096, 1024), 768);
        assert_eq!(connection_cap(4096, 1_048_576), 4096);
        assert_eq!(connection_cap(100, 1024), 100);
        assert_eq!(connection_cap(4096, 100), 1);
        assert_eq!(connection_cap(4096, u64::MAX), 4096);
    }
}

//! `fastview gc`: one run of the blob garbage collector
//! ([`crate::mail::gc`]); safe while `serve` and `import` run.

use std::process::ExitCode;
use std::time::Duration;

use super::GlobalArgs;
use crate::mail::gc::{GcOptions, collect};

/// Flags of `fastview gc`.
#[derive(Debug, Clone, clap::Args)]
pub struct GcArgs {
    /// Hours an upload that no email uses is kept before it is deleted
    /// (RFC 8620 §6.1 asks for at least one).
    #[arg(long, env = "FASTVIEW_UPLOAD_TTL_HOURS", default_value_t = 24, value_parser = clap::value_parser!(u64).range(1..))]
    pub upload_ttl_hours: u64,
}

impl GcArgs {
    /// The collector's options these flags give.
    pub fn options(&self) -> GcOptions {
        GcOptions {
            upload_ttl: Duration::from_secs(self.upload_ttl_hours * 3600),
        }
    }
}

/// Runs the collector once and prints what it did.
pub async fn gc(global: &GlobalArgs, args: GcArgs) -> anyhow::Result<ExitCode> {
    let app = global.open().await?;
    let report = collect(app.store.as_ref(), &app.blobs, args.options()).await?;
    println!(
        "expired {} uploads, scanned {} blobs, deleted {} unreferenced blobs and {} abandoned uploads",
        report.uploads_expired, report.blobs_scanned, report.blobs_deleted, report.staging_deleted
    );
    Ok(ExitCode::SUCCESS)
}

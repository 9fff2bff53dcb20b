//! `fastview reproject [--account EMAIL]`: rebuilds the fast-view projection
//! (ADR 0003), the stored part trees (`mail/structure.rs`, ADR 0002) and the
//! full-text index (`mail/search.rs`, ADR 0006) from the stored messages,
//! through the ingest path (`ingest::prepare`): how mail stored before any
//! of them existed, or copied by `migrate-store`, gets them.
//!
//! Idempotent (it recomputes and replaces every row, so a second run gives
//! the same table), resumable (the last finished email id is kept in
//! `{data-dir}/reproject.checkpoint`, with the schema's version, until the
//! run completes, and a new run under the same schema
//! continues after it), and safe while serving (rows are replaced in place,
//! never deleted; a reader sees the old or the new row).

use std::process::ExitCode;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};

use super::GlobalArgs;
use crate::mail::ingest::prepare;

/// Emails recomputed per batch (one write transaction each).
const BATCH: i64 = 256;

/// Flags of `fastview reproject`.
#[derive(Debug, clap::Args)]
pub struct ReprojectArgs {
    /// Only this account; default: every account.
    #[arg(long)]
    pub account: Option<String>,
}

/// `fastview reproject`.
pub async fn reproject(global: &GlobalArgs, args: ReprojectArgs) -> anyhow::Result<ExitCode> {
    let app = global.open().await?;
    let account = match &args.account {
        Some(email) => Some(
            app.store
                .account_by_email(email)
                .await?
                .with_context(|| format!("no account {email}"))?
                .id,
        ),
        None => None,
    };
    let checkpoint = app.data_dir.join(format!(
        "reproject.checkpoint{}",
        account.map(|a| format!(".{a}")).unwrap_or_default()
    ));
    // `{email id} {schema version}`: a checkpoint written under another
    // schema (or before the version was written) is not resumed, since a
    // migration may have dropped what the emails before it got (0312).
    let schema = crate::store::schema_version();
    let saved = std::fs::read_to_string(&checkpoint).ok();
    let mut after: i64 = match saved.as_deref().map(str::split_whitespace) {
        Some(mut fields) => match (fields.next(), fields.next()) {
            (Some(id), Some(version)) if version.parse() == Ok(schema) => id.parse().unwrap_or(0),
            _ => {
                eprintln!("the checkpoint was written under another schema: starting over");
                0
            }
        },
        None => 0,
    };
    if after > 0 {
        eprintln!("resuming after email {after}");
    }
    let progress = ProgressBar::new_spinner().with_style(
        ProgressStyle::with_template("{spinner} {pos} rows {per_sec}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    let mut rows_written = 0u64;
    loop {
        let batch = app.store.email_blobs(account, after, BATCH, false).await?;
        let Some(last) = batch.last().map(|(id, _)| *id) else {
            break;
        };
        let blob_ids: Vec<String> = batch.iter().map(|(_, blob_id)| blob_id.clone()).collect();
        let raws = app.blobs.get_many(&blob_ids).await;
        let rows = tokio::task::spawn_blocking(move || {
            batch
                .into_iter()
                .zip(raws)
                .filter_map(|((id, blob_id), raw)| match raw {
                    Ok(Some(raw)) => {
                        let email = prepare(raw, Vec::new(), Vec::new(), |_| 0).email;
                        Some((id, email.fast_view, email.structure, email.search))
                    }
                    // Never a projection of nothing: `fastview fsck` reports it.
                    Ok(None) | Err(_) => {
                        tracing::warn!(email = id, %blob_id, "blob missing or corrupt; skipped");
                        None
                    }
                })
                .collect::<Vec<_>>()
        })
        .await?;
        rows_written += rows.len() as u64;
        let mut views = Vec::with_capacity(rows.len());
        let mut trees = Vec::with_capacity(rows.len());
        let mut texts = Vec::with_capacity(rows.len());
        for (id, view, tree, text) in rows {
            views.push((id, view));
            trees.push((id, tree));
            texts.push((id, text));
        }
        app.store.put_fast_views(&views).await?;
        app.store.put_body_structures(&trees).await?;
        app.store.put_search_texts(&texts).await?;
        after = last;
        std::fs::write(&checkpoint, format!("{after} {schema}"))?;
        progress.set_position(rows_written);
    }
    progress.finish_and_clear();
    let _ = std::fs::remove_file(&checkpoint);
    println!("reprojected {rows_written} emails");
    Ok(ExitCode::SUCCESS)
}

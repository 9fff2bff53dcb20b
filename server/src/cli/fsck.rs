//! `fastview fsck`: checks every blob the database refers to
//! ([`crate::mail::fsck`]); lists each missing or corrupt one and exits
//! with status 2 when there is any (1 when the check itself failed).

use std::process::ExitCode;

use indicatif::{ProgressBar, ProgressStyle};

use super::GlobalArgs;
use crate::mail::fsck::check;

/// Checks the blobs and prints the findings.
pub async fn fsck(global: &GlobalArgs) -> anyhow::Result<ExitCode> {
    let app = global.open().await?;
    let progress = ProgressBar::new_spinner();
    progress.set_style(
        ProgressStyle::with_template("{spinner} {pos} blobs checked {per_sec}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    let report = check(app.store.as_ref(), &app.blobs, |checked| {
        progress.set_position(checked)
    })
    .await?;
    progress.finish_and_clear();
    for id in &report.missing {
        println!("missing {id}");
    }
    for id in &report.corrupt {
        println!("corrupt {id}");
    }
    println!(
        "checked {} blobs: {} missing, {} corrupt",
        report.checked,
        report.missing.len(),
        report.corrupt.len()
    );
    if report.is_clean() {
        Ok(ExitCode::SUCCESS)
    } else {
        println!("upload or import the original bytes again to repair a blob");
        Ok(ExitCode::from(2))
    }
}

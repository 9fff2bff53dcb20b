//! `fastview import --account EMAIL [--mailbox NAME] PATH...`: Maildir
//! folders, `*.mbox` and `*.eml` files into an account (formats and rules in
//! [`crate::mail::import_source`]). Importing the same input twice adds
//! nothing (duplicates are the same bytes, by content hash). Works while
//! `serve` runs on the same data dir.
//!
//! The last line printed is exactly
//! `imported N, duplicates skipped N, failed N, skipped N, R msg/s`,
//! with each failure listed above it. Exit status 2 when any message failed.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};

use super::GlobalArgs;
use crate::app::App;
use crate::mail::import_source::{self, SourceItem, SourceMessage};
use crate::mail::ingest::{BatchOutcome, Pipeline, PreparedEmail, prepare};
use crate::store::{FOLDER_SORT_ORDER, Inserted, MailboxRow, NewMailbox};

/// Messages stored per transaction.
const BATCH: usize = 256;

/// Flags of `fastview import`.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The account to import into.
    #[arg(long, env = "FASTVIEW_ACCOUNT")]
    pub account: String,
    /// The mailbox (name or role, created if missing); default: the inbox.
    #[arg(long)]
    pub mailbox: Option<String>,
    /// Maildir folders, .mbox files, .eml files, or folders holding them.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
}

/// Counts of one import run.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ImportCounts {
    pub imported: u64,
    pub duplicates: u64,
    pub failed: u64,
    pub skipped: u64,
}

impl ImportCounts {
    /// Counts a stored batch's outcome; a batch that failed counts each of
    /// its messages (`origins`, in order) as failed and lists them with the
    /// error in `failures`.
    fn record(&mut self, outcome: BatchOutcome, origins: &[String], failures: &mut Vec<String>) {
        match outcome {
            Ok(outcomes) => {
                for outcome in outcomes {
                    match outcome {
                        Inserted::New(_) => self.imported += 1,
                        Inserted::Duplicate(_) => self.duplicates += 1,
                    }
                }
            }
            Err(error) => {
                self.failed += origins.len() as u64;
                failures.extend(
                    origins
                        .iter()
                        .map(|origin| format!("failed: {origin}: {error}")),
                );
            }
        }
    }
}

/// Maps Maildir++ folder paths to mailbox ids, creating mailboxes on first use.
struct MailboxResolver {
    app: App,
    account: i64,
    target: i64,
    mailboxes: Vec<MailboxRow>,
    created: HashMap<String, i64>,
}

impl MailboxResolver {
    async fn resolve(&mut self, folder: Option<&str>) -> anyhow::Result<i64> {
        let Some(folder) = folder.filter(|f| !f.is_empty()) else {
            return Ok(self.target);
        };
        if let Some(id) = self.created.get(folder) {
            return Ok(*id);
        }
        let mut parent: Option<i64> = None;
        for name in folder.split('/') {
            let existing = self
                .mailboxes
                .iter()
                .find(|m| m.parent_id == parent && m.name.eq_ignore_ascii_case(name))
                .map(|m| m.id);
            let id = match existing {
                Some(id) => id,
                None => {
                    let new = NewMailbox {
                        parent_id: parent,
                        name: name.to_string(),
                        role: None,
                        sort_order: FOLDER_SORT_ORDER,
                        is_subscribed: true,
                    };
                    let id = self.app.store.create_mailbox(self.account, &new).await?;
                    self.mailboxes = self.app.store.mailboxes(self.account).await?;
                    id
                }
            };
            parent = Some(id);
        }
        let id = parent.unwrap_or(self.target);
        self.created.insert(folder.to_string(), id);
        Ok(id)
    }
}

/// Finds the mailbox `name` (by name or role, case-insensitive) or creates it; `None` is the inbox.
pub async fn target_mailbox(app: &App, account: i64, name: Option<&str>) -> anyhow::Result<i64> {
    let mailboxes = app.store.mailboxes(account).await?;
    let wanted = name.unwrap_or("inbox");
    if let Some(mailbox) = mailboxes.iter().find(|m| {
        m.parent_id.is_none() && m.name.eq_ignore_ascii_case(wanted)
            || m.role.as_deref() == Some(&wanted.to_lowercase())
    }) {
        return Ok(mailbox.id);
    }
    if name.is_none() {
        bail!("the account has no inbox");
    }
    let new = NewMailbox {
        parent_id: None,
        name: wanted.to_string(),
        role: None,
        sort_order: FOLDER_SORT_ORDER,
        is_subscribed: true,
    };
    Ok(app.store.create_mailbox(account, &new).await?)
}

fn prepare_source(message: SourceMessage, mailbox: i64) -> PreparedEmail {
    let SourceMessage { raw, keywords, .. } = &message;
    let (raw, keywords) = (raw.clone(), keywords.clone());
    prepare(raw, vec![mailbox], keywords, |parsed| {
        import_source::received_at(&message, parsed)
    })
}

/// `fastview import`.
pub async fn import(global: &GlobalArgs, args: ImportArgs) -> anyhow::Result<ExitCode> {
    let app = global.open_own("fastview import").await?;
    let account = app
        .store
        .account_by_email(&args.account)
        .await?
        .with_context(|| format!("no account {}", args.account))?;
    let target = target_mailbox(&app, account.id, args.mailbox.as_deref()).await?;
    let mut resolver = MailboxResolver {
        app: app.clone(),
        account: account.id,
        target,
        mailboxes: app.store.mailboxes(account.id).await?,
        created: HashMap::new(),
    };
    let progress = ProgressBar::new_spinner().with_style(
        ProgressStyle::with_template("{spinner} {pos} messages {per_sec} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    let started = Instant::now();
    let (sender, mut receiver) = tokio::sync::mpsc::channel::<SourceItem>(BATCH * 2);
    let paths = args.paths.clone();
    let walker = tokio::task::spawn_blocking(move || {
        for item in import_source::walk(&paths) {
            if sender.blocking_send(item).is_err() {
                break;
            }
        }
    });
    let mut counts = ImportCounts::default();
    let mut failures = Vec::new();
    // Each batch is prepared while the one before it is stored; the origins
    // of the batch being stored name its messages should it fail.
    let mut pipeline = Pipeline::new(app.store.clone(), app.blobs.clone(), account.id);
    let mut storing: Vec<String> = Vec::new();
    let mut done = false;
    while !done {
        let batch = next_batch(&mut receiver, &mut resolver, &mut counts, &mut failures).await;
        let messages = match batch {
            Ok((messages, last)) => {
                done = last;
                messages
            }
            Err(error) => {
                // The batch prepared already is stored first.
                if let Some(outcome) = pipeline.finish().await {
                    counts.record(outcome, &storing, &mut failures);
                }
                for failure in &failures {
                    println!("{failure}");
                }
                return Err(error);
            }
        };
        if messages.is_empty() {
            continue;
        }
        let origins: Vec<String> = messages.iter().map(|(m, _)| m.origin.clone()).collect();
        let jobs: Vec<_> = messages
            .into_iter()
            .map(|(message, mailbox)| move || prepare_source(message, mailbox))
            .collect();
        if let Some(outcome) = pipeline.push(jobs).await {
            counts.record(outcome, &storing, &mut failures);
        }
        storing = origins;
        progress.set_position(counts.imported + counts.duplicates);
    }
    if let Some(outcome) = pipeline.finish().await {
        counts.record(outcome, &storing, &mut failures);
    }
    let _ = walker.await;
    progress.finish_and_clear();
    // Fresh planner statistics for what was loaded; the import stands
    // without them.
    if let Err(error) = app.store.analyze().await {
        eprintln!("warning: refreshing the planner statistics failed: {error}");
    }
    Ok(report(counts, &failures, started))
}

/// Up to [`BATCH`] messages from the walk, each with the mailbox its
/// folder resolves to (failed and skipped items counted on the way), and
/// whether the walk is over.
async fn next_batch(
    receiver: &mut tokio::sync::mpsc::Receiver<SourceItem>,
    resolver: &mut MailboxResolver,
    counts: &mut ImportCounts,
    failures: &mut Vec<String>,
) -> anyhow::Result<(Vec<(SourceMessage, i64)>, bool)> {
    let mut messages: Vec<(SourceMessage, i64)> = Vec::with_capacity(BATCH);
    while messages.len() < BATCH {
        let Some(item) = receiver.recv().await else {
            return Ok((messages, true));
        };
        match item {
            SourceItem::Message(message) => {
                let mailbox = resolver.resolve(message.folder.as_deref()).await?;
                messages.push((message, mailbox));
            }
            SourceItem::Failed { origin, reason } => {
                counts.failed += 1;
                failures.push(format!("failed: {origin}: {reason}"));
            }
            SourceItem::Skipped { .. } => counts.skipped += 1,
        }
    }
    Ok((messages, false))
}

/// Prints the failures and the counts; exit status 2 when any failed.
fn report(counts: ImportCounts, failures: &[String], started: Instant) -> ExitCode {
    for failure in failures {
        println!("{failure}");
    }
    let seconds = started.elapsed().as_secs_f64().max(1e-9);
    let rate = (counts.imported + counts.duplicates) as f64 / seconds;
    println!(
        "imported {}, duplicates skipped {}, failed {}, skipped {}, {:.0} msg/s",
        counts.imported, counts.duplicates, counts.failed, counts.skipped, rate
    );
    if counts.failed > 0 {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    }
}

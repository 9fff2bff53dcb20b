//! `fastview migrate-store --from URL --to URL`: copies every row of one
//! store into another (typically the SQLite store of a data dir into a fresh
//! PostgreSQL database), preserving ids, password hashes and state counters,
//! so clients keep their ids and state strings; with `--to-blob-url` it also
//! copies the blobs into another blob store (e.g. S3).
//!
//! Order: accounts; then per account its mailboxes, blob grants (blobs
//! copied first), change log and thread refs; then all emails in id order,
//! in batches of one transaction each (memberships, header block and
//! projection row with their email; blobs copied before the batch).
//!
//! Resumable: every import skips rows already in the target, per-account
//! tables whose row counts already match are skipped, and the email copy
//! continues after the highest email id in the target (batches commit in id
//! order). Re-running after an interruption continues; re-running after a
//! complete copy changes nothing. The target should not serve clients (nor
//! the source take writes) until the copy is done.

use std::collections::HashSet;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use futures::{StreamExt, TryStreamExt};
use indicatif::{ProgressBar, ProgressStyle};

use super::GlobalArgs;
use crate::app::{default_database_url, open_store};
use crate::blob::BlobStore;
use crate::store::Store;
use crate::store::raw::{RawCursor, RawRows, RawTable, RowCounts};

/// Rows per page of the per-account tables.
const PAGE: i64 = 2000;
/// Blobs copied at once.
const BLOB_CONCURRENCY: usize = 16;

/// Flags of `fastview migrate-store`.
#[derive(Debug, clap::Args)]
pub struct MigrateStoreArgs {
    /// The database to copy from [default: the global --database-url, else
    /// the SQLite database of --data-dir].
    #[arg(long, env = "FASTVIEW_MIGRATE_FROM")]
    pub from: Option<String>,
    /// The database to copy into (`postgres://…` or `sqlite://…`); created
    /// tables are migrated first. It should be empty or a partial copy of
    /// the source.
    #[arg(long, env = "FASTVIEW_MIGRATE_TO")]
    pub to: String,
    /// The blob store to read blobs from [default: the global --blob-url,
    /// else <data-dir>/blobs].
    #[arg(long, env = "FASTVIEW_FROM_BLOB_URL")]
    pub from_blob_url: Option<String>,
    /// A blob store to copy the blobs into (`s3://bucket/prefix`,
    /// `file:///path` or a path); without it, or when it is the source's,
    /// blobs are not copied.
    #[arg(long, env = "FASTVIEW_TO_BLOB_URL")]
    pub to_blob_url: Option<String>,
    /// Emails per batch (one target transaction each).
    #[arg(long, env = "FASTVIEW_MIGRATE_BATCH", default_value_t = 500, value_parser = clap::value_parser!(i64).range(1..))]
    pub batch_size: i64,
    /// Stop (exit status 3) after this many email batches: for testing that
    /// a re-run resumes.
    #[arg(long, hide = true)]
    pub stop_after_batches: Option<u64>,
}

/// What one run copied.
#[derive(Debug, Default)]
struct Copied {
    rows: u64,
    emails: u64,
    blobs: u64,
    missing_blobs: u64,
}

/// Blob copying between two stores; remembers what this run already checked.
struct BlobCopy {
    from: BlobStore,
    to: BlobStore,
    done: HashSet<String>,
}

impl BlobCopy {
    /// Copies the blobs among `ids` that the target lacks; returns (copied, missing in source).
    async fn copy(&mut self, ids: impl IntoIterator<Item = String>) -> anyhow::Result<(u64, u64)> {
        let todo: Vec<String> = ids
            .into_iter()
            .filter(|id| !self.done.contains(id))
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        let (from, to) = (&self.from, &self.to);
        let outcomes: Vec<u8> = futures::stream::iter(todo.clone())
            .map(|id| async move {
                if to.exists(&id).await? {
                    return Ok::<u8, anyhow::Error>(0);
                }
                match from.get(&id).await? {
                    Some(bytes) => {
                        to.put_with_id(&id, bytes).await?;
                        Ok(1)
                    }
                    None => {
                        tracing::warn!(blob_id = %id, "blob missing in the source blob store");
                        Ok(2)
                    }
                }
            })
            .buffer_unordered(BLOB_CONCURRENCY)
            .try_collect()
            .await?;
        self.done.extend(todo);
        let copied = outcomes.iter().filter(|o| **o == 1).count() as u64;
        let missing = outcomes.iter().filter(|o| **o == 2).count() as u64;
        Ok((copied, missing))
    }
}

/// `fastview migrate-store`.
pub async fn migrate_store(
    global: &GlobalArgs,
    args: MigrateStoreArgs,
) -> anyhow::Result<ExitCode> {
    let (from, to) = open_stores(global, &args).await?;
    let blobs = blob_copy(global, &args)?;
    let progress = progress_bar(from.as_ref()).await?;
    let mut migration = Migration {
        from,
        to,
        blobs,
        copied: Copied::default(),
        progress,
    };
    let accounts = migration.copy_accounts().await?;
    for account in &accounts {
        migration.copy_account_tables(*account).await?;
    }
    if let Some(stopped) = migration
        .copy_emails(args.batch_size, args.stop_after_batches)
        .await?
    {
        return Ok(stopped);
    }
    migration.progress.finish_and_clear();
    migration.check_complete().await?;
    Ok(ExitCode::SUCCESS)
}

/// The source store (`--from`, else the global database) and the target.
async fn open_stores(
    global: &GlobalArgs,
    args: &MigrateStoreArgs,
) -> anyhow::Result<(Arc<dyn Store>, Arc<dyn Store>)> {
    let from_url = args
        .from
        .clone()
        .or_else(|| global.database_url.clone())
        .unwrap_or_else(|| default_database_url(&global.data_dir));
    if from_url == args.to {
        bail!("--from and --to are the same database");
    }
    let from = open_store(&from_url, Some(4))
        .await
        .with_context(|| format!("opening the source {from_url}"))?;
    let to = open_store(&args.to, Some(4))
        .await
        .context("opening the target")?;
    Ok((from, to))
}

/// The blob copy `--to-blob-url` asks for, unless it names the source's
/// blob store.
fn blob_copy(global: &GlobalArgs, args: &MigrateStoreArgs) -> anyhow::Result<Option<BlobCopy>> {
    let Some(to_url) = &args.to_blob_url else {
        return Ok(None);
    };
    let from_blobs = match args.from_blob_url.as_deref().or(global.blob_url.as_deref()) {
        Some(url) => BlobStore::open(url)?,
        None => BlobStore::local(global.data_dir.join("blobs"))?,
    };
    let to_blobs = BlobStore::open(to_url)?;
    let copy = (from_blobs.url() != to_blobs.url()).then(|| BlobCopy {
        from: from_blobs,
        to: to_blobs,
        done: HashSet::new(),
    });
    if let Some(copy) = &copy {
        eprintln!(
            "copying blobs from {} to {}",
            copy.from.url(),
            copy.to.url()
        );
    }
    Ok(copy)
}

/// A progress bar over every row of the source to copy.
async fn progress_bar(from: &dyn Store) -> anyhow::Result<ProgressBar> {
    let source_counts = from.raw_counts(None).await?;
    let total = source_counts.accounts
        + source_counts.mailboxes
        + source_counts.emails
        + source_counts.thread_refs
        + source_counts.account_blobs
        + source_counts.changes;
    Ok(ProgressBar::new(total.max(0) as u64).with_style(
        ProgressStyle::with_template("{msg:>12} [{bar:40}] {pos}/{len} rows {per_sec} eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    ))
}

/// One run of the copy: the two stores, the blob copy, what was copied.
struct Migration {
    from: Arc<dyn Store>,
    to: Arc<dyn Store>,
    blobs: Option<BlobCopy>,
    copied: Copied,
    progress: ProgressBar,
}

impl Migration {
    /// Accounts, then the target must hold exactly the source's accounts;
    /// returns their ids.
    async fn copy_accounts(&mut self) -> anyhow::Result<Vec<i64>> {
        self.progress.set_message("accounts");
        let accounts = self.copy_table(RawTable::Accounts, 0, PAGE).await?;
        check_same_accounts(self.from.as_ref(), self.to.as_ref()).await?;
        Ok(accounts)
    }

    /// The per-account tables of `account`, skipped where the counts
    /// already match.
    async fn copy_account_tables(&mut self, account: i64) -> anyhow::Result<()> {
        let (source, target) = (
            self.from.raw_counts(Some(account)).await?,
            self.to.raw_counts(Some(account)).await?,
        );
        for (table, label, rows, copied) in [
            (
                RawTable::Mailboxes,
                "mailboxes",
                source.mailboxes,
                target.mailboxes,
            ),
            (
                RawTable::AccountBlobs,
                "blobs",
                source.account_blobs,
                target.account_blobs,
            ),
            (
                RawTable::Changes,
                "change log",
                source.changes,
                target.changes,
            ),
            (
                RawTable::ThreadRefs,
                "thread refs",
                source.thread_refs,
                target.thread_refs,
            ),
        ] {
            if rows == copied {
                self.progress.inc(rows as u64);
                continue;
            }
            self.progress.set_message(label);
            // All mailboxes of an account in one page: a parent may come after its child.
            let page = if table == RawTable::Mailboxes {
                i64::MAX
            } else {
                PAGE
            };
            self.copy_table(table, account, page).await?;
        }
        Ok(())
    }

    /// Emails, after the last batch the target committed, `batch_size` a
    /// transaction; `Some` exit status (3) when stopped after
    /// `stop_after_batches`.
    async fn copy_emails(
        &mut self,
        batch_size: i64,
        stop_after_batches: Option<u64>,
    ) -> anyhow::Result<Option<ExitCode>> {
        self.progress.set_message("emails");
        let resume_after = self.to.raw_counts(None).await?.max_email_id;
        if resume_after > 0 {
            let already = self.to.raw_counts(None).await?.emails;
            self.progress.inc(already as u64);
            self.progress
                .suspend(|| eprintln!("resuming after email {resume_after}"));
        }
        let mut cursor = RawCursor {
            number: resume_after,
            ..RawCursor::default()
        };
        let mut batches = 0u64;
        loop {
            let rows = self
                .from
                .export_raw(RawTable::Emails, 0, &cursor, batch_size)
                .await?;
            let Some(next) = rows.cursor() else { break };
            if let RawRows::Emails(emails) = &rows {
                self.copy_blobs(emails.iter().map(|e| e.blob_id.clone()))
                    .await?;
            }
            self.copied.emails += self.to.import_raw(&rows).await?;
            self.progress.inc(rows.len() as u64);
            cursor = next;
            batches += 1;
            if stop_after_batches.is_some_and(|stop| batches >= stop) {
                self.progress.abandon();
                eprintln!("stopped after {batches} email batches (run again to resume)");
                return Ok(Some(ExitCode::from(3)));
            }
        }
        Ok(None)
    }

    /// Copies the blobs among `ids` the target lacks, when blobs are copied.
    async fn copy_blobs(&mut self, ids: impl IntoIterator<Item = String>) -> anyhow::Result<()> {
        if let Some(copy) = &mut self.blobs {
            let (n, missing) = copy.copy(ids).await?;
            self.copied.blobs += n;
            self.copied.missing_blobs += missing;
        }
        Ok(())
    }

    /// The copy is complete when every table has the source's row count;
    /// prints what was copied.
    async fn check_complete(&self) -> anyhow::Result<()> {
        let (source, target) = (
            self.from.raw_counts(None).await?,
            self.to.raw_counts(None).await?,
        );
        let mut mismatches = compare(&source, &target);
        // PostgreSQL keys thread refs by a digest of over-long message ids and
        // strips NUL, so distinct SQLite refs may become one: fewer is expected.
        if target.thread_refs < source.thread_refs && target.thread_refs > 0 {
            mismatches.retain(|m| !m.starts_with("thread refs"));
            eprintln!(
                "note: {} thread refs became {} (equal keys in the target)",
                source.thread_refs, target.thread_refs
            );
        }
        let copied = &self.copied;
        println!(
            "copied {} emails, {} other rows, {} blobs{}; target has {} accounts, {} mailboxes, {} emails",
            copied.emails,
            copied.rows,
            copied.blobs,
            if copied.missing_blobs > 0 {
                format!(
                    " ({} missing in the source blob store)",
                    copied.missing_blobs
                )
            } else {
                String::new()
            },
            target.accounts,
            target.mailboxes,
            target.emails
        );
        if !mismatches.is_empty() {
            bail!(
                "the target differs from the source: {}",
                mismatches.join(", ")
            );
        }
        Ok(())
    }

    /// Copies one table (of one account) page by page; returns the ids of
    /// the rows when the table is the accounts table.
    async fn copy_table(
        &mut self,
        table: RawTable,
        account: i64,
        page: i64,
    ) -> anyhow::Result<Vec<i64>> {
        let mut cursor = RawCursor::default();
        let mut ids = Vec::new();
        loop {
            let rows = self.from.export_raw(table, account, &cursor, page).await?;
            let Some(next) = rows.cursor() else { break };
            match &rows {
                RawRows::Accounts(accounts) => ids.extend(accounts.iter().map(|a| a.id)),
                RawRows::AccountBlobs(_, grants) => {
                    self.copy_blobs(grants.iter().map(|g| g.blob_id.clone()))
                        .await?;
                }
                _ => {}
            }
            self.copied.rows += self.to.import_raw(&rows).await?;
            self.progress.inc(rows.len() as u64);
            cursor = next;
        }
        Ok(ids)
    }
}

/// Fails unless the target's accounts are the source's (same ids, same logins).
async fn check_same_accounts(from: &dyn Store, to: &dyn Store) -> anyhow::Result<()> {
    let (mut source, mut target) = (from.list_accounts().await?, to.list_accounts().await?);
    source.sort_by_key(|a| a.id);
    target.sort_by_key(|a| a.id);
    let key = |accounts: &[crate::store::Account]| -> Vec<(i64, String)> {
        accounts
            .iter()
            .map(|a| (a.id, a.email.to_lowercase()))
            .collect()
    };
    if key(&source) != key(&target) {
        bail!(
            "the target holds accounts the source does not ({} in the source, {} in the target): \
             migrate into an empty database",
            source.len(),
            target.len()
        );
    }
    Ok(())
}

/// The tables whose counts differ, as `name source≠target`.
fn compare(source: &RowCounts, target: &RowCounts) -> Vec<String> {
    [
        ("accounts", source.accounts, target.accounts),
        ("mailboxes", source.mailboxes, target.mailboxes),
        ("emails", source.emails, target.emails),
        ("memberships", source.memberships, target.memberships),
        ("header blocks", source.headers, target.headers),
        ("projection rows", source.fast_views, target.fast_views),
        ("thread refs", source.thread_refs, target.thread_refs),
        ("blob grants", source.account_blobs, target.account_blobs),
        ("change log", source.changes, target.changes),
    ]
    .into_iter()
    .filter(|(_, s, t)| s != t)
    .map(|(name, s, t)| format!("{name} {s}≠{t}"))
    .collect()
}

//! `fastview seed --accounts N --messages-per-account M --from DIR [--password PW]`:
//! creates user1..userN@example.com and fills each inbox with M messages
//! taken from real mail in DIR, for load tests.
//!
//! Each distinct source message is parsed once; every copy then only gets its
//! message ids rewritten (`<local@host>` → `<local.uK@host>` in Message-ID,
//! In-Reply-To and References, the same rewrite for all messages of user K),
//! so copies stay distinct while threads stay intact. The password is hashed
//! once, and each account's messages are stored in one batched transaction.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use futures::StreamExt;
use indicatif::ProgressBar;

use super::GlobalArgs;
use crate::account::hash_password;
use crate::app::App;
use crate::blob::blob_id_of;
use crate::mail::import_source::{self, SourceItem};
use crate::mail::ingest::{PreparedEmail, prepare, store_batch};
use crate::mail::message::parse_message;
use crate::mail::structure::BodyStructure;
use crate::store::{Inserted, StoreError};

/// Flags of `fastview seed`.
#[derive(Debug, clap::Args)]
pub struct SeedArgs {
    /// How many accounts: user1..userN@example.com.
    #[arg(long)]
    pub accounts: u32,
    /// Messages in each inbox.
    #[arg(long)]
    pub messages_per_account: u32,
    /// Real mail to take messages from (Maildir, .mbox, .eml, or folders of them).
    #[arg(long)]
    pub from: std::path::PathBuf,
    /// Password of every account.
    #[arg(long, env = "FASTVIEW_PASSWORD", default_value = "password")]
    pub password: String,
}

/// The login of seeded account `n` (1-based).
pub fn seed_account(n: u32) -> String {
    format!("user{n}@example.com")
}

/// Rewrites the message ids of one header block for user `n`: every `@` inside
/// `<…>` of Message-ID, In-Reply-To and References becomes `.u{n}@`.
pub fn rewrite_message_ids(header_block: &[u8], n: u32) -> Vec<u8> {
    let suffix = format!(".u{n}@");
    let mut out = Vec::with_capacity(header_block.len() + 64);
    let mut in_id_field = false;
    for line in header_block.split_inclusive(|b| *b == b'\n') {
        let continuation = line.first().is_some_and(|b| *b == b' ' || *b == b'\t');
        if !continuation {
            let name = line.split(|b| *b == b':').next().unwrap_or_default();
            in_id_field = [b"message-id".as_slice(), b"in-reply-to", b"references"]
                .iter()
                .any(|field| name.eq_ignore_ascii_case(field));
        }
        if !in_id_field {
            out.extend_from_slice(line);
            continue;
        }
        let mut in_brackets = false;
        for byte in line {
            match byte {
                b'<' => in_brackets = true,
                b'>' => in_brackets = false,
                b'@' if in_brackets => {
                    out.extend_from_slice(suffix.as_bytes());
                    continue;
                }
                _ => {}
            }
            out.push(*byte);
        }
    }
    out
}

/// The copy of `source` for user `n` in pass `pass` over the sources (0
/// first): message ids rewritten for the user; from the second pass on (an
/// inbox larger than the sources), an `X-Fastview-Seed-Copy: {pass}` field
/// is put first, so every message of an inbox is distinct even without a
/// Message-ID.
fn copy_for_user(source: &PreparedEmail, n: u32, pass: usize, inbox: i64) -> PreparedEmail {
    let mut copy = source.clone();
    let header_len = source.email.header_block.len().min(source.raw.len());
    let mut header = Vec::new();
    if pass > 0 {
        header.extend_from_slice(format!("X-Fastview-Seed-Copy: {pass}\r\n").as_bytes());
    }
    header.extend_from_slice(&rewrite_message_ids(&source.raw[..header_len], n));
    let mut raw = header.clone();
    raw.extend_from_slice(&source.raw[header_len..]);
    // Every `@`, as `rewrite_message_ids` does in the header.
    let rewrite_id = |id: &String| id.replace('@', &format!(".u{n}@"));
    let rebased = BodyStructure::decode(&source.email.structure)
        .and_then(|tree| tree.rebased(header_len, header.len(), pass > 0));
    copy.email.structure = match rebased {
        Some(tree) => tree.encode(),
        // The root header is not in the block as expected: parse the copy.
        None => BodyStructure::of_message(&parse_message(&raw)).encode(),
    };
    copy.email.blob_id = blob_id_of(&raw);
    copy.email.size = raw.len() as i64;
    copy.email.header_block = header;
    copy.email.mailbox_ids = vec![inbox];
    copy.email.index.message_id = source.email.index.message_id.as_ref().map(rewrite_id);
    copy.email.index.referenced_ids = source
        .email
        .index
        .referenced_ids
        .iter()
        .map(rewrite_id)
        .collect();
    copy.raw = raw;
    copy
}

/// `fastview seed`.
pub async fn seed(global: &GlobalArgs, args: SeedArgs) -> anyhow::Result<ExitCode> {
    if args.accounts == 0 || args.messages_per_account == 0 {
        bail!("--accounts and --messages-per-account must be at least 1");
    }
    if !args.from.exists() {
        bail!(
            "{} does not exist (--from takes a Maildir, an mbox, an .eml file or a folder of them)",
            args.from.display()
        );
    }
    let started = Instant::now();
    let app = global.open_own("fastview seed").await?;
    let wanted = (args.accounts as usize * args.messages_per_account as usize).min(20_000);
    let sources = Arc::new(read_sources(&args.from, wanted).await?);
    let parsed_in = started.elapsed();
    let hash = shared_hash(args.password.clone()).await?;
    let progress = ProgressBar::new(args.accounts as u64);
    // Accounts are filled a few at a time: one account's copies and blob
    // writes overlap another's database transaction.
    let count = args.messages_per_account as usize;
    let (app_ref, hash) = (&app, &hash);
    let stored: u64 = futures::stream::iter(0..args.accounts as usize)
        .map(|index| seed_account_copies(app_ref, index, sources.clone(), count, hash))
        .buffer_unordered(4)
        .map(|stored| {
            progress.inc(1);
            stored
        })
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .sum::<anyhow::Result<u64>>()?;
    progress.finish_and_clear();
    if let Err(error) = app.store.analyze().await {
        eprintln!("warning: refreshing the planner statistics failed: {error}");
    }
    println!(
        "seeded {} accounts, {} messages new, {} already there, in {:.1} s \
         ({:.1} s reading and parsing the sources)",
        args.accounts,
        stored,
        args.accounts as u64 * args.messages_per_account as u64 - stored,
        started.elapsed().as_secs_f64(),
        parsed_in.as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

/// Up to `wanted` messages of `from`, each prepared (parsed once), without
/// byte-identical repeats (the same mail saved twice would be one email).
async fn read_sources(from: &Path, wanted: usize) -> anyhow::Result<Vec<PreparedEmail>> {
    let walked = from.to_path_buf();
    let mut sources: Vec<PreparedEmail> = tokio::task::spawn_blocking(move || {
        import_source::walk(std::slice::from_ref(&walked))
            .filter_map(|item| match item {
                SourceItem::Message(message) => Some(message),
                _ => None,
            })
            .take(wanted)
            .collect::<Vec<_>>()
    })
    .await
    .map(|messages| {
        futures::stream::iter(messages).map(|message| {
            tokio::task::spawn_blocking(move || {
                let raw = message.raw.clone();
                prepare(raw, Vec::new(), message.keywords.clone(), |parsed| {
                    import_source::received_at(&message, parsed)
                })
            })
        })
    })?
    .buffered(8)
    .filter_map(|joined| async move { joined.ok() })
    .collect()
    .await;
    let mut seen = std::collections::HashSet::new();
    sources.retain(|source| seen.insert(source.email.blob_id.clone()));
    if sources.is_empty() {
        bail!("no messages found in {}", from.display());
    }
    eprintln!("{} distinct source messages", sources.len());
    Ok(sources)
}

/// One hash for every account: they share the password by construction,
/// so a salt per account would protect nothing, and 1,000 argon2 hashes
/// (~20 ms of CPU each) would take longer than storing 100,000 messages.
async fn shared_hash(password: String) -> anyhow::Result<String> {
    tokio::task::spawn_blocking(move || hash_password(&password))
        .await
        .context("hashing")?
        .map_err(|e| anyhow::anyhow!("{e}"))
}

/// Fills the `index`th seed account (made, or its password set when it
/// exists) with `count` copies of consecutive sources from its offset;
/// returns how many were new.
async fn seed_account_copies(
    app: &App,
    index: usize,
    sources: Arc<Vec<PreparedEmail>>,
    count: usize,
    hash: &str,
) -> anyhow::Result<u64> {
    let n = index as u32 + 1;
    let email = seed_account(n);
    let account = match app.store.create_account(&email, hash).await {
        Ok(account) => account,
        Err(StoreError::Conflict(_)) => {
            app.store.set_password(&email, hash).await?;
            app.store
                .account_by_email(&email)
                .await?
                .context("account vanished")?
        }
        Err(error) => return Err(anyhow::Error::from(error)),
    };
    let inbox = super::import::target_mailbox(app, account.id, None).await?;
    let batch: Vec<PreparedEmail> = tokio::task::spawn_blocking(move || {
        (0..count)
            .map(|i| {
                // Consecutive sources from this account's offset,
                // wrapping around (a new pass) when they run out.
                let offset = (index * count) % sources.len();
                copy_for_user(
                    &sources[(offset + i) % sources.len()],
                    n,
                    (offset + i) / sources.len(),
                    inbox,
                )
            })
            .collect()
    })
    .await?;
    let stored = store_batch(app.store.as_ref(), &app.blobs, account.id, batch)
        .await?
        .iter()
        .filter(|outcome| matches!(outcome, Inserted::New(_)))
        .count() as u64;
    Ok(stored)
}

#[cfg(test)]
mod tests {
    use super::{copy_for_user, rewrite_message_ids};
    use crate::mail::ingest::prepare;

    #[test]
    fn a_copy_is_indexed_as_its_rewritten_bytes_parse() {
        let raw = b"From: a@example.com\r\nMessage-ID: <x@y@h>\r\nIn-Reply-To: <p@h>\r\nReferences: <r@h> <p@h>\r\nSubject: Re: t\r\n\r\nbody\r\n";
        let multipart = b"Message-ID: <m@h>\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nhello\r\n--b\r\nContent-Type: application/pdf\r\nContent-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQK\r\n--b--\r\n";
        for (pass, raw) in [
            (0, &raw[..]),
            (1, &raw[..]),
            (0, &multipart[..]),
            (2, &multipart[..]),
        ] {
            let source = prepare(raw.to_vec(), Vec::new(), Vec::new(), |_| 0);
            let copy = copy_for_user(&source, 7, pass, 3);
            let parsed = prepare(copy.raw.clone(), vec![3], Vec::new(), |_| 0);
            assert_eq!(copy.email.index, parsed.email.index, "pass {pass}");
            // The part tree moved with the header: as a parse of the copy gives it.
            assert_eq!(copy.email.structure, parsed.email.structure, "pass {pass}");
            assert_eq!(copy.email.header_block, parsed.email.header_block);
            assert_eq!(copy.email.blob_id, parsed.email.blob_id);
            assert_eq!(copy.email.size, parsed.email.size);
            assert_eq!(copy.email.mailbox_ids, vec![3]);
        }
        let source = prepare(raw.to_vec(), Vec::new(), Vec::new(), |_| 0);
        assert_eq!(
            copy_for_user(&source, 7, 0, 3)
                .email
                .index
                .message_id
                .as_deref(),
            Some("x.u7@y.u7@h")
        );
        assert_ne!(
            copy_for_user(&source, 7, 0, 3).email.blob_id,
            copy_for_user(&source, 7, 1, 3).email.blob_id
        );
    }

    #[test]
    fn message_ids_are_rewritten_consistently_and_only_in_id_fields() {
        let header = b"From: a@example.com\r\nMessage-ID: <x@h>\r\nReferences: <r1@h>\r\n <r2@h>\r\nSubject: a@b <c@d>\r\n\r\n";
        let rewritten = String::from_utf8(rewrite_message_ids(header, 7)).unwrap();
        assert_eq!(
            rewritten,
            "From: a@example.com\r\nMessage-ID: <x.u7@h>\r\nReferences: <r1.u7@h>\r\n <r2.u7@h>\r\nSubject: a@b <c@d>\r\n\r\n"
        );
    }
}

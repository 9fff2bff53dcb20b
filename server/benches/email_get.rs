//! Email/get throughput per read level on real mail (ADR 0002, ADR 0003).
//!
//! Imports up to 10,000 messages of `../shared/corpus` (or `FASTVIEW_BENCH_CORPUS`)
//! into one account, then, in one process, runs Email/get calls of 30 ids
//! (like a client's list view) through the JMAP dispatcher at each read level
//! against three instances on the same data: default, `--read-levels off`
//! and `--fast-view off`, each level after an untimed pass over every email. Prints emails/s per level and mode and the ratios
//! the ADRs cite. Run: `cargo bench -p fastview --bench email_get`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use fastview::account::hash_password;
use fastview::app::{App, ServeOptions};
use fastview::jmap::dispatch;
use fastview::jmap::request::Request;
use fastview::mail::import_source::{self, SourceItem};
use fastview::mail::ingest::{prepare, store_batch};
use fastview::mail::read_level::ReadSwitches;
use serde_json::json;

/// The allocator of the `fastview` binary, so the figures are the server's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const MESSAGES: usize = 10_000;
const IDS_PER_CALL: usize = 30;
const MIN_TIME: Duration = Duration::from_secs(3);

fn corpus() -> PathBuf {
    std::env::var_os("FASTVIEW_BENCH_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/corpus"))
        })
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    // FASTVIEW_BENCH_DATABASE_URL=postgres://… runs the same benchmark on PostgreSQL.
    let database_url = std::env::var("FASTVIEW_BENCH_DATABASE_URL").ok();
    let app = App::open_with(dir.path(), database_url.as_deref(), Some(16))
        .await
        .expect("open");
    let account = app
        .store
        .create_account("bench@example.com", &hash_password("x").expect("hash"))
        .await
        .expect("account");
    let inbox = app.store.mailboxes(account.id).await.expect("mailboxes")[0].id;
    let sources: Vec<_> = import_source::walk(&[corpus()])
        .filter_map(|item| match item {
            SourceItem::Message(message) => Some(message),
            _ => None,
        })
        .take(MESSAGES)
        .collect();
    assert!(!sources.is_empty(), "no corpus at {}", corpus().display());
    let started = Instant::now();
    for chunk in sources.chunks(500) {
        let batch = chunk
            .iter()
            .map(|m| {
                prepare(m.raw.clone(), vec![inbox], m.keywords.clone(), |p| {
                    import_source::received_at(m, p)
                })
            })
            .collect();
        store_batch(app.store.as_ref(), &app.blobs, account.id, batch)
            .await
            .expect("store");
    }
    let ids: Vec<String> = app
        .store
        .query_rows(account.id, None)
        .await
        .expect("rows")
        .iter()
        .map(|r| fastview::jmap::ids::email_id(r.meta.id))
        .collect();
    eprintln!(
        "imported {} messages in {:.1} s",
        ids.len(),
        started.elapsed().as_secs_f64()
    );

    let modes = [
        (
            "default",
            ReadSwitches {
                read_levels: true,
                fast_view: true,
            },
        ),
        (
            "read-levels off",
            ReadSwitches {
                read_levels: false,
                fast_view: true,
            },
        ),
        (
            "fast-view off",
            ReadSwitches {
                read_levels: true,
                fast_view: false,
            },
        ),
    ];
    let levels = [
        ("metadata", json!(["id", "mailboxIds", "keywords"])),
        ("header", json!(["id", "subject", "from", "to", "sentAt"])),
        (
            "fast view",
            json!([
                "id",
                "threadId",
                "mailboxIds",
                "keywords",
                "hasAttachment",
                "from",
                "to",
                "subject",
                "receivedAt",
                "size",
                "preview"
            ]),
        ),
        (
            "structure",
            json!(["id", "bodyStructure", "textBody", "htmlBody", "attachments"]),
        ),
        // What a client asks for the message a user opens (issue 15): served
        // from the stored tree and part ranges by default, from the whole
        // message under --read-levels off (the "full" level before issue 15).
        (
            "open",
            json!(["id", "textBody", "htmlBody", "attachments", "bodyValues"]),
        ),
    ];
    let account_id = fastview::jmap::ids::account_id(account.id);
    // (mode, level, emails/s, p50 ms per call of 30 ids)
    let mut results: Vec<(&str, &str, f64, f64)> = Vec::new();
    // FASTVIEW_BENCH_ONLY=metadata (a level name) runs that level alone, for profiling.
    let only = std::env::var("FASTVIEW_BENCH_ONLY").ok();
    // FASTVIEW_BENCH_MODE=default (a mode name) runs that mode alone.
    let only_mode = std::env::var("FASTVIEW_BENCH_MODE").ok();
    for (mode, switches) in modes {
        if only_mode.as_deref().is_some_and(|only| only != mode) {
            continue;
        }
        let options = ServeOptions {
            switches,
            ..ServeOptions::default()
        };
        let state = fastview::assembly::assemble(&app, &options, None).state;
        for (level, properties) in &levels {
            if only.as_deref().is_some_and(|only| only != *level) {
                continue;
            }
            let get = |batch: &[String]| {
                let body = json!({
                    "using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
                    "methodCalls": [["Email/get", {"accountId": account_id, "ids": batch, "properties": properties,
                        "fetchAllBodyValues": *level == "open"}, "0"]],
                });
                let request = Request::parse(body.to_string().as_bytes(), 64).expect("request");
                let jmap = &state.jmap;
                let account = &account;
                async move {
                    let response = dispatch::handle(jmap, account, request, "bench")
                        .await
                        .expect("within the request's budget");
                    assert_eq!(response.method_responses[0].0, "Email/get");
                }
            };
            // Warm up: every email read once at this level untimed, so each
            // mode and level is measured alike (the caches the modes share
            // and the OS page cache hold what the first one read).
            for batch in ids.chunks(IDS_PER_CALL) {
                get(batch).await;
            }
            let mut emails = 0usize;
            let mut call = 0usize;
            let mut durations = Vec::new();
            let started = Instant::now();
            while started.elapsed() < MIN_TIME {
                let call_started = Instant::now();
                let start =
                    (call * 7919 * IDS_PER_CALL) % ids.len().saturating_sub(IDS_PER_CALL).max(1);
                let batch = &ids[start..(start + IDS_PER_CALL).min(ids.len())];
                get(batch).await;
                emails += batch.len();
                call += 1;
                durations.push(call_started.elapsed());
            }
            let rate = emails as f64 / started.elapsed().as_secs_f64();
            durations.sort();
            let p50 = durations[durations.len() / 2].as_secs_f64() * 1000.0;
            println!(
                "{mode:>16} {level:>10}: {rate:>10.0} emails/s, p50 {p50:.2} ms per call \
                 ({call} calls of {IDS_PER_CALL})"
            );
            results.push((mode, level, rate, p50));
        }
    }
    let rate = |mode: &str, level: &str| {
        results
            .iter()
            .find(|(m, l, _, _)| *m == mode && *l == level)
            .map(|(_, _, r, _)| *r)
            .unwrap_or(f64::NAN)
    };
    let p50 = |mode: &str, level: &str| {
        results
            .iter()
            .find(|(m, l, _, _)| *m == mode && *l == level)
            .map(|(_, _, _, p)| *p)
            .unwrap_or(f64::NAN)
    };
    println!();
    println!("| read level | default (emails/s) | --read-levels off | --fast-view off |");
    println!("|---|---:|---:|---:|");
    for (level, _) in &levels {
        println!(
            "| {level} | {:.0} | {:.0} | {:.0} |",
            rate("default", level),
            rate("read-levels off", level),
            rate("fast-view off", level)
        );
    }
    println!();
    println!(
        "metadata vs --read-levels off: {:.1}x",
        rate("default", "metadata") / rate("read-levels off", "metadata")
    );
    println!(
        "header vs --read-levels off: {:.1}x",
        rate("default", "header") / rate("read-levels off", "header")
    );
    println!(
        "fast view vs --fast-view off: {:.1}x",
        rate("default", "fast view") / rate("fast-view off", "fast view")
    );
    println!(
        "structure vs --read-levels off: {:.1}x",
        rate("default", "structure") / rate("read-levels off", "structure")
    );
    println!(
        "open (body values) vs --read-levels off (whole message): {:.1}x; \
         p50 per call of {IDS_PER_CALL}: {:.2} ms vs {:.2} ms",
        rate("default", "open") / rate("read-levels off", "open"),
        p50("default", "open"),
        p50("read-levels off", "open")
    );
}

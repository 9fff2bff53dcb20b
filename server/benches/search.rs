//! Full-text search on real mail (issue 16, ADR 0006), on SQLite and, with
//! `FASTVIEW_BENCH_DATABASE_URL=postgres://…`, on PostgreSQL.
//!
//! 1. Import cost of the index: the corpus (`../shared/corpus` or
//!    `FASTVIEW_BENCH_CORPUS`) stored through `fastview import`'s pipeline
//!    ([`Pipeline`]: batches of 256 prepared while the one before is
//!    stored) into a fresh account twice, with its words written (A) and with them left out
//!    (B); the time spent computing the words (C) is measured on its own.
//!    Without an index an import would take B − C; the index costs
//!    (A − (B − C)) / (B − C): C counted whole, though the pipeline may hide
//!    it behind the writes, so the figure errs against the index.
//! 2. Query time: `fastview seed` puts `FASTVIEW_BENCH_MESSAGES` (default
//!    100,000) real messages into one account; then one-word and two-word
//!    `text` queries with `limit` 50 (receivedAt descending, as a client
//!    asks) run through the JMAP dispatcher, p50 and p99 per kind.
//! 3. Index size per message.
//!
//! Run: `cargo bench -p fastview --bench search`.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use fastview::account::hash_password;
use fastview::app::{App, ServeOptions};
use fastview::jmap::dispatch;
use fastview::jmap::request::Request;
use fastview::mail::body::BodyReading;
use fastview::mail::import_source::{self, SourceItem};
use fastview::mail::ingest::{Pipeline, prepare};
use fastview::mail::message::parse_message;
use fastview::mail::search;
use fastview::store::SearchText;
use serde_json::json;

/// The allocator of the `fastview` binary, so the figures are the server's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn corpus() -> PathBuf {
    std::env::var_os("FASTVIEW_BENCH_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/corpus"))
        })
}

/// One-word and two-word queries: words of the corpus at several frequencies.
const ONE_WORD: &[&str] = &[
    "meeting", "release", "patch", "thanks", "kernel", "python", "server", "question", "problem",
    "update", "error", "linux", "version", "build", "config", "memory",
];
const TWO_WORDS: &[&str] = &[
    "release notes",
    "kernel patch",
    "python version",
    "build error",
    "memory leak",
    "server config",
    "thanks for",
    "the problem",
    "new version",
    "mailing list",
];

/// Words of four letters, the shortest that match as prefixes
/// (`search::MIN_PREFIX_CHARS`): each begins hundreds of indexed words.
const SHORT_PREFIXES: &[&str] = &[
    "list", "test", "mail", "file", "work", "time", "code", "help",
];

#[tokio::main]
async fn main() {
    let database_url = std::env::var("FASTVIEW_BENCH_DATABASE_URL").ok();
    let messages: usize = std::env::var("FASTVIEW_BENCH_MESSAGES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000);
    let store_name = if database_url.is_some() {
        "PostgreSQL"
    } else {
        "SQLite"
    };
    println!("store: {store_name}");
    // `FASTVIEW_BENCH_ONLY=import` or `=queries` runs one part.
    let only = std::env::var("FASTVIEW_BENCH_ONLY").unwrap_or_default();
    if only != "queries" {
        import_cost(database_url.as_deref()).await;
    }
    if only != "import" {
        queries(database_url.as_deref(), messages).await;
    }
}

/// Drops every table of the bench's PostgreSQL database, so each step starts empty.
async fn reset(database_url: Option<&str>) {
    if let Some(url) = database_url {
        let pool = sqlx::PgPool::connect(url).await.expect("connect");
        sqlx::raw_sql("DROP SCHEMA IF EXISTS public CASCADE; CREATE SCHEMA public")
            .execute(&pool)
            .await
            .expect("reset schema");
    }
}

async fn import_cost(database_url: Option<&str>) {
    let sources: Vec<_> = import_source::walk(&[corpus()])
        .filter_map(|item| match item {
            SourceItem::Message(message) => Some(message),
            _ => None,
        })
        .collect();
    assert!(!sources.is_empty(), "no corpus at {}", corpus().display());
    // C: computing the words alone, timed around `search::document_of` only:
    // the body's reading (`BodyReading`) is made for the fast view anyway.
    let mut words_alone = Duration::ZERO;
    for source in &sources {
        let prepared = prepare(source.raw.clone(), Vec::new(), Vec::new(), |_| 0);
        let reading = BodyReading::of(&parse_message(&source.raw));
        let started = Instant::now();
        std::hint::black_box(search::document_of(&reading, &prepared.email.index));
        words_alone += started.elapsed();
    }
    // A and B alternate for `FASTVIEW_BENCH_ROUNDS` rounds (default 3), each
    // into a fresh data dir kept to the end: ext4 slows file creation down
    // right after many deletions, which made a single run of each noisy.
    let rounds: usize = std::env::var("FASTVIEW_BENCH_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(3);
    let mut dirs = Vec::new();
    let (mut with_times, mut without_times) = (Vec::new(), Vec::new());
    for with_words in (0..rounds).flat_map(|_| [true, false]) {
        reset(database_url).await;
        let dir = tempfile::tempdir().expect("temp dir");
        let app = App::open_with(dir.path(), database_url, Some(16))
            .await
            .expect("open");
        let account = app
            .store
            .create_account("bench@example.com", &hash_password("x").expect("hash"))
            .await
            .expect("account");
        let inbox = app.store.mailboxes(account.id).await.expect("mailboxes")[0].id;
        // The pipeline of `fastview import`: a batch is prepared while the
        // one before it is stored.
        let started = Instant::now();
        let mut pipeline = Pipeline::new(app.store.clone(), app.blobs.clone(), account.id);
        for chunk in sources.chunks(256) {
            let jobs: Vec<_> = chunk
                .iter()
                .map(|m| {
                    let m = m.clone();
                    move || {
                        let mut prepared =
                            prepare(m.raw.clone(), vec![inbox], m.keywords.clone(), |p| {
                                import_source::received_at(&m, p)
                            });
                        if !with_words {
                            prepared.email.search = SearchText::default();
                        }
                        prepared
                    }
                })
                .collect();
            if let Some(outcome) = pipeline.push(jobs).await {
                outcome.expect("store");
            }
        }
        if let Some(outcome) = pipeline.finish().await {
            outcome.expect("store");
        }
        match with_words {
            true => with_times.push(started.elapsed().as_secs_f64()),
            false => without_times.push(started.elapsed().as_secs_f64()),
        }
        drop(app);
        dirs.push(dir);
    }
    let median = |times: &mut Vec<f64>| {
        times.sort_by(f64::total_cmp);
        times[times.len() / 2]
    };
    println!(
        "import runs, with the words written: {with_times:.2?} s; without: {without_times:.2?} s"
    );
    let (a, b) = (median(&mut with_times), median(&mut without_times));
    let c = words_alone.as_secs_f64();
    let without = b - c;
    println!(
        "import of {} corpus messages (median of {rounds} runs each): with the index {:.1} s ({:.0}/s); words not written \
         {:.1} s; computing the words {:.1} s; without the index \
         ~{:.1} s ({:.0}/s): the index costs {:.0} %",
        sources.len(),
        a,
        sources.len() as f64 / a,
        b,
        c,
        without,
        sources.len() as f64 / without,
        (a - without) / without * 100.0
    );
}

async fn queries(database_url: Option<&str>, messages: usize) {
    reset(database_url).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let mut seed = Command::new(env!("CARGO_BIN_EXE_fastview"));
    seed.arg("--data-dir").arg(dir.path());
    if let Some(url) = database_url {
        seed.args(["--database-url", url]);
    }
    let started = Instant::now();
    let status = seed
        .args(["seed", "--accounts", "1", "--messages-per-account"])
        .arg(messages.to_string())
        .arg("--from")
        .arg(corpus())
        .status()
        .expect("run fastview seed");
    assert!(status.success());
    println!(
        "seeded {messages} messages into one account in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let app = App::open_with(dir.path(), database_url, Some(16))
        .await
        .expect("open");
    let account = app
        .store
        .account_by_email("user1@example.com")
        .await
        .expect("account")
        .expect("seeded account");
    let state = fastview::assembly::assemble(&app, &ServeOptions::default(), None).state;
    let account_id = fastview::jmap::ids::account_id(account.id);
    for (kind, queries) in [
        ("one word", ONE_WORD),
        ("two words", TWO_WORDS),
        ("four-letter prefix", SHORT_PREFIXES),
    ] {
        let mut durations: Vec<Duration> = Vec::new();
        let mut slowest: Vec<(Duration, &str)> = Vec::new();
        let mut found = Vec::new();
        for round in 0..20 {
            for text in queries.iter() {
                let body = json!({
                    "using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
                    "methodCalls": [["Email/query", {"accountId": account_id,
                        "filter": {"text": text}, "limit": 50, "calculateTotal": true,
                        "sort": [{"property": "receivedAt", "isAscending": false}]}, "0"]],
                });
                let request = Request::parse(body.to_string().as_bytes(), 64).expect("request");
                let started = Instant::now();
                let response = dispatch::handle(&state.jmap, &account, request, "bench")
                    .await
                    .expect("within budget");
                let took = started.elapsed();
                durations.push(took);
                slowest.push((took, text));
                let (name, arguments, _) = &response.method_responses[0];
                let arguments = arguments.value();
                assert_eq!(name, "Email/query", "{arguments}");
                if round == 0 {
                    found.push(format!("{text}: {}", arguments["total"]));
                }
            }
        }
        durations.sort();
        slowest.sort_by(|a, b| b.cmp(a));
        let slowest: Vec<String> = slowest
            .iter()
            .take(5)
            .map(|(took, text)| format!("{text} {:.1} ms", took.as_secs_f64() * 1000.0))
            .collect();
        let at =
            |q: f64| durations[((durations.len() as f64 * q) as usize).min(durations.len() - 1)];
        println!(
            "{kind} text queries, limit 50, {} runs: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms \
             (matches: {}; slowest: {})",
            durations.len(),
            at(0.50).as_secs_f64() * 1000.0,
            at(0.99).as_secs_f64() * 1000.0,
            durations.last().unwrap().as_secs_f64() * 1000.0,
            found.join(", "),
            slowest.join(", ")
        );
    }
    let octets = match database_url {
        Some(url) => {
            let pool = sqlx::PgPool::connect(url).await.expect("connect");
            sqlx::query_scalar::<_, i64>("SELECT pg_total_relation_size('email_search')")
                .fetch_one(&pool)
                .await
                .expect("size")
        }
        None => {
            let url = format!("sqlite://{}", dir.path().join("fastview.db").display());
            let pool = sqlx::SqlitePool::connect(&url).await.expect("connect");
            sqlx::query_scalar::<_, i64>(
                "SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name LIKE 'email_search%' \
                 OR name = 'sqlite_autoindex_email_search_keys_1'",
            )
            .fetch_one(&pool)
            .await
            .expect("size")
        }
    };
    println!(
        "index size: {:.1} MB, {:.0} octets per message",
        octets as f64 / 1e6,
        octets as f64 / messages as f64
    );
}

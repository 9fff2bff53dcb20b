//! The front door: the login brake under concurrency (reserved before the
//! password is verified, keyed by user and client address, unknown users
//! counted like known ones), `X-Forwarded-For` from trusted proxies only,
//! connection timeouts and the connection cap, the metrics listener, and
//! the one form of login names.

use std::time::Duration;

use fastview::app::{ConnectionLimits, ServeOptions};
use fastview::http::auth::{MAX_FAILURES, MAX_FAILURES_PER_ADDRESS};
use fastview::store::NewToken;
use futures::future::join_all;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{PASSWORD, TestApp, spawn_app, spawn_app_with, spawn_with_accounts};

const VERIFICATIONS: &str = "fastview_login_verifications_total";
const BRAKED: &str = "fastview_login_refusals_total{reason=\"braked\"}";

/// GET the session as `user` with `password`, as if from `forwarded_for`
/// (sent as `X-Forwarded-For` when given); the status.
async fn login(app: &TestApp, user: &str, password: &str, forwarded_for: Option<&str>) -> u16 {
    let mut request = app
        .client
        .get(format!("{}/.well-known/jmap", app.base))
        .basic_auth(user, Some(password));
    if let Some(address) = forwarded_for {
        request = request.header("x-forwarded-for", address);
    }
    request.send().await.expect("send").status().as_u16()
}

/// Fires `n` wrong-password logins for `user` at once; (401s, 429s, others).
async fn concurrent_wrong_guesses(app: &TestApp, user: &str, n: usize) -> (usize, usize, usize) {
    let statuses = join_all((0..n).map(|i| {
        let guess = format!("guess-{i}");
        async move { login(app, user, &guess, None).await }
    }))
    .await;
    let count = |status: u16| statuses.iter().filter(|s| **s == status).count();
    (count(401), count(429), n - count(401) - count(429))
}

/// A server with these connection timeouts and cap, other limits default.
async fn spawn_with_timeouts(
    header_read_timeout: Duration,
    idle_timeout: Duration,
    max_connections: usize,
) -> TestApp {
    let connections = ConnectionLimits {
        header_read_timeout,
        idle_timeout,
        max_connections,
        ..ConnectionLimits::default()
    };
    spawn_app_with(ServeOptions {
        connections,
        ..ServeOptions::default()
    })
    .await
}

/// A raw TCP connection to the API port.
async fn connect(app: &TestApp) -> TcpStream {
    let address = app.base.trim_start_matches("http://");
    TcpStream::connect(address).await.expect("connect")
}

#[tokio::test]
async fn concurrent_wrong_guesses_verify_at_most_the_brake_limit() {
    let app = spawn_app().await;
    app.account("bob@example.com").await;
    let (unauthorized, braked, other) =
        concurrent_wrong_guesses(&app, "bob@example.com", 250).await;
    let verified = app.metric(VERIFICATIONS).await as usize;
    assert_eq!(other, 0, "only 401 or 429");
    assert_eq!(verified, MAX_FAILURES as usize, "verifications");
    assert_eq!(unauthorized, verified, "each verified guess is a 401");
    assert_eq!(braked, 250 - MAX_FAILURES as usize);
    assert_eq!(app.metric(BRAKED).await as usize, braked);
    // Braked now even with the right password: no oracle, and nothing verified.
    assert_eq!(login(&app, "bob@example.com", PASSWORD, None).await, 429);
    assert_eq!(app.metric(VERIFICATIONS).await as usize, verified);
}

#[tokio::test]
async fn an_unknown_user_costs_and_counts_like_a_known_one() {
    let app = spawn_app().await;
    let (unauthorized, braked, other) =
        concurrent_wrong_guesses(&app, "nobody@example.com", 250).await;
    assert_eq!(other, 0);
    // Each counted failure was a real verification (against the dummy hash).
    assert_eq!(
        app.metric(VERIFICATIONS).await as usize,
        MAX_FAILURES as usize
    );
    assert_eq!(unauthorized, MAX_FAILURES as usize);
    assert_eq!(braked, 250 - MAX_FAILURES as usize);
}

/// A credential verified (and cached) before the guessing starts is braked
/// like any other: were it let through while wrong guesses get 429, the brake
/// would tell the attacker which guess is right, without argon2.
#[tokio::test]
async fn a_cached_right_password_is_braked_too_so_the_brake_is_no_oracle() {
    let app = spawn_app().await;
    app.account("bob@example.com").await;
    assert_eq!(login(&app, "bob@example.com", PASSWORD, None).await, 200);
    for _ in 0..MAX_FAILURES {
        assert_eq!(login(&app, "bob@example.com", "guess", None).await, 401);
    }
    assert_eq!(login(&app, "bob@example.com", "guess", None).await, 429);
    assert_eq!(login(&app, "bob@example.com", PASSWORD, None).await, 429);
}

#[tokio::test]
async fn a_braked_user_locks_out_no_one_else_behind_the_same_proxy() {
    let app = spawn_app_with(ServeOptions {
        trusted_proxies: vec!["127.0.0.0/8".parse().unwrap()],
        ..ServeOptions::default()
    })
    .await;
    app.account("bob@example.com").await;
    app.account("carol@example.com").await;
    let attacker = "203.0.113.7";
    for _ in 0..MAX_FAILURES {
        assert_eq!(
            login(&app, "bob@example.com", "guess", Some(attacker)).await,
            401
        );
    }
    assert_eq!(
        login(&app, "bob@example.com", "guess", Some(attacker)).await,
        429
    );
    assert_eq!(
        login(&app, "bob@example.com", PASSWORD, Some(attacker)).await,
        429
    );
    // Another user behind the same address, and Bob from elsewhere, log in.
    assert_eq!(
        login(&app, "carol@example.com", PASSWORD, Some(attacker)).await,
        200
    );
    assert_eq!(
        login(&app, "bob@example.com", PASSWORD, Some("198.51.100.9")).await,
        200
    );
    // The rightmost untrusted hop counts: a forged hop left of it changes nothing.
    assert_eq!(
        login(
            &app,
            "bob@example.com",
            "guess",
            Some(&format!("192.0.2.1, {attacker}"))
        )
        .await,
        429
    );
}

#[tokio::test]
async fn forwarded_for_from_an_untrusted_peer_is_ignored() {
    let app = spawn_app().await;
    app.account("bob@example.com").await;
    for i in 0..MAX_FAILURES {
        let forged = format!("198.51.100.{i}");
        assert_eq!(
            login(&app, "bob@example.com", "guess", Some(&forged)).await,
            401
        );
    }
    assert_eq!(
        login(&app, "bob@example.com", "guess", Some("198.51.100.200")).await,
        429
    );
}

#[tokio::test]
async fn one_address_spraying_many_users_hits_the_address_ceiling() {
    let app = spawn_app().await;
    let users: Vec<String> = (0..MAX_FAILURES_PER_ADDRESS)
        .map(|i| format!("user{i}@example.com"))
        .collect();
    for chunk in users.chunks(8) {
        let statuses = join_all(chunk.iter().map(|user| login(&app, user, "guess", None))).await;
        assert!(statuses.iter().all(|s| *s == 401), "{statuses:?}");
    }
    assert_eq!(
        login(&app, "someone-else@example.com", "guess", None).await,
        429
    );
}

/// Reads from `stream` until the server closes it (or resets it); the
/// bytes read. Fails the test if it is still open after 20 s.
async fn read_until_closed(stream: &mut TcpStream) -> Vec<u8> {
    let mut received = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(20), async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => received.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the server kept the connection open");
    received
}

/// Long enough that it never fires within a test: the mechanism under test
/// is the one with the short setting.
const NEVER: Duration = Duration::from_secs(600);

#[tokio::test]
async fn a_connection_that_sends_nothing_is_closed_after_the_idle_timeout() {
    let app = spawn_with_timeouts(NEVER, Duration::from_secs(1), 16).await;
    let mut silent = connect(&app).await;
    assert!(read_until_closed(&mut silent).await.is_empty());
}

#[tokio::test]
async fn a_kept_alive_connection_is_closed_after_the_idle_timeout() {
    let app = spawn_with_timeouts(NEVER, Duration::from_secs(1), 16).await;
    let mut stream = connect(&app).await;
    stream
        .write_all(b"GET /.well-known/jmap HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .unwrap();
    let received = read_until_closed(&mut stream).await;
    assert!(
        received.starts_with(b"HTTP/1.1 401"),
        "{}",
        String::from_utf8_lossy(&received)
    );
}

#[tokio::test]
async fn half_a_header_is_closed_after_the_header_read_timeout() {
    let app = spawn_with_timeouts(Duration::from_secs(1), NEVER, 16).await;
    let mut stream = connect(&app).await;
    stream
        .write_all(b"GET /.well-known/jmap HTTP/1.1\r\nHost: a\r\nAccept:")
        .await
        .unwrap();
    let received = read_until_closed(&mut stream).await;
    // Closed without serving the request (hyper may say 408 first).
    assert!(
        received.is_empty() || received.starts_with(b"HTTP/1.1 408"),
        "{}",
        String::from_utf8_lossy(&received)
    );
}

#[tokio::test]
async fn at_the_connection_cap_the_longest_idle_connection_is_shed_for_a_new_client() {
    let app = spawn_with_timeouts(NEVER, NEVER, 3).await;
    let address = app.base.trim_start_matches("http://").to_string();
    let mut idle = Vec::new();
    for _ in 0..3 {
        idle.push(TcpStream::connect(&address).await.unwrap());
        // Accepted in order: the first is the longest idle.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let served = tokio::time::timeout(
        Duration::from_secs(20),
        app.client
            .get(format!("{}/.well-known/jmap", app.base))
            .send(),
    )
    .await
    .expect("a new client is served at the cap")
    .unwrap();
    assert_eq!(served.status(), 401);
    assert!(read_until_closed(&mut idle[0]).await.is_empty());
}

#[tokio::test]
async fn metrics_are_served_on_their_own_listener_and_not_on_the_api_port() {
    let app = spawn_app().await;
    let api = app
        .client
        .get(format!("{}/metrics", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(api.status(), 404);
    let metrics = app
        .client
        .get(format!("{}/metrics", app.metrics_base))
        .send()
        .await
        .unwrap();
    assert_eq!(metrics.status(), 200);
    let text = metrics.text().await.unwrap();
    assert!(
        text.contains("fastview_login_verifications_total"),
        "{text}"
    );
}

/// Runs `fastview account add EMAIL --password PASSWORD`; whether it succeeded.
fn account_add(app: &TestApp, email: &str) -> bool {
    app.cli()
        .args(["account", "add", email, "--password", PASSWORD])
        .output()
        .expect("run fastview")
        .status
        .success()
}

#[tokio::test]
async fn login_names_are_compared_in_one_normalised_form() {
    let app = spawn_app().await;
    // Non-ASCII capitals: added as typed, logs in however it is cased.
    assert!(account_add(&app, "Ärger@Example.COM"));
    for user in [
        "Ärger@Example.COM",
        "ärger@example.com",
        "ÄRGER@EXAMPLE.COM",
    ] {
        assert_eq!(login(&app, user, PASSWORD, None).await, 200, "{user}");
    }
    // The Kelvin sign is K: the same name as kim@, never a second account.
    assert!(account_add(&app, "kim@example.com"));
    assert!(!account_add(&app, "\u{212A}im@example.com"));
    let session: Value = app
        .get_as(
            format!("{}/.well-known/jmap", app.base),
            "\u{212A}im@example.com",
            PASSWORD,
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(session["username"], "kim@example.com");
}

/// An event stream is never idle, so the connection cap cannot shed it.
/// Slots are per credential (issue 43): a leaked `eventSourceUrl` opened
/// again and again holds only its own `MAX_STREAMS_PER_CREDENTIAL`, each
/// newer stream replacing the oldest (which ends), and the owner's own
/// streams (by header) still open; an account holds at most
/// `MAX_STREAMS_PER_ACCOUNT`, after which a credential with none to replace
/// gets 429; another account is unaffected.
#[tokio::test]
async fn event_stream_slots_are_per_credential_and_a_newer_stream_replaces_the_oldest() {
    use fastview::http::stream_slots::{MAX_STREAMS_PER_ACCOUNT, MAX_STREAMS_PER_CREDENTIAL};
    let (app, [ann]) = spawn_with_accounts(["ann@example.com"]).await;
    app.account("bob@example.com").await;
    let session = app.session(&ann).await;
    let leaked = session["eventSourceUrl"]
        .as_str()
        .unwrap()
        .replace("{types}", "*")
        .replace("{closeafter}", "no")
        .replace("{ping}", "0");
    let open_with = |auth: Option<(&str, &str)>, token: Option<&str>| {
        let request = app.client.get(format!(
            "{}/jmap/eventsource?types=*&closeafter=no&ping=0",
            app.base
        ));
        let request = match (auth, token) {
            (Some((user, password)), _) => request.basic_auth(user, Some(password)),
            (None, Some(token)) => request.bearer_auth(token),
            (None, None) => request,
        };
        request.send()
    };
    // A replaced stream's body ends within a poll; an open one sends
    // nothing (ping=0) and is still open after the wait.
    let ended = |stream: reqwest::Response| async move {
        tokio::time::timeout(Duration::from_secs(3), stream.bytes())
            .await
            .is_ok()
    };
    // The thief opens 3 × the credential's share through the leaked URL:
    // every one is let in, and only the newest share stays open.
    let mut thief = Vec::new();
    for _ in 0..3 * MAX_STREAMS_PER_CREDENTIAL {
        let stream = app.client.get(&leaked).send().await.unwrap();
        assert_eq!(stream.status(), 200);
        thief.push(stream);
    }
    let newest = thief.split_off(2 * MAX_STREAMS_PER_CREDENTIAL);
    for stream in thief {
        assert!(ended(stream).await, "an older stream was replaced");
    }
    // The owner's own streams (by header) have a share of their own.
    let ann_login = Some((ann.email.as_str(), PASSWORD));
    let mut held = Vec::new();
    for _ in 0..MAX_STREAMS_PER_CREDENTIAL {
        let stream = open_with(ann_login, None).await.unwrap();
        assert_eq!(stream.status(), 200);
        held.push(stream);
    }
    // The account fills up with API tokens' streams; then a credential
    // with none to replace is refused, one with some replaces its oldest,
    // and another account is not affected.
    let mut tokens = Vec::new();
    for n in 0..MAX_STREAMS_PER_ACCOUNT / MAX_STREAMS_PER_CREDENTIAL {
        let secret = fastview::account::new_token_secret();
        let digest = fastview::account::token_digest(&secret);
        app.app
            .store
            .create_token(
                ann.id,
                NewToken {
                    secret_sha256: &digest,
                    name: &format!("t{n}"),
                    created_at: 0,
                    expires_at: None,
                },
            )
            .await
            .unwrap();
        tokens.push(secret);
    }
    let filling = MAX_STREAMS_PER_ACCOUNT / MAX_STREAMS_PER_CREDENTIAL - 2;
    for token in &tokens[..filling] {
        for _ in 0..MAX_STREAMS_PER_CREDENTIAL {
            let stream = open_with(None, Some(token)).await.unwrap();
            assert_eq!(stream.status(), 200);
            held.push(stream);
        }
    }
    let refused = open_with(None, Some(&tokens[filling])).await.unwrap();
    assert_eq!(refused.status(), 429);
    assert!(refused.headers().contains_key("retry-after"));
    assert_eq!(open_with(ann_login, None).await.unwrap().status(), 200);
    let bob_login = Some(("bob@example.com", PASSWORD));
    assert_eq!(open_with(bob_login, None).await.unwrap().status(), 200);
    let still_open = join_all(newest.into_iter().map(ended)).await;
    assert_eq!(still_open, [false; MAX_STREAMS_PER_CREDENTIAL]);
}

/// An authenticated API body that trickles in is in a request, so neither
/// the idle timeout nor the cap's shedding touches it: it gets twice the
/// header-read timeout to arrive, then 408 and the connection closes.
#[tokio::test]
async fn an_api_body_that_trickles_in_gets_408_after_the_body_deadline() {
    let app = spawn_with_timeouts(Duration::from_secs(1), NEVER, 16).await;
    app.account("ann@example.com").await;
    let mut stream = connect(&app).await;
    let auth = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        format!("ann@example.com:{PASSWORD}"),
    );
    let head = format!(
        "POST /jmap/api HTTP/1.1\r\nHost: a\r\nAuthorization: Basic {auth}\r\n\
         Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{{"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    // One byte a second: never idle, never complete.
    let trickle = async {
        for _ in 0..30 {
            tokio::time::sleep(Duration::from_millis(500)).await;
            if stream.write_all(b" ").await.is_err() {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(3), trickle).await;
    let received = read_until_closed(&mut stream).await;
    assert!(
        received.starts_with(b"HTTP/1.1 408"),
        "{}",
        String::from_utf8_lossy(&received)
    );
}

/// Every `fastview account` subcommand names an account in the one form
/// (found by a new user: `--quota` and `account set` compared the address
/// as typed, so `Éva@` got an account but not its quota).
#[tokio::test]
async fn every_account_subcommand_takes_the_address_in_any_case() {
    let app = spawn_app().await;
    let run = |args: &[&str]| {
        let output = app.cli().args(args).output().expect("run fastview");
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).to_string()
                + &String::from_utf8_lossy(&output.stderr),
        )
    };
    let (ok, out) = run(&[
        "account",
        "add",
        "Éva@Example.com",
        "--password",
        PASSWORD,
        "--quota",
        "1G",
    ]);
    assert!(ok, "{out}");
    let (ok, out) = run(&["account", "set", "ÉVA@example.com", "--quota", "2G"]);
    assert!(ok, "{out}");
    assert!(out.contains("éva@example.com"), "{out}");
    let account = app
        .app
        .store
        .account_by_email("éva@example.com")
        .await
        .unwrap()
        .expect("stored in the one form");
    assert_eq!(
        app.app.store.quota(account.id).await.unwrap().limit,
        Some(2 << 30)
    );
    let (ok, out) = run(&["account", "remove", "éVA@EXAMPLE.COM"]);
    assert!(ok, "{out}");
}

/// A client that pauses reading a large response for longer than the idle
/// timeout still gets all of it: a response waiting on the socket is not an
/// idle connection (found by a fresh reviewer: 4 of 8 MB arrived). One that
/// stops reading is cut off after twice the header-read timeout.
#[tokio::test]
async fn a_slow_reader_gets_the_whole_response_and_a_stalled_one_is_cut_off() {
    let app = spawn_with_timeouts(Duration::from_secs(2), Duration::from_secs(1), 16).await;
    app.account("ann@example.com").await;
    let auth = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        format!("ann@example.com:{PASSWORD}"),
    );
    let body = serde_json::json!({"using": ["urn:ietf:params:jmap:core"],
        "methodCalls": [["Core/echo", {"data": "x".repeat(6 << 20)}, "e"]]})
    .to_string();
    let request = format!(
        "POST /jmap/api HTTP/1.1\r\nHost: a\r\nAuthorization: Basic {auth}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let connect = || async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        let address = app.base.trim_start_matches("http://").parse().unwrap();
        let mut stream = socket.connect(address).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        stream
    };
    // Paused 2.5 s (past the idle timeout), then read: all of it arrives.
    let mut slow = connect().await;
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let received = read_until_closed(&mut slow).await;
    let text = String::from_utf8_lossy(&received);
    let (head, rest) = text.split_once("\r\n\r\n").expect("a response head");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let length: usize = head
        .lines()
        .find_map(|line| {
            line.to_ascii_lowercase()
                .strip_prefix("content-length: ")
                .map(str::to_string)
        })
        .and_then(|value| value.trim().parse().ok())
        .expect("content-length");
    assert_eq!(rest.len(), length, "the whole response arrived");
    // Never read: closed once 4 s pass with nothing accepted.
    let mut stalled = connect().await;
    tokio::time::sleep(Duration::from_secs(7)).await;
    let received = read_until_closed(&mut stalled).await;
    assert!(received.len() < length, "a stalled reader is cut off");
}

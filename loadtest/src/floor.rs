//! `fastview-loadtest floor`: the HTTP + JSON floor that issue 20 measures
//! the fast view against (ADR 0003). A minimal axum server that does what
//! any JMAP server must do for an Email/get and nothing more: accept the
//! POST on `/jmap/api`, read the body, parse it as JSON, and answer with
//! the octets of a real answer held in memory (captured from Fastview for
//! the same request, so both servers send the same bytes). No
//! authentication, no store, no rendering: the rate it holds is the most
//! any server can reach for that answer on that core.
//! `loadtest/floor-ratio.sh` runs it beside Fastview on one core.

use std::net::SocketAddr;
use std::path::Path;

use anyhow::{Context, bail};
use axum::Router;
use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::serve::ListenerExt;

/// Serves `answer` (the file's octets, read once) to every POST on
/// `/jmap/api` whose body parses as JSON, on `listen` (a loopback address:
/// the floor is a measuring tool, never a service), with `TCP_NODELAY` as
/// Fastview sets it. A body that is not JSON gets 400. Runs until the
/// process ends; errors: the answer file unreadable, the address not
/// loopback or not free.
pub async fn serve_floor(listen: SocketAddr, answer_file: &Path) -> anyhow::Result<()> {
    if !listen.ip().is_loopback() {
        bail!("the floor listens on loopback only, not {listen}");
    }
    let answer = Bytes::from(
        std::fs::read(answer_file)
            .with_context(|| format!("reading the answer {}", answer_file.display()))?,
    );
    let app = Router::new().route(
        "/jmap/api",
        post(move |body: Bytes| {
            let answer = answer.clone();
            async move { respond(&body, answer) }
        }),
    );
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("listening on {listen}"))?
        .tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
    eprintln!(
        "floor: serving {} octets on {listen}",
        answer_len(answer_file)
    );
    axum::serve(listener, app).await.context("serving")
}

/// The floor's answer to one request body: `answer` if it is JSON, else 400.
fn respond(body: &[u8], answer: Bytes) -> Response {
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(_) => ([(header::CONTENT_TYPE, "application/json")], answer).into_response(),
        Err(_) => (StatusCode::BAD_REQUEST, "not JSON").into_response(),
    }
}

fn answer_len(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::to_bytes;

    #[tokio::test]
    async fn answers_json_with_the_octets_and_refuses_the_rest() {
        let answer = Bytes::from_static(b"{\"methodResponses\":[]}");
        let ok = respond(br#"{"using":[],"methodCalls":[]}"#, answer.clone());
        assert_eq!(ok.status(), StatusCode::OK);
        assert_eq!(ok.headers()[header::CONTENT_TYPE], "application/json");
        assert_eq!(to_bytes(ok.into_body(), 1024).await.unwrap(), answer);
        let bad = respond(b"{not json", answer);
        assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    }

    #[tokio::test]
    async fn refuses_an_address_off_loopback() {
        let error = serve_floor("0.0.0.0:0".parse().unwrap(), Path::new("/nonexistent"))
            .await
            .unwrap_err();
        assert!(error.to_string().contains("loopback"), "{error}");
    }
}

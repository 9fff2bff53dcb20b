//! Sending to other servers through a real SMTP relay (issue 17): Python's
//! aiosmtpd (`tests/fixtures/smtp_sink.py`), started here on a loopback
//! port. Ann sends one draft to Bob (an account here) and to two remote
//! addresses: Bob's copy is in his inbox at once; the relay refuses the
//! first DATA with 451, so that recipient stays queued until the queue's
//! retry delivers it, once, byte for byte the message without its Bcc; the
//! relay refuses the other recipient with 550, which ends as
//! `delivered: "no"` and a bounce in Ann's inbox.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use fastview::app::ServeOptions;
use fastview::mail::delivery;
use fastview::mail::relay::Relay;
use serde_json::{Value, json};

use crate::support::{TestApp, require, spawn_app_with};

const SUBMISSION: &str = "urn:ietf:params:jmap:submission";

/// The SMTP server of a test, killed with it.
pub(crate) struct Sink {
    child: Child,
    pub(crate) port: u16,
}

impl Drop for Sink {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the sink writing into `dir`, or `None` (after [`require`]) when
/// Python's aiosmtpd is not installed.
pub(crate) fn start_sink(dir: &Path, args: &[&str]) -> Option<Sink> {
    let present = Command::new("python3")
        .args(["-c", "import aiosmtpd"])
        .status()
        .is_ok_and(|status| status.success());
    if !present {
        require("smtp", "no python3 with aiosmtpd (pip install aiosmtpd)");
        return None;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/smtp_sink.py");
    let mut child = Command::new("python3")
        .arg(script)
        .arg(dir)
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the SMTP sink");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .expect("the sink's port");
    let port = line.trim().parse().expect("a port");
    Some(Sink { child, port })
}

async fn role(app: &TestApp, user: &crate::support::TestAccount, role: &str) -> String {
    let got = app
        .call1(user, "Mailbox/get", json!({"accountId": user.account_id}))
        .await;
    got["list"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == role)
        .map(|m| m["id"].as_str().unwrap().to_string())
        .unwrap()
}

#[tokio::test]
async fn remote_recipients_go_through_the_relay_with_retries_and_bounces() {
    let dir = tempfile::tempdir().unwrap();
    let Some(sink) = start_sink(
        dir.path(),
        &["--defer", "1", "--reject", "nobody@far.example"],
    ) else {
        return;
    };
    let relay = Arc::new(Relay::from_url(&format!("smtp://127.0.0.1:{}", sink.port)).unwrap());
    let app = spawn_app_with(ServeOptions {
        smtp_relay: Some(relay.clone()),
        ..ServeOptions::default()
    })
    .await;
    let ann = app.account("ann@example.com").await;
    let bob = app.account("bob@example.com").await;
    let drafts = role(&app, &ann, "drafts").await;
    let identities = app
        .call_using(
            &ann,
            &[SUBMISSION],
            json!([["Identity/get", {"accountId": ann.account_id}]]),
        )
        .await;
    let identity = identities[0][1]["list"][0]["id"].clone();
    let responses = app
        .call_using(
            &ann,
            &[SUBMISSION],
            json!([
                ["Email/set", {"accountId": ann.account_id, "create": {"d": {
                    "mailboxIds": {drafts: true},
                    "keywords": {"$draft": true},
                    "from": [{"name": "Ann", "email": "ann@example.com"}],
                    "to": [{"email": "bob@example.com"}, {"email": "zed@far.example"}],
                    "bcc": [{"email": "nobody@far.example"}],
                    "subject": "Plans",
                    "bodyValues": {"1": {"value": "Friday works.\nAnn\n"}},
                    "textBody": [{"partId": "1", "type": "text/plain"}],
                }}}],
                ["EmailSubmission/set", {"accountId": ann.account_id,
                    "create": {"s": {"identityId": identity, "emailId": "#d"}},
                    "onSuccessUpdateEmail": {"#s": {"keywords/$draft": null}}}],
            ]),
        )
        .await;
    let created = &responses[1][1]["created"]["s"];
    let status = &created["deliveryStatus"];
    assert_eq!(status["bob@example.com"]["delivered"], "yes", "{created}");
    assert_eq!(
        status["zed@far.example"]["delivered"], "queued",
        "{created}"
    );
    assert!(
        status["zed@far.example"]["smtpReply"]
            .as_str()
            .unwrap()
            .contains("451"),
        "{created}"
    );
    assert_eq!(status["nobody@far.example"]["delivered"], "no", "{created}");
    assert!(
        status["nobody@far.example"]["smtpReply"]
            .as_str()
            .unwrap()
            .starts_with("550"),
        "{created}"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);

    // The queue tries again once the backoff has passed, and only then.
    let store = app.app.store.as_ref();
    let now = chrono::Utc::now().timestamp();
    let again = |at| delivery::deliver_due(store, &app.app.blobs, Some(relay.as_ref()), "test", at);
    assert_eq!(again(now + 30).await.unwrap(), 0);
    assert_eq!(again(now + 125).await.unwrap(), 1);
    assert_eq!(again(now + 10_000).await.unwrap(), 0);

    let submission = created["id"].clone();
    let got = app
        .call_using(
            &ann,
            &[SUBMISSION],
            json!([["EmailSubmission/get", {"accountId": ann.account_id, "ids": [submission]}]]),
        )
        .await;
    let status = &got[0][1]["list"][0]["deliveryStatus"];
    assert_eq!(
        status["zed@far.example"],
        json!({"smtpReply": "250 2.0.0 Message accepted", "delivered": "unknown",
            "displayed": "unknown"})
    );
    assert_eq!(status["bob@example.com"]["delivered"], "yes");

    // The relay received the message once, as it left: the draft's octets
    // without the Bcc field.
    let email = responses[0][1]["created"]["d"]["blobId"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, draft) = app.download(&ann, &email, "d.eml").await;
    let sent = std::fs::read(dir.path().join("1.eml")).unwrap();
    assert_eq!(
        sent,
        fastview::mail::submission::without_bcc(&draft).unwrap()
    );
    assert!(!dir.path().join("2.eml").exists());
    let envelope: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("1.json")).unwrap()).unwrap();
    assert_eq!(
        envelope,
        json!({"mail_from": "ann@example.com", "rcpt_tos": ["zed@far.example"], "login": null})
    );

    // The refused recipient came back to Ann as a delivery status report.
    let inbox = app
        .call1(
            &ann,
            "Email/query",
            json!({"accountId": ann.account_id, "filter": {"inMailbox": ann.inbox}}),
        )
        .await;
    let got = app
        .call1(
            &ann,
            "Email/get",
            json!({"accountId": ann.account_id, "ids": inbox["ids"],
                "properties": ["subject", "header:Content-Type", "header:Auto-Submitted:asText"]}),
        )
        .await;
    assert_eq!(got["list"].as_array().unwrap().len(), 1, "{got}");
    assert_eq!(
        got["list"][0]["subject"],
        "Undelivered Mail Returned to Sender"
    );
    assert_eq!(
        got["list"][0]["header:Auto-Submitted:asText"],
        "auto-replied"
    );
    let bob_inbox = app
        .call1(
            &bob,
            "Email/query",
            json!({"accountId": bob.account_id, "filter": {"inMailbox": bob.inbox}}),
        )
        .await;
    assert_eq!(bob_inbox["ids"].as_array().unwrap().len(), 1);
}

/// What a relay received of one submission: `None` when the submission
/// was refused, with the refusal's SetError type in `refused`.
struct Sent {
    refused: Option<String>,
    message: Option<String>,
    rcpt_tos: Vec<String>,
}

/// Imports `raw` as Ann's (upload + Email/import, as a hostile client
/// would) and submits it with a derived envelope through the relay that
/// writes into `dir`; what left.
async fn submit_raw(
    app: &TestApp,
    ann: &crate::support::TestAccount,
    dir: &Path,
    raw: &[u8],
) -> Sent {
    let (status, uploaded) = app.upload(ann, raw.to_vec()).await;
    assert_eq!(status, 201, "{uploaded}");
    let identities = app
        .call_using(
            ann,
            &[SUBMISSION],
            json!([["Identity/get", {"accountId": ann.account_id}]]),
        )
        .await;
    let identity = identities[0][1]["list"][0]["id"].clone();
    let before = std::fs::read_dir(dir).unwrap().count();
    let responses = app
        .call_using(
            ann,
            &[SUBMISSION],
            json!([
                ["Email/import", {"accountId": ann.account_id, "emails": {"m": {
                    "blobId": uploaded["blobId"], "mailboxIds": {ann.inbox.clone(): true}}}}],
                ["EmailSubmission/set", {"accountId": ann.account_id,
                    "create": {"s": {"identityId": identity, "emailId": "#m"}}}],
            ]),
        )
        .await;
    assert!(responses[0][1]["created"]["m"].is_object(), "{responses:?}");
    let refused = responses[1][1]["notCreated"]["s"]["type"]
        .as_str()
        .map(str::to_string);
    // One transaction per recipient: every message written since is one
    // recipient's, and all are the same octets.
    let after = std::fs::read_dir(dir).unwrap().count();
    let mut messages = Vec::new();
    let mut rcpt_tos = Vec::new();
    for n in before / 2 + 1..=after / 2 {
        messages.push(std::fs::read(dir.join(format!("{n}.eml"))).unwrap());
        let envelope: Value =
            serde_json::from_slice(&std::fs::read(dir.join(format!("{n}.json"))).unwrap()).unwrap();
        for recipient in envelope["rcpt_tos"].as_array().unwrap() {
            rcpt_tos.push(recipient.as_str().unwrap().to_string());
        }
    }
    messages.dedup();
    assert!(messages.len() <= 1, "every recipient got the same octets");
    let message = messages
        .pop()
        .map(|message| String::from_utf8_lossy(&message).into_owned());
    Sent {
        refused,
        message,
        rcpt_tos,
    }
}

/// The fields a receiving server reads from `message`: header lines up to
/// the first empty line, each line ending CRLF as sent.
fn received_fields(message: &str) -> Vec<String> {
    message
        .split("\r\n")
        .take_while(|line| !line.is_empty())
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn what_the_send_as_check_reads_is_what_the_relay_receives() {
    let dir = tempfile::tempdir().unwrap();
    let Some(sink) = start_sink(dir.path(), &[]) else {
        return;
    };
    let relay = Arc::new(Relay::from_url(&format!("smtp://127.0.0.1:{}", sink.port)).unwrap());
    let app = spawn_app_with(ServeOptions {
        smtp_relay: Some(relay),
        ..ServeOptions::default()
    })
    .await;
    let ann = app.account("ann@example.com").await;
    // Each line-end trick either is refused or leaves with exactly the
    // fields the check read: never a From of bob's, never a Bcc.
    let refused: &[(&[u8], &str)] = &[
        // The issue's attack: a bare CR hides `From: bob` from a
        // splitter on LF, and CR CR LF ends the header after it.
        (
            b"To: v@remote.example\nSubject: t\rFrom: bob@example.com\r\r\nFrom: ann@example.com\n\nhi\n",
            "forbiddenFrom",
        ),
        // CR alone as every line end.
        (
            b"From: ann@example.com\rTo: v@remote.example\rFrom: bob@example.com\r\rhi\r",
            "forbiddenFrom",
        ),
        // A NUL in a field name: some software drops it and reads From.
        (
            b"From: ann@example.com\r\nTo: v@remote.example\r\nFr\0om: bob@example.com\r\n\r\nhi\r\n",
            "invalidEmail",
        ),
        // A NUL in a value.
        (
            b"From: ann@example.com\0\r\nTo: v@remote.example\r\n\r\nhi\r\n",
            "invalidEmail",
        ),
        // A folded From naming a second address.
        (
            b"From: ann@example.com,\r\n bob@example.com\r\nTo: v@remote.example\r\n\r\nhi\r\n",
            "forbiddenFrom",
        ),
        // A header after an empty-looking line (white space only).
        (
            b"From: ann@example.com\r\nTo: v@remote.example\r\n \r\nFrom: bob@example.com\r\n\r\nhi\r\n",
            "invalidEmail",
        ),
        // A line that is not a field, which some software reads as the
        // start of the body and some skips.
        (
            b"From: ann@example.com\r\nTo: v@remote.example\r\nnot a field\r\nFrom: bob@example.com\r\n\r\nhi\r\n",
            "invalidEmail",
        ),
        // A second From below a first.
        (
            b"From: ann@example.com\nTo: v@remote.example\nFrom: bob@example.com\n\nhi\n",
            "forbiddenFrom",
        ),
    ];
    for (raw, expected) in refused {
        let sent = submit_raw(&app, &ann, dir.path(), raw).await;
        let shown = String::from_utf8_lossy(raw);
        assert_eq!(sent.refused.as_deref(), Some(*expected), "{shown:?}");
        assert_eq!(sent.message, None, "{shown:?}");
    }

    // A Bcc hidden behind a bare CR is a Bcc: its address gets the mail,
    // and no recipient sees the field.
    let hidden_bcc =
        b"From: ann@example.com\nTo: v@remote.example\nSubject: t\rBcc: hidden@remote.example\n\nhi\rthere\n";
    let sent = submit_raw(&app, &ann, dir.path(), hidden_bcc).await;
    assert_eq!(sent.refused, None);
    let message = sent.message.expect("sent");
    assert_eq!(
        message,
        "From: ann@example.com\r\nTo: v@remote.example\r\nSubject: t\r\n\r\nhi\r\nthere\r\n"
    );
    assert_eq!(
        received_fields(&message),
        [
            "From: ann@example.com",
            "To: v@remote.example",
            "Subject: t"
        ]
    );
    assert_eq!(sent.rcpt_tos, ["v@remote.example", "hidden@remote.example"]);
}

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

use crate::submission::own_identity;
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

/// A server whose SMTP relay is the one on loopback `port`, and that relay.
async fn app_with_relay(port: u16) -> (TestApp, Arc<Relay>) {
    let relay = Arc::new(Relay::from_url(&format!("smtp://127.0.0.1:{port}")).unwrap());
    let app = spawn_app_with(ServeOptions {
        smtp_relay: Some(relay.clone()),
        ..ServeOptions::default()
    })
    .await;
    (app, relay)
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
    let (app, relay) = app_with_relay(sink.port).await;
    let ann = app.account("ann@example.com").await;
    let bob = app.account("bob@example.com").await;
    let drafts = app.mailbox_with_role(&ann, "drafts").await;
    let identity = own_identity(&app, &ann).await;
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
    let mut envelope: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("1.json")).unwrap()).unwrap();
    envelope.as_object_mut().unwrap().remove("peer");
    assert_eq!(
        envelope,
        json!({"mail_from": "ann@example.com", "rcpt_tos": ["zed@far.example"], "login": null})
    );

    // The refused recipient came back to Ann as a delivery status report.
    let got = app
        .inbox_emails(
            &ann,
            &[
                "subject",
                "header:Content-Type",
                "header:Auto-Submitted:asText",
            ],
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
    let bob_inbox = app.query_inbox(&bob).await;
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
    envelope: Value,
) -> Sent {
    let (status, uploaded) = app.upload(ann, raw.to_vec()).await;
    assert_eq!(status, 201, "{uploaded}");
    let identity = own_identity(app, ann).await;
    let before = std::fs::read_dir(dir).unwrap().count();
    let responses = app
        .call_using(
            ann,
            &[SUBMISSION],
            json!([
                ["Email/import", {"accountId": ann.account_id, "emails": {"m": {
                    "blobId": uploaded["blobId"], "mailboxIds": {ann.inbox.clone(): true}}}}],
                ["EmailSubmission/set", {"accountId": ann.account_id,
                    "create": {"s": {"identityId": identity, "emailId": "#m",
                        "envelope": envelope}}}],
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
    let (app, _relay) = app_with_relay(sink.port).await;
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
        // CR alone as every line end (and so two From fields).
        (
            b"From: ann@example.com\rTo: v@remote.example\rFrom: bob@example.com\r\rhi\r",
            "invalidEmail",
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
        // A second From below a first, with or without an address in it.
        (
            b"From: ann@example.com\nTo: v@remote.example\nFrom: bob@example.com\n\nhi\n",
            "invalidEmail",
        ),
        (
            b"From: ann@example.com\nTo: v@remote.example\nFrom: bob@victim.example <>\n\nhi\n",
            "invalidEmail",
        ),
        // Addresses other mail programs read another way (found by the
        // issue 43 review): an address as a display name, a route-like
        // name, two angle addresses, a group.
        (
            b"From: bob@victim.example <ann@example.com>\nTo: v@remote.example\n\nhi\n",
            "invalidEmail",
        ),
        (
            b"From: x:bob@victim.example <ann@example.com>\nTo: v@remote.example\n\nhi\n",
            "invalidEmail",
        ),
        (
            b"From: <ann@example.com> <bob@victim.example>\nTo: v@remote.example\n\nhi\n",
            "invalidEmail",
        ),
        (
            b"From: friends: ann@example.com;\nTo: v@remote.example\n\nhi\n",
            "invalidEmail",
        ),
        // Resent-From and Resent-Sender are originators too.
        (
            b"From: ann@example.com\nResent-From: bob@victim.example\nTo: v@remote.example\n\nhi\n",
            "forbiddenFrom",
        ),
        (
            b"From: ann@example.com\nResent-Sender: Bob <bob@victim.example>\nTo: v@remote.example\n\nhi\n",
            "forbiddenFrom",
        ),
    ];
    // Each with the envelope derived, and with one given.
    let given = json!({"mailFrom": {"email": "ann@example.com"},
        "rcptTo": [{"email": "v@remote.example"}]});
    for (raw, expected) in refused {
        for (n, envelope) in [Value::Null, given.clone()].into_iter().enumerate() {
            // Another body each time: the same octets would be one email.
            let raw = [raw, format!("{n}\n").as_bytes()].concat();
            let sent = submit_raw(&app, &ann, dir.path(), &raw, envelope).await;
            let shown = String::from_utf8_lossy(&raw);
            assert_eq!(sent.refused.as_deref(), Some(*expected), "{shown:?}");
            assert_eq!(sent.message, None, "{shown:?}");
        }
    }

    // A Bcc hidden behind a bare CR is a Bcc: its address gets the mail,
    // and no recipient sees the field.
    let hidden_bcc =
        b"From: ann@example.com\nTo: v@remote.example\nSubject: t\rBcc: hidden@remote.example\n\nhi\rthere\n";
    let sent = submit_raw(&app, &ann, dir.path(), hidden_bcc, Value::Null).await;
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

/// An SMTP server that answers until the step `stall_at` (`greeting`,
/// `ehlo`, `mail`, `rcpt`, `data`, `dot`: the reply to the message, or
/// `never`), then says nothing more and keeps the connection open: the
/// relay of issue 43 that went silent. Its port.
async fn stalling_relay(stall_at: &'static str) -> u16 {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let (read, mut write) = socket.into_split();
                let mut lines = BufReader::new(read).lines();
                if stall_at == "greeting" {
                    return std::future::pending::<()>().await;
                }
                let _ = write.write_all(b"220 stall.test ESMTP\r\n").await;
                let mut in_data = false;
                while let Ok(Some(line)) = lines.next_line().await {
                    let (step, reply) = if in_data {
                        if line != "." {
                            continue;
                        }
                        in_data = false;
                        ("dot", "250 2.0.0 Taken\r\n")
                    } else {
                        let verb = line.split(' ').next().unwrap_or_default().to_uppercase();
                        match verb.as_str() {
                            "EHLO" => ("ehlo", "250-stall.test\r\n250 8BITMIME\r\n"),
                            "MAIL" => ("mail", "250 2.1.0 OK\r\n"),
                            "RCPT" => ("rcpt", "250 2.1.5 OK\r\n"),
                            "DATA" => {
                                in_data = true;
                                ("data", "354 Go on\r\n")
                            }
                            "QUIT" => ("quit", "221 Bye\r\n"),
                            _ => ("other", "250 OK\r\n"),
                        }
                    };
                    if step == stall_at {
                        return std::future::pending::<()>().await;
                    }
                    let _ = write.write_all(reply.as_bytes()).await;
                }
            });
        }
    });
    port
}

/// Issue 43: every SMTP step has a deadline. A relay that goes silent at
/// any step is given up on when that step's deadline passes (a temporary
/// refusal naming the step, retried from the queue), never waited on.
#[tokio::test]
async fn a_relay_that_stalls_at_any_step_is_given_up_on_at_that_step() {
    use fastview::mail::relay::{Refusal, RelayTimeouts};
    let timeouts = RelayTimeouts {
        step: std::time::Duration::from_millis(400),
        data_rate: 1 << 20,
        final_reply: std::time::Duration::from_millis(400),
    };
    let message = b"From: ann@example.com\r\nSubject: Hello\r\n\r\nhi\r\n";
    for (stall_at, named) in [
        ("greeting", "the greeting"),
        ("ehlo", "the greeting"),
        ("mail", "MAIL"),
        ("rcpt", "RCPT"),
        ("data", "DATA"),
        ("dot", "the message"),
    ] {
        let port = stalling_relay(stall_at).await;
        let relay = Relay::from_url(&format!("smtp://127.0.0.1:{port}"))
            .unwrap()
            .with_timeouts(timeouts);
        // The stall is for ever; the bound is generous.
        let sent = tokio::time::timeout(
            std::time::Duration::from_secs(20),
            relay.send("ann@example.com", "zed@far.example", message),
        )
        .await
        .unwrap_or_else(|_| panic!("a relay stalled at {stall_at} held the send"));
        match sent {
            Err(Refusal::Temporary(reply)) => {
                assert!(reply.starts_with("451 4.4.2"), "{stall_at}: {reply}");
                assert!(reply.contains(named), "{stall_at}: {reply}");
            }
            other => panic!("{stall_at}: {other:?}"),
        }
    }
    // The same server, silent at no step, takes the message.
    let port = stalling_relay("never").await;
    let relay = Relay::from_url(&format!("smtp://127.0.0.1:{port}"))
        .unwrap()
        .with_timeouts(timeouts);
    assert_eq!(
        relay
            .send("ann@example.com", "zed@far.example", message)
            .await,
        Ok("250 2.0.0 Taken".to_string())
    );
}

/// Issue 43: a relay that goes silent after EHLO does not hold
/// EmailSubmission/set: the call answers within a few seconds (the
/// server's `submit_wait`, 5 s by default, far under the relay's step
/// deadlines of a minute), the local recipient delivered and the remote
/// one `queued`.
#[tokio::test]
async fn a_silent_relay_does_not_hold_email_submission_set() {
    let port = stalling_relay("mail").await;
    let (app, _relay) = app_with_relay(port).await;
    let ann = app.account("ann@example.com").await;
    app.account("bob@example.com").await;
    let drafts = app.mailbox_with_role(&ann, "drafts").await;
    let identity = own_identity(&app, &ann).await;
    let call = app.call_using(
        &ann,
        &[SUBMISSION],
        json!([
            ["Email/set", {"accountId": ann.account_id, "create": {"d": {
                "mailboxIds": {drafts: true},
                "from": [{"email": "ann@example.com"}],
                "to": [{"email": "bob@example.com"}, {"email": "zed@far.example"}],
                "subject": "Hello",
                "bodyValues": {"1": {"value": "hi"}},
                "textBody": [{"partId": "1", "type": "text/plain"}],
            }}}],
            ["EmailSubmission/set", {"accountId": ann.account_id,
                "create": {"s": {"identityId": identity, "emailId": "#d"}}}],
        ]),
    );
    let responses = tokio::time::timeout(std::time::Duration::from_secs(30), call)
        .await
        .expect("EmailSubmission/set waited on a silent relay");
    let status = &responses[1][1]["created"]["s"]["deliveryStatus"];
    assert_eq!(
        status["bob@example.com"]["delivered"], "yes",
        "{responses:?}"
    );
    assert_eq!(
        status["zed@far.example"]["delivered"], "queued",
        "{responses:?}"
    );
}

/// Issue 43: deliveries to the relay reuse connections: one submission to
/// three remote recipients is three transactions (one status each) on one
/// connection, and the next submission uses it again.
#[tokio::test]
async fn recipients_of_one_relay_share_a_connection() {
    let dir = tempfile::tempdir().unwrap();
    let Some(sink) = start_sink(dir.path(), &[]) else {
        return;
    };
    let (app, relay) = app_with_relay(sink.port).await;
    let ann = app.account("ann@example.com").await;
    let drafts = app.mailbox_with_role(&ann, "drafts").await;
    let identity = own_identity(&app, &ann).await;
    for (n, to) in [
        vec!["a@far.example", "b@far.example", "c@far.example"],
        vec!["d@far.example"],
    ]
    .into_iter()
    .enumerate()
    {
        let to: Vec<Value> = to.iter().map(|a| json!({"email": a})).collect();
        let responses = app
            .call_using(
                &ann,
                &[SUBMISSION],
                json!([
                    ["Email/set", {"accountId": ann.account_id, "create": {"d": {
                        "mailboxIds": {drafts.clone(): true},
                        "from": [{"email": "ann@example.com"}],
                        "to": to,
                        "subject": format!("Note {n}"),
                        "bodyValues": {"1": {"value": "hi"}},
                        "textBody": [{"partId": "1", "type": "text/plain"}],
                    }}}],
                    ["EmailSubmission/set", {"accountId": ann.account_id,
                        "create": {"s": {"identityId": identity, "emailId": "#d"}}}],
                ]),
            )
            .await;
        let status = responses[1][1]["created"]["s"]["deliveryStatus"]
            .as_object()
            .unwrap_or_else(|| panic!("{responses:?}"))
            .clone();
        assert!(
            status.values().all(|s| s["delivered"] == "unknown"),
            "{responses:?}"
        );
    }
    let mut peers = Vec::new();
    let mut recipients = Vec::new();
    for n in 1..=4 {
        let record: Value =
            serde_json::from_slice(&std::fs::read(dir.path().join(format!("{n}.json"))).unwrap())
                .unwrap();
        recipients.push(record["rcpt_tos"][0].as_str().unwrap().to_string());
        peers.push(record["peer"].clone());
    }
    recipients.sort();
    assert_eq!(
        recipients,
        [
            "a@far.example",
            "b@far.example",
            "c@far.example",
            "d@far.example"
        ]
    );
    assert!(!dir.path().join("5.json").exists());
    peers.dedup();
    assert_eq!(peers.len(), 1, "{peers:?}");
    assert_eq!(relay.connections_opened(), 1);
}

/// Issue 43: a delivery in flight is never sent twice. A node that stalled
/// past its lease finds, before its next recipient, that another node took
/// the delivery over: it sends nothing and records nothing; the new holder
/// sends it once and records it.
#[tokio::test]
async fn a_delivery_taken_over_is_sent_by_its_new_holder_only() {
    use crate::delivery_queue::{first_delivery_status, nothing_to_take, queue_delivery};
    let dir = tempfile::tempdir().unwrap();
    let Some(sink) = start_sink(dir.path(), &[]) else {
        return;
    };
    let relay = Relay::from_url(&format!("smtp://127.0.0.1:{}", sink.port)).unwrap();
    let app = spawn_app_with(ServeOptions::default()).await;
    let ann = app.account("ann@example.com").await;
    let store = app.app.store.as_ref();
    let message = b"From: ann@example.com\r\nTo: zed@far.example\r\nSubject: Once\r\n\r\nhi\r\n";
    let blob_id = app.app.blobs.put(message.to_vec()).await.unwrap();
    let send_at = chrono::Utc::now().timestamp() - 900;
    let (submission, made) = queue_delivery(
        store,
        ann.id,
        blob_id,
        &["zed@far.example"],
        send_at,
        json!({"zed@far.example": {"delivered": "queued"}}).to_string(),
    )
    .await;
    // The maker's lease ran out; another node took the delivery.
    let now = chrono::Utc::now().timestamp();
    let taken = store.take_deliveries(now, 600, 10).await.unwrap();
    assert_eq!(taken.len(), 1);
    // The maker wakes up and goes on with its copy of the delivery.
    delivery::deliver(store, &app.app.blobs, Some(&relay), "test", &made[0], now)
        .await
        .unwrap();
    assert!(!dir.path().join("1.eml").exists());
    let rows = store.submissions(ann.id).await.unwrap();
    assert_eq!(rows[0].id, submission);
    assert_eq!(
        rows[0].delivery_status,
        json!({"zed@far.example": {"delivered": "queued"}}).to_string()
    );
    // The new holder sends it, once.
    delivery::deliver(store, &app.app.blobs, Some(&relay), "test", &taken[0], now)
        .await
        .unwrap();
    assert!(dir.path().join("1.eml").exists());
    assert!(!dir.path().join("2.eml").exists());
    let status = first_delivery_status(store, ann.id).await;
    assert_eq!(status["zed@far.example"]["delivered"], "unknown");
    assert!(nothing_to_take(store, now + 100_000, 600).await);
}

/// Issue 43: a delivery in flight is not taken by another node while its
/// holder works on it. Holds here last two seconds (600 in `serve`) and the
/// relay stalls before answering the message for longer than that; the
/// holder renews the hold meanwhile, so another node finds nothing to take;
/// the stalled step ends at its deadline and the attempt is recorded as a
/// retry.
#[tokio::test]
async fn a_delivery_in_flight_is_held_while_the_relay_stalls() {
    use crate::delivery_queue::{first_delivery_status, queue_delivery};
    use fastview::mail::relay::RelayTimeouts;
    let port = stalling_relay("dot").await;
    let relay = Relay::from_url(&format!("smtp://127.0.0.1:{port}"))
        .unwrap()
        .with_timeouts(RelayTimeouts {
            step: std::time::Duration::from_secs(4),
            data_rate: 1 << 20,
            final_reply: std::time::Duration::from_secs(4),
        });
    let app = spawn_app_with(ServeOptions::default()).await;
    let ann = app.account("ann@example.com").await;
    let store = app.app.store.clone();
    let message = b"From: ann@example.com\r\nTo: zed@far.example\r\nSubject: Held\r\n\r\nhi\r\n";
    let blob_id = app.app.blobs.put(message.to_vec()).await.unwrap();
    // Queued ten minutes ago: its maker's first hold is over.
    let send_at = chrono::Utc::now().timestamp() - 600;
    let (_, made) = queue_delivery(
        store.as_ref(),
        ann.id,
        blob_id,
        &["zed@far.example"],
        send_at,
        "{}".into(),
    )
    .await;
    let worker = {
        let (store, blobs, made) = (store.clone(), app.app.blobs.clone(), made[0].clone());
        tokio::spawn(async move {
            let outbound = delivery::Outbound::Relay(Some(&relay));
            let hold = delivery::Hold {
                lease: 2,
                renew_every: std::time::Duration::from_millis(200),
            };
            let courier = delivery::Courier {
                store: store.as_ref(),
                blobs: &blobs,
                outbound,
                host: "test",
            };
            delivery::deliver_holding(courier, &made, send_at, hold).await
        })
    };
    // Past a two-second hold (whole seconds: taken at the latest two
    // seconds on without renewals), while the relay is silent: nothing to
    // take.
    tokio::time::sleep(std::time::Duration::from_millis(2_500)).await;
    assert!(!worker.is_finished());
    let now = chrono::Utc::now().timestamp();
    assert_eq!(store.take_deliveries(now, 600, 10).await.unwrap(), vec![]);
    // The stalled step ends at its deadline: a retry, recorded by the holder.
    tokio::time::timeout(std::time::Duration::from_secs(30), worker)
        .await
        .expect("the attempt ended at the step's deadline")
        .unwrap()
        .unwrap();
    let status = first_delivery_status(store.as_ref(), ann.id).await;
    assert_eq!(status["zed@far.example"]["delivered"], "queued", "{status}");
    assert!(
        status["zed@far.example"]["smtpReply"]
            .as_str()
            .unwrap()
            .starts_with("451 4.4.2"),
        "{status}"
    );
}

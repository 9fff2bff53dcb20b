//! JMAP writes through the IMAP proxy reach the upstream first (issues 18
//! and 45), each check run in front of Dovecot and of Cyrus
//! (`imap_server.rs`): keywords, moves, copies, destroys, imports and
//! mailboxes; a master login that syncs every account; evicted messages
//! read again; mail sent through the upstream's submission server as the
//! user. The helpers are `upstream_imap.rs`'s.

use std::time::{Duration, Instant};

use fastview::proxy::Proxy;
use serde_json::{Value, json};

use crate::imap_server::{ImapServer, Kind};
use crate::support::dovecot::set_mode;
use crate::support::{PASSWORD, TestAccount, TestApp, crlf};
use crate::upstream_imap::{
    golden_crlf, mailbox_ids, mailbox_named, proxy_with_inbox, session_status, spawn_proxy_options,
    until_listed_as_watched, until_received,
};

/// Email/set (keywords, mailboxIds, destroy), Email/import and Mailbox/set
/// go to the upstream first and are recorded here by a sync of only what
/// changed; odd cases; a password changed upstream stops working here.
async fn check_jmap_writes_go_to_the_upstream_first(kind: Kind) {
    let messages = golden_crlf(3);
    let Some((server, proxy, carol, first)) =
        proxy_with_inbox(kind, "carol@example.com", &messages, |_| {}).await
    else {
        return;
    };
    let ids: Vec<String> = first
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect();
    let mailboxes = mailbox_ids(&proxy, &carol).await;
    let inbox = mailbox_named(&mailboxes, "INBOX");
    let archive = mailbox_named(&mailboxes, "Archive");

    // Keywords: UID STORE upstream, then the change here, by a sync that
    // reads only the mailbox that changed (CONDSTORE: HIGHESTMODSEQ).
    // (After the first sync has ended, which is after its emails show.)
    let deadline = Instant::now() + Duration::from_secs(10);
    while proxy
        .metric("fastview_upstream_round_trips_total{method=\"sync\",command=\"sync\"}")
        .await
        < 1.0
    {
        assert!(Instant::now() < deadline, "the first sync ends");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let read_before = proxy.metric("fastview_upstream_mailboxes_read_total").await;
    let set = proxy
        .update_email(
            &carol,
            &ids[0],
            json!({"keywords/$flagged": true, "keywords/$seen": true}),
        )
        .await;
    assert_eq!(set["updated"], json!({ids[0].clone(): null}), "{set}");
    let read = proxy.metric("fastview_upstream_mailboxes_read_total").await - read_before;
    assert_eq!(read, 1.0, "mailboxes read by the sync after the write");
    let stores = proxy
        .metric("fastview_upstream_round_trips_total{method=\"Email/set\",command=\"store\"}")
        .await;
    assert_eq!(stores, 1.0, "UID STORE counted under Email/set");
    let flags = server.flags("carol@example.com", "INBOX");
    assert!(
        flags[0].contains("\\Flagged") && flags[0].contains("\\Seen"),
        "{flags:?}"
    );
    let got = proxy.email_get(&carol, &[&ids[0]], &["keywords"]).await;
    assert_eq!(
        got["list"][0]["keywords"],
        json!({"$flagged": true, "$seen": true})
    );

    // mailboxIds: UID MOVE; the JMAP id stays.
    let set = proxy
        .call_in(
            &carol,
            "Email/set",
            json!({"update": {ids[1].clone(): {"mailboxIds": {archive.clone(): true}}}}),
        )
        .await;
    assert_eq!(set["updated"], json!({ids[1].clone(): null}), "{set}");
    assert_eq!(server.flags("carol@example.com", "INBOX").len(), 2);
    assert_eq!(server.flags("carol@example.com", "Archive").len(), 1);
    let got = proxy.email_get(&carol, &[&ids[1]], &["mailboxIds"]).await;
    assert_eq!(got["list"][0]["mailboxIds"], json!({archive.clone(): true}));

    // In two mailboxes at once: UID COPY.
    let set = proxy
        .call_in(
            &carol,
            "Email/set",
            json!({"update": {ids[1].clone(): {format!("mailboxIds/{inbox}"): true}}}),
        )
        .await;
    assert_eq!(set["updated"], json!({ids[1].clone(): null}), "{set}");
    assert_eq!(server.flags("carol@example.com", "INBOX").len(), 3);

    // Destroy: \Deleted + UID EXPUNGE of every copy.
    let set = proxy
        .call_in(&carol, "Email/set", json!({"destroy": [ids[1]]}))
        .await;
    assert_eq!(set["destroyed"], json!([ids[1]]), "{set}");
    assert_eq!(server.flags("carol@example.com", "INBOX").len(), 2);
    assert!(server.flags("carol@example.com", "Archive").is_empty());

    // Email/import: APPEND, with flags and INTERNALDATE.
    let raw = b"From: dan@example.com\nTo: carol@example.com\nSubject: imported\n\nhi\n".to_vec();
    let (status, upload) = proxy.upload(&carol, raw).await;
    assert_eq!(status, 201, "{upload}");
    let imported = proxy
        .call_in(
            &carol,
            "Email/import",
            json!({"emails": {"i": {
            "blobId": upload["blobId"], "mailboxIds": {archive.clone(): true},
            "keywords": {"$seen": true}, "receivedAt": "2024-01-02T03:04:05Z"}}}),
        )
        .await;
    let created = &imported["created"]["i"];
    assert!(created["id"].is_string(), "{imported}");
    let flags = server.flags("carol@example.com", "Archive");
    assert_eq!(flags.len(), 1);
    assert!(flags[0].contains("\\Seen"), "{flags:?}");
    let got = proxy
        .email_get(
            &carol,
            &[&created["id"]],
            &["receivedAt", "subject", "mailboxIds"],
        )
        .await;
    assert_eq!(got["list"][0]["receivedAt"], "2024-01-02T03:04:05Z");
    assert_eq!(got["list"][0]["subject"], "imported");
    // Synced mail is in the local search index.
    let found = proxy
        .call_in(
            &carol,
            "Email/query",
            json!({"filter": {"text": "imported"}}),
        )
        .await;
    assert_eq!(found["ids"], json!([created["id"]]), "{found}");

    assert_mailbox_set_reaches_the_upstream(&server, &proxy, &carol, &archive).await;
    assert_writes_in_odd_cases(&server, &proxy, &carol, &archive, &ids[0]).await;

    // A password changed upstream stops working here (a fresh check asks).
    server.set_passwords(&[("carol@example.com", "changed")]);
    let carol_with = |password| session_status(&proxy, "carol@example.com", password);
    assert_eq!(carol_with(PASSWORD).await, 401);
    assert_eq!(carol_with("changed").await, 200);
}

/// Mailbox/set: CREATE, RENAME (the id stays), DELETE; a refusal.
async fn assert_mailbox_set_reaches_the_upstream(
    server: &ImapServer,
    proxy: &TestApp,
    carol: &TestAccount,
    archive: &str,
) {
    // Mailbox/set: CREATE, RENAME (the id stays), DELETE; a refusal.
    let made = proxy
        .call_in(
            carol,
            "Mailbox/set",
            json!({"create": {"l": {"name": "Lists", "parentId": null},
                "bad": {"name": server.refused_name()}}}),
        )
        .await;
    let lists = made["created"]["l"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{made}"))
        .to_string();
    assert_eq!(made["notCreated"]["bad"]["type"], "forbidden", "{made}");
    assert!(
        server
            .mailbox_names("carol@example.com")
            .contains(&"Lists".to_string())
    );
    let renamed = proxy
        .call_in(
            carol,
            "Mailbox/set",
            json!({"update": {lists.clone(): {"name": "Lists ✓", "parentId": archive}}}),
        )
        .await;
    assert_eq!(
        renamed["updated"],
        json!({lists.clone(): null}),
        "{renamed}"
    );
    let names = server.mailbox_names("carol@example.com");
    assert!(
        names.contains(&"Archive/Lists &JxM-".to_string()),
        "{names:?}"
    );
    let after = mailbox_ids(proxy, carol).await;
    assert_eq!(mailbox_named(&after, "Lists ✓"), lists);
    // The subscription followed the new name.
    let row = &after.iter().find(|(n, _)| n == "Lists ✓").unwrap().1;
    assert_eq!(row["isSubscribed"], true, "{row}");
    // A name holding the hierarchy delimiter is refused, not nested.
    let nested = proxy
        .call_in(
            carol,
            "Mailbox/set",
            json!({"create": {"x": {"name": "x/y"}}}),
        )
        .await;
    assert_eq!(nested["notCreated"]["x"]["type"], "forbidden", "{nested}");
    let gone = proxy
        .call_in(carol, "Mailbox/set", json!({"destroy": [lists]}))
        .await;
    assert_eq!(gone["destroyed"], json!([lists]), "{gone}");
    assert!(
        !server
            .mailbox_names("carol@example.com")
            .iter()
            .any(|n| n.contains("Lists"))
    );
}

/// Writes where the upstream holds duplicates, a mailbox it will not
/// open, an odd name, a mailbox another client deleted.
async fn assert_writes_in_odd_cases(
    server: &ImapServer,
    proxy: &TestApp,
    carol: &TestAccount,
    archive: &str,
    first: &str,
) {
    // The same bytes twice in INBOX are one email; a move takes both copies.
    let twice = crlf(b"From: fay@example.com\nTo: carol@example.com\nSubject: twice\n\nsame\n");
    server.append(
        "carol@example.com",
        "INBOX",
        &[twice.clone(), twice],
        "",
        1_750_000_000,
    );
    let listed = until_received(proxy, carol, "two copies", "2025-06-15T15:06:40Z").await;
    let once = listed
        .iter()
        .find(|e| e["receivedAt"] == "2025-06-15T15:06:40Z")
        .unwrap()["id"]
        .clone();
    let inbox_before = server.flags("carol@example.com", "INBOX").len();
    proxy
        .update_email(
            carol,
            once.as_str().unwrap(),
            json!({"mailboxIds": {archive: true}}),
        )
        .await;
    assert_eq!(
        server.flags("carol@example.com", "INBOX").len(),
        inbox_before - 2
    );
    assert_eq!(server.flags("carol@example.com", "Archive").len(), 3);

    // A mailbox the upstream will not open does not stop the others.
    server.create("carol@example.com", "Broken");
    let broken = server.mailbox_folder("carol@example.com", "Broken");
    set_mode(&broken, 0o000);
    let late = crlf(b"From: gil@example.com\nTo: carol@example.com\nSubject: late\n\nstill\n");
    server.append("carol@example.com", "INBOX", &[late], "", 1_760_000_000);
    until_received(
        proxy,
        carol,
        "mail beside a broken mailbox",
        "2025-10-09T08:53:20Z",
    )
    .await;
    set_mode(&broken, 0o755);

    // A name LIST quotes round-trips.
    let odd_id = proxy.create_mailbox(carol, server.quoted_name()).await;
    let mailboxes = mailbox_ids(proxy, carol).await;
    assert_eq!(mailbox_named(&mailboxes, server.quoted_name()), odd_id);

    // Another client deleting the mailbox a write's sync read last (the
    // last by name) does not break the next write.
    server.create("carol@example.com", "Zz");
    proxy
        .update_email(carol, first, json!({"keywords/$forwarded": true}))
        .await;
    server.client(
        "carol@example.com",
        "r = m.delete('Zz')\nassert r[0] == 'OK', r",
    );
    proxy
        .update_email(carol, first, json!({"keywords/$answered": true}))
        .await;
}

in_front_of_each!(check_jmap_writes_go_to_the_upstream_first:
    jmap_writes_go_to_the_upstream_first_in_front_of_dovecot,
    jmap_writes_go_to_the_upstream_first_in_front_of_cyrus
);

/// With a master login (Dovecot's master user, Cyrus's administrator,
/// each acting as the user by SASL PLAIN's authorization identity) every
/// account is synced without its user.
async fn check_a_master_login_syncs_every_account_without_its_user(kind: Kind) {
    let Some((server, master)) = ImapServer::start_with_master(kind, &["dan@example.com"]) else {
        return;
    };
    let messages = golden_crlf(2);
    server.append("dan@example.com", "INBOX", &messages, "", 1_700_000_000);
    let proxy = spawn_proxy_options(&server, |options| options.master = Some(master)).await;
    // An account an earlier login made; nobody logs in now.
    let Some(Proxy::Imap(upstream)) = &proxy.proxy else {
        panic!("an IMAP proxy");
    };
    let dan = upstream.account("dan@example.com").await.unwrap();
    assert_eq!(upstream.start_all().await.unwrap(), 1);
    let store = proxy.app.store.clone();
    let emails = || async { store.query_rows(dan.id, None).await.unwrap().len() };
    let deadline = Instant::now() + Duration::from_secs(30);
    while emails().await < 2 {
        assert!(Instant::now() < deadline, "the master login's first sync");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // `account list` tells how far behind each account's mirror may be,
    // and how it learns of changes.
    until_listed_as_watched(&proxy, "dan@example.com", server.watch()).await;
    // Still listening, with no request at all.
    let extra = crlf(b"From: eve@example.com\nTo: dan@example.com\nSubject: later\n\nhi\n");
    server.append("dan@example.com", "INBOX", &[extra], "", 1_800_000_000);
    let deadline = Instant::now() + Duration::from_secs(5);
    while emails().await < 3 {
        assert!(
            Instant::now() < deadline,
            "a change while nobody is logged in"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Dan's own password is still checked against the upstream.
    assert_eq!(
        session_status(&proxy, "dan@example.com", "wrong").await,
        401
    );
    assert_eq!(
        session_status(&proxy, "dan@example.com", PASSWORD).await,
        200
    );
}

in_front_of_each!(check_a_master_login_syncs_every_account_without_its_user:
    a_master_login_syncs_every_account_without_its_user_in_front_of_dovecot,
    a_master_login_syncs_every_account_without_its_user_in_front_of_cyrus
);

/// Message octets evicted from the bounded cache are read again by UID,
/// byte for byte what the upstream holds; the list view reads none.
async fn check_evicted_messages_are_read_again_from_the_upstream(kind: Kind) {
    let messages = golden_crlf(6);
    // A bound of one octet: the eviction pass takes every message.
    let Some((server, proxy, erin, listed)) =
        proxy_with_inbox(kind, "erin@example.com", &messages, |options| {
            options.cache_bytes = 1
        })
        .await
    else {
        return;
    };
    // What the upstream holds (Cyrus rewrote 8-bit header octets).
    let messages = server.messages("erin@example.com", "INBOX");
    let ids: Vec<Value> = listed.iter().map(|e| e["id"].clone()).collect();
    let blobs: Vec<String> = listed
        .iter()
        .map(|e| e["blobId"].as_str().unwrap().to_string())
        .collect();
    let full = json!({"accountId": erin.account_id, "ids": ids,
        "properties": ["blobId", "bodyValues", "textBody", "htmlBody", "attachments", "preview"],
        "fetchAllBodyValues": true});
    let before = proxy.call1(&erin, "Email/get", full.clone()).await;

    let Some(Proxy::Imap(upstream)) = &proxy.proxy else {
        panic!("an IMAP proxy");
    };
    assert_eq!(upstream.evict().await.unwrap(), 6);
    for blob in &blobs {
        assert!(
            !proxy.app.blobs.exists(blob).await.unwrap(),
            "{blob} evicted"
        );
    }
    // `fastview fsck` (its own blob store, no upstream to read from):
    // evicted blobs are not missing.
    let plain = fastview::blob::BlobStore::open(proxy.app.blobs.url()).unwrap();
    let report = fastview::mail::fsck::check(proxy.app.store.as_ref(), &plain, |_| {})
        .await
        .unwrap();
    assert_eq!(report.checked, 6);
    assert!(report.missing.is_empty(), "{:?}", report.missing);
    assert!(!proxy.app.blobs.exists(&blobs[0]).await.unwrap());
    // The list view reads no blob: they stay evicted.
    let list = proxy
        .email_get(
            &erin,
            &ids,
            &[
                "subject",
                "from",
                "preview",
                "hasAttachment",
                "bodyStructure",
            ],
        )
        .await;
    assert_eq!(list["list"].as_array().unwrap().len(), 6);
    assert!(!proxy.app.blobs.exists(&blobs[0]).await.unwrap());
    // A full read brings each back from the upstream, the same JSON.
    let after = proxy.call1(&erin, "Email/get", full).await;
    assert_eq!(after["list"], before["list"]);
    assert_eq!(
        proxy.metric("fastview_upstream_cache_refills_total").await,
        6.0
    );
    let octets: usize = messages.iter().map(Vec::len).sum();
    assert_eq!(
        proxy
            .metric("fastview_upstream_bytes_total{method=\"Email/get\"}")
            .await,
        octets as f64,
        "the octets read again, under the method that read them"
    );
    for blob in &blobs {
        assert!(
            proxy.app.blobs.exists(blob).await.unwrap(),
            "{blob} read again"
        );
    }
    let names: Vec<&str> = blobs.iter().map(String::as_str).collect();
    assert!(
        proxy
            .app
            .store
            .evicted_among(&names)
            .await
            .unwrap()
            .is_empty()
    );
    // A download of an evicted message: byte for byte what IMAP holds.
    assert_eq!(upstream.evict().await.unwrap(), 6);
    let (status, body) = proxy.download(&erin, &blobs[1], "m.eml").await;
    assert_eq!(status, 200);
    assert!(messages.contains(&body));
    assert_eq!(
        fastview::blob::blob_id_of(&body),
        blobs[1],
        "the octets hash to the blob id"
    );
}

in_front_of_each!(check_evicted_messages_are_read_again_from_the_upstream:
    evicted_messages_are_read_again_from_the_upstream_in_front_of_dovecot,
    evicted_messages_are_read_again_from_the_upstream_in_front_of_cyrus
);

/// With `--upstream-smtp` (aiosmtpd here, whatever the IMAP server) mail is
/// sent as the user, and the sent copy is the upstream's.
async fn check_mail_is_sent_through_the_upstreams_submission_server_as_the_user(kind: Kind) {
    let outbox = tempfile::tempdir().unwrap();
    let auth = format!("hana@example.com:{PASSWORD}");
    let Some(sink) = crate::relay::start_sink(outbox.path(), &["--auth", &auth]) else {
        return;
    };
    let welcome = crlf(b"From: ivy@example.com\nTo: hana@example.com\nSubject: hi\n\nhello\n");
    let smtp = format!("smtp://127.0.0.1:{}", sink.port);
    let Some((server, proxy, hana, _)) =
        proxy_with_inbox(kind, "hana@example.com", &[welcome], |options| {
            options.smtp = Some(smtp)
        })
        .await
    else {
        return;
    };
    // With a submission server, submission is offered (RFC 8621 §1.3.2).
    let session = proxy.session(&hana).await;
    let submission = "urn:ietf:params:jmap:submission";
    assert_eq!(session["capabilities"][submission], json!({}));
    assert_eq!(
        session["accounts"][&hana.account_id]["accountCapabilities"][submission],
        json!({"maxDelayedSend": 0, "submissionExtensions": {}})
    );
    assert_eq!(session["primaryAccounts"][submission], hana.account_id);
    let mailboxes = mailbox_ids(&proxy, &hana).await;
    let (drafts, sent) = (
        mailbox_named(&mailboxes, "Drafts"),
        mailbox_named(&mailboxes, "Sent"),
    );
    let identities = proxy
        .call_using(
            &hana,
            &[submission],
            json!([["Identity/get", {"accountId": hana.account_id}]]),
        )
        .await;
    let identity = identities[0][1]["list"][0]["id"].clone();
    let responses = proxy
        .call_using(
            &hana,
            &[submission],
            json!([
                ["Email/set", {"accountId": hana.account_id, "create": {"d": {
                    "mailboxIds": {drafts.clone(): true},
                    "keywords": {"$draft": true, "$seen": true},
                    "from": [{"email": "hana@example.com"}],
                    "to": [{"email": "jo@far.example"}],
                    "subject": "Out",
                    "bodyValues": {"1": {"value": "Sent upstream.\n"}},
                    "textBody": [{"partId": "1", "type": "text/plain"}],
                }}}],
                ["EmailSubmission/set", {"accountId": hana.account_id,
                    "create": {"s": {"identityId": identity, "emailId": "#d"}},
                    "onSuccessUpdateEmail": {"#s": {"keywords/$draft": null,
                        format!("mailboxIds/{drafts}"): null, format!("mailboxIds/{sent}"): true}}}],
            ]),
        )
        .await;
    let created = &responses[1][1]["created"]["s"];
    assert_eq!(
        created["deliveryStatus"]["jo@far.example"]["delivered"], "unknown",
        "{responses:?}"
    );
    // The submission server got it from Hana, authenticated as Hana.
    let record: Value =
        serde_json::from_slice(&std::fs::read(outbox.path().join("1.json")).unwrap()).unwrap();
    assert_eq!(record["login"], "hana@example.com");
    assert_eq!(record["mail_from"], "hana@example.com");
    assert_eq!(record["rcpt_tos"], json!(["jo@far.example"]));
    // The draft became the sent copy, on the upstream.
    assert_eq!(responses[2][0], "Email/set", "{responses:?}");
    assert!(server.flags("hana@example.com", "Drafts").is_empty());
    let sent_flags = server.flags("hana@example.com", "Sent");
    assert_eq!(sent_flags.len(), 1);
    assert!(!sent_flags[0].contains("\\Draft"), "{sent_flags:?}");

    // A client that leaves the draft where it is: the server keeps the
    // sent copy in Sent (read, without Bcc), the draft stays a draft.
    let responses = proxy
        .call_using(
            &hana,
            &[submission],
            json!([
                ["Email/set", {"accountId": hana.account_id, "create": {"d": {
                    "mailboxIds": {drafts.clone(): true},
                    "keywords": {"$draft": true},
                    "from": [{"email": "hana@example.com"}],
                    "to": [{"email": "jo@far.example"}],
                    "bcc": [{"email": "kit@far.example"}],
                    "subject": "Second",
                    "bodyValues": {"1": {"value": "Kept by the server.\n"}},
                    "textBody": [{"partId": "1", "type": "text/plain"}],
                }}}],
                ["EmailSubmission/set", {"accountId": hana.account_id,
                    "create": {"s": {"identityId": identity, "emailId": "#d"}}}],
            ]),
        )
        .await;
    assert!(responses[1][1]["created"]["s"].is_object(), "{responses:?}");
    assert_eq!(server.flags("hana@example.com", "Drafts").len(), 1);
    let sent_flags = server.flags("hana@example.com", "Sent");
    assert_eq!(sent_flags.len(), 2, "{sent_flags:?}");
    assert!(sent_flags[1].contains("\\Seen"), "{sent_flags:?}");
    let copy = server.client(
        "hana@example.com",
        "m.select('Sent')\ntyp, data = m.uid('FETCH', '2', '(BODY.PEEK[HEADER])')\nprint(data[0][1].decode())",
    );
    assert!(copy.contains("Subject: Second"), "{copy}");
    assert!(!copy.to_ascii_lowercase().contains("bcc:"), "{copy}");
}

in_front_of_each!(check_mail_is_sent_through_the_upstreams_submission_server_as_the_user:
    mail_is_sent_through_the_upstreams_submission_server_as_the_user_in_front_of_dovecot,
    mail_is_sent_through_the_upstreams_submission_server_as_the_user_in_front_of_cyrus
);

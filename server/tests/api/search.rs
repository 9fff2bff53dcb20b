//! Full-text search (issue 16, ADR 0006): Email/query `text` and `body`
//! through the index, combined with other filters, SearchSnippet/get, and
//! Email/queryChanges following a text query; on the configured database
//! (PostgreSQL in CI) and on SQLite, with messages written for this test,
//! and over the shared corpus.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::support::{TestAccount, TestApp, corpus, spawn_app, spawn_sqlite_app};

/// Messages written for this test: (name, raw).
fn messages() -> Vec<(&'static str, Vec<u8>)> {
    let list: Vec<(&str, String)> = vec![
        (
            "xylophone",
            "From: =?UTF-8?Q?Zo=C3=AB_M=C3=BCller?= <zoe@example.org>\r\nTo: team@example.com\r\n\
             Subject: Quarterly numbers\r\nMIME-Version: 1.0\r\n\
             Content-Type: multipart/mixed; boundary=\"b\"\r\n\r\n\
             --b\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n\
             The xylophone arrives Tuesday. Meet in the conference room.\r\n\
             --b\r\nContent-Type: application/pdf; name=\"Budget-Forecast.pdf\"\r\n\
             Content-Disposition: attachment; filename=\"Budget-Forecast.pdf\"\r\n\
             Content-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQK\r\n--b--\r\n"
                .into(),
        ),
        (
            "cafe",
            "From: Bob <bob@example.com>\r\nTo: team@example.com\r\nSubject: =?UTF-8?Q?Caf=C3=A9?= plans\r\n\
             MIME-Version: 1.0\r\nContent-Type: text/html; charset=utf-8\r\n\r\n\
             <p>Lunch at the <b>caf\u{e9}</b> near the Project Alpha office &amp; more</p>\r\n"
                .into(),
        ),
        (
            "japanese",
            "From: Tanaka <tanaka@example.jp>\r\nTo: team@example.com\r\n\
             Subject: =?UTF-8?B?5Lya6K2w44Gu5Lu2?=\r\nMIME-Version: 1.0\r\n\
             Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n\
             \u{660e}\u{65e5}\u{306e}\u{4f1a}\u{8b70}\u{306f}\u{6771}\u{4eac}\u{3067}\u{884c}\u{3044}\u{307e}\u{3059}\u{3002}\r\n"
                .into(),
        ),
        (
            "status",
            "From: Carol <carol@example.com>\r\nTo: team@example.com\r\n\
             Subject: Alpha project status\r\n\r\nproject status: alpha is done.\r\n"
                .into(),
        ),
        (
            "name_only",
            "From: Xavier Quetzalcoatl <xq@example.com>\r\nTo: team@example.com\r\n\
             Subject: Hello\r\n\r\nhi there\r\n"
                .into(),
        ),
    ];
    list.into_iter()
        .map(|(name, raw)| (name, raw.into_bytes()))
        .collect()
}

struct Fixture {
    app: TestApp,
    user: TestAccount,
    /// Email id by message name.
    ids: std::collections::HashMap<&'static str, String>,
}

impl Fixture {
    async fn new(app: TestApp) -> Self {
        let user = app.account("ann@example.com").await;
        let messages = messages();
        let raws: Vec<Vec<u8>> = messages.iter().map(|(_, raw)| raw.clone()).collect();
        let stored = app.ingest(&user, &raws, 1_700_000_000).await;
        let ids = messages.iter().map(|(name, _)| *name).zip(stored).collect();
        Self { app, user, ids }
    }

    /// Asserts an Email/query with `filter` finds the messages named `expected`.
    async fn check(&self, filter: Value, expected: &[&'static str]) {
        assert_eq!(self.query(filter.clone()).await, set(expected), "{filter}");
    }

    /// The names of the messages an Email/query with `filter` finds.
    async fn query(&self, filter: Value) -> BTreeSet<&'static str> {
        let response = self
            .app
            .call1(
                &self.user,
                "Email/query",
                json!({"accountId": self.user.account_id, "filter": filter}),
            )
            .await;
        response["ids"]
            .as_array()
            .unwrap_or_else(|| panic!("{response}"))
            .iter()
            .map(|id| self.name(id.as_str().unwrap()))
            .collect()
    }

    /// SearchSnippet/get of `email_ids` with `filter`; the response arguments.
    async fn snippets(&self, filter: Value, email_ids: Value) -> Value {
        let arguments = json!({"filter": filter, "emailIds": email_ids});
        let user = &self.user;
        self.app.call_in(user, "SearchSnippet/get", arguments).await
    }

    fn name(&self, id: &str) -> &'static str {
        self.ids
            .iter()
            .find(|(_, known)| known.as_str() == id)
            .map(|(name, _)| *name)
            .unwrap_or("?")
    }
}

fn set(names: &[&'static str]) -> BTreeSet<&'static str> {
    names.iter().copied().collect()
}

/// Every rule of the README's "Search" section, on one store.
async fn check_rules(app: TestApp) {
    let f = Fixture::new(app).await;
    // A word only in a body, only in an attachment name, only in a display name.
    f.check(json!({"text": "xylophone"}), &["xylophone"]).await;
    f.check(json!({"body": "xylophone"}), &["xylophone"]).await;
    f.check(json!({"text": "forecast"}), &["xylophone"]).await;
    f.check(json!({"text": "quetzalcoatl"}), &["name_only"])
        .await;
    f.check(json!({"body": "quetzalcoatl"}), &[]).await;
    f.check(json!({"text": "xq@example.com"}), &["name_only"])
        .await;
    // Case and diacritics folded, both ways.
    f.check(json!({"text": "ZOË"}), &["xylophone"]).await;
    f.check(json!({"text": "muller"}), &["xylophone"]).await;
    f.check(json!({"text": "CAFE"}), &["cafe"]).await;
    f.check(json!({"body": "café"}), &["cafe"]).await;
    // Words are prefixes; every word must be found, in any field.
    f.check(json!({"text": "conf"}), &["xylophone"]).await;
    // A word of fewer than four characters matches whole words only: "the"
    // is not a prefix of "there" (name_only), "ther" is.
    f.check(json!({"text": "the"}), &["xylophone", "cafe"])
        .await;
    f.check(json!({"text": "ther"}), &["name_only"]).await;
    f.check(json!({"text": "zoe xylophone"}), &["xylophone"])
        .await;
    f.check(json!({"text": "zoe nothinglikethis"}), &[]).await;
    // A phrase matches its words in order, next to each other.
    f.check(json!({"text": "project alpha"}), &["cafe", "status"])
        .await;
    f.check(json!({"text": "\"project alpha\""}), &["cafe"])
        .await;
    f.check(json!({"text": "\"alpha project\""}), &["status"])
        .await;
    // Japanese: found as a run of characters, in the subject and the body.
    f.check(json!({"text": "東京"}), &["japanese"]).await;
    f.check(json!({"text": "京東"}), &[]).await;
    f.check(json!({"text": "会議"}), &["japanese"]).await;
    f.check(json!({"body": "会議"}), &["japanese"]).await;
    // The search's list view (found, sorted and counted by the database)
    // and the general evaluation (here forced by an anchor) agree.
    let page = |extra: Value| {
        let mut arguments = json!({"accountId": f.user.account_id, "filter": {"text": "project"},
            "calculateTotal": true});
        for (key, value) in extra.as_object().unwrap() {
            arguments[key] = value.clone();
        }
        f.app.call1(&f.user, "Email/query", arguments)
    };
    let listed = page(json!({})).await;
    assert_eq!(listed["total"], json!(2));
    assert_eq!(
        listed["ids"],
        json!([f.ids["status"], f.ids["cafe"]]),
        "newest first"
    );
    let anchored = page(json!({"anchor": f.ids["status"]})).await;
    assert_eq!(anchored["ids"], listed["ids"]);
    let oldest = page(json!({"sort": [{"property": "receivedAt"}], "position": 1})).await;
    assert_eq!(oldest["ids"], json!([f.ids["status"]]));
    assert_eq!(
        (oldest["position"].clone(), oldest["total"].clone()),
        (json!(1), json!(2))
    );
    let last = page(json!({"position": -1})).await;
    assert_eq!(last["ids"], json!([f.ids["cafe"]]));
    let past = page(json!({"position": 5})).await;
    assert_eq!(
        (past["ids"].clone(), past["total"].clone()),
        (json!([]), json!(2))
    );
    // An empty text is no condition; one with no word finds nothing; a
    // value of too many words is refused.
    assert_eq!(f.query(json!({"text": "  "})).await.len(), 5);
    f.check(json!({"text": "🎉 --- \"\""}), &[]).await;
    let refused = f
        .app
        .call(
            &f.user,
            json!([["Email/query", {"accountId": f.user.account_id,
                "filter": {"body": "w ".repeat(65)}}, "0"]]),
        )
        .await;
    assert_eq!(
        refused[0][1]["type"],
        json!("invalidArguments"),
        "{refused:?}"
    );

    // AND with inMailbox, OR, NOT.
    let created = f
        .app
        .call1(
            &f.user,
            "Mailbox/set",
            json!({"accountId": f.user.account_id, "create": {"a": {"name": "Projects"}}}),
        )
        .await;
    let archive = created["created"]["a"]["id"].as_str().unwrap().to_string();
    let moved = f
        .app
        .call1(
            &f.user,
            "Email/set",
            json!({"accountId": f.user.account_id,
                "update": {f.ids["status"].clone(): {"mailboxIds": {archive.clone(): true}}}}),
        )
        .await;
    assert_eq!(moved["notUpdated"], Value::Null, "{moved}");
    let in_mailbox = |mailbox: &str| json!({"operator": "AND", "conditions": [{"text": "project"}, {"inMailbox": mailbox}]});
    f.check(in_mailbox(&archive), &["status"]).await;
    f.check(in_mailbox(&f.user.inbox), &["cafe"]).await;
    f.check(
        json!({"text": "project", "inMailbox": f.user.inbox}),
        &["cafe"],
    )
    .await;
    f.check(
        json!({"operator": "NOT", "conditions": [{"text": "project"}]}),
        &["xylophone", "japanese", "name_only"],
    )
    .await;
    f.check(
        json!({"operator": "OR", "conditions": [{"text": "東京"}, {"body": "xylophone"}]}),
        &["xylophone", "japanese"],
    )
    .await;

    // SearchSnippet/get: marks, escaping, null where nothing matches, notFound.
    let snippets = f
        .snippets(
            json!({"text": "xylophone conference"}),
            json!([f.ids["xylophone"], f.ids["name_only"], "Mnope"]),
        )
        .await;
    assert_eq!(snippets["notFound"], json!(["Mnope"]));
    assert_eq!(
        snippets["list"][0],
        json!({"emailId": f.ids["xylophone"], "subject": null,
            "preview": "The <mark>xylophone</mark> arrives Tuesday. Meet in the \
                <mark>conference</mark> room."})
    );
    assert_eq!(
        snippets["list"][1],
        json!({"emailId": f.ids["name_only"], "subject": null, "preview": null})
    );
    let snippets = f
        .snippets(json!({"text": "cafe"}), json!([f.ids["cafe"]]))
        .await;
    assert_eq!(snippets["notFound"], Value::Null);
    assert_eq!(
        snippets["list"][0]["subject"],
        json!("<mark>Café</mark> plans")
    );
    assert_eq!(
        snippets["list"][0]["preview"],
        json!("Lunch at the <mark>café</mark> near the Project Alpha office &amp; more")
    );
    let snippets = f
        .snippets(json!({"body": "東京"}), json!([f.ids["japanese"]]))
        .await;
    assert_eq!(snippets["list"][0]["subject"], Value::Null, "body scope");
    assert_eq!(
        snippets["list"][0]["preview"],
        json!("明日の会議は<mark>東</mark><mark>京</mark>で行います。")
    );

    // Email/queryChanges follows a text query.
    let first = f
        .app
        .call1(
            &f.user,
            "Email/query",
            json!({"accountId": f.user.account_id, "filter": {"text": "xylophone"}}),
        )
        .await;
    assert_eq!(first["canCalculateChanges"], json!(true));
    let added = f
        .app
        .ingest(
            &f.user,
            &[
                b"From: d@example.com\r\nSubject: Another xylophone\r\n\r\nsee subject\r\n"
                    .to_vec(),
            ],
            1_800_000_000,
        )
        .await;
    f.app
        .ingest(
            &f.user,
            &[b"From: e@example.com\r\nSubject: Unrelated\r\n\r\nnothing\r\n".to_vec()],
            1_800_000_001,
        )
        .await;
    let changes = f
        .app
        .call1(
            &f.user,
            "Email/queryChanges",
            json!({"accountId": f.user.account_id, "filter": {"text": "xylophone"},
                "sinceQueryState": first["queryState"]}),
        )
        .await;
    assert_eq!(
        changes["added"],
        json!([{"id": added[0], "index": 0}]),
        "{changes}"
    );
}

#[tokio::test]
async fn search_follows_its_rules_on_the_configured_store() {
    check_rules(spawn_app().await).await;
}

#[tokio::test]
async fn search_follows_its_rules_on_sqlite() {
    let app = spawn_sqlite_app().await;
    // The list view of a search drives from the FTS5 index in search-key
    // order and looks each match's key up: never a walk of the account's
    // emails with the full-text query run once per email, nor a sort of
    // every match.
    let url = fastview::app::default_database_url(&app.app.data_dir);
    let store = fastview::store::sqlite::SqliteStore::connect(&url, 1)
        .await
        .unwrap();
    let plan = store.search_page_plan().await.unwrap().join("\n");
    let at = |step: &str| plan.find(step).unwrap_or_else(|| panic!("{step}: {plan}"));
    assert!(
        at("SCAN s VIRTUAL TABLE") < at("SEARCH k USING INTEGER PRIMARY KEY (rowid=?)"),
        "{plan}"
    );
    assert!(!plan.contains("SCAN k"), "{plan}");
    assert!(!plan.contains("TEMP B-TREE"), "{plan}");
    check_rules(app).await;
}

/// A condition and the receivedAt of the `i`th message of an ingest at
/// `base` (one second apart): the ids it matches are that message's, or none.
fn pinned(condition: Value, base: i64, i: usize) -> Value {
    let at = |t: i64| {
        chrono::DateTime::from_timestamp(t, 0)
            .unwrap()
            .format("%Y-%m-%dT%H:%M:%SZ")
            .to_string()
    };
    json!({"operator": "AND", "conditions": [condition,
        {"after": at(base + i as i64), "before": at(base + i as i64 + 1)}]})
}

/// Corpus messages: a word drawn from a sampled message's body text (not in
/// its headers) finds it with `body` and `text`; a word of its display name
/// or of an attachment's name (as Email/get shows them) with `text`. Each
/// query is pinned to the message's receivedAt, so it must answer exactly
/// that message. On SQLite and on the configured store.
#[tokio::test]
async fn corpus_words_find_the_messages_that_hold_them() {
    let Some(corpus) = corpus() else {
        return;
    };
    let messages = crate::support::corpus_sample(&corpus, 1_500);
    assert!(
        messages.len() >= 1_000,
        "only {} corpus messages",
        messages.len()
    );
    for app in [spawn_sqlite_app().await, spawn_app().await] {
        let user = app.account("corpus@example.com").await;
        const BASE: i64 = 1_600_000_000;
        let ids = app.ingest(&user, &messages, BASE).await;
        let mut checked = [0usize; 3];
        for (i, raw) in messages.iter().enumerate().step_by(7) {
            let prepared =
                fastview::mail::ingest::prepare(raw.clone(), Vec::new(), Vec::new(), |_| 0);
            let text = &prepared.email.search;
            let header_words: BTreeSet<&str> = text.headers.split(' ').collect();
            let body_words: Vec<&str> = text.body.split(' ').collect();
            // A body word not in the headers, as long as possible (rarer).
            let Some(word) = body_words
                .iter()
                .filter(|w| w.chars().count() >= 6 && !header_words.contains(*w))
                .max_by_key(|w| (w.len(), *w))
            else {
                continue;
            };
            for scope in ["text", "body"] {
                let response = app
                    .call_in(
                        &user,
                        "Email/query",
                        json!({"filter": pinned(json!({scope: word}), BASE, i)}),
                    )
                    .await;
                assert_eq!(response["ids"], json!([ids[i]]), "{scope} {word}");
            }
            checked[0] += 1;
        }
        // Display names and attachment names as Email/get shows them: the
        // first word of each of at least 4 characters.
        for (chunk_ids, offset) in ids.chunks(500).zip((0..).step_by(500)) {
            let got = app
                .call_in(
                    &user,
                    "Email/get",
                    json!({"ids": chunk_ids,
                        "properties": ["from", "attachments"], "bodyProperties": ["name"]}),
                )
                .await;
            for (k, email) in got["list"].as_array().unwrap().iter().enumerate() {
                let first_word = |value: &Value| {
                    value
                        .as_str()
                        .map(fastview::mail::search::words)
                        .unwrap_or_default()
                        .into_iter()
                        .find(|w| w.chars().count() >= 4)
                };
                let name_word = first_word(&email["from"][0]["name"]);
                let attachment_word = email["attachments"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find_map(|part| first_word(&part["name"]));
                for (slot, word) in [(1, name_word), (2, attachment_word)] {
                    let Some(word) = word else { continue };
                    if checked[slot] >= 40 {
                        continue;
                    }
                    let i = offset + k;
                    let response = app
                        .call_in(
                            &user,
                            "Email/query",
                            json!({"filter": pinned(json!({"text": word}), BASE, i)}),
                        )
                        .await;
                    assert_eq!(response["ids"], json!([ids[i]]), "text {word}");
                    checked[slot] += 1;
                }
            }
        }
        assert!(checked[0] >= 100, "{checked:?}");
        assert!(checked[1] >= 20 && checked[2] >= 5, "{checked:?}");
    }
}

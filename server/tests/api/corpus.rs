//! The whole of `../shared/corpus` (when present, as on CI; see
//! [`crate::support::corpus`] for when its absence fails) imported through
//! `fastview import`: 0 failures, the inbox total equals the imported count,
//! and each message's `size` and downloaded bytes equal its file's bytes
//! (without the mbox envelope line). On SQLite only.

use std::process::Command;

use serde_json::json;

use crate::support::{
    PASSWORD, corpus, email_properties_and, spawn_full_level_sibling, spawn_sqlite_app,
};

#[tokio::test]
async fn the_whole_corpus_imports_with_no_failure_and_byte_identical_blobs() {
    let Some(corpus) = corpus() else {
        return;
    };
    // Corpus-wide tests run once, on SQLite, whatever FASTVIEW_TEST_POSTGRES_URL says.
    let app = spawn_sqlite_app().await;
    let user = app.account("corpus@example.com").await;
    let output = Command::new(env!("CARGO_BIN_EXE_fastview"))
        .arg("--data-dir")
        .arg(&app.app.data_dir)
        .args(["import", "--account", "corpus@example.com"])
        .arg(&corpus)
        .output()
        .expect("run fastview import");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().unwrap_or_default().to_string();
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let counts: Vec<u64> = last
        .split(", ")
        .take(4)
        .map(|part| part.rsplit(' ').next().unwrap().parse().unwrap())
        .collect();
    let (imported, duplicates, failed) = (counts[0], counts[1], counts[2]);
    assert_eq!(failed, 0, "{last}");
    assert!(last.ends_with(" msg/s"), "{last}");
    assert_eq!(imported + duplicates, 11_640, "{last}");

    let query = app
        .call_in(
            &user,
            "Email/query",
            json!({"filter": {"inMailbox": user.inbox}, "calculateTotal": true, "limit": 0}),
        )
        .await;
    assert_eq!(query["total"], json!(imported));

    // Every message's list-view properties, written as text (issue 20), are
    // the octets the `Value` tree gives at the full level (read levels off).
    let tree = spawn_full_level_sibling(&app).await;
    let mut ids = Vec::new();
    while (ids.len() as u64) < imported {
        let page = app
            .call_in(
                &user,
                "Email/query",
                json!({"position": ids.len(), "limit": 1000}),
            )
            .await;
        let page = page["ids"].as_array().unwrap().clone();
        assert!(!page.is_empty());
        ids.extend(page);
    }
    assert_eq!(ids.len() as u64, imported);
    let properties = email_properties_and(&[
        "header:List-Id:asText",
        "header:Received:all",
        "header:X-Mailer",
        "header:Content-Type:asRaw",
        "header:Reply-To:asGroupedAddresses",
        "header:Date:asDate:all",
        "header:List-Unsubscribe:asURLs",
    ]);
    for page in ids.chunks(500) {
        let request = json!({"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
            "methodCalls": [["Email/get", {"accountId": user.account_id, "ids": page,
                "properties": properties}, "g"]]});
        let text = app.api_text(&user, &request).await;
        assert_eq!(text, tree.api_text(&user, &request).await);
        let parsed: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            parsed["methodResponses"][0][1]["list"]
                .as_array()
                .unwrap()
                .len(),
            page.len()
        );
    }

    // Importing the same input again adds nothing.
    let again = Command::new(env!("CARGO_BIN_EXE_fastview"))
        .arg("--data-dir")
        .arg(&app.app.data_dir)
        .args(["import", "--account", "corpus@example.com"])
        .arg(corpus.join("spamassassin/easy-ham-1"))
        .output()
        .expect("run fastview import");
    let again = String::from_utf8_lossy(&again.stdout);
    assert!(
        again
            .lines()
            .last()
            .unwrap()
            .starts_with("imported 0, duplicates skipped "),
        "{again}"
    );

    // A sample of .eml files: size and downloaded bytes equal the file without its envelope line.
    let mut files: Vec<_> = std::fs::read_dir(corpus.join("spamassassin/easy-ham-1"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "eml"))
        .collect();
    files.sort();
    for file in files.iter().step_by(97).take(12) {
        let bytes = std::fs::read(file).unwrap();
        let message = match bytes.strip_prefix(b"From ") {
            Some(rest) => rest[rest.iter().position(|b| *b == b'\n').unwrap() + 1..].to_vec(),
            None => bytes.clone(),
        };
        let blob_id = fastview::blob::blob_id_of(&message);
        let url = format!(
            "{}/jmap/download/{}/{blob_id}/m.eml",
            app.base, user.account_id
        );
        let response = app.get_as(&url, &user.email, PASSWORD).await;
        assert_eq!(response.status(), 200, "{}", file.display());
        assert_eq!(
            response.bytes().await.unwrap().to_vec(),
            message,
            "{}",
            file.display()
        );
    }
}

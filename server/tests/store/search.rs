//! The list view of a full-text search (`Store::search_page`): pages in
//! receivedAt order whatever order the mail arrived in, on both databases;
//! on SQLite through the search keys of migration 0305, whose walk reads an
//! hour of matches past the page, including an hour with more mail than it
//! has slots.

use fastview::store::{SearchScope, SearchTerm, SearchText, TextSearch};

use super::*;

fn word(word: &str) -> TextSearch {
    TextSearch {
        scope: SearchScope::All,
        terms: vec![SearchTerm {
            words: vec![word.to_string()],
            prefix: false,
        }],
    }
}

/// 120 emails in six batches stored newest hours first, older ones after,
/// some at the same second as others, in one hour and across hours; every
/// third also in the archive. Each page of `apple` (in the inbox, in the
/// archive, everywhere), newest and oldest first, is the slice of all of
/// them sorted by (receivedAt, id), and the total is theirs.
async fn search_pages_follow_received_at(store: Arc<dyn Store>) {
    let store = store.as_ref();
    let (ann, roles) = account(store, "ann@example.com").await;
    let (bob, bob_roles) = account(store, "bob@example.com").await;
    let base = 1_727_769_600;
    let starts = [
        base + 5 * 3600,
        base + 3600 + 120,
        base + 7 * 3600 + 59 * 60,
        base,
        base + 3600 + 125,
        base + 8 * 3600 - 10,
    ];
    let mut all: Vec<(i64, i64, bool)> = Vec::new();
    for (batch, start) in starts.iter().enumerate() {
        let emails: Vec<NewEmail> = (0..20)
            .map(|i| {
                let n = batch * 20 + i;
                let archived = n % 3 == 0;
                let mut mailboxes = vec![roles.inbox];
                if archived {
                    mailboxes.push(roles.archive);
                }
                let mut email = email(
                    &plain(&format!("copy {n}")),
                    &mailboxes,
                    &[],
                    start + i as i64,
                );
                email.blob_id = format!("{n:064x}");
                email.search = SearchText {
                    headers: "hello".into(),
                    body: format!("apple copy{n}"),
                };
                email
            })
            .collect();
        let ids = insert(store, ann.id, &emails).await;
        for (i, id) in ids.into_iter().enumerate() {
            all.push((start + i as i64, id, (batch * 20 + i) % 3 == 0));
        }
    }
    // Bob's apples are not Ann's.
    let mut other = email(&plain("bob's"), &[bob_roles.inbox], &[], base + 9 * 3600);
    other.search = SearchText {
        headers: "apple".into(),
        body: String::new(),
    };
    insert(store, bob.id, &[other]).await;

    for mailbox in [None, Some(roles.inbox), Some(roles.archive)] {
        let mut expected: Vec<(i64, i64)> = all
            .iter()
            .filter(|(_, _, archived)| mailbox != Some(roles.archive) || *archived)
            .map(|(at, id, _)| (*at, *id))
            .collect();
        expected.sort();
        for descending in [true, false] {
            let order: Vec<i64> = match descending {
                true => expected.iter().rev().map(|(_, id)| *id).collect(),
                false => expected.iter().map(|(_, id)| *id).collect(),
            };
            for (position, limit) in [
                (0, 5),
                (0, 50),
                (3, 7),
                (17, 4),
                (38, 25),
                (115, 10),
                (200, 5),
            ] {
                let (ids, total) = store
                    .search_page(ann.id, &word("apple"), mailbox, descending, position, limit)
                    .await
                    .expect("search page");
                let want: Vec<i64> = order
                    .iter()
                    .copied()
                    .skip(position as usize)
                    .take(limit as usize)
                    .collect();
                assert_eq!(
                    ids, want,
                    "{mailbox:?} descending {descending} at {position}+{limit}"
                );
                assert_eq!(total, order.len() as i64, "{mailbox:?}");
            }
        }
    }
    let (ids, total) = store
        .search_page(ann.id, &word("copy7"), None, true, 0, 10)
        .await
        .unwrap();
    assert_eq!((ids.len(), total), (1, 1));
    let (ids, total) = store
        .search_page(ann.id, &word("absent"), None, true, 0, 10)
        .await
        .unwrap();
    assert_eq!((ids, total), (vec![], 0));
}

conformance!(search_pages_follow_received_at);

/// Mail stored but not indexed (as after migration 0312) is reported until
/// one email's words are in; an email without a word needs no row.
async fn an_unfilled_index_is_reported(store: Arc<dyn Store>) {
    let store = store.as_ref();
    assert!(!store.search_index_unfilled().await.unwrap(), "no mail yet");
    let (ann, roles) = account(store, "ann@example.com").await;
    let mut wordless = email(&plain("-"), &[roles.inbox], &[], 1_700_000_000);
    wordless.search = SearchText::default();
    let id = insert(store, ann.id, &[wordless]).await[0];
    assert!(store.search_index_unfilled().await.unwrap());
    let words = SearchText {
        headers: "hello".into(),
        body: String::new(),
    };
    store.put_search_texts(&[(id, words)]).await.unwrap();
    assert!(!store.search_index_unfilled().await.unwrap());
}
conformance!(an_unfilled_index_is_reported);

/// An hour holds 65,536 search keys. Mail past that (a bulk import stamped
/// with one time) is keyed in a later hour, and the newest-first walk still
/// pages it in receivedAt order: straight in the index, without emails rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_search_hour_still_pages_in_order() {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}", dir.path().join("fastview.db").display());
    let store = SqliteStore::connect(&url, 4).await.expect("open sqlite");
    let mut connection = sqlx::SqliteConnection::connect(&url).await.unwrap();
    let hour = 1_727_769_600;
    // Ids 1 … 65,540 at one second of one hour, then id 70,000 an hour later.
    sqlx::query(
        "INSERT INTO email_search_input (email_id, account_id, received_at, headers, body) \
         WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 65540) \
         SELECT i, 1, $1, '', 'bulk' FROM n",
    )
    .bind(hour)
    .execute(&mut connection)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO email_search_input (email_id, account_id, received_at, headers, body) \
         VALUES (70000, 1, $1, '', 'bulk')",
    )
    .bind(hour + 3600)
    .execute(&mut connection)
    .await
    .unwrap();
    let keys: Vec<(i64, i64)> = sqlx::query_as(
        "SELECT email_id, key FROM email_search_keys WHERE email_id IN (1, 65536, 65537, 65540, 70000) \
         ORDER BY email_id",
    )
    .fetch_all(&mut connection)
    .await
    .unwrap();
    let base = (1_i64 << 40) | ((hour / 3600) << 16);
    let next = (1_i64 << 40) | ((hour / 3600 + 1) << 16);
    assert_eq!(
        keys,
        vec![
            (1, base),
            (65536, base + 65535),
            (65537, next),
            (65540, next + 3),
            (70000, next + 4)
        ]
    );
    let (ids, total) = store
        .search_page(1, &word("bulk"), None, true, 0, 6)
        .await
        .unwrap();
    assert_eq!(total, 65_541);
    assert_eq!(ids, vec![70000, 65540, 65539, 65538, 65537, 65536]);
    let (ids, _) = store
        .search_page(1, &word("bulk"), None, true, 65_538, 5)
        .await
        .unwrap();
    assert_eq!(ids, vec![3, 2, 1]);
    // Deleting through the view takes the words and the key away.
    sqlx::query("DELETE FROM email_search_input WHERE email_id = 65540")
        .execute(&mut connection)
        .await
        .unwrap();
    let (ids, total) = store
        .search_page(1, &word("bulk"), None, true, 0, 2)
        .await
        .unwrap();
    assert_eq!((ids, total), (vec![70000, 65539], 65_540));
}

//! A full disk (issue 13 item 3): SQLite capped with `max_page_count`
//! ([`SqliteStore::connect_capped`]) fails writes exactly as a full disk
//! does (`SQLITE_FULL`). A failed write must leave nothing behind: reads go
//! on, the next write fails with the same clear error (not "non-zero
//! transaction depth"), and once space is freed writes work again, all on
//! the same store, without reopening it.
//!
//! SQLite only: PostgreSQL's `disk_full` (SQLSTATE 53100) cannot be provoked
//! on a shared test server, and its connections leave a failed transaction
//! by themselves; the mapping of both codes is in `StoreError`'s `From`.

use super::*;

/// An email whose header block is about `kib` KiB, distinguished by `n`.
fn big(n: usize, kib: usize, mailbox: i64) -> NewEmail {
    let filler = "x".repeat(1000);
    let mut raw = format!("From: a@example.com\r\nSubject: big {n}\r\n");
    for line in 0..kib {
        raw.push_str(&format!("X-Filler-{line}: {filler}\r\n"));
    }
    raw.push_str("\r\nbody\r\n");
    email(raw.as_bytes(), &[mailbox], &[], 1_700_000_000 + n as i64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_store_refuses_writes_keeps_reads_and_recovers_when_space_frees() {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}", dir.path().join("fastview.db").display());
    let store = SqliteStore::connect_capped(&url, 4, Some(1024 * 1024))
        .await
        .expect("open capped sqlite");
    let (ann, roles) = account(&store, "ann@example.com").await;

    // Fill the store one 40 KiB email at a time until a write is refused.
    let mut stored = Vec::new();
    let full = loop {
        assert!(stored.len() < 100, "1 MiB never filled up");
        match store
            .insert_emails(ann.id, &[big(stored.len(), 40, roles.inbox)])
            .await
        {
            Ok(outcome) => stored.push(new_id(outcome[0])),
            Err(error) => break error,
        }
    };
    assert!(
        matches!(full, StoreError::StorageFull(_)),
        "expected StorageFull, got {full:?}"
    );
    assert!(stored.len() >= 5, "only {} emails fit", stored.len());
    let state = store.states(ann.id).await.expect("states");

    // Reads keep working, and the refused write left nothing.
    let metas = store.email_meta(ann.id, &stored).await.expect("reads");
    assert_eq!(metas.len(), stored.len());
    let listed = store.query_rows(ann.id, Some(roles.inbox)).await.unwrap();
    assert_eq!(listed.len(), stored.len());

    // The next writes get the same clear error, not a poisoned writer.
    for n in 0..3 {
        assert_err!(
            store
                .insert_emails(ann.id, &[big(500 + n, 40, roles.inbox)])
                .await,
            StoreError::StorageFull(_)
        );
    }
    assert_eq!(store.states(ann.id).await.unwrap().email, state.email);

    // Space frees (the user deletes mail): the same store writes again.
    let (gone, kept) = stored.split_at(stored.len() / 2);
    let destroyed = store
        .destroy_emails(ann.id, gone)
        .await
        .expect("deleting works on a full store");
    assert_eq!(destroyed.len(), gone.len());
    let again = insert(&store, ann.id, &[big(900, 40, roles.inbox)]).await;
    let listed = store.query_rows(ann.id, Some(roles.inbox)).await.unwrap();
    assert_eq!(listed.len(), kept.len() + again.len());
}

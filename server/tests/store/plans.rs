//! PostgreSQL query plans: the hot reads are index-only scans.

use super::*;

/// With ≥ 10k emails in one mailbox and fresh statistics, the listing and the
/// projection read are index(-only) scans, never sequential scans.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_plans_use_covering_indexes() {
    let Some(harness) = Harness::postgres().await else {
        return;
    };
    let (postgres, url) = harness.postgres.clone().unwrap();
    let store = harness.store.as_ref();
    let (ann, roles) = account(store, "ann@example.com").await;
    let (bob, bob_roles) = account(store, "bob@example.com").await;
    let template = email(&plain("one message, many copies"), &[roles.inbox], &[], 0);
    let mut ids = Vec::new();
    for chunk in 0..11 {
        let batch: Vec<NewEmail> = (0..1000)
            .map(|i| {
                let n = chunk * 1000 + i;
                let mut copy = template.clone();
                copy.blob_id = format!("{n:064x}");
                copy.received_at = 1_700_000_000 + n;
                copy.keywords = if n % 3 == 0 {
                    vec!["$seen".into()]
                } else {
                    vec![]
                };
                copy.fast_view.preview = format!("copy {n}");
                copy
            })
            .collect();
        ids.extend(insert(store, ann.id, &batch).await);
    }
    // Some other rows, so the big mailbox is not the whole table.
    let others: Vec<NewEmail> = (0..500)
        .map(|n| {
            let mut copy = template.clone();
            copy.blob_id = format!("b{n:063x}");
            copy.mailbox_ids = vec![bob_roles.inbox];
            copy
        })
        .collect();
    insert(store, bob.id, &others).await;
    let mut connection = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::query("VACUUM ANALYZE")
        .execute(&mut connection)
        .await
        .unwrap();

    let (page, total) = store
        .mailbox_emails_by_received(roles.inbox, true, 0, 30)
        .await
        .unwrap();
    assert_eq!(total, 11_000);
    let newest: Vec<i64> = ids.iter().rev().take(30).copied().collect();
    assert_eq!(page.iter().map(|(id, _)| *id).collect::<Vec<_>>(), newest);
    assert!(
        page.iter().all(|(id, thread)| id == thread),
        "no Message-ID: each its own thread"
    );

    for (position, limit) in [(0, 30), (5_000, 50)] {
        let plan = postgres
            .mailbox_listing_plan(roles.inbox, position, limit)
            .await
            .unwrap()
            .join("\n");
        eprintln!("listing at {position}, {limit}:\n{plan}");
        assert!(
            plan.contains("Index Only Scan Backward using email_mailboxes_pkey on email_mailboxes"),
            "{plan}"
        );
        assert!(
            plan.contains("Index Only Scan using emails_pkey on emails"),
            "{plan}"
        );
        assert!(!plan.contains("Seq Scan"), "{plan}");
        assert!(!plan.contains("Sort"), "{plan}");
    }
    let asked: Vec<i64> = ids.iter().step_by(97).take(50).copied().collect();
    let plan = postgres
        .fast_view_plan(ann.id, &asked)
        .await
        .unwrap()
        .join("\n");
    eprintln!("projection:\n{plan}");
    assert!(
        plan.contains("Index Only Scan using fast_view_pkey on fast_view"),
        "{plan}"
    );
    assert!(
        plan.contains("Index Only Scan using emails_pkey on emails"),
        "{plan}"
    );
    assert!(!plan.contains("Seq Scan"), "{plan}");
    let views = store.fast_views(ann.id, &asked).await.unwrap();
    assert_eq!(views.len(), 50);
    assert!(
        views.iter().all(|(id, view)| view.preview
            == format!("copy {}", ids.iter().position(|x| x == id).unwrap()))
    );
    let _ = connection.close().await;
}

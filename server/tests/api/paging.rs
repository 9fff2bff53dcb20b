//! Query paging at the ends of i64 (issue 13 item 10): `anchorOffset` and
//! `position` near `i64::MAX` / `i64::MIN` saturate (RFC 8620 §5.5) instead
//! of wrapping to the first page.

use serde_json::{Value, json};

use crate::support::{demo_messages, spawn_with_accounts};

#[tokio::test]
async fn anchor_offsets_and_positions_at_the_ends_of_i64_saturate() {
    let (app, [ann]) = spawn_with_accounts(["ann@example.com"]).await;
    app.ingest(&ann, &demo_messages(), 1_700_000_000).await;
    let sort = json!([{"property": "receivedAt", "isAscending": true}]);
    let email_query = |extra: Value| {
        let mut arguments =
            json!({"accountId": ann.account_id, "sort": sort, "calculateTotal": true});
        arguments
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        arguments
    };
    let all = app.call1(&ann, "Email/query", email_query(json!({}))).await;
    let ids = all["ids"].as_array().unwrap().clone();
    let total = ids.len() as i64;
    assert!(total >= 3);
    let anchor = ids[1].clone();
    let cases = [
        (
            json!({"anchor": anchor, "anchorOffset": i64::MAX}),
            total,
            0,
        ),
        (
            json!({"anchor": anchor, "anchorOffset": i64::MIN}),
            0,
            total,
        ),
        (json!({"anchor": anchor, "anchorOffset": -1}), 0, total),
        (json!({"anchor": anchor, "anchorOffset": 1}), 2, total - 2),
        (json!({"position": i64::MAX}), total, 0),
        (json!({"position": i64::MIN}), 0, total),
    ];
    for (extra, position, count) in cases {
        let page = app
            .call1(&ann, "Email/query", email_query(extra.clone()))
            .await;
        assert_eq!(page["position"], json!(position), "{extra}: {page}");
        assert_eq!(
            page["ids"].as_array().unwrap().len() as i64,
            count,
            "{extra}"
        );
        assert_eq!(page["total"], json!(total));
    }

    // Mailbox/query pages the same way, anchor included.
    let mailboxes = app
        .call_in(
            &ann,
            "Mailbox/query",
            json!({"sort": [{"property": "name"}]}),
        )
        .await;
    let mailbox_ids = mailboxes["ids"].as_array().unwrap().clone();
    let count = mailbox_ids.len() as i64;
    assert!(count >= 2);
    let anchor = mailbox_ids[0].clone();
    let cases = [
        (
            json!({"anchor": anchor, "anchorOffset": i64::MAX}),
            count,
            0,
        ),
        (
            json!({"anchor": anchor, "anchorOffset": i64::MIN}),
            0,
            count,
        ),
        (json!({"anchor": anchor, "anchorOffset": 1}), 1, count - 1),
        (json!({"anchor": "m999999"}), -1, -1),
        (json!({"position": i64::MAX}), count, 0),
        (json!({"position": i64::MIN}), 0, count),
    ];
    for (extra, position, length) in cases {
        let mut arguments = json!({"accountId": ann.account_id, "sort": [{"property": "name"}]});
        arguments
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let responses = app.call(&ann, json!([["Mailbox/query", arguments]])).await;
        let page = &responses[0][1];
        if position < 0 {
            assert_eq!(responses[0][0], "error");
            assert_eq!(page["type"], "anchorNotFound", "{extra}");
            continue;
        }
        assert_eq!(page["position"], json!(position), "{extra}: {page}");
        assert_eq!(
            page["ids"].as_array().unwrap().len() as i64,
            length,
            "{extra}"
        );
    }
}

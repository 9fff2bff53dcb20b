//! Query paging at the ends of i64 (issue 13 item 10): `anchorOffset` and
//! `position` near `i64::MAX` / `i64::MIN` saturate (RFC 8620 §5.5) instead
//! of wrapping to the first page.

use serde_json::{Value, json};

use crate::support::{demo_messages, spawn_with_messages};

#[tokio::test]
async fn anchor_offsets_and_positions_at_the_ends_of_i64_saturate() {
    let (app, ann, _) = spawn_with_messages(&demo_messages()).await;
    let sort = json!([{"property": "receivedAt", "isAscending": true}]);
    let email_query = |extra: Value| {
        let base = json!({"accountId": ann.account_id, "sort": sort, "calculateTotal": true});
        merged(base, &extra)
    };
    let all = app.call1(&ann, "Email/query", email_query(json!({}))).await;
    let (ids, total) = ids_at_least(&all, 3);
    let anchor = ids[1].clone();
    let cases = [
        (anchored(&anchor, i64::MAX), total, 0),
        (anchored(&anchor, i64::MIN), 0, total),
        (anchored(&anchor, -1), 0, total),
        (anchored(&anchor, 1), 2, total - 2),
        (json!({"position": i64::MAX}), total, 0),
        (json!({"position": i64::MIN}), 0, total),
    ];
    for (extra, position, count) in cases {
        let page = app
            .call1(&ann, "Email/query", email_query(extra.clone()))
            .await;
        check_page(&page, &extra, position, count);
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
    let (mailbox_ids, count) = ids_at_least(&mailboxes, 2);
    let anchor = mailbox_ids[0].clone();
    let cases = [
        (anchored(&anchor, i64::MAX), count, 0),
        (anchored(&anchor, i64::MIN), 0, count),
        (anchored(&anchor, 1), 1, count - 1),
        (json!({"anchor": "m999999"}), -1, -1),
        (json!({"position": i64::MAX}), count, 0),
        (json!({"position": i64::MIN}), 0, count),
    ];
    for (extra, position, length) in cases {
        let base = json!({"accountId": ann.account_id, "sort": [{"property": "name"}]});
        let arguments = merged(base, &extra);
        let responses = app.call(&ann, json!([["Mailbox/query", arguments]])).await;
        let page = &responses[0][1];
        if position < 0 {
            assert_eq!(responses[0][0], "error");
            assert_eq!(page["type"], "anchorNotFound", "{extra}");
            continue;
        }
        check_page(page, &extra, position, length);
    }
}

/// A query's ids and their count, asserting there are at least `least`.
fn ids_at_least(query: &Value, least: i64) -> (Vec<Value>, i64) {
    let ids = query["ids"].as_array().unwrap().clone();
    let count = ids.len() as i64;
    assert!(count >= least, "{query}");
    (ids, count)
}

/// The paging arguments `offset` ids from `anchor`.
fn anchored(anchor: &Value, offset: i64) -> Value {
    json!({"anchor": anchor, "anchorOffset": offset})
}

/// `base` with the members of `extra` added.
fn merged(mut base: Value, extra: &Value) -> Value {
    let members = extra.as_object().unwrap().clone();
    base.as_object_mut().unwrap().extend(members);
    base
}

/// Asserts a query page (asked with `extra`) starts at `position` and
/// holds `count` ids.
fn check_page(page: &Value, extra: &Value, position: i64, count: i64) {
    assert_eq!(page["position"], json!(position), "{extra}: {page}");
    let ids = page["ids"].as_array().unwrap();
    assert_eq!(ids.len() as i64, count, "{extra}");
}

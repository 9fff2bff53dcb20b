//! Unit tests of the JMAP proxy's forwarding decisions.

use std::collections::HashMap;

use serde_json::json;

use super::shape::{local_filter, shape};
use super::translation::Translation;
use crate::store::MirroredEmail;

#[test]
fn a_filter_is_answered_here_only_on_what_the_mirror_holds() {
    let local_of = HashMap::from([("Inbox-U", 3), ("Arch-U", 7)]);
    let filter = json!({"operator": "AND", "conditions": [
        {"inMailbox": "Inbox-U", "hasKeyword": "$seen"},
        {"operator": "NOT", "conditions": [{"inMailboxOtherThan": ["Arch-U"], "minSize": 10}]},
    ]});
    assert_eq!(
        local_filter(&filter, &local_of),
        Some(json!({"operator": "AND", "conditions": [
            {"inMailbox": "m3", "hasKeyword": "$seen"},
            {"operator": "NOT", "conditions": [{"inMailboxOtherThan": ["m7"], "minSize": 10}]},
        ]}))
    );
    for forwarded in [
        json!({"inMailbox": "Unmapped-U"}),
        json!({"inMailboxOtherThan": ["Inbox-U", "Unmapped-U"]}),
        json!({"text": "hello"}),
        json!({"operator": "OR", "conditions": [{"inMailbox": "Inbox-U"}, {"from": "ann"}]}),
        json!({"allInThreadHaveKeyword": "$seen"}),
        json!({"inMailbox": 3}),
    ] {
        assert_eq!(local_filter(&forwarded, &local_of), None, "{forwarded}");
    }
}

#[test]
fn a_shape_is_what_an_answer_depends_on_besides_ids_and_paging() {
    let of = |arguments: serde_json::Value| arguments.as_object().unwrap().clone();
    let query = of(json!({"accountId": "A", "filter": {"inMailbox": "I"},
        "sort": [{"property": "receivedAt"}], "position": 5, "limit": 10}));
    // Another page of the same query is the same shape.
    let next = of(json!({"accountId": "A", "filter": {"inMailbox": "I"},
        "sort": [{"property": "receivedAt"}], "position": 15, "limit": 10}));
    assert_eq!(shape("Email/query", &query), shape("Email/query", &next));
    assert!(shape("Email/query", &query).is_some());
    // Another limit, a total asked, an anchor, a position from the end:
    // each another shape (servers cap, count and page their own way).
    for paged in [
        json!({"limit": 20}),
        json!({"limit": 10, "calculateTotal": true}),
        json!({"limit": 10, "anchor": "E1"}),
        json!({"limit": 10, "position": -5}),
    ] {
        let mut arguments = of(json!({"accountId": "A", "filter": {"inMailbox": "I"},
            "sort": [{"property": "receivedAt"}]}));
        arguments.extend(of(paged.clone()));
        assert_ne!(
            shape("Email/query", &query),
            shape("Email/query", &arguments),
            "{paged}"
        );
    }
    let other = of(json!({"accountId": "A", "filter": {"inMailbox": "J"}}));
    assert_ne!(shape("Email/query", &query), shape("Email/query", &other));
    let threads = of(
        json!({"accountId": "A", "#ids": {"resultOf": "1", "name": "Email/get", "path": "/list/*/threadId"}}),
    );
    assert_eq!(
        shape("Thread/get", &threads).as_deref(),
        Some("Thread/get null")
    );
    let referenced =
        of(json!({"accountId": "A", "#filter": {"resultOf": "0", "name": "X/y", "path": "/f"}}));
    assert_eq!(shape("Email/query", &referenced), None);
    assert_eq!(shape("Email/get", &query), None);
}

#[test]
fn an_answer_names_what_the_upstream_names() {
    let mirrored = MirroredEmail {
        email_id: 42,
        upstream_id: "Mx7".into(),
        blob_id: "Gb1".into(),
        thread_id: "Tq2".into(),
        parts: Some(json!({"2": "Gb1.p2", "3": "Gb1.p3"}).to_string()),
    };
    let emails = HashMap::from([("e42".to_string(), &mirrored)]);
    let mailboxes = HashMap::from([(3, "Inbox-U".to_string())]);
    let translation = Translation {
        emails: &emails,
        mailboxes: &mailboxes,
    };
    let email = json!({
        "id": "e42", "threadId": "t9", "blobId": "aa", "mailboxIds": {"m3": true, "m8": true},
        "subject": "kept \u{e9}\"\\", "from": [{"name": null, "email": "a@example.com"}],
        "bodyStructure": {"partId": "1", "blobId": null, "subParts": [
            {"partId": "2", "blobId": "aa_2"}, {"blobId": "aa_3", "type": "image/png"}]},
        "textBody": [{"partId": "2", "blobId": "aa_2"}],
        "attachments": [{"blobId": "aa_3"}],
        "bodyValues": {"2": {"value": "hi"}},
    });
    let unknown = json!({"id": "e7", "threadId": "t7"});
    // As the local Email/get writes it: serde_json's text of the value.
    let local = json!({"accountId": "a1", "state": "9", "list": [email, unknown],
        "notFound": ["e42", "e5"]})
    .to_string();
    let translated = translation.answer(&local, "U-acct", "s-up").unwrap();
    let expected = json!({
        "accountId": "U-acct", "state": "s-up", "notFound": ["Mx7", "e5"],
        "list": [{
            "id": "Mx7", "threadId": "Tq2", "blobId": "Gb1", "mailboxIds": {"Inbox-U": true},
            "subject": "kept \u{e9}\"\\", "from": [{"name": null, "email": "a@example.com"}],
            "bodyStructure": {"partId": "1", "blobId": null, "subParts": [
                {"partId": "2", "blobId": "Gb1.p2"}, {"blobId": "Gb1.p3", "type": "image/png"}]},
            "textBody": [{"partId": "2", "blobId": "Gb1.p2"}],
            "attachments": [{"blobId": "Gb1.p3"}],
            "bodyValues": {"2": {"value": "hi"}},
        }, {"id": "e7", "threadId": "t7"}],
    });
    // The octets serde_json writes for the translated value.
    assert_eq!(translated, expected.to_string());
    assert_eq!(translation.answer("[1]", "U-acct", "s-up"), None);
}

/// An upstream that numbers parts otherwise (Cyrus's IMAP sections): each
/// part's partId and blobId, and the bodyValues keys, the upstream's.
#[test]
fn parts_numbered_otherwise_are_named_as_the_upstream_names_them() {
    let mirrored = MirroredEmail {
        email_id: 42,
        upstream_id: "Mx7".into(),
        blob_id: "Gb1".into(),
        thread_id: "Tq2".into(),
        parts: Some(json!({"0": ["1", "Gb1.1"], "1": ["2", "Gb1.2"]}).to_string()),
    };
    let emails = HashMap::from([("e42".to_string(), &mirrored)]);
    let mailboxes = HashMap::new();
    let translation = Translation {
        emails: &emails,
        mailboxes: &mailboxes,
    };
    let email = json!({
        "id": "e42",
        "bodyStructure": {"partId": null, "blobId": null, "subParts": [
            {"partId": "0", "blobId": "aa_0"}, {"partId": "1", "blobId": "aa_1"}]},
        "textBody": [{"partId": "0", "blobId": "aa_0"}],
        "attachments": [{"blobId": "aa_1", "type": "image/png"}],
        "bodyValues": {"0": {"value": "hi"}},
    });
    let local = json!({"accountId": "a1", "state": "9", "list": [email], "notFound": []});
    let translated = translation
        .answer(&local.to_string(), "U-acct", "s-up")
        .unwrap();
    let expected = json!({
        "accountId": "U-acct", "state": "s-up", "notFound": [],
        "list": [{
            "id": "Mx7",
            "bodyStructure": {"partId": null, "blobId": null, "subParts": [
                {"partId": "1", "blobId": "Gb1.1"}, {"partId": "2", "blobId": "Gb1.2"}]},
            "textBody": [{"partId": "1", "blobId": "Gb1.1"}],
            "attachments": [{"blobId": "Gb1.2", "type": "image/png"}],
            "bodyValues": {"1": {"value": "hi"}},
        }],
    });
    assert_eq!(translated, expected.to_string());
}

#[test]
fn a_query_is_compared_without_its_state_and_what_an_upstream_adds() {
    use super::shape::comparable_query;
    let of = |arguments: serde_json::Value| arguments.as_object().unwrap().clone();
    let asked = of(json!({"accountId": "A", "limit": 30}));
    // Cyrus: its own queryState, and filter, sort, collapseThreads and
    // total besides, though no total was asked.
    let cyrus = json!({"accountId": "A", "queryState": "25:0", "canCalculateChanges": true,
        "position": 0, "ids": ["M1", "M2"], "total": 2, "collapseThreads": false,
        "sort": [{"property": "receivedAt", "isAscending": false}], "filter": null});
    let mirror = json!({"accountId": "A", "queryState": "fastview~mirror~3~9",
        "canCalculateChanges": true, "position": 0, "ids": ["M1", "M2"]});
    assert_eq!(
        comparable_query(&cyrus, &asked),
        comparable_query(&mirror, &asked)
    );
    // What RFC 8620 §5.5 names is compared: ids, position, a total asked,
    // canCalculateChanges, limit.
    let counted = of(json!({"accountId": "A", "calculateTotal": true}));
    assert_ne!(
        comparable_query(&cyrus, &counted),
        comparable_query(&mirror, &counted)
    );
    for (name, value) in [
        ("ids", json!(["M2", "M1"])),
        ("position", json!(1)),
        ("canCalculateChanges", json!(false)),
        ("limit", json!(30)),
    ] {
        let mut other = mirror.clone();
        other[name] = value;
        assert_ne!(
            comparable_query(&cyrus, &asked),
            comparable_query(&other, &asked),
            "{name}"
        );
    }
}

#[test]
fn a_thread_get_with_repeated_ids_is_verified_per_listing() {
    use super::shape::{Listing, ids_repeat};
    let of = |arguments: serde_json::Value| arguments.as_object().unwrap().clone();
    assert!(ids_repeat(&of(json!({"ids": ["T1", "T2", "T1"]}))));
    assert!(!ids_repeat(&of(json!({"ids": ["T1", "T2"]}))));
    assert!(!ids_repeat(&of(json!({"#ids": {"resultOf": "0"}}))));
    // Without a repeat both listings are one answer: one key, the shape.
    assert_eq!(
        Listing::keyed("Thread/get null", false),
        vec![(Listing::Once, "Thread/get null".to_string())]
    );
    let keyed = Listing::keyed("Thread/get null", true);
    assert_eq!(
        keyed.iter().map(|(l, _)| *l).collect::<Vec<_>>(),
        [Listing::Once, Listing::AsAsked]
    );
    assert_ne!(keyed[0].1, keyed[1].1);
    assert!(keyed.iter().all(|(_, key)| key != "Thread/get null"));
}

#[test]
fn the_state_calls_around_a_query_are_taken_out_of_the_answer() {
    use super::run::bracket_states;
    let mut answer = json!({"methodResponses": [
        ["Email/get", {"state": "7", "list": []}, "fastview~state~before:q"],
        ["Email/query", {"ids": []}, "q"],
        ["Email/get", {"state": "7", "list": []}, "fastview~state~after:q"],
        ["Email/get", {"state": "7", "list": []}, "fastview~state~before:r"],
        ["Email/query", {"ids": []}, "r"],
        ["Email/get", {"state": "8", "list": []}, "fastview~state~after:r"],
        ["Email/get", {"state": "8", "list": []}, "g"],
    ], "sessionState": "s"})
    .as_object()
    .unwrap()
    .clone();
    let states = bracket_states(&mut answer);
    // A write between the two calls: that query's state is not known.
    assert_eq!(states, HashMap::from([("q".to_string(), "7".to_string())]));
    let left: Vec<&str> = answer["methodResponses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r[2].as_str().unwrap())
        .collect();
    assert_eq!(left, ["q", "r", "g"]);
}

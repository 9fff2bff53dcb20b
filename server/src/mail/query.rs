//! Email/query evaluation over [`QueryRow`]s: one implementation of the
//! filters and sorts of RFC 8621 §4.4 for every backend. The common listing
//! (one mailbox by receivedAt) does not come here: the store serves it from
//! its (mailbox, receivedAt) index.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

use crate::store::QueryRow;

/// A filter condition or operator (RFC 8621 §4.4.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Filter {
    And(Vec<Filter>),
    Or(Vec<Filter>),
    Not(Vec<Filter>),
    InMailbox(i64),
    /// Ids not known to the account match nothing.
    InMailboxUnknown,
    InMailboxOtherThan(Vec<i64>),
    /// receivedAt < this (unix seconds).
    Before(i64),
    /// receivedAt >= this (unix seconds).
    After(i64),
    MinSize(i64),
    MaxSize(i64),
    HasKeyword(String),
    NotKeyword(String),
    HasAttachment(bool),
    From(String),
    To(String),
    Cc(String),
    Bcc(String),
    Subject(String),
    /// `[name]` or `[name, value]`: the header exists (and its value contains `value`).
    Header(String, Option<String>),
}

impl Filter {
    /// Whether evaluating this filter needs the header blocks.
    pub fn needs_headers(&self) -> bool {
        match self {
            Filter::And(c) | Filter::Or(c) | Filter::Not(c) => c.iter().any(Filter::needs_headers),
            Filter::Header(..) => true,
            _ => false,
        }
    }
}

/// Header fields of one email: lowercase name and unfolded value, in order.
pub type HeaderFields = Vec<(String, String)>;

/// Whether `row` matches `filter`; `headers` holds the header fields of rows
/// when the filter needs them.
pub fn matches(filter: &Filter, row: &QueryRow, headers: &HashMap<i64, HeaderFields>) -> bool {
    let meta = &row.meta;
    let index = &row.index;
    let contains = |haystack: &str, needle: &str| haystack.contains(&needle.to_lowercase());
    match filter {
        Filter::And(conditions) => conditions.iter().all(|c| matches(c, row, headers)),
        Filter::Or(conditions) => conditions.iter().any(|c| matches(c, row, headers)),
        Filter::Not(conditions) => !conditions.iter().any(|c| matches(c, row, headers)),
        Filter::InMailbox(id) => meta.mailbox_ids.contains(id),
        Filter::InMailboxUnknown => false,
        Filter::InMailboxOtherThan(ids) => meta.mailbox_ids.iter().any(|m| !ids.contains(m)),
        Filter::Before(t) => meta.received_at < *t,
        Filter::After(t) => meta.received_at >= *t,
        Filter::MinSize(n) => meta.size >= *n,
        Filter::MaxSize(n) => meta.size < *n,
        Filter::HasKeyword(k) => meta.keywords.iter().any(|x| x.eq_ignore_ascii_case(k)),
        Filter::NotKeyword(k) => !meta.keywords.iter().any(|x| x.eq_ignore_ascii_case(k)),
        Filter::HasAttachment(wanted) => index.has_attachment == *wanted,
        Filter::From(text) => contains(&index.from_text, text),
        Filter::To(text) => contains(&index.to_text, text),
        Filter::Cc(text) => contains(&index.cc_text, text),
        Filter::Bcc(text) => contains(&index.bcc_text, text),
        Filter::Subject(text) => contains(&index.subject, text),
        Filter::Header(name, value) => headers.get(&meta.id).is_some_and(|fields| {
            fields.iter().any(|(field, field_value)| {
                field.eq_ignore_ascii_case(name)
                    && value
                        .as_ref()
                        .is_none_or(|v| field_value.to_lowercase().contains(&v.to_lowercase()))
            })
        }),
    }
}

/// A sort property (RFC 8621 §4.4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortProperty {
    ReceivedAt,
    SentAt,
    Size,
    From,
    To,
    Subject,
}

/// One comparator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Comparator {
    pub property: SortProperty,
    pub ascending: bool,
}

fn compare(a: &QueryRow, b: &QueryRow, property: SortProperty) -> Ordering {
    match property {
        SortProperty::ReceivedAt => a.meta.received_at.cmp(&b.meta.received_at),
        // Emails without a valid Date sort as if sent when received.
        SortProperty::SentAt => a
            .sent_at
            .unwrap_or(a.meta.received_at)
            .cmp(&b.sent_at.unwrap_or(b.meta.received_at)),
        SortProperty::Size => a.meta.size.cmp(&b.meta.size),
        SortProperty::From => a.index.from_sort.cmp(&b.index.from_sort),
        SortProperty::To => a.index.to_sort.cmp(&b.index.to_sort),
        SortProperty::Subject => a.index.base_subject.cmp(&b.index.base_subject),
    }
}

/// Sorts rows by the comparators, then by id (the same direction as the
/// first comparator), so equal keys have a stable, documented order.
pub fn sort(rows: &mut [QueryRow], comparators: &[Comparator]) {
    let tie_ascending = comparators.first().is_none_or(|c| c.ascending);
    rows.sort_by(|a, b| {
        for comparator in comparators {
            let order = compare(a, b, comparator.property);
            let order = if comparator.ascending {
                order
            } else {
                order.reverse()
            };
            if order.is_ne() {
                return order;
            }
        }
        let order = a.meta.id.cmp(&b.meta.id);
        if tie_ascending {
            order
        } else {
            order.reverse()
        }
    });
}

/// Keeps the first email of each thread, in order (`collapseThreads`).
pub fn collapse_threads(rows: Vec<QueryRow>) -> Vec<QueryRow> {
    let mut seen = HashSet::new();
    rows.into_iter()
        .filter(|row| seen.insert(row.meta.thread_id))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{EmailIndex, EmailMeta};

    fn row(
        id: i64,
        thread: i64,
        received_at: i64,
        size: i64,
        keywords: &[&str],
        from: &str,
    ) -> QueryRow {
        QueryRow {
            meta: EmailMeta {
                id,
                blob_id: String::new(),
                thread_id: thread,
                size,
                received_at,
                mailbox_ids: vec![1],
                keywords: keywords.iter().map(|k| k.to_string()).collect(),
            },
            sent_at: None,
            index: EmailIndex {
                from_text: format!("{from}\n"),
                from_sort: from.to_string(),
                ..EmailIndex::default()
            },
        }
    }

    #[test]
    fn filters_sorts_and_collapse_follow_rfc8621_section_4_4() {
        let rows = vec![
            row(1, 1, 100, 500, &["$seen"], "ann@example.com"),
            row(2, 1, 200, 1500, &[], "bob@example.com"),
            row(3, 3, 150, 50, &["$flagged"], "cy@example.com"),
        ];
        let none = HashMap::new();
        let ids = |filter: &Filter| -> Vec<i64> {
            rows.iter()
                .filter(|r| matches(filter, r, &none))
                .map(|r| r.meta.id)
                .collect()
        };
        assert_eq!(ids(&Filter::NotKeyword("$seen".into())), vec![2, 3]);
        assert_eq!(ids(&Filter::After(150)), vec![2, 3]);
        assert_eq!(ids(&Filter::Before(150)), vec![1]);
        assert_eq!(ids(&Filter::MaxSize(500)), vec![3]);
        assert_eq!(ids(&Filter::MinSize(500)), vec![1, 2]);
        assert_eq!(ids(&Filter::From("BOB".into())), vec![2]);
        assert_eq!(
            ids(&Filter::Or(vec![
                Filter::HasKeyword("$flagged".into()),
                Filter::From("ann".into())
            ])),
            vec![1, 3]
        );
        assert_eq!(
            ids(&Filter::Not(vec![Filter::InMailbox(1)])),
            Vec::<i64>::new()
        );
        let mut sorted = rows.clone();
        sort(
            &mut sorted,
            &[Comparator {
                property: SortProperty::ReceivedAt,
                ascending: false,
            }],
        );
        assert_eq!(
            sorted.iter().map(|r| r.meta.id).collect::<Vec<_>>(),
            vec![2, 3, 1]
        );
        sort(
            &mut sorted,
            &[Comparator {
                property: SortProperty::Size,
                ascending: true,
            }],
        );
        assert_eq!(
            sorted.iter().map(|r| r.meta.id).collect::<Vec<_>>(),
            vec![3, 1, 2]
        );
        sort(
            &mut sorted,
            &[Comparator {
                property: SortProperty::ReceivedAt,
                ascending: false,
            }],
        );
        let collapsed = collapse_threads(sorted);
        assert_eq!(
            collapsed.iter().map(|r| r.meta.id).collect::<Vec<_>>(),
            vec![2, 3]
        );
    }
}

//! Email/query evaluation over [`QueryRow`]s: one implementation of the
//! filters and sorts of RFC 8621 §4.4 for every backend. The common listing
//! (one mailbox by receivedAt) does not come here: the store serves it from
//! its (mailbox, receivedAt) index.
//!
//! A filter is bounded when it is read (issue 43, ADR 0005): every string
//! value at most [`MAX_FILTER_VALUE_OCTETS`], a list of mailbox ids at most
//! [`MAX_FILTER_MAILBOX_IDS`], the tree at most [`MAX_FILTER_NODES`]
//! conditions and operators; and its text conditions are paid for as they
//! are evaluated, in render work units ([`WorkMeter`]): one per `from`,
//! `to`, `cc`, `bcc` or `subject` condition per email, one per `header`
//! condition per email plus one per field of that name it has. A text
//! value is normalized once ([`Needle`]), not once per email.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::header::HeaderFields;
use super::property::{HeaderForm, HeaderProperty};
use super::work::{WorkExceeded, WorkMeter};
use crate::store::{QueryRow, TextSearch};

/// Octets of one string value of a filter (a `from` … `subject`, `header`
/// name or value, `text`, `body`, keyword or mailbox id): `invalidArguments`
/// beyond. Four times the longest line RFC 5322 allows a field (998 octets
/// plus its fold), so any subject or address a client copies from a message
/// fits.
pub const MAX_FILTER_VALUE_OCTETS: usize = 4096;

/// Ids in an `inMailboxOtherThan` list: `invalidArguments` beyond.
pub const MAX_FILTER_MAILBOX_IDS: usize = 1024;

/// Conditions and operators one filter tree holds in all (each property of
/// a FilterCondition is one condition, each FilterOperator one operator):
/// `unsupportedFilter` beyond (RFC 8620 §5.5: "the client SHOULD suggest
/// that the user simplify their search").
pub const MAX_FILTER_NODES: usize = 128;

/// A `from`, `to`, `cc`, `bcc`, `subject` or `header` filter value as it is
/// matched ([`text_matches`]): every run of white space one space,
/// lowercase. Made once when the filter is read, not once per email.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Needle(String);

impl Needle {
    /// The needle of a filter value.
    pub fn new(text: &str) -> Self {
        Self(normal(text))
    }

    /// The normalized text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Needle {
    fn from(text: &str) -> Self {
        Self::new(text)
    }
}

/// A filter condition or operator (RFC 8621 §4.4.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Filter {
    And(Vec<Filter>),
    Or(Vec<Filter>),
    Not(Vec<Filter>),
    InMailbox(i64),
    /// Ids not known to the account match nothing.
    InMailboxUnknown,
    /// Sorted, without repeats (a lookup per mailbox of each email).
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
    From(Needle),
    To(Needle),
    Cc(Needle),
    Bcc(Needle),
    Subject(Needle),
    /// `[name]` or `[name, value]`: the header exists (and its value
    /// contains `value`). The name is lowercase.
    Header(String, Option<Needle>),
    /// `text` or `body` (by the search's scope): matched through the
    /// full-text index ([`crate::mail::search`] gives the rules), whose
    /// answer [`QueryFacts::search`] holds.
    Text(TextSearch),
    /// At least one email of the email's thread has the keyword.
    SomeInThreadHaveKeyword(String),
    /// Every email of the email's thread has the keyword.
    AllInThreadHaveKeyword(String),
    /// No email of the email's thread has the keyword.
    NoneInThreadHaveKeyword(String),
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

    /// The conditions and operators of this filter tree (a FilterCondition
    /// of several properties is their AND, counted as its conditions).
    pub fn nodes(&self) -> usize {
        match self {
            Filter::And(c) | Filter::Or(c) | Filter::Not(c) => {
                1 + c.iter().map(Filter::nodes).sum::<usize>()
            }
            _ => 1,
        }
    }

    /// The full-text conditions anywhere in this filter.
    pub fn searches(&self) -> Vec<&TextSearch> {
        match self {
            Filter::And(c) | Filter::Or(c) | Filter::Not(c) => {
                c.iter().flat_map(Filter::searches).collect()
            }
            Filter::Text(search) => vec![search],
            _ => Vec::new(),
        }
    }

    /// A full-text condition every match of this filter satisfies (the
    /// filter, or a condition of its top-level AND): its answer is the
    /// whole set of candidates.
    pub fn required_search(&self) -> Option<&TextSearch> {
        match self {
            Filter::Text(search) => Some(search),
            Filter::And(c) => c.iter().find_map(Filter::required_search),
            _ => None,
        }
    }

    /// Whether evaluating this filter needs the keywords of whole threads
    /// ([`ThreadKeywords`]).
    pub fn needs_threads(&self) -> bool {
        match self {
            Filter::And(c) | Filter::Or(c) | Filter::Not(c) => c.iter().any(Filter::needs_threads),
            Filter::SomeInThreadHaveKeyword(_)
            | Filter::AllInThreadHaveKeyword(_)
            | Filter::NoneInThreadHaveKeyword(_) => true,
            _ => false,
        }
    }
}

/// What a filter or sort may read beside the row itself: the header blocks
/// split into fields (for `header`), and the keywords of each thread (for
/// the `…InThreadHaveKeyword` filters and sorts), each loaded only when
/// needed ([`Filter::needs_headers`], [`Filter::needs_threads`]).
#[derive(Debug, Default)]
pub struct QueryFacts {
    pub headers: HashMap<i64, HeaderFields>,
    pub threads: ThreadKeywords,
    /// The ids each full-text condition matched ([`Filter::searches`]).
    pub search: HashMap<TextSearch, HashSet<i64>>,
}

/// Per thread: how many emails it has and how many of them carry each
/// keyword (lowercase), over every email of the account (RFC 8621 §4.4.1:
/// "the thread" is all of it, whatever mailbox the query is in).
#[derive(Debug, Default)]
pub struct ThreadKeywords {
    threads: HashMap<i64, (usize, HashMap<String, usize>)>,
}

impl ThreadKeywords {
    /// Counts the keywords of `rows`, which must be every email of the account.
    pub fn count(rows: &[QueryRow]) -> Self {
        let mut threads: HashMap<i64, (usize, HashMap<String, usize>)> = HashMap::new();
        for row in rows {
            let (emails, keywords) = threads.entry(row.meta.thread_id).or_default();
            *emails += 1;
            for keyword in &row.meta.keywords {
                *keywords.entry(keyword.to_ascii_lowercase()).or_default() += 1;
            }
        }
        Self { threads }
    }

    /// (emails of `thread` with `keyword`, emails of `thread`).
    fn with(&self, thread: i64, keyword: &str) -> (usize, usize) {
        self.threads
            .get(&thread)
            .map_or((0, 0), |(emails, keywords)| {
                (keywords.get(keyword).copied().unwrap_or(0), *emails)
            })
    }

    fn some(&self, thread: i64, keyword: &str) -> bool {
        self.with(thread, keyword).0 > 0
    }

    fn all(&self, thread: i64, keyword: &str) -> bool {
        let (with, emails) = self.with(thread, keyword);
        emails > 0 && with == emails
    }
}

/// Whether `row` matches `filter`; `facts` holds what the filter needs
/// beyond the row. Text conditions are paid for from `meter` before they
/// are evaluated (the module doc gives the units): `Err` once it is spent.
pub fn matches(
    filter: &Filter,
    row: &QueryRow,
    facts: &QueryFacts,
    meter: &WorkMeter,
) -> Result<bool, WorkExceeded> {
    let meta = &row.meta;
    let index = &row.index;
    let text = |values: &str, needle: &Needle| -> Result<bool, WorkExceeded> {
        meter.charge(1)?;
        Ok(text_matches(values, needle))
    };
    Ok(match filter {
        Filter::And(conditions) => {
            for condition in conditions {
                if !matches(condition, row, facts, meter)? {
                    return Ok(false);
                }
            }
            true
        }
        Filter::Or(conditions) | Filter::Not(conditions) => {
            let mut any = false;
            for condition in conditions {
                if matches(condition, row, facts, meter)? {
                    any = true;
                    break;
                }
            }
            any == matches!(filter, Filter::Or(_))
        }
        Filter::InMailbox(id) => meta.mailbox_ids.contains(id),
        Filter::InMailboxUnknown => false,
        Filter::InMailboxOtherThan(ids) => meta
            .mailbox_ids
            .iter()
            .any(|m| ids.binary_search(m).is_err()),
        Filter::Before(t) => meta.received_at < *t,
        Filter::After(t) => meta.received_at >= *t,
        Filter::MinSize(n) => meta.size >= *n,
        Filter::MaxSize(n) => meta.size < *n,
        Filter::HasKeyword(k) => meta.keywords.iter().any(|x| x.eq_ignore_ascii_case(k)),
        Filter::NotKeyword(k) => !meta.keywords.iter().any(|x| x.eq_ignore_ascii_case(k)),
        Filter::HasAttachment(wanted) => index.has_attachment == *wanted,
        Filter::From(needle) => text(&index.from_text, needle)?,
        Filter::To(needle) => text(&index.to_text, needle)?,
        Filter::Cc(needle) => text(&index.cc_text, needle)?,
        Filter::Bcc(needle) => text(&index.bcc_text, needle)?,
        Filter::Subject(needle) => text(&index.subject, needle)?,
        Filter::Header(name, value) => match facts.headers.get(&meta.id) {
            Some(fields) => {
                meter.charge(1 + fields.count(name) as u64)?;
                header_matches(fields, name, value.as_ref())
            }
            None => false,
        },
        Filter::Text(search) => facts
            .search
            .get(search)
            .is_some_and(|ids| ids.contains(&meta.id)),
        Filter::SomeInThreadHaveKeyword(k) => facts.threads.some(meta.thread_id, k),
        Filter::AllInThreadHaveKeyword(k) => facts.threads.all(meta.thread_id, k),
        Filter::NoneInThreadHaveKeyword(k) => !facts.threads.some(meta.thread_id, k),
    })
}

/// `text` with every run of white space as one space, lowercase: how a
/// text filter compares ([`text_matches`]).
fn normal(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// Whether one line of `values` (a rendered value, or an index's
/// one-value-a-line text) contains `text`. RFC 8621 §4.4.1 leaves the
/// matching to the server beyond "case-insensitive": here also every run of
/// white space compares as one space, on both sides, so a search finds a
/// subject or name whatever its folding (the Text form keeps the white space
/// of a fold, RFC 8621 §4.1.2.2).
fn text_matches(values: &str, needle: &Needle) -> bool {
    values
        .split('\n')
        .any(|value| normal(value).contains(needle.as_str()))
}

/// The `header` filter (RFC 8621 §4.4.1): the email has a header field of
/// this name (case-insensitive) and, given `text`, one such field's value
/// contains it ([`text_matches`]). A field's value is its Text form as
/// Email/get renders `header:{name}:asText:all` (unfolded, RFC 2047 words
/// decoded, as §4.4.1 asks), over the fields Email/get splits the header
/// block into ([`HeaderFields`]).
fn header_matches(fields: &HeaderFields, name: &str, text: Option<&Needle>) -> bool {
    let property = HeaderProperty {
        key: String::new(),
        name: name.to_ascii_lowercase(),
        form: HeaderForm::Text,
        all: true,
    };
    let Value::Array(values) = fields.render(&property) else {
        return false;
    };
    match text {
        None => !values.is_empty(),
        Some(text) => values
            .iter()
            .filter_map(Value::as_str)
            .any(|value| text_matches(value, text)),
    }
}

/// A sort property (RFC 8621 §4.4.2). The keyword sorts compare a boolean
/// (false before true when ascending): whether the email has the keyword
/// (lowercase), or some or all emails of its thread have it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SortProperty {
    ReceivedAt,
    SentAt,
    Size,
    From,
    To,
    Subject,
    HasKeyword(String),
    SomeInThreadHaveKeyword(String),
    AllInThreadHaveKeyword(String),
}

impl SortProperty {
    /// Whether an update of an email (its keywords) can move it in this order.
    pub fn is_mutable(&self) -> bool {
        !matches!(
            self,
            SortProperty::ReceivedAt
                | SortProperty::SentAt
                | SortProperty::Size
                | SortProperty::From
                | SortProperty::To
                | SortProperty::Subject
        )
    }

    /// Whether it reads the keywords of whole threads ([`ThreadKeywords`]).
    pub fn needs_threads(&self) -> bool {
        matches!(
            self,
            SortProperty::SomeInThreadHaveKeyword(_) | SortProperty::AllInThreadHaveKeyword(_)
        )
    }
}

/// One comparator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comparator {
    pub property: SortProperty,
    pub ascending: bool,
}

fn compare(
    a: &QueryRow,
    b: &QueryRow,
    property: &SortProperty,
    threads: &ThreadKeywords,
) -> Ordering {
    let has = |row: &QueryRow, keyword: &str| {
        row.meta
            .keywords
            .iter()
            .any(|k| k.eq_ignore_ascii_case(keyword))
    };
    match property {
        SortProperty::HasKeyword(k) => has(a, k).cmp(&has(b, k)),
        SortProperty::SomeInThreadHaveKeyword(k) => threads
            .some(a.meta.thread_id, k)
            .cmp(&threads.some(b.meta.thread_id, k)),
        SortProperty::AllInThreadHaveKeyword(k) => threads
            .all(a.meta.thread_id, k)
            .cmp(&threads.all(b.meta.thread_id, k)),
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
/// `threads` serves the thread keyword sorts (empty when none is used).
pub fn sort(rows: &mut [QueryRow], comparators: &[Comparator], threads: &ThreadKeywords) {
    let tie_ascending = comparators.first().is_none_or(|c| c.ascending);
    rows.sort_by(|a, b| {
        in_turn(comparators, |comparator| {
            let order = compare(a, b, &comparator.property, threads);
            (order, comparator.ascending)
        })
        .then_with(|| {
            let order = a.meta.id.cmp(&b.meta.id);
            if tie_ascending {
                order
            } else {
                order.reverse()
            }
        })
    });
}

/// Compares by each of `keys` in turn, each giving its order and whether
/// it is ascending (else the order reversed): the first that differs
/// decides; `Equal` when none does. Every query's sort (Email/query,
/// Mailbox/query, EmailSubmission/query) ranks by it.
pub fn in_turn<K>(keys: &[K], mut order_of: impl FnMut(&K) -> (Ordering, bool)) -> Ordering {
    for key in keys {
        let (order, ascending) = order_of(key);
        let order = if ascending { order } else { order.reverse() };
        if order.is_ne() {
            return order;
        }
    }
    Ordering::Equal
}

/// Keeps the first email of each thread, in order (`collapseThreads`).
pub fn collapse_threads(rows: Vec<QueryRow>) -> Vec<QueryRow> {
    let mut seen = HashSet::new();
    rows.into_iter()
        .filter(|row| seen.insert(row.meta.thread_id))
        .collect()
}

/// The index of the first result of a query page (RFC 8620 §5.5) among
/// `total` results: the anchor's index plus `anchorOffset` when an anchor was
/// found (`anchor`), else `position` (negative: counted from the end).
/// Clamped to `0..=total`, and saturating: an `anchorOffset` or `position`
/// near `i64::MAX` or `i64::MIN` is the end or the start, never a wrapped
/// value (which would serve the first page instead of none). Mailbox/query,
/// Email/query and EmailSubmission/query (no anchor) page through it.
pub fn page_start(total: i64, position: i64, anchor: Option<(usize, i64)>) -> i64 {
    let total = total.max(0);
    let start = match anchor {
        Some((index, offset)) => i64::try_from(index)
            .unwrap_or(i64::MAX)
            .saturating_add(offset),
        None if position < 0 => total.saturating_add(position),
        None => position,
    };
    start.clamp(0, total)
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
    fn text_matches_ignore_case_and_white_space_runs_within_one_value() {
        let table = [
            ("re: its    hazards (fwd)", "ITS hazards", true),
            ("good idea or\tbad?", "or  bad", true),
            ("ann example\nann@example.com\n", "example ann", false),
            ("ann example\nann@example.com\n", "ann@", true),
            ("café", "CAFÉ", true),
            ("", "", true),
            ("", "x", false),
        ];
        for (values, text, expected) in table {
            assert_eq!(
                text_matches(values, &Needle::new(text)),
                expected,
                "{values:?} {text:?}"
            );
        }
    }

    #[test]
    fn the_header_filter_reads_the_fields_email_get_renders() {
        // With bare LF line ends (as in all of the shared corpus),
        // mail-parser's Date parser runs past a date ending in `UT` and
        // swallows the List-Id line; the Email/get split keeps it.
        let block = concat!(
            "Date: Tue, 1 Oct 2024 10:00:00 UT\n",
            "List-Id: Plans <plans.example.com>\n",
            "Subject: =?utf-8?q?caf=C3=A9?= menu\n",
            "X-Folded: one\n\t two\n",
            "X-Folded: three\n",
            "\n",
        );
        let fields = HeaderFields::parse(block.as_bytes().to_vec());
        let table = [
            ("list-id", None, true),
            ("LIST-ID", Some("plans.EXAMPLE"), true),
            ("Subject", Some("Café menu"), true),
            ("Subject", Some("=?utf-8"), false),
            ("X-Folded", Some("one two"), true),
            ("x-folded", Some("three"), true),
            ("X-Folded", Some("four"), false),
            ("Date", Some("10:00:00 ut"), true),
            ("X-Absent", None, false),
            ("X-Absent", Some(""), false),
        ];
        for (name, text, expected) in table {
            assert_eq!(
                header_matches(&fields, name, text.map(Needle::new).as_ref()),
                expected,
                "{name} {text:?}"
            );
        }
    }

    #[test]
    fn text_conditions_are_paid_per_email_and_a_spent_meter_stops() {
        let ann = row(1, 1, 100, 500, &["$seen"], "ann@example.com");
        let bob = row(2, 2, 100, 500, &[], "bob@example.com");
        let mut facts = QueryFacts::default();
        let block = "Subject: s\nX-Two: one\nX-Two: two\n\n";
        facts
            .headers
            .insert(1, HeaderFields::parse(block.as_bytes().to_vec()));
        let meter = WorkMeter::new(7);
        // A keyword costs nothing; AND stops at the first condition unmet.
        let seen_from_ann = Filter::And(vec![
            Filter::HasKeyword("$seen".into()),
            Filter::From("ANN".into()),
        ]);
        assert_eq!(matches(&seen_from_ann, &ann, &facts, &meter), Ok(true));
        assert_eq!(meter.left(), 6);
        assert_eq!(matches(&seen_from_ann, &bob, &facts, &meter), Ok(false));
        assert_eq!(meter.left(), 6);
        // A header condition: one, and one per field of that name.
        let two = Filter::Header("x-two".into(), Some("TWO".into()));
        assert_eq!(matches(&two, &ann, &facts, &meter), Ok(true));
        assert_eq!(meter.left(), 3);
        // An email without a header block read matches no header condition.
        assert_eq!(matches(&two, &bob, &facts, &meter), Ok(false));
        // OR pays for each condition until one is met; then the meter is spent.
        let either = Filter::Or(vec![Filter::To("x".into()), Filter::Subject("y".into())]);
        assert_eq!(matches(&either, &bob, &facts, &meter), Ok(false));
        assert_eq!(meter.left(), 1);
        assert_eq!(
            matches(&either, &bob, &facts, &meter),
            Err(WorkExceeded),
            "the second condition is not paid for"
        );
        assert_eq!(meter.left(), 0);
        assert_eq!(Filter::Not(vec![either, two]).nodes(), 5);
    }

    #[test]
    fn filters_sorts_and_collapse_follow_rfc8621_section_4_4() {
        let rows = vec![
            row(1, 1, 100, 500, &["$seen"], "ann@example.com"),
            row(2, 1, 200, 1500, &[], "bob@example.com"),
            row(3, 3, 150, 50, &["$flagged"], "cy@example.com"),
        ];
        let none = QueryFacts::default();
        let ids = |filter: &Filter| -> Vec<i64> {
            rows.iter()
                .filter(|r| matches(filter, r, &none, &WorkMeter::new(u64::MAX)).unwrap())
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
        // Sorts `sorted` by one property and returns its ids in their order.
        let mut sort_by = |property, ascending| {
            sort(
                &mut sorted,
                &[Comparator {
                    property,
                    ascending,
                }],
                &none.threads,
            );
            sorted.iter().map(|r| r.meta.id).collect::<Vec<_>>()
        };
        assert_eq!(sort_by(SortProperty::ReceivedAt, false), vec![2, 3, 1]);
        assert_eq!(sort_by(SortProperty::Size, true), vec![3, 1, 2]);
        sort_by(SortProperty::ReceivedAt, false);
        let collapsed = collapse_threads(sorted);
        assert_eq!(
            collapsed.iter().map(|r| r.meta.id).collect::<Vec<_>>(),
            vec![2, 3]
        );
    }

    #[test]
    fn keyword_filters_and_sorts_read_the_email_or_its_whole_thread() {
        // Thread 1: emails 1 ($seen) and 2 (none); thread 3: email 3
        // ($seen, $flagged); thread 4: email 4 ($seen).
        let rows = vec![
            row(1, 1, 100, 500, &["$seen"], "a@example.com"),
            row(2, 1, 200, 500, &[], "b@example.com"),
            row(3, 3, 300, 500, &["$seen", "$Flagged"], "c@example.com"),
            row(4, 4, 400, 500, &["$seen"], "d@example.com"),
        ];
        let facts = QueryFacts {
            threads: ThreadKeywords::count(&rows),
            ..QueryFacts::default()
        };
        let ids = |filter: Filter| -> Vec<i64> {
            rows.iter()
                .filter(|r| matches(&filter, r, &facts, &WorkMeter::new(u64::MAX)).unwrap())
                .map(|r| r.meta.id)
                .collect()
        };
        let seen = || "$seen".to_string();
        assert_eq!(ids(Filter::SomeInThreadHaveKeyword(seen())), [1, 2, 3, 4]);
        assert_eq!(ids(Filter::AllInThreadHaveKeyword(seen())), [3, 4]);
        assert_eq!(
            ids(Filter::NoneInThreadHaveKeyword("$flagged".into())),
            [1, 2, 4]
        );
        assert_eq!(ids(Filter::SomeInThreadHaveKeyword("$flagged".into())), [3]);
        let order = |property: SortProperty, ascending: bool| -> Vec<i64> {
            let mut sorted = rows.clone();
            let by = [
                Comparator {
                    property,
                    ascending,
                },
                Comparator {
                    property: SortProperty::ReceivedAt,
                    ascending: true,
                },
            ];
            sort(&mut sorted, &by, &facts.threads);
            sorted.iter().map(|r| r.meta.id).collect()
        };
        // false sorts before true when ascending; then receivedAt.
        assert_eq!(order(SortProperty::HasKeyword(seen()), true), [2, 1, 3, 4]);
        assert_eq!(order(SortProperty::HasKeyword(seen()), false), [1, 3, 4, 2]);
        assert_eq!(
            order(SortProperty::AllInThreadHaveKeyword(seen()), false),
            [3, 4, 1, 2]
        );
        assert_eq!(
            order(
                SortProperty::SomeInThreadHaveKeyword("$flagged".into()),
                false
            ),
            [3, 1, 2, 4]
        );
    }

    #[test]
    fn page_starts_saturate_and_clamp_at_the_ends() {
        let cases = [
            // (total, position, anchor (index, offset), start)
            (10, 0, None, 0),
            (10, 3, None, 3),
            (10, -3, None, 7),
            (10, 11, None, 10),
            (10, i64::MAX, None, 10),
            (10, i64::MIN, None, 0),
            (10, 0, Some((4, 0)), 4),
            (10, 0, Some((4, -2)), 2),
            (10, 0, Some((4, -9)), 0),
            (10, 0, Some((4, 5)), 9),
            (10, 0, Some((4, 6)), 10),
            (10, 0, Some((4, i64::MAX)), 10),
            (10, 0, Some((4, i64::MIN)), 0),
            (10, 0, Some((9, i64::MAX - 8)), 10),
            (0, i64::MAX, Some((0, i64::MAX)), 0),
        ];
        for (total, position, anchor, start) in cases {
            assert_eq!(
                page_start(total, position, anchor),
                start,
                "{total} {position} {anchor:?}"
            );
        }
    }
}

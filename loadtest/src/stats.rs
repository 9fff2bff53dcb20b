//! Response times with sub-millisecond precision, and the tables that show them.
//!
//! Goose keeps whole milliseconds and times a request to its first byte, so
//! every call is also timed here, from sending it to having read its whole
//! body, into an HDR histogram in microseconds. One [`Recorder`] is shared by
//! every user of a run; [`Recorder::snapshot`] turns it into [`RequestStats`]
//! rows, which [`render_table`] and [`render_comparison`] print.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

use hdrhistogram::Histogram;

/// Name of the row holding whole-scenario times (first request sent to last
/// response read, for one user).
pub const SCENARIO_ROW: &str = "whole scenario";

/// Largest time a histogram keeps: one hour, in microseconds; longer times are
/// counted as one hour.
const MAX_MICROS: u64 = 3_600_000_000;

/// Count, failures and response times of one request name.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestStats {
    /// Request name, such as `Email/get metadata`, or [`SCENARIO_ROW`].
    pub name: String,
    /// Calls made (or, for [`SCENARIO_ROW`], scenarios run).
    pub count: u64,
    /// Calls that failed: transport error, HTTP status other than 200, or a
    /// response that did not pass its checks.
    pub failures: u64,
    /// Calls that got a whole response, and so a time; the times below are
    /// over these. 0 when none did, and then the times are 0.
    pub timed: u64,
    /// Mean response time, in milliseconds.
    pub mean_ms: f64,
    /// Median, in milliseconds.
    pub p50_ms: f64,
    /// 95th percentile, in milliseconds.
    pub p95_ms: f64,
    /// 99th percentile, in milliseconds.
    pub p99_ms: f64,
    /// Slowest, in milliseconds.
    pub max_ms: f64,
}

impl RequestStats {
    fn from_entry(name: &str, entry: &Entry) -> Self {
        let hist = &entry.histogram;
        let timed = hist.len();
        let ms = |micros: u64| micros as f64 / 1000.0;
        if timed == 0 {
            return RequestStats {
                name: name.to_string(),
                count: entry.count,
                failures: entry.failures,
                timed: 0,
                mean_ms: 0.0,
                p50_ms: 0.0,
                p95_ms: 0.0,
                p99_ms: 0.0,
                max_ms: 0.0,
            };
        }
        RequestStats {
            name: name.to_string(),
            count: entry.count,
            failures: entry.failures,
            timed,
            mean_ms: hist.mean() / 1000.0,
            p50_ms: ms(hist.value_at_quantile(0.50)),
            p95_ms: ms(hist.value_at_quantile(0.95)),
            p99_ms: ms(hist.value_at_quantile(0.99)),
            max_ms: ms(hist.max()),
        }
    }
}

struct Entry {
    histogram: Histogram<u64>,
    count: u64,
    failures: u64,
}

impl Entry {
    fn new() -> Self {
        Entry {
            histogram: Histogram::new_with_bounds(1, MAX_MICROS, 3)
                .expect("static histogram bounds are valid"),
            count: 0,
            failures: 0,
        }
    }
}

/// Thread-safe per-name histograms (microseconds), counts and failure reasons.
#[derive(Default)]
pub struct Recorder {
    entries: Mutex<HashMap<String, Entry>>,
    errors: Mutex<BTreeMap<String, u64>>,
}

impl Recorder {
    /// An empty recorder.
    pub fn new() -> Self {
        Recorder::default()
    }

    /// Records one call of `name`: its time if it got a whole response, and
    /// whether it passed its checks.
    pub fn record(&self, name: &str, elapsed: Option<Duration>, ok: bool) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let entry = match entries.get_mut(name) {
            Some(entry) => entry,
            None => entries.entry(name.to_string()).or_insert_with(Entry::new),
        };
        entry.count += 1;
        if !ok {
            entry.failures += 1;
        }
        if let Some(elapsed) = elapsed {
            let micros = u64::try_from(elapsed.as_micros())
                .unwrap_or(MAX_MICROS)
                .clamp(1, MAX_MICROS);
            entry.histogram.saturating_record(micros);
        }
    }

    /// Counts a failure reason, such as `Email/get metadata: notFound not empty`.
    pub fn record_error(&self, reason: &str) {
        let mut errors = self.errors.lock().unwrap_or_else(|e| e.into_inner());
        *errors.entry(reason.to_string()).or_default() += 1;
    }

    /// One row per recorded name: those in `order` first, in that order, then
    /// any others by name. Names in `order` never recorded get a zero row.
    pub fn snapshot(&self, order: &[&str]) -> Vec<RequestStats> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let empty = Entry::new();
        let mut rows: Vec<RequestStats> = order
            .iter()
            .map(|name| RequestStats::from_entry(name, entries.get(*name).unwrap_or(&empty)))
            .collect();
        let mut others: Vec<&String> = entries
            .keys()
            .filter(|name| !order.contains(&name.as_str()))
            .collect();
        others.sort();
        rows.extend(
            others
                .into_iter()
                .map(|name| RequestStats::from_entry(name, &entries[name])),
        );
        rows
    }

    /// Failure reasons and how often each happened, by reason.
    pub fn errors(&self) -> Vec<(String, u64)> {
        let errors = self.errors.lock().unwrap_or_else(|e| e.into_inner());
        errors.iter().map(|(k, v)| (k.clone(), *v)).collect()
    }
}

/// A time in milliseconds with three decimals (microseconds), or `-` when
/// nothing was timed.
pub fn format_ms(ms: f64, timed: u64) -> String {
    if timed == 0 {
        "-".to_string()
    } else {
        format!("{ms:.3}")
    }
}

/// `b / a` as `1.23x`, or `n/a` when `a` is not positive or either is missing.
pub fn format_ratio(a: f64, b: f64) -> String {
    if a > 0.0 && a.is_finite() && b.is_finite() && b >= 0.0 {
        format!("{:.2}x", b / a)
    } else {
        "n/a".to_string()
    }
}

const COLUMNS: [&str; 7] = ["count", "fail", "mean", "p50", "p95", "p99", "max"];

fn cells(row: &RequestStats) -> [String; 7] {
    [
        row.count.to_string(),
        row.failures.to_string(),
        format_ms(row.mean_ms, row.timed),
        format_ms(row.p50_ms, row.timed),
        format_ms(row.p95_ms, row.timed),
        format_ms(row.p99_ms, row.timed),
        format_ms(row.max_ms, row.timed),
    ]
}

fn name_width(rows: &[&RequestStats]) -> usize {
    rows.iter()
        .map(|row| row.name.chars().count())
        .max()
        .unwrap_or(0)
        .max("request".len())
}

/// A plain-text table: one line per row with count, failures and mean, p50,
/// p95, p99 and max in milliseconds (three decimals).
pub fn render_table(rows: &[RequestStats]) -> String {
    let all: Vec<&RequestStats> = rows.iter().collect();
    let name_w = name_width(&all);
    let widths: Vec<usize> = (0..COLUMNS.len())
        .map(|i| {
            rows.iter()
                .map(|row| cells(row)[i].len())
                .max()
                .unwrap_or(0)
                .max(COLUMNS[i].len())
        })
        .collect();
    let mut out = String::new();
    let _ = write!(out, "{:<name_w$}", "request");
    for (column, width) in COLUMNS.iter().zip(&widths) {
        let _ = write!(out, "  {column:>width$}");
    }
    out.push('\n');
    let total: usize = name_w + widths.iter().map(|w| w + 2).sum::<usize>();
    out.push_str(&"-".repeat(total));
    out.push('\n');
    for row in rows {
        let _ = write!(out, "{:<name_w$}", row.name);
        for (cell, width) in cells(row).iter().zip(&widths) {
            let _ = write!(out, "  {cell:>width$}");
        }
        out.push('\n');
    }
    out.push_str("(times in ms: from sending the request to reading the whole response)\n");
    out
}

/// One line of [`render_comparison`], as text cells.
struct ComparisonLine {
    name: String,
    a: [String; 7],
    b: [String; 7],
    mean_ratio: String,
    p99_ratio: String,
}

/// Two tables side by side, `a` then `b`, matched by request name, with the
/// ratios `b / a` of the mean and of p99.
pub fn render_comparison(
    label_a: &str,
    a: &[RequestStats],
    label_b: &str,
    b: &[RequestStats],
) -> String {
    let mut names: Vec<&str> = a.iter().map(|row| row.name.as_str()).collect();
    for row in b {
        if !names.contains(&row.name.as_str()) {
            names.push(&row.name);
        }
    }
    let blank = |name: &str| RequestStats {
        name: name.to_string(),
        count: 0,
        failures: 0,
        timed: 0,
        mean_ms: 0.0,
        p50_ms: 0.0,
        p95_ms: 0.0,
        p99_ms: 0.0,
        max_ms: 0.0,
    };
    let pairs: Vec<(RequestStats, RequestStats)> = names
        .iter()
        .map(|name| {
            let find = |rows: &[RequestStats]| {
                rows.iter()
                    .find(|row| row.name == *name)
                    .cloned()
                    .unwrap_or_else(|| blank(name))
            };
            (find(a), find(b))
        })
        .collect();
    let ratio = |x: &RequestStats, y: &RequestStats, pick: fn(&RequestStats) -> f64| {
        if x.timed == 0 || y.timed == 0 {
            "n/a".to_string()
        } else {
            format_ratio(pick(x), pick(y))
        }
    };
    let lines: Vec<ComparisonLine> = pairs
        .iter()
        .map(|(x, y)| ComparisonLine {
            name: x.name.clone(),
            a: cells(x),
            b: cells(y),
            mean_ratio: ratio(x, y, |r| r.mean_ms),
            p99_ratio: ratio(x, y, |r| r.p99_ms),
        })
        .collect();
    let name_w = lines
        .iter()
        .map(|line| line.name.chars().count())
        .max()
        .unwrap_or(0)
        .max("request".len());
    let width = |i: usize| {
        lines
            .iter()
            .flat_map(|line| [line.a[i].len(), line.b[i].len()])
            .max()
            .unwrap_or(0)
            .max(COLUMNS[i].len())
    };
    let widths: Vec<usize> = (0..COLUMNS.len()).map(width).collect();
    let side_w: usize = widths.iter().map(|w| w + 2).sum::<usize>() - 2;
    let ratio_w = lines
        .iter()
        .flat_map(|line| [line.mean_ratio.len(), line.p99_ratio.len()])
        .max()
        .unwrap_or(0)
        .max("mean B/A".len());

    let mut out = String::new();
    let label = |text: &str| {
        let text = if text.chars().count() > side_w {
            text.chars().take(side_w).collect()
        } else {
            text.to_string()
        };
        format!("{text:<side_w$}")
    };
    let _ = writeln!(
        out,
        "{:<name_w$}  {}  |  {}  |",
        "",
        label(&format!("A: {label_a}")),
        label(&format!("B: {label_b}"))
    );
    let header_side = || {
        COLUMNS
            .iter()
            .zip(&widths)
            .map(|(column, w)| format!("{column:>w$}"))
            .collect::<Vec<_>>()
            .join("  ")
    };
    let _ = writeln!(
        out,
        "{:<name_w$}  {}  |  {}  |  {:>ratio_w$}  {:>ratio_w$}",
        "request",
        header_side(),
        header_side(),
        "mean B/A",
        "p99 B/A"
    );
    let total = name_w + 2 + side_w + 5 + side_w + 5 + ratio_w * 2 + 2;
    out.push_str(&"-".repeat(total));
    out.push('\n');
    for ComparisonLine {
        name,
        a: x,
        b: y,
        mean_ratio,
        p99_ratio,
    } in &lines
    {
        let side = |cells: &[String; 7]| {
            cells
                .iter()
                .zip(&widths)
                .map(|(cell, w)| format!("{cell:>w$}"))
                .collect::<Vec<_>>()
                .join("  ")
        };
        let _ = writeln!(
            out,
            "{name:<name_w$}  {}  |  {}  |  {mean_ratio:>ratio_w$}  {p99_ratio:>ratio_w$}",
            side(x),
            side(y)
        );
    }
    out.push_str("(times in ms: from sending the request to reading the whole response; B/A > 1 means B is slower)\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, count: u64, failures: u64, mean: f64, p99: f64) -> RequestStats {
        RequestStats {
            name: name.to_string(),
            count,
            failures,
            timed: count,
            mean_ms: mean,
            p50_ms: mean,
            p95_ms: p99,
            p99_ms: p99,
            max_ms: p99,
        }
    }

    #[test]
    fn recorder_keeps_sub_millisecond_times() {
        let recorder = Recorder::new();
        for micros in [250, 500, 750, 1000] {
            recorder.record(
                "Email/get metadata",
                Some(Duration::from_micros(micros)),
                true,
            );
        }
        recorder.record("Email/get metadata", None, false);
        recorder.record("GET session", Some(Duration::from_millis(3)), false);
        let rows = recorder.snapshot(&["GET session", "Email/get metadata", "Mailbox/get"]);
        assert_eq!(
            rows.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
            ["GET session", "Email/get metadata", "Mailbox/get"]
        );
        let metadata = &rows[1];
        assert_eq!(metadata.count, 5);
        assert_eq!(metadata.failures, 1);
        assert_eq!(metadata.timed, 4);
        assert!(
            (metadata.mean_ms - 0.625).abs() < 0.001,
            "{}",
            metadata.mean_ms
        );
        assert!((metadata.p50_ms - 0.5).abs() < 0.001, "{}", metadata.p50_ms);
        assert!((metadata.max_ms - 1.0).abs() < 0.002, "{}", metadata.max_ms);
        assert!((metadata.p99_ms - 1.0).abs() < 0.002, "{}", metadata.p99_ms);
        assert_eq!(rows[0].failures, 1);
        assert_eq!(rows[2].count, 0);
        assert_eq!(rows[2].timed, 0);
    }

    #[test]
    fn recorder_lists_unordered_names_last() {
        let recorder = Recorder::new();
        recorder.record("zeta", Some(Duration::from_millis(1)), true);
        recorder.record("alpha", Some(Duration::from_millis(1)), true);
        recorder.record("first", Some(Duration::from_millis(1)), true);
        let names: Vec<String> = recorder
            .snapshot(&["first"])
            .into_iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(names, ["first", "alpha", "zeta"]);
    }

    #[test]
    fn errors_are_counted_by_reason() {
        let recorder = Recorder::new();
        recorder.record_error("b");
        recorder.record_error("a");
        recorder.record_error("b");
        assert_eq!(
            recorder.errors(),
            vec![("a".to_string(), 1), ("b".to_string(), 2)]
        );
    }

    #[test]
    fn ms_and_ratios_format() {
        assert_eq!(format_ms(1.23456, 1), "1.235");
        assert_eq!(format_ms(0.0, 0), "-");
        assert_eq!(format_ratio(2.0, 3.0), "1.50x");
        assert_eq!(format_ratio(4.0, 1.0), "0.25x");
        assert_eq!(format_ratio(0.0, 1.0), "n/a");
        assert_eq!(format_ratio(1.0, f64::NAN), "n/a");
    }

    #[test]
    fn table_renders_aligned_rows() {
        let rows = vec![
            row("GET session", 10, 0, 1.5, 2.25),
            row("Email/get metadata", 100, 2, 0.123, 12.5),
            RequestStats {
                timed: 0,
                ..row("Mailbox/get", 0, 0, 0.0, 0.0)
            },
        ];
        let table = render_table(&rows);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            lines[0],
            "request             count  fail   mean    p50     p95     p99     max"
        );
        assert_eq!(
            lines[2],
            "GET session            10     0  1.500  1.500   2.250   2.250   2.250"
        );
        assert_eq!(
            lines[3],
            "Email/get metadata    100     2  0.123  0.123  12.500  12.500  12.500"
        );
        assert_eq!(
            lines[4],
            "Mailbox/get             0     0      -      -       -       -       -"
        );
        assert_eq!(lines[1].len(), lines[0].len());
    }

    #[test]
    fn comparison_shows_both_sides_and_ratios() {
        let a = vec![
            row("GET session", 10, 0, 2.0, 4.0),
            row(SCENARIO_ROW, 10, 0, 10.0, 20.0),
        ];
        let b = vec![
            row("GET session", 10, 0, 3.0, 2.0),
            row("only in b", 1, 1, 1.0, 1.0),
        ];
        let text = render_comparison("http://127.0.0.1:8080", &a, "http://127.0.0.1:8081", &b);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].contains("A: http://127.0.0.1:8080"), "{text}");
        assert!(lines[0].contains("B: http://127.0.0.1:8081"), "{text}");
        assert!(lines[1].starts_with("request"), "{text}");
        let tail = |line: &str| {
            let words: Vec<&str> = line.split_whitespace().collect();
            words[words.len() - 2..].join(" ")
        };
        assert!(lines[1].ends_with("mean B/A   p99 B/A"), "{text}");
        assert!(lines[3].starts_with("GET session"), "{text}");
        assert_eq!(tail(lines[3]), "1.50x 0.50x", "{text}");
        assert!(lines[4].starts_with(SCENARIO_ROW), "{text}");
        assert_eq!(tail(lines[4]), "n/a n/a", "{text}");
        assert!(lines[5].starts_with("only in b"), "{text}");
        // Every data line has the same width.
        let width = lines[1].len();
        for line in &lines[1..6] {
            assert_eq!(line.len(), width, "{line:?}\n{text}");
        }
    }
}

//! Import sources: Maildir, mbox and .eml files turned into messages to ingest.
//!
//! This is what `fastview import --account EMAIL [--mailbox NAME] PATH...` reads.
//! [`walk`] turns the paths into a stream of [`SourceItem`]s and [`received_at`]
//! picks the JMAP `receivedAt` of each message.
//!
//! # Rules (a public interface: keep them exact)
//!
//! * **Walking.** The paths are visited in the order given; folders are walked
//!   recursively, their entries sorted by file name (byte order), so the output
//!   is deterministic. Symbolic links are followed; a folder reached a second
//!   time (a symlink loop or a repeated path) is [`SourceItem::Skipped`].
//! * **The format is told by name, never by content:**
//!   * a folder holding both `cur/` and `new/` folders is a **Maildir**: every
//!     file in `cur/` and `new/` is a message (file names starting with `.` and
//!     everything in `tmp/` are skipped). Its Maildir++ sub-folders — folders
//!     named `.Sub` or `.Sub.Child` that are Maildirs themselves — yield
//!     messages with [`SourceMessage::folder`] `Sub` and `Sub/Child`. Anything
//!     else inside the Maildir is walked like any other folder.
//!   * a file whose name ends in `.mbox` is an **mbox**, one ending in `.eml` is
//!     **one message** (both compared ASCII case-insensitively);
//!   * any other file is [`SourceItem::Skipped`]: neither imported nor failed.
//!     So `README.md` and `MANIFEST.tsv` files next to the mail are skipped.
//! * **mbox** (the "mboxrd" reading of RFC 4155): a separator is a line that
//!   starts with `From ` at the start of the file or after a `\n`. A message is
//!   the bytes between two separator lines (or the last separator and the end of
//!   the file), exactly — so the empty line that usually precedes a separator is
//!   kept. The separator line is not part of the message. Lines matching
//!   `^>+From ` lose one `>`. `Status:` containing `R` gives `$seen`;
//!   `X-Status:` containing `A`, `F`, `T` gives `$answered`, `$flagged`,
//!   `$draft`. The separator's date (asctime, `From sender Sat Jan  3 01:05:34
//!   1996`, optionally with a zone) becomes [`SourceMessage::envelope_time`].
//!   Bytes before the first separator are not a message: if they are not blank
//!   they are reported as [`SourceItem::Failed`].
//! * **.eml**: LF or CRLF, kept byte for byte, except that a leading mbox
//!   `From ` envelope line is removed and its date used as `envelope_time`.
//!   An empty file is [`SourceItem::Failed`].
//! * **Maildir** file names: flags after `:2,` — `S`, `R`, `F`, `D` give
//!   `$seen`, `$answered`, `$flagged`, `$draft` (other flag letters are
//!   ignored); the leading digits (`1234567890.M…`) give
//!   [`SourceMessage::file_name_time`].
//! * A message that is empty (or only whitespace) is [`SourceItem::Failed`], as
//!   is anything that cannot be read; the walk never panics and goes on after a
//!   failure.
//!
//! Keywords always come in the order `$seen`, `$answered`, `$flagged`,
//! `$draft`, without duplicates.
//!
//! # Where the rules come from
//!
//! * Maildir: D. J. Bernstein's maildir(5) (`cur/`, `new/`, `tmp/`, the
//!   `time.unique.host:2,FLAGS` name, flag letters); Maildir++: Courier's
//!   maildir++ notes (`.Folder.Sub` folders, `.` as the hierarchy separator).
//! * mbox: RFC 4155 (the `From ` separator line and its asctime date) and
//!   the mboxrd quoting described in qmail's mbox(5) (`^>*From ` gains a `>`
//!   on write, so `^>+From ` loses one on read). `Status`/`X-Status` letters
//!   are the UW-IMAP / Pine / mutt convention.
//! * Dates: RFC 5322 §3.3 (date-time) and §4.3 (obsolete named zones and
//!   two-digit years), parsed by mail-parser; asctime as C's `asctime(3)`,
//!   read by [`super::header_date`].
//! * The counting rule matches Python's `mailbox.mbox`, which the corpus
//!   README's figures were computed with.
//!
//! mail-parser's own `mailbox` readers were considered and not used: its mbox
//! reader drops the separator's time zone and cannot return the separator
//! line, and its Maildir reader visits files in `read_dir` order (not
//! deterministic), takes the file's mtime instead of the name's time, finds
//! flags after any `2,` and names Maildir++ folders `Sub.Child`.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs::{self, File};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use mail_parser::{DateTime, HeaderName, MessageParser};

use super::header_date::{asctime_time, parse_asctime};

/// One message read from an import source.
#[derive(Debug, Clone)]
pub struct SourceMessage {
    /// Where it came from, for error reports: `path` or `path#N` (Nth message
    /// of an mbox, counting from 1).
    pub origin: String,
    /// The Maildir++ sub-folder it was in (`.Work.Clients` → `Work/Clients`), if any.
    pub folder: Option<String>,
    /// The raw message, without an mbox `From ` envelope line, `>From ` un-escaped for mbox.
    pub raw: Vec<u8>,
    /// JMAP keywords from Maildir flags or mbox Status/X-Status (lowercase: `$seen`, …),
    /// in the order `$seen`, `$answered`, `$flagged`, `$draft`.
    pub keywords: Vec<String>,
    /// Unix seconds from the mbox envelope line, if present and parseable.
    pub envelope_time: Option<i64>,
    /// Unix seconds from the Maildir file name (`1234567890.M…`), if present.
    pub file_name_time: Option<i64>,
}

/// What walking the import paths yields, in order.
#[derive(Debug, Clone)]
pub enum SourceItem {
    /// A message to import.
    Message(SourceMessage),
    /// Could not be read (I/O error, empty message, …): reported as failed.
    /// `origin` has the same shape as [`SourceMessage::origin`]; `reason` is a
    /// one-line human-readable explanation.
    Failed { origin: String, reason: String },
    /// A file that is neither Maildir, mbox nor .eml (or a folder already
    /// walked): counted as skipped.
    Skipped { path: PathBuf },
}

/// Walks files and folders recursively and yields their messages.
///
/// Lazy: folders are listed and files read only as the iterator advances, and
/// an mbox is streamed message by message, so memory stays bounded by the
/// largest single message. See the module documentation for the rules.
pub fn walk(paths: &[PathBuf]) -> impl Iterator<Item = SourceItem> {
    Walker {
        tasks: paths.iter().rev().cloned().map(Task::Path).collect(),
        visited: HashSet::new(),
    }
}

/// receivedAt for an imported message (unix seconds, UTC): the envelope line,
/// else the top Received header, else the Maildir file name's time, else Date, else now.
///
/// * The top Received header is the first one in the header section; its date
///   is the text after its last `;`, parsed with mail-parser's RFC 5322 date
///   parser. (mail-parser's parsed `Received` value is not used: it takes the
///   date after the *first* `;`, ignores named zones such as `EST` and reads
///   two-digit years as 19xx.)
/// * The Date header is mail-parser's parsed value when valid.
/// * Both headers are first tried as asctime (`Sat Sep 21 08:18:08 2002`,
///   which mail-parser misreads when a zone follows), and dates mail-parser
///   rejects are retried as an RFC 5322 date without a zone, read as UTC.
///   Dates outside the years 1900–3000 (mail-parser's validity range, e.g. the
///   Y2K-bug year `0102`) are ignored and the next source is used.
///
/// `parsed` should be `raw` parsed by mail-parser; when it is `None` the
/// headers are parsed here.
pub fn received_at(message: &SourceMessage, parsed: Option<&mail_parser::Message<'_>>) -> i64 {
    if let Some(t) = message.envelope_time {
        return t;
    }
    let own;
    let parsed = match parsed {
        Some(parsed) => Some(parsed),
        None => {
            own = MessageParser::new().parse_headers(&message.raw);
            own.as_ref()
        }
    };
    parsed
        .and_then(top_received_time)
        .or(message.file_name_time)
        .or_else(|| parsed.and_then(date_header_time))
        .unwrap_or_else(|| chrono::Utc::now().timestamp())
}

// ---------------------------------------------------------------------------
// Walking

/// A unit of pending work; the walker keeps them on a LIFO stack.
enum Task {
    /// A path given by the user or found in a plain folder.
    Path(PathBuf),
    /// A Maildir (root or Maildir++ sub-folder) and its folder name.
    Maildir {
        dir: PathBuf,
        folder: Option<String>,
    },
    /// A file in a Maildir's `cur/` or `new/`.
    MaildirFile {
        path: PathBuf,
        folder: Option<String>,
    },
    /// An mbox being streamed.
    Mbox(Box<MboxReader>),
    /// An item already decided.
    Item(SourceItem),
}

struct Walker {
    tasks: Vec<Task>,
    /// Canonical paths of the folders walked so far.
    visited: HashSet<PathBuf>,
}

impl Iterator for Walker {
    type Item = SourceItem;

    fn next(&mut self) -> Option<SourceItem> {
        while let Some(task) = self.tasks.pop() {
            match task {
                Task::Item(item) => return Some(item),
                Task::Path(path) => {
                    if let Some(item) = self.visit(path) {
                        return Some(item);
                    }
                }
                Task::Maildir { dir, folder } => self.expand_maildir(&dir, folder.as_deref()),
                Task::MaildirFile { path, folder } => return Some(read_maildir_file(path, folder)),
                Task::Mbox(mut reader) => {
                    if let Some(item) = reader.next() {
                        self.tasks.push(Task::Mbox(reader));
                        return Some(item);
                    }
                }
            }
        }
        None
    }
}

impl Walker {
    /// Classifies `path`; returns an item for a file, or queues a folder's work.
    fn visit(&mut self, path: PathBuf) -> Option<SourceItem> {
        let meta = match fs::metadata(&path) {
            Ok(meta) => meta,
            Err(e) => return Some(failed(&path, &e)),
        };
        if meta.is_dir() {
            if !self.first_visit(&path) {
                return Some(SourceItem::Skipped { path });
            }
            if is_maildir(&path) {
                self.tasks.push(Task::Maildir {
                    dir: path,
                    folder: None,
                });
            } else {
                self.expand_plain_dir(&path);
            }
            return None;
        }
        match extension_lowercase(&path).as_deref() {
            Some("eml") => Some(read_eml(&path)),
            Some("mbox") => match MboxReader::open(&path) {
                Ok(reader) => {
                    self.tasks.push(Task::Mbox(Box::new(reader)));
                    None
                }
                Err(e) => Some(failed(&path, &e)),
            },
            _ => Some(SourceItem::Skipped { path }),
        }
    }

    /// Records a folder as walked; false if it was walked before.
    fn first_visit(&mut self, dir: &Path) -> bool {
        let key = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        self.visited.insert(key)
    }

    /// Queues the sorted entries of a plain folder.
    fn expand_plain_dir(&mut self, dir: &Path) {
        match sorted_entries(dir) {
            Ok(entries) => self.push_in_order(entries.into_iter().map(Task::Path)),
            Err(e) => self.tasks.push(Task::Item(failed(dir, &e))),
        }
    }

    /// Queues a Maildir's messages, then its Maildir++ sub-folders and other
    /// entries, in file-name order.
    fn expand_maildir(&mut self, dir: &Path, folder: Option<&str>) {
        let entries = match sorted_entries(dir) {
            Ok(entries) => entries,
            Err(e) => {
                self.tasks.push(Task::Item(failed(dir, &e)));
                return;
            }
        };
        let mut tasks = Vec::new();
        for entry in entries {
            let name = entry.file_name().unwrap_or_default().to_string_lossy();
            let is_dir = entry.is_dir();
            if is_dir && (name == "cur" || name == "new") {
                match sorted_entries(&entry) {
                    Ok(files) => tasks.extend(files.into_iter().map(|path| {
                        let hidden = path
                            .file_name()
                            .is_some_and(|n| n.as_encoded_bytes().starts_with(b"."));
                        if hidden || path.is_dir() {
                            Task::Item(SourceItem::Skipped { path })
                        } else {
                            Task::MaildirFile {
                                path,
                                folder: folder.map(str::to_owned),
                            }
                        }
                    })),
                    Err(e) => tasks.push(Task::Item(failed(&entry, &e))),
                }
            } else if is_dir && name == "tmp" {
                // Deliveries in progress: never messages.
                match sorted_entries(&entry) {
                    Ok(files) => tasks.extend(
                        files
                            .into_iter()
                            .map(|path| Task::Item(SourceItem::Skipped { path })),
                    ),
                    Err(e) => tasks.push(Task::Item(failed(&entry, &e))),
                }
            } else if let Some(sub) = name.strip_prefix('.')
                && is_dir
                && !sub.is_empty()
                && is_maildir(&entry)
                && self.first_visit(&entry)
            {
                let sub = sub
                    .split('.')
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>()
                    .join("/");
                let folder = match folder {
                    Some(parent) => format!("{parent}/{sub}"),
                    None => sub,
                };
                tasks.push(Task::Maildir {
                    dir: entry,
                    folder: Some(folder),
                });
            } else {
                tasks.push(Task::Path(entry));
            }
        }
        self.push_in_order(tasks);
    }

    /// Pushes tasks so that they pop in the given order.
    fn push_in_order(&mut self, tasks: impl IntoIterator<Item = Task>) {
        let start = self.tasks.len();
        self.tasks.extend(tasks);
        self.tasks[start..].reverse();
    }
}

/// A folder with both `cur/` and `new/` folders.
fn is_maildir(dir: &Path) -> bool {
    dir.join("cur").is_dir() && dir.join("new").is_dir()
}

/// The entries of a folder, sorted by file name.
fn sorted_entries(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut entries = fs::read_dir(dir)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<std::io::Result<Vec<_>>>()?;
    entries.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
    Ok(entries)
}

fn extension_lowercase(path: &Path) -> Option<String> {
    path.extension()
        .and_then(OsStr::to_str)
        .map(str::to_ascii_lowercase)
}

fn failed(path: &Path, error: &dyn std::fmt::Display) -> SourceItem {
    SourceItem::Failed {
        origin: path.display().to_string(),
        reason: error.to_string(),
    }
}

/// Rejects a message that is empty or only whitespace.
fn check_not_empty(raw: &[u8], what: &str) -> Result<(), String> {
    if raw.iter().all(u8::is_ascii_whitespace) {
        Err(format!("{what} is empty: no message to import"))
    } else {
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// .eml and Maildir files

/// Reads a `.eml` file: one message, with a leading `From ` envelope line removed.
fn read_eml(path: &Path) -> SourceItem {
    let origin = path.display().to_string();
    let mut raw = match fs::read(path) {
        Ok(raw) => raw,
        Err(e) => {
            return SourceItem::Failed {
                origin,
                reason: e.to_string(),
            };
        }
    };
    if raw.is_empty() {
        return SourceItem::Failed {
            origin,
            reason: "the file is empty".into(),
        };
    }
    let mut envelope_time = None;
    if raw.starts_with(b"From ") {
        let end = raw
            .iter()
            .position(|&b| b == b'\n')
            .map_or(raw.len(), |i| i + 1);
        envelope_time = parse_envelope_time(&raw[..end]);
        raw.drain(..end);
    }
    if let Err(reason) = check_not_empty(&raw, "the message after the `From ` line") {
        return SourceItem::Failed { origin, reason };
    }
    SourceItem::Message(SourceMessage {
        origin,
        folder: None,
        raw,
        keywords: Vec::new(),
        envelope_time,
        file_name_time: None,
    })
}

/// Reads one file of a Maildir's `cur/` or `new/`.
fn read_maildir_file(path: PathBuf, folder: Option<String>) -> SourceItem {
    let origin = path.display().to_string();
    let raw = match fs::read(&path) {
        Ok(raw) => raw,
        Err(e) => {
            return SourceItem::Failed {
                origin,
                reason: e.to_string(),
            };
        }
    };
    if let Err(reason) = check_not_empty(&raw, "the file") {
        return SourceItem::Failed { origin, reason };
    }
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    SourceItem::Message(SourceMessage {
        origin,
        folder,
        raw,
        keywords: maildir_keywords(&name),
        envelope_time: None,
        file_name_time: maildir_file_name_time(&name),
    })
}

/// Keywords from the flags after `:2,` in a Maildir file name.
fn maildir_keywords(name: &str) -> Vec<String> {
    let flags = name.rsplit_once(":2,").map_or("", |(_, flags)| flags);
    keywords([
        flags.contains('S'),
        flags.contains('R'),
        flags.contains('F'),
        flags.contains('D'),
    ])
}

/// The leading digits of a Maildir file name, as unix seconds.
fn maildir_file_name_time(name: &str) -> Option<i64> {
    let digits = name.len() - name.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    name[..digits].parse().ok()
}

/// `[$seen, $answered, $flagged, $draft]` flags → keywords.
fn keywords(flags: [bool; 4]) -> Vec<String> {
    ["$seen", "$answered", "$flagged", "$draft"]
        .into_iter()
        .zip(flags)
        .filter(|(_, set)| *set)
        .map(|(k, _)| k.to_owned())
        .collect()
}

// ---------------------------------------------------------------------------
// mbox

/// Streams the messages of one mbox file.
struct MboxReader {
    path: PathBuf,
    reader: BufReader<File>,
    /// The separator line that starts the next message, once read.
    separator: Option<Vec<u8>>,
    /// Number of separators seen so far (the next message's number).
    count: usize,
    started: bool,
}

impl MboxReader {
    fn open(path: &Path) -> std::io::Result<Self> {
        Ok(Self {
            path: path.to_path_buf(),
            reader: BufReader::with_capacity(64 * 1024, File::open(path)?),
            separator: None,
            count: 0,
            started: false,
        })
    }

    /// Reads lines into `out` up to the next separator line (stored in
    /// `self.separator`) or the end of the file. `unescape` applies mboxrd
    /// `>From ` un-escaping.
    fn read_until_separator(&mut self, out: &mut Vec<u8>, unescape: bool) -> std::io::Result<()> {
        let mut line = Vec::with_capacity(256);
        loop {
            line.clear();
            if self.reader.read_until(b'\n', &mut line)? == 0 {
                return Ok(());
            }
            if line.starts_with(b"From ") {
                self.count += 1;
                self.separator = Some(std::mem::take(&mut line));
                return Ok(());
            }
            let quoted = line.iter().take_while(|&&b| b == b'>').count();
            let skip = usize::from(unescape && quoted > 0 && line[quoted..].starts_with(b"From "));
            out.extend_from_slice(&line[skip..]);
        }
    }

    fn next(&mut self) -> Option<SourceItem> {
        if !self.started {
            self.started = true;
            let mut preamble = Vec::new();
            if let Err(e) = self.read_until_separator(&mut preamble, false) {
                return Some(failed(&self.path, &e));
            }
            if !preamble.iter().all(u8::is_ascii_whitespace) {
                return Some(SourceItem::Failed {
                    origin: self.path.display().to_string(),
                    reason: format!(
                        "{} bytes before the first `From ` line are not a message",
                        preamble.len()
                    ),
                });
            }
        }
        let separator = self.separator.take()?;
        let origin = format!("{}#{}", self.path.display(), self.count);
        let mut raw = Vec::new();
        if let Err(e) = self.read_until_separator(&mut raw, true) {
            // Give up on the rest of the file: its framing is unknown now.
            self.separator = None;
            return Some(SourceItem::Failed {
                origin,
                reason: e.to_string(),
            });
        }
        if let Err(reason) = check_not_empty(&raw, "the message") {
            return Some(SourceItem::Failed { origin, reason });
        }
        let (status, x_status) = mbox_status(&raw);
        Some(SourceItem::Message(SourceMessage {
            origin,
            folder: None,
            keywords: keywords([
                status.contains(&b'R'),
                x_status.contains(&b'A'),
                x_status.contains(&b'F'),
                x_status.contains(&b'T'),
            ]),
            raw,
            envelope_time: parse_envelope_time(&separator),
            file_name_time: None,
        }))
    }
}

/// The values of the first `Status` and `X-Status` headers (empty if absent).
fn mbox_status(raw: &[u8]) -> (&[u8], &[u8]) {
    let (mut status, mut x_status) = (None, None);
    for line in raw.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            break; // end of the header section
        }
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let name = line[..colon].trim_ascii();
        let value = &line[colon + 1..];
        if name.eq_ignore_ascii_case(b"status") {
            status.get_or_insert(value);
        } else if name.eq_ignore_ascii_case(b"x-status") {
            x_status.get_or_insert(value);
        }
    }
    (status.unwrap_or_default(), x_status.unwrap_or_default())
}

// ---------------------------------------------------------------------------
// Dates

/// The date of an mbox `From ` envelope line, as unix seconds.
fn parse_envelope_time(line: &[u8]) -> Option<i64> {
    let line = line.strip_prefix(b"From ")?;
    let text = String::from_utf8_lossy(line);
    let tokens: Vec<&str> = text.split_ascii_whitespace().collect();
    match parse_asctime(&tokens) {
        Some(time) => time,
        // Some writers put an RFC 5322 date after the sender.
        None => rfc5322_time(&tokens.get(1..)?.join(" ")),
    }
}

/// A valid mail-parser date as unix seconds.
fn valid_time(date: &DateTime) -> Option<i64> {
    date.is_valid().then(|| date.to_timestamp())
}

/// A date header's text: asctime if it has that shape, else RFC 5322
/// (mail-parser), else RFC 5322 without a zone (read as UTC).
///
/// A text with the asctime shape never goes to mail-parser, which misreads
/// an asctime date followed by a zone (`Sat Sep 21 08:18:08 2002 +0000` → 21
/// August) instead of rejecting it. No RFC 5322 date has the asctime shape.
fn rfc5322_time(text: &str) -> Option<i64> {
    match asctime_time(text) {
        Some(time) => time,
        None => DateTime::parse_rfc822(text)
            .as_ref()
            .and_then(valid_time)
            .or_else(|| zoneless_time(text)),
    }
}

/// An RFC 5322 date that lacks its zone, read as UTC.
fn zoneless_time(text: &str) -> Option<i64> {
    DateTime::parse_rfc822(&format!("{} +0000", text.trim()))
        .as_ref()
        .and_then(valid_time)
}

/// The raw value of a parsed header, lossily decoded.
fn raw_value(
    parsed: &mail_parser::Message<'_>,
    header: &mail_parser::Header<'_>,
) -> Option<String> {
    let bytes = parsed
        .raw_message()
        .get(header.offset_start as usize..header.offset_end as usize)?;
    Some(String::from_utf8_lossy(bytes).into_owned())
}

/// The date (unix seconds) after the last `;` of the first (most recent)
/// Received header; `None` without one or when it does not parse.
pub fn top_received_time(parsed: &mail_parser::Message<'_>) -> Option<i64> {
    let header = parsed
        .headers()
        .iter()
        .find(|h| h.name == HeaderName::Received)?;
    let value = raw_value(parsed, header)?;
    let (_, date) = value.rsplit_once(';')?;
    rfc5322_time(date)
}

/// The Date header: asctime, else mail-parser's value when valid, else without a zone.
fn date_header_time(parsed: &mail_parser::Message<'_>) -> Option<i64> {
    let header = parsed
        .headers()
        .iter()
        .find(|h| h.name == HeaderName::Date)?;
    let text = raw_value(parsed, header)?;
    match asctime_time(&text) {
        Some(time) => time,
        None => parsed
            .date()
            .and_then(valid_time)
            .or_else(|| zoneless_time(&text)),
    }
}

#[cfg(test)]
mod tests;

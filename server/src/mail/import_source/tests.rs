//! Tests of [`super`]: Maildir, mbox and eml sources walked, ordered and
//! read.

use super::*;

/// Writes `files` (relative path → bytes) under a new temp dir.
fn tree(files: &[(&str, &[u8])]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (rel, bytes) in files {
        let path = dir.path().join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, bytes).unwrap();
    }
    dir
}

fn walk_dir(dir: &Path) -> Vec<SourceItem> {
    walk(&[dir.to_path_buf()]).collect()
}

fn messages(items: &[SourceItem]) -> Vec<&SourceMessage> {
    items
        .iter()
        .filter_map(|i| match i {
            SourceItem::Message(m) => Some(m),
            _ => None,
        })
        .collect()
}

/// A short description of each item, relative to `base`.
fn summary(items: &[SourceItem], base: &Path) -> Vec<String> {
    let base = format!("{}/", base.display());
    items
        .iter()
        .map(|i| match i {
            SourceItem::Message(m) => format!("message {}", m.origin.replace(&base, "")),
            SourceItem::Failed { origin, .. } => {
                format!("failed {}", origin.replace(&base, ""))
            }
            SourceItem::Skipped { path } => {
                format!("skipped {}", path.display().to_string().replace(&base, ""))
            }
        })
        .collect()
}

fn kw(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

fn msg(raw: &[u8]) -> SourceMessage {
    SourceMessage {
        origin: "test".into(),
        folder: None,
        raw: raw.to_vec(),
        keywords: Vec::new(),
        envelope_time: None,
        file_name_time: None,
    }
}

/// 1996-01-03T01:05:34Z
const JAN_3_1996: i64 = 820_631_134;
/// 2002-07-23T19:39:23Z
const JUL_23_2002: i64 = 1_027_453_163;

#[test]
fn mbox_splits_unescapes_and_reads_status() {
    let mbox = b"From alice@example.com Sat Jan  3 01:05:34 1996\n\
Subject: one\n\
Status: RO\n\
X-Status: AF\n\
\n\
body\n\
>From here\n\
>>From there\n\
> From not quoted\n\
>Fromage\n\
From: not a separator either\n\
xFrom nor this\n\
\n\
From bob@example.com Tue Jul 23 19:39:23 2002 +0200\n\
Subject: two\n\
X-Status: T\n\
\n\
last line without newline";
    let dir = tree(&[("box.mbox", mbox)]);
    let items = walk_dir(dir.path());
    assert_eq!(
        summary(&items, dir.path()),
        ["message box.mbox#1", "message box.mbox#2"]
    );
    let m = messages(&items);
    assert_eq!(
        m[0].raw,
        b"Subject: one\nStatus: RO\nX-Status: AF\n\nbody\nFrom here\n>From there\n\
> From not quoted\n>Fromage\nFrom: not a separator either\nxFrom nor this\n\n"
    );
    assert_eq!(m[0].keywords, kw(&["$seen", "$answered", "$flagged"]));
    assert_eq!(m[0].envelope_time, Some(JAN_3_1996));
    assert_eq!(m[0].file_name_time, None);
    assert_eq!(m[0].folder, None);
    assert_eq!(
        m[1].raw,
        b"Subject: two\nX-Status: T\n\nlast line without newline"
    );
    assert_eq!(m[1].keywords, kw(&["$draft"]));
    assert_eq!(m[1].envelope_time, Some(JUL_23_2002 - 2 * 3600));
}

#[test]
fn mbox_status_only_from_the_header_section() {
    let mbox =
        b"From a Sat Jan  3 01:05:34 1996\nSubject: s\nstatus: O\n\nStatus: R\nX-Status: AFT\n";
    let dir = tree(&[("x.mbox", mbox)]);
    let items = walk_dir(dir.path());
    assert_eq!(messages(&items)[0].keywords, Vec::<String>::new());
}

#[test]
fn mbox_crlf() {
    let mbox = b"From a@example.com Sat Jan  3 01:05:34 1996\r\nSubject: x\r\nStatus: R\r\n\r\n>From y\r\n>>From z\r\n\r\nFrom b Sat Jan  3 01:05:34 1996\r\nSubject: y\r\n\r\nz\r\n";
    let dir = tree(&[("x.mbox", mbox)]);
    let items = walk_dir(dir.path());
    let m = messages(&items);
    assert_eq!(m.len(), 2);
    assert_eq!(
        m[0].raw,
        b"Subject: x\r\nStatus: R\r\n\r\nFrom y\r\n>From z\r\n\r\n"
    );
    assert_eq!(m[0].keywords, kw(&["$seen"]));
    assert_eq!(m[0].envelope_time, Some(JAN_3_1996));
    assert_eq!(m[1].raw, b"Subject: y\r\n\r\nz\r\n");
}

#[test]
fn mbox_preamble_empty_messages_and_bad_envelopes() {
    let mbox = b"not mail\n>From x\nFrom \nSubject: no date\n\nFrom a Sat Jan  3 01:05:34 1996\nFrom \xff\xfe bad date\nSubject: three\n\n";
    let dir = tree(&[
        ("x.mbox", mbox),
        ("empty.mbox", b""),
        ("blank.mbox", b"\n\n"),
    ]);
    let items = walk_dir(dir.path());
    assert_eq!(
        summary(&items, dir.path()),
        [
            "failed x.mbox",
            "message x.mbox#1",
            "failed x.mbox#2",
            "message x.mbox#3"
        ]
    );
    let SourceItem::Failed { reason, .. } = &items[0] else {
        unreachable!()
    };
    assert_eq!(
        reason,
        "17 bytes before the first `From ` line are not a message"
    );
    let SourceItem::Failed { reason, .. } = &items[2] else {
        unreachable!()
    };
    assert_eq!(reason, "the message is empty: no message to import");
    let m = messages(&items);
    assert_eq!(m[0].raw, b"Subject: no date\n\n");
    assert_eq!(m[0].envelope_time, None);
    assert_eq!(m[1].raw, b"Subject: three\n\n");
    assert_eq!(m[1].envelope_time, None);
}

#[test]
fn envelope_dates() {
    let t = |line: &str| parse_envelope_time(line.as_bytes());
    assert_eq!(
        t("From god@heaven.af.mil Sat Jan  3 01:05:34 1996\n"),
        Some(JAN_3_1996)
    );
    assert_eq!(
        t("From cras@irccrew.org  Tue Jul 23 19:39:23 2002\r\n"),
        Some(JUL_23_2002)
    );
    assert_eq!(
        t("From x Sat Jan 3 01:05:34 1996 +0100"),
        Some(JAN_3_1996 - 3600)
    );
    assert_eq!(
        t("From x Sat Jan 3 01:05:34 -0130 1996"),
        Some(JAN_3_1996 + 5400)
    );
    assert_eq!(
        t("From x Sat Jan 3 01:05:34 PST 1996"),
        Some(JAN_3_1996 + 8 * 3600)
    );
    assert_eq!(t("From x Sat Jan 3 01:05:34 1996 UTC"), Some(JAN_3_1996));
    assert_eq!(t("From x Jan 3 01:05 1996"), Some(JAN_3_1996 - 34));
    assert_eq!(
        t("From Sat Jan 3 01:05:34 1996"),
        Some(JAN_3_1996),
        "no sender"
    );
    assert_eq!(
        t("From x Sat, 3 Jan 1996 01:05:34 +0000"),
        Some(JAN_3_1996),
        "RFC 5322"
    );
    assert_eq!(t("From x Sat Feb 30 01:05:34 1996"), None);
    assert_eq!(t("From x Sat Jan 3 25:05:34 1996"), None);
    assert_eq!(t("From x Sat Jan 3 01:05:34"), None);
    assert_eq!(t("From x Sat Jan 3 01:05:34 0102"), None);
    assert_eq!(t("From \n"), None);
    assert_eq!(t("From"), None);
}

#[test]
fn eml_lf_crlf_envelope_and_empty() {
    let dir = tree(&[
            ("a.eml", b"Subject: lf\n\nbody\n"),
            ("b.eml", b"From someone@example.com Sat Jan  3 01:05:34 1996\r\nSubject: crlf\r\n\r\nbody\r\n>From kept\r\n"),
            ("c.eml", b""),
            ("d.eml", b"From x Sat Jan  3 01:05:34 1996\n"),
            ("e.EML", b"From: upper@example.com\n\nx"),
        ]);
    let items = walk_dir(dir.path());
    assert_eq!(
        summary(&items, dir.path()),
        [
            "message a.eml",
            "message b.eml",
            "failed c.eml",
            "failed d.eml",
            "message e.EML"
        ]
    );
    let m = messages(&items);
    assert_eq!(m[0].raw, b"Subject: lf\n\nbody\n");
    assert_eq!(m[0].envelope_time, None);
    assert_eq!(m[1].raw, b"Subject: crlf\r\n\r\nbody\r\n>From kept\r\n");
    assert_eq!(m[1].envelope_time, Some(JAN_3_1996));
    assert!(m[1].keywords.is_empty());
    assert_eq!(
        m[2].raw, b"From: upper@example.com\n\nx",
        "a From: header is not an envelope"
    );
    let SourceItem::Failed { reason, .. } = &items[2] else {
        unreachable!()
    };
    assert_eq!(reason, "the file is empty");
    let SourceItem::Failed { reason, .. } = &items[3] else {
        unreachable!()
    };
    assert_eq!(
        reason,
        "the message after the `From ` line is empty: no message to import"
    );
}

#[test]
fn maildir_flags_times_and_maildir_plus_plus_folders() {
    let m = b"Subject: m\n\nx\n" as &[u8];
    let dir = tree(&[
        ("Mail/cur/1234567890.M1P2.host:2,FRS", m),
        ("Mail/cur/1234567891.M1P3.host:2,D", m),
        ("Mail/cur/.hidden", m),
        ("Mail/new/1234567892.M1P4.host", m),
        ("Mail/new/noflags2,S", m),
        ("Mail/tmp/1234567893.M1P5.host.eml", m),
        ("Mail/dovecot-uidlist", b"3 V1 N4\n"),
        ("Mail/.Work/cur/1300000000.A.host:2,S", m),
        ("Mail/.Work/new/.keep", b""),
        ("Mail/.Work/tmp/.keep", b""),
        ("Mail/.Work/maildirfolder", b""),
        ("Mail/.Work.Clients/cur/1300000001.B.host:2,R", m),
        ("Mail/.Work.Clients/new/x", m),
        ("Mail/.Work.Clients/tmp/.keep", b""),
        ("Mail/.notmaildir/a.eml", m),
        ("Mail/plain/b.eml", m),
    ]);
    let root = dir.path().join("Mail");
    let items = walk_dir(&root);
    assert_eq!(
        summary(&items, &root),
        [
            "message .Work/cur/1300000000.A.host:2,S",
            "skipped .Work/maildirfolder",
            "skipped .Work/new/.keep",
            "skipped .Work/tmp/.keep",
            "message .Work.Clients/cur/1300000001.B.host:2,R",
            "message .Work.Clients/new/x",
            "skipped .Work.Clients/tmp/.keep",
            "message .notmaildir/a.eml",
            "skipped cur/.hidden",
            "message cur/1234567890.M1P2.host:2,FRS",
            "message cur/1234567891.M1P3.host:2,D",
            "skipped dovecot-uidlist",
            "message new/1234567892.M1P4.host",
            "message new/noflags2,S",
            "message plain/b.eml",
            "skipped tmp/1234567893.M1P5.host.eml",
        ]
    );
    let m = messages(&items);
    let row = |m: &SourceMessage| (m.folder.clone(), m.keywords.clone(), m.file_name_time);
    assert_eq!(
        row(m[0]),
        (Some("Work".into()), kw(&["$seen"]), Some(1_300_000_000))
    );
    assert_eq!(
        row(m[1]),
        (
            Some("Work/Clients".into()),
            kw(&["$answered"]),
            Some(1_300_000_001)
        )
    );
    assert_eq!(row(m[2]), (Some("Work/Clients".into()), kw(&[]), None));
    assert_eq!(
        row(m[3]),
        (None, kw(&[]), None),
        "a .eml in a non-Maildir dot folder"
    );
    assert_eq!(
        row(m[4]),
        (
            None,
            kw(&["$seen", "$answered", "$flagged"]),
            Some(1_234_567_890)
        )
    );
    assert_eq!(row(m[5]), (None, kw(&["$draft"]), Some(1_234_567_891)));
    assert_eq!(row(m[6]), (None, kw(&[]), Some(1_234_567_892)));
    assert_eq!(row(m[7]), (None, kw(&[]), None), "flags need `:2,`");
    assert_eq!(m[4].raw, b"Subject: m\n\nx\n");
    assert_eq!(m[4].envelope_time, None);
}

#[test]
fn order_skips_and_errors() {
    let e = b"Subject: s\n\nx\n" as &[u8];
    let dir = tree(&[
        ("b/z.eml", e),
        ("b/a.eml", e),
        ("a.eml", e),
        ("README.md", b"# corpus\n"),
        ("MANIFEST.tsv", b"a\tb\n"),
        ("notes.txt", e),
        ("mbox", e),
        ("c.mbox.gz", e),
    ]);
    let missing = dir.path().join("missing.eml");
    let items: Vec<_> = walk(&[
        dir.path().join("b"),
        dir.path().to_path_buf(),
        missing.clone(),
    ])
    .collect();
    assert_eq!(
        summary(&items, dir.path()),
        [
            "message b/a.eml",
            "message b/z.eml",
            "skipped MANIFEST.tsv",
            "skipped README.md",
            "message a.eml",
            "skipped b",
            "skipped c.mbox.gz",
            "skipped mbox",
            "skipped notes.txt",
            "failed missing.eml",
        ]
    );
    // A file given directly is classified by its name too.
    let items: Vec<_> = walk(&[dir.path().join("README.md"), dir.path().join("a.eml")]).collect();
    assert_eq!(
        summary(&items, dir.path()),
        ["skipped README.md", "message a.eml"]
    );
}

#[cfg(unix)]
#[test]
fn symlink_loops_end() {
    let dir = tree(&[("d/a.eml", b"Subject: s\n\nx\n")]);
    std::os::unix::fs::symlink(dir.path().join("d"), dir.path().join("d/loop")).unwrap();
    let items = walk_dir(dir.path());
    assert_eq!(
        summary(&items, dir.path()),
        ["message d/a.eml", "skipped d/loop"]
    );
}

#[test]
fn never_panics_on_odd_bytes() {
    let odd: &[&[u8]] = &[
        b"From ",
        b"From \n",
        b"\n",
        b">From \n",
        b"From x\nFrom y\n",
        b"From x Sat Jan 99 99:99:99 99999999999999999999\nx",
        b"\xff\xfe\x00\r\r\n\n",
        b"From x Sat Jan  3 01:05:34 1996\n>",
        b"From x Sat Jan  3 01:05:34 1996\n>>>>",
    ];
    for bytes in odd {
        let dir = tree(&[("x.mbox", bytes), ("x.eml", bytes), ("M/cur/1:2,", bytes)]);
        std::fs::create_dir(dir.path().join("M/new")).unwrap();
        for item in walk_dir(dir.path()) {
            if let SourceItem::Message(m) = item {
                let parsed = MessageParser::new().parse(&m.raw);
                received_at(&m, parsed.as_ref());
                received_at(&m, None);
            }
        }
    }
}

/// received_at with the headers parsed by mail-parser, and without: both agree.
fn received(m: &SourceMessage) -> i64 {
    let parsed = MessageParser::new().parse(&m.raw);
    let with = received_at(m, parsed.as_ref());
    assert_eq!(with, received_at(m, None));
    with
}

#[test]
fn received_at_precedence() {
    let headers = b"Received: from b.example by c.example; Tue, 23 Jul 2002 21:39:23 +0200\r\n\
Received: from a.example by b.example; Mon, 22 Jul 2002 00:00:00 +0000\r\n\
Date: Wed, 3 Jan 1996 01:05:34 +0000\r\n\
Subject: s\r\n\r\nbody\r\n";
    let mut m = msg(headers);
    m.envelope_time = Some(42);
    m.file_name_time = Some(43);
    assert_eq!(received(&m), 42, "the envelope line first");
    m.envelope_time = None;
    assert_eq!(received(&m), JUL_23_2002, "then the top Received header");
    let mut m = msg(b"Date: Wed, 3 Jan 1996 01:05:34 +0000\r\nReceived: by x (no date)\r\n\r\n");
    m.file_name_time = Some(43);
    assert_eq!(received(&m), 43, "then the Maildir file name");
    m.file_name_time = None;
    assert_eq!(received(&m), JAN_3_1996, "then Date");
    let m = msg(b"Subject: no dates\r\n\r\nx");
    let before = chrono::Utc::now().timestamp();
    let t = received(&m);
    assert!(
        (before..=chrono::Utc::now().timestamp()).contains(&t),
        "then now"
    );
}

#[test]
fn received_at_date_forms() {
    let at = |headers: &str| received(&msg(format!("{headers}\r\nSubject: s\r\n\r\nx").as_bytes()));
    // Received: the date is after the last ';' of the first header, folded or not.
    assert_eq!(
        at(
            "Received: from a (a [192.0.2.1]) by b with SMTP id 7; for <x@example.com>;\r\n\tTue, 23 Jul 2002 19:39:23 +0000 (UTC)"
        ),
        JUL_23_2002
    );
    assert_eq!(
        at("Received: by b; 5 Mar 2020 01:02:03 -0000; Tue, 23 Jul 2002 19:39:23 +0000"),
        JUL_23_2002
    );
    assert_eq!(
        at("Received: by b; Tue, 23 Jul 2002 14:39:23 EST"),
        JUL_23_2002
    );
    assert_eq!(
        at("Received: by b; Tue, 23 Jul 02 19:39:23 +0000"),
        JUL_23_2002
    );
    assert_eq!(at("Received: by b; Tue, 23 Jul 2002 19:39:23"), JUL_23_2002);
    assert_eq!(at("Received: by b; Tue Jul 23 19:39:23 2002"), JUL_23_2002);
    assert_eq!(
        at("Received: by b; Tue Jul 23 21:39:23 2002 +0200"),
        JUL_23_2002
    );
    // A first Received header without a usable date falls through to Date.
    assert_eq!(
        at(
            "Received: by b; garbage\r\nReceived: by c; Tue, 23 Jul 2002 19:39:23 +0000\r\nDate: Sat, 3 Jan 1996 01:05:34 +0000"
        ),
        JAN_3_1996
    );
    // Date forms.
    assert_eq!(at("Date: Wed, 3 Jan 1996 02:05:34 +0100"), JAN_3_1996);
    assert_eq!(at("Date: Wed, 3 Jan 1996 01:05:34"), JAN_3_1996);
    assert_eq!(at("Date: Wed Jan  3 01:05:34 1996"), JAN_3_1996);
    assert_eq!(at("Date: Wed Jan  3 02:05:34 1996 +0100"), JAN_3_1996);
    let before = chrono::Utc::now().timestamp();
    assert!(
        at("Date: Wed, 3 Jan 0102 01:05:34 +0000") >= before,
        "the Y2K-bug year is ignored"
    );
}

/// Expected subjects of the demo mailbox, by file name.
const DEMO: &[(&str, &str)] = &[
    (
        "01-welcome-plain.eml",
        "Welcome to your Fastview demo mailbox",
    ),
    (
        "02-newsletter-html-only.eml",
        "This week at Harbor Lane: rye is back",
    ),
    (
        "03-alternative-german.eml",
        "Grüße aus München – Planung fürs Offsite",
    ),
    (
        "04-invoice-pdf-attachment.eml",
        "Invoice INV-2024-0117 for March",
    ),
    ("05-inline-image.eml", "New logo proposal (inline preview)"),
    ("06-japanese.eml", "来週の打ち合わせについて"),
    ("07-russian.eml", "Отчёт за февраль готов"),
    ("08-thread-1.eml", "Réunion de lundi : ordre du jour"),
    ("09-thread-2.eml", "Re: Réunion de lundi : ordre du jour"),
    ("10-thread-3.eml", "Re: Réunion de lundi : ordre du jour"),
    ("11-thread-4.eml", "Re: Réunion de lundi : ordre du jour"),
    (
        "12-forwarded-message.eml",
        "Fwd: Parking garage closed on Friday",
    ),
    (
        "13-mailing-list.eml",
        "[fastview-users] Tips for importing an old mbox",
    ),
    (
        "14-calendar-invite.eml",
        "Invitation: Quarterly planning @ Tue 26 Mar 2024 14:00 - 15:30 (UTC)",
    ),
];

#[test]
fn demo_fixtures_parse() {
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/demo"));
    let items = walk_dir(dir);
    let mut seen = Vec::new();
    for item in &items {
        match item {
            SourceItem::Message(m) => {
                let name = Path::new(&m.origin).file_name().unwrap().to_string_lossy();
                let parsed = MessageParser::new()
                    .parse(&m.raw)
                    .unwrap_or_else(|| panic!("{name} does not parse"));
                let expected = DEMO
                    .iter()
                    .find(|(file, _)| *file == name)
                    .unwrap_or_else(|| panic!("{name} is not listed in DEMO"));
                assert_eq!(parsed.subject(), Some(expected.1), "{name}");
                assert!(
                    m.raw.windows(2).all(|w| w[1] != b'\n' || w[0] == b'\r'),
                    "{name}: CRLF"
                );
                seen.push(name.into_owned());
            }
            SourceItem::Skipped { path } => {
                assert_eq!(path.file_name().unwrap(), "README.md");
            }
            SourceItem::Failed { origin, reason } => panic!("{origin}: {reason}"),
        }
    }
    assert_eq!(
        seen,
        DEMO.iter().map(|(f, _)| f.to_string()).collect::<Vec<_>>()
    );
}

/// The shared real-mail corpus (see its README.md), when present.
#[test]
fn corpus_walks_completely() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/corpus"));
    if !root.is_dir() {
        eprintln!("skipped: no corpus at {}", root.display());
        return;
    }
    let (mut messages, mut skipped, mut now) = (0, Vec::new(), 0);
    let start = chrono::Utc::now().timestamp();
    for item in walk(&[root.to_path_buf()]) {
        match item {
            SourceItem::Message(m) => {
                messages += 1;
                if received(&m) >= start {
                    now += 1;
                }
            }
            SourceItem::Failed { origin, reason } => panic!("{origin}: {reason}"),
            SourceItem::Skipped { path } => skipped.push(path),
        }
    }
    // 9601 .eml files + 2039 mbox messages, as the corpus README counts them.
    assert_eq!(messages, 11_640);
    // The READMEs and MANIFEST.tsv files.
    assert!(skipped.iter().all(|p| {
        let name = p.file_name().unwrap();
        name == "README.md" || name == "MANIFEST.tsv"
    }));
    assert_eq!(skipped.len(), 6);
    // Only `no_date.mbox` has no date anywhere.
    assert_eq!(now, 1);
}

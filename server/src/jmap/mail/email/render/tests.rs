//! Tests of [`super`]: the golden files (`tests/fixtures/golden`) and the
//! shapes of each property.

use std::path::{Path, PathBuf};

use mail_parser::MessageParser;
use serde_json::json;

use super::*;

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/golden")
}

/// Renders `sources` with no bound on the work.
fn render_unbounded(
    properties: &[EmailProperty],
    body: &[BodyProperty],
    options: &BodyOptions,
    sources: &EmailSources,
) -> Map<String, Value> {
    render_email(
        properties,
        body,
        options,
        sources,
        &WorkMeter::new(u64::MAX),
    )
    .unwrap()
}

/// Every Email property, plus header forms over known and unknown fields.
fn all_properties() -> Vec<EmailProperty> {
    let mut properties = EmailProperty::default_list();
    properties.extend([EmailProperty::Headers, EmailProperty::BodyStructure]);
    for header in [
        "header:Subject",
        "header:Subject:asText:all",
        "header:From:asGroupedAddresses",
        "header:To:asGroupedAddresses",
        "header:Cc:asGroupedAddresses:all",
        "header:Date:asDate:all",
        "header:Message-ID:asMessageIds:all",
        "header:List-Unsubscribe:asURLs",
        "header:List-Post:asURLs",
        "header:List-Id:asText",
        "header:X-Test",
        "header:X-Test:all",
        "header:X-Test:asText",
        "header:X-Test:asAddresses",
        "header:X-Test:asGroupedAddresses",
        "header:X-Test:asMessageIds",
        "header:X-Test:asDate",
        "header:X-Test:asDate:all",
        "header:X-Test:asURLs:all",
    ] {
        properties.push(EmailProperty::parse(header).expect(header));
    }
    properties
}

/// Every EmailBodyPart property, plus header forms on parts.
fn all_body_properties() -> Vec<BodyProperty> {
    let mut properties = BodyProperty::default_list();
    properties.extend([BodyProperty::Headers, BodyProperty::SubParts]);
    for header in [
        "header:Content-Type:asText",
        "header:X-Part:asAddresses:all",
    ] {
        properties.push(BodyProperty::parse(header).expect(header));
    }
    properties
}

fn meta(size: usize) -> EmailMeta {
    EmailMeta {
        id: 42,
        blob_id: "ab".repeat(32),
        thread_id: 7,
        size: size as i64,
        received_at: 1_704_164_645,
        mailbox_ids: vec![3, 5],
        keywords: vec!["$seen".into(), "$flagged".into()],
    }
}

const FETCH_ALL: BodyOptions = BodyOptions {
    flags: BodyValueFlags {
        fetch_text: false,
        fetch_html: false,
        fetch_all: true,
    },
    max_body_value_bytes: 0,
};

/// Renders a message with the given properties and options from all sources.
fn render(
    raw: &[u8],
    properties: &[EmailProperty],
    body: &[BodyProperty],
    options: &BodyOptions,
) -> Value {
    let full = MessageParser::default().parse(raw).expect("message parses");
    let fast_view = FastView::compute(&full);
    let meta = meta(raw.len());
    let sources = EmailSources {
        fast_view: Some(&fast_view),
        full: Some(&full),
        ..EmailSources::metadata(&meta)
    };
    Value::Object(render_unbounded(properties, body, options, &sources))
}

/// The stored header block: up to and including the first blank line.
/// The header block as ingest stores it.
fn header_block(raw: &[u8]) -> Vec<u8> {
    crate::mail::ingest::prepare(raw.to_vec(), Vec::new(), Vec::new(), |_| 0)
        .email
        .header_block
}

/// Header properties rendered from the header block alone must equal
/// those rendered from the full message (the two read levels agree).
fn check_header_level(raw: &[u8], properties: &[EmailProperty], full: &Value) {
    let header = HeaderFields::parse(header_block(raw));
    let meta = meta(raw.len());
    let sources = EmailSources {
        header: Some(&header),
        ..EmailSources::metadata(&meta)
    };
    let header_properties: Vec<EmailProperty> = properties
        .iter()
        .filter(|property| {
            use EmailProperty::*;
            match property {
                MessageId | InReplyTo | References | Sender | From | To | Cc | Bcc | ReplyTo
                | Subject | SentAt | Headers | Header(_) => true,
                Id | BlobId | ThreadId | MailboxIds | Keywords | Size | ReceivedAt
                | BodyStructure | BodyValues | TextBody | HtmlBody | Attachments
                | HasAttachment | Preview => false,
            }
        })
        .cloned()
        .collect();
    let rendered = render_unbounded(&header_properties, &[], &BodyOptions::default(), &sources);
    for (key, value) in rendered {
        assert_eq!(
            Some(&value),
            full.get(&key),
            "header level differs for {key}"
        );
    }
}

/// Every property rendered from what ingest stores (the header block, the
/// part tree encoded and decoded, and only the byte ranges of the parts
/// whose values are asked, each checked against its digest) must equal
/// the render of the whole message: the structure and body-values read
/// levels give byte-identical JSON to a full read.
fn check_stored_level(
    raw: &[u8],
    properties: &[EmailProperty],
    body_properties: &[BodyProperty],
    options: &BodyOptions,
    full: &Value,
) {
    let prepared = crate::mail::ingest::prepare(raw.to_vec(), Vec::new(), Vec::new(), |_| 0);
    let header = HeaderFields::parse(prepared.email.header_block.clone());
    let stored = BodyStructure::decode(&prepared.email.structure).expect("decodes");
    let stored = stored.with_header_block(header.block());
    let mut bodies = PartBodies::default();
    if let Some(root) = stored.root() {
        let lists = stored.partition();
        for part in body::value_parts(root, &lists, options.flags) {
            let (range, digest) = part.stored_range().expect("a leaf has its range");
            let octets = &raw[range.start as usize..range.end as usize];
            assert_eq!(crate::blob::range_digest(octets), digest);
            bodies.insert(part.index(), bytes::Bytes::copy_from_slice(octets));
        }
    }
    let meta = meta(raw.len());
    let sources = EmailSources {
        meta: &meta,
        header: Some(&header),
        fast_view: Some(&prepared.email.fast_view),
        structure: Some(&stored),
        bodies: Some(&bodies),
        full: None,
    };
    let rendered = render_unbounded(properties, body_properties, options, &sources);
    let rendered = Value::Object(rendered);
    for property in properties {
        let key = property.name();
        assert_eq!(
            rendered.get(key),
            full.get(key),
            "stored level differs for {key}"
        );
    }
}

/// Renders `NAME.eml` with every property and compares with `NAME.json`.
/// `UPDATE_GOLDEN=1` rewrites the expected file instead (check it by hand).
fn check(name: &str) {
    let dir = golden_dir();
    let raw = std::fs::read(dir.join(format!("{name}.eml"))).expect("fixture exists");
    let properties = all_properties();
    let got = render(&raw, &properties, &all_body_properties(), &FETCH_ALL);
    check_header_level(&raw, &properties, &got);
    check_stored_level(&raw, &properties, &all_body_properties(), &FETCH_ALL, &got);
    // Text and HTML values only, truncated; the default body properties.
    let some = BodyOptions {
        flags: BodyValueFlags {
            fetch_text: true,
            fetch_html: true,
            fetch_all: false,
        },
        max_body_value_bytes: 100,
    };
    let defaults = BodyProperty::default_list();
    let truncated = render(&raw, &properties, &defaults, &some);
    check_stored_level(&raw, &properties, &defaults, &some, &truncated);
    // Every leaf part's blob resolves to exactly `size` octets.
    let full = MessageParser::default().parse(&raw).expect("parses");
    check_blobs(&full, &got["bodyStructure"]);
    let got = compact_lists(got);
    let expected_path = dir.join(format!("{name}.json"));
    let pretty = serde_json::to_string_pretty(&got).expect("serialises") + "\n";
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&expected_path, &pretty).expect("writes golden file");
        return;
    }
    let expected = std::fs::read_to_string(&expected_path)
        .unwrap_or_else(|_| panic!("{name}.json missing; run with UPDATE_GOLDEN=1 and review it"));
    let expected: Value = serde_json::from_str(&expected).expect("golden file is JSON");
    assert!(
        expected == got,
        "{name}: rendering differs from {name}.json:\n{pretty}"
    );
}

/// Replaces each textBody/htmlBody/attachments entry by its partId after
/// asserting it equals the bodyStructure node with that partId, so the
/// golden files stay short enough to review by hand.
fn compact_lists(mut got: Value) -> Value {
    fn node<'v>(tree: &'v Value, part_id: &str) -> Option<&'v Value> {
        if tree["partId"].as_str() == Some(part_id) {
            return Some(tree);
        }
        tree["subParts"]
            .as_array()?
            .iter()
            .find_map(|child| node(child, part_id))
    }
    let tree = got["bodyStructure"].clone();
    for key in ["textBody", "htmlBody", "attachments"] {
        let ids: Vec<Value> = got[key]
            .as_array()
            .expect("a list")
            .iter()
            .map(|part| {
                let part_id = part["partId"].as_str().expect("list parts are leaves");
                let mut in_tree = node(&tree, part_id)
                    .expect("list part is in the tree")
                    .clone();
                in_tree["subParts"] = Value::Null;
                assert_eq!(part, &in_tree, "{key} entry {part_id}");
                Value::String(part_id.to_string())
            })
            .collect();
        got[key] = Value::Array(ids);
    }
    got
}

fn check_blobs(message: &mail_parser::Message<'_>, part: &Value) {
    if let Some(children) = part["subParts"].as_array() {
        assert!(part["partId"].is_null());
        for child in children {
            check_blobs(message, child);
        }
        return;
    }
    let part_id = part["partId"].as_str().expect("leaf parts have a partId");
    let content = body::part_content(message, part_id).expect("part content resolves");
    assert_eq!(
        Some(content.bytes.len() as u64),
        part["size"].as_u64(),
        "size of part {part_id}"
    );
    assert_eq!(Some(content.content_type.as_str()), part["type"].as_str());
}

macro_rules! golden {
        ($($test:ident => $name:literal,)+) => {
            $(
                #[test]
                fn $test() {
                    check($name);
                }
            )+

            /// Every fixture on disk has a test above.
            #[test]
            fn every_fixture_is_checked() {
                let listed = [$($name),+];
                let mut on_disk: Vec<String> = std::fs::read_dir(golden_dir())
                    .expect("golden dir")
                    .filter_map(|entry| {
                        let name = entry.ok()?.file_name().into_string().ok()?;
                        name.strip_suffix(".eml").map(str::to_string)
                    })
                    .collect();
                on_disk.sort();
                let mut listed: Vec<String> = listed.iter().map(|s| s.to_string()).collect();
                listed.sort();
                assert_eq!(on_disk, listed);
            }
        };
    }

golden! {
    golden_address_edge_cases => "address_edge_cases",
    golden_address_groups => "address_groups",
    golden_alternative => "alternative",
    golden_alternative_html_only => "alternative_html_only",
    golden_alternative_three_way => "alternative_three_way",
    golden_attachment_disposition_on_text => "attachment_disposition_on_text",
    golden_base64_malformed => "base64_malformed",
    golden_content_headers => "content_headers",
    golden_content_type_defaults => "content_type_defaults",
    golden_empty_body => "empty_body",
    golden_encoded_word_in_quoted_string => "encoded_word_in_quoted_string",
    golden_encoded_word_misplaced => "encoded_word_misplaced",
    golden_encoded_word_split_char => "encoded_word_split_char",
    golden_encoded_word_unknown_charset => "encoded_word_unknown_charset",
    golden_encoded_words_adjacent => "encoded_words_adjacent",
    golden_folded_headers_lf => "folded_headers_lf",
    golden_header_name_case => "header_name_case",
    golden_header_parser_overrun => "header_parser_overrun",
    golden_headers_only => "headers_only",
    golden_html_only => "html_only",
    golden_html_truncation_source => "html_truncation_source",
    golden_inline_image_in_mixed => "inline_image_in_mixed",
    golden_invalid_dates => "invalid_dates",
    golden_legacy_gb2312_base64 => "legacy_gb2312_base64",
    golden_legacy_iso2022jp => "legacy_iso2022jp",
    golden_legacy_koi8r_qp => "legacy_koi8r_qp",
    golden_legacy_windows1252_8bit => "legacy_windows1252_8bit",
    golden_list_headers => "list_headers",
    golden_message_ids => "message_ids",
    golden_message_rfc822_attachment => "message_rfc822_attachment",
    golden_message_rfc822_base64 => "message_rfc822_base64",
    golden_mislabelled_us_ascii => "mislabelled_us_ascii",
    golden_mixed_with_attachment => "mixed_with_attachment",
    golden_multipart_boundary_not_found => "multipart_boundary_not_found",
    golden_multipart_digest => "multipart_digest",
    golden_multipart_missing_boundary => "multipart_missing_boundary",
    golden_multipart_missing_end_boundary => "multipart_missing_end_boundary",
    golden_multiple_instances => "multiple_instances",
    golden_nested_multiparts => "nested_multiparts",
    golden_obsolete_zones => "obsolete_zones",
    golden_plain_ascii => "plain_ascii",
    golden_quoted_printable_body => "quoted_printable_body",
    golden_raw_8bit_latin1_header => "raw_8bit_latin1_header",
    golden_raw_utf8_headers => "raw_utf8_headers",
    golden_related_inline_image => "related_inline_image",
    golden_rfc2047_parameter_name => "rfc2047_parameter_name",
    golden_rfc2231_filename_continuation => "rfc2231_filename_continuation",
    golden_rfc8621_example_structure => "rfc8621_example_structure",
    golden_text_attachment_csv => "text_attachment_csv",
    golden_unknown_and_invalid_charset => "unknown_and_invalid_charset",
    golden_unknown_transfer_encoding => "unknown_transfer_encoding",
    golden_year_102 => "year_102",
}

#[test]
fn metadata_and_missing_sources() {
    let raw = b"Subject: hi\r\n\r\nbody\r\n";
    let properties: Vec<EmailProperty> = [
        "id",
        "blobId",
        "threadId",
        "mailboxIds",
        "keywords",
        "size",
        "receivedAt",
        "bodyValues",
    ]
    .into_iter()
    .map(|p| EmailProperty::parse(p).expect(p))
    .collect();
    let meta = meta(raw.len());
    let sources = EmailSources::metadata(&meta);
    let got = render_unbounded(&properties, &[], &BodyOptions::default(), &sources);
    assert_eq!(
        Value::Object(got),
        json!({
            "id": "e42",
            "blobId": "ab".repeat(32),
            "threadId": "t7",
            "mailboxIds": {"m3": true, "m5": true},
            "keywords": {"$seen": true, "$flagged": true},
            "size": raw.len(),
            "receivedAt": "2024-01-02T03:04:05Z",
            "bodyValues": {},
        })
    );
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(golden_dir().join(format!("{name}.eml"))).expect("fixture exists")
}

fn properties(names: &[&str]) -> Vec<EmailProperty> {
    names
        .iter()
        .map(|p| EmailProperty::parse(p).expect(p))
        .collect()
}

fn body_properties(names: &[&str]) -> Vec<BodyProperty> {
    names
        .iter()
        .map(|p| BodyProperty::parse(p).expect(p))
        .collect()
}

#[test]
fn fetch_flags_select_body_values() {
    let raw = fixture("alternative_three_way");
    let keys = |flags: BodyValueFlags| {
        let options = BodyOptions {
            flags,
            max_body_value_bytes: 0,
        };
        let got = render(&raw, &properties(&["bodyValues"]), &[], &options);
        got["bodyValues"]
            .as_object()
            .expect("object")
            .keys()
            .cloned()
            .collect::<Vec<_>>()
    };
    let none = BodyValueFlags::default();
    assert_eq!(keys(none), Vec::<String>::new());
    assert_eq!(
        keys(BodyValueFlags {
            fetch_text: true,
            ..none
        }),
        ["1"]
    );
    assert_eq!(
        keys(BodyValueFlags {
            fetch_html: true,
            ..none
        }),
        ["3"]
    );
    assert_eq!(
        keys(BodyValueFlags {
            fetch_text: true,
            fetch_html: true,
            ..none
        }),
        ["1", "3"]
    );
    assert_eq!(
        keys(BodyValueFlags {
            fetch_all: true,
            ..none
        }),
        ["1", "3", "4", "5"]
    );
    // Only text/* parts: the image of an HTML-only body is not a body value.
    let raw = fixture("inline_image_in_mixed");
    let options = BodyOptions {
        flags: BodyValueFlags {
            fetch_text: true,
            ..none
        },
        max_body_value_bytes: 0,
    };
    let got = render(
        &raw,
        &properties(&["bodyValues", "textBody"]),
        &body_properties(&["partId", "type"]),
        &options,
    );
    assert_eq!(
        got,
        json!({
            "bodyValues": {
                "1": {"value": "Before the picture.", "isEncodingProblem": false, "isTruncated": false},
                "3": {"value": "After the picture.", "isEncodingProblem": false, "isTruncated": false},
            },
            "textBody": [
                {"partId": "1", "type": "text/plain"},
                {"partId": "2", "type": "image/png"},
                {"partId": "3", "type": "text/plain"},
            ],
        })
    );
}

#[test]
fn max_body_value_bytes_cuts_on_characters_and_outside_tags() {
    let raw = fixture("html_truncation_source");
    let values = |max| {
        let options = BodyOptions {
            flags: BodyValueFlags {
                fetch_all: true,
                ..BodyValueFlags::default()
            },
            max_body_value_bytes: max,
        };
        render(&raw, &properties(&["bodyValues"]), &[], &options)["bodyValues"].clone()
    };
    // "Ü" is two octets: 2 bytes hold it, 1 byte does not.
    assert_eq!(values(1)["1"]["value"], "");
    assert_eq!(values(2)["1"]["value"], "Ü");
    assert_eq!(values(2)["1"]["isTruncated"], true);
    assert_eq!(values(3)["1"]["value"], "Ün");
    // `<p>Ünïcödé ` is 15 octets; the cut at 30 falls inside `<a href=…>`.
    assert_eq!(values(30)["2"]["value"], "<p>Ünïcödé ");
    assert_eq!(values(30)["2"]["isTruncated"], true);
    assert_eq!(values(3)["2"]["value"], "<p>");
    assert_eq!(values(2)["2"]["value"], "");
    assert_eq!(values(1000)["2"]["isTruncated"], false);
    assert_eq!(values(47)["1"]["isTruncated"], false);
}

#[test]
fn body_properties_are_exactly_the_requested_ones() {
    let raw = fixture("nested_multiparts");
    let got = render(
        &raw,
        &properties(&["bodyStructure", "attachments"]),
        &BodyProperty::default_list(),
        &FETCH_ALL,
    );
    // Without `subParts` in bodyProperties a multipart part still carries
    // its subParts (RFC 8621 §4.1.4: the full structure); a leaf part has
    // only the requested properties.
    let structure = &got["bodyStructure"];
    assert_eq!(structure["type"], "multipart/mixed");
    assert_eq!(structure["partId"], Value::Null);
    let types = |parts: &Value| -> Vec<String> {
        parts
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["type"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        types(&structure["subParts"]),
        ["multipart/alternative", "text/plain"]
    );
    let alternative = &structure["subParts"][0];
    assert_eq!(
        types(&alternative["subParts"]),
        ["text/plain", "multipart/related"]
    );
    assert_eq!(
        types(&alternative["subParts"][1]["subParts"]),
        ["text/html", "image/gif"]
    );
    // Leaves: the ten default properties, no subParts key.
    let leaf = &alternative["subParts"][0];
    assert_eq!(leaf.as_object().unwrap().len(), 10, "{leaf}");
    assert!(leaf.get("subParts").is_none());
    assert_eq!(leaf["partId"], "2");
    let got = render(
        &raw,
        &properties(&["bodyStructure"]),
        &body_properties(&["type", "subParts"]),
        &FETCH_ALL,
    );
    assert_eq!(
        got["bodyStructure"],
        json!({"type": "multipart/mixed", "subParts": [
            {"type": "multipart/alternative", "subParts": [
                {"type": "text/plain", "subParts": null},
                {"type": "multipart/related", "subParts": [
                    {"type": "text/html", "subParts": null},
                    {"type": "image/gif", "subParts": null},
                ]},
            ]},
            {"type": "text/plain", "subParts": null},
        ]})
    );
}

#[test]
fn header_level_and_full_level_agree_and_missing_sources_are_null() {
    let raw = fixture("address_groups");
    let header = HeaderFields::parse(header_block(&raw));
    let meta = meta(raw.len());
    let sources = EmailSources {
        header: Some(&header),
        ..EmailSources::metadata(&meta)
    };
    let got = render_unbounded(
        &properties(&["subject", "header:Cc:asGroupedAddresses"]),
        &[],
        &BodyOptions::default(),
        &sources,
    );
    assert_eq!(
        Value::Object(got),
        json!({
            "subject": "Groups",
            "header:Cc:asGroupedAddresses": [{"name": "undisclosed-recipients", "addresses": []}],
        })
    );
}

#[test]
fn part_content_decodes_and_rejects_multiparts_and_unknown_ids() {
    let raw = fixture("mixed_with_attachment");
    let message = MessageParser::default().parse(&raw[..]).expect("parses");
    let content = body::part_content(&message, "2").expect("part 2");
    assert_eq!(content.bytes, b"%PDF-1.4\n%fake pdf for a test\n");
    assert_eq!(content.content_type, "application/pdf");
    assert_eq!(content.name.as_deref(), Some("report.pdf"));
    assert!(
        body::part_content(&message, "0").is_none(),
        "multipart has no blob"
    );
    assert!(body::part_content(&message, "02").is_none());
    assert!(body::part_content(&message, "9").is_none());
    assert!(body::part_content(&message, "x").is_none());
    let raw = fixture("legacy_gb2312_base64");
    let message = MessageParser::default().parse(&raw[..]).expect("parses");
    let content = body::part_content(&message, "0").expect("root leaf");
    assert_eq!(content.bytes.len(), 26);
    assert_eq!(content.content_type, "text/plain");
}

#[test]
fn text_body_texts_match_body_values() {
    let raw = fixture("mislabelled_us_ascii");
    let message = MessageParser::default().parse(&raw[..]).expect("parses");
    let texts: Vec<String> = body::text_body_texts(&message)
        .into_iter()
        .map(|t| t.text)
        .collect();
    assert_eq!(
        texts,
        [
            "UTF-8 bytes labelled US-ASCII: grüße.",
            "No charset, Latin-1 bytes: café.",
            "Pure ASCII is fine.",
        ]
    );
    let raw = fixture("alternative");
    let message = MessageParser::default().parse(&raw[..]).expect("parses");
    assert_eq!(
        body::text_body_texts(&message),
        [body::BodyText {
            html: false,
            text: "Plain version – café.".into()
        }]
    );
    assert!(!body::has_attachment(
        &MessageParser::default()
            .parse(&fixture("inline_image_in_mixed")[..])
            .expect("parses")
    ));
    assert!(!body::has_attachment(
        &MessageParser::default()
            .parse(&fixture("related_inline_image")[..])
            .expect("parses")
    ));
    assert!(body::has_attachment(
        &MessageParser::default()
            .parse(&fixture("mixed_with_attachment")[..])
            .expect("parses")
    ));
}

/// Splits a corpus file into raw messages: `.eml` files may start with an
/// mbox `From ` envelope line; `.mbox` files hold many messages.
fn corpus_messages(path: &Path, data: &[u8]) -> Vec<Vec<u8>> {
    let is_envelope = |line: &[u8]| line.starts_with(b"From ");
    if path.extension().is_some_and(|e| e == "mbox") {
        let mut messages = Vec::new();
        let mut current: Vec<u8> = Vec::new();
        for line in data.split_inclusive(|&b| b == b'\n') {
            if is_envelope(line) {
                if !current.is_empty() {
                    messages.push(std::mem::take(&mut current));
                }
                continue;
            }
            current.extend_from_slice(line);
        }
        if !current.is_empty() {
            messages.push(current);
        }
        messages
    } else {
        let data = match data.split_inclusive(|&b| b == b'\n').next() {
            Some(first) if is_envelope(first) => &data[first.len()..],
            _ => data,
        };
        vec![data.to_vec()]
    }
}

fn corpus_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            corpus_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "eml" || e == "mbox") {
            out.push(path);
        }
    }
}

/// Every message of the shared corpus renders every property without
/// panicking, every leaf part's content resolves to `size` octets, and
/// the header properties rendered from the stored header block, and
/// every property rendered from the stored part tree and part ranges,
/// equal those rendered from the whole message.
/// Skipped when the corpus is not there.
#[test]
fn corpus_renders_without_panics() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus");
    let mut files = Vec::new();
    corpus_files(&root, &mut files);
    if files.is_empty() {
        eprintln!("corpus not found at {}: skipped", root.display());
        return;
    }
    files.sort();
    let properties = all_properties();
    let body = all_body_properties();
    let threads = std::thread::available_parallelism().map_or(4, |n| n.get());
    let chunk = files.len().div_ceil(threads);
    let (messages, failures) = std::thread::scope(|scope| {
        let handles: Vec<_> = files
            .chunks(chunk)
            .map(|files| {
                let (properties, body) = (&properties, &body);
                scope.spawn(move || {
                    let mut count = 0;
                    let mut failures = Vec::new();
                    for path in files {
                        let data = std::fs::read(path).expect("readable corpus file");
                        for (i, raw) in corpus_messages(path, &data).into_iter().enumerate() {
                            let Some(message) = MessageParser::default().parse(&raw[..]) else {
                                continue;
                            };
                            count += 1;
                            let outcome =
                                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                    let got = render(&raw, properties, body, &FETCH_ALL);
                                    check_blobs(&message, &got["bodyStructure"]);
                                    check_header_level(&raw, properties, &got);
                                    check_stored_level(&raw, properties, body, &FETCH_ALL, &got);
                                    compact_lists(got);
                                }));
                            if outcome.is_err() {
                                failures.push(format!("{} #{i}", path.display()));
                            }
                        }
                    }
                    (count, failures)
                })
            })
            .collect();
        handles
            .into_iter()
            .fold((0, Vec::new()), |(count, mut failures), handle| {
                let (n, f) = handle.join().expect("worker finished");
                failures.extend(f);
                (count + n, failures)
            })
    });
    assert!(messages > 10_000, "only {messages} corpus messages parsed");
    assert!(
        failures.is_empty(),
        "{} messages failed: {failures:#?}",
        failures.len()
    );
}

#[test]
fn rendering_charges_each_property_and_each_field_value_before_rendering_it() {
    let mut block = String::from("Subject: many\r\n");
    for n in 0..100 {
        block.push_str(&format!("X-Line: {n}\r\n"));
    }
    block.push_str("\r\n");
    let header = HeaderFields::parse(block.into_bytes());
    let meta = meta(0);
    let sources = EmailSources {
        header: Some(&header),
        ..EmailSources::metadata(&meta)
    };
    let render = |names: &[&str], units: u64| {
        let meter = WorkMeter::new(units);
        let got = render_email(
            &properties(names),
            &[],
            &BodyOptions::default(),
            &sources,
            &meter,
        );
        (got.map(|object| object.len()), meter.left())
    };
    // subject 1, id 1, header:X-Line 1, header:X-Line:all 1 + 100, headers 1 + 101.
    let names = [
        "id",
        "subject",
        "header:X-Line",
        "header:X-Line:all",
        "headers",
    ];
    assert_eq!(render(&names, 206), (Ok(5), 0));
    assert_eq!(render(&names, 205), (Err(WorkExceeded), 0));
    assert_eq!(render(&names[..3], 3), (Ok(3), 0));
    assert_eq!(render(&names[..4], 103), (Err(WorkExceeded), 0));
}

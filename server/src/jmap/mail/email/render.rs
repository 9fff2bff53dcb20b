//! Rendering Email objects (RFC 8621 §4.1) from the sources the read-level
//! planner loaded. The renderer does no I/O: a source the plan did not load
//! renders as `null` (and trips a debug assertion, as it is a planner bug).

use std::cell::OnceCell;

use serde_json::{Map, Value};

use super::body::{self, BodyPart};
use super::header::{self, header_value};
use super::property::{BodyProperty, EmailProperty, HeaderForm, HeaderProperty};
use crate::jmap::ids;
use crate::mail::fast_view::FastView;
use crate::mail::read_level::BodyValueFlags;
use crate::store::EmailMeta;

/// What was loaded for one email. A source the plan did not ask for is `None`;
/// the renderer never reads anything itself.
pub struct EmailSources<'a> {
    pub meta: &'a EmailMeta,
    /// The stored header block parsed without a body (header read level).
    pub header: Option<&'a mail_parser::Message<'a>>,
    /// The projection row (fast-view read level).
    pub fast_view: Option<&'a FastView>,
    /// The whole message, parsed (full read level).
    pub full: Option<&'a mail_parser::Message<'a>>,
}

/// Email/get arguments that shape body values (RFC 8621 §4.2).
#[derive(Debug, Clone, Copy, Default)]
pub struct BodyOptions {
    pub flags: BodyValueFlags,
    /// `maxBodyValueBytes`; 0 means no limit.
    pub max_body_value_bytes: usize,
}

/// Renders one Email object with exactly the requested properties: one key per
/// property, named by [`EmailProperty::name`]. Shapes follow RFC 8621 §4.1:
/// ids as in [`crate::jmap::ids`], `receivedAt` as a UTC RFC 3339 date
/// (`2024-01-02T03:04:05Z`), `size` in octets, header properties per
/// §4.1.2–§4.1.3 from `full` (else `header`), `preview`/`hasAttachment` from
/// the fast view (under `--fast-view off`, when only `full` is loaded, from
/// [`FastView::compute`], the projection's own code), body properties
/// (§4.1.4) from `full`; `bodyValues` is `{}` when no fetch flag is set.
pub fn render_email(
    properties: &[EmailProperty],
    body_properties: &[BodyProperty],
    options: &BodyOptions,
    sources: &EmailSources<'_>,
) -> Map<String, Value> {
    use EmailProperty::*;
    use HeaderForm::{Addresses, Date, MessageIds, Text};
    let meta = sources.meta;
    let tree_cell = OnceCell::new();
    let partition_cell = OnceCell::new();
    let body = || {
        let full = sources.full?;
        let tree = tree_cell.get_or_init(|| BodyPart::tree(full)).as_ref()?;
        let lists = partition_cell.get_or_init(|| tree.partition());
        Some((full, tree, lists))
    };
    let fast_view_cell = OnceCell::new();
    let fast_view = || match (sources.fast_view, sources.full) {
        (Some(view), _) => Some(view),
        (None, Some(full)) => Some(fast_view_cell.get_or_init(|| FastView::compute(full))),
        (None, None) => None,
    };
    let header = |name: &str, form| {
        render_header(
            sources,
            &HeaderProperty {
                key: String::new(),
                name: name.to_string(),
                form,
                all: false,
            },
        )
    };

    let list =
        |property: &EmailProperty,
         pick: for<'t, 'b> fn(&'t body::Partition<'t, 'b>) -> &'t [&'t BodyPart<'b>]| {
            body().map_or_else(
                || missing(property),
                |(full, _, lists)| {
                    Value::Array(
                        pick(lists)
                            .iter()
                            .map(|part| {
                                part.render(body_properties, &full.raw_message, &meta.blob_id)
                            })
                            .collect(),
                    )
                },
            )
        };

    let mut object = Map::new();
    for property in properties {
        let value = match property {
            Id => Value::String(ids::email_id(meta.id)),
            BlobId => Value::String(meta.blob_id.clone()),
            ThreadId => Value::String(ids::thread_id(meta.thread_id)),
            MailboxIds => Value::Object(
                meta.mailbox_ids
                    .iter()
                    .map(|&id| (ids::mailbox_id(id), Value::Bool(true)))
                    .collect(),
            ),
            Keywords => Value::Object(
                meta.keywords
                    .iter()
                    .map(|keyword| (keyword.to_ascii_lowercase(), Value::Bool(true)))
                    .collect(),
            ),
            Size => Value::from(meta.size),
            ReceivedAt => Value::String(utc_date(meta.received_at)),
            // RFC 8621 §4.1.3: each is identical to a `header:…:as…` property.
            MessageId => header("message-id", MessageIds),
            InReplyTo => header("in-reply-to", MessageIds),
            References => header("references", MessageIds),
            Sender => header("sender", Addresses),
            From => header("from", Addresses),
            To => header("to", Addresses),
            Cc => header("cc", Addresses),
            Bcc => header("bcc", Addresses),
            ReplyTo => header("reply-to", Addresses),
            Subject => header("subject", Text),
            SentAt => header("date", Date),
            Headers => match sources
                .full
                .or(sources.header)
                .and_then(|m| m.parts.first().map(|p| (m, p)))
            {
                Some((message, root)) => header::header_list(&root.headers, &message.raw_message),
                None => missing(property),
            },
            Header(header) => render_header(sources, header),
            HasAttachment => fast_view().map_or_else(
                || missing(property),
                |view| Value::Bool(view.has_attachment),
            ),
            Preview => fast_view().map_or_else(
                || missing(property),
                |view| Value::String(view.preview.clone()),
            ),
            BodyValues if !flags_any(options.flags) => Value::Object(Map::new()),
            BodyValues => body().map_or_else(
                || missing(property),
                |(full, tree, lists)| {
                    body::body_values(
                        tree,
                        lists,
                        &full.raw_message,
                        options.flags,
                        options.max_body_value_bytes,
                    )
                },
            ),
            BodyStructure => body().map_or_else(
                || missing(property),
                |(full, tree, _)| tree.render(body_properties, &full.raw_message, &meta.blob_id),
            ),
            TextBody => list(property, |lists| &lists.text_body),
            HtmlBody => list(property, |lists| &lists.html_body),
            Attachments => list(property, |lists| &lists.attachments),
        };
        object.insert(property.name().to_string(), value);
    }
    object
}

/// The value of a property whose source the planner did not load: a planner
/// bug, so it asserts in debug builds; `null` otherwise.
fn missing(property: &EmailProperty) -> Value {
    debug_assert!(false, "the read plan did not load the source of {property}");
    Value::Null
}

fn flags_any(flags: BodyValueFlags) -> bool {
    flags.fetch_text || flags.fetch_html || flags.fetch_all
}

/// A header property (RFC 8621 §4.1.2, §4.1.3) of the message's top-level header.
fn render_header(sources: &EmailSources<'_>, property: &HeaderProperty) -> Value {
    match sources
        .full
        .or(sources.header)
        .and_then(|m| m.parts.first().map(|p| (m, p)))
    {
        Some((message, root)) => header_value(&root.headers, &message.raw_message, property),
        None => {
            debug_assert!(
                false,
                "the read plan did not load the header for {}",
                property.key
            );
            Value::Null
        }
    }
}

/// A UTCDate (RFC 8620 §1.4): `2024-01-02T03:04:05Z`.
fn utc_date(seconds: i64) -> String {
    chrono::DateTime::from_timestamp(seconds, 0)
        .unwrap_or_default()
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use mail_parser::MessageParser;
    use serde_json::json;

    use super::*;

    fn golden_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/golden")
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
            meta: &meta,
            header: None,
            fast_view: Some(&fast_view),
            full: Some(&full),
        };
        Value::Object(render_email(properties, body, options, &sources))
    }

    /// The stored header block: up to and including the first blank line.
    fn header_block(raw: &[u8]) -> &[u8] {
        let mut start = 0;
        for line in raw.split_inclusive(|&b| b == b'\n') {
            start += line.len();
            if line == b"\n" || line == b"\r\n" {
                return &raw[..start];
            }
        }
        raw
    }

    /// Header properties rendered from the header block alone must equal
    /// those rendered from the full message (the two read levels agree).
    fn check_header_level(raw: &[u8], properties: &[EmailProperty], full: &Value) {
        let block = header_block(raw);
        let header = MessageParser::default()
            .parse_headers(block)
            .expect("header block parses");
        let meta = meta(raw.len());
        let sources = EmailSources {
            meta: &meta,
            header: Some(&header),
            fast_view: None,
            full: None,
        };
        let header_properties: Vec<EmailProperty> = properties
            .iter()
            .filter(|property| {
                use EmailProperty::*;
                match property {
                    MessageId | InReplyTo | References | Sender | From | To | Cc | Bcc
                    | ReplyTo | Subject | SentAt | Headers | Header(_) => true,
                    Id | BlobId | ThreadId | MailboxIds | Keywords | Size | ReceivedAt
                    | BodyStructure | BodyValues | TextBody | HtmlBody | Attachments
                    | HasAttachment | Preview => false,
                }
            })
            .cloned()
            .collect();
        let rendered = render_email(&header_properties, &[], &BodyOptions::default(), &sources);
        for (key, value) in rendered {
            assert_eq!(
                Some(&value),
                full.get(&key),
                "header level differs for {key}"
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
        let expected = std::fs::read_to_string(&expected_path).unwrap_or_else(|_| {
            panic!("{name}.json missing; run with UPDATE_GOLDEN=1 and review it")
        });
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
            tree["subParts"].as_array()?.iter().find_map(|child| node(child, part_id))
        }
        let tree = got["bodyStructure"].clone();
        for key in ["textBody", "htmlBody", "attachments"] {
            let ids: Vec<Value> = got[key]
                .as_array()
                .expect("a list")
                .iter()
                .map(|part| {
                    let part_id = part["partId"].as_str().expect("list parts are leaves");
                    let mut in_tree = node(&tree, part_id).expect("list part is in the tree").clone();
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
        golden_plain_ascii => "plain_ascii",
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
        let sources = EmailSources {
            meta: &meta,
            header: None,
            fast_view: None,
            full: None,
        };
        let got = render_email(&properties, &[], &BodyOptions::default(), &sources);
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
}

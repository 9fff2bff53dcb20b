//! Message ingest and rendering: any octets go through
//! `fastview::mail::ingest::prepare` (one parse, projection, index), then are
//! rendered with every Email property at the full level and, for the header
//! properties, at the header level from the stored header block.
//!
//! Checked beyond "no panic": the projection stored at ingest equals the one
//! computed at read time, the header level and the full level agree, the
//! response is JSON any client parses (serde_json's recursion limit), and
//! every leaf part's content resolves.

#![no_main]

use fastview::jmap::mail::email::render::{BodyOptions, EmailSources, render_email};
use fastview::mail::body::part_content;
use fastview::mail::fast_view::FastView;
use fastview::mail::ingest::prepare;
use fastview::mail::message::{parse_header_block, parse_message};
use fastview::mail::property::{BodyProperty, EmailProperty};
use fastview::mail::read_level::BodyValueFlags;
use fastview::store::EmailMeta;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// Every Email property, plus header forms over known and unknown fields.
fn all_properties() -> Vec<EmailProperty> {
    let mut properties = EmailProperty::default_list();
    properties.extend([EmailProperty::Headers, EmailProperty::BodyStructure]);
    for name in [
        "header:Subject:asText:all",
        "header:From:asGroupedAddresses",
        "header:To:asAddresses:all",
        "header:Date:asDate:all",
        "header:Message-ID:asMessageIds:all",
        "header:List-Unsubscribe:asURLs",
        "header:X-Test",
        "header:X-Test:asText",
        "header:X-Test:asAddresses",
        "header:X-Test:asGroupedAddresses",
        "header:X-Test:asMessageIds",
        "header:X-Test:asDate",
        "header:X-Test:asURLs:all",
    ] {
        properties.extend(EmailProperty::parse(name));
    }
    properties
}

/// Every EmailBodyPart property.
fn all_body_properties() -> Vec<BodyProperty> {
    let mut properties = BodyProperty::default_list();
    properties.extend([BodyProperty::Headers, BodyProperty::SubParts]);
    properties.extend(BodyProperty::parse("header:Content-Type:asText"));
    properties
}

fn is_header_property(property: &EmailProperty) -> bool {
    use EmailProperty::*;
    match property {
        MessageId | InReplyTo | References | Sender | From | To | Cc | Bcc | ReplyTo | Subject
        | SentAt | Headers | Header(_) => true,
        Id | BlobId | ThreadId | MailboxIds | Keywords | Size | ReceivedAt | BodyStructure
        | BodyValues | TextBody | HtmlBody | Attachments | HasAttachment | Preview => false,
    }
}

/// The partIds of the leaf parts of a rendered bodyStructure.
fn part_ids(part: &Value, out: &mut Vec<String>) {
    match part.get("subParts").and_then(Value::as_array) {
        Some(children) => children.iter().for_each(|child| part_ids(child, out)),
        None => out.extend(
            part.get("partId")
                .and_then(Value::as_str)
                .map(str::to_string),
        ),
    }
}

/// libfuzzer-sys installs a panic hook that aborts on every panic, even one
/// caught by `catch_unwind`. Fastview contains mail-parser's panics
/// (`mail::message`), so the default hook is put back: a contained panic is
/// printed and the run goes on, while a panic that escapes the target still
/// aborts (libfuzzer-sys checks the target with `catch_unwind`).
static RESTORE_PANIC_HOOK: std::sync::Once = std::sync::Once::new();

fuzz_target!(|data: &[u8]| {
    RESTORE_PANIC_HOOK.call_once(|| drop(std::panic::take_hook()));
    let prepared = prepare(data.to_vec(), vec![1], vec!["$seen".into()], |_| 0);
    let raw = &prepared.raw;
    let email = &prepared.email;
    assert_eq!(email.size as usize, raw.len());
    let meta = EmailMeta {
        id: 1,
        blob_id: email.blob_id.clone(),
        thread_id: 1,
        size: email.size,
        received_at: email.received_at,
        mailbox_ids: vec![1],
        keywords: vec!["$seen".into()],
    };
    let full = parse_message(raw);
    // The projection is the same at ingest and at read time.
    assert_eq!(FastView::compute(&full), email.fast_view);
    let properties = all_properties();
    let options = BodyOptions {
        flags: BodyValueFlags {
            fetch_text: false,
            fetch_html: false,
            fetch_all: true,
        },
        max_body_value_bytes: 0,
    };
    let rendered = render_email(
        &properties,
        &all_body_properties(),
        &options,
        &EmailSources {
            meta: &meta,
            header: None,
            fast_view: Some(&email.fast_view),
            full: Some(&full),
        },
    );
    // The header level (from the stored block) agrees with the full level.
    let header = parse_header_block(&email.header_block);
    let header_properties: Vec<EmailProperty> = properties
        .iter()
        .filter(|p| is_header_property(p))
        .cloned()
        .collect();
    let from_header = render_email(
        &header_properties,
        &[],
        &BodyOptions::default(),
        &EmailSources {
            meta: &meta,
            header: Some(&header),
            fast_view: None,
            full: None,
        },
    );
    for (key, value) in &from_header {
        assert_eq!(
            Some(value),
            rendered.get(key),
            "header level differs for {key}"
        );
    }
    // The response is JSON a client parses.
    let text = serde_json::to_string(&Value::Object(rendered.clone())).expect("serialises");
    let parsed: Value = serde_json::from_str(&text).expect("a client can parse the Email");
    assert_eq!(parsed, Value::Object(rendered.clone()));
    // Every leaf part's blob resolves to exactly its size.
    let mut ids = Vec::new();
    part_ids(&rendered["bodyStructure"], &mut ids);
    for id in ids {
        let content = part_content(&full, &id).expect("a leaf part's content resolves");
        let _ = content.bytes.len();
    }
});

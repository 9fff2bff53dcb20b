//! One header reader (RFC 8621 §4.1.3, §4.4): over the whole of
//! `../shared/corpus`, the keys ingest stores for each message — what
//! Email/query's `from`/`to`/`cc`/`bcc`/`subject` filters and
//! `from`/`to`/`subject`/`sentAt` sorts and threading read — equal the keys
//! derived from what Email/get renders for the same message, at the full
//! read level (the raw message) and at the header level (the stored header
//! block). The keys are derived here from the rendered JSON by the rules
//! documented on `EmailIndex`, not by ingest's code. Skipped without the
//! corpus unless `FASTVIEW_TEST_REQUIRE` names `corpus`.

use std::collections::BTreeMap;

use fastview::jmap::mail::email::render::{BodyOptions, EmailSources, render_email};
use fastview::mail::header::HeaderFields;
use fastview::mail::import_source::{SourceItem, walk};
use fastview::mail::ingest::prepare;
use fastview::mail::message::parse_message;
use fastview::mail::property::EmailProperty;
use fastview::mail::thread::base_subject;
use fastview::mail::work::WorkMeter;
use fastview::store::{EmailMeta, NewEmail};
use serde_json::{Map, Value};

use crate::support::corpus;

/// The Email/get properties the keys stand for.
const PROPERTIES: [&str; 12] = [
    "subject",
    "from",
    "to",
    "cc",
    "bcc",
    "sentAt",
    "messageId",
    "inReplyTo",
    "references",
    "header:Message-ID",
    "header:In-Reply-To",
    "header:References",
];

/// Named keys, each as its `Debug` text, in a fixed order.
type Keys = Vec<(&'static str, String)>;

/// The keys as ingest stored them.
fn stored_keys(email: &NewEmail) -> Keys {
    let index = &email.index;
    vec![
        ("subject", format!("{:?}", index.subject)),
        ("base_subject", format!("{:?}", index.base_subject)),
        ("from_sort", format!("{:?}", index.from_sort)),
        ("to_sort", format!("{:?}", index.to_sort)),
        ("from_text", format!("{:?}", index.from_text)),
        ("to_text", format!("{:?}", index.to_text)),
        ("cc_text", format!("{:?}", index.cc_text)),
        ("bcc_text", format!("{:?}", index.bcc_text)),
        ("sent_at", format!("{:?}", email.sent_at)),
        ("message_id", format!("{:?}", index.message_id)),
        ("referenced_ids", format!("{:?}", index.referenced_ids)),
    ]
}

/// The keys as `EmailIndex` documents them, from rendered Email properties.
fn rendered_keys(email: &Map<String, Value>) -> Keys {
    let subject = email["subject"].as_str().unwrap_or_default().to_lowercase();
    let (from_sort, from_text) = address_keys(&email["from"]);
    let (to_sort, to_text) = address_keys(&email["to"]);
    let (_, cc_text) = address_keys(&email["cc"]);
    let (_, bcc_text) = address_keys(&email["bcc"]);
    // RFC 8621 §4.1.2.6: RFC 3339; `-00:00` (local time unknown) counts as UTC.
    let sent_at = email["sentAt"].as_str().map(|date| {
        chrono::DateTime::parse_from_rfc3339(date)
            .unwrap_or_else(|error| panic!("sentAt {date:?} is not RFC 3339: {error}"))
            .timestamp()
    });
    let ids = |value: &Value| -> Vec<String> {
        value
            .as_array()
            .into_iter()
            .flatten()
            .map(|id| id.as_str().expect("a message id is a string").to_string())
            .collect()
    };

    // Threading's rule (EmailIndex::referenced_ids): the rendered ids, or,
    // where the field is not a msg-id list (rendered null), the
    // `local@domain` words of its raw value, angle brackets removed.
    let thread_ids = |property: &str, text: &str| -> Vec<String> {
        if !email[property].is_null() {
            return ids(&email[property]);
        }
        let text = email[text].as_str().unwrap_or_default();
        text.split_whitespace()
            .map(|w| {
                w.strip_prefix('<')
                    .and_then(|w| w.strip_suffix('>'))
                    .unwrap_or(w)
            })
            .filter(|w| {
                let forbidden = w.chars().any(|c| "\"<>(),;[]".contains(c));
                let at = w.matches('@').count() == 1 && !w.starts_with('@') && !w.ends_with('@');
                !forbidden && at
            })
            .map(str::to_string)
            .collect()
    };
    let message_id = thread_ids("messageId", "header:Message-ID")
        .into_iter()
        .next();
    let mut referenced_ids: Vec<String> = Vec::new();
    for id in thread_ids("inReplyTo", "header:In-Reply-To")
        .into_iter()
        .chain(thread_ids("references", "header:References"))
    {
        if !referenced_ids.contains(&id) {
            referenced_ids.push(id);
        }
    }
    vec![
        ("subject", format!("{subject:?}")),
        ("base_subject", format!("{:?}", base_subject(&subject))),
        ("from_sort", format!("{from_sort:?}")),
        ("to_sort", format!("{to_sort:?}")),
        ("from_text", format!("{from_text:?}")),
        ("to_text", format!("{to_text:?}")),
        ("cc_text", format!("{cc_text:?}")),
        ("bcc_text", format!("{bcc_text:?}")),
        ("sent_at", format!("{sent_at:?}")),
        ("message_id", format!("{message_id:?}")),
        ("referenced_ids", format!("{referenced_ids:?}")),
    ]
}

/// `(sort, text)` of a rendered EmailAddress list, lowercase: the first
/// address's name, else its email; every non-empty name and email, one a line.
fn address_keys(addresses: &Value) -> (String, String) {
    let mut sort = None;
    let mut text = String::new();
    for address in addresses.as_array().into_iter().flatten() {
        let name = address["name"].as_str().unwrap_or_default();
        let email = address["email"].as_str().unwrap_or_default();
        sort.get_or_insert_with(|| if name.is_empty() { email } else { name }.to_lowercase());
        for part in [name, email].into_iter().filter(|part| !part.is_empty()) {
            text.push_str(&part.to_lowercase());
            text.push('\n');
        }
    }
    (sort.unwrap_or_default(), text)
}

/// Renders the key properties through Email/get's renderer from the given
/// sources (the metadata is not among them).
fn render(
    header: Option<&HeaderFields>,
    full: Option<&mail_parser::Message<'_>>,
) -> Map<String, Value> {
    let properties: Vec<EmailProperty> = PROPERTIES
        .iter()
        .map(|p| EmailProperty::parse(p).expect(p))
        .collect();
    let meta = EmailMeta {
        id: 1,
        blob_id: String::new(),
        thread_id: 1,
        size: 0,
        received_at: 0,
        mailbox_ids: Vec::new(),
        keywords: Vec::new(),
    };
    let sources = EmailSources {
        meta: &meta,
        header,
        fast_view: None,
        structure: None,
        bodies: None,
        full,
    };
    let unbounded = WorkMeter::new(u64::MAX);
    render_email(
        &properties,
        &[],
        &BodyOptions::default(),
        &sources,
        &unbounded,
    )
    .expect("an unbounded meter")
}

/// One message's disagreements: `(key, stored, rendered)`.
fn disagreements(raw: &[u8]) -> Vec<(&'static str, String, String)> {
    let prepared = prepare(raw.to_vec(), Vec::new(), Vec::new(), |_| 0);
    let full = render(None, Some(&parse_message(raw)));
    let header = HeaderFields::parse(prepared.email.header_block.clone());
    let header_level = render(Some(&header), None);
    assert_eq!(full, header_level, "the two read levels render alike");
    stored_keys(&prepared.email)
        .into_iter()
        .zip(rendered_keys(&full))
        .filter(|((_, stored), (_, rendered))| stored != rendered)
        .map(|((key, stored), (_, rendered))| (key, stored, rendered))
        .collect()
}

#[test]
fn every_corpus_message_is_indexed_as_email_get_renders_it() {
    let Some(corpus) = corpus() else {
        return;
    };
    let messages: Vec<(String, Vec<u8>)> = walk(&[corpus])
        .filter_map(|item| match item {
            SourceItem::Message(message) => Some((message.origin, message.raw)),
            SourceItem::Skipped { .. } => None,
            SourceItem::Failed { origin, reason } => panic!("{origin}: {reason}"),
        })
        .collect();
    // 9,601 .eml files and 2,039 mbox messages, as the corpus README counts them.
    assert_eq!(messages.len(), 11_640);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let chunk = messages.len().div_ceil(threads);
    let found: Vec<(&str, &'static str, String, String)> = std::thread::scope(|scope| {
        let workers: Vec<_> = messages
            .chunks(chunk)
            .map(|messages| {
                scope.spawn(move || {
                    let mut found = Vec::new();
                    for (origin, raw) in messages {
                        for (key, stored, rendered) in disagreements(raw) {
                            found.push((origin.as_str(), key, stored, rendered));
                        }
                    }
                    found
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| worker.join().expect("worker finished"))
            .collect()
    });
    let mut per_key: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, key, _, _) in &found {
        *per_key.entry(key).or_default() += 1;
    }
    let mut emails: Vec<&str> = found.iter().map(|(origin, ..)| *origin).collect();
    emails.dedup();
    let examples: Vec<String> = found
        .iter()
        .take(30)
        .map(|(origin, key, stored, rendered)| {
            format!("{origin} {key}: stored {stored}, rendered {rendered}")
        })
        .collect();
    assert!(
        found.is_empty(),
        "{} of {} messages are indexed unlike Email/get renders them; per key {per_key:?}:\n{}",
        emails.len(),
        messages.len(),
        examples.join("\n")
    );
}

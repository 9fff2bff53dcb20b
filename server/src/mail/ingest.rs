//! Ingest: from raw bytes to a [`NewEmail`] ready for the store, with its
//! header block, fast-view projection row and query index computed from one
//! parse. Used by `fastview import`, `fastview seed`, `fastview demo` and
//! Email/import alike, so every path stores the same facts.

use mail_parser::{Address, HeaderValue, Message};

use super::fast_view::FastView;
use super::message::parse_message;
use super::thread::base_subject;
use crate::blob::blob_id_of;
use crate::store::{EmailIndex, NewEmail};

/// A message prepared for storage: its bytes (for the blob store) and its rows.
#[derive(Debug, Clone)]
pub struct PreparedEmail {
    pub raw: Vec<u8>,
    pub email: NewEmail,
}

/// Parses `raw` once and computes everything the store keeps about it.
/// Never fails: a message mail-parser cannot read at all (no header) is read
/// as one header-less `text/plain` part ([`parse_message`]), so it is stored
/// with an empty header block and served as well as it can be. `received_at`
/// picks receivedAt (unix seconds) given the parse.
pub fn prepare(
    raw: Vec<u8>,
    mailbox_ids: Vec<i64>,
    keywords: Vec<String>,
    received_at: impl FnOnce(Option<&Message<'_>>) -> i64,
) -> PreparedEmail {
    let blob_id = blob_id_of(&raw);
    let message = parse_message(&raw);
    let body_start = (message.root_part().offset_body as usize).min(raw.len());
    let fast_view = FastView::compute(&message);
    let index = index_of(&message, fast_view.has_attachment);
    let sent_at = message
        .date()
        .filter(|date| date.is_valid())
        .map(|date| date.to_timestamp());
    let header_block = raw[..body_start].to_vec();
    let received_at = received_at(Some(&message));
    let size = raw.len() as i64;
    let keywords = keywords
        .into_iter()
        .map(|k| k.to_ascii_lowercase())
        .collect();
    PreparedEmail {
        email: NewEmail {
            blob_id,
            size,
            received_at,
            sent_at,
            mailbox_ids,
            keywords,
            header_block,
            fast_view,
            index,
        },
        raw,
    }
}

fn ids_of(value: &HeaderValue<'_>) -> Vec<String> {
    match value {
        HeaderValue::Text(id) => vec![id.to_string()],
        HeaderValue::TextList(ids) => ids.iter().map(|id| id.to_string()).collect(),
        _ => Vec::new(),
    }
}

/// `(sort key, searchable text)` of an address header: the first address's
/// name (else email) and every name and email, lowercase, one per line.
fn address_keys(address: Option<&Address<'_>>) -> (String, String) {
    let Some(address) = address else {
        return (String::new(), String::new());
    };
    let sort = address
        .first()
        .and_then(|addr| addr.name().filter(|n| !n.is_empty()).or(addr.address()))
        .unwrap_or_default()
        .to_lowercase();
    let mut text = String::new();
    for addr in address.iter() {
        for part in [addr.name(), addr.address()].into_iter().flatten() {
            text.push_str(&part.to_lowercase());
            text.push('\n');
        }
    }
    (sort, text)
}

fn index_of(message: &Message<'_>, has_attachment: bool) -> EmailIndex {
    let subject = message.subject().unwrap_or_default();
    let (from_sort, from_text) = address_keys(message.from());
    let (to_sort, to_text) = address_keys(message.to());
    let (_, cc_text) = address_keys(message.cc());
    let (_, bcc_text) = address_keys(message.bcc());
    let mut referenced_ids = ids_of(message.in_reply_to());
    for id in ids_of(message.references()) {
        if !referenced_ids.contains(&id) {
            referenced_ids.push(id);
        }
    }
    EmailIndex {
        message_id: message.message_id().map(str::to_string),
        referenced_ids,
        base_subject: base_subject(subject),
        subject: subject.to_lowercase(),
        from_sort,
        to_sort,
        from_text,
        to_text,
        cc_text,
        bcc_text,
        has_attachment,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prepare_splits_header_block_and_indexes_the_message() {
        let raw = concat!(
            "From: Ann Example <ann@example.com>\r\n",
            "To: bob@example.org, \"Cy\" <cy@example.org>\r\n",
            "Subject: Re: [list] Plans\r\n",
            "Date: Tue, 1 Oct 2024 10:00:00 +0200\r\n",
            "Message-ID: <m2@example.com>\r\n",
            "In-Reply-To: <m1@example.com>\r\n",
            "References: <m0@example.com> <m1@example.com>\r\n",
            "\r\n",
            "Body text.\r\n"
        );
        let prepared = prepare(
            raw.as_bytes().to_vec(),
            vec![1],
            vec!["$Seen".into()],
            |_| 7,
        );
        let email = &prepared.email;
        assert_eq!(email.size, raw.len() as i64);
        assert_eq!(email.received_at, 7);
        assert_eq!(email.keywords, vec!["$seen".to_string()]);
        assert!(email.header_block.ends_with(b"\r\n\r\n"));
        assert_eq!(email.header_block.len(), raw.find("Body").unwrap());
        assert_eq!(email.sent_at, Some(1_727_769_600));
        assert_eq!(email.fast_view.preview, "Body text.");
        let index = &email.index;
        assert_eq!(index.message_id.as_deref(), Some("m2@example.com"));
        assert_eq!(
            index.referenced_ids,
            vec!["m1@example.com", "m0@example.com"]
        );
        assert_eq!(index.base_subject, "plans");
        assert_eq!(index.from_sort, "ann example");
        assert_eq!(index.from_text, "ann example\nann@example.com\n");
        assert_eq!(index.to_sort, "bob@example.org");
    }

    #[test]
    fn unparseable_bytes_are_still_prepared() {
        let prepared = prepare(vec![0xff, 0x00, 0x13], vec![1], vec![], |parsed| {
            if parsed.is_some() { 1 } else { 2 }
        });
        assert_eq!(prepared.email.size, 3);
        assert_eq!(prepared.raw, vec![0xff, 0x00, 0x13]);
    }
}

/// How many blobs of one batch [`store_batch`] writes at once.
const WRITE_CONCURRENCY: usize = 16;

/// Writes the blobs of a batch (a bounded number at once), then its rows in
/// one transaction (blob before row: a crash leaves at worst an unreferenced
/// blob, never a row without its message).
pub async fn store_batch(
    store: &dyn crate::store::Store,
    blobs: &std::sync::Arc<crate::blob::BlobStore>,
    account: i64,
    batch: Vec<PreparedEmail>,
) -> Result<Vec<crate::store::Inserted>, IngestError> {
    use futures::{StreamExt, TryStreamExt};
    let emails: Vec<NewEmail> = futures::stream::iter(batch)
        .map(|prepared| async move {
            blobs
                .put_with_id(&prepared.email.blob_id, prepared.raw)
                .await
                .map(|()| prepared.email)
        })
        .buffered(WRITE_CONCURRENCY)
        .try_collect()
        .await
        .map_err(IngestError::Blob)?;
    Ok(store.insert_emails(account, &emails).await?)
}

/// Why a batch could not be stored.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("{0}")]
    Blob(crate::blob::BlobError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

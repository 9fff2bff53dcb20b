//! Ingest: from raw bytes to a [`NewEmail`] ready for the store: one parse
//! of the message gives its header block, fast-view projection row and
//! stored part tree ([`crate::mail::structure`]), and
//! the query index is read from that header block as Email/get renders it.
//! Used by `fastview import`, `fastview seed`, `fastview demo` and
//! Email/import alike, so every path stores the same facts.

use mail_parser::Message;
use serde_json::Value;

use super::body::BodyReading;
use super::fast_view::FastView;
use super::header;
use super::message::parse_message;
use super::property::{EmailProperty, HeaderForm, HeaderProperty};
use super::search;
use super::structure::BodyStructure;
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
    // One reading of the body serves the fast view and the index's words.
    let reading = BodyReading::of(&message);
    let fast_view = FastView::of_reading(&reading);
    let structure = BodyStructure::of_message(&message).encode();
    let header_block = raw[..body_start].to_vec();
    let (index, sent_at) = header_index(&header_block, fast_view.has_attachment);
    let search = search::document_of(&reading, &index);
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
            structure,
            search,
            index,
        },
        raw,
    }
}

/// The header facts Email/query filters and sorts on (RFC 8621 §4.4.1
/// `from`, `to`, `cc`, `bcc`, `subject`; §4.4.2 `from`, `to`, `subject`,
/// `sentAt`) and threading matches on (§3), with `sentAt` as unix seconds.
///
/// Each is derived from the value Email/get renders for the same message:
/// the Email property's header form (§4.1.3, [`EmailProperty::header_property`])
/// over the stored header block split by [`header::block_fields`], the same
/// split and the same parsers as Email/get at either read level. So a filter
/// matches the names and addresses a client is shown, and a sort orders by
/// them. mail-parser's own field parsers are not used (the module docs of
/// [`crate::mail::header`] say why).
fn header_index(header_block: &[u8], has_attachment: bool) -> (EmailIndex, Option<i64>) {
    use EmailProperty::{Bcc, Cc, From, InReplyTo, MessageId, References, SentAt, Subject, To};
    let fields = header::block_fields(header_block);
    let rendered = |property: EmailProperty| {
        property
            .header_property()
            .map_or(Value::Null, |header| header::value_in(&fields, &header))
    };
    let subject = rendered(Subject);
    let subject = subject.as_str().unwrap_or_default();
    let (from_sort, from_text) = address_keys(&rendered(From));
    let (to_sort, to_text) = address_keys(&rendered(To));
    let (_, cc_text) = address_keys(&rendered(Cc));
    let (_, bcc_text) = address_keys(&rendered(Bcc));
    // Threading is the server's own rule (RFC 8621 §3), not a rendered
    // property: a Message-ID, In-Reply-To or References that is not a msg-id list
    // (Email/get renders null, §4.1.2.5) still names the bare
    // `local@domain` ids some mailers write without angle brackets.
    let thread_ids = |property: EmailProperty, name: &str| match rendered(property) {
        Value::Null => bare_message_ids(&header::value_in(
            &fields,
            &HeaderProperty {
                key: String::new(),
                name: name.to_string(),
                form: HeaderForm::Raw,
                all: false,
            },
        )),
        ids => message_ids(&ids),
    };
    let mut referenced_ids = thread_ids(InReplyTo, "in-reply-to");
    for id in thread_ids(References, "references") {
        if !referenced_ids.contains(&id) {
            referenced_ids.push(id);
        }
    }
    let index = EmailIndex {
        message_id: thread_ids(MessageId, "message-id").into_iter().next(),
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
    };
    (index, sent_at(&rendered(SentAt)))
}

/// The ids in a field's raw value that is not a msg-id list (threading only):
/// each whitespace-separated word, without its angle brackets when it has
/// both, that is `local@domain` with no quote, bracket or comma left: the
/// msg-ids among the phrases of RFC 5322 §4.5.4 `obs-in-reply-to`, and ids a
/// mailer wrote without angle brackets.
fn bare_message_ids(raw: &Value) -> Vec<String> {
    let raw = raw.as_str().unwrap_or_default();
    raw.split_whitespace()
        .map(|word| {
            word.strip_prefix('<')
                .and_then(|w| w.strip_suffix('>'))
                .unwrap_or(word)
        })
        .filter(|word| {
            let plain = !word.contains(['"', '<', '>', '(', ')', ',', ';', '[', ']']);
            let parts = word.split_once('@');
            plain && parts.is_some_and(|(l, d)| !l.is_empty() && !d.is_empty() && !d.contains('@'))
        })
        .map(str::to_string)
        .collect()
}

/// The ids of a rendered `asMessageIds` value (`null`: none).
fn message_ids(value: &Value) -> Vec<String> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

/// `(sort key, searchable text)` of a rendered `asAddresses` value (RFC 8621
/// §4.1.2.3), lowercase: the first address's name, else its email (the
/// §4.4.2 `from`/`to` sort); and every non-empty name and email, one per
/// line (what the §4.4.1 `from`/`to`/`cc`/`bcc` filters search).
fn address_keys(addresses: &Value) -> (String, String) {
    fn part<'v>(address: &'v Value, key: &str) -> Option<&'v str> {
        address[key].as_str().filter(|text| !text.is_empty())
    }
    let addresses = addresses.as_array().map(Vec::as_slice).unwrap_or_default();
    let name = |address| part(address, "name");
    let email = |address| part(address, "email");
    let sort = addresses
        .first()
        .and_then(|first| name(first).or_else(|| email(first)))
        .unwrap_or_default()
        .to_lowercase();
    let mut text = String::new();
    for part in addresses
        .iter()
        .flat_map(|address| [name(address), email(address)])
        .flatten()
    {
        text.push_str(&part.to_lowercase());
        text.push('\n');
    }
    (sort, text)
}

/// Unix seconds of a rendered `asDate` value (RFC 8621 §4.1.2.6: RFC 3339
/// with the field's own offset; `-00:00`, local time unknown, counts as UTC).
/// `None` when the Date field is absent or not a date.
fn sent_at(date: &Value) -> Option<i64> {
    let date = chrono::DateTime::parse_from_rfc3339(date.as_str()?).ok()?;
    Some(date.timestamp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threading_reads_ids_in_in_reply_to_that_is_not_a_msg_id_list() {
        let check = |in_reply_to: &str, expected: &[&str]| {
            let raw = format!("Subject: x\r\nIn-Reply-To: {in_reply_to}\r\n\r\nbody\r\n");
            let prepared = prepare(raw.into_bytes(), vec![1], vec![], |_| 0);
            assert_eq!(
                prepared.email.index.referenced_ids, expected,
                "{in_reply_to}"
            );
        };
        check("<m1@example.com>", &["m1@example.com"]);
        check("m1@example.com", &["m1@example.com"]);
        check(
            "Ann's message of Tue, 1 Oct 2024 <m1@example.com>",
            &["m1@example.com"],
        );
        check("see m1@ and @example.com, \"q@x\"", &[]);
        check("not an id", &[]);
    }

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

    /// Header facts on which mail-parser's field parsers and Email/get's
    /// rendering disagree (each seen in the shared corpus): the index holds
    /// what Email/get renders.
    #[test]
    fn the_index_holds_what_email_get_renders() {
        // Bare LF line ends, as in all of the shared corpus.
        let raw = concat!(
            // mail-parser's Date parser runs past `UT` and swallows the Subject.
            "Date: Thu, 22 Aug 2002 12:07:35 UT\n",
            "Subject: Re: the underground software marketplace and its\n",
            "    hazards \n",
            "From: \"\" Angles \" Puglisi\" <angles@example.com>\n",
            "To: ILUG (Request) <ilug@example.ie>, \"=?utf-8?B?6ZmI54Wc?=\" <y@example.cn>\n",
            // No angle brackets: not a msg-id (RFC 5322 §3.6.4), so Email/get
            // renders null; threading still takes the bare id.
            "In-Reply-To: CAKo1dg@mail.gmail.com\n",
            "References: <a@example.com> \"Jim\"'s message of <b@example.com\n",
            " >\n",
            "\n",
            "Body.\n"
        );
        let email = prepare(raw.as_bytes().to_vec(), vec![1], Vec::new(), |_| 0).email;
        let index = &email.index;
        assert_eq!(email.sent_at, Some(1_030_018_055));
        assert_eq!(
            index.subject,
            "re: the underground software marketplace and its    hazards "
        );
        assert_eq!(
            index.base_subject,
            "the underground software marketplace and its hazards"
        );
        assert_eq!(index.from_sort, "angles  puglisi");
        assert_eq!(index.to_sort, "ilug");
        // Encoded words inside a quoted string stay as written (RFC 2047 §5(3)).
        assert_eq!(
            index.to_text,
            "ilug\nilug@example.ie\n=?utf-8?b?6zmi54wc?=\ny@example.cn\n"
        );
        assert_eq!(index.message_id, None);
        assert_eq!(
            index.referenced_ids,
            ["CAKo1dg@mail.gmail.com", "a@example.com", "b@example.com"]
        );
        let dates = [
            ("Fri, 23 Aug 2002 22:46:34 GMT+1", Some(1_030_139_194)),
            ("28 Jun 01 10:05:15 PM", Some(993_765_915)),
            ("Fri, 23 Aug 2002 19:27:52", Some(1_030_130_872)),
            ("Sun, 25 Aug 2002 19:21:44 01800", None),
        ];
        for (date, expected) in dates {
            let raw = format!("Date: {date}\r\n\r\nBody.\r\n");
            let email = prepare(raw.into_bytes(), vec![1], Vec::new(), |_| 0).email;
            assert_eq!(email.sent_at, expected, "{date}");
        }
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
/// blob, never a row without its message), then checks that every blob is
/// still in place: the garbage collector ([`super::gc`]) may have set an
/// unreferenced blob aside between the write and the commit, and it is
/// written again. A corrupt copy already in the store is replaced
/// ([`crate::blob::BlobStore::put_with_id`]).
pub async fn store_batch(
    store: &dyn crate::store::Store,
    blobs: &std::sync::Arc<crate::blob::BlobStore>,
    account: i64,
    batch: Vec<PreparedEmail>,
) -> Result<Vec<crate::store::Inserted>, IngestError> {
    let written = write_blobs(blobs, batch).await?;
    store_rows(store, blobs, account, written).await
}

/// A message whose blob is written, its rows still to be: its rows and its
/// bytes (shared, for [`store_rows`]' check).
type Written = (NewEmail, bytes::Bytes);

/// The first half of [`store_batch`]: every message's blob, at most
/// [`WRITE_CONCURRENCY`] at once.
async fn write_blobs(
    blobs: &crate::blob::BlobStore,
    batch: Vec<PreparedEmail>,
) -> Result<Vec<Written>, IngestError> {
    use futures::{StreamExt, TryStreamExt};
    futures::stream::iter(batch)
        .map(|prepared| async move {
            let raw = bytes::Bytes::from(prepared.raw);
            blobs
                .put_with_id(&prepared.email.blob_id, raw.clone())
                .await?;
            Ok((prepared.email, raw))
        })
        .buffered(WRITE_CONCURRENCY)
        .try_collect()
        .await
        .map_err(IngestError::Blob)
}

/// The second half of [`store_batch`], once [`write_blobs`] has written the
/// batch's blobs: the rows in one transaction, then every blob checked.
async fn store_rows(
    store: &dyn crate::store::Store,
    blobs: &crate::blob::BlobStore,
    account: i64,
    batch: Vec<Written>,
) -> Result<Vec<crate::store::Inserted>, IngestError> {
    use futures::{StreamExt, TryStreamExt};
    let (emails, raws): (Vec<NewEmail>, Vec<bytes::Bytes>) = batch.into_iter().unzip();
    let inserted = store.insert_emails(account, &emails).await?;
    // Owned ids and shared bytes: the futures must not borrow the batch
    // (an axum handler's future is `Send` for every lifetime).
    let ids: Vec<String> = emails.into_iter().map(|email| email.blob_id).collect();
    futures::stream::iter(ids.into_iter().zip(raws))
        .map(|(id, raw)| async move { blobs.ensure_present(&id, raw).await })
        .buffered(WRITE_CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await
        .map_err(IngestError::Blob)?;
    Ok(inserted)
}

/// Why a batch could not be stored.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("{0}")]
    Blob(crate::blob::BlobError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// How many messages of one batch [`Pipeline::push`] prepares at once.
const PREPARE_CONCURRENCY: usize = 8;

/// A bulk load that keeps both halves of the work busy (`fastview import`,
/// issue 16, ADR 0006): each [`Pipeline::push`] prepares its batch (parse,
/// fast view, words: CPU on the blocking pool) and writes its blobs while
/// the rows of the batch handed in before it are written (one transaction:
/// the database's own thread). Serially, every batch waited for the one before it to be
/// written, and the words a full-text index adds to each transaction showed
/// as their whole time.
///
/// Batches are stored in the order pushed, one at a time; a batch that
/// fails to store is reported by the call after it and loses no other.
pub struct Pipeline {
    store: std::sync::Arc<dyn crate::store::Store>,
    blobs: std::sync::Arc<crate::blob::BlobStore>,
    account: i64,
    prepared: Option<Result<Vec<Written>, IngestError>>,
}

/// What storing one batch gave: [`store_batch`]'s outcome per message, in
/// the order of its jobs.
pub type BatchOutcome = Result<Vec<crate::store::Inserted>, IngestError>;

impl Pipeline {
    /// A pipeline into `account` (an account id of `store`).
    pub fn new(
        store: std::sync::Arc<dyn crate::store::Store>,
        blobs: std::sync::Arc<crate::blob::BlobStore>,
        account: i64,
    ) -> Self {
        Self {
            store,
            blobs,
            account,
            prepared: None,
        }
    }

    /// Runs `jobs` (each returns one [`prepare`]d message; at most
    /// [`PREPARE_CONCURRENCY`] at once on the blocking pool) while the
    /// batch of the previous call is stored, and returns that batch's
    /// outcome: `None` on the first call. A job that panics (a bug:
    /// [`prepare`] never fails) drops its message from the batch and from
    /// the outcome; the rest of the batch is stored.
    pub async fn push<J>(&mut self, jobs: Vec<J>) -> Option<BatchOutcome>
    where
        J: FnOnce() -> PreparedEmail + Send + 'static,
    {
        use futures::StreamExt;
        let blobs = self.blobs.clone();
        let preparing = async move {
            let prepared = futures::stream::iter(jobs)
                .map(tokio::task::spawn_blocking)
                .buffered(PREPARE_CONCURRENCY)
                .filter_map(|joined| async move { joined.ok() })
                .collect::<Vec<PreparedEmail>>()
                .await;
            write_blobs(&blobs, prepared).await
        };
        let previous = self.prepared.take();
        let (stored, prepared) = tokio::join!(self.store_rows(previous), preparing);
        self.prepared = Some(prepared);
        stored
    }

    /// Stores the last batch pushed and returns its outcome (`None` when
    /// nothing was pushed).
    pub async fn finish(mut self) -> Option<BatchOutcome> {
        let last = self.prepared.take();
        self.store_rows(last).await
    }

    /// The rows of a batch whose blobs were written as it was prepared; a
    /// batch whose blobs could not be written fails whole, as
    /// [`store_batch`] would.
    async fn store_rows(
        &self,
        batch: Option<Result<Vec<Written>, IngestError>>,
    ) -> Option<BatchOutcome> {
        Some(match batch? {
            Ok(batch) => store_rows(self.store.as_ref(), &self.blobs, self.account, batch).await,
            Err(error) => Err(error),
        })
    }
}

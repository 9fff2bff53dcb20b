//! Applying what a sync listed: new emails downloaded, stored through
//! ingest and mapped to the upstream's ids; known ones given the
//! upstream's keywords and mailboxIds. A new email's `hasAttachment` and
//! `preview` are the upstream's (ADR 0009, "Whose rendering stands").

use std::collections::{BTreeMap, HashMap};

use serde_json::{Value, json};

use crate::mail::body;
use crate::mail::ingest;
use crate::proxy::jmap::mirror::sync::{Listed, Sync, list_of};
use crate::proxy::upstream::UpstreamError;
use crate::store::{EmailUpdate, Inserted, MirroredEmail, NewEmail};

/// The most messages downloaded and stored in one batch.
const STORE_BATCH: usize = 64;

impl Sync<'_> {
    /// What the upstream says of each of `batch` beyond its metadata, by
    /// Email id: its parts and its `hasAttachment` and `preview`
    /// ([`UpstreamView`]), in one Email/get.
    async fn views(
        &self,
        batch: &[&Listed],
    ) -> Result<HashMap<String, UpstreamView>, UpstreamError> {
        let ids: Vec<&str> = batch.iter().map(|l| l.id.as_str()).collect();
        let calls = json!([["Email/get", {"accountId": self.upstream_id, "ids": ids,
            "properties": ["id", "bodyStructure", "hasAttachment", "preview"],
            "bodyProperties": ["partId", "blobId", "type", "subParts"]}, "p"]]);
        let responses = self.call(calls).await?.unwrap_or_default();
        let list = list_of(responses.first().map(|r| &r[1]));
        Ok(list
            .iter()
            .filter_map(|email| {
                Some((email["id"].as_str()?.to_string(), UpstreamView::read(email)))
            })
            .collect())
    }

    /// Makes the mirror hold `listed` as the upstream does: new emails
    /// downloaded and stored, mapped ones given the upstream's keywords and
    /// mailboxIds. Returns (messages stored, octets downloaded).
    pub(super) async fn apply(
        &self,
        mailboxes: &mut HashMap<String, i64>,
        listed: Vec<Listed>,
    ) -> Result<(usize, u64), UpstreamError> {
        self.read_new_mailboxes(mailboxes, &listed).await?;
        let mailboxes = &*mailboxes;
        let mapped = self.mapped(&listed).await?;
        let (known, new): (Vec<&Listed>, Vec<&Listed>) =
            listed.iter().partition(|l| mapped.contains_key(&l.id));
        self.update_known(mailboxes, &mapped, &known).await?;
        let mut stored = (0, 0u64);
        for batch in new.chunks(STORE_BATCH) {
            let (count, octets) = self.store_new(mailboxes, batch).await?;
            stored = (stored.0 + count, stored.1 + octets);
        }
        Ok(stored)
    }

    /// A mailbox made since this sync read them is read now: an email in
    /// it must not lose that membership.
    async fn read_new_mailboxes(
        &self,
        mailboxes: &mut HashMap<String, i64>,
        listed: &[Listed],
    ) -> Result<(), UpstreamError> {
        if listed
            .iter()
            .any(|l| l.mailbox_ids.iter().any(|m| !mailboxes.contains_key(m)))
        {
            *mailboxes = self.mailboxes().await?.0;
        }
        Ok(())
    }

    /// The local email id of each of `listed` the mirror maps, by upstream
    /// id.
    async fn mapped(&self, listed: &[Listed]) -> Result<HashMap<String, i64>, UpstreamError> {
        let upstream_ids: Vec<&str> = listed.iter().map(|l| l.id.as_str()).collect();
        let mut mapped: HashMap<String, i64> = HashMap::new();
        for chunk in upstream_ids.chunks(1000) {
            for m in (self.mirror.store)
                .mirror_emails(self.account, None, Some(chunk))
                .await?
            {
                mapped.insert(m.upstream_id, m.email_id);
            }
        }
        Ok(mapped)
    }

    /// Known ones (`mapped`): keywords and mailboxIds set to the upstream's
    /// where they differ.
    async fn update_known(
        &self,
        mailboxes: &HashMap<String, i64>,
        mapped: &HashMap<String, i64>,
        known: &[&Listed],
    ) -> Result<(), UpstreamError> {
        let store = &self.mirror.store;
        let wanted: BTreeMap<i64, &Listed> = known.iter().map(|l| (mapped[&l.id], *l)).collect();
        let ids: Vec<i64> = wanted.keys().copied().collect();
        let mut updates = Vec::new();
        for chunk in ids.chunks(1000) {
            for meta in store.email_meta(self.account, chunk).await? {
                let Some(listed) = wanted.get(&meta.id) else {
                    continue;
                };
                let mailbox_ids = local_mailboxes(mailboxes, listed);
                if mailbox_ids != meta.mailbox_ids || listed.keywords != meta.keywords {
                    updates.push(EmailUpdate::replace(
                        meta.id,
                        Some(listed.keywords.clone()),
                        Some(mailbox_ids),
                    ));
                }
            }
        }
        if !updates.is_empty() {
            store.update_emails(self.account, &updates).await?;
        }
        Ok(())
    }

    /// New ones, a batch: downloaded, stored through ingest, mapped.
    /// Returns (messages stored, octets downloaded).
    async fn store_new(
        &self,
        mailboxes: &HashMap<String, i64>,
        batch: &[&Listed],
    ) -> Result<(usize, u64), UpstreamError> {
        let mut views = self.views(batch).await?;
        let (fetched, raws, octets) = self.download(mailboxes, batch).await?;
        let (mut prepared, local_part_ids) = prepare(raws).await?;
        for (listed, email) in fetched.iter().zip(&mut prepared) {
            if let Some(view) = views.get(&listed.id) {
                view.stands_in(&mut email.email);
            }
        }
        let store = &self.mirror.store;
        let inserted =
            ingest::store_batch(store.as_ref(), &self.mirror.blobs, self.account, prepared).await?;
        let names: Vec<MirroredEmail> = fetched
            .iter()
            .zip(inserted)
            .zip(local_part_ids)
            .map(|((listed, inserted), local_part_ids)| {
                let (Inserted::New(email_id) | Inserted::Duplicate(email_id)) = inserted;
                let parts = views
                    .remove(&listed.id)
                    .and_then(|view| part_map(&local_part_ids, &view.parts));
                MirroredEmail {
                    email_id,
                    upstream_id: listed.id.clone(),
                    blob_id: listed.blob_id.clone(),
                    thread_id: listed.thread_id.clone(),
                    parts,
                }
            })
            .collect();
        store.put_mirror_emails(self.account, &names).await?;
        Ok((fetched.len(), octets))
    }

    /// The messages of `batch` from the upstream, each with the local
    /// mailboxes, keywords and receivedAt it is stored with; returns the
    /// ones fetched, their messages and the octets downloaded.
    async fn download<'l>(
        &self,
        mailboxes: &HashMap<String, i64>,
        batch: &[&'l Listed],
    ) -> Result<(Vec<&'l Listed>, Vec<Fetched>, u64), UpstreamError> {
        let mut raws = Vec::with_capacity(batch.len());
        let mut fetched = Vec::with_capacity(batch.len());
        let mut octets = 0u64;
        for listed in batch {
            let raw = match self
                .mirror
                .upstream
                .message(
                    self.session,
                    self.authorization,
                    self.upstream_id,
                    &listed.blob_id,
                    self.mirror.max_message,
                )
                .await
            {
                Ok(raw) => raw,
                // One message the upstream will not give (or one over
                // maxSizeUpload) stays unmirrored: calls naming it are
                // forwarded. Anything else ends the sync.
                Err(UpstreamError::Refused(reason)) => {
                    tracing::warn!(account = %self.upstream_id, email = %listed.id, %reason, "not mirrored");
                    continue;
                }
                Err(other) => return Err(other),
            };
            fetched.push(*listed);
            octets += raw.len() as u64;
            raws.push((
                raw,
                local_mailboxes(mailboxes, listed),
                listed.keywords.clone(),
                listed.received_at,
            ));
        }
        Ok((fetched, raws, octets))
    }
}

/// A downloaded message and the local mailboxIds, keywords and receivedAt
/// it is stored with.
type Fetched = (Vec<u8>, Vec<i64>, Vec<String>, i64);

/// One part of the upstream's `bodyStructure`.
struct UpstreamPart {
    part_id: Option<String>,
    blob_id: Option<String>,
    content_type: String,
}

/// What the upstream says of one email beyond its metadata (ADR 0009,
/// "Whose rendering stands"): its parts as (partId, blobId) in document
/// order, and the two properties RFC 8621 §4.1.4 leaves to the server's
/// judgement, which the upstream also filters on (`hasAttachment`) or
/// answers in calls the proxy forwards: the mirror stores the upstream's,
/// so a client sees one value whichever of the two answers it.
struct UpstreamView {
    parts: Vec<UpstreamPart>,
    has_attachment: Option<bool>,
    preview: Option<String>,
}

impl UpstreamView {
    /// Reads one Email object of [`Sync::views`]'s answer.
    fn read(email: &Value) -> Self {
        let mut parts = Vec::new();
        let mut stack = vec![&email["bodyStructure"]];
        while let Some(part) = stack.pop() {
            let text = |name: &str| part[name].as_str().map(str::to_string);
            parts.push(UpstreamPart {
                part_id: text("partId"),
                blob_id: text("blobId"),
                content_type: text("type").unwrap_or_default(),
            });
            if let Some(children) = part["subParts"].as_array() {
                stack.extend(children.iter().rev());
            }
        }
        Self {
            parts,
            has_attachment: email["hasAttachment"].as_bool(),
            preview: email["preview"].as_str().map(|preview| {
                preview
                    .chars()
                    .take(crate::mail::fast_view::PREVIEW_CHARS)
                    .collect()
            }),
        }
    }

    /// Puts the upstream's `hasAttachment` and `preview` in the fast view
    /// (and the filter's copy) of `email`, prepared from the same octets;
    /// where the upstream left one out, Fastview's own stays.
    fn stands_in(&self, email: &mut NewEmail) {
        if let Some(has_attachment) = self.has_attachment {
            email.fast_view.has_attachment = has_attachment;
            email.index.has_attachment = has_attachment;
        }
        if let Some(preview) = &self.preview {
            email.fast_view.preview.clone_from(preview);
        }
    }
}

/// A message's partIds and types in document order ([`body::part_ids`]).
type LocalParts = Vec<(Option<String>, String)>;

/// `raws` prepared for ingest, each with its [`LocalParts`], off the async
/// threads (parsing is CPU work).
async fn prepare(
    raws: Vec<Fetched>,
) -> Result<(Vec<ingest::PreparedEmail>, Vec<LocalParts>), UpstreamError> {
    tokio::task::spawn_blocking(move || {
        raws.into_iter()
            .map(|(raw, mailboxes, keywords, at)| {
                // The part ids read from ingest's own parse (its receivedAt
                // hook is handed the parsed message), not from a second one.
                let mut part_ids = Vec::new();
                let prepared = ingest::prepare(raw, mailboxes, keywords, |message| {
                    part_ids = message.map(body::part_ids).unwrap_or_default();
                    at
                });
                (prepared, part_ids)
            })
            .unzip::<_, _, Vec<_>, Vec<_>>()
    })
    .await
    .map_err(|error| UpstreamError::Refused(format!("preparing messages: {error}")))
}

/// The local mailbox ids of `listed`'s upstream mailboxIds, sorted.
fn local_mailboxes(mailboxes: &HashMap<String, i64>, listed: &Listed) -> Vec<i64> {
    let mut ids: Vec<i64> = listed
        .mailbox_ids
        .iter()
        .filter_map(|m| mailboxes.get(m).copied())
        .collect();
    ids.sort_unstable();
    ids
}

/// The part map of one email (a JSON object, kept with its mapping): by
/// local partId, the upstream's blobId of the part (a string) when the
/// upstream names the part alike, else `[upstream partId, upstream blobId]`
/// (Cyrus numbers parts as IMAP sections, `1.2`, Fastview by leaf index).
/// `None` when the two servers split the message differently: the same
/// number of parts in document order, multiparts at the same places and
/// the same types, or the email's parts are the upstream's to answer about.
fn part_map(local: &[(Option<String>, String)], upstream: &[UpstreamPart]) -> Option<String> {
    let alike = local.len() == upstream.len()
        && local
            .iter()
            .zip(upstream)
            .all(|((id, content_type), part)| {
                id.is_some() == part.part_id.is_some()
                    && content_type.eq_ignore_ascii_case(&part.content_type)
            });
    if !alike {
        return None;
    }
    let map: serde_json::Map<String, Value> = local
        .iter()
        .zip(upstream)
        .filter_map(|((id, _), part)| {
            let (id, upstream_id) = (id.clone()?, part.part_id.clone()?);
            let blob = part.blob_id.clone().map_or(Value::Null, Value::String);
            let named = if id == upstream_id {
                blob
            } else {
                json!([upstream_id, blob])
            };
            Some((id, named))
        })
        .collect();
    Some(Value::Object(map).to_string())
}

#[cfg(test)]
mod tests {
    use super::{UpstreamPart, part_map};

    fn local(parts: &[(Option<&str>, &str)]) -> Vec<(Option<String>, String)> {
        parts
            .iter()
            .map(|(id, content_type)| (id.map(str::to_string), content_type.to_string()))
            .collect()
    }

    fn upstream(parts: &[UpstreamRow]) -> Vec<UpstreamPart> {
        parts
            .iter()
            .map(|(id, blob, content_type)| UpstreamPart {
                part_id: id.map(str::to_string),
                blob_id: (!blob.is_empty()).then(|| blob.to_string()),
                content_type: content_type.to_string(),
            })
            .collect()
    }

    /// An upstream part as (partId, blobId, type).
    type UpstreamRow = (Option<&'static str>, &'static str, &'static str);

    #[test]
    fn parts_are_mapped_for_mail_split_alike_however_numbered() {
        let mine = local(&[
            (None, "multipart/mixed"),
            (Some("1"), "text/plain"),
            (Some("2"), "image/png"),
        ]);
        // (upstream parts as (partId, blobId, type), the part map or None)
        let cases: [(&[UpstreamRow], Option<&str>); 5] = [
            (
                &[
                    (None, "", "multipart/mixed"),
                    (Some("1"), "B1", "text/plain"),
                    (Some("2"), "B2", "IMAGE/PNG"),
                ],
                Some(r#"{"1":"B1","2":"B2"}"#),
            ),
            (
                &[
                    (None, "", "multipart/mixed"),
                    (Some("1.1"), "C", "text/plain"),
                    (Some("1.2"), "D", "image/png"),
                ],
                Some(r#"{"1":["1.1","C"],"2":["1.2","D"]}"#),
            ),
            (
                &[
                    (None, "", "multipart/mixed"),
                    (Some("1"), "B", "text/plain"),
                ],
                None,
            ),
            (
                &[
                    (None, "", "multipart/mixed"),
                    (Some("1"), "B1", "text/plain"),
                    (Some("2"), "B2", "application/pdf"),
                ],
                None,
            ),
            (
                &[
                    (Some("1"), "B1", "multipart/mixed"),
                    (None, "", "text/plain"),
                    (Some("2"), "B2", "image/png"),
                ],
                None,
            ),
        ];
        for (theirs, expected) in cases {
            assert_eq!(
                part_map(&mine, &upstream(theirs)).as_deref(),
                expected,
                "{:?}",
                theirs.iter().map(|(id, _, _)| id).collect::<Vec<_>>()
            );
        }
    }
}

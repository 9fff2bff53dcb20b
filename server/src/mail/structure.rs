//! The stored part tree of a message (issue 15, ADR 0002): the
//! [`BodyPart`] tree of RFC 8621 §4.1.4 with its textBody / htmlBody /
//! attachments partition, computed once at ingest (and by `reproject`, or on
//! a read that finds none) and kept in the store, so that the structure read
//! level renders `bodyStructure`, `textBody`, `htmlBody` and `attachments`
//! without reading the message, and the body-values level reads only the
//! byte ranges of the parts it decodes.
//!
//! Per part it keeps what a parse derives (partId, type, charset,
//! disposition, name, cid, language, location, transfer encoding, decoded
//! size, the part's header octets, the byte range of its body) and, per
//! leaf, a 16-octet digest of its raw body ([`crate::blob::range_digest`]),
//! so a range read is checked as a whole read is checked against the blob id.
//! The root's header octets are the message's header block, already stored:
//! they are kept as a range of it, not twice.
//!
//! The encoding is compact binary, versioned by its first octet:
//!
//! ```text
//! version 1 · has_tree u8 · [root_header · part · partition]
//! root_header: 0 (octets in the root part) | 1 start end (range of the header block)
//! part: index · header bytes · body_start · body_len · type str · charset, disposition,
//!       name, cid, location opt-str · language opt-list · encoding u8 · size ·
//!       0 digest[16] (leaf) | n+1 part×n (multipart with n sub-parts)
//! partition: three lists of part indexes (textBody, htmlBody, attachments)
//! ```
//! integers are LEB128 varints, strings and bytes length-prefixed. A stored
//! value that does not decode is treated as absent (recomputed), never served.

use mail_parser::Message;

use super::body::{BodyPart, MAX_DEPTH, Partition, TransferEncoding};
use crate::blob::range_digest;

/// The first octet of the current encoding.
const VERSION: u8 = 1;

/// One message's stored part tree and partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyStructure {
    /// The tree; `None` for a message mail-parser found no part in.
    root: Option<BodyPart>,
    /// Where the root part's header octets are.
    root_header: RootHeader,
    /// The partition of RFC 8621 §4.1.4, as part indexes.
    text_body: Vec<usize>,
    html_body: Vec<usize>,
    attachments: Vec<usize>,
}

/// Where the root part's header octets are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RootHeader {
    /// In the root part itself.
    Own,
    /// The range `start..end` of the message's stored header block; the
    /// root part's `header` is empty until [`BodyStructure::with_header_block`].
    InBlock(usize, usize),
}

impl BodyStructure {
    /// The tree of a parsed message, with the digests of its leaves.
    pub fn of_message(message: &Message<'_>) -> Self {
        let raw: &[u8] = &message.raw_message;
        let Some(mut root) = BodyPart::tree(message) else {
            return Self::without_parts();
        };
        set_digests(&mut root, raw);
        let lists = {
            let lists = root.partition();
            let indexes = |parts: &[&BodyPart]| parts.iter().map(|part| part.index).collect();
            [
                indexes(&lists.text_body),
                indexes(&lists.html_body),
                indexes(&lists.attachments),
            ]
        };
        // The header block is `raw[..root body start]` (`ingest::prepare`).
        let root_header = match find_in(&raw[..root.body.0], &root.header) {
            Some(start) => {
                let end = start + root.header.len();
                root.header = Box::default();
                RootHeader::InBlock(start, end)
            }
            None => RootHeader::Own,
        };
        Self::of_root(root, root_header, lists)
    }

    /// The structure of a message with no part.
    fn without_parts() -> Self {
        Self {
            root: None,
            root_header: RootHeader::Own,
            text_body: Vec::new(),
            html_body: Vec::new(),
            attachments: Vec::new(),
        }
    }

    /// The structure of the tree `root`, its header where `root_header`
    /// says, with the partition `[textBody, htmlBody, attachments]`.
    fn of_root(root: BodyPart, root_header: RootHeader, lists: [Vec<usize>; 3]) -> Self {
        let [text_body, html_body, attachments] = lists;
        Self {
            root: Some(root),
            root_header,
            text_body,
            html_body,
            attachments,
        }
    }

    /// The root part; `None` when the message has none.
    pub(crate) fn root(&self) -> Option<&BodyPart> {
        self.root.as_ref()
    }

    /// The partition of RFC 8621 §4.1.4, as computed at ingest.
    pub(crate) fn partition(&self) -> Partition<'_> {
        let Some(root) = &self.root else {
            return Partition::default();
        };
        let mut all = Vec::new();
        root.walk(&mut all);
        // A message may have thousands of parts: look them up by index.
        let parts: std::collections::HashMap<usize, &BodyPart> =
            all.into_iter().map(|part| (part.index, part)).collect();
        let by_index = |indexes: &[usize]| -> Vec<&BodyPart> {
            indexes
                .iter()
                .filter_map(|index| parts.get(index).copied())
                .collect()
        };
        Partition {
            text_body: by_index(&self.text_body),
            html_body: by_index(&self.html_body),
            attachments: by_index(&self.attachments),
        }
    }

    /// The tree of the same message with its header block replaced by one
    /// `new_block_len` octets long that ends as the old one did (the blank
    /// line) and, with `field_prepended`, has a new first field (`fastview
    /// seed`'s copies, which rewrite message ids in the header only): every
    /// body range moves by the change in length, the digests stay. `None`
    /// when the root's header is not a range of the block (then parse the copy).
    pub fn rebased(
        &self,
        old_block_len: usize,
        new_block_len: usize,
        field_prepended: bool,
    ) -> Option<Self> {
        let RootHeader::InBlock(start, end) = self.root_header else {
            return None;
        };
        let fields_start = if field_prepended { 0 } else { start };
        let tail = old_block_len.checked_sub(end)?;
        let new_end = new_block_len.checked_sub(tail)?;
        fn shift(part: &mut BodyPart, old: usize, new: usize) {
            part.body = (part.body.0 - old + new, part.body.1 - old + new);
            for child in part.sub_parts.iter_mut().flatten() {
                shift(child, old, new);
            }
        }
        let mut copy = self.clone();
        if let Some(root) = &mut copy.root {
            if root.body.0 < old_block_len {
                return None;
            }
            shift(root, old_block_len, new_block_len);
        }
        copy.root_header = RootHeader::InBlock(fields_start.min(new_end), new_end);
        Some(copy)
    }

    /// Whether the root part's header octets must be filled in from the
    /// message's header block before part headers are rendered
    /// ([`BodyStructure::with_header_block`]).
    pub fn needs_header_block(&self) -> bool {
        matches!(self.root_header, RootHeader::InBlock(..))
    }

    /// A copy whose root part carries its header octets, taken from the
    /// message's stored header block `block` (for `headers` and `header:`
    /// properties of the root part).
    pub fn with_header_block(&self, block: &[u8]) -> Self {
        let mut filled = self.clone();
        if let (RootHeader::InBlock(start, end), Some(root)) = (self.root_header, &mut filled.root)
        {
            root.header = block.get(start..end).unwrap_or_default().into();
            filled.root_header = RootHeader::Own;
        }
        filled
    }

    /// The leaf with this partId (decimal part index), for download.
    /// `None` for a multipart part or no such part.
    pub(crate) fn leaf(&self, part_id: &str) -> Option<&BodyPart> {
        let index: usize = part_id.parse().ok()?;
        if index.to_string() != part_id {
            return None;
        }
        self.root
            .as_ref()?
            .find(index)
            .filter(|part| part.sub_parts.is_none())
    }

    /// An estimate of the octets the decoded tree holds (cache weight).
    pub fn weight(&self) -> usize {
        fn part_weight(part: &BodyPart) -> usize {
            let strings = [&part.charset, &part.disposition, &part.name, &part.cid]
                .iter()
                .map(|value| value.as_ref().map_or(0, String::len))
                .sum::<usize>();
            160 + part.header.len()
                + part.content_type.len()
                + strings
                + part
                    .sub_parts
                    .iter()
                    .flatten()
                    .map(part_weight)
                    .sum::<usize>()
        }
        64 + self.root.as_ref().map_or(0, part_weight)
            + 8 * (self.text_body.len() + self.html_body.len() + self.attachments.len())
    }

    /// The stored form (the module docs give the layout).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Writer(Vec::with_capacity(256));
        out.0.push(VERSION);
        let Some(root) = &self.root else {
            out.0.push(0);
            return out.0;
        };
        out.0.push(1);
        match self.root_header {
            RootHeader::Own => out.uint(0),
            RootHeader::InBlock(start, end) => {
                out.uint(1);
                out.uint(start);
                out.uint(end);
            }
        }
        out.part(root);
        for list in [&self.text_body, &self.html_body, &self.attachments] {
            out.uint(list.len());
            for index in list {
                out.uint(*index);
            }
        }
        out.0
    }

    /// Reads a stored form; `None` when it is not one this code wrote.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let mut input = Reader(bytes);
        if input.byte()? != VERSION {
            return None;
        }
        let structure = match input.byte()? {
            0 => Self::without_parts(),
            1 => {
                let root_header = match input.uint()? {
                    0 => RootHeader::Own,
                    1 => RootHeader::InBlock(input.uint()?, input.uint()?),
                    _ => return None,
                };
                let root = input.part(0)?;
                let mut lists = [Vec::new(), Vec::new(), Vec::new()];
                for list in &mut lists {
                    let count = input.count()?;
                    for _ in 0..count {
                        list.push(input.uint()?);
                    }
                }
                Self::of_root(root, root_header, lists)
            }
            _ => return None,
        };
        input.0.is_empty().then_some(structure)
    }
}

/// Sets the digest of every leaf from its raw body in `raw`.
fn set_digests(part: &mut BodyPart, raw: &[u8]) {
    match &mut part.sub_parts {
        Some(children) => children
            .iter_mut()
            .for_each(|child| set_digests(child, raw)),
        None => {
            let body = raw.get(part.body.0..part.body.1).unwrap_or_default();
            part.digest = Some(range_digest(body));
        }
    }
}

/// Where `needle` (non-empty) starts in `haystack`, looked for at the
/// positions a header can start: the beginning and after each LF.
fn find_in(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    let starts = std::iter::once(0).chain(
        haystack
            .iter()
            .enumerate()
            .filter(|(_, byte)| **byte == b'\n')
            .map(|(i, _)| i + 1),
    );
    starts.into_iter().find(|&start| {
        haystack
            .get(start..start + needle.len())
            .is_some_and(|window| window == needle)
    })
}

struct Writer(Vec<u8>);

impl Writer {
    fn uint(&mut self, mut value: usize) {
        loop {
            let low = (value & 0x7f) as u8;
            value >>= 7;
            if value == 0 {
                self.0.push(low);
                return;
            }
            self.0.push(low | 0x80);
        }
    }

    fn bytes(&mut self, bytes: &[u8]) {
        self.uint(bytes.len());
        self.0.extend_from_slice(bytes);
    }

    fn opt_str(&mut self, value: &Option<String>) {
        match value {
            None => self.uint(0),
            Some(value) => {
                self.uint(value.len() + 1);
                self.0.extend_from_slice(value.as_bytes());
            }
        }
    }

    fn part(&mut self, part: &BodyPart) {
        self.uint(part.index);
        self.bytes(&part.header);
        self.uint(part.body.0);
        self.uint(part.body.1 - part.body.0);
        self.bytes(part.content_type.as_bytes());
        for value in [
            &part.charset,
            &part.disposition,
            &part.name,
            &part.cid,
            &part.location,
        ] {
            self.opt_str(value);
        }
        match &part.language {
            None => self.uint(0),
            Some(tags) => {
                self.uint(tags.len() + 1);
                for tag in tags {
                    self.bytes(tag.as_bytes());
                }
            }
        }
        self.0.push(match part.encoding {
            TransferEncoding::Identity => 0,
            TransferEncoding::Base64 => 1,
            TransferEncoding::QuotedPrintable => 2,
            TransferEncoding::Unknown => 3,
        });
        self.uint(part.size);
        match &part.sub_parts {
            None => {
                self.uint(0);
                self.0.extend_from_slice(&part.digest.unwrap_or_default());
            }
            Some(children) => {
                self.uint(children.len() + 1);
                for child in children {
                    self.part(child);
                }
            }
        }
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn byte(&mut self) -> Option<u8> {
        let (&first, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(first)
    }

    fn uint(&mut self) -> Option<usize> {
        let mut value: u64 = 0;
        for shift in (0..64).step_by(7) {
            let byte = self.byte()?;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return usize::try_from(value).ok();
            }
        }
        None
    }

    /// A count of items that follow, each at least one octet: `None` when
    /// fewer octets are left (a damaged value, not a reason to allocate).
    fn count(&mut self) -> Option<usize> {
        let count = self.uint()?;
        self.fits(count)
    }

    fn fits(&self, count: usize) -> Option<usize> {
        (count <= self.0.len()).then_some(count)
    }

    fn take(&mut self, len: usize) -> Option<&'a [u8]> {
        if len > self.0.len() {
            return None;
        }
        let (taken, rest) = self.0.split_at(len);
        self.0 = rest;
        Some(taken)
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let len = self.uint()?;
        self.take(len)
    }

    fn string(&mut self) -> Option<String> {
        String::from_utf8(self.bytes()?.to_vec()).ok()
    }

    fn opt_str(&mut self) -> Option<Option<String>> {
        match self.uint()? {
            0 => Some(None),
            len => {
                let bytes = self.take(len - 1)?;
                String::from_utf8(bytes.to_vec()).ok().map(Some)
            }
        }
    }

    /// One part at `depth` (bounded: a stored tree is at most
    /// [`MAX_DEPTH`] + 1 deep, so the recursion is too).
    fn part(&mut self, depth: usize) -> Option<BodyPart> {
        if depth > MAX_DEPTH + 1 {
            return None;
        }
        let index = self.uint()?;
        let header = self.bytes()?.into();
        let body_start = self.uint()?;
        let body = (body_start, body_start.checked_add(self.uint()?)?);
        let content_type = self.string()?;
        let charset = self.opt_str()?;
        let disposition = self.opt_str()?;
        let name = self.opt_str()?;
        let cid = self.opt_str()?;
        let location = self.opt_str()?;
        let language = match self.uint()? {
            0 => None,
            count => {
                let mut tags = Vec::new();
                for _ in 0..self.fits(count - 1)? {
                    tags.push(self.string()?);
                }
                Some(tags)
            }
        };
        let encoding = match self.byte()? {
            0 => TransferEncoding::Identity,
            1 => TransferEncoding::Base64,
            2 => TransferEncoding::QuotedPrintable,
            3 => TransferEncoding::Unknown,
            _ => return None,
        };
        let size = self.uint()?;
        let (sub_parts, digest) = match self.uint()? {
            0 => (None, Some(self.take(16)?.try_into().ok()?)),
            count => {
                let mut children = Vec::new();
                for _ in 0..self.fits(count - 1)? {
                    children.push(self.part(depth + 1)?);
                }
                (Some(children), None)
            }
        };
        Some(BodyPart {
            index,
            header,
            body,
            content_type,
            charset,
            disposition,
            name,
            cid,
            language,
            location,
            encoding,
            sub_parts,
            size,
            digest,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mail::message::parse_message;

    fn fixture(name: &str) -> Vec<u8> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/golden")
            .join(format!("{name}.eml"));
        std::fs::read(path).expect("fixture exists")
    }

    #[test]
    fn the_stored_form_decodes_to_the_same_tree_and_partition() {
        for name in [
            "nested_multiparts",
            "alternative_three_way",
            "mixed_with_attachment",
        ] {
            let raw = fixture(name);
            let message = parse_message(&raw);
            let structure = BodyStructure::of_message(&message);
            let encoded = structure.encode();
            let decoded = BodyStructure::decode(&encoded).expect("decodes");
            assert_eq!(decoded, structure, "{name}");
            // The root header is a range of the header block, not stored twice.
            assert!(decoded.needs_header_block(), "{name}");
            let block = &raw[..decoded.root().unwrap().body.0];
            let filled = decoded.with_header_block(block);
            assert_eq!(
                filled.root().unwrap(),
                &BodyPart::tree(&message)
                    .map(|mut root| {
                        set_digests(&mut root, &raw);
                        root
                    })
                    .unwrap(),
                "{name}"
            );
            // Every leaf has its body digest; the partition is the parse's.
            let parsed = BodyPart::tree(&message).unwrap();
            let lists = parsed.partition();
            let stored = filled.partition();
            let ids = |parts: &[&BodyPart]| parts.iter().map(|p| p.index).collect::<Vec<_>>();
            assert_eq!(ids(&stored.text_body), ids(&lists.text_body), "{name}");
            assert_eq!(ids(&stored.html_body), ids(&lists.html_body), "{name}");
            assert_eq!(ids(&stored.attachments), ids(&lists.attachments), "{name}");
        }
    }

    #[test]
    fn a_damaged_stored_form_is_refused_not_misread() {
        let raw = fixture("nested_multiparts");
        let encoded = BodyStructure::of_message(&parse_message(&raw)).encode();
        assert!(BodyStructure::decode(&[]).is_none());
        assert!(BodyStructure::decode(&[9, 1]).is_none(), "unknown version");
        for cut in 1..encoded.len() {
            assert!(
                BodyStructure::decode(&encoded[..cut]).is_none(),
                "cut at {cut}"
            );
        }
        let mut longer = encoded.clone();
        longer.push(0);
        assert!(BodyStructure::decode(&longer).is_none(), "trailing octets");
    }

    #[test]
    fn leaves_are_found_by_part_id_and_multiparts_are_not() {
        let raw = fixture("mixed_with_attachment");
        let structure = BodyStructure::of_message(&parse_message(&raw));
        let root = structure.root().unwrap();
        assert!(root.sub_parts.is_some());
        assert!(structure.leaf("0").is_none(), "the multipart root");
        let leaf = structure.leaf("1").expect("part 1");
        let (range, digest) = leaf.stored_range().expect("a leaf has its range");
        let body = &raw[range.start as usize..range.end as usize];
        assert_eq!(digest, range_digest(body));
        assert!(structure.leaf("01").is_none());
        assert!(structure.leaf("99").is_none());
    }
}

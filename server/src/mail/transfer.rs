//! Transfer decoding (RFC 2045 §6): base64 and quoted-printable into a
//! buffer, or counted for a part's `size`, as [`super::body`] reads them.
//! The one base64 and quoted-printable decoder: RFC 2047 "B" and "Q"
//! encoded words ([`super::header_text`]) decode through it too.

use super::lexical::{BASE64_VALUES, NOT_BASE64, hex_value};

/// A Content-Transfer-Encoding (RFC 2045 §6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TransferEncoding {
    /// 7bit, 8bit, binary or absent.
    Identity,
    Base64,
    QuotedPrintable,
    /// Anything else: treated as identity (RFC 8621 §4.1.4 `blobId`), and an
    /// encoding problem for body values.
    Unknown,
}

/// Where decoded octets go: a buffer, or a counter for `size`.
pub(super) trait Sink {
    fn push(&mut self, byte: u8);
    fn extend_from(&mut self, bytes: &[u8]);
}

impl Sink for Vec<u8> {
    fn push(&mut self, byte: u8) {
        Vec::push(self, byte);
    }
    fn extend_from(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

pub(super) struct Count(pub(super) usize);

impl Sink for Count {
    fn push(&mut self, _byte: u8) {
        self.0 += 1;
    }
    fn extend_from(&mut self, bytes: &[u8]) {
        self.0 += bytes.len();
    }
}

/// Decodes `input` into `out`; returns whether the data was malformed.
pub(super) fn transfer_decode(
    encoding: TransferEncoding,
    input: &[u8],
    out: &mut impl Sink,
) -> bool {
    match encoding {
        TransferEncoding::Identity | TransferEncoding::Unknown => {
            out.extend_from(input);
            false
        }
        TransferEncoding::Base64 => base64_decode(input, out),
        TransferEncoding::QuotedPrintable => quoted_printable_decode(input, out),
    }
}

/// RFC 2045 §6.8: characters outside the alphabet are ignored (non-space ones
/// make the data malformed); `=` ends a quantum, decoding resumes after it
/// (concatenated encodings). Four alphabet characters at a quantum boundary,
/// nearly all of a body, are decoded together.
pub(super) fn base64_decode(input: &[u8], out: &mut impl Sink) -> bool {
    let mut acc: u32 = 0;
    let mut count: u32 = 0;
    let mut problem = false;
    let mut i = 0;
    while i < input.len() {
        if count == 0
            && let Some(&[a, b, c, d]) = input.get(i..i + 4)
        {
            let values = [a, b, c, d].map(|octet| BASE64_VALUES[usize::from(octet)]);
            if values.iter().all(|&value| value != NOT_BASE64) {
                let quantum = values
                    .iter()
                    .fold(0u32, |quantum, &value| (quantum << 6) | u32::from(value));
                out.extend_from(&[(quantum >> 16) as u8, (quantum >> 8) as u8, quantum as u8]);
                i += 4;
                continue;
            }
        }
        let byte = input[i];
        i += 1;
        let value = match BASE64_VALUES[usize::from(byte)] {
            NOT_BASE64 => {
                match byte {
                    b'=' => {
                        problem |= end_quantum(acc, count, out);
                        acc = 0;
                        count = 0;
                    }
                    b' ' | b'\t' | b'\r' | b'\n' => {}
                    _ => problem = true,
                }
                continue;
            }
            value => value,
        };
        acc = (acc << 6) | u32::from(value);
        count += 1;
        if count == 4 {
            out.extend_from(&[(acc >> 16) as u8, (acc >> 8) as u8, acc as u8]);
            acc = 0;
            count = 0;
        }
    }
    problem | end_quantum(acc, count, out)
}

/// Writes the octets of a quantum cut short (by `=` or the end of the data)
/// after `count` of its characters, whose bits are in `acc`; returns whether
/// it was malformed (a single character carries no whole octet).
fn end_quantum(acc: u32, count: u32, out: &mut impl Sink) -> bool {
    match count {
        2 => out.push((acc >> 4) as u8),
        3 => {
            out.push((acc >> 10) as u8);
            out.push((acc >> 2) as u8);
        }
        1 => return true,
        _ => {}
    }
    false
}

/// RFC 2045 §6.7: `=XX` (either case) is an octet, `=` at the end of a line
/// a soft line break, trailing white space on a line is transport padding
/// and is removed; a malformed `=` is kept as is (and reported).
pub(super) fn quoted_printable_decode(input: &[u8], out: &mut impl Sink) -> bool {
    let mut problem = false;
    for line in input.split_inclusive(|&b| b == b'\n') {
        let (content, ending): (&[u8], &[u8]) = if let Some(content) = line.strip_suffix(b"\r\n") {
            (content, b"\r\n")
        } else if let Some(content) = line.strip_suffix(b"\n") {
            (content, b"\n")
        } else {
            (line, b"")
        };
        let content = content.trim_ascii_end();
        let (content, soft) = match content.strip_suffix(b"=") {
            Some(content) => (content, true),
            None => (content, false),
        };
        let mut i = 0;
        while i < content.len() {
            // The octets up to the next `=` stand for themselves.
            let literal = content[i..]
                .iter()
                .position(|&b| b == b'=')
                .map_or(content.len(), |at| i + at);
            out.extend_from(&content[i..literal]);
            i = literal;
            if i == content.len() {
                break;
            }
            if let (Some(high), Some(low)) = (
                content.get(i + 1).and_then(|&b| hex_value(b)),
                content.get(i + 2).and_then(|&b| hex_value(b)),
            ) {
                out.push(high * 16 + low);
                i += 3;
                continue;
            }
            problem = true;
            out.push(b'=');
            i += 1;
        }
        if !soft {
            out.extend_from(ending);
        }
    }
    problem
}

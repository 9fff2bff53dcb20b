//! The Text form of a header field (RFC 8621 §4.1.2.1) and what it shares
//! with body parts ([`super::body`]): RFC 2047 encoded words and charset
//! decoding. [`super::header`] re-exports what the rest of the crate uses.

use std::borrow::Cow;

use mail_parser::decoders::charsets::map::charset_decoder;

use super::lexical::{base64_value, hex_value};
use super::transfer::{base64_decode, quoted_printable_decode};

/// RFC 5322 §2.2.3 unfolding: every CRLF (or bare LF) inside a field value is
/// a fold and is removed; the white space after it stays.
pub(super) fn unfold(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars().peekable();
    while let Some(ch) = chars.next() {
        match ch {
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' => {}
            _ => out.push(ch),
        }
    }
    out
}

/// The Text form (RFC 8621 §4.1.2.2): unfolded, leading white space removed,
/// RFC 2047 encoded words with a known charset decoded where RFC 2047 §5(1)
/// allows them (whole white-space-delimited words). Trailing white space is
/// kept, as the RFC only removes leading SP.
///
/// NFC normalisation (step 5) is not applied: it needs a Unicode
/// normalisation table the crate does not depend on yet.
pub fn text_form(raw: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    let unfolded = unfold(raw);
    // RFC 8621 §4.1.2.2 step 5: the result in Normalization Form C.
    decode_words(unfolded.trim_start_matches([' ', '\t']))
        .nfc()
        .collect()
}

/// A parsed RFC 2047 encoded word: the charset label (RFC 2231 §5 language
/// suffix removed) and the decoded octets.
pub(super) struct EncodedWord {
    charset: String,
    bytes: Vec<u8>,
}

/// Parses `=?charset?B|Q?text?=` (RFC 2047 §2, §4); `None` when the word is not
/// syntactically an encoded word or names an unknown charset.
pub(super) fn encoded_word(word: &str) -> Option<EncodedWord> {
    let inner = word.strip_prefix("=?")?.strip_suffix("?=")?;
    let mut fields = inner.split('?');
    let (charset, encoding, text) = (fields.next()?, fields.next()?, fields.next()?);
    if fields.next().is_some() {
        return None;
    }
    let charset = charset
        .split_once('*')
        .map_or(charset, |(charset, _language)| charset);
    const ESPECIALS: &[u8] = b"()<>@,;:\"/[]?.=";
    if charset.is_empty()
        || !charset
            .bytes()
            .all(|b| b.is_ascii_graphic() && !ESPECIALS.contains(&b))
    {
        return None;
    }
    lookup_charset(charset)?;
    let bytes = match encoding {
        "B" | "b" => decode_b(text)?,
        "Q" | "q" => decode_q(text)?,
        _ => return None,
    };
    Some(EncodedWord {
        charset: charset.to_ascii_lowercase(),
        bytes,
    })
}

/// RFC 2047 §4.1 "B" encoding: base64 exactly as RFC 2045 §6.8 writes it,
/// in whole 4-character groups with at most two `=` of padding at the end;
/// anything else is not an encoded word (it stays literal text).
fn decode_b(text: &str) -> Option<Vec<u8>> {
    if text.is_empty() || !text.len().is_multiple_of(4) {
        return None;
    }
    let data = text.trim_end_matches('=');
    if text.len() - data.len() > 2 || !data.bytes().all(|byte| base64_value(byte).is_some()) {
        return None;
    }
    let mut out = Vec::with_capacity(data.len() * 3 / 4);
    // Checked whole above, so the decoder finds nothing malformed.
    base64_decode(data.as_bytes(), &mut out);
    Some(out)
}

/// RFC 2047 §4.2 "Q" encoding: `_` is SP, `=XX` an octet, other printable
/// ASCII itself; the encoded text is at least one character (§2). Between
/// the underscores it is quoted-printable (RFC 2045 §6.7) without line
/// breaks or white space, so each stretch decodes through that decoder.
fn decode_q(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    let escapes_whole = bytes.iter().enumerate().all(|(at, &byte)| {
        byte != b'='
            || (bytes.get(at + 1).and_then(|&b| hex_value(b)).is_some()
                && bytes.get(at + 2).and_then(|&b| hex_value(b)).is_some())
    });
    if text.is_empty() || !escapes_whole || !bytes.iter().all(u8::is_ascii_graphic) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len());
    for (index, stretch) in bytes.split(|&byte| byte == b'_').enumerate() {
        if index > 0 {
            out.push(b' ');
        }
        // Checked whole above: no `=` is malformed, no line break, no padding.
        quoted_printable_decode(stretch, &mut out);
    }
    Some(out)
}

/// Collects the decoded octets of consecutive encoded words so that a
/// character split over two words (same charset) is decoded whole.
#[derive(Default)]
pub(super) struct WordRun {
    pending: Option<EncodedWord>,
}

impl WordRun {
    pub(super) fn push(&mut self, word: EncodedWord, out: &mut String) {
        match &mut self.pending {
            // Stateful ISO-2022 words each end back in ASCII (RFC 1468), so a
            // character never spans two of them; joined, the escape pair at the
            // seam would decode as U+FFFD (WHATWG decoder), so they stay apart.
            Some(pending)
                if pending.charset == word.charset
                    && !word.charset.to_ascii_lowercase().starts_with("iso-2022") =>
            {
                pending.bytes.extend(word.bytes)
            }
            _ => {
                self.flush(out);
                self.pending = Some(word);
            }
        }
    }

    pub(super) fn flush(&mut self, out: &mut String) {
        if let Some(word) = self.pending.take() {
            let (text, _problem) = decode_bytes(Some(&word.charset), &word.bytes);
            // RFC 8621 §4.1.2.2: NUL and control characters from encoded words are dropped.
            out.extend(text.chars().filter(|c| !c.is_control()));
        }
    }
}

/// Decodes the encoded words of unstructured text (RFC 2047 §5(1), §6.2):
/// only a whole word delimited by white space (or the ends) is decoded, and
/// white space between two encoded words is removed.
pub(crate) fn decode_words(text: &str) -> String {
    if !text.contains("=?") {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut run = WordRun::default();
    let mut pending_space = "";
    let mut last_encoded = false;
    let mut rest = text;
    while !rest.is_empty() {
        let space_len = rest.len() - rest.trim_start_matches([' ', '\t']).len();
        if space_len > 0 {
            pending_space = &rest[..space_len];
            rest = &rest[space_len..];
            continue;
        }
        let word_len = rest.find([' ', '\t']).unwrap_or(rest.len());
        let word = &rest[..word_len];
        rest = &rest[word_len..];
        if let Some(encoded) = encoded_word(word) {
            if !last_encoded {
                out.push_str(pending_space);
            }
            run.push(encoded, &mut out);
            last_encoded = true;
        } else {
            run.flush(&mut out);
            out.push_str(pending_space);
            out.push_str(word);
            last_encoded = false;
        }
        pending_space = "";
    }
    run.flush(&mut out);
    out.push_str(pending_space);
    out
}

// ---------------------------------------------------------------------------
// Charsets

/// A charset label resolved to a decoder.
#[derive(Clone, Copy)]
pub(crate) enum Charset {
    /// UTF-8 (and its aliases).
    Utf8,
    /// US-ASCII (and its aliases): octets above 127 are malformed.
    Ascii,
    /// Any other charset mail-parser (with `full_encoding`) knows.
    Other(fn(&[u8]) -> String),
}

/// Resolves a charset label (case-insensitive); `None` when unknown.
pub(crate) fn lookup_charset(label: &str) -> Option<Charset> {
    let label = label.trim().trim_matches('"').to_ascii_lowercase();
    match label.as_str() {
        // Python's email package alias for GB2312, seen in list mail.
        "eucgb2312_cn" => charset_decoder(b"gb2312").map(Charset::Other),
        "utf-8" | "utf8" | "unicode-1-1-utf-8" | "unicode11utf8" | "unicode20utf8"
        | "x-unicode20utf8" => Some(Charset::Utf8),
        "us-ascii" | "ascii" | "us" | "ansi_x3.4-1968" | "ansi_x3.4-1986" | "iso646-us"
        | "iso-ir-6" | "iso_646.irv:1991" | "cp367" | "ibm367" | "csascii" => Some(Charset::Ascii),
        _ => charset_decoder(label.as_bytes()).map(Charset::Other),
    }
}

/// Decodes octets in the labelled charset (`None`: the MIME default US-ASCII).
/// Returns the text and whether there was an encoding problem (RFC 8621
/// §4.1.4 `isEncodingProblem`): unknown charset, or malformed octets for it.
///
/// Heuristics (allowed by RFC 8621 §4.1.4 bodyValues `value`): octets that
/// are not valid for an ASCII label or an unknown charset are decoded as
/// UTF-8 when they are valid UTF-8, else as windows-1252, so no octet is lost.
pub(crate) fn decode_bytes(label: Option<&str>, bytes: &[u8]) -> (String, bool) {
    decode_text(label, Cow::Borrowed(bytes))
}

/// [`decode_bytes`] of octets the caller owns: ASCII and valid UTF-8 become
/// the text without a copy.
pub(crate) fn decode_owned(label: Option<&str>, bytes: Vec<u8>) -> (String, bool) {
    decode_text(label, Cow::Owned(bytes))
}

/// What [`decode_bytes`] and [`decode_owned`] do: borrowed octets are
/// copied once, owned ones are not copied when they are the text.
fn decode_text(label: Option<&str>, bytes: Cow<'_, [u8]>) -> (String, bool) {
    let charset = match label {
        None => Some(Charset::Ascii),
        Some(label) => lookup_charset(label),
    };
    match charset {
        Some(Charset::Other(decoder)) => {
            let text = decoder(&bytes);
            let problem = text.contains('\u{FFFD}');
            (text, problem)
        }
        // UTF-8, ASCII, or a charset not known.
        _ => {
            let utf8 = matches!(charset, Some(Charset::Utf8));
            let clean = utf8 || (matches!(charset, Some(Charset::Ascii)) && bytes.is_ascii());
            match String::from_utf8(bytes.into_owned()) {
                Ok(text) => (text, !clean),
                Err(error) if utf8 => {
                    (String::from_utf8_lossy(error.as_bytes()).into_owned(), true)
                }
                Err(error) => (guess_utf8_or_1252(error.as_bytes()), true),
            }
        }
    }
}

fn guess_utf8_or_1252(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => text.to_string(),
        Err(_) => match charset_decoder(b"windows-1252") {
            Some(decoder) => decoder(bytes),
            None => String::from_utf8_lossy(bytes).into_owned(),
        },
    }
}

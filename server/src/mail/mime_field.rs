//! MIME fields with parameters (RFC 2045 §5.1, RFC 2183, RFC 2231): a
//! Content-Type or Content-Disposition value and its parameters, RFC 2231
//! continuations and charsets joined, as [`super::body`] reads them.

use std::collections::BTreeMap;

use super::header::{decode_bytes, lookup_charset};
use super::lexical::{hex_value, read_quoted, skip_comment};

/// `type/subtype` with both halves non-empty.
pub(super) fn is_media_type(value: &str) -> bool {
    value
        .split_once('/')
        .is_some_and(|(t, s)| !t.is_empty() && !s.is_empty() && !s.contains('/'))
}

/// Removes RFC 5322 comments (outside quoted strings).
pub(super) fn strip_comments(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut depth = 0usize;
    let mut quoted = false;
    let mut escaped = false;
    for ch in value.chars() {
        if escaped {
            escaped = false;
            if depth == 0 {
                out.push(ch);
            }
            continue;
        }
        match ch {
            '\\' if quoted || depth > 0 => {
                escaped = true;
                if depth == 0 {
                    out.push(ch);
                }
            }
            '"' if depth == 0 => {
                quoted = !quoted;
                out.push(ch);
            }
            '(' if !quoted => depth += 1,
            ')' if !quoted && depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(ch),
            _ => {}
        }
    }
    out
}

/// A Content-Type or Content-Disposition value: the lowercase main value
/// (CFWS removed) and the parameters with RFC 2231 continuations joined.
#[derive(Debug, Default)]
pub(super) struct MimeField {
    pub(super) value: String,
    params: Vec<(String, String)>,
}

/// The pieces of one parameter before RFC 2231 assembly.
#[derive(Default)]
struct ParamParts {
    plain: Option<String>,
    /// `name*=charset'lang'value`.
    extended: Option<String>,
    /// `name*N=` / `name*N*=`: section number → (percent-encoded, value).
    sections: BTreeMap<u32, (bool, String)>,
}

impl MimeField {
    pub(super) fn parse(raw: &str) -> Self {
        let chars: Vec<char> = raw.chars().collect();
        let (value, mut i) = main_value(&chars);
        let mut order: Vec<String> = Vec::new();
        let mut parts: BTreeMap<String, ParamParts> = BTreeMap::new();
        while i < chars.len() {
            let (next, param) = read_param(&chars, i);
            i = next;
            let Some((attribute, param_value)) = param else {
                continue;
            };
            if attribute.is_empty() {
                continue;
            }
            let Some((base, section)) = param_section(&attribute) else {
                continue;
            };
            if !parts.contains_key(&base) {
                order.push(base.clone());
            }
            parts.entry(base).or_default().add(section, param_value);
        }
        Self {
            value: value.to_ascii_lowercase(),
            params: assemble_params(order, parts),
        }
    }

    pub(super) fn param(&self, name: &str) -> Option<String> {
        self.params
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    }
}

/// The main value of a field (up to the first `;`), CFWS removed and
/// quoted strings unquoted, and where it ends.
fn main_value(chars: &[char]) -> (String, usize) {
    let mut i = 0;
    let mut value = String::new();
    while i < chars.len() && chars[i] != ';' {
        match chars[i] {
            '(' => i = skip_comment(chars, i),
            ch if ch.is_whitespace() => i += 1,
            '"' => {
                let (quoted, next) = read_quoted(chars, i);
                value.push_str(&quoted);
                i = next;
            }
            ch => {
                value.push(ch);
                i += 1;
            }
        }
    }
    (value, i)
}

/// The parameter after the `;` (or junk) at `i`: its lowercase attribute
/// (spaces removed) and its value (unquoted, or a token without comments),
/// `None` when it has no `=`; and where the next one starts.
fn read_param(chars: &[char], mut i: usize) -> (usize, Option<(String, String)>) {
    // Skip the `;` and CFWS.
    i += 1;
    while i < chars.len() && (chars[i].is_whitespace() || chars[i] == '(') {
        i = if chars[i] == '(' {
            skip_comment(chars, i)
        } else {
            i + 1
        };
    }
    let start = i;
    while i < chars.len() && chars[i] != '=' && chars[i] != ';' {
        i += 1;
    }
    if i >= chars.len() || chars[i] == ';' {
        return (i, None);
    }
    let attribute: String = chars[start..i]
        .iter()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        .to_ascii_lowercase();
    i += 1;
    while i < chars.len() && chars[i].is_whitespace() {
        i += 1;
    }
    let param_value = if i < chars.len() && chars[i] == '"' {
        let (quoted, next) = read_quoted(chars, i);
        i = next;
        while i < chars.len() && chars[i] != ';' {
            i += 1;
        }
        quoted
    } else {
        let start = i;
        while i < chars.len() && chars[i] != ';' {
            i += 1;
        }
        let token: String = chars[start..i].iter().collect();
        strip_comments(&token).trim().to_string()
    };
    (i, Some((attribute, param_value)))
}

/// A piece of a parameter (RFC 2231 §3–4): `None` for a plain value,
/// `Some((None, true))` for `name*`, `Some((Some(n), encoded))` for section `n`.
type Section = Option<(Option<u32>, bool)>;

/// Which piece of a parameter an attribute names (RFC 2231 §3–4): its base
/// name and its [`Section`]; `None` when the section number is not one.
fn param_section(attribute: &str) -> Option<(String, Section)> {
    match attribute.split_once('*') {
        None => Some((attribute.to_string(), None)),
        Some((base, "")) => Some((base.to_string(), Some((None, true)))),
        Some((base, rest)) => {
            let (number, encoded) = match rest.strip_suffix('*') {
                Some(number) => (number, true),
                None => (rest, false),
            };
            let number = number.parse::<u32>().ok()?;
            Some((base.to_string(), Some((Some(number), encoded))))
        }
    }
}

impl ParamParts {
    /// Keeps a piece of the parameter ([`param_section`]); the first of
    /// each wins.
    fn add(&mut self, section: Section, value: String) {
        match section {
            None => {
                self.plain.get_or_insert(value);
            }
            Some((None, _)) => {
                self.extended.get_or_insert(value);
            }
            Some((Some(number), encoded)) => {
                self.sections.entry(number).or_insert((encoded, value));
            }
        }
    }
}

/// The parameters in the order first named, each assembled from its
/// pieces: sections, else the extended value, else the plain one.
fn assemble_params(
    order: Vec<String>,
    mut parts: BTreeMap<String, ParamParts>,
) -> Vec<(String, String)> {
    order
        .into_iter()
        .filter_map(|name| {
            let slot = parts.remove(&name)?;
            let value = if !slot.sections.is_empty() {
                assemble_sections(&slot.sections)
            } else if let Some(extended) = slot.extended {
                let (charset, encoded) = split_charset(&extended);
                decode_param_bytes(charset, &percent_decode(encoded))
            } else {
                slot.plain?
            };
            Some((name, value))
        })
        .collect()
}

/// RFC 2231 §3–4: joins numbered sections in order; encoded sections are
/// percent-decoded, and the charset of section 0 decodes the joined octets
/// (so a character split between sections survives).
fn assemble_sections(sections: &BTreeMap<u32, (bool, String)>) -> String {
    let mut bytes = Vec::new();
    let mut charset = None;
    for (number, (encoded, value)) in sections {
        if *encoded {
            let data = if *number == 0 {
                let (label, data) = split_charset(value);
                charset = label;
                data
            } else {
                value.as_str()
            };
            bytes.extend(percent_decode(data));
        } else {
            bytes.extend(value.as_bytes());
        }
    }
    decode_param_bytes(charset, &bytes)
}

/// Splits `charset'language'data`; without both quotes there is no charset.
fn split_charset(value: &str) -> (Option<&str>, &str) {
    let mut pieces = value.splitn(3, '\'');
    match (pieces.next(), pieces.next(), pieces.next()) {
        (Some(charset), Some(_language), Some(data)) => {
            (Some(charset).filter(|c| !c.is_empty()), data)
        }
        _ => (None, value),
    }
}

/// Decodes parameter octets: in the given charset when it is known, else as
/// UTF-8 when valid, else windows-1252.
fn decode_param_bytes(charset: Option<&str>, bytes: &[u8]) -> String {
    match charset.filter(|label| lookup_charset(label).is_some()) {
        Some(label) => decode_bytes(Some(label), bytes).0,
        None => decode_bytes(None, bytes).0,
    }
}

fn percent_decode(value: &str) -> Vec<u8> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let (Some(high), Some(low)) = (
                bytes.get(i + 1).and_then(|&b| hex_value(b)),
                bytes.get(i + 2).and_then(|&b| hex_value(b)),
            )
        {
            out.push(high * 16 + low);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
}

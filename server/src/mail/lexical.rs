//! The lexical facts of mail text that more than one reader needs, written
//! once (issue 44: one parser per fact): the RFC 5322 §3.2.4 quoted-string
//! and §3.2.2 comment, RFC 5322 `atext`, the RFC 2045 §6.8 base64 alphabet and the hex digits of RFC 2045 §6.7 and
//! RFC 2047 §4.2. Header fields (`header.rs`) and body parts (`body.rs`)
//! read through these, so a quoted name and a quoted parameter, or a "B"
//! encoded word and a base64 body, agree on every octet.

/// Reads a quoted-string starting at the `"` at `start`: its content
/// (quoted-pairs decoded, folds removed) and the index after the closing
/// quote (`chars.len()` when it is unclosed).
pub(crate) fn read_quoted(chars: &[char], start: usize) -> (String, usize) {
    let (text, next, _) = quoted_string(chars, start);
    (text, next)
}

/// [`read_quoted`] of a quoted-string that is closed; `None` when it runs
/// to the end of `chars` unclosed (a strict reader's refusal).
pub(crate) fn read_closed_quoted(chars: &[char], start: usize) -> Option<(String, usize)> {
    let (text, next, closed) = quoted_string(chars, start);
    closed.then_some((text, next))
}

/// The quoted-string at `start`: content, the index after it, and whether
/// its closing quote was found.
fn quoted_string(chars: &[char], start: usize) -> (String, usize, bool) {
    let mut out = String::new();
    let mut i = start + 1;
    while i < chars.len() {
        match chars[i] {
            '\\' if i + 1 < chars.len() => {
                out.push(chars[i + 1]);
                i += 2;
                continue;
            }
            '"' => return (out, i + 1, true),
            '\r' | '\n' => {}
            ch => out.push(ch),
        }
        i += 1;
    }
    (out, i, false)
}

/// Reads a comment starting at the `(` at `start`: its content (quoted-pairs
/// decoded, folds removed, nested parentheses kept) and the index after its
/// closing `)` (`chars.len()` when it is unclosed).
pub(crate) fn read_comment(chars: &[char], start: usize) -> (String, usize) {
    let (text, next, _) = comment(chars, start);
    (text, next)
}

/// The index after the comment at `start` ([`read_comment`] without its
/// content).
pub(crate) fn skip_comment(chars: &[char], start: usize) -> usize {
    comment(chars, start).1
}

/// [`skip_comment`] of a comment that is closed; `None` when it runs to the
/// end of `chars` unclosed (a strict reader's refusal).
pub(crate) fn skip_closed_comment(chars: &[char], start: usize) -> Option<usize> {
    let (_, next, closed) = comment(chars, start);
    closed.then_some(next)
}

/// The comment at `start`: content, the index after it, and whether its
/// closing parenthesis was found.
fn comment(chars: &[char], start: usize) -> (String, usize, bool) {
    let mut depth = 0;
    let mut out = String::new();
    let mut i = start;
    while i < chars.len() {
        let ch = chars[i];
        match ch {
            '\\' if i + 1 < chars.len() => {
                out.push(chars[i + 1]);
                i += 2;
                continue;
            }
            '(' => {
                depth += 1;
                if depth > 1 {
                    out.push(ch);
                }
            }
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return (out, i + 1, true);
                }
                out.push(ch);
            }
            '\r' | '\n' => {}
            _ => out.push(ch),
        }
        i += 1;
    }
    (out, i, false)
}

/// Whether `c` is RFC 5322 `atext` (RFC 6532: any non-ASCII too).
pub(crate) fn is_atext(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-/=?^_`{|}~".contains(c) || !c.is_ascii()
}

/// What [`BASE64_VALUES`] holds for an octet outside the alphabet.
pub(crate) const NOT_BASE64: u8 = 0xff;

/// The value of each octet in the base64 alphabet (RFC 2045 §6.8, Table 1);
/// [`NOT_BASE64`] for every other octet.
pub(crate) const BASE64_VALUES: [u8; 256] = {
    let mut table = [NOT_BASE64; 256];
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut i = 0;
    while i < alphabet.len() {
        table[alphabet[i] as usize] = i as u8;
        i += 1;
    }
    table
};

/// The 6-bit value of a base64 alphabet octet, `None` for any other.
pub(crate) fn base64_value(byte: u8) -> Option<u8> {
    match BASE64_VALUES[usize::from(byte)] {
        NOT_BASE64 => None,
        value => Some(value),
    }
}

/// The value of a hex digit (either case), `None` for any other octet.
pub(crate) fn hex_value(byte: u8) -> Option<u8> {
    (byte as char).to_digit(16).map(|digit| digit as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_strings_decode_pairs_and_drop_folds() {
        let chars: Vec<char> = "\"a \\\"b\\\\\r\n c\" rest".chars().collect();
        assert_eq!(read_quoted(&chars, 0), ("a \"b\\ c".to_string(), 13));
        let unclosed: Vec<char> = "\"abc".chars().collect();
        assert_eq!(read_quoted(&unclosed, 0), ("abc".to_string(), 4));
        assert_eq!(read_closed_quoted(&unclosed, 0), None);
        assert_eq!(
            read_closed_quoted(&chars, 0),
            Some(("a \"b\\ c".to_string(), 13))
        );
    }

    #[test]
    fn comments_nest_decode_pairs_and_may_be_refused_unclosed() {
        let chars: Vec<char> = "(a (b) \\) c\r\n d) rest".chars().collect();
        assert_eq!(read_comment(&chars, 0), ("a (b) ) c d".to_string(), 16));
        assert_eq!(skip_closed_comment(&chars, 0), Some(16));
        let unclosed: Vec<char> = "(a (b)\\".chars().collect();
        assert_eq!(skip_comment(&unclosed, 0), 7);
        assert_eq!(skip_closed_comment(&unclosed, 0), None);
    }

    #[test]
    fn the_base64_alphabet_and_hex_digits() {
        assert_eq!(base64_value(b'A'), Some(0));
        assert_eq!(base64_value(b'z'), Some(51));
        assert_eq!(base64_value(b'/'), Some(63));
        assert_eq!(base64_value(b'='), None);
        assert_eq!(base64_value(0xff), None);
        assert_eq!(hex_value(b'f'), Some(15));
        assert_eq!(hex_value(b'F'), Some(15));
        assert_eq!(hex_value(b'g'), None);
    }
}

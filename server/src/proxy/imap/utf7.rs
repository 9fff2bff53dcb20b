//! Mailbox names as IMAP writes them: RFC 3501 §5.1.3 modified UTF-7.
//! Printable ASCII stands for itself except `&`, written `&-`; any other
//! run of characters is `&`, its UTF-16BE code units in base64 with `,`
//! for `/` and no padding, then `-`. A name that does not decode is shown
//! as written (it is still the name the upstream knows it by).

use base64::Engine;
use base64::alphabet::Alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

/// RFC 3501 §5.1.3's base64: `,` in place of `/`, no padding.
fn engine() -> GeneralPurpose {
    let alphabet =
        Alphabet::new("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+,")
            .expect("a 64-character alphabet");
    GeneralPurpose::new(
        &alphabet,
        GeneralPurposeConfig::new()
            .with_encode_padding(false)
            .with_decode_padding_mode(DecodePaddingMode::RequireNone),
    )
}

/// The name a mailbox is shown by; `None` when `wire` is not valid
/// modified UTF-7.
pub fn decode(wire: &str) -> Option<String> {
    let mut out = String::with_capacity(wire.len());
    let mut rest = wire;
    while let Some(start) = rest.find('&') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        let end = after.find('-')?;
        let encoded = &after[..end];
        if encoded.is_empty() {
            out.push('&');
        } else {
            let octets = engine().decode(encoded).ok()?;
            if octets.len() % 2 != 0 {
                return None;
            }
            let units: Vec<u16> = octets
                .chunks_exact(2)
                .map(|pair| u16::from_be_bytes([pair[0], pair[1]]))
                .collect();
            out.push_str(&String::from_utf16(&units).ok()?);
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Some(out)
}

/// `name` as IMAP writes it.
pub fn encode(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut pending: Vec<u16> = Vec::new();
    let flush = |pending: &mut Vec<u16>, out: &mut String| {
        if pending.is_empty() {
            return;
        }
        let octets: Vec<u8> = pending.iter().flat_map(|unit| unit.to_be_bytes()).collect();
        out.push('&');
        out.push_str(&engine().encode(octets));
        out.push('-');
        pending.clear();
    };
    for c in name.chars() {
        if (' '..='~').contains(&c) {
            flush(&mut pending, &mut out);
            if c == '&' {
                out.push_str("&-");
            } else {
                out.push(c);
            }
        } else {
            let mut units = [0u16; 2];
            pending.extend_from_slice(c.encode_utf16(&mut units));
        }
    }
    flush(&mut pending, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3501_examples_round_trip() {
        // RFC 3501 §5.1.3: "~peter/mail/台北/日本語".
        let wire = "~peter/mail/&U,BTFw-/&ZeVnLIqe-";
        assert_eq!(decode(wire).as_deref(), Some("~peter/mail/台北/日本語"));
        assert_eq!(encode("~peter/mail/台北/日本語"), wire);
        assert_eq!(decode("Tom &- Jerry").as_deref(), Some("Tom & Jerry"));
        assert_eq!(encode("Tom & Jerry"), "Tom &- Jerry");
        assert_eq!(decode("Entw&APw-rfe").as_deref(), Some("Entwürfe"));
        assert_eq!(encode("Entwürfe"), "Entw&APw-rfe");
        assert_eq!(encode("😀"), "&2D3eAA-");
        assert_eq!(decode("&2D3eAA-").as_deref(), Some("😀"));
    }

    #[test]
    fn broken_names_do_not_decode() {
        assert_eq!(decode("a&bad"), None);
        assert_eq!(decode("&AP-"), None);
        assert_eq!(decode("&2D0-"), None);
    }
}

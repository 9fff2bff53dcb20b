//! The structured header forms (RFC 8621 §4.1.2.3–§4.1.2.5, RFC 5322
//! §3.2, §3.4): a lexer for structured fields, Addresses and GroupedAddresses,
//! MessageIds and URLs, as [`super::header`] renders them.

use super::header_text::{WordRun, decode_words, encoded_word};
use super::lexical::{read_comment, read_quoted};

/// One lexical token of a structured field.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Token {
    /// An atom or dot-atom (`.` is kept inside atoms, as obs-phrase allows it).
    Atom(String),
    /// A quoted-string's content, quoted-pairs decoded and unfolded.
    Quoted(String),
    /// A comment's content (nested comments kept with their parentheses).
    Comment(String),
    /// `<…>` content with CFWS removed.
    Angle(String),
    /// One of `, ; : @`.
    Special(char),
}

/// A token and whether white space or a comment preceded it.
pub(super) type Lexed = (Token, bool);

pub(super) fn lex(value: &str) -> Vec<Lexed> {
    let chars: Vec<char> = value.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    let mut space = false;
    while i < chars.len() {
        let ch = chars[i];
        match ch {
            ' ' | '\t' | '\r' | '\n' => {
                space = true;
                i += 1;
            }
            '(' => {
                let (comment, next) = read_comment(&chars, i);
                tokens.push((Token::Comment(comment), space));
                space = true;
                i = next;
            }
            '"' => {
                let (quoted, next) = read_quoted(&chars, i);
                tokens.push((Token::Quoted(quoted), space));
                space = false;
                i = next;
            }
            '<' => {
                let (angle, next) = read_angle(&chars, i);
                tokens.push((Token::Angle(angle), space));
                space = false;
                i = next;
            }
            ',' | ';' | ':' | '@' => {
                tokens.push((Token::Special(ch), space));
                space = false;
                i += 1;
            }
            '>' | ')' => {
                // Stray closers: best effort, treat as white space.
                space = true;
                i += 1;
            }
            '[' => {
                let start = i;
                while i < chars.len() && chars[i] != ']' {
                    i += 1;
                }
                i = (i + 1).min(chars.len());
                tokens.push((Token::Atom(chars[start..i].iter().collect()), space));
                space = false;
            }
            _ => {
                let start = i;
                while i < chars.len() && !" \t\r\n()\"<>,;:@[".contains(chars[i]) {
                    i += 1;
                }
                tokens.push((Token::Atom(chars[start..i].iter().collect()), space));
                space = false;
            }
        }
    }
    tokens
}

/// Reads `<…>` starting at `<`; returns the content with white space and
/// comments removed (quoted local parts kept with their quotes).
fn read_angle(chars: &[char], start: usize) -> (String, usize) {
    let mut out = String::new();
    let mut i = start + 1;
    while i < chars.len() {
        match chars[i] {
            '>' => return (out, i + 1),
            ' ' | '\t' | '\r' | '\n' => i += 1,
            '(' => i = read_comment(chars, i).1,
            '"' => {
                let (quoted, next) = read_quoted(chars, i);
                out.push('"');
                out.push_str(&quoted);
                out.push('"');
                i = next;
            }
            ch => {
                out.push(ch);
                i += 1;
            }
        }
    }
    (out, i)
}

// ---------------------------------------------------------------------------
// Addresses (RFC 8621 §4.1.2.3, §4.1.2.4; RFC 5322 §3.4)

/// An EmailAddress object.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct EmailAddress {
    pub(super) name: Option<String>,
    pub(super) email: String,
}

/// An EmailAddressGroup object; `name` is `None` for mailboxes outside a group.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct AddressGroup {
    pub(super) name: Option<String>,
    pub(super) addresses: Vec<EmailAddress>,
}

/// Builds a display name from phrase tokens (RFC 8621 §4.1.2.3): quoted
/// strings unquoted, encoded words decoded (not inside quoted strings, RFC
/// 2047 §5(3)), white space between words one SP, trimmed. `None` when empty.
fn phrase(tokens: &[Lexed]) -> Option<String> {
    let mut out = String::new();
    let mut run = WordRun::default();
    let mut last_encoded = false;
    let mut first = true;
    let mut comment_between = false;
    for (token, space) in tokens {
        let space = (*space || comment_between) && !first;
        comment_between = false;
        let text = match token {
            Token::Atom(atom) => {
                if let Some(word) = encoded_word(atom) {
                    if space && !last_encoded {
                        out.push(' ');
                    }
                    run.push(word, &mut out);
                    last_encoded = true;
                    first = false;
                    continue;
                }
                atom.as_str()
            }
            Token::Quoted(quoted) => quoted.as_str(),
            Token::Special(ch) => {
                // A stray `@` or `:` inside a phrase: keep it as text.
                run.flush(&mut out);
                out.push(*ch);
                last_encoded = false;
                first = false;
                continue;
            }
            Token::Comment(_) => {
                comment_between = true;
                continue;
            }
            Token::Angle(_) => continue,
        };
        run.flush(&mut out);
        if space {
            out.push(' ');
        }
        out.push_str(text);
        last_encoded = false;
        first = false;
    }
    run.flush(&mut out);
    let trimmed = out.trim();
    (!trimmed.is_empty()).then(|| trimmed.to_string())
}

/// A name taken from a comment (RFC 8621 §4.1.2.3: "a comment immediately
/// following the addr-spec"); encoded words in comments are allowed (RFC 2047 §5(2)).
fn comment_name(comment: &str) -> Option<String> {
    let decoded = decode_words(comment.trim());
    let trimmed = decoded.trim();
    (!trimmed.is_empty()).then(|| trimmed.to_string())
}

/// Turns the tokens of one address (between separators) into a mailbox.
fn mailbox(tokens: &[Lexed]) -> Option<EmailAddress> {
    if let Some(angle) = tokens
        .iter()
        .position(|(t, _)| matches!(t, Token::Angle(_)))
    {
        let Token::Angle(addr) = &tokens[angle].0 else {
            return None;
        };
        // obs-route: `<@a,@b:user@host>`.
        let email = match addr.strip_prefix('@').and_then(|_| addr.split_once(':')) {
            Some((_route, email)) => email.to_string(),
            None => addr.clone(),
        };
        let name = phrase(&tokens[..angle]).or_else(|| match tokens.get(angle + 1) {
            Some((Token::Comment(comment), _)) => comment_name(comment),
            _ => None,
        });
        return Some(EmailAddress { name, email });
    }
    let mut email = String::new();
    let mut name = None;
    let mut seen = false;
    for (token, space) in tokens {
        match token {
            Token::Comment(comment) => {
                if seen && name.is_none() {
                    name = comment_name(comment);
                }
                continue;
            }
            Token::Atom(text) => {
                if *space
                    && seen
                    && !email.ends_with('@')
                    && !email.ends_with('.')
                    && !text.starts_with('.')
                {
                    email.push(' ');
                }
                email.push_str(text);
            }
            Token::Quoted(text) => {
                if *space && seen && !email.ends_with('@') {
                    email.push(' ');
                }
                email.push('"');
                email.push_str(text);
                email.push('"');
            }
            Token::Special(ch) => email.push(*ch),
            Token::Angle(_) => {}
        }
        seen = true;
    }
    let email = email.trim().to_string();
    (!email.is_empty()).then_some(EmailAddress { name, email })
}

/// Parses an address-list (RFC 5322 §3.4, best effort) into groups; mailboxes
/// outside a group are collected in groups without a name, consecutive ones
/// together (RFC 8621 §4.1.2.4).
pub(super) fn address_list(raw: &str) -> Vec<AddressGroup> {
    let tokens = lex(raw);
    let mut groups: Vec<AddressGroup> = Vec::new();
    let mut current: Vec<Lexed> = Vec::new();
    // The open group's name, once its `:` was seen.
    let mut group: Option<AddressGroup> = None;

    fn push_ungrouped(groups: &mut Vec<AddressGroup>, address: EmailAddress) {
        match groups.last_mut() {
            Some(last) if last.name.is_none() => last.addresses.push(address),
            _ => groups.push(AddressGroup {
                name: None,
                addresses: vec![address],
            }),
        }
    }

    let finish = |current: &mut Vec<Lexed>,
                  group: &mut Option<AddressGroup>,
                  groups: &mut Vec<AddressGroup>| {
        if let Some(address) = mailbox(current) {
            match group {
                Some(group) => group.addresses.push(address),
                None => push_ungrouped(groups, address),
            }
        }
        current.clear();
    };

    for lexed in tokens {
        match lexed.0 {
            Token::Special(',') => finish(&mut current, &mut group, &mut groups),
            Token::Special(';') => {
                finish(&mut current, &mut group, &mut groups);
                if let Some(group) = group.take() {
                    groups.push(group);
                }
            }
            Token::Special(':')
                if group.is_none()
                    && !current
                        .iter()
                        .any(|(t, _)| matches!(t, Token::Angle(_) | Token::Special('@'))) =>
            {
                group = Some(AddressGroup {
                    name: phrase(&current),
                    addresses: Vec::new(),
                });
                current.clear();
            }
            _ => current.push(lexed),
        }
    }
    finish(&mut current, &mut group, &mut groups);
    if let Some(group) = group.take() {
        groups.push(group);
    }
    groups
}

// ---------------------------------------------------------------------------
// MessageIds and URLs

/// The `<…>` items of a field, comments and quoted strings outside them
/// skipped, white space inside removed; empty items dropped.
fn angle_items(raw: &str) -> Vec<String> {
    lex(raw)
        .into_iter()
        .filter_map(|(token, _)| match token {
            Token::Angle(item) if !item.is_empty() => Some(item),
            _ => None,
        })
        .collect()
}

/// The MessageIds form (RFC 8621 §4.1.2.5; RFC 5322 §3.6.4): every msg-id
/// without its angle brackets. Words between ids (obs-in-reply-to,
/// obs-references) are ignored; `None` when the field holds no msg-id.
pub(super) fn message_ids(raw: &str) -> Option<Vec<String>> {
    let ids = angle_items(raw);
    (!ids.is_empty()).then_some(ids)
}

/// The URLs form (RFC 8621 §4.1.2.7; RFC 2369 §2): the `<…>` URLs without
/// brackets, comments and folding white space removed; `None` when the field
/// holds no URL (e.g. `List-Post: NO`).
pub(super) fn urls(raw: &str) -> Option<Vec<String>> {
    let urls = angle_items(raw);
    (!urls.is_empty()).then_some(urls)
}

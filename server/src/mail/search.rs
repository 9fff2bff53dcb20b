//! Full-text search (RFC 8621 §4.4.1 `text` and `body`, §5 SearchSnippet):
//! what is indexed of a message, how text is cut into words, how a query is
//! read, and how a snippet marks the words it matched. The store keeps the
//! words (SQLite FTS5, PostgreSQL `tsvector`, `store/`); everything that
//! decides what matches is here, once, for both.
//!
//! The match rules:
//! - Text is cut into words: runs of letters and digits; every other
//!   character separates words. A Chinese, Japanese or Korean character is a
//!   word of its own (those scripts do not separate words with spaces), and a
//!   run of them in a query is matched as a phrase, so `東京` finds 東京 but
//!   not 京東.
//! - Case and diacritics do not matter: words are compared after Unicode
//!   compatibility decomposition (NFKD) with combining marks removed and
//!   lowercased, so `Zoë`, `ZOE` and `zoe` are one word (CJK characters are
//!   only width-folded, NFKC, so that a voiced kana keeps its mark).
//! - Every word of a query must be found (AND), anywhere in the searched
//!   fields, and a query word matches the words it begins: `confer` finds
//!   "conference".
//! - Words in double quotes are a phrase: they must be found next to each
//!   other in that order, each whole (`"project alpha"`).
//! - `text` searches the subject, the From, To, Cc and Bcc names and
//!   addresses, the text of the `textBody` parts (HTML turned into text the
//!   way `preview` is) and attachment names; `body` only the body text and
//!   attachment names.
//! - At most [`MAX_BODY_CHARS`] characters of body text are indexed per
//!   message.

use mail_parser::Message;
use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

use super::body::{self, BodyPart};
use crate::store::{EmailIndex, SearchScope, SearchTerm, SearchText, TextSearch};

/// Characters of body text indexed per message (the rest is not searchable).
pub const MAX_BODY_CHARS: usize = 256 * 1024;

/// Words longer than this many characters are not indexed (base64 runs,
/// hashes): nobody searches for them and they bloat the index.
pub const MAX_WORD_CHARS: usize = 64;

/// Whether `c` is a character of a script written without spaces between
/// words (Han, Hiragana, Katakana, Hangul, and their compatibility forms).
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // Hiragana, Katakana
        | 0x3400..=0x4DBF    // CJK Unified Ideographs Extension A
        | 0x4E00..=0x9FFF    // CJK Unified Ideographs
        | 0xAC00..=0xD7AF    // Hangul Syllables
        | 0xF900..=0xFAFF    // CJK Compatibility Ideographs
        | 0xFF66..=0xFF9F    // Halfwidth Katakana
        | 0x20000..=0x2FFFF) // CJK Extensions B–F, Compatibility Supplement
}

/// The words of `text`, folded (the module docs give the rules), in order.
/// `on_word` gets each one.
fn for_each_word(text: &str, mut on_word: impl FnMut(&str)) {
    let mut word = String::new();
    let mut chars = 0usize;
    let mut flush = |word: &mut String, chars: &mut usize| {
        if !word.is_empty() && *chars <= MAX_WORD_CHARS {
            on_word(word);
        }
        word.clear();
        *chars = 0;
    };
    for c in text.nfkc() {
        if is_cjk(c) {
            flush(&mut word, &mut chars);
            let mut one = [0u8; 4];
            word.push_str(c.encode_utf8(&mut one));
            chars = 1;
            flush(&mut word, &mut chars);
            continue;
        }
        if !c.is_alphanumeric() {
            flush(&mut word, &mut chars);
            continue;
        }
        for d in std::iter::once(c).nfkd().filter(|d| !is_combining_mark(*d)) {
            for lower in d.to_lowercase() {
                word.push(lower);
                chars += 1;
            }
        }
    }
    flush(&mut word, &mut chars);
}

/// The folded words of `text`.
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_word(text, |word| out.push(word.to_string()));
    out
}

/// The folded words of `text`, one space between them: what the store
/// indexes (its tokenizer then only splits at the spaces).
fn word_text(text: &str, out: &mut String) {
    for_each_word(text, |word| {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    });
}

/// What the index keeps of a message: the words of its headers (subject,
/// From, To, Cc, Bcc names and addresses, from the stored query index, so
/// they are the values Email/get renders) and of its body (textBody text,
/// HTML as text, and attachment names).
pub fn document(message: &Message<'_>, index: &EmailIndex) -> SearchText {
    let mut headers = String::new();
    for field in [
        &index.subject,
        &index.from_text,
        &index.to_text,
        &index.cc_text,
        &index.bcc_text,
    ] {
        word_text(field, &mut headers);
    }
    let mut body = String::new();
    let mut budget = MAX_BODY_CHARS;
    for text in body_texts(message) {
        let taken: String = text.chars().take(budget).collect();
        budget -= taken.chars().count();
        word_text(&taken, &mut body);
        if budget == 0 {
            break;
        }
    }
    if let Some(tree) = BodyPart::tree(message) {
        for part in tree.partition().attachments {
            if let Some(name) = part.name() {
                word_text(name, &mut body);
            }
        }
    }
    SearchText { headers, body }
}

/// The text of the message's `textBody` parts, HTML turned into text as
/// `preview` does it.
pub fn body_texts(message: &Message<'_>) -> Vec<String> {
    body::text_body_texts(message)
        .into_iter()
        .map(body_text_of)
        .collect()
}

/// The searchable text of one body part: HTML turned into text as
/// `preview` does it.
pub fn body_text_of(part: body::BodyText) -> String {
    match part.html {
        true => mail_parser::decoders::html::html_to_text(&part.text),
        false => part.text,
    }
}

/// `text` with every run of white space (and control characters) as one
/// space, trimmed: how a snippet's `preview` shows body text, as `preview`
/// itself does.
pub fn collapsed(text: &str) -> String {
    text.split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|piece| !piece.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Reads a `text` or `body` filter value into the terms the store matches:
/// quoted runs are phrases, every other word a prefix, a run of CJK
/// characters a phrase of them. `None` when it holds no word at all (then
/// it matches every email, as an empty condition does).
pub fn parse_query(value: &str, scope: SearchScope) -> Option<TextSearch> {
    let mut terms = Vec::new();
    for (i, chunk) in value.split('"').enumerate() {
        let quoted = i % 2 == 1;
        if quoted {
            let words = words(chunk);
            if !words.is_empty() {
                terms.push(SearchTerm {
                    prefix: false,
                    words,
                });
            }
            continue;
        }
        for piece in chunk.split_whitespace() {
            // A piece such as `re:project-alpha` holds several words: each
            // must be found, next to the others, as a phrase.
            let words = words(piece);
            match words.len() {
                0 => {}
                1 => terms.push(SearchTerm {
                    prefix: !words[0].chars().any(is_cjk),
                    words,
                }),
                _ => {
                    let last_cjk = words.last().is_some_and(|w| w.chars().any(is_cjk));
                    terms.push(SearchTerm {
                        prefix: !last_cjk,
                        words,
                    })
                }
            }
        }
    }
    (!terms.is_empty()).then_some(TextSearch { scope, terms })
}

/// Marks the words of `text` that match `terms` with `<mark>…</mark>` and
/// escapes the rest for HTML (RFC 8621 §5 SearchSnippet): `None` when no
/// word matches. With `window`, only about that many characters around the
/// first match are kept (the `preview` of a snippet).
pub fn highlight(text: &str, terms: &[SearchTerm], window: Option<usize>) -> Option<String> {
    // The words of `text` with their byte ranges, folded.
    let mut spans: Vec<(usize, usize, String)> = Vec::new();
    let mut start = None;
    for (at, c) in text
        .char_indices()
        .chain(std::iter::once((text.len(), ' ')))
    {
        let part_of_word = at < text.len() && (c.is_alphanumeric() && !is_cjk(c));
        if let Some(from) = start
            && (!part_of_word || is_cjk(c))
        {
            let folded = words(&text[from..at]).join("");
            spans.push((from, at, folded));
            start = None;
        }
        if at < text.len() && is_cjk(c) {
            spans.push((
                at,
                at + c.len_utf8(),
                words(&text[at..at + c.len_utf8()]).join(""),
            ));
        } else if part_of_word && start.is_none() {
            start = Some(at);
        }
    }
    let mut marked = vec![false; spans.len()];
    for term in terms {
        let n = term.words.len();
        if n == 0 || spans.len() < n {
            continue;
        }
        for i in 0..=spans.len() - n {
            let hit = term.words.iter().enumerate().all(|(k, word)| {
                let candidate = &spans[i + k].2;
                if term.prefix && k == n - 1 {
                    candidate.starts_with(word.as_str())
                } else {
                    candidate == word
                }
            });
            if hit {
                marked[i..i + n].iter_mut().for_each(|m| *m = true);
            }
        }
    }
    let first = marked.iter().position(|m| *m)?;
    let (from, to) = match window {
        None => (0, text.len()),
        Some(window) => {
            let anchor = spans[first].0;
            let before = text[..anchor]
                .char_indices()
                .rev()
                .nth(window / 4)
                .map_or(0, |(i, _)| i);
            let after = text[before..]
                .char_indices()
                .nth(window)
                .map_or(text.len(), |(i, _)| before + i);
            (before, after)
        }
    };
    let mut out = String::new();
    let mut at = from;
    for ((start, end, _), mark) in spans.iter().zip(&marked) {
        if !*mark || *start < from || *end > to {
            continue;
        }
        escape_into(&text[at..*start], &mut out);
        out.push_str("<mark>");
        escape_into(&text[*start..*end], &mut out);
        out.push_str("</mark>");
        at = *end;
    }
    escape_into(&text[at..to], &mut out);
    Some(out)
}

fn escape_into(text: &str, out: &mut String) {
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_fold_case_and_diacritics_and_split_cjk() {
        assert_eq!(
            words("Zoë's CAFÉ, naïve-ly 2024"),
            ["zoe", "s", "cafe", "naive", "ly", "2024"]
        );
        assert_eq!(words("会議は東京で"), ["会", "議", "は", "東", "京", "で"]);
        assert_eq!(words("ｆｕｌｌwidth Ｒｅｐｏｒｔ"), ["fullwidth", "report"]);
        assert_eq!(words("Straße"), ["straße"]);
        assert!(words(&"a".repeat(65)).is_empty(), "over MAX_WORD_CHARS");
    }

    #[test]
    fn queries_read_phrases_prefixes_and_cjk_runs() {
        let query =
            parse_query(r#"Confer "project ALPHA" 東京 re:x-y"#, SearchScope::All).expect("terms");
        let terms: Vec<(Vec<&str>, bool)> = query
            .terms
            .iter()
            .map(|t| (t.words.iter().map(String::as_str).collect(), t.prefix))
            .collect();
        assert_eq!(
            terms,
            [
                (vec!["confer"], true),
                (vec!["project", "alpha"], false),
                (vec!["東", "京"], false),
                (vec!["re", "x", "y"], true),
            ]
        );
        assert!(parse_query("  \"\" ,, ", SearchScope::All).is_none());
    }

    #[test]
    fn highlight_marks_matches_and_escapes_the_rest() {
        let terms = parse_query("confer zoe", SearchScope::All).unwrap().terms;
        assert_eq!(
            highlight("<b>Conference</b> with Zoë & co", &terms, None).as_deref(),
            Some("&lt;b&gt;<mark>Conference</mark>&lt;/b&gt; with <mark>Zoë</mark> &amp; co")
        );
        assert_eq!(highlight("nothing here", &terms, None), None);
        let phrase = parse_query("\"project alpha\"", SearchScope::All)
            .unwrap()
            .terms;
        assert_eq!(
            highlight("Alpha project; Project Alpha!", &phrase, None).as_deref(),
            Some("Alpha project; <mark>Project</mark> <mark>Alpha</mark>!")
        );
        let cjk = parse_query("東京", SearchScope::All).unwrap().terms;
        assert_eq!(
            highlight("会議は東京で", &cjk, None).as_deref(),
            Some("会議は<mark>東</mark><mark>京</mark>で")
        );
        let long = format!("{} needle {}", "word ".repeat(200), "tail ".repeat(200));
        let window = highlight(
            &long,
            &parse_query("needle", SearchScope::All).unwrap().terms,
            Some(40),
        )
        .unwrap();
        assert!(window.contains("<mark>needle</mark>"), "{window}");
        assert!(window.chars().count() < 70, "{window}");
    }
}

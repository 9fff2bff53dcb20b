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
//!   fields, and a query word of at least [`MIN_PREFIX_CHARS`] characters
//!   matches the words it begins: `confer` finds "conference". A shorter
//!   one matches only itself: `the` finds "the", not "there" (a prefix of a
//!   few letters begins thousands of words, which is slow to look up and
//!   finds little of use; ADR 0006).
//! - Words in double quotes are a phrase: they must be found next to each
//!   other in that order, each whole (`"project alpha"`).
//! - `text` searches the subject, the From, To, Cc and Bcc names and
//!   addresses, the text of the `textBody` parts (HTML turned into text the
//!   way `preview` is) and attachment names; `body` only the body text and
//!   attachment names.
//! - At most [`MAX_HEADER_WORDS`] header words and [`MAX_BODY_WORDS`] body
//!   words (attachment names first) are indexed per message, and no word
//!   longer than [`MAX_WORD_CHARS`] characters: a query value with a word
//!   longer than that finds nothing (and queries no index). A query holds
//!   at most [`MAX_QUERY_WORDS`] words.
//! - A value with no word in it (`🎉`, `---`) finds nothing; an empty one
//!   (or only spaces) is no condition.
//!
//! Each full-text condition is one query of the index, on a connection of
//! the store's shared read pool, so they are bounded (issue 43, ADR 0005):
//! a filter holds at most [`MAX_TEXT_CONDITIONS`] of them
//! (`unsupportedFilter` beyond), a request runs at most as many in all
//! (`requestTooLarge` for the call that would pass it), and an account runs
//! at most [`MAX_SEARCHES_PER_ACCOUNT`] index queries at once (the others
//! wait for one to end), so one user's searches hold at most that many of
//! the read pool's connections and another user never queues behind them.

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

use super::body::BodyReading;
use crate::store::{EmailIndex, SearchScope, SearchTerm, SearchText, TextSearch};

/// Words of the subject and From/To/Cc/Bcc indexed per message.
pub const MAX_HEADER_WORDS: usize = 2_000;

/// Words of attachment names and body text indexed per message (the rest is
/// not searchable). With [`MAX_HEADER_WORDS`] it stays under PostgreSQL's
/// 16,383 word positions, so a phrase matches alike on both databases.
pub const MAX_BODY_WORDS: usize = 14_000;

/// Words (and CJK characters) a `text` or `body` value may hold:
/// `invalidArguments` beyond.
pub const MAX_QUERY_WORDS: usize = 64;

/// `text` and `body` conditions one filter may hold (`unsupportedFilter`
/// beyond), and full-text conditions one request may run in all, over its
/// Email/query and Email/queryChanges calls (`requestTooLarge` for the call
/// that would pass it).
pub const MAX_TEXT_CONDITIONS: usize = 16;

/// Queries of the full-text index one account runs at once, each on a
/// connection of the store's read pool (a search list view's page and
/// count take both): more wait for one to end.
pub const MAX_SEARCHES_PER_ACCOUNT: usize = 2;

/// Characters of one body part a snippet looks through for a match.
const MAX_SNIPPET_SCAN_CHARS: usize = 256 * 1024;

/// The longest a snippet's `preview` may be, in octets (RFC 8621 §5).
pub const MAX_PREVIEW_OCTETS: usize = 255;

/// The fewest characters a query word needs to match the words it begins
/// (a prefix); a shorter word matches whole words only.
pub const MIN_PREFIX_CHARS: usize = 4;

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

/// The words of `text`, folded (the module docs give the rules), in order;
/// with `max_chars`, words longer than that are skipped. `on_word` gets
/// each one and answers whether to go on.
fn for_each_word(text: &str, max_chars: usize, mut on_word: impl FnMut(&str) -> bool) {
    let mut word = String::new();
    let mut chars = 0usize;
    // Whether to go on.
    let mut flush = |word: &mut String, chars: &mut usize| {
        let go_on = word.is_empty() || *chars > max_chars || on_word(word);
        word.clear();
        *chars = 0;
        go_on
    };
    // Split at ASCII characters that are not letters or digits: they always
    // end a word, and normalization never joins across them (the only
    // compositions starting with one, `=`, `<` or `>` with U+0338, give a
    // symbol, which separates words as the lone mark does). A chunk of plain
    // ASCII (most of most mail, even mail with a few accents) is its own NFKC
    // and NFKD and skips both.
    for chunk in text.split(|c: char| c.is_ascii() && !c.is_ascii_alphanumeric()) {
        if chunk.is_ascii() {
            word.extend(chunk.bytes().map(|b| b.to_ascii_lowercase() as char));
            chars += chunk.len();
        } else if !fold_unicode(chunk, &mut word, &mut chars, &mut flush) {
            return;
        }
        if !flush(&mut word, &mut chars) {
            return;
        }
    }
}

/// The words of `chunk`, a run of text without ASCII separators, through
/// NFKC, folded into `word` (counting `chars`), `flush` called at the end of
/// each word but the last: false when it said to stop.
fn fold_unicode(
    chunk: &str,
    word: &mut String,
    chars: &mut usize,
    flush: &mut impl FnMut(&mut String, &mut usize) -> bool,
) -> bool {
    for c in chunk.nfkc() {
        if c.is_ascii_alphanumeric() {
            word.push(c.to_ascii_lowercase());
            *chars += 1;
            continue;
        }
        if is_cjk(c) {
            if !flush(word, chars) {
                return false;
            }
            let mut one = [0u8; 4];
            word.push_str(c.encode_utf8(&mut one));
            *chars = 1;
            if !flush(word, chars) {
                return false;
            }
            continue;
        }
        if !c.is_alphanumeric() {
            if !flush(word, chars) {
                return false;
            }
            continue;
        }
        for d in std::iter::once(c).nfkd().filter(|d| !is_combining_mark(*d)) {
            for lower in d.to_lowercase() {
                word.push(lower);
                *chars += 1;
            }
        }
    }
    true
}

/// The folded words of `text` the index keeps (none longer than
/// [`MAX_WORD_CHARS`]).
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_word(text, MAX_WORD_CHARS, |word| {
        out.push(word.to_string());
        true
    });
    out
}

/// The folded words of a query value, whatever their length.
fn query_words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_word(text, usize::MAX, |word| {
        out.push(word.to_string());
        true
    });
    out
}

/// Appends the folded words of `text` to `out`, one space between them,
/// while `*left` words may still be added: what the store indexes (its
/// tokenizer then only splits at the spaces). Stops reading `text` when
/// the budget is spent.
fn word_text(text: &str, out: &mut String, left: &mut usize) {
    for_each_word(text, MAX_WORD_CHARS, |word| {
        if *left == 0 {
            return false;
        }
        *left -= 1;
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
        *left > 0
    });
}

/// What the index keeps of a message, from its body read once at ingest
/// (the fast view's `preview` is made of the same texts): the words of its
/// headers (subject, From, To, Cc, Bcc names and addresses, from the stored
/// query index, so they are the values Email/get renders) and of its body
/// (textBody text, HTML as text, and attachment names).
pub fn document_of(reading: &BodyReading, index: &EmailIndex) -> SearchText {
    let mut headers = String::new();
    let mut left = MAX_HEADER_WORDS;
    for field in [
        &index.subject,
        &index.from_text,
        &index.to_text,
        &index.cc_text,
        &index.bcc_text,
    ] {
        word_text(field, &mut headers, &mut left);
    }
    let mut body = String::new();
    let mut left = MAX_BODY_WORDS;
    for name in &reading.attachment_names {
        word_text(name, &mut body, &mut left);
    }
    for text in &reading.texts {
        if left == 0 {
            break;
        }
        word_text(text, &mut body, &mut left);
    }
    SearchText { headers, body }
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
/// quoted runs are phrases, every other word a prefix when it has at least
/// [`MIN_PREFIX_CHARS`] characters, a run of CJK characters a phrase of
/// them. `Ok(None)` for a value that is empty or
/// only white space (no condition); terms that are empty for a value with
/// no word in it (it finds nothing); `Err` with the reason for a value of
/// more than [`MAX_QUERY_WORDS`] words.
pub fn parse_query(value: &str, scope: SearchScope) -> Result<Option<TextSearch>, String> {
    if value.trim().is_empty() {
        return Ok(None);
    }
    let mut terms = Vec::new();
    let mut count = 0usize;
    // A word longer than the index keeps finds nothing, and so does the
    // value (every term must be found): no terms, no query of the index
    // (PostgreSQL refuses a lexeme over 2,047 octets).
    let mut unindexed = false;
    for (i, chunk) in value.split('"').enumerate() {
        let quoted = i % 2 == 1;
        let pieces: Vec<&str> = match quoted {
            true => vec![chunk],
            false => chunk.split_whitespace().collect(),
        };
        for piece in pieces {
            // A piece such as `re:project-alpha` holds several words: each
            // must be found, next to the others, as a phrase.
            let words = query_words(piece);
            count += words.len();
            if count > MAX_QUERY_WORDS {
                return Err(format!(
                    "a text or body filter holds at most {MAX_QUERY_WORDS} words"
                ));
            }
            unindexed |= words
                .iter()
                .any(|word| word.chars().count() > MAX_WORD_CHARS);
            let Some(last) = words.last() else {
                continue;
            };
            let prefix =
                !quoted && !last.chars().any(is_cjk) && last.chars().count() >= MIN_PREFIX_CHARS;
            terms.push(SearchTerm { words, prefix });
        }
    }
    if unindexed {
        terms.clear();
    }
    Ok(Some(TextSearch { scope, terms }))
}

/// Whether `c` continues a word of text as it is written: a letter or digit
/// (not CJK), or a combining mark (text in decomposed form, NFD).
fn in_word(c: char) -> bool {
    (c.is_alphanumeric() && !is_cjk(c)) || is_combining_mark(c)
}

/// Marks the words of `text` that match `terms` with `<mark>…</mark>` and
/// escapes the rest for HTML (RFC 8621 §5 SearchSnippet): `None` when no
/// word matches. With `preview`, only the text from a little before the
/// first match is kept, cut so that the result (marks and escapes counted)
/// is at most [`MAX_PREVIEW_OCTETS`] octets; only the first
/// 256 KiB of characters are looked through.
pub fn highlight(text: &str, terms: &[SearchTerm], preview: bool) -> Option<String> {
    let text = match text.char_indices().nth(MAX_SNIPPET_SCAN_CHARS) {
        Some((end, _)) => &text[..end],
        None => text,
    };
    // The words of `text` with their byte ranges, folded as the index folds.
    let mut spans: Vec<(usize, usize, String)> = Vec::new();
    let mut start = None;
    for (at, c) in text
        .char_indices()
        .chain(std::iter::once((text.len(), ' ')))
    {
        let end = at == text.len();
        if let Some(from) = start
            && (end || !in_word(c))
        {
            spans.push((from, at, query_words(&text[from..at]).join("")));
            start = None;
        }
        if end {
            break;
        }
        if is_cjk(c) {
            let next = at + c.len_utf8();
            spans.push((at, next, query_words(&text[at..next]).join("")));
        } else if in_word(c) && start.is_none() {
            start = Some(at);
        }
    }
    let mut marked = vec![false; spans.len()];
    for term in terms {
        let n = term.words.len();
        if n == 0 || spans.len() < n {
            continue;
        }
        let first = &term.words[0];
        for i in 0..=spans.len() - n {
            // Cheap first check: most positions do not start a match.
            if n > 1 && spans[i].2 != *first {
                continue;
            }
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
    // A preview starts at the text's start when the first match is near
    // it, else at the first word at most 60 octets before the match.
    let match_start = spans[first].0;
    let from = match preview && match_start > MAX_PREVIEW_OCTETS / 2 {
        true => spans
            .iter()
            .map(|span| span.0)
            .find(|start| start + 60 >= match_start)
            .unwrap_or(match_start),
        false => 0,
    };
    let budget = if preview {
        MAX_PREVIEW_OCTETS
    } else {
        usize::MAX
    };
    let mut out = String::new();
    let mut at = from;
    for ((start, end, _), mark) in spans.iter().zip(&marked) {
        if !*mark || *start < from {
            continue;
        }
        if !push_escaped(&text[at..*start], &mut out, budget) {
            return Some(out);
        }
        let mut piece = String::from("<mark>");
        push_escaped(&text[*start..*end], &mut piece, usize::MAX);
        piece.push_str("</mark>");
        if out.len() + piece.len() > budget {
            return Some(out);
        }
        out.push_str(&piece);
        at = *end;
    }
    push_escaped(&text[at..], &mut out, budget);
    Some(out)
}

/// Appends `text` HTML-escaped to `out` while `out` stays within `budget`
/// octets (a character and its escape go whole or not at all); whether all
/// of it went.
fn push_escaped(text: &str, out: &mut String, budget: usize) -> bool {
    for c in text.chars() {
        let mut one = [0u8; 4];
        let piece: &str = match c {
            '<' => "&lt;",
            '>' => "&gt;",
            '&' => "&amp;",
            '"' => "&quot;",
            '\'' => "&#39;",
            c => c.encode_utf8(&mut one),
        };
        if out.len() + piece.len() > budget {
            return false;
        }
        out.push_str(piece);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(value: &str) -> Vec<SearchTerm> {
        parse_query(value, SearchScope::All)
            .expect("within bounds")
            .expect("a condition")
            .terms
    }

    #[test]
    fn ascii_text_splits_as_the_unicode_path_does() {
        let ascii = "Re: [PATCH v2] x86/mm: Fix 0xDEAD_beef -- see https://lkml.org/a?b=1";
        assert!(ascii.is_ascii());
        // The same text with one non-ASCII character at the end takes the
        // Unicode path: the same words, plus that one.
        let mut unicode = words(&format!("{ascii} é"));
        assert_eq!(unicode.pop().as_deref(), Some("e"));
        assert_eq!(words(ascii), unicode);
    }

    /// The folding as first written: the whole text through NFKC, one
    /// character at a time (what the chunked fold must equal).
    fn words_whole_text(text: &str) -> Vec<String> {
        let (mut out, mut word) = (Vec::new(), String::new());
        let mut end = |word: &mut String| {
            if !word.is_empty() && word.chars().count() <= MAX_WORD_CHARS {
                out.push(std::mem::take(word));
            }
            word.clear();
        };
        for c in text.nfkc() {
            if is_cjk(c) {
                end(&mut word);
                word.push(c);
                end(&mut word);
            } else if !c.is_alphanumeric() {
                end(&mut word);
            } else {
                for d in std::iter::once(c).nfkd().filter(|d| !is_combining_mark(*d)) {
                    word.extend(d.to_lowercase());
                }
            }
        }
        end(&mut word);
        out
    }

    #[test]
    fn chunked_folding_equals_folding_the_whole_text() {
        for text in [
            "Zoë's CAFÉ, naïve-ly 2024 ﬁle ½ ①②",
            "a=\u{338}b <\u{338} >\u{338}c x\u{338}y",
            "nai\u{308}ve-e\u{301}t\u{e9} \u{301}start end\u{301}",
            "会議は東京で-meeting_at\u{3000}１２３ ｆｕｌｌ",
            "Ｒｅ：ＡＢＣ ㈱ ℡ Ǆ ǅ ß ﬀ",
            "한국어 텍스트, and 日本語テキスト.",
        ] {
            assert_eq!(words(text), words_whole_text(text), "{text:?}");
        }
    }

    #[test]
    fn words_fold_case_and_diacritics_and_split_cjk() {
        assert_eq!(
            words("Zoë's CAFÉ, naïve-ly 2024"),
            ["zoe", "s", "cafe", "naive", "ly", "2024"]
        );
        assert_eq!(words("nai\u{308}ve"), ["naive"], "decomposed (NFD) text");
        assert_eq!(words("会議は東京で"), ["会", "議", "は", "東", "京", "で"]);
        assert_eq!(words("ｆｕｌｌwidth Ｒｅｐｏｒｔ"), ["fullwidth", "report"]);
        assert_eq!(words("Straße"), ["straße"]);
        assert!(words(&"a".repeat(65)).is_empty(), "over MAX_WORD_CHARS");
    }

    #[test]
    fn queries_read_phrases_prefixes_and_cjk_runs() {
        let got: Vec<(Vec<String>, bool)> =
            terms(r#"Confer "project ALPHA" 東京 re:x-y re:x-abcd THÉ"#)
                .into_iter()
                .map(|t| (t.words, t.prefix))
                .collect();
        let want: Vec<(Vec<String>, bool)> = [
            (vec!["confer"], true),
            (vec!["project", "alpha"], false),
            (vec!["東", "京"], false),
            // A last word under MIN_PREFIX_CHARS matches whole words only,
            // counted in characters after folding.
            (vec!["re", "x", "y"], false),
            (vec!["re", "x", "abcd"], true),
            (vec!["the"], false),
        ]
        .into_iter()
        .map(|(w, p)| (w.into_iter().map(String::from).collect(), p))
        .collect();
        assert_eq!(got, want);
        // Blank: no condition. No word: finds nothing. A word longer than
        // the index keeps finds nothing, whatever else the value holds.
        assert_eq!(parse_query("  ", SearchScope::All), Ok(None));
        assert_eq!(terms("🎉 --- \"\""), Vec::<SearchTerm>::new());
        assert_eq!(terms(&"a".repeat(MAX_WORD_CHARS))[0].words[0].len(), 64);
        let long = format!("alpha {}", "a".repeat(MAX_WORD_CHARS + 1));
        assert_eq!(terms(&long), Vec::<SearchTerm>::new());
        let many = vec!["w"; MAX_QUERY_WORDS + 1].join(" ");
        assert!(parse_query(&many, SearchScope::Body).is_err());
    }

    #[test]
    fn the_index_keeps_bounded_words_attachment_names_first() {
        let many = "word ".repeat(MAX_BODY_WORDS + 10);
        let raw = format!(
            "Subject: s\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\
             Content-Type: text/plain\r\n\r\n{many}\r\n--b\r\n\
             Content-Type: application/pdf; name=\"Ledger.pdf\"\r\n\r\nx\r\n--b--\r\n"
        );
        let prepared =
            crate::mail::ingest::prepare(raw.into_bytes(), Vec::new(), Vec::new(), |_| 0);
        let body = prepared.email.search.body;
        assert!(body.starts_with("ledger pdf word"), "{}", &body[..40]);
        assert_eq!(body.split(' ').count(), MAX_BODY_WORDS);
    }

    #[test]
    fn highlight_marks_matches_and_escapes_the_rest() {
        let both = terms("confer zoe");
        assert_eq!(
            highlight("<b>Conference</b> with Zoë & co", &both, false).as_deref(),
            Some("&lt;b&gt;<mark>Conference</mark>&lt;/b&gt; with <mark>Zoë</mark> &amp; co")
        );
        assert_eq!(highlight("nothing here", &both, false), None);
        assert_eq!(
            highlight("un nai\u{308}ve", &terms("naive"), false).as_deref(),
            Some("un <mark>nai\u{308}ve</mark>")
        );
        assert_eq!(
            highlight(
                "Alpha project; Project Alpha!",
                &terms("\"project alpha\""),
                false
            )
            .as_deref(),
            Some("Alpha project; <mark>Project</mark> <mark>Alpha</mark>!")
        );
        assert_eq!(
            highlight("会議は東京で", &terms("東京"), false).as_deref(),
            Some("会議は<mark>東</mark><mark>京</mark>で")
        );
        // A preview starts shortly before the first match and is at most
        // 255 octets, marks and escapes counted, never cut inside one.
        let long = format!("{}needle {}", "word ".repeat(200), "a & b ".repeat(200));
        let preview = highlight(&long, &terms("needle"), true).unwrap();
        assert!(
            preview.starts_with(&format!(
                "{}<mark>needle</mark> a &amp; b",
                "word ".repeat(12)
            )),
            "{preview}"
        );
        assert!(preview.len() <= MAX_PREVIEW_OCTETS, "{}", preview.len());
        assert!(preview.len() > MAX_PREVIEW_OCTETS - 8, "{}", preview.len());
        let dense = "a ".repeat(500);
        let preview = highlight(&dense, &terms("a"), true).unwrap();
        assert!(
            preview.len() <= MAX_PREVIEW_OCTETS && preview.ends_with("</mark> "),
            "{preview}"
        );
    }
}

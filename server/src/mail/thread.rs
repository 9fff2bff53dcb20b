//! Threading (RFC 8621 §3): a message joins an existing thread when it shares
//! a message id (its Message-ID, In-Reply-To or References) with a message of
//! that thread AND has the same base subject; otherwise it starts a thread.
//!
//! Out-of-order arrival: the store records every id a message names, not only
//! its own Message-ID, so a parent arriving after its reply still finds the
//! reply's thread. A threadId never changes: when a new message links two
//! existing threads, it joins the older one and the threads are not merged.

/// The base subject used for threading and subject sorting: the subject
/// lowercased, with leading `Re:`/`Fwd:`/`Fw:` (also `Re[2]:`), leading
/// `[list]` tags and trailing `(fwd)` removed, whitespace collapsed
/// (after RFC 5256 §2.1).
pub fn base_subject(subject: &str) -> String {
    let mut s: String = subject
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase();
    loop {
        let before = s.len();
        while let Some(rest) = s.strip_suffix("(fwd)") {
            s = rest.trim_end().to_string();
        }
        let trimmed = s.trim_start();
        let stripped = strip_list_tag(trimmed)
            .or_else(|| strip_reply_prefix(trimmed))
            .map(str::trim_start)
            .unwrap_or(trimmed);
        s = stripped.to_string();
        if s.len() == before {
            return s;
        }
    }
}

fn strip_list_tag(s: &str) -> Option<&str> {
    let rest = s.strip_prefix('[')?;
    let end = rest.find(']')?;
    let after = &rest[end + 1..];
    // Keep a subject that is nothing but a tag.
    (!after.trim().is_empty()).then_some(after)
}

fn strip_reply_prefix(s: &str) -> Option<&str> {
    for prefix in ["re", "fwd", "fw", "aw", "sv", "antw"] {
        let Some(rest) = s.strip_prefix(prefix) else {
            continue;
        };
        let rest = match rest.strip_prefix('[') {
            Some(counted) => {
                let end = counted.find(']')?;
                if !counted[..end].bytes().all(|b| b.is_ascii_digit()) {
                    continue;
                }
                &counted[end + 1..]
            }
            None => rest,
        };
        if let Some(rest) = rest.trim_start().strip_prefix(':') {
            return Some(rest);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::base_subject;

    #[test]
    fn base_subject_strips_reply_forward_and_list_tags() {
        let table = [
            ("Hello", "hello"),
            ("Re: Hello", "hello"),
            ("RE: re: Fwd:  Hello   world", "hello world"),
            ("Re[3]: Hello", "hello"),
            ("[Maven-dev] Re: [VOTE] Release", "release"),
            ("Hello (fwd)", "hello"),
            ("AW: Termin", "termin"),
            ("[tag]", "[tag]"),
            ("", ""),
            ("Rebase problems", "rebase problems"),
        ];
        for (input, expected) in table {
            assert_eq!(base_subject(input), expected, "{input}");
        }
    }
}

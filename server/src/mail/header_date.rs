//! The one date reader: the Date form of a header field (RFC 8621 §4.1.2.6;
//! RFC 5322 §3.3, §4.3), as [`super::header`] renders it, and the asctime
//! dates of mbox envelope lines and old headers ([`asctime_time`]), which
//! [`super::import_source`] reads for `receivedAt`. Both read words with the
//! same digit reader, month table, clock, year rule and zone table.

use super::header_address::{Token, lex};

/// Parses a date-time into RFC 3339 with the field's own offset
/// (`2002-09-04T12:34:56+02:00`; `+0000` and UT/GMT as `Z`; `-0000`, unknown
/// zones and a missing zone as `-00:00`, "local time unknown" in both RFCs).
/// `None` when the field is not a date.
///
/// Best effort beyond RFC 5322 §3.3 and the obsolete syntax of §4.3, for
/// forms common in old mail whose meaning is unambiguous: one-digit hour,
/// minute or second; a year below 1900 written with four digits (`0102`, the
/// "year minus 1900" bug) read like the obsolete short years (below 50: add
/// 2000, else add 1900: `102` and `0102` are 2002); an AM/PM suffix; a zone
/// without sign or with a doubled one (`0530`, `+-0500`); `GMT+1`; a zone
/// spelled in words (`Eastern Daylight Time`: unknown, `-00:00`).
pub fn date_form(raw: &str) -> Option<String> {
    // Drop comments, then split into words on white space and commas.
    let mut text = String::new();
    for (token, _) in lex(raw) {
        match token {
            Token::Atom(atom) => {
                text.push_str(&atom);
                text.push(' ');
            }
            Token::Special(':') => {
                // Time parts were split by the lexer: glue them back.
                if text.ends_with(' ') {
                    text.pop();
                }
                text.push(':');
            }
            Token::Special(',') => text.push(' '),
            Token::Comment(_) => {}
            Token::Quoted(_) | Token::Angle(_) | Token::Special(_) => return None,
        }
    }
    let text = text.replace(": ", ":");
    let mut words = text.split_ascii_whitespace().peekable();
    if words
        .peek()
        .is_some_and(|word| name_index(word, &DAYS).is_some())
    {
        words.next();
    }
    let day: u32 = parse_digits(words.next()?, 1, 2)?;
    let month = month_number(words.next()?)?;
    let year_word = words.next()?;
    let year: i32 = parse_digits(year_word, 2, 4)?;
    let year = match year {
        1900.. if year_word.len() == 4 => year,
        ..1000 => obsolete_year(year),
        _ => return None,
    };
    chrono::NaiveDate::from_ymd_opt(year, month, day)?;
    let (mut hour, minute, second) = clock(words.next()?, 1)?;
    if minute > 59 || second > 60 {
        return None;
    }
    let rest: Vec<&str> = words.collect();
    let rest = match rest.split_first() {
        Some((meridiem, rest))
            if meridiem.eq_ignore_ascii_case("am") || meridiem.eq_ignore_ascii_case("pm") =>
        {
            if !(1..=12).contains(&hour) {
                return None;
            }
            hour = hour % 12
                + if meridiem.eq_ignore_ascii_case("pm") {
                    12
                } else {
                    0
                };
            rest
        }
        _ => &rest[..],
    };
    if hour > 23 {
        return None;
    }
    let offset = match rest {
        [] => None,
        [zone] => zone_offset(zone)?,
        words
            if words
                .iter()
                .all(|w| w.bytes().all(|b| b.is_ascii_alphabetic())) =>
        {
            None
        }
        _ => return None,
    };
    let zone = match offset {
        None => "-00:00".to_string(),
        Some(0) => "Z".to_string(),
        Some(minutes) => {
            let sign = if minutes < 0 { '-' } else { '+' };
            let minutes = minutes.unsigned_abs();
            format!("{sign}{:02}:{:02}", minutes / 60, minutes % 60)
        }
    };
    Some(format!(
        "{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}{zone}"
    ))
}

/// Finds the asctime shape `Mon DD HH:MM[:SS]` among the words of `text`
/// (split on white space and commas): `None` if it is not there, else the
/// date it starts as unix seconds, read with the year and optional zone (in
/// either order) that follow it. Without a zone the time is UTC. Years
/// outside 1900–3000 give `Some(None)`.
///
/// A month preceded by a day number is RFC 5322 (`23 Jul 02 19:39:23`), not
/// asctime.
pub fn asctime_time(text: &str) -> Option<Option<i64>> {
    let text = text.replace(',', " ");
    parse_asctime(&text.split_ascii_whitespace().collect::<Vec<_>>())
}

/// [`asctime_time`] on words already split (an mbox envelope line's).
pub fn parse_asctime(words: &[&str]) -> Option<Option<i64>> {
    let (i, month, day, (hour, minute, second)) = (0..words.len()).find_map(|i| {
        let after_day = i > 0 && parse_digits::<u32>(words[i - 1], 1, 2).is_some();
        let month = words[i].trim_end_matches(',');
        let month = month_number(month).filter(|_| month.len() == 3 && !after_day)?;
        let day: u32 = parse_digits(words.get(i + 1)?, 1, 2)?;
        Some((i, month, day, clock(words.get(i + 2)?, 2)?))
    })?;
    Some((|| {
        let (mut year, mut offset) = (None, 0i64);
        for word in words.iter().skip(i + 3).take(2) {
            if year.is_none()
                && let Some(y) = parse_digits::<i32>(word, 4, 4)
                    .or_else(|| parse_digits::<i32>(word, 2, 2).map(obsolete_year))
            {
                year = Some(y);
            } else if let Some(o) = asctime_zone_seconds(word) {
                offset = o;
            }
        }
        let year = year.filter(|y| (1900..=3000).contains(y))?;
        let date = chrono::NaiveDate::from_ymd_opt(year, month, day)?;
        let local = date
            .and_hms_opt(hour, minute, second)?
            .and_utc()
            .timestamp();
        Some(local - offset)
    })())
}

/// Day names, as RFC 5322 §3.3 abbreviates them.
const DAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

/// Month names, as RFC 5322 §3.3 abbreviates them.
const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];

/// The month (1–12) a word abbreviates or spells out (`Sep`, `Sept`,
/// `September`, any case).
fn month_number(word: &str) -> Option<u32> {
    name_index(word, &MONTHS).map(|index| index as u32 + 1)
}

/// The index of the name a word abbreviates or spells out (`Sep`, `Sept`,
/// `September`, any case).
fn name_index(word: &str, names: &[&str]) -> Option<usize> {
    let word = word.to_ascii_lowercase();
    if word.len() < 3 || !word.bytes().all(|b| b.is_ascii_alphabetic()) {
        return None;
    }
    names.iter().position(|name| word.starts_with(name))
}

/// A number of `min..=max` ASCII digits.
fn parse_digits<T: std::str::FromStr>(word: &str, min: usize, max: usize) -> Option<T> {
    (word.len() >= min && word.len() <= max && word.bytes().all(|b| b.is_ascii_digit()))
        .then(|| word.parse().ok())
        .flatten()
}

/// `H:M` or `H:M:S` as (hour, minute, second): the hour one or two digits,
/// the minute and second `min_width` to two; ranges are the caller's to check.
fn clock(word: &str, min_width: usize) -> Option<(u32, u32, u32)> {
    let mut parts = word.split(':');
    let hour = parse_digits(parts.next()?, 1, 2)?;
    let minute = parse_digits(parts.next()?, min_width, 2)?;
    let second = match parts.next() {
        Some(second) => parse_digits(second, min_width, 2)?,
        None => 0,
    };
    parts.next().is_none().then_some((hour, minute, second))
}

/// An obsolete year below 1000 (RFC 5322 §4.3): below 50 adds 2000, else 1900.
fn obsolete_year(year: i32) -> i32 {
    year + if year < 50 { 2000 } else { 1900 }
}

/// The offset in hours of a zone named in RFC 5322 §4.3 (any case), except
/// the military ones.
fn named_zone_hours(zone: &str) -> Option<i32> {
    match zone.to_ascii_uppercase().as_str() {
        "UT" | "UTC" | "GMT" | "Z" => Some(0),
        "EDT" => Some(-4),
        "EST" | "CDT" => Some(-5),
        "CST" | "MDT" => Some(-6),
        "MST" | "PDT" => Some(-7),
        "PST" => Some(-8),
        _ => None,
    }
}

/// `HHMM` as (hours, minutes), unchecked.
fn hhmm(digits: &str) -> Option<(i32, i32)> {
    let value: i32 = parse_digits(digits, 4, 4)?;
    Some((value / 100, value % 100))
}

/// An asctime zone as seconds east of UTC: `+hhmm`/`-hhmm` (not range
/// checked) or a name from RFC 5322 §4.3.
fn asctime_zone_seconds(word: &str) -> Option<i64> {
    if let Some((sign, digits)) = word
        .strip_prefix('+')
        .map(|d| (1, d))
        .or_else(|| word.strip_prefix('-').map(|d| (-1, d)))
    {
        let (hours, minutes) = hhmm(digits)?;
        return Some(sign * (i64::from(hours) * 3600 + i64::from(minutes) * 60));
    }
    Some(i64::from(named_zone_hours(word)?) * 3600)
}

/// A zone's offset in minutes: `Some(None)` for "unknown local time"
/// (`-0000`, military and unknown alphabetic zones, RFC 5322 §4.3), `None`
/// when the zone is malformed or outside what RFC 3339 can express.
fn zone_offset(zone: &str) -> Option<Option<i32>> {
    let upper = zone.to_ascii_uppercase();
    // `GMT+1`, `UTC-0530`: a named UTC with an offset.
    let numeric = ["GMT", "UTC", "UT"].iter().find_map(|prefix| {
        upper
            .strip_prefix(prefix)
            .filter(|rest| rest.starts_with(['+', '-']))
    });
    if let Some(rest) = numeric {
        let digits = rest.trim_start_matches(['+', '-']);
        let negative = rest.starts_with('-');
        let minutes = match digits.len() {
            1 | 2 => parse_digits::<i32>(digits, 1, 2)? * 60,
            4 => numeric_offset(digits)?,
            _ => return None,
        };
        return Some(Some(if negative { -minutes } else { minutes }));
    }
    let signs = zone.len() - zone.trim_start_matches(['+', '-']).len();
    if signs <= 2 && zone.len() - signs == 4 && zone[signs..].bytes().all(|b| b.is_ascii_digit()) {
        let digits = &zone[signs..];
        let minutes = numeric_offset(digits)?;
        // `+-0500` seen in old mail: the last sign counts.
        let negative = signs > 0 && zone[..signs].ends_with('-');
        return Some(match (negative, minutes) {
            (true, 0) => None,
            (true, minutes) => Some(-minutes),
            (false, minutes) => Some(minutes),
        });
    }
    if !zone.bytes().all(|b| b.is_ascii_alphabetic()) {
        return None;
    }
    Some(named_zone_hours(zone).map(|hours| hours * 60))
}

/// `HHMM` as minutes; `None` beyond RFC 3339's range (hours 0–23, minutes 0–59).
fn numeric_offset(digits: &str) -> Option<i32> {
    let (hours, minutes) = hhmm(digits)?;
    (hours <= 23 && minutes <= 59).then_some(hours * 60 + minutes)
}

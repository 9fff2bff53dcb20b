//! How lists are kept in columns and bound as parameters, written once for
//! the shared store, its dialects, the hot reads and the raw copy: id lists
//! sorted without repeats, SQLite's comma-separated id lists, and the
//! `keywords` column.

/// Sorted without repeats.
pub(super) fn distinct(ids: &[i64]) -> Vec<i64> {
    let mut ids = ids.to_vec();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// Ids from a comma-separated list (SQLite's `group_concat`), ascending.
pub(super) fn ids_from_csv(column: Option<&str>) -> Vec<i64> {
    let mut ids: Vec<i64> = column
        .unwrap_or_default()
        .split(',')
        .filter_map(|id| id.parse().ok())
        .collect();
    ids.sort_unstable();
    ids
}

/// The `keywords` column: sorted lowercase keywords separated by spaces.
pub(super) fn keywords_to_column(keywords: &[String]) -> String {
    let mut keywords: Vec<String> = keywords.iter().map(|k| k.to_ascii_lowercase()).collect();
    keywords.sort();
    keywords.dedup();
    keywords.join(" ")
}

pub(super) fn keywords_from_column(column: &str) -> Vec<String> {
    column.split_whitespace().map(str::to_string).collect()
}

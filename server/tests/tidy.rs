//! Tidy tests (after rust-analyzer's): the architecture invariants of
//! `server/ARCHITECTURE.md` that can be read off the source text, checked
//! on every `cargo test`.
//!
//! - Layers point one way ([`LAYERS`]): every `crate::…` path, `use` tree and
//!   `super::…` path that leaves its top-level module is checked against the
//!   table. Comments and string literals are not code: an intra-doc link is
//!   not an import.
//! - Each dependency named only by the module that owns it ([`CRATE_OWNERS`]):
//!   axum in `http/` (and the JMAP proxy's edge), sqlx and rusqlite in
//!   `store/`, reqwest in `proxy/jmap/`, async-imap in the IMAP proxy's
//!   connection, lettre in `mail/relay.rs`, hyper in `http/`.
//! - Sizes: no function over [`MAX_FUNCTION_LINES`], no method handler over
//!   [`MAX_HANDLER_LINES`], no file over [`MAX_FILE_LINES`], no trait over
//!   [`MAX_TRAIT_METHODS`] methods.
//! - The proxy wing: only the assembly (and `cli`) names `crate::proxy`
//!   ([`LAYERS`]): the local handlers do not know whether an upstream exists.
//! - Every file under `src/` opens with a `//!` module doc.
//! - `migrations/sqlite` and `migrations/postgres` hold the same file names.
//!
//! A failure names the file, the line and the rule broken.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The top-level modules of `src/` and the others each may use (through
/// `crate::` or `super::`); a module may always use itself. `lib.rs` and
/// `main.rs` are the root and may use everything. A new top-level module
/// must be given a row here.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "cli",
        &[
            "account", "app", "assembly", "blob", "http", "jmap", "mail", "metrics", "proxy",
            "store",
        ],
    ),
    (
        "assembly",
        &[
            "account", "app", "blob", "http", "jmap", "mail", "metrics", "proxy", "store",
        ],
    ),
    (
        "proxy",
        &[
            "account", "app", "blob", "http", "jmap", "mail", "metrics", "store",
        ],
    ),
    (
        "http",
        &["account", "app", "blob", "jmap", "mail", "metrics", "store"],
    ),
    (
        "app",
        &["account", "blob", "jmap", "mail", "metrics", "store"],
    ),
    ("jmap", &["account", "blob", "mail", "metrics", "store"]),
    ("mail", &["account", "blob", "metrics", "store"]),
    ("account", &[]),
    ("store", &[]),
    ("blob", &[]),
    ("metrics", &[]),
];

/// External crates only one module may name, by module path (`proxy::jmap`
/// is `proxy/jmap/` and everything under it). axum has two owners: the
/// HTTP edge, and the JMAP proxy's own edge, whose routes answer in its
/// place (the proxy wing keeps everything of the upstream's to itself).
const CRATE_OWNERS: &[(&str, &[&str])] = &[
    ("axum", &["http", "proxy::jmap::edge"]),
    ("hyper", &["http"]),
    ("sqlx", &["store"]),
    ("rusqlite", &["store"]),
    ("reqwest", &["proxy::jmap"]),
    ("async_imap", &["proxy::imap::connection"]),
    ("lettre", &["mail::relay"]),
];

const LAYER_RULE: &str = "layers point one way: cli → http → jmap → mail → store / blob (server/ARCHITECTURE.md, tests/tidy.rs LAYERS)";

#[test]
fn layers_point_one_way() {
    let mut violations = Vec::new();
    for file in source_files() {
        let module = module_path(&file.relative);
        let Some(top) = module.first() else {
            continue; // lib.rs, main.rs: the root
        };
        let Some(allowed) = allowed_uses(top) else {
            violations.push(format!(
                "{}:1: top-level module `{top}` has no row in LAYERS: decide what it may use",
                file.display
            ));
            continue;
        };
        for (line, used) in crate_uses(&file.text, &module) {
            if used != *top && !allowed.contains(&used.as_str()) {
                violations.push(format!(
                    "{}:{line}: `{top}` uses `crate::{used}`, which it may not ({top} may use: {}); {LAYER_RULE}",
                    file.display,
                    list(allowed),
                ));
            }
        }
    }
    assert_clean("upward or sideways imports", violations);
}

#[test]
fn each_dependency_is_named_by_the_module_that_owns_it() {
    let mut violations = Vec::new();
    for file in source_files() {
        let module = module_path(&file.relative).join("::");
        for token in tokens(&file.text) {
            for (krate, owners) in CRATE_OWNERS {
                let owned = owners
                    .iter()
                    .any(|owner| module == *owner || module.starts_with(&format!("{owner}::")));
                if token.text == *krate && !owned {
                    violations.push(format!(
                        "{}:{}: `{krate}` named in `{module}`; only {} may name {krate} (server/ARCHITECTURE.md)",
                        file.display,
                        token.line,
                        owners.join(", ")
                    ));
                }
            }
        }
    }
    assert_clean("crates outside their module", violations);
}

/// The proxy wing's two halves share only what `proxy/upstream.rs` and
/// `proxy/mod.rs` hold: no file under `proxy/imap/` names `proxy::jmap`,
/// and none under `proxy/jmap/` names `proxy::imap`.
#[test]
fn the_imap_and_jmap_proxies_import_nothing_of_each_other() {
    let mut violations = Vec::new();
    for file in source_files() {
        let module = module_path(&file.relative);
        let (Some("proxy"), Some(half)) = (
            module.first().map(String::as_str),
            module.get(1).map(String::as_str),
        ) else {
            continue;
        };
        let other = match half {
            "imap" => "jmap",
            "jmap" => "imap",
            _ => continue,
        };
        for (line, path, _) in crate_paths(&file.text, &module) {
            if path.first().map(String::as_str) == Some("proxy")
                && path.get(1).map(String::as_str) == Some(other)
            {
                violations.push(format!(
                    "{}:{line}: the {half} proxy names `proxy::{other}`; what both need belongs in proxy/upstream.rs",
                    file.display
                ));
            }
        }
    }
    assert_clean("proxy halves importing each other", violations);
}

#[test]
fn every_module_opens_with_a_doc_comment() {
    let violations: Vec<String> = source_files()
        .into_iter()
        .filter(|file| {
            !file
                .text
                .lines()
                .find(|line| !line.trim().is_empty())
                .is_some_and(|line| line.starts_with("//!"))
        })
        .map(|file| {
            format!(
                "{}:1: the file does not open with a `//!` module doc saying what the module is for",
                file.display
            )
        })
        .collect();
    assert_clean("modules without a `//!` doc", violations);
}

#[test]
fn sqlite_and_postgres_migrations_have_the_same_file_names() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations");
    let names = |dialect: &str| -> BTreeSet<String> {
        std::fs::read_dir(root.join(dialect))
            .unwrap_or_else(|e| panic!("migrations/{dialect}: {e}"))
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    };
    let (sqlite, postgres) = (names("sqlite"), names("postgres"));
    assert!(!sqlite.is_empty(), "migrations/sqlite is empty");
    let mut violations = Vec::new();
    for name in sqlite.difference(&postgres) {
        violations.push(format!(
            "migrations/sqlite/{name}: no migrations/postgres/{name}; both dialects hold the same file names"
        ));
    }
    for name in postgres.difference(&sqlite) {
        violations.push(format!(
            "migrations/postgres/{name}: no migrations/sqlite/{name}; both dialects hold the same file names"
        ));
    }
    assert_clean("migration lists out of step", violations);
}

/// No two files import each other, directly or through others: the graph
/// of file → files it names (each `crate::…` and `super::…` path read by
/// [`crate_paths`], going to the file that defines the longest module
/// prefix of the path) has no cycle. A failure names each cycle's files
/// and the line of each import in it.
#[test]
fn no_file_level_import_cycles() {
    let files = source_files();
    // Module path (`jmap::dispatch`) → index of the file defining it.
    let defining: std::collections::HashMap<Vec<String>, usize> = files
        .iter()
        .enumerate()
        .filter(|(_, file)| file.relative != "main.rs")
        .map(|(index, file)| (module_path(&file.relative), index))
        .collect();
    // edges[from] = (to, line of the first import of `to`).
    let mut edges: Vec<Vec<(usize, usize)>> = vec![Vec::new(); files.len()];
    for (from, file) in files.iter().enumerate() {
        if file.relative == "main.rs" {
            continue; // the binary: its `crate` is not the library
        }
        let module = module_path(&file.relative);
        for (line, path, in_test) in crate_paths(&file.text, &module) {
            if in_test {
                continue; // unit tests may use what they test from anywhere
            }
            let to = (0..=path.len())
                .rev()
                .find_map(|len| defining.get(&path[..len]).copied());
            if let Some(to) = to
                && to != from
                && !edges[from].iter().any(|(t, _)| *t == to)
            {
                edges[from].push((to, line));
            }
        }
    }
    let mut violations = Vec::new();
    for component in strongly_connected(&edges) {
        if component.len() < 2 {
            continue;
        }
        let mut message = format!(
            "{} files import each other (move what they share to the file that owns it, or to a file of its own):",
            component.len()
        );
        for &from in &component {
            for &(to, line) in &edges[from] {
                if component.contains(&to) {
                    message.push_str(&format!(
                        "\n    {}:{line} → {}",
                        files[from].display, files[to].display
                    ));
                }
            }
        }
        violations.push(message);
    }
    assert_clean("file-level import cycles", violations);
}

/// The longest a function under `src/` may be, in lines from `fn` to its
/// closing brace (server/ARCHITECTURE.md).
const MAX_FUNCTION_LINES: usize = 100;
/// The longest a JMAP method handler (a function taking the `CallContext`)
/// may be.
const MAX_HANDLER_LINES: usize = 60;
/// The longest a file under `src/` may be, in lines.
const MAX_FILE_LINES: usize = 1_000;
/// The most methods one trait may declare.
const MAX_TRAIT_METHODS: usize = 40;

/// No function over [`MAX_FUNCTION_LINES`], no method handler over
/// [`MAX_HANDLER_LINES`]: a long function is cut into named steps.
#[test]
fn functions_and_handlers_are_short() {
    let mut violations = Vec::new();
    for file in source_files() {
        for function in functions(&tokens(&file.text)) {
            let limit = if function.is_handler {
                MAX_HANDLER_LINES
            } else {
                MAX_FUNCTION_LINES
            };
            if function.lines > limit {
                violations.push(format!(
                    "{}:{}: `{}` is {} lines; a {} is at most {limit} (cut it into named steps)",
                    file.display,
                    function.line,
                    function.name,
                    function.lines,
                    if function.is_handler {
                        "method handler"
                    } else {
                        "function"
                    },
                ));
            }
        }
    }
    assert_clean("functions too long", violations);
}

/// No file under `src/` over [`MAX_FILE_LINES`] lines.
#[test]
fn files_are_at_most_a_thousand_lines() {
    let violations: Vec<String> = source_files()
        .into_iter()
        .filter(|file| file.text.lines().count() > MAX_FILE_LINES)
        .map(|file| {
            format!(
                "{}: {} lines; a file is at most {MAX_FILE_LINES} (cut it by concern)",
                file.display,
                file.text.lines().count()
            )
        })
        .collect();
    assert_clean("files too long", violations);
}

/// No trait declares more than [`MAX_TRAIT_METHODS`] methods.
#[test]
fn traits_are_at_most_forty_methods() {
    let mut violations = Vec::new();
    for file in source_files() {
        let tokens = tokens(&file.text);
        for (at, token) in tokens.iter().enumerate() {
            if token.text != "trait" || !tokens.get(at + 1).is_some_and(|t| is_identifier(&t.text))
            {
                continue;
            }
            let Some(open) =
                (at..tokens.len()).find(|&i| matches!(tokens[i].text.as_str(), "{" | ";"))
            else {
                continue;
            };
            if tokens[open].text != "{" {
                continue;
            }
            let (mut depth, mut methods) = (0usize, 0usize);
            for token in &tokens[open..] {
                match token.text.as_str() {
                    "{" => depth += 1,
                    "}" => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    "fn" if depth == 1 => methods += 1,
                    _ => {}
                }
            }
            if methods > MAX_TRAIT_METHODS {
                violations.push(format!(
                    "{}:{}: trait `{}` declares {methods} methods; a trait is at most {MAX_TRAIT_METHODS} (split it by concern)",
                    file.display, token.line, tokens[at + 1].text
                ));
            }
        }
    }
    assert_clean("traits too wide", violations);
}

/// A function's name, first line, length in lines and whether it is a
/// JMAP method handler (its parameters name `CallContext`).
struct Function {
    name: String,
    line: usize,
    lines: usize,
    is_handler: bool,
}

/// Every function with a body in a token stream, nested ones too (a nested
/// function's lines also count in its outer one's).
fn functions(tokens: &[Token]) -> Vec<Function> {
    let mut out = Vec::new();
    for (at, token) in tokens.iter().enumerate() {
        if token.text != "fn" || !tokens.get(at + 1).is_some_and(|t| is_identifier(&t.text)) {
            continue;
        }
        // The signature runs to the first `{` or `;` outside brackets.
        let mut nesting = 0i32;
        let mut body = None;
        let mut is_handler = false;
        for (i, t) in tokens.iter().enumerate().skip(at + 2) {
            match t.text.as_str() {
                "(" | "[" => nesting += 1,
                ")" | "]" => nesting -= 1,
                "CallContext" => is_handler = true,
                ";" if nesting == 0 => break,
                "{" if nesting == 0 => {
                    body = Some(i);
                    break;
                }
                _ => {}
            }
        }
        let Some(open) = body else { continue };
        let mut depth = 0usize;
        for t in &tokens[open..] {
            match t.text.as_str() {
                "{" => depth += 1,
                "}" => {
                    depth -= 1;
                    if depth == 0 {
                        out.push(Function {
                            name: tokens[at + 1].text.clone(),
                            line: token.line,
                            lines: t.line - token.line + 1,
                            is_handler,
                        });
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    out
}

fn is_identifier(text: &str) -> bool {
    text.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// The strongly connected components of a graph given as adjacency lists
/// (Tarjan's algorithm), each sorted, in the order found.
fn strongly_connected(edges: &[Vec<(usize, usize)>]) -> Vec<Vec<usize>> {
    struct State<'a> {
        edges: &'a [Vec<(usize, usize)>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        components: Vec<Vec<usize>>,
    }
    fn visit(state: &mut State, node: usize) {
        state.index[node] = Some(state.next);
        state.low[node] = state.next;
        state.next += 1;
        state.stack.push(node);
        state.on_stack[node] = true;
        for &(to, _) in &state.edges[node] {
            match state.index[to] {
                None => {
                    visit(state, to);
                    state.low[node] = state.low[node].min(state.low[to]);
                }
                Some(index) if state.on_stack[to] => {
                    state.low[node] = state.low[node].min(index);
                }
                Some(_) => {}
            }
        }
        if Some(state.low[node]) == state.index[node] {
            let mut component = Vec::new();
            while let Some(member) = state.stack.pop() {
                state.on_stack[member] = false;
                component.push(member);
                if member == node {
                    break;
                }
            }
            component.sort_unstable();
            state.components.push(component);
        }
    }
    let mut state = State {
        edges,
        index: vec![None; edges.len()],
        low: vec![0; edges.len()],
        on_stack: vec![false; edges.len()],
        stack: Vec::new(),
        next: 0,
        components: Vec::new(),
    };
    for node in 0..edges.len() {
        if state.index[node].is_none() {
            visit(&mut state, node);
        }
    }
    state.components
}

/// The scanner itself: what it counts as a use of another module.
#[test]
fn the_scanner_reads_paths_use_trees_and_super_but_not_comments_or_strings() {
    #[track_caller]
    fn check(file: &str, source: &str, expected: &[(usize, &str)]) {
        let found = crate_uses(source, &module_path(file));
        let found: Vec<(usize, &str)> = found.iter().map(|(l, m)| (*l, m.as_str())).collect();
        assert_eq!(found, expected, "{file}: {source}");
    }
    check("mail/load.rs", "use crate::store::Store;", &[(1, "store")]);
    check(
        "mail/load.rs",
        "use crate::{store::{Store, StoreError}, blob};\nuse crate::{self};",
        &[(1, "store"), (1, "blob")],
    );
    check(
        "jmap/error.rs",
        "fn f(e: crate::store::StoreError) -> i64 { 1 }",
        &[(1, "store")],
    );
    // `super` climbs the file's modules (and inline `mod`s) before leaving its own.
    check(
        "jmap/mail/changes.rs",
        "use super::super::call::CallContext;",
        &[(1, "jmap")],
    );
    check("mail/load.rs", "use super::super::http;", &[(1, "http")]);
    check(
        "mail/mod.rs",
        "use super::{http, store::Store};",
        &[(1, "http"), (1, "store")],
    );
    check(
        "mail/load.rs",
        "mod tests {\n    use super::*;\n    use super::super::blob;\n}\nuse super::jmap;",
        &[(2, "mail"), (3, "mail"), (5, "mail")],
    );
    check("app.rs", "use super::http;", &[(1, "http")]);
    // Comments, strings, chars and lifetimes are not paths.
    check(
        "store/mod.rs",
        "//! [`crate::mail::ingest`]\n/* crate::http */ fn f<'a>(s: &'a str) -> char { let _ = \"crate::jmap\"; let _ = r#\"crate::cli\"#; '\"' }\n// crate::app\nuse crate::blob;",
        &[(4, "blob")],
    );
    check("store/mod.rs", "pub(crate) fn f() {}", &[]);
    check("mail/load.rs", "pub(super) fn f() {}", &[]);
    check(
        "blob/mod.rs",
        "macro_rules! m { () => { $crate::http::x() } }",
        &[(1, "http")],
    );
}

/// Prints every violation and fails when there is one.
#[track_caller]
fn assert_clean(what: &str, violations: Vec<String>) {
    assert!(
        violations.is_empty(),
        "{} {what}:\n{}\n",
        violations.len(),
        violations.join("\n")
    );
}

fn allowed_uses(module: &str) -> Option<&'static [&'static str]> {
    LAYERS
        .iter()
        .find(|(name, _)| *name == module)
        .map(|(_, allowed)| *allowed)
}

fn list(modules: &[&str]) -> String {
    if modules.is_empty() {
        "nothing else".to_string()
    } else {
        modules.join(", ")
    }
}

/// One `.rs` file under `src/`.
struct SourceFile {
    /// Relative to `src/`, with `/` separators (`jmap/mail/email/get.rs`).
    relative: String,
    /// As shown in failures (`src/jmap/mail/email/get.rs`).
    display: String,
    text: String,
}

/// Every `.rs` file under `src/`, in path order.
fn source_files() -> Vec<SourceFile> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    walk(&src, &mut paths);
    paths.sort();
    let files: Vec<SourceFile> = paths
        .into_iter()
        .map(|path| {
            let relative = path
                .strip_prefix(&src)
                .unwrap()
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            SourceFile {
                display: format!("src/{relative}"),
                text: std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display())),
                relative,
            }
        })
        .collect();
    assert!(files.len() > 10, "found only {} files in src/", files.len());
    files
}

/// The module a file under `src/` is: `jmap/mail/mod.rs` → `[jmap, mail]`,
/// `app.rs` → `[app]`, `lib.rs` and `main.rs` → `[]` (the root).
fn module_path(relative: &str) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_string)
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod") | Some("lib") | Some("main")
    ) {
        parts.pop();
    }
    parts
}

/// The top-level modules a file's code names, with the line of each:
/// the first segment of every path [`crate_paths`] reads.
fn crate_uses(text: &str, module: &[String]) -> Vec<(usize, String)> {
    let mut uses: Vec<(usize, String)> = crate_paths(text, module)
        .into_iter()
        .filter_map(|(line, path, _)| path.into_iter().next().map(|top| (line, top)))
        .filter(|(_, top)| is_module_name(top))
        .collect();
    uses.dedup(); // `crate::{store::{A, B}}`: one use of `store`
    uses
}

/// The paths a file's code names, from the crate root, with the line of
/// each: `crate::foo::bar…`, the branches of `crate::{foo::x, bar::{y, z}}`,
/// `$crate::foo…`, and `super::…` paths resolved against `module` (the
/// file's module) and the inline `mod name { … }` blocks around them. A path
/// ends at its first segment that is not a module-like name (`Type`,
/// `*`, `<`, `(`); `self` in a use tree names the path before it. The
/// third field says whether the path is inside a `#[cfg(test)] mod`.
fn crate_paths(text: &str, module: &[String]) -> Vec<(usize, Vec<String>, bool)> {
    let tokens = tokens(text);
    let mut paths = Vec::new();
    // Inline modules open around the cursor: (name, brace depth inside it,
    // whether it is `#[cfg(test)]`).
    let mut inline: Vec<(String, usize, bool)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < tokens.len() {
        let token = &tokens[i];
        let after_path_separator = i > 0 && tokens[i - 1].text == "::";
        match token.text.as_str() {
            "{" => depth += 1,
            "}" => {
                if inline.last().is_some_and(|(_, d, _)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            "mod" if text_at(&tokens, i + 2) == "{" => {
                let cfg_test = ["#", "[", "cfg", "(", "test", ")", "]"]
                    .iter()
                    .rev()
                    .enumerate()
                    .all(|(back, text)| i > back && tokens[i - 1 - back].text == *text);
                inline.push((text_at(&tokens, i + 1).to_string(), depth + 1, cfg_test));
            }
            "crate" if text_at(&tokens, i + 1) == "::" && !after_path_separator => {
                let in_test = inline.iter().any(|(_, _, test)| *test);
                for path in path_tree(&tokens, i + 2, Vec::new()) {
                    paths.push((token.line, path, in_test));
                }
            }
            "super" if !after_path_separator && text_at(&tokens, i + 1) == "::" => {
                let in_test = inline.iter().any(|(_, _, test)| *test);
                let mut here: Vec<String> = module.to_vec();
                here.extend(inline.iter().map(|(name, _, _)| name.clone()));
                let mut j = i;
                while text_at(&tokens, j) == "super" && text_at(&tokens, j + 1) == "::" {
                    here.pop();
                    j += 2;
                }
                for path in path_tree(&tokens, j, here) {
                    paths.push((token.line, path, in_test));
                }
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    paths
}

/// The paths of the path or use tree starting at token `at`, each after
/// `prefix`: `foo::bar::Baz` gives `prefix::foo::bar::Baz`;
/// `{foo::x, bar::{self, y}}` gives `prefix::foo::x`, `prefix::bar`,
/// `prefix::bar::y`. Segments after the first that is not a module-like
/// name are left out.
fn path_tree(tokens: &[Token], at: usize, prefix: Vec<String>) -> Vec<Vec<String>> {
    let mut path = prefix;
    let mut at = at;
    loop {
        let segment = text_at(tokens, at);
        if segment == "{" {
            return use_tree_branches(tokens, at)
                .into_iter()
                .flat_map(|branch| path_tree(tokens, branch, path.clone()))
                .collect();
        }
        if is_module_name(segment) {
            path.push(segment.to_string());
        } else if segment != "self" {
            // `Type`, `*`, `<`: the path names no further module.
            if !segment.is_empty() && segment.chars().next().is_some_and(char::is_alphabetic) {
                path.push(segment.to_string());
            }
            return vec![path];
        }
        if text_at(tokens, at + 1) != "::" {
            return vec![path];
        }
        at += 2;
    }
}

/// The token index where each branch of the use tree whose `{` is at `at` starts.
fn use_tree_branches(tokens: &[Token], at: usize) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut depth = 0usize;
    let mut expect_branch = true;
    for (index, token) in tokens.iter().enumerate().skip(at) {
        match token.text.as_str() {
            "{" => {
                depth += 1;
                if depth == 1 {
                    continue;
                }
            }
            "}" => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            "," if depth == 1 => {
                expect_branch = true;
                continue;
            }
            _ => {}
        }
        if depth == 1 && expect_branch {
            starts.push(index);
            expect_branch = false;
        }
    }
    starts
}

fn is_module_name(text: &str) -> bool {
    text != "self"
        && text
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn text_at(tokens: &[Token], at: usize) -> &str {
    tokens.get(at).map_or("", |t| t.text.as_str())
}

/// A token of Rust source: an identifier (with `$`, so `$crate`'s `crate`
/// stays `crate`), `::`, or one punctuation character.
#[derive(Debug)]
struct Token {
    text: String,
    line: usize,
}

/// Splits Rust source into identifiers and punctuation, leaving out
/// comments, string, byte-string, raw-string and character literals,
/// numbers and lifetimes.
fn tokens(text: &str) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\n' => {
                line += 1;
                i += 1;
            }
            '/' if at(i + 1) == '/' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '/' if at(i + 1) == '*' => {
                let mut nesting = 0;
                while i < chars.len() {
                    if chars[i] == '/' && at(i + 1) == '*' {
                        nesting += 1;
                        i += 2;
                    } else if chars[i] == '*' && at(i + 1) == '/' {
                        nesting -= 1;
                        i += 2;
                        if nesting == 0 {
                            break;
                        }
                    } else {
                        if chars[i] == '\n' {
                            line += 1;
                        }
                        i += 1;
                    }
                }
            }
            '"' => i = skip_string(&chars, i + 1, &mut line),
            'r' | 'b' | 'c' if raw_string_hashes(&chars, i).is_some() => {
                let (hashes, open) = raw_string_hashes(&chars, i).unwrap();
                i = open + 1;
                while i < chars.len() {
                    if chars[i] == '"' && (1..=hashes).all(|k| at(i + k) == '#') {
                        i += hashes + 1;
                        break;
                    }
                    if chars[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
            'b' | 'c' if at(i + 1) == '"' => i = skip_string(&chars, i + 2, &mut line),
            'b' if at(i + 1) == '\'' => i = skip_char(&chars, i + 1),
            '\'' => {
                // A character literal ('x', '\n', '\u{1F600}') or a lifetime ('a).
                if at(i + 1) == '\\' || at(i + 2) == '\'' {
                    i = skip_char(&chars, i);
                } else {
                    i += 1;
                    while at(i).is_alphanumeric() || at(i) == '_' {
                        i += 1;
                    }
                }
            }
            ':' if at(i + 1) == ':' => {
                out.push(Token {
                    text: "::".into(),
                    line,
                });
                i += 2;
            }
            c if c.is_alphabetic() || c == '_' => {
                let start = i;
                while at(i).is_alphanumeric() || at(i) == '_' {
                    i += 1;
                }
                out.push(Token {
                    text: chars[start..i].iter().collect(),
                    line,
                });
            }
            c if c.is_ascii_digit() => {
                while at(i).is_alphanumeric() || at(i) == '_' {
                    i += 1;
                }
            }
            c if c.is_whitespace() || c == '$' => i += 1,
            c => {
                out.push(Token {
                    text: c.to_string(),
                    line,
                });
                i += 1;
            }
        }
    }
    out
}

/// Skips a string body from `i` (after the opening quote) past its closing quote.
fn skip_string(chars: &[char], mut i: usize, line: &mut usize) -> usize {
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '"' => return i + 1,
            c => {
                if c == '\n' {
                    *line += 1;
                }
                i += 1;
            }
        }
    }
    i
}

/// Skips a character literal starting at its opening quote `i`.
fn skip_char(chars: &[char], mut i: usize) -> usize {
    i += 1;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '\'' => return i + 1,
            _ => i += 1,
        }
    }
    i
}

/// For a raw string starting at `i` (`r"`, `r#"`, `br##"`, `cr"`): the
/// number of `#` and the index of the opening quote.
fn raw_string_hashes(chars: &[char], i: usize) -> Option<(usize, usize)> {
    if i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_') {
        return None; // inside an identifier such as `bar"`
    }
    let mut j = i;
    if chars[j] == 'b' || chars[j] == 'c' {
        j += 1;
    }
    if chars.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while chars.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    (chars.get(j) == Some(&'"')).then_some((hashes, j))
}

//! What a test does when a service it needs is not there (the shared corpus,
//! an S3 bucket, a PostgreSQL server): by default it is skipped with a note
//! on stderr and passes, so `cargo test` works on any machine; when
//! `FASTVIEW_TEST_REQUIRE` (comma-separated, e.g. `corpus,s3`) names the
//! service it fails instead, so a run that set the service up cannot pass by
//! silently skipping it. Shared by the test binaries (included with `#[path]`).

/// The environment variable listing the services tests must not skip.
pub const REQUIRE_VAR: &str = "FASTVIEW_TEST_REQUIRE";

/// Call when `service` is missing, just before returning from the test:
/// panics with `why` when [`REQUIRE_VAR`] names `service`, else prints
/// `why: skipped` to stderr.
pub fn require(service: &str, why: &str) {
    let list = std::env::var(REQUIRE_VAR).unwrap_or_default();
    assert!(
        !names(&list, service),
        "{why}, and {REQUIRE_VAR}={list} requires {service}"
    );
    eprintln!("{why}: skipped");
}

/// Whether a comma-separated list names `service` (white space around names ignored).
fn names(list: &str, service: &str) -> bool {
    list.split(',').any(|name| name.trim() == service)
}

#[test]
fn the_require_list_is_comma_separated_names() {
    let table = [
        ("", "corpus", false),
        ("corpus", "corpus", true),
        ("s3, corpus", "corpus", true),
        ("postgres,s3", "corpus", false),
        ("corpus-extra", "corpus", false),
    ];
    for (list, service, expected) in table {
        assert_eq!(names(list, service), expected, "{list:?} {service}");
    }
}

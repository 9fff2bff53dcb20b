//! A throwaway PostgreSQL database per test, when `FASTVIEW_TEST_POSTGRES_URL`
//! names a server to create it on (e.g. `postgres://postgres@127.0.0.1:5432/postgres`).
//! Shared by the `store` and `api` test binaries (included with `#[path]`,
//! beside `require.rs` as `require`).

use std::sync::atomic::{AtomicU32, Ordering};

use sqlx::{AssertSqlSafe, Connection, PgConnection};

/// The environment variable naming the PostgreSQL server tests may use.
pub const POSTGRES_URL_VAR: &str = "FASTVIEW_TEST_POSTGRES_URL";

/// A database created for one test and dropped (`WITH (FORCE)`) when this
/// value is dropped.
pub struct TestDatabase {
    /// The URL of the new database (the configured URL with its database replaced).
    pub url: String,
    name: String,
    admin_url: String,
}

impl TestDatabase {
    /// Creates a fresh database on the server of `FASTVIEW_TEST_POSTGRES_URL`;
    /// `None` when the variable is unset or empty, unless `FASTVIEW_TEST_REQUIRE`
    /// (comma-separated) names `postgres`: then the test fails.
    pub async fn create() -> Option<Self> {
        let Some(admin_url) = std::env::var(POSTGRES_URL_VAR)
            .ok()
            .filter(|url| !url.is_empty())
        else {
            super::require::require("postgres", &format!("{POSTGRES_URL_VAR} is unset"));
            return None;
        };
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "fastview_t_{}_{}_{:08x}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            rand::random::<u32>()
        );
        let mut admin = PgConnection::connect(&admin_url)
            .await
            .expect("connect to FASTVIEW_TEST_POSTGRES_URL");
        sqlx::query(AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut admin)
            .await
            .expect("create test database");
        let _ = admin.close().await;
        Some(Self {
            url: with_database(&admin_url, &name),
            name,
            admin_url,
        })
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let (admin_url, name) = (self.admin_url.clone(), self.name.clone());
        // Drop may run inside the test's runtime: use a thread with its own.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async move {
                let mut admin = PgConnection::connect(&admin_url).await.ok()?;
                sqlx::query(AssertSqlSafe(format!(
                    "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
                )))
                .execute(&mut admin)
                .await
                .ok()?;
                let _ = admin.close().await;
                Some(())
            })
        })
        .join();
        if !matches!(dropped, Ok(Some(()))) {
            eprintln!("could not drop test database {}", self.name);
        }
    }
}

/// `url` with its database name replaced by `name` (query parameters kept).
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, format!("?{query}")),
        None => (url, String::new()),
    };
    let authority = base.find("://").map_or(0, |i| i + 3);
    let path = base[authority..]
        .find('/')
        .map_or(base.len(), |i| authority + i);
    format!("{}/{name}{query}", &base[..path])
}

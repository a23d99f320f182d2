//! Test harness: a fresh store per test on SQLite (temp dir) or PostgreSQL (fresh schema).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, unreachable_pub)]

use weft_store::{PgOptions, Store, drop_schema};

/// A store under test and what to clean up.
pub struct Harness {
    pub store: Store,
    pub url: String,
    pub schema: Option<(String, String)>,
    pub _dir: Option<tempfile::TempDir>,
}

impl Harness {
    pub async fn finish(self) {
        let Harness { store, schema, .. } = self;
        store.flush().await.unwrap();
        drop(store);
        if let Some((url, schema)) = schema {
            drop_schema(&url, &schema).await.unwrap();
        }
    }
}

pub async fn sqlite() -> Option<Harness> {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("weft.db").display());
    let store = Store::open(&url).await.unwrap();
    Some(Harness {
        store,
        url,
        schema: None,
        _dir: Some(dir),
    })
}

/// The PostgreSQL test URL; `None` (skip, loudly) when unset, a panic when `CI` is set.
pub fn postgres_url() -> Option<String> {
    match std::env::var("WEFT_TEST_DATABASE_URL") {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ => {
            if std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false") {
                panic!(
                    "CI is set but WEFT_TEST_DATABASE_URL is not: the PostgreSQL half cannot be skipped in CI"
                );
            }
            eprintln!(
                "SKIPPED: the PostgreSQL half of this test (set WEFT_TEST_DATABASE_URL to run it)"
            );
            None
        }
    }
}

pub fn fresh_schema() -> String {
    format!("weft_test_{}_{}", std::process::id(), fastrand::u64(..))
}

pub async fn postgres() -> Option<Harness> {
    let url = postgres_url()?;
    let schema = fresh_schema();
    let store = Store::open_postgres(PgOptions::new(url.clone()).schema(schema.clone()))
        .await
        .unwrap();
    Some(Harness {
        store,
        url: url.clone(),
        schema: Some((url, schema)),
        _dir: None,
    })
}

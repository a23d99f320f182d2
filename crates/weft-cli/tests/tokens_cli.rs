//! `weft tokens` through the `weft` binary: `create` prints the secret once (alone on stdout,
//! or in `--json`) into the project's store, where weft-store's `verify_token` — what
//! `weft serve` calls — accepts it; `--read-only` makes a read token; `list` never shows a
//! secret (nor does the database file hold one); `revoke` by name or id makes `verify_token`
//! refuse it; an unknown token, a taken name and a missing project exit 2.

mod common;

use common::weft;

use std::path::Path;
use std::process::Output;

use serde_json::Value;
use weft_store::{Store, TokenRecord, TokenScope, Tokens as _};

fn say(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn ok(cwd: &Path, args: &[&str]) -> Output {
    let out = weft(cwd, args);
    assert_eq!(out.status.code(), Some(0), "weft {args:?}: {}", say(&out));
    out
}

/// A project folder (`weft.toml` is what makes one) with a subfolder to run from.
fn project(root: &Path) -> std::path::PathBuf {
    let dir = root.join("agents-project");
    std::fs::create_dir_all(dir.join("src")).expect("mkdir");
    std::fs::write(dir.join("weft.toml"), "").expect("weft.toml");
    dir
}

/// What `weft serve PROJECT` will check a presented secret against.
fn verify(project: &Path, secret: &str) -> Option<TokenRecord> {
    let url = format!("sqlite:{}", project.join(".weft/weft.db").display());
    let secret = secret.to_owned();
    tokio::runtime::Runtime::new()
        .expect("runtime")
        .block_on(async move {
            let store = Store::open(&url).await.expect("the project's store");
            let token = store.verify_token(&secret).await.expect("verify");
            // The use it records (a queued write) is committed before the next command.
            store.flush().await.expect("flush");
            token
        })
}

fn list(cwd: &Path) -> Vec<Value> {
    let out = ok(cwd, &["tokens", "list", "--json"]);
    serde_json::from_slice(&out.stdout).expect("list --json")
}

#[test]
fn tokens_are_created_once_listed_without_secrets_and_revoked() {
    let root = tempfile::tempdir().expect("tempdir");
    let project = project(root.path());
    // Run from a subfolder: the tokens go to the project's store, as every store command's.
    let cwd = project.join("src");

    // Text: the secret alone on stdout, the warning on stderr.
    let out = ok(&cwd, &["tokens", "create", "laptop"]);
    let secret = stdout(&out).trim().to_owned();
    assert_eq!(stdout(&out).lines().count(), 1, "{}", say(&out));
    assert!(
        secret.starts_with("weft_") && secret.len() == 48,
        "{secret}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("will not be shown again"), "{stderr}");
    assert!(stderr.contains("Authorization: Bearer"), "{stderr}");
    assert!(project.join(".weft/weft.db").is_file());
    let laptop = verify(&project, &secret).expect("the new token verifies");
    assert_eq!(
        (laptop.name.as_str(), laptop.scope),
        ("laptop", TokenScope::Full)
    );

    // JSON, read-only, from the project folder itself.
    let out = ok(
        &project,
        &["tokens", "create", "dashboard", "--read-only", "--json"],
    );
    let created: Value = serde_json::from_slice(&out.stdout).expect("create --json");
    let keys: Vec<&str> = created
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["id", "name", "scope", "token"]);
    assert_eq!(created["scope"], "read");
    let read_secret = created["token"].as_str().expect("token").to_owned();
    let dashboard = verify(&project, &read_secret).expect("verifies");
    assert_eq!(dashboard.id, created["id"].as_str().expect("id"));
    assert!(!dashboard.scope.allows_write());

    // A name an active token has is refused.
    let out = weft(&cwd, &["tokens", "create", "laptop"]);
    assert_eq!(out.status.code(), Some(2), "{}", say(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("already named \"laptop\""),
        "{}",
        say(&out)
    );

    // Lists never show a secret; neither does the database file hold one.
    let text = ok(&cwd, &["tokens", "list"]);
    let json = ok(&cwd, &["tokens", "list", "--json"]);
    for shown in [stdout(&text), stdout(&json)] {
        assert!(
            !shown.contains(&secret) && !shown.contains(&read_secret),
            "{shown}"
        );
        assert!(!shown.contains("weft_"), "{shown}");
    }
    assert!(stdout(&text).contains("laptop") && stdout(&text).contains("dashboard"));
    let listed = list(&cwd);
    assert_eq!(listed.len(), 2);
    assert!(listed.iter().all(|t| t.get("token").is_none()));
    // The last use recorded by the verifications above.
    assert!(listed[0]["lastUsedAt"].is_string(), "{listed:?}");
    let mut bytes = Vec::new();
    for file in ["weft.db", "weft.db-wal"] {
        bytes.extend(std::fs::read(project.join(".weft").join(file)).unwrap_or_default());
    }
    let stored = String::from_utf8_lossy(&bytes);
    assert!(!stored.contains(&secret) && !stored.contains(&read_secret));

    // Revoke by name: refused from then on; the other token still works.
    let out = ok(&cwd, &["tokens", "revoke", "laptop"]);
    assert!(stdout(&out).contains("revoked"), "{}", say(&out));
    assert_eq!(verify(&project, &secret), None);
    assert!(verify(&project, &read_secret).is_some());
    // Revoke by id.
    ok(&cwd, &["tokens", "revoke", &dashboard.id]);
    assert_eq!(verify(&project, &read_secret), None);
    let listed = list(&cwd);
    assert!(
        listed.iter().all(|t| t["revokedAt"].is_string()),
        "{listed:?}"
    );
    // Again: said, exit 0.
    let out = ok(&cwd, &["tokens", "revoke", "laptop"]);
    assert!(stdout(&out).contains("already revoked"), "{}", say(&out));

    // An unknown token exits 2 and says so.
    let out = weft(&cwd, &["tokens", "revoke", "nope"]);
    assert_eq!(out.status.code(), Some(2), "{}", say(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no token has the id \"nope\""),
        "{}",
        say(&out)
    );
}

#[test]
fn tokens_need_a_project_or_a_store() {
    let root = tempfile::tempdir().expect("tempdir");
    // No weft.toml here or above (the temporary folder is outside any project).
    let out = weft(root.path(), &["tokens", "create", "ci"]);
    assert_eq!(out.status.code(), Some(2), "{}", say(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--project DIR"),
        "{}",
        say(&out)
    );
    assert!(!root.path().join(".weft").exists());
    // `--project` names it from anywhere; `list` without a store is an error naming the path.
    let project = project(root.path());
    let out = weft(
        root.path(),
        &["tokens", "list", "--project", "agents-project"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", say(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("there is no store"),
        "{}",
        say(&out)
    );
    let out = ok(
        root.path(),
        &[
            "tokens",
            "create",
            "ci",
            "--project",
            "agents-project",
            "--json",
        ],
    );
    let created: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(verify(&project, created["token"].as_str().expect("token")).is_some());
    // `--store` puts them elsewhere.
    let other = root.path().join("other.db");
    let url = format!("sqlite:{}", other.display());
    ok(root.path(), &["tokens", "create", "ci", "--store", &url]);
    assert!(other.is_file());
    // Bad names are usage errors.
    let out = weft(&project, &["tokens", "create", "t-0a1b2c3d"]);
    assert_eq!(out.status.code(), Some(2), "{}", say(&out));
}

#[test]
fn help_says_what_a_token_is_for() {
    let root = tempfile::tempdir().expect("tempdir");
    let out = ok(root.path(), &["tokens", "--help"]);
    // Words, whatever the wrapping.
    let help = stdout(&out)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for needle in [
        "weft serve",
        "Authorization: Bearer",
        "read-only",
        "shown once",
        "Exit codes",
    ] {
        assert!(help.contains(needle), "{needle:?} missing from:\n{help}");
    }
    let out = ok(root.path(), &["tokens", "create", "--help"]);
    assert!(stdout(&out).contains("--read-only"));
}

//! The completion gates that judge the change itself, on fixture git repositories: tests
//! that cover the change (they fail on the base revision's code), the built-in schema diff,
//! and the parallel expert review.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use weft_gate::{GateConfig, GateDb, run_checklist, schema_diff};

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn write(dir: &Path, path: &str, text: &str) {
    let file = dir.join(path);
    std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
    std::fs::write(file, text).expect("write");
}

/// A repository whose `main` holds `files`, and a feature worktree on a new branch.
fn repo(files: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    git(&root, &["init", "-q", "-b", "main"]);
    for (path, text) in files {
        write(&root, path, text);
    }
    git(&root, &["add", "."]);
    git(&root, &["commit", "-q", "-m", "init"]);
    let wt = root.join(".worktrees/001-change");
    git(
        &root,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "feature/001-change",
            wt.to_str().expect("utf8"),
            "main",
        ],
    );
    (dir, root, wt)
}

const TESTS: &str = "[project]\ntestCommand = \"for t in tests/test_*.py; do python3 $t || exit 1; done\"\n[completion]\nnewTests = true\n";

/// `calc.py` on main has a bug: double(2) is 5.
fn calc_repo() -> (tempfile::TempDir, PathBuf, PathBuf) {
    repo(&[
        ("weft.toml", TESTS),
        ("calc.py", "def double(x):\n    return x + x + 1\n"),
        (
            "tests/test_smoke.py",
            "import sys\nsys.path.insert(0, '.')\nimport calc\nassert calc.double(0) is not None\n",
        ),
    ])
}

fn new_tests(wt: &Path) -> weft_gate::CheckResult {
    let config = GateConfig::load(wt).expect("config");
    let list = run_checklist(&config, wt, None, None);
    list.results
        .into_iter()
        .find(|r| r.name == "newTests")
        .expect("newTests configured")
}

#[test]
fn uni_036_new_tests_must_fail_on_the_base_revision_to_cover_the_change() {
    // Covering: the fix comes with a test that fails on main's code.
    let (_d, root, wt) = calc_repo();
    write(&wt, "calc.py", "def double(x):\n    return x + x\n");
    write(
        &wt,
        "tests/test_double.py",
        "import sys\nsys.path.insert(0, '.')\nimport calc\nassert calc.double(2) == 4, calc.double(2)\n",
    );
    let covering = new_tests(&wt);
    assert!(
        covering.passed && covering.detail.contains("fail against the base revision"),
        "{covering:?}"
    );
    // The same, committed.
    git(&wt, &["add", "."]);
    git(&wt, &["commit", "-q", "-m", "fix double"]);
    assert!(new_tests(&wt).passed, "committed");
    // The scratch worktree of the base revision is gone again.
    let listed = Command::new("git")
        .args(["worktree", "list"])
        .current_dir(&root)
        .output()
        .expect("git");
    assert_eq!(
        String::from_utf8_lossy(&listed.stdout).lines().count(),
        2,
        "main and the feature worktree only"
    );

    // Not covering: the fix comes with a test that passes on main's code as well.
    let (_d2, _root2, wt2) = calc_repo();
    write(&wt2, "calc.py", "def double(x):\n    return x + x\n");
    write(
        &wt2,
        "tests/test_double.py",
        "import sys\nsys.path.insert(0, '.')\nimport calc\nassert isinstance(calc.double(2), int)\n",
    );
    let idle = new_tests(&wt2);
    assert!(
        !idle.passed && idle.detail.contains("do not cover the change"),
        "{idle:?}"
    );
    // A base whose own suite already fails cannot show coverage: the check says so.
    let (_d3, _root3, wt3) = repo(&[
        ("weft.toml", TESTS),
        ("calc.py", "def double(x):\n    return x + x + 1\n"),
        ("tests/test_smoke.py", "assert False, 'main is red'\n"),
    ]);
    write(&wt3, "calc.py", "def double(x):\n    return x + x\n");
    write(&wt3, "tests/test_smoke.py", "assert True\n");
    write(
        &wt3,
        "tests/test_double.py",
        "import sys\nsys.path.insert(0, '.')\nimport calc\nassert calc.double(2) == 4\n",
    );
    let red = new_tests(&wt3);
    assert!(
        !red.passed && red.detail.contains("the base revision's own suite fails"),
        "{red:?}"
    );
    // Without a test file at all it fails as before.
    std::fs::remove_file(wt2.join("tests/test_double.py")).expect("rm");
    let none = new_tests(&wt2);
    assert!(
        !none.passed && none.detail.contains("no test file did"),
        "{none:?}"
    );
}

const SCHEMA: &str = r#"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "required": ["id"],
  "properties": {
    "id": {"type": "integer"},
    "name": {"type": "string"},
    "status": {"enum": ["open", "closed"]}
  }
}
"#;

const API: &str = "openapi: 3.0.0\ninfo: {title: pets, version: '1'}\npaths:\n  /pets:\n    get:\n      parameters:\n        - {name: limit, in: query, schema: {type: integer}}\n      responses:\n        '200':\n          content:\n            application/json:\n              schema: {$ref: '#/components/schemas/Pet'}\n    post:\n      responses: {'201': {description: created}}\n  /pets/{id}:\n    delete:\n      responses: {'204': {description: gone}}\ncomponents:\n  schemas:\n    Pet:\n      type: object\n      properties:\n        id: {type: integer}\n        tag: {type: string}\n";

const DDL: &str = "CREATE TABLE users (\n  id INTEGER PRIMARY KEY,\n  email TEXT NOT NULL,\n  nick TEXT\n);\nCREATE TABLE audit (id INTEGER);\n";

fn schema_repo() -> (tempfile::TempDir, PathBuf, PathBuf) {
    repo(&[
        ("weft.toml", "[completion]\nschemaDiff = true\n"),
        ("schemas/ticket.schema.json", SCHEMA),
        ("api/openapi.yaml", API),
        ("db/migrations/001_init.sql", DDL),
        (
            "package.json",
            "{\"name\": \"not-a-schema\", \"version\": \"1.0.0\"}\n",
        ),
    ])
}

fn schema_check(wt: &Path) -> weft_gate::CheckResult {
    let config = GateConfig::load(wt).expect("config");
    run_checklist(&config, wt, None, None).results[0].clone()
}

#[test]
fn uni_041_additions_pass_the_schema_diff() {
    let (_d, _root, wt) = schema_repo();
    assert_eq!(schema_check(&wt).detail, "no schema or contract change");
    // Additions only: an optional property, an enum value, a path, a nullable column, a
    // migration adding a table — and an unrelated JSON file.
    write(
        &wt,
        "schemas/ticket.schema.json",
        &SCHEMA.replace(
            "\"status\": {\"enum\": [\"open\", \"closed\"]}",
            "\"status\": {\"enum\": [\"open\", \"closed\", \"held\"]},\n    \"due\": {\"type\": \"string\"}",
        ),
    );
    write(
        &wt,
        "api/openapi.yaml",
        &API.replace(
            "components:",
            "  /owners:\n    get:\n      responses: {'200': {description: ok}}\ncomponents:",
        ),
    );
    write(
        &wt,
        "db/migrations/002_more.sql",
        "ALTER TABLE users ADD COLUMN bio TEXT; -- optional\nCREATE TABLE owners (id INTEGER PRIMARY KEY);\n",
    );
    write(
        &wt,
        "package.json",
        "{\"name\": \"x\", \"version\": \"1.0.1\"}\n",
    );
    let check = schema_check(&wt);
    assert!(
        check.passed
            && check
                .detail
                .contains("ok db/migrations/002_more.sql: users.bio"),
        "{check:?}"
    );
    let diff = schema_diff(&wt, "main", None).expect("diff");
    assert!(diff.passed());
    assert!(
        diff.changes
            .iter()
            .all(|c| !c.file.contains("package.json"))
    );
    assert_eq!(diff.files.len(), 3, "{:?}", diff.files);
}

#[test]
fn uni_041_breaking_changes_fail_the_schema_diff() {
    let (_d, _root, wt) = schema_repo();
    write(
        &wt,
        "schemas/ticket.schema.json",
        &SCHEMA
            .replace("\"required\": [\"id\"]", "\"required\": [\"id\", \"name\"]")
            .replace(
                "\"id\": {\"type\": \"integer\"}",
                "\"id\": {\"type\": \"string\"}",
            )
            .replace("[\"open\", \"closed\"]", "[\"open\"]"),
    );
    write(
        &wt,
        "api/openapi.yaml",
        &API.replace(
            "  /pets/{id}:\n    delete:\n      responses: {'204': {description: gone}}\n",
            "",
        )
        .replace(
            "        - {name: limit, in: query, schema: {type: integer}}",
            "        - {name: owner, in: query, required: true, schema: {type: string}}",
        )
        .replace("        tag: {type: string}\n", ""),
    );
    write(
        &wt,
        "db/migrations/002_break.sql",
        "ALTER TABLE users DROP COLUMN nick;\nALTER TABLE users ALTER COLUMN email TYPE VARCHAR(80);\nALTER TABLE users ADD COLUMN org INTEGER NOT NULL;\nDROP TABLE audit;\n",
    );
    git(&wt, &["add", "."]);
    git(&wt, &["commit", "-q", "-m", "break things"]);
    let diff = schema_diff(&wt, "main", Some("HEAD")).expect("diff");
    let breaking: Vec<String> = diff
        .changes
        .iter()
        .filter(|c| c.breaking)
        .map(|c| format!("{}: {}", c.location, c.message))
        .collect();
    for expected in [
        "/properties/id: type changed from integer to string",
        "/properties/status: enum value \"closed\" removed",
        "/required: property \"name\" is now required",
        "/pets/{id}: path /pets/{id} removed",
        "GET /pets: query parameter \"limit\" removed",
        "GET /pets: new required query parameter \"owner\"",
        "/components/schemas/Pet/properties/tag: property \"tag\" removed",
        "users.nick: column nick removed",
        "users.email: type changed from text to varchar(80)",
        "users.org: new NOT NULL column org without a default",
        "audit: table audit removed",
    ] {
        assert!(
            breaking.iter().any(|b| b == expected),
            "{expected} missing from {breaking:#?}"
        );
    }
    assert_eq!(breaking.len(), 11, "{breaking:#?}");
    let check = schema_check(&wt);
    assert!(
        !check.passed
            && check
                .detail
                .contains("BREAKING api/openapi.yaml: /pets/{id}"),
        "{check:?}"
    );
    // A removed contract file is breaking too.
    std::fs::remove_file(wt.join("schemas/ticket.schema.json")).expect("rm");
    let diff = schema_diff(&wt, "main", None).expect("diff");
    assert!(diff.changes.iter().any(|c| c.breaking
        && c.file == "schemas/ticket.schema.json"
        && c.message == "the contract file was removed"));
    // Unknown revisions are errors, not verdicts.
    assert!(schema_diff(&wt, "no-such-branch", None).is_err());
}

/// A reviewer script: waits (bounded) until every other reviewer has started — so a
/// sequential review can never pass — then answers `verdict` with `reason`.
fn reviewer(dir: &Path, name: &str, others: &[&str], verdict: &str, reason: &str) -> String {
    let waits: String = others
        .iter()
        .map(|o| format!("i=0; while [ ! -f started.{o} ]; do i=$((i+1)); [ $i -gt 3000 ] && {{ echo '{{\"verdict\":\"reject\",\"reasons\":[\"never saw {o} start\"]}}'; exit 0; }}; sleep 0.01; done\n"))
        .collect();
    let script = format!(
        "#!/bin/sh\ncd \"{}\"\ntouch started.{name}\n{waits}grep -q '^+    return x + x$' \"$WEFT_REVIEW_DIFF\" || {{ echo '{{\"verdict\":\"reject\",\"reasons\":[\"no diff\"]}}'; exit 0; }}\n[ \"$WEFT_REVIEWER\" = {name} ] || exit 1\necho 'thinking…'\necho '{{\"verdict\":\"{verdict}\",\"reasons\":[\"{reason}\"]}}'\n",
        dir.display()
    );
    let path = dir.join(format!("{name}-{verdict}.sh"));
    std::fs::write(&path, script).expect("script");
    format!("sh {}", path.display())
}

#[test]
fn uni_040_reviewers_run_in_parallel_and_every_required_one_must_approve() {
    let (_d, root, wt) = calc_repo();
    write(&wt, "calc.py", "def double(x):\n    return x + x\n");
    let scratch = tempfile::tempdir().expect("tempdir");
    let s = scratch.path();
    let config = |reviewers: &[(&str, String, bool)]| {
        let mut text = "[completion]\nreview = true\n".to_owned();
        for (name, command, required) in reviewers {
            text.push_str(&format!(
                "[[review.reviewers]]\nname = \"{name}\"\ncommand = {command:?}\nrequired = {required}\n"
            ));
        }
        GateConfig::parse(&text).expect("config")
    };
    let clear = || {
        for name in ["security", "perf", "style"] {
            let _ = std::fs::remove_file(s.join(format!("started.{name}")));
        }
    };
    let db = GateDb::open(&GateDb::path_for(&root)).expect("db");
    // All approve (each waits until the others started: they run at the same time).
    let all = [
        (
            "security",
            reviewer(s, "security", &["perf", "style"], "approve", "no secrets"),
            true,
        ),
        (
            "perf",
            reviewer(s, "perf", &["security", "style"], "approve", "no hot loop"),
            true,
        ),
        (
            "style",
            reviewer(s, "style", &["security", "perf"], "approve", "reads well"),
            false,
        ),
    ];
    let list = run_checklist(&config(&all), &wt, Some(&db), Some("s1"));
    assert!(list.passed(), "{list:?}");
    assert!(
        list.results[0]
            .detail
            .contains("approved by security: no secrets")
            && list.results[0]
                .detail
                .contains("approved by perf: no hot loop"),
        "{:?}",
        list.results[0]
    );
    // Each verdict is recorded in the audit trail.
    let audit = db.recent_audit(0, false, 50).expect("audit");
    let recorded: Vec<(&str, bool)> = audit
        .iter()
        .filter(|a| a.gate == "review")
        .map(|a| (a.policy_id.as_deref().unwrap_or(""), a.passed))
        .collect();
    assert_eq!(recorded.len(), 3, "{audit:?}");
    assert!(recorded.contains(&("security", true)));

    // A required reviewer rejecting fails the gate; an optional one does not.
    clear();
    let rejecting = [
        all[0].clone(),
        (
            "perf",
            reviewer(
                s,
                "perf",
                &["security", "style"],
                "reject",
                "quadratic loop",
            ),
            true,
        ),
        (
            "style",
            reviewer(s, "style", &["security", "perf"], "reject", "naming"),
            false,
        ),
    ];
    let list = run_checklist(&config(&rejecting), &wt, Some(&db), Some("s2"));
    assert!(!list.passed());
    assert!(
        list.reason().contains("REJECTED by perf: quadratic loop"),
        "{}",
        list.reason()
    );
    clear();
    let optional_only = [all[0].clone(), all[1].clone(), rejecting[2].clone()];
    let list = run_checklist(&config(&optional_only), &wt, None, None);
    assert!(list.passed(), "{list:?}");
    assert!(
        list.results[0]
            .detail
            .contains("REJECTED by style (optional): naming")
    );
    // A reviewer that crashes or says nothing rejects (fail-closed).
    let broken = [
        ("crash", "exit 7".to_owned(), true),
        ("mute", "echo looks fine".to_owned(), true),
    ];
    let list = run_checklist(&config(&broken), &wt, None, None);
    assert!(!list.passed());
    let reason = list.reason();
    assert!(
        reason.contains("REJECTED by crash: failed (exit 7)")
            && reason.contains("REJECTED by mute: gave no verdict"),
        "{reason}"
    );
}

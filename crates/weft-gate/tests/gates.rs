//! The gates as a library: the dangerous-command list, the worktree gate, policies with
//! levels, stages and enforcers, coordination cleanup and the completion checks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::json;
use weft_gate::{GateConfig, GateDb, Gates, Level, Policy, Stage, ToolInvocation, run_checklist};

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

/// A repository on `main` with one commit, plus a feature branch checked out in a worktree.
fn repo() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    git(&root, &["init", "-q", "-b", "main"]);
    std::fs::write(
        root.join("Cargo.toml"),
        "[package]\nname = \"x\"\nversion = \"0.1.0\"\n",
    )
    .expect("write");
    git(&root, &["add", "."]);
    git(&root, &["commit", "-q", "-m", "init"]);
    let wt = root.join(".worktrees/001-fix");
    git(
        &root,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "feature/001-fix",
            wt.to_str().expect("utf8"),
            "main",
        ],
    );
    (dir, root, wt)
}

fn gates(root: &Path) -> Gates {
    Gates::new(root, GateConfig::default()).with_worktree_override(false)
}

fn shell(root: &Path, cwd: &Path, command: &str) -> Option<String> {
    let verdict = gates(root).check(&ToolInvocation::new(
        "Bash",
        json!({"command": command}),
        cwd,
    ));
    (!verdict.allowed()).then(|| verdict.reason())
}

#[test]
fn dangerous_commands_are_refused_through_any_wrapping() {
    let (_d, root, wt) = repo();
    let home = std::env::var("HOME").unwrap_or_default();
    // (command, run at the root on main — true — or in the feature worktree)
    let refused: &[(&str, bool)] = &[
        ("terraform apply", false),
        ("terraform -chdir=infra apply -auto-approve", false),
        ("tofu destroy", false),
        ("git push --force origin main", false),
        ("git push -f origin main", false),
        ("git push -fu origin main", false),
        ("git push --force-with-lease origin main", false),
        ("git push --force-with-lease=main:abc origin main", false),
        ("git push origin +main", false),
        ("git push origin feature:main -f", false),
        ("git push --force origin HEAD", true),
        ("git push -f", true),
        ("git push --mirror", false),
        ("git push --all --force", false),
        ("git push origin --delete main", false),
        ("git push origin :master", false),
        ("git -C . push --force origin main", false),
        ("rm -rf /", false),
        ("rm -fr /*", false),
        ("rm -r ~", false),
        ("rm -rf $HOME", false),
        ("rm -rf \"${HOME}/\"", false),
        ("rm -rf .", true),
        ("rm -Rf ../..", false),
        ("rm -rf --no-preserve-root /tmp/x", false),
        ("git reset --hard HEAD~1", true),
        ("git rebase -i HEAD~3", true),
        ("git rebase feature/x main", false),
        ("git rebase origin/main main", false),
        ("git commit --amend -m x", true),
        ("git filter-branch --all", false),
        ("git filter-repo --path x", true),
        ("git branch -f main HEAD~1", false),
        ("git branch -D master", false),
        ("git checkout -B main", false),
        ("git update-ref refs/heads/main HEAD~1", false),
        ("mkfs.ext4 /dev/sda1", false),
        ("dd if=/dev/zero of=/dev/sda bs=1M", false),
        ("npm version patch", true),
        ("cargo set-version 1.2.0", true),
        // Wrappers and chains.
        ("echo ok && git push -f origin main", false),
        ("true; terraform apply", false),
        ("ls | xargs -n1 rm -rf /", false),
        ("bash -c 'git push --force origin main'", false),
        ("sh -lc \"terraform apply\"", false),
        ("env FOO=1 git push -f origin main", false),
        ("FOO=1 BAR=2 sudo -u deploy terraform apply", false),
        ("echo \"$(git reset --hard)\"", true),
        ("echo `rm -rf /`", false),
        ("eval 'git push -f origin main'", false),
        ("timeout 30 nohup git push -f origin main &", false),
        ("/usr/bin/git push --force origin main", false),
        ("(cd sub && git push -f origin main)", false),
    ];
    let mut missed = Vec::new();
    for (command, at_root) in refused {
        let cwd = if *at_root { &root } else { &wt };
        if shell(&root, cwd, command).is_none() {
            missed.push(*command);
        }
    }
    assert!(missed.is_empty(), "let through: {missed:?}");
    assert!(!home.is_empty());
}

#[test]
fn ordinary_commands_pass() {
    let (_d, root, wt) = repo();
    let allowed: &[(&str, bool)] = &[
        ("terraform plan", false),
        ("git push origin feature/001-fix", false),
        ("git push -u origin feature/001-fix --force", false),
        ("git push -f", false), // the worktree's feature branch
        ("git push origin main", true),
        ("git push origin --delete feature/old", false),
        ("rm -rf target node_modules", false),
        ("rm -rf ./build/*", false),
        ("rm -f /tmp/x", false),
        ("git reset --hard HEAD~1", false),
        ("git rebase main", false),
        ("git rebase --abort", true),
        ("git commit --amend --no-edit", false),
        ("git branch -D feature/old", false),
        ("dd if=/dev/zero of=out.img count=1", false),
        ("npm version patch", false),
        ("echo 'git push --force origin main'", false),
        ("grep -r \"terraform apply\" docs", false),
        ("cargo test 2>&1 | tail -5", false),
    ];
    for (command, at_root) in allowed {
        let cwd = if *at_root { &root } else { &wt };
        assert_eq!(shell(&root, cwd, command), None, "{command}");
    }
}

#[test]
fn worktree_gate_covers_every_edit_tool_and_file_type() {
    let (_d, root, _wt) = repo();
    let g = gates(&root);
    for tool in [
        "Edit",
        "Write",
        "MultiEdit",
        "write_file",
        "StrReplace",
        "Delete",
    ] {
        for file in [
            "src/lib.rs",
            "README.md",
            "config.json",
            "run.sh",
            ".github/ci.yml",
            "tests/t.rs",
        ] {
            let outside =
                ToolInvocation::new(tool, json!({"file_path": file, "path": file}), &root);
            assert!(!g.check(&outside).allowed(), "{tool} {file} at the root");
            let inside = ToolInvocation::new(
                tool,
                json!({"file_path": format!(".worktrees/001-fix/{file}"), "path": format!(".worktrees/001-fix/{file}")}),
                &root,
            );
            assert!(g.check(&inside).allowed(), "{tool} {file} in a worktree");
        }
    }
    let notebook = ToolInvocation::new("NotebookEdit", json!({"notebook_path": "a.ipynb"}), &root);
    assert!(!g.check(&notebook).allowed());
    // Escaping the worktree with `..`, a bad worktree name, no path at all.
    for path in [
        ".worktrees/001-fix/../../src/x.rs",
        ".worktrees/fix/x.rs",
        ".worktrees/001-fix",
        "/etc/passwd",
    ] {
        let call = ToolInvocation::new("Write", json!({"file_path": path}), &root);
        assert!(!g.check(&call).allowed(), "{path}");
    }
    assert!(
        !g.check(&ToolInvocation::new("Edit", json!({}), &root))
            .allowed()
    );
    // Read-only work needs no worktree.
    for tool in ["Read", "Grep", "Glob", "read_file", "search_code"] {
        assert!(
            g.check(&ToolInvocation::new(
                tool,
                json!({"file_path": "src/lib.rs"}),
                &root
            ))
            .allowed()
        );
    }
    // The override is honoured and said.
    let over = Gates::new(&root, GateConfig::default()).with_worktree_override(true);
    let verdict = over.check(&ToolInvocation::new(
        "Edit",
        json!({"file_path": "src/lib.rs"}),
        &root,
    ));
    assert!(verdict.allowed());
    assert!(verdict.findings[0].message.contains("UAP_NO_WORKTREE=1"));
}

fn policy(
    id: &str,
    level: Level,
    stage: Stage,
    tools: &str,
    pattern: Option<&str>,
    enforcer: Option<String>,
) -> Policy {
    Policy {
        id: id.into(),
        description: String::new(),
        level,
        stage,
        tools: tools.into(),
        deny_pattern: pattern.map(str::to_owned),
        enforcer,
        enabled: true,
    }
}

#[test]
fn required_policies_block_and_the_others_only_log() {
    let (_d, root, wt) = repo();
    let call = ToolInvocation::new("Bash", json!({"command": "kubectl delete ns prod"}), &wt);
    let with = |p: Policy| gates(&root).with_policies(vec![p]).check(&call);
    let required = with(policy(
        "k",
        Level::Required,
        Stage::PreExec,
        "shell",
        Some("kubectl delete"),
        None,
    ));
    assert!(!required.allowed());
    assert!(required.reason().contains("[policy k]"));
    for level in [Level::Recommended, Level::Optional] {
        let v = with(policy(
            "k",
            level,
            Stage::PreExec,
            "Bash",
            Some("kubectl delete"),
            None,
        ));
        assert!(v.allowed(), "{level}");
        assert!(!v.advisories().is_empty(), "{level} is logged");
    }
    // Stage, tool matcher and the enabled flag select the policies.
    assert!(
        with(policy(
            "k",
            Level::Required,
            Stage::PostExec,
            "*",
            Some("kubectl"),
            None
        ))
        .allowed()
    );
    assert!(
        !with(policy(
            "k",
            Level::Required,
            Stage::Always,
            "*",
            Some("kubectl"),
            None
        ))
        .allowed()
    );
    assert!(
        with(policy(
            "k",
            Level::Required,
            Stage::PreExec,
            "Edit|Write",
            Some("kubectl"),
            None
        ))
        .allowed()
    );
    let mut off = policy(
        "k",
        Level::Required,
        Stage::PreExec,
        "*",
        Some("kubectl"),
        None,
    );
    off.enabled = false;
    assert!(with(off).allowed());
}

#[test]
fn completion_like_operations_are_rechecked_at_review() {
    let (_d, root, wt) = repo();
    let review = policy("ship", Level::Required, Stage::Review, "*", Some("."), None);
    let g = gates(&root).with_policies(vec![review]);
    for command in [
        "gh pr merge 12 --squash",
        "git merge feature/x",
        "cargo publish",
        "kubectl apply -f x.yml",
        "npm run deploy",
    ] {
        let call = ToolInvocation::new("Bash", json!({"command": command}), &wt);
        assert!(
            !g.check(&call).allowed(),
            "{command} is re-checked at review"
        );
    }
    let done = ToolInvocation::new(
        "TodoWrite",
        json!({"todos": [{"content": "x", "status": "completed"}]}),
        &wt,
    );
    assert!(!g.check(&done).allowed());
    let plain = ToolInvocation::new("Bash", json!({"command": "cargo build"}), &wt);
    assert!(g.check(&plain).allowed());
}

fn enforcer(dir: &Path, body: &str) -> String {
    let path = dir.join("enforcer.sh");
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write");
    format!("sh {}", path.display())
}

#[test]
fn external_enforcers_speak_the_reference_protocol() {
    let (d, root, wt) = repo();
    let call = ToolInvocation::new(
        "Write",
        json!({"file_path": ".worktrees/001-fix/a.py"}),
        &root,
    );
    let run = |body: &str, level: Level| {
        let e = enforcer(d.path(), body);
        gates(&root)
            .with_policies(vec![policy("e", level, Stage::PreExec, "*", None, Some(e))])
            .check(&call)
    };
    // The enforcer sees --operation and --args.
    let echo = run(
        "if [ \"$1 $2 $3\" = '--operation Write --args' ]; then echo '{\"allowed\": true}'; exit 0; fi; echo '{\"allowed\": false, \"reason\": \"bad argv\"}'; exit 2",
        Level::Required,
    );
    assert!(echo.allowed(), "{}", echo.reason());
    let blocked = run(
        "echo '{\"allowed\": false, \"reason\": \"no python files\"}'; exit 2",
        Level::Required,
    );
    assert!(!blocked.allowed());
    assert!(blocked.reason().contains("no python files"));
    // A crashing enforcer fails closed for REQUIRED, only logs otherwise.
    assert!(!run("exit 1", Level::Required).allowed());
    assert!(run("exit 1", Level::Recommended).allowed());
    assert!(!run("echo '{\"allowed\": false}'; exit 0", Level::Required).allowed());
    let _ = wt;
}

#[test]
fn session_start_cleanup_deregisters_dead_agents_and_releases_claims() {
    let (_d, root, _wt) = repo();
    let path = GateDb::path_for(&root);
    let mut db = GateDb::open(&path).expect("open");
    db.heartbeat("old", None, "claude", &root).expect("hb");
    db.edited("old", &["/x/a.rs".into()]).expect("claim");
    db.heartbeat("live", None, "cursor", &root).expect("hb");
    db.edited("live", &["/x/b.rs".into()]).expect("claim");
    let conn = rusqlite::Connection::open(&path).expect("raw");
    conn.execute(
        "UPDATE gate_agents SET last_seen = 0 WHERE session_id = 'old'",
        [],
    )
    .expect("age");
    let (agents, claims) = db.clean_stale(Duration::from_secs(600)).expect("clean");
    assert_eq!((agents, claims), (1, 1));
    let others = db.other_agents(None).expect("agents");
    assert_eq!(others.len(), 1);
    assert_eq!(others[0].claims, ["/x/b.rs"]);
}

#[test]
fn each_completion_check_fails_on_a_fixture_repository() {
    let (_d, root, wt) = repo();
    let config = |text: &str| GateConfig::parse(text).expect("config");
    let first = |text: &str, db: Option<&GateDb>, session: Option<&str>| {
        let list = run_checklist(&config(text), &wt, db, session);
        assert_eq!(list.results.len(), 1, "{text}");
        list.results[0].clone()
    };
    // Commands: tests (the one testCommand key), build, typeCheck, lint, schemaDiff, memoryLesson.
    assert!(
        !first(
            "[project]\ntestCommand = \"echo 1 failed; exit 1\"\n",
            None,
            None
        )
        .passed
    );
    assert!(first("[project]\ntestCommand = \"true\"\n", None, None).passed);
    for name in ["build", "typeCheck", "lint", "schemaDiff", "memoryLesson"] {
        let failing = first(&format!("[completion]\n{name} = \"exit 3\"\n"), None, None);
        assert!(
            !failing.passed && failing.detail.contains("exited 3"),
            "{name}: {failing:?}"
        );
        assert!(
            first(&format!("[completion]\n{name} = \"true\"\n"), None, None).passed,
            "{name}"
        );
    }
    // newTests: code without tests fails; with a test file it passes.
    assert!(
        first("[completion]\nnewTests = true\n", None, None).passed,
        "nothing changed yet"
    );
    std::fs::create_dir_all(wt.join("src")).expect("mkdir");
    std::fs::write(wt.join("src/lib.rs"), "pub fn f() {}\n").expect("code");
    let no_tests = first("[completion]\nnewTests = true\n", None, None);
    assert!(
        !no_tests.passed && no_tests.detail.contains("src/lib.rs"),
        "{no_tests:?}"
    );
    std::fs::create_dir_all(wt.join("tests")).expect("mkdir");
    std::fs::write(wt.join("tests/f.rs"), "#[test] fn f() {}\n").expect("test");
    assert!(first("[completion]\nnewTests = true\n", None, None).passed);
    git(&wt, &["add", "."]);
    git(&wt, &["commit", "-q", "-m", "f"]);
    assert!(
        first("[completion]\nnewTests = true\n", None, None).passed,
        "committed"
    );
    // versionBump: same version as main fails; a bump on the feature branch passes.
    assert!(!first("[completion]\nversionBump = true\n", None, None).passed);
    std::fs::write(
        wt.join("Cargo.toml"),
        "[package]\nname = \"x\"\nversion = \"0.1.1\"\n",
    )
    .expect("bump");
    git(&wt, &["commit", "-q", "-am", "bump"]);
    assert!(first("[completion]\nversionBump = true\n", None, None).passed);
    // review: no Reviewed-by: trailer fails, one passes.
    assert!(!first("[completion]\nreview = true\n", None, None).passed);
    git(
        &wt,
        &[
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "ok\n\nReviewed-by: R <r@example.invalid>",
        ],
    );
    assert!(first("[completion]\nreview = true\n", None, None).passed);
    // taskDiscipline: an edit before any task fails.
    let db = GateDb::open(&GateDb::path_for(&root)).expect("db");
    db.heartbeat("s", None, "claude", &wt).expect("hb");
    db.edited("s", &["a".into()]).expect("edit");
    assert!(
        !first(
            "[completion]\ntaskDiscipline = true\n",
            Some(&db),
            Some("s")
        )
        .passed
    );
    db.heartbeat("t", None, "claude", &wt).expect("hb");
    db.task_started("t", "fix it").expect("task");
    db.edited("t", &["a".into()]).expect("edit");
    assert!(
        first(
            "[completion]\ntaskDiscipline = true\n",
            Some(&db),
            Some("t")
        )
        .passed
    );
    // memoryLesson: no lesson since the session started fails; a stored lesson passes.
    let missing = first("[completion]\nmemoryLesson = true\n", Some(&db), Some("t"));
    assert!(
        !missing.passed
            && missing
                .detail
                .contains("no lesson was written to memory since this session started"),
        "{missing:?}"
    );
    let memory = weft_memory::Memory::new(
        weft_memory::MemoryDb::open(&weft_memory::MemoryDb::path_for(&root)).expect("memory"),
    );
    let stored = memory
        .store(
            weft_memory::NewMemory::new(
                "Bump the version on the feature branch, never on main, or the gate fails",
            )
            .kind(weft_memory::Kind::Lesson)
            .importance(7),
            false,
        )
        .expect("store");
    assert!(stored.stored);
    assert!(first("[completion]\nmemoryLesson = true\n", Some(&db), Some("t")).passed);
    assert!(
        first("[completion]\nmemoryLesson = true\n", None, None).passed,
        "written on this branch"
    );
    // Optional checks do not refuse.
    let list = run_checklist(
        &config("[completion]\nlint = \"false\"\noptional = [\"lint\"]\n"),
        &wt,
        None,
        None,
    );
    assert!(list.passed());
}

#[test]
fn settings_turn_the_worktree_gate_and_the_command_guard_off() {
    let (_d, root, _wt) = repo();
    let config = GateConfig {
        worktree: false,
        dangerous_commands: false,
        ..GateConfig::default()
    };
    let g = Gates::new(&root, config).with_worktree_override(false);
    assert!(!g.config().worktree && !g.config().dangerous_commands);
    let edit = ToolInvocation::new("Write", json!({"file_path": "src/lib.rs"}), &root);
    let verdict = g.check(&edit);
    assert!(verdict.allowed(), "{}", verdict.reason());
    assert!(
        verdict.findings.is_empty(),
        "no worktree finding when it is off"
    );
    let push = ToolInvocation::new(
        "Bash",
        json!({"command": "git push --force origin main"}),
        &root,
    );
    let verdict = g.check(&push);
    assert!(verdict.allowed(), "{}", verdict.reason());
    assert!(
        verdict.findings.is_empty(),
        "no command finding when it is off"
    );
}

#[cfg(unix)]
#[test]
fn a_worktree_reached_through_a_symbolic_link_is_a_worktree() {
    let (d, root, _wt) = repo();
    // The project is opened through a link (`/tmp` → `/private/tmp` on macOS); the editor
    // names the file by its real path.
    let link = d
        .path()
        .parent()
        .expect("parent")
        .join(format!("weft-gate-link-{}", std::process::id()));
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&root, &link).expect("symlink");
    let file = root.join(".worktrees/001-fix/Cargo.toml");
    let edit = ToolInvocation::new("Write", json!({"file_path": file}), &root);
    let verdict = gates(&link).check(&edit);
    std::fs::remove_file(&link).expect("remove link");
    assert!(verdict.allowed(), "{}", verdict.reason());
    let outside = ToolInvocation::new(
        "Write",
        json!({"file_path": root.join("src/lib.rs")}),
        &root,
    );
    assert!(!gates(&root).check(&outside).allowed());
}

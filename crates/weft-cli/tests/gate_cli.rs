//! `weft hook`, `weft hooks`, `weft policy`, `weft worktree`, `weft compliance`: the
//! harness side of the Universal Agent Protocol, run as the built binary against scratch git
//! repositories, fed the harnesses' documented payloads (`tests/fixtures/hooks/<harness>/`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn base_command(program: &str, dir: &Path) -> Command {
    let mut command = Command::new(program);
    command
        .current_dir(dir)
        .env_remove("WEFT_DATABASE_URL")
        .env_remove("UAP_NO_WORKTREE")
        .env_remove("CLAUDE_PROJECT_DIR")
        .env_remove("CURSOR_PROJECT_DIR")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid");
    command
}

fn feed(mut command: Command, stdin: &str) -> Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).unwrap();
    drop(input);
    child.wait_with_output().unwrap()
}

fn weft_env(dir: &Path, args: &[&str], stdin: &str, env: &[(&str, &str)]) -> Output {
    let mut command = base_command(env!("CARGO_BIN_EXE_weft"), dir);
    command.args(args).envs(env.iter().copied());
    feed(command, stdin)
}

fn weft(dir: &Path, args: &[&str], stdin: &str) -> Output {
    weft_env(dir, args, stdin, &[])
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap()
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn git(dir: &Path, args: &[&str]) {
    let mut command = base_command("git", dir);
    command.args(args);
    let o = feed(command, "");
    assert!(o.status.success(), "git {args:?}: {}", err(&o));
}

/// A git repository on `main` with one commit.
fn repo() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    git(&root, &["init", "-q", "-b", "main"]);
    std::fs::write(root.join("README.md"), "# scratch\n").unwrap();
    git(&root, &["add", "."]);
    git(&root, &["commit", "-q", "-m", "init"]);
    (dir, root)
}

fn fixture(harness: &str, name: &str, root: &Path) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hooks")
        .join(harness)
        .join(format!("{name}.json"));
    std::fs::read_to_string(&path)
        .unwrap()
        .replace("{{ROOT}}", &root.to_string_lossy())
}

fn json_out(o: &Output) -> Value {
    serde_json::from_str(out(o).trim())
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", out(o)))
}

#[test]
fn hook_help_says_exit_codes_follow_the_harness() {
    let (_d, root) = repo();
    let help = weft(&root, &["hook", "--help"], "");
    assert_eq!(code(&help), 0);
    assert!(
        out(&help)
            .contains("Exit codes follow the harness's hook contract, not Weft's usual table")
    );
}

#[test]
fn claude_fixtures_answer_in_claude_code_format() {
    let (_d, root) = repo();
    std::fs::write(
        root.join("weft.toml"),
        "[project]\ntestCommand = \"echo '1 test failed'; exit 1\"\n",
    )
    .unwrap();
    assert_eq!(code(&weft(&root, &["worktree", "create", "fix"], "")), 0);
    // (fixture, event, exit code, what stdout or stderr must say)
    let cases: &[(&str, &str, i32, &str)] = &[
        ("session_start", "session-start", 0, "<uap-context>"),
        (
            "pre_tool_use_write_root",
            "pre-tool-use",
            2,
            "\"permissionDecision\":\"deny\"",
        ),
        ("pre_tool_use_multiedit_worktree", "pre-tool-use", 0, ""),
        (
            "pre_tool_use_bash_force_push_subagent",
            "pre-tool-use",
            2,
            "protected branch main",
        ),
        ("pre_tool_use_bash_tests", "pre-tool-use", 0, ""),
        ("pre_tool_use_read_root", "pre-tool-use", 0, ""),
        ("post_tool_use_edit", "post-tool-use", 0, ""),
        ("pre_compact", "pre-compact", 0, "compaction"),
        ("post_compact", "post-compact", 0, "compaction recorded"),
        (
            "session_start_compact",
            "session-start",
            0,
            "Protocol state before the compaction",
        ),
        (
            "user_prompt_submit",
            "user-prompt-submit",
            0,
            "Task class: debugging",
        ),
        ("stop", "stop", 2, "\"decision\":\"block\""),
        ("subagent_stop", "subagent-stop", 0, ""),
    ];
    for (name, event, expected, says) in cases {
        for harness in ["claude", "auto"] {
            let o = weft(
                &root,
                &["hook", event, "--harness", harness],
                &fixture("claude", name, &root),
            );
            assert_eq!(
                code(&o),
                *expected,
                "{name} ({harness}): {} {}",
                out(&o),
                err(&o)
            );
            assert!(
                format!("{}{}", out(&o), err(&o)).contains(says),
                "{name}: {} {}",
                out(&o),
                err(&o)
            );
            if *expected == 2 {
                assert!(
                    !err(&o).trim().is_empty(),
                    "{name}: the reason is on stderr"
                );
            }
            if *expected == 0 && *event == "pre-tool-use" {
                assert!(
                    out(&o).is_empty(),
                    "{name}: an allow prints nothing (no permission bypass)"
                );
            }
            // A gate never rewrites the call.
            assert!(!out(&o).contains("updatedInput"), "{name}");
        }
    }
    let stop = weft(
        &root,
        &["hook", "stop", "--harness", "claude"],
        &fixture("claude", "stop", &root),
    );
    assert!(
        err(&stop).contains("tests") && err(&stop).contains("1 test failed"),
        "{}",
        err(&stop)
    );
    // With a passing test command, "done" is accepted.
    std::fs::write(
        root.join("weft.toml"),
        "[project]\ntestCommand = \"true\"\n",
    )
    .unwrap();
    let stop = weft(
        &root,
        &["hook", "stop", "--harness", "claude"],
        &fixture("claude", "stop", &root),
    );
    assert_eq!(code(&stop), 0, "{}", err(&stop));
    // Sub-agents run the checklist when the project asks for it.
    std::fs::write(
        root.join("weft.toml"),
        "[project]\ntestCommand = \"false\"\n[completion]\nsubagents = true\n",
    )
    .unwrap();
    let sub = weft(
        &root,
        &["hook", "subagent-stop", "--harness", "claude"],
        &fixture("claude", "subagent_stop", &root),
    );
    assert_eq!(code(&sub), 2);
}

#[test]
fn cursor_fixtures_answer_in_cursor_format() {
    let (_d, root) = repo();
    std::fs::write(
        root.join("weft.toml"),
        "[project]\ntestCommand = \"exit 1\"\n",
    )
    .unwrap();
    assert_eq!(code(&weft(&root, &["worktree", "create", "fix"], "")), 0);
    // (fixture, event, exit code, the JSON answer's key, its value or a part of it)
    let cases: &[(&str, &str, i32, &str, &str)] = &[
        (
            "session_start",
            "session-start",
            0,
            "additional_context",
            "<uap-context>",
        ),
        (
            "pre_tool_use_write_root",
            "pre-tool-use",
            2,
            "permission",
            "deny",
        ),
        (
            "pre_tool_use_strreplace_worktree",
            "pre-tool-use",
            0,
            "permission",
            "allow",
        ),
        (
            "before_shell_execution_force_push",
            "pre-tool-use",
            2,
            "permission",
            "deny",
        ),
        (
            "before_shell_execution_tests",
            "pre-tool-use",
            0,
            "permission",
            "allow",
        ),
        (
            "before_mcp_execution",
            "pre-tool-use",
            0,
            "permission",
            "allow",
        ),
        ("before_read_file", "pre-tool-use", 0, "permission", "allow"),
        ("post_tool_use", "post-tool-use", 0, "", ""),
        ("after_file_edit", "post-tool-use", 0, "", ""),
        ("pre_compact", "pre-compact", 0, "", ""),
        (
            "stop",
            "stop",
            0,
            "followup_message",
            "completion gates failed",
        ),
        ("stop_aborted", "stop", 0, "", ""),
        ("subagent_stop", "subagent-stop", 0, "", ""),
    ];
    for (name, event, expected, key, value) in cases {
        for harness in ["cursor", "auto"] {
            let o = weft(
                &root,
                &["hook", event, "--harness", harness],
                &fixture("cursor", name, &root),
            );
            assert_eq!(
                code(&o),
                *expected,
                "{name} ({harness}): {} {}",
                out(&o),
                err(&o)
            );
            let answer = json_out(&o);
            if key.is_empty() {
                assert_eq!(answer, serde_json::json!({}), "{name}");
            } else {
                let got = answer[key].as_str().unwrap_or_default();
                assert!(got.contains(value), "{name}: {answer}");
            }
            if *expected == 2 {
                assert!(
                    answer["agent_message"]
                        .as_str()
                        .is_some_and(|m| !m.is_empty())
                );
                assert!(!err(&o).trim().is_empty());
            }
            assert!(!out(&o).contains("updated_input"), "{name}");
        }
    }
}

#[test]
fn an_unreadable_payload_is_denied_and_session_start_never_fails() {
    let (_d, root) = repo();
    for (payload, harness) in [
        ("not json", "claude"),
        ("[1, 2]", "claude"),
        (
            "{\"hook_event_name\": \"PreToolUse\", \"session_id\": \"s\"}",
            "claude",
        ),
        ("{broken", "cursor"),
        ("", "auto"),
    ] {
        let o = weft(
            &root,
            &["hook", "pre-tool-use", "--harness", harness],
            payload,
        );
        assert_eq!(code(&o), 2, "{payload:?}: {}", out(&o));
        assert!(err(&o).contains("fail-closed"), "{}", err(&o));
    }
    // Session start: garbage in, still exit 0 with a block.
    let o = weft(&root, &["hook", "session-start"], "garbage");
    assert_eq!(code(&o), 0);
    assert!(out(&o).contains("<uap-context>"));
    // A corrupt database is moved aside and recreated (self-healing).
    std::fs::create_dir_all(root.join(".weft")).unwrap();
    std::fs::write(root.join(".weft/weft.db"), vec![7u8; 4096]).unwrap();
    let o = weft(
        &root,
        &["hook", "session-start", "--harness", "claude"],
        &fixture("claude", "session_start", &root),
    );
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert!(out(&o).contains("recreated"), "{}", out(&o));
    // A missing one is created.
    std::fs::remove_dir_all(root.join(".weft")).unwrap();
    let o = weft(
        &root,
        &["hook", "session-start", "--harness", "cursor"],
        &fixture("cursor", "session_start", &root),
    );
    assert_eq!(code(&o), 0);
    assert!(root.join(".weft/weft.db").is_file());
}

#[test]
fn uap_no_worktree_is_honoured_and_logged() {
    let (_d, root) = repo();
    let payload = fixture("claude", "pre_tool_use_write_root", &root);
    let o = weft_env(
        &root,
        &["hook", "pre-tool-use"],
        &payload,
        &[("UAP_NO_WORKTREE", "1")],
    );
    assert_eq!(code(&o), 0, "{}", err(&o));
    let audit = weft(&root, &["policy", "audit"], "");
    assert!(out(&audit).contains("UAP_NO_WORKTREE=1"), "{}", out(&audit));
    let o = weft_env(
        &root,
        &["hook", "pre-tool-use"],
        &payload,
        &[("UAP_NO_WORKTREE", "0")],
    );
    assert_eq!(code(&o), 2);
}

#[test]
fn policy_commands_manage_the_database_and_the_hook_enforces_them() {
    let (_d, root) = repo();
    assert_eq!(code(&weft(&root, &["worktree", "create", "fix"], "")), 0);
    let payload = fixture("claude", "pre_tool_use_bash_tests", &root)
        .replace("cargo test 2>&1 | tail -20", "kubectl delete ns prod");
    assert_eq!(code(&weft(&root, &["hook", "pre-tool-use"], &payload)), 0);
    let add = weft(
        &root,
        &[
            "policy",
            "add",
            "no-kubectl-delete",
            "--tools",
            "shell",
            "--deny-pattern",
            "kubectl\\s+delete",
            "--description",
            "no deletes in clusters",
        ],
        "",
    );
    assert_eq!(code(&add), 0, "{}", err(&add));
    assert!(out(&weft(&root, &["policy", "list"], "")).contains("no-kubectl-delete"));
    let denied = weft(&root, &["hook", "pre-tool-use"], &payload);
    assert_eq!(code(&denied), 2);
    assert!(
        err(&denied).contains("[policy no-kubectl-delete]"),
        "{}",
        err(&denied)
    );
    // RECOMMENDED only logs.
    assert_eq!(
        code(&weft(
            &root,
            &[
                "policy",
                "add",
                "no-kubectl-delete",
                "--level",
                "RECOMMENDED",
                "--deny-pattern",
                "kubectl"
            ],
            ""
        )),
        0
    );
    let logged = weft(&root, &["hook", "pre-tool-use"], &payload);
    assert_eq!(code(&logged), 0);
    assert!(err(&logged).contains("RECOMMENDED"), "{}", err(&logged));
    // Disabled, then removed.
    assert_eq!(
        code(&weft(
            &root,
            &[
                "policy",
                "add",
                "no-kubectl-delete",
                "--deny-pattern",
                "kubectl"
            ],
            ""
        )),
        0
    );
    assert_eq!(
        code(&weft(
            &root,
            &["policy", "disable", "no-kubectl-delete"],
            ""
        )),
        0
    );
    assert_eq!(code(&weft(&root, &["hook", "pre-tool-use"], &payload)), 0);
    assert_eq!(
        code(&weft(&root, &["policy", "enable", "no-kubectl-delete"], "")),
        0
    );
    let check = weft(
        &root,
        &[
            "policy",
            "check",
            "--operation",
            "Bash",
            "--args",
            "{\"command\":\"kubectl delete x\"}",
        ],
        "",
    );
    assert_eq!(code(&check), 2, "{}", out(&check));
    assert_eq!(
        code(&weft(&root, &["policy", "remove", "no-kubectl-delete"], "")),
        0
    );
    assert_eq!(
        code(&weft(&root, &["policy", "remove", "no-kubectl-delete"], "")),
        2
    );
    assert_eq!(code(&weft(&root, &["hook", "pre-tool-use"], &payload)), 0);
    assert_eq!(
        code(&weft(
            &root,
            &["policy", "add", "x", "--deny-pattern", "("],
            ""
        )),
        2
    );
    // Every check went to the audit trail.
    let audit = out(&weft(&root, &["policy", "audit", "--limit", "100"], ""));
    assert!(audit.matches("pre-tool-use").count() >= 6, "{audit}");
}

#[test]
fn hooks_install_merges_and_doctor_reports_coverage() {
    let (_d, root) = repo();
    std::fs::create_dir_all(root.join(".claude")).unwrap();
    let existing = r#"{"permissions":{"allow":["Bash(ls:*)"]},"hooks":{"PreToolUse":[{"matcher":"Edit|Write","hooks":[{"type":"command","command":"bash .claude/hooks/uap-policy-gate.sh"}]}]}}"#;
    std::fs::write(root.join(".claude/settings.json"), existing).unwrap();
    let doctor = weft(&root, &["hooks", "doctor"], "");
    assert_eq!(code(&doctor), 1);
    assert!(
        out(&doctor).contains("uncovered tool: PreToolUse: MultiEdit"),
        "{}",
        out(&doctor)
    );
    assert!(
        out(&doctor).contains("SessionStart   MISSING"),
        "{}",
        out(&doctor)
    );

    let bin = env!("CARGO_BIN_EXE_weft");
    let install = weft(
        &root,
        &["hooks", "install", "--harness", "claude", "--bin", bin],
        "",
    );
    assert_eq!(code(&install), 0, "{}", err(&install));
    let settings: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".claude/settings.json")).unwrap())
            .unwrap();
    assert_eq!(settings["permissions"]["allow"][0], "Bash(ls:*)", "kept");
    let pre = settings["hooks"]["PreToolUse"].as_array().unwrap();
    assert_eq!(pre.len(), 2, "the user's group kept, ours added: {pre:?}");
    assert_eq!(
        pre[0]["hooks"][0]["command"],
        "bash .claude/hooks/uap-policy-gate.sh"
    );
    assert!(
        pre[1]["hooks"][0]["command"]
            .as_str()
            .unwrap()
            .ends_with("hook pre-tool-use --harness claude")
    );
    // Idempotent.
    let again = weft(
        &root,
        &["hooks", "install", "--harness", "claude", "--bin", bin],
        "",
    );
    assert!(out(&again).contains("added 0"), "{}", out(&again));
    let doctor = weft(&root, &["hooks", "doctor", "--json"], "");
    assert_eq!(code(&doctor), 0, "{}", out(&doctor));
    let report: Value = serde_json::from_str(&out(&doctor)).unwrap();
    assert_eq!(report[0]["complete"], true);
    assert_eq!(report[1]["present"], false);

    // Cursor: merged likewise; a file that is not JSON is left alone.
    std::fs::create_dir_all(root.join(".cursor")).unwrap();
    std::fs::write(root.join(".cursor/hooks.json"), "{ not json").unwrap();
    let broken = weft(
        &root,
        &["hooks", "install", "--harness", "cursor", "--bin", bin],
        "",
    );
    assert_eq!(code(&broken), 2);
    assert_eq!(
        std::fs::read_to_string(root.join(".cursor/hooks.json")).unwrap(),
        "{ not json"
    );
    std::fs::write(
        root.join(".cursor/hooks.json"),
        r#"{"version":1,"hooks":{"stop":[{"command":"./audit.sh"}]}}"#,
    )
    .unwrap();
    assert_eq!(
        code(&weft(
            &root,
            &["hooks", "install", "--harness", "cursor", "--bin", bin],
            ""
        )),
        0
    );
    let cursor: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".cursor/hooks.json")).unwrap())
            .unwrap();
    assert_eq!(cursor["hooks"]["stop"].as_array().unwrap().len(), 2);
    assert_eq!(cursor["hooks"]["stop"][0]["command"], "./audit.sh");
    assert_eq!(code(&weft(&root, &["hooks", "doctor"], "")), 0);
    // A hook program that does not exist is reported (the harness would fail open).
    assert_eq!(
        code(&weft(
            &root,
            &[
                "hooks",
                "install",
                "--harness",
                "claude",
                "--bin",
                "/nonexistent/weft"
            ],
            ""
        )),
        0
    );
    let doctor = weft(&root, &["hooks", "doctor"], "");
    assert_eq!(code(&doctor), 1);
    assert!(out(&doctor).contains("does not exist"), "{}", out(&doctor));
}

#[test]
fn compliance_check_reports_section_6() {
    let (_d, root) = repo();
    let bare = weft(&root, &["compliance", "check"], "");
    assert_eq!(code(&bare), 1);
    assert!(
        out(&bare)
            .contains("[FAIL] Pre-tool-use hook runs worktree, command-safety, and policy gates"),
        "{}",
        out(&bare)
    );
    let bin = env!("CARGO_BIN_EXE_weft");
    assert_eq!(
        code(&weft(
            &root,
            &["hooks", "install", "--harness", "claude", "--bin", bin],
            ""
        )),
        0
    );
    std::fs::write(
        root.join("weft.toml"),
        "[project]\ntestCommand = \"true\"\n",
    )
    .unwrap();
    let o = weft(&root, &["compliance", "check"], "");
    assert_eq!(code(&o), 0, "{}", out(&o));
    assert_eq!(out(&o).matches("[pass]").count(), 6, "{}", out(&o));
    assert!(out(&o).contains("[pass] The agent follows the READ"));
    assert!(out(&o).contains("each task is classified and planned for: claude"));
    // An edit left at the project root is reported.
    std::fs::write(root.join("README.md"), "changed\n").unwrap();
    let o = weft(&root, &["compliance", "check"], "");
    assert_eq!(code(&o), 1);
    assert!(
        out(&o).contains("uncommitted edits at the project root: README.md"),
        "{}",
        out(&o)
    );
}

#[test]
fn worktree_commands_number_list_pr_and_finish() {
    let (d, root) = repo();
    let a = weft(&root, &["worktree", "create", "first"], "");
    assert_eq!(code(&a), 0, "{}", err(&a));
    assert!(out(&a).contains("001-first on branch feature/001-first"));
    assert_eq!(
        code(&weft(&root, &["worktree", "create", "Bad Slug"], "")),
        2
    );
    let b = weft(&root, &["worktree", "create", "second"], "");
    assert!(out(&b).contains("002-second"), "{}", out(&b));
    let list = out(&weft(&root, &["worktree", "list"], ""));
    assert!(
        list.contains("001-first") && list.contains("002-second"),
        "{list}"
    );
    // git status at the root stays clean (.worktrees/ is excluded locally).
    let mut st = base_command("git", &root);
    st.args(["status", "--porcelain"]);
    assert_eq!(out(&feed(st, "")), "");
    let first = root.join(".worktrees/001-first");
    assert_eq!(
        code(&weft(&root, &["worktree", "ensure", "--strict"], "")),
        1
    );
    assert_eq!(code(&weft(&root, &["worktree", "ensure"], "")), 0);
    assert_eq!(
        code(&weft(&first, &["worktree", "ensure", "--strict"], "")),
        0
    );
    // pr: without the forge CLI, the exact commands are printed.
    let bin = d.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in ["git", "sh"] {
        let found = std::env::split_paths(&std::env::var_os("PATH").unwrap())
            .map(|p| p.join(tool))
            .find(|p| p.is_file())
            .unwrap();
        std::os::unix::fs::symlink(found, bin.join(tool)).unwrap();
    }
    let pr = weft_env(
        &first,
        &["worktree", "pr"],
        "",
        &[("PATH", bin.to_str().unwrap())],
    );
    assert_eq!(code(&pr), 0, "{}", err(&pr));
    assert!(
        out(&pr).contains("gh pr create --base main --head feature/001-first --fill"),
        "{}",
        out(&pr)
    );
    assert!(out(&pr).contains("git push -u origin feature/001-first"));
    assert_eq!(
        code(&weft(&root, &["worktree", "pr"], "")),
        2,
        "not from the root"
    );
    // finish: refused while dirty, then removed; the unmerged branch is kept and said so.
    std::fs::write(root.join(".worktrees/002-second/new.txt"), "x").unwrap();
    assert_eq!(code(&weft(&root, &["worktree", "finish", "second"], "")), 2);
    let done = weft(&root, &["worktree", "finish", "second", "--force"], "");
    assert_eq!(code(&done), 0, "{}", err(&done));
    assert!(!root.join(".worktrees/002-second").exists());
    let done = weft(&first, &["worktree", "finish"], "");
    assert_eq!(code(&done), 0, "{}", err(&done));
    assert!(
        out(&done).contains("merged branch feature/001-first"),
        "{}",
        out(&done)
    );
    // Numbers keep growing from what is there.
    assert!(out(&weft(&root, &["worktree", "create", "third"], "")).contains("001-third"));
}

/// Runs the command a harness registration names, the way the harness does (`sh -c`).
fn run_registered(root: &Path, settings: &Value, event: &str, payload: &str) -> Output {
    let command = settings["hooks"][event]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["hooks"].as_array().unwrap().iter())
        .map(|h| h["command"].as_str().unwrap().to_owned())
        .find(|c| c.contains(" hook "))
        .unwrap_or_else(|| panic!("no weft hook for {event}"));
    let mut sh = base_command("sh", root);
    sh.args(["-c", &command]);
    feed(sh, payload)
}

#[test]
fn end_to_end_hooks_installed_in_a_scratch_repository() {
    let (_d, root) = repo();
    std::fs::write(
        root.join("weft.toml"),
        "[project]\ntestCommand = \"echo 'test parse ... FAILED'; exit 101\"\n",
    )
    .unwrap();
    let bin = env!("CARGO_BIN_EXE_weft");
    assert_eq!(
        code(&weft(
            &root,
            &["hooks", "install", "--harness", "claude", "--bin", bin],
            ""
        )),
        0
    );
    let settings: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".claude/settings.json")).unwrap())
            .unwrap();
    let root_text = root.to_string_lossy().into_owned();
    let event = |name: &str, cwd: &str, extra: Value| {
        let mut payload = serde_json::json!({
            "session_id": "e2e", "transcript_path": "/tmp/e2e.jsonl", "cwd": cwd,
            "permission_mode": "default", "hook_event_name": name,
        });
        for (k, v) in extra.as_object().unwrap() {
            payload[k] = v.clone();
        }
        payload.to_string()
    };
    // 1. Session start: the context block, exit 0.
    let start = run_registered(
        &root,
        &settings,
        "SessionStart",
        &event(
            "SessionStart",
            &root_text,
            serde_json::json!({"source": "startup"}),
        ),
    );
    assert_eq!(code(&start), 0);
    assert!(
        out(&start).contains("<uap-context>")
            && out(&start).contains("You are at the project root")
    );
    // 2. An edit outside a worktree: denied.
    let edit = |path: &str, cwd: &str| {
        event(
            "PreToolUse",
            cwd,
            serde_json::json!({"tool_name": "Edit", "tool_use_id": "t1",
            "tool_input": {"file_path": path, "old_string": "a", "new_string": "b"}}),
        )
    };
    let outside = run_registered(
        &root,
        &settings,
        "PreToolUse",
        &edit("src/lib.rs", &root_text),
    );
    assert_eq!(code(&outside), 2, "{}", err(&outside));
    // 3. weft worktree create; 4. the same edit inside: allowed.
    assert_eq!(
        code(&weft(&root, &["worktree", "create", "fix-parser"], "")),
        0
    );
    let wt = root.join(".worktrees/001-fix-parser");
    let wt_text = wt.to_string_lossy().into_owned();
    let inside = run_registered(
        &root,
        &settings,
        "PreToolUse",
        &edit("src/lib.rs", &wt_text),
    );
    assert_eq!(code(&inside), 0, "{}", err(&inside));
    // 5. A force push: denied.
    let push = event(
        "PreToolUse",
        &wt_text,
        serde_json::json!({"tool_name": "Bash", "tool_use_id": "t2",
        "tool_input": {"command": "git push --force origin main"}}),
    );
    let pushed = run_registered(&root, &settings, "PreToolUse", &push);
    assert_eq!(code(&pushed), 2);
    assert!(err(&pushed).contains("protected branch main"));
    // 6. Stop with a failing test gate: refused, with the test output.
    let stop = event(
        "Stop",
        &wt_text,
        serde_json::json!({"stop_hook_active": false}),
    );
    let refused = run_registered(&root, &settings, "Stop", &stop);
    assert_eq!(code(&refused), 2);
    assert!(
        err(&refused).contains("test parse ... FAILED"),
        "{}",
        err(&refused)
    );
    // The next session sees the open loop and the denials.
    let again = run_registered(
        &root,
        &settings,
        "SessionStart",
        &event(
            "SessionStart",
            &wt_text,
            serde_json::json!({"source": "resume"}),
        ),
    );
    assert!(
        out(&again).contains("Open loops") && out(&again).contains("(this session)"),
        "{}",
        out(&again)
    );
    assert!(out(&again).contains("You are in worktree .worktrees/001-fix-parser/"));
    // Once the tests pass, "done" is accepted.
    std::fs::write(
        root.join("weft.toml"),
        "[project]\ntestCommand = \"true\"\n",
    )
    .unwrap();
    assert_eq!(code(&run_registered(&root, &settings, "Stop", &stop)), 0);
}

#[test]
fn post_exec_policies_run_after_the_call() {
    let (_d, root) = repo();
    assert_eq!(code(&weft(&root, &["worktree", "create", "fix"], "")), 0);
    let claude = fixture("claude", "post_tool_use_edit", &root);
    let cursor = fixture("cursor", "after_file_edit", &root);
    assert_eq!(code(&weft(&root, &["hook", "post-tool-use"], &claude)), 0);
    let add = weft(
        &root,
        &[
            "policy",
            "add",
            "rebuild-after-edit",
            "--stage",
            "post-exec",
            "--tools",
            "edit",
            "--deny-pattern",
            "\\.(rs|ts)$",
        ],
        "",
    );
    assert_eq!(code(&add), 0, "{}", err(&add));
    // Claude Code: the tool already ran; exit 2 puts the reason in front of the agent.
    let o = weft(&root, &["hook", "post-tool-use"], &claude);
    assert_eq!(code(&o), 2);
    assert!(err(&o).contains("rebuild-after-edit"), "{}", err(&o));
    // Cursor cannot block after the fact: the reason becomes additional context.
    let o = weft(&root, &["hook", "post-tool-use"], &cursor);
    assert_eq!(code(&o), 0);
    assert!(
        json_out(&o)["additional_context"]
            .as_str()
            .unwrap()
            .contains("rebuild-after-edit")
    );
    // A pre-exec check of the same edit is not affected by a post-exec policy.
    let pre = fixture("claude", "pre_tool_use_multiedit_worktree", &root);
    assert_eq!(code(&weft(&root, &["hook", "pre-tool-use"], &pre)), 0);
}

/// A Claude Code payload for `event` in session `session` at `cwd`, with `extra` fields.
fn claude_payload(event: &str, session: &str, cwd: &Path, extra: Value) -> String {
    let mut payload = serde_json::json!({
        "session_id": session,
        "transcript_path": "/tmp/t.jsonl",
        "cwd": cwd,
        "hook_event_name": event,
    });
    if let (Some(p), Value::Object(extra)) = (payload.as_object_mut(), extra) {
        p.extend(extra);
    }
    payload.to_string()
}

#[test]
fn uni_019_post_tool_use_runs_the_build_gate_and_the_backup_reminder_after_edits() {
    let (_d, root) = repo();
    std::fs::write(
        root.join("weft.toml"),
        "[gates]\npostEditBuild = \"grep -qx ok status.txt || { echo 'build failed: status.txt is not ok'; exit 1; }\"\nbackupReminder = 2\n",
    )
    .unwrap();
    let created = weft(&root, &["worktree", "create", "build"], "");
    assert_eq!(code(&created), 0, "{}", err(&created));
    let wt = root.join(".worktrees/001-build");
    let edit = |file: &str, text: &str| {
        std::fs::write(wt.join(file), text).unwrap();
        let payload = claude_payload(
            "PostToolUse",
            "s1",
            &root,
            serde_json::json!({"tool_name": "Write", "tool_use_id": "t",
                "tool_input": {"file_path": wt.join(file), "content": text},
                "tool_response": {"success": true}}),
        );
        weft(
            &root,
            &["hook", "post-tool-use", "--harness", "claude"],
            &payload,
        )
    };
    // A broken build after the edit: exit 2, the failure on stderr for Claude.
    let broken = edit("status.txt", "broken\n");
    assert_eq!(code(&broken), 2, "{}", out(&broken));
    assert!(
        err(&broken).contains("the build is broken after editing")
            && err(&broken).contains("build failed: status.txt is not ok"),
        "{}",
        err(&broken)
    );
    // Fixed: the build passes; one uncommitted file is under the reminder's threshold.
    let fixed = edit("status.txt", "ok\n");
    assert_eq!(code(&fixed), 0, "{}", err(&fixed));
    assert_eq!(out(&fixed), "");
    // A second uncommitted file: the reminder, as context for Claude (advisory, exit 0).
    let second = edit("notes.md", "ok\n");
    assert_eq!(code(&second), 0, "{}", err(&second));
    let context = json_out(&second)["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        context.contains("2 files have uncommitted changes") && context.contains("git commit"),
        "{context}"
    );
    // Reads are not edits: no build runs.
    let read = weft(
        &root,
        &["hook", "post-tool-use", "--harness", "claude"],
        &claude_payload(
            "PostToolUse",
            "s1",
            &root,
            serde_json::json!({"tool_name": "Read", "tool_input": {"file_path": wt.join("status.txt")}}),
        ),
    );
    std::fs::write(wt.join("status.txt"), "broken\n").unwrap();
    assert_eq!(code(&read), 0, "{}", err(&read));
}

#[test]
fn uni_020_pre_compact_saves_the_protocol_state_and_it_returns_after_compaction() {
    let (_d, root) = repo();
    let created = weft(&root, &["worktree", "create", "parser"], "");
    assert_eq!(code(&created), 0, "{}", err(&created));
    let wt = root.join(".worktrees/001-parser");
    let hook = |event: &str, payload: String| {
        weft(&root, &["hook", event, "--harness", "claude"], &payload)
    };
    // The session works: a task in progress, an edit in the worktree.
    let start = hook(
        "session-start",
        claude_payload(
            "SessionStart",
            "s9",
            &wt,
            serde_json::json!({"source": "startup"}),
        ),
    );
    assert_eq!(code(&start), 0);
    assert!(!out(&start).contains("before the compaction"));
    let todo = hook(
        "pre-tool-use",
        claude_payload(
            "PreToolUse",
            "s9",
            &wt,
            serde_json::json!({"tool_name": "TodoWrite", "tool_input": {"todos": [
                {"content": "Rewrite the tokenizer of the parser", "status": "in_progress", "activeForm": "Rewriting"}]}}),
        ),
    );
    assert_eq!(code(&todo), 0, "{}", err(&todo));
    let edit = hook(
        "pre-tool-use",
        claude_payload(
            "PreToolUse",
            "s9",
            &wt,
            serde_json::json!({"tool_name": "Edit", "tool_input": {"file_path": wt.join("src/lexer.rs"), "old_string": "a", "new_string": "b"}}),
        ),
    );
    assert_eq!(code(&edit), 0, "{}", err(&edit));
    // Pre-compact saves the state; post-compact records the compaction.
    let pre = hook(
        "pre-compact",
        claude_payload(
            "PreCompact",
            "s9",
            &wt,
            serde_json::json!({"trigger": "auto", "custom_instructions": ""}),
        ),
    );
    assert_eq!(code(&pre), 0);
    assert!(out(&pre).contains("was saved"), "{}", out(&pre));
    // The state is the saved one, even if the session's row changes afterwards.
    let post = hook(
        "post-compact",
        claude_payload(
            "PostCompact",
            "s9",
            &wt,
            serde_json::json!({"trigger": "auto", "compact_summary": "We were refactoring."}),
        ),
    );
    assert_eq!(code(&post), 0, "{}", err(&post));
    assert!(out(&post).contains("compaction recorded"), "{}", out(&post));
    // The session resumes after compaction: the block carries the saved state.
    let resumed = hook(
        "session-start",
        claude_payload(
            "SessionStart",
            "s9",
            &wt,
            serde_json::json!({"source": "compact"}),
        ),
    );
    assert_eq!(code(&resumed), 0);
    let block = out(&resumed);
    let restored = &block[block
        .find("Protocol state before the compaction")
        .unwrap_or_else(|| panic!("{block}"))..];
    assert!(
        restored.contains("Task in progress: Rewrite the tokenizer of the parser")
            && restored.contains("src/lexer.rs")
            && restored.contains(".worktrees/001-parser")
            && restored.find("</uap-context>").is_some(),
        "{block}"
    );
    // Another session's compaction does not see it; a plain resume does not inject it.
    let other = hook(
        "session-start",
        claude_payload(
            "SessionStart",
            "s10",
            &wt,
            serde_json::json!({"source": "compact"}),
        ),
    );
    assert!(
        !out(&other).contains("Rewrite the tokenizer"),
        "{}",
        out(&other)
    );
    let resume = hook(
        "session-start",
        claude_payload(
            "SessionStart",
            "s9",
            &wt,
            serde_json::json!({"source": "resume"}),
        ),
    );
    assert!(!out(&resume).contains("before the compaction"));
    // `weft hooks install` registers PostCompact and UserPromptSubmit for Claude Code.
    let installed = weft(&root, &["hooks", "install", "--harness", "claude"], "");
    assert_eq!(code(&installed), 0, "{}", err(&installed));
    let settings: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".claude/settings.json")).unwrap())
            .unwrap();
    for event in ["PreCompact", "PostCompact", "UserPromptSubmit"] {
        assert!(
            settings["hooks"][event][0]["hooks"][0]["command"]
                .as_str()
                .is_some_and(|c| c.contains("hook")),
            "{event}: {settings:#}"
        );
    }
}

#[test]
fn uni_025_a_submitted_prompt_is_classified_and_the_loop_planned() {
    let (_d, root) = repo();
    let prompt = |text: &str| {
        weft(
            &root,
            &["hook", "user-prompt-submit", "--harness", "claude"],
            &claude_payload(
                "UserPromptSubmit",
                "s1",
                &root,
                serde_json::json!({"prompt": text}),
            ),
        )
    };
    let fix =
        prompt("Fix the crash in the login handler; the traceback points at the session cache");
    assert_eq!(code(&fix), 0, "{}", err(&fix));
    let plan = out(&fix);
    for part in [
        "<uap-task>",
        "Task class: debugging",
        "work in a worktree",
        "READ",
        "QUERY `weft memory query \"debugging lessons\"`",
        "ACT via `weft deliver`",
        "RECORD `weft memory store",
        "PROMOTE `weft memory promote`",
    ] {
        assert!(plan.contains(part), "{part}: {plan}");
    }
    let question = prompt("Why does the nginx reverse proxy answer 502?");
    assert!(
        out(&question).contains("Task class: sysadmin")
            && out(&question).contains("read-only: no worktree needed"),
        "{}",
        out(&question)
    );
    // Cursor's beforeSubmitPrompt is let through.
    let cursor = weft(
        &root,
        &["hook", "user-prompt-submit", "--harness", "cursor"],
        r#"{"conversation_id":"c","hook_event_name":"beforeSubmitPrompt","prompt":"fix it","workspace_roots":["/tmp"]}"#,
    );
    assert_eq!(json_out(&cursor)["continue"], true);
    // `weft task classify`: the same classifier, as JSON.
    let classified = weft(
        &root,
        &[
            "task",
            "classify",
            "Download the archive and convert the CSV files to JSON",
            "--json",
        ],
        "",
    );
    assert_eq!(code(&classified), 0, "{}", err(&classified));
    let class = json_out(&classified);
    assert_eq!(class["category"], "file-ops");
    assert_eq!(class["changesFiles"], true);
    assert!(class["confidence"].as_f64().unwrap() > 0.5, "{class}");
}

#[test]
fn uni_041_weft_schema_diff_compares_revisions() {
    let (_d, root) = repo();
    std::fs::create_dir_all(root.join("db")).unwrap();
    std::fs::write(
        root.join("db/schema.sql"),
        "CREATE TABLE runs (id TEXT PRIMARY KEY, status TEXT NOT NULL, note TEXT);\n",
    )
    .unwrap();
    git(&root, &["add", "."]);
    git(&root, &["commit", "-q", "-m", "schema"]);
    git(&root, &["tag", "v1"]);
    std::fs::write(
        root.join("db/schema.sql"),
        "CREATE TABLE runs (id TEXT PRIMARY KEY, status TEXT NOT NULL, owner TEXT);\n",
    )
    .unwrap();
    // The working tree against v1: a removed column is breaking (exit 1).
    let diff = weft(&root, &["schema-diff", "v1", "--json"], "");
    assert_eq!(code(&diff), 1, "{}", err(&diff));
    let answer = json_out(&diff);
    assert_eq!(answer["passed"], false);
    assert_eq!(answer["changes"][0]["location"], "runs.note");
    assert_eq!(answer["changes"][0]["breaking"], true);
    // Committed, HEAD against v1 says the same; v1 against itself has no change (exit 0).
    git(&root, &["commit", "-q", "-am", "owner"]);
    let text = weft(&root, &["schema-diff", "v1", "HEAD"], "");
    assert_eq!(code(&text), 1);
    assert!(
        out(&text).contains("BREAKING db/schema.sql: runs.note: column note removed"),
        "{}",
        out(&text)
    );
    assert!(out(&text).contains("ok db/schema.sql: runs.owner: new column owner"));
    let same = weft(&root, &["schema-diff", "v1", "v1"], "");
    assert_eq!(code(&same), 0);
    assert_eq!(out(&same).trim(), "no schema or contract change");
    // An unknown revision is a usage error.
    assert_eq!(code(&weft(&root, &["schema-diff", "nope"], "")), 2);
}

/// A Weft project whose agent (a scripted model) answers a review with `verdict`.
fn reviewer_project(dir: &Path, verdict: &str, reason: &str) {
    std::fs::create_dir_all(dir.join("agents")).unwrap();
    std::fs::create_dir_all(dir.join("prompts")).unwrap();
    std::fs::write(
        dir.join("weft.toml"),
        "model = \"scripted-turns:script.json\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("agents/reviewer.toml"),
        "name = \"reviewer\"\n[sideA]\nprompt = \"p\"\n",
    )
    .unwrap();
    std::fs::write(dir.join("prompts/p.toml"), "name = \"p\"\ntools = []\n").unwrap();
    let text = format!(
        "I read the diff.\n{}",
        serde_json::json!({"verdict": verdict, "reasons": [reason]})
    );
    std::fs::write(
        dir.join("script.json"),
        serde_json::json!({"responses": [{"text": text}]}).to_string(),
    )
    .unwrap();
}

#[test]
fn uni_040_weft_agents_review_the_diff_for_weft_completion_check() {
    let (d, root) = repo();
    let bin = env!("CARGO_BIN_EXE_weft");
    let security = d.path().join("security");
    let tests = d.path().join("tests-reviewer");
    reviewer_project(&security, "approve", "no secret or injection in the change");
    reviewer_project(&tests, "reject", "the empty input has no test");
    let command = |project: &Path| {
        format!(
            "{bin} run {} \\\"Review the change in $WEFT_REVIEW_DIFF\\\"",
            project.display()
        )
    };
    std::fs::write(
        root.join("weft.toml"),
        format!(
            "[completion]\nreview = true\n[[review.reviewers]]\nname = \"security\"\ncommand = \"{}\"\n[[review.reviewers]]\nname = \"tests\"\ncommand = \"{}\"\n",
            command(&security),
            command(&tests)
        ),
    )
    .unwrap();
    let created = weft(&root, &["worktree", "create", "parse"], "");
    assert_eq!(code(&created), 0, "{}", err(&created));
    let wt = root.join(".worktrees/001-parse");
    std::fs::write(
        wt.join("parse.py"),
        "def parse(s):\n    return s.split(',')\n",
    )
    .unwrap();
    let check = weft(&wt, &["completion", "check"], "");
    assert_eq!(code(&check), 1, "{}{}", out(&check), err(&check));
    let report = out(&check);
    assert!(
        report.contains("FAIL review")
            && report.contains("approved by security: no secret or injection in the change")
            && report.contains("REJECTED by tests: the empty input has no test"),
        "{report}"
    );
    // Each reviewer's verdict is in the audit trail; each review was a recorded Weft run.
    let audit = weft(&root, &["policy", "audit"], "");
    assert!(
        out(&audit).contains("security") && out(&audit).contains("the empty input has no test"),
        "{}",
        out(&audit)
    );
    for project in [&security, &tests] {
        let runs = weft(project, &["runs", "list", "--json"], "");
        assert!(out(&runs).contains("completed"), "{}", out(&runs));
    }
    // The rejecting reviewer now approves: the review passes.
    reviewer_project(&tests, "approve", "the empty input is tested");
    let check = weft(&wt, &["completion", "check"], "");
    assert_eq!(code(&check), 0, "{}{}", out(&check), err(&check));
}

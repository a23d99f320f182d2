//! The policy stage through an agent's tool loop: what runs, what the model is told, and
//! what the rules saw of each call.

#![allow(clippy::unwrap_used)]
use super::*;
use std::sync::Mutex;

use serde_json::json;
use weft_agent::{AgentOptions, AgentState, RunOptions, agent};
use weft_provider::adapters::scripted::{Script, ScriptedResponse, model};
use weft_provider::{Message, Tool, ToolContext, ToolError};

use crate::profile::sop::{GateCheck, GateChecker, GateVerdict, SopExecutor, SopRole};

/// A call that ran: its tool, the arguments it got, and the rule that asked for a
/// person's confirmation (`NeedsApproval`), if one did.
#[derive(Debug, Clone, PartialEq)]
struct Ran {
    tool: String,
    arguments: Value,
    confirm: Option<String>,
}

/// The tools of these tests: each records its runs and answers `"ok"`.
fn tools(ran: &Arc<Mutex<Vec<Ran>>>) -> Vec<Tool> {
    [
        "note",
        "read_file",
        "write_file",
        "run_command",
        COMPLETE_TASK,
    ]
    .into_iter()
    .map(|name| {
        let ran = ran.clone();
        Tool::new(
            name,
            "records its call",
            json!({"type": "object"}),
            move |arguments: Value, ctx: ToolContext| {
                ran.lock().unwrap().push(Ran {
                    tool: name.to_owned(),
                    arguments,
                    confirm: ctx
                        .extensions
                        .get::<NeedsApproval>()
                        .map(|n| n.rule.clone()),
                });
                async { Ok::<Value, ToolError>(json!("ok")) }
            },
        )
    })
    .collect()
}

/// The model's one response makes `calls` (tool, arguments), through an agent whose
/// tool pipeline has `layer`. Returns what ran and what the model got for each call
/// (its result text, and whether it is an error), in call order.
async fn respond(
    layer: Arc<dyn ToolLayer>,
    calls: &[(&str, Value)],
) -> (Vec<Ran>, Vec<(String, bool)>) {
    let ran = Arc::new(Mutex::new(Vec::new()));
    let response: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, arguments))| {
            json!({"id": format!("c{i}"), "name": name, "arguments": arguments})
        })
        .collect();
    let script = Script {
        fresh_ids: false,
        responses: vec![
            serde_json::from_value(json!({ "toolCalls": response })).unwrap(),
            ScriptedResponse::text("done"),
        ],
    };
    let agent = agent(
        AgentOptions::new(model(script))
            .tools(tools(&ran))
            // One at a time, in the model's order (what ran is compared in order).
            .execution_mode(weft_provider::ExecutionMode::Sequential)
            .tool_layer(layer),
    )
    .unwrap();
    let result = agent
        .generate_with(
            "go",
            &AgentState::initial(),
            RunOptions {
                checkpoints: false,
                ..RunOptions::default()
            },
        )
        .await
        .unwrap();
    let answers = result
        .state
        .messages()
        .filter_map(|m| match &*m {
            Message::ToolResult(r) => Some(r.results.clone()),
            _ => None,
        })
        .flatten()
        .map(|r| {
            let text = r
                .result
                .as_str()
                .map_or_else(|| r.result.to_string(), str::to_owned);
            (text, r.is_error)
        })
        .collect();
    let ran = ran.lock().unwrap().clone();
    (ran, answers)
}

fn profile(value: Value) -> Arc<RuntimeProfile> {
    Arc::new(serde_json::from_value(value).unwrap())
}

/// The stage for `profile` with fresh flags, in memory, its workspace `workspace`.
fn stage(profile: Arc<RuntimeProfile>, workspace: &Path) -> ProfileLayer {
    ProfileLayer::new(profile, Arc::default(), None, workspace)
}

fn tools_run(ran: &[Ran]) -> Vec<&str> {
    ran.iter().map(|r| r.tool.as_str()).collect()
}

#[tokio::test]
async fn a_tool_the_policy_does_not_offer_is_refused_and_never_runs() {
    let p = profile(json!({"policy": {"mode": "batch",
        "allowedTools": ["note", "read_file", "run_command"], "deniedTools": ["run_command"]}}));
    let layer = Arc::new(stage(p, Path::new("/w")));
    let (ran, answers) = respond(
        layer,
        &[
            ("note", json!({})),
            ("run_command", json!({})),
            ("write_file", json!({})),
        ],
    )
    .await;
    assert_eq!(tools_run(&ran), ["note"]);
    assert_eq!(answers[0], ("ok".to_owned(), false));
    for (answer, tool) in answers[1..].iter().zip(["run_command", "write_file"]) {
        assert!(answer.1, "{answer:?}");
        assert_eq!(
            answer.0,
            format!(
                "{tool} is not allowed for this agent (runtime policy: allowedTools / deniedTools); it was not run"
            )
        );
    }
}

#[tokio::test]
async fn in_recovery_only_complete_task_runs() {
    let layer = stage(profile(json!({})), Path::new("/w"));
    let flags = layer.flags.clone();
    let layer = Arc::new(layer);
    // Not in recovery: any offered tool runs.
    let (ran, _) = respond(layer.clone(), &[("note", json!({}))]).await;
    assert_eq!(tools_run(&ran), ["note"]);
    flags.set_recovering(true);
    assert!(flags.recovering());
    let (ran, answers) = respond(layer.clone(), &[("note", json!({}))]).await;
    assert!(ran.is_empty(), "{ran:?}");
    assert!(answers[0].1);
    assert!(
        answers[0].0.starts_with(
            "note was not run: the turn limit was reached and the task is in recovery"
        ),
        "{answers:?}"
    );
    let (ran, answers) = respond(layer.clone(), &[(COMPLETE_TASK, json!({"summary": "s"}))]).await;
    assert_eq!(tools_run(&ran), [COMPLETE_TASK]);
    assert_eq!(answers[0], ("ok".to_owned(), false));
    flags.set_recovering(false);
    let (ran, _) = respond(layer, &[("note", json!({}))]).await;
    assert_eq!(tools_run(&ran), ["note"]);
}

#[tokio::test]
async fn complete_task_must_be_alone_in_its_response() {
    let layer: Arc<dyn ToolLayer> = Arc::new(stage(
        profile(json!({"policy": {"mode": "batch"}})),
        Path::new("/w"),
    ));
    let (ran, answers) = respond(
        layer.clone(),
        &[
            ("note", json!({})),
            (COMPLETE_TASK, json!({"summary": "s"})),
        ],
    )
    .await;
    assert!(ran.is_empty(), "{ran:?}");
    assert!(answers.iter().all(|a| a.1), "{answers:?}");
    assert!(
        answers[0]
            .0
            .starts_with("note was not run: this response also called complete_task"),
        "{answers:?}"
    );
    assert!(
        answers[1]
            .0
            .starts_with("complete_task must be called alone in its turn"),
        "{answers:?}"
    );
    // Alone, it runs; two other calls in batch mode both run.
    let (ran, _) = respond(layer.clone(), &[(COMPLETE_TASK, json!({"summary": "s"}))]).await;
    assert_eq!(tools_run(&ran), [COMPLETE_TASK]);
    let (ran, _) = respond(layer, &[("note", json!({})), ("read_file", json!({}))]).await;
    assert_eq!(tools_run(&ran), ["note", "read_file"]);
}

#[tokio::test]
async fn interactive_mode_runs_the_first_call_of_a_response_and_refuses_the_others() {
    let interactive: Arc<dyn ToolLayer> = Arc::new(stage(profile(json!({})), Path::new("/w")));
    let calls = [
        ("note", json!({"n": 1})),
        ("note", json!({"n": 2})),
        ("read_file", json!({})),
    ];
    let (ran, answers) = respond(interactive, &calls).await;
    assert_eq!(ran.len(), 1);
    assert_eq!(ran[0].arguments, json!({"n": 1}));
    assert_eq!(answers[0], ("ok".to_owned(), false));
    assert!(answers[1].1 && answers[2].1, "{answers:?}");
    assert_eq!(
        answers[2].0,
        "read_file was not run: the runtime policy is interactive, one tool call per turn, and this was \
         call 3 of 3 in the response; call it again in its own turn"
    );
    let batch: Arc<dyn ToolLayer> = Arc::new(stage(
        profile(json!({"policy": {"mode": "batch"}})),
        Path::new("/w"),
    ));
    let (ran, _) = respond(batch, &calls).await;
    assert_eq!(tools_run(&ran), ["note", "note", "read_file"]);
}

#[tokio::test]
async fn the_rules_see_each_calls_action_path_and_size_and_decide() {
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path();
    std::fs::write(root.join("big.txt"), "x".repeat(100)).unwrap();
    std::fs::write(root.join("small.txt"), "x").unwrap();
    let p = profile(
        json!({"policy": {"mode": "batch", "outputRoots": ["out"], "rules": [
            {"id": "no-secrets", "action": "file.write", "when": {"matchesPattern": ["**/secrets/**"]},
             "decision": "deny", "reason": "keys stay out"},
            {"id": "outputs-only", "action": "file.write", "when": {"pathWithinOutputRoot": false},
             "decision": "allow_with_confirm"},
            {"id": "small-reads", "action": "file.read", "when": {"fileSizeGreaterThan": 10},
             "decision": "deny"},
            {"id": "in-the-workspace", "action": "file.read", "when": {"pathWithinGrant": false},
             "decision": "deny"},
            {"id": "no-shell", "action": "tool.run_command", "decision": "deny"}
        ]}}),
    );
    let layer: Arc<dyn ToolLayer> = Arc::new(stage(p, root));
    let (ran, answers) = respond(
        layer,
        &[
            ("write_file", json!({"path": "out/secrets/key"})),
            ("write_file", json!({"path": "out/report.md"})),
            ("write_file", json!({"path": "src/main.rs"})),
            ("read_file", json!({"path": "big.txt"})),
            ("read_file", json!({"path": "small.txt"})),
            ("read_file", json!({"path": "/etc/hostname"})),
            ("run_command", json!({"command": "ls"})),
            ("note", json!({})),
        ],
    )
    .await;
    let denied = |i: usize| (answers[i].1, answers[i].0.clone());
    assert_eq!(
        denied(0),
        (
            true,
            format!(
                "write_file was not run: the runtime policy denies file.write of {}/out/secrets/key (rule no-secrets): keys stay out",
                root.display()
            )
        )
    );
    assert_eq!(
        ran,
        [
            Ran {
                tool: "write_file".into(),
                arguments: json!({"path": "out/report.md"}),
                confirm: None
            },
            Ran {
                tool: "write_file".into(),
                arguments: json!({"path": "src/main.rs"}),
                confirm: Some("outputs-only".into())
            },
            Ran {
                tool: "read_file".into(),
                arguments: json!({"path": "small.txt"}),
                confirm: None
            },
            Ran {
                tool: "note".into(),
                arguments: json!({}),
                confirm: None
            },
        ]
    );
    assert_eq!(
        denied(3),
        (
            true,
            format!(
                "read_file was not run: the runtime policy denies file.read of {}/big.txt (rule small-reads)",
                root.display()
            )
        )
    );
    assert!(
        denied(5).1.contains("(rule in-the-workspace)"),
        "{:?}",
        denied(5)
    );
    assert_eq!(
        denied(6),
        (
            true,
            "run_command was not run: the runtime policy denies tool.run_command of this call (rule no-shell)"
                .to_owned()
        )
    );
}

#[tokio::test]
async fn complete_task_passes_the_rules_and_its_artifacts_must_be_workspace_files() {
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path();
    std::fs::write(root.join("report.md"), "# done").unwrap();
    let db = tempfile::tempdir().unwrap();
    let run = Arc::new(crate::ledger::tests::context(db.path()).await);
    let store = run.store().clone();
    // A fallback that denies everything the rules do not decide: complete_task still
    // runs (it is the only way a task ends); so do its checks.
    for p in [
        profile(json!({})),
        profile(json!({"policy": {"fallback": "deny"}})),
    ] {
        let layer: Arc<dyn ToolLayer> = Arc::new(ProfileLayer::new(
            p,
            Arc::default(),
            Some(run.clone()),
            root,
        ));
        for (artifact, refusal) in [
            (
                "../elsewhere.md",
                "artifact \"../elsewhere.md\" is outside the workspace",
            ),
            (
                "missing.md",
                "artifact \"missing.md\" is not a file in the workspace",
            ),
        ] {
            let (ran, answers) = respond(
                layer.clone(),
                &[(
                    COMPLETE_TASK,
                    json!({"summary": "s", "artifacts": [artifact]}),
                )],
            )
            .await;
            assert!(ran.is_empty(), "{ran:?}");
            assert!(
                answers[0].1 && answers[0].0.starts_with(refusal),
                "{answers:?}"
            );
        }
        let (ran, _) = respond(
            layer,
            &[(
                COMPLETE_TASK,
                json!({"summary": "s", "artifacts": ["report.md"]}),
            )],
        )
        .await;
        assert_eq!(tools_run(&ran), [COMPLETE_TASK]);
    }
    // Each accepted completion registered its artifact, with its media type.
    let artifacts = store.artifacts("run-1").await.unwrap();
    assert_eq!(artifacts.len(), 2, "{artifacts:?}");
    assert!(artifacts.iter().all(|a| {
        a.artifact.media_type.as_deref() == Some("text/markdown")
            && a.artifact.path.as_deref() == Some(root.join("report.md").to_str().unwrap())
    }));
}

#[tokio::test]
async fn a_sub_agents_calls_keep_the_parents_denials_and_rules_and_nothing_else() {
    let db = tempfile::tempdir().unwrap();
    let run = Arc::new(crate::ledger::tests::context(db.path()).await);
    let store = run.store().clone();
    let p = profile(
        json!({"policy": {"allowedTools": ["note"], "deniedTools": ["run_command"],
        "rules": [{"id": "no-writes", "action": "file.write", "decision": "deny"}],
        "fallback": "deny"}}),
    );
    let parent = ProfileLayer::new(p, Arc::default(), Some(run), "/w");
    parent.flags.set_recovering(true);
    // A child run's stage (its own replay stage logs), a hand-written sub-agent's (this
    // one logs), and that sub-agent's own sub-agent's: the same policy.
    let child_run = parent.inherited();
    let child = parent.for_child().unwrap();
    let grandchild = child.for_child().unwrap();
    for (layer, logs) in [
        (child_run, false),
        (child.clone(), true),
        (grandchild, true),
    ] {
        let calls = [
            ("run_command", json!({})),
            ("write_file", json!({"path": "a.md"})),
            (COMPLETE_TASK, json!({"summary": "s"})),
        ];
        let (ran, answers) = respond(layer, &calls).await;
        // Not the parent's allowedTools, recovery, interactive mode or fallback: the
        // sub-agent's completion ran.
        assert_eq!(tools_run(&ran), [COMPLETE_TASK]);
        assert_eq!(
            answers[0].0,
            "run_command is denied by the runtime policy of the agent that started this sub-agent; it was not run"
        );
        assert!(answers[1].0.contains("(rule no-writes)"), "{answers:?}");
        store.flush().await.unwrap();
        let refused = weft_store::EventLog::events(
            &store,
            &weft_store::EventQuery {
                run_id: Some("run-1".into()),
                types: vec!["tool_call_refused".into()],
                ..weft_store::EventQuery::default()
            },
        )
        .await
        .unwrap();
        let before = refused.len();
        assert!(refused.iter().all(|e| e.payload["subAgent"] == true));
        if logs {
            assert!(before >= 2, "{refused:?}");
        } else {
            assert_eq!(before, 0, "{refused:?}");
        }
    }
    let mut args = json!({"path": "./a//b.md", "text": "a\u{1}b"});
    let (ran, _) = respond(child, &[(COMPLETE_TASK, args.take())]).await;
    assert_eq!(ran[0].arguments, json!({"path": "a/b.md", "text": "ab"}));
}

/// A gate checker that passes everything.
#[derive(Debug)]
struct Pass;

#[async_trait::async_trait]
impl GateChecker for Pass {
    async fn check(&self, _: GateCheck) -> GateVerdict {
        GateVerdict {
            passed: true,
            detail: String::new(),
        }
    }
}

#[tokio::test]
async fn with_an_sop_role_the_phase_decides_and_recovery_lets_the_task_end() {
    let coder = SopRole::builtin("coder").unwrap();
    let sop = Arc::new(SopExecutor::new(coder, Arc::new(Pass), None, None));
    let layer = stage(profile(json!({})), Path::new("/w")).with_sop(sop);
    let flags = layer.flags.clone();
    let layer: Arc<dyn ToolLayer> = Arc::new(layer);
    // The first phase (understand) reads; it does not write, and does not complete.
    let (ran, answers) = respond(layer.clone(), &[("write_file", json!({"path": "a"}))]).await;
    assert!(ran.is_empty() && answers[0].1, "{answers:?}");
    let (ran, answers) = respond(layer.clone(), &[(COMPLETE_TASK, json!({"summary": "s"}))]).await;
    assert!(ran.is_empty(), "{ran:?}");
    assert!(
        answers[0].0.starts_with("complete_task was not accepted"),
        "{answers:?}"
    );
    let (ran, _) = respond(layer.clone(), &[("read_file", json!({"path": "a"}))]).await;
    assert_eq!(tools_run(&ran), ["read_file"]);
    // In recovery the task may end from any phase.
    flags.set_recovering(true);
    let (ran, _) = respond(layer, &[(COMPLETE_TASK, json!({"summary": "s"}))]).await;
    assert_eq!(tools_run(&ran), [COMPLETE_TASK]);
}

#[test]
fn media_types_by_extension() {
    for (path, media) in [
        ("a.md", "text/markdown"),
        ("a.markdown", "text/markdown"),
        ("a.txt", "text/plain"),
        ("a.log", "text/plain"),
        ("a.json", "application/json"),
        ("a.toml", "application/toml"),
        ("a.yaml", "application/yaml"),
        ("a.yml", "application/yaml"),
        ("a.html", "text/html"),
        ("a.htm", "text/html"),
        ("a.css", "text/css"),
        ("a.csv", "text/csv"),
        ("a.js", "text/javascript"),
        ("a.mjs", "text/javascript"),
        ("a.ts", "text/x-typescript"),
        ("a.rs", "text/x-rust"),
        ("a.py", "text/x-python"),
        ("a.sh", "text/x-shellscript"),
        ("a.svg", "image/svg+xml"),
        ("a.png", "image/png"),
        ("a.JPG", "image/jpeg"),
        ("a.jpeg", "image/jpeg"),
        ("a.gif", "image/gif"),
        ("a.pdf", "application/pdf"),
        ("Makefile", "application/octet-stream"),
    ] {
        assert_eq!(mime_type(path), media, "{path}");
    }
}

#[test]
fn artifact_paths_stay_in_the_workspace() {
    let root = Path::new("/w");
    assert_eq!(inside(root, "a/b.md"), Some(PathBuf::from("/w/a/b.md")));
    assert_eq!(inside(root, "./b.md"), Some(PathBuf::from("/w/b.md")));
    assert_eq!(inside(root, "/w/c.txt"), Some(PathBuf::from("/w/c.txt")));
    assert_eq!(inside(root, "../etc/passwd"), None);
    assert_eq!(inside(root, "/etc/passwd"), None);
    assert_eq!(mime_type("NOTES.MD"), "text/markdown");
    assert_eq!(mime_type("x"), "application/octet-stream");
}

#[test]
fn paths_are_normalized_lexically() {
    for (raw, normalized) in [
        ("./a//b/../c", "a/c"),
        ("../x/./y", "../x/y"),
        ("/a/../../b", "/b"),
        ("a/..", "."),
        ("notes.md", "notes.md"),
        ("", ""),
    ] {
        assert_eq!(normalize_path(raw), normalized, "{raw}");
    }
}

#[test]
fn oversized_arguments_are_refused() {
    let mut args = serde_json::json!({"content": "x".repeat(MAX_INPUT_BYTES)});
    assert!(sanitize(&mut args).unwrap_err().contains("limit"));
    // The limit is inclusive: arguments of exactly MAX_INPUT_BYTES pass, one byte more not.
    let overhead = json!({"content": ""}).to_string().len();
    let mut at = json!({"content": "x".repeat(MAX_INPUT_BYTES - overhead)});
    assert!(sanitize(&mut at).is_ok());
    let mut over = json!({"content": "x".repeat(MAX_INPUT_BYTES - overhead + 1)});
    assert!(sanitize(&mut over).is_err());
    let mut args = serde_json::json!({"paths": ["./a", "b/./c"], "n": 1, "tag": "\u{0}z"});
    sanitize(&mut args).unwrap();
    assert_eq!(
        args,
        serde_json::json!({"paths": ["a", "b/c"], "n": 1, "tag": "z"})
    );
}

//! Pending decisions through the runtime (RUNTIME.md §3, RT-019): a tool the policy lists
//! waits for a person; without one the run suspends (exit 4) with a durable decision; the
//! decision is taken from any process; the resume runs the approved call exactly once, or
//! hands the model the denial's reason; a recorded call never asks again. Also the hooks
//! stage: an external pre-tool-use script denies with exit 2.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use serde_json::{Value, json};
use weft_provider::Message;
use weft_runtime::approval::{ApprovalRequest, Approver, ToolPolicy};
use weft_runtime::hooks::PreToolHook;
use weft_runtime::spec::{AgentProgram, Program, RunSpec, ToolSpec};
use weft_runtime::{ResumeOptions, RunEnd, RunOutcome, Runtime, ToolRegistry};
use weft_store::{
    DecisionKind, DecisionStatus, Durability, EventLog, EventQuery, RunStatus, Runs, Store,
    ToolCallRecord, ToolCallStatus, ToolLedger, Verdict, now_string,
};

async fn sqlite(dir: &Path) -> Store {
    Store::open(&format!("sqlite:{}", dir.join("weft.db").display()))
        .await
        .unwrap()
}

fn script(dir: &Path, lines: &[&str]) -> String {
    let mut responses: Vec<Value> = lines
        .iter()
        .enumerate()
        .map(|(i, line)| json!({"toolCalls": [{"id": format!("call-{i:02}"), "name": "append_line", "arguments": {"line": line}}]}))
        .collect();
    responses.push(json!({"text": "finished"}));
    let path = dir.join("script.json");
    std::fs::write(&path, json!({"responses": responses}).to_string()).unwrap();
    format!("scripted-turns:{}", path.display())
}

fn spec(dir: &Path, lines: &[&str], policy: ToolPolicy) -> RunSpec {
    let mut program = AgentProgram::new(script(dir, lines));
    program.tools = vec![ToolSpec {
        name: "append_line".into(),
        config: json!({"out": dir.join("out.txt"), "log": dir.join("log.txt")}),
    }];
    program.policy = policy;
    RunSpec::new("go", Program::Agent(program))
}

fn runtime(store: &Store) -> Runtime {
    Runtime::new(store.clone()).with_tools(ToolRegistry::with_builtins())
}

async fn resume(runtime: &Runtime, run: &str) -> RunOutcome {
    runtime
        .resume(run, ResumeOptions::default(), false)
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap()
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

async fn event_types(store: &Store, run: &str) -> Vec<(String, Value)> {
    store
        .events(&EventQuery {
            run_id: Some(run.to_owned()),
            ..EventQuery::default()
        })
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.event_type, e.payload))
        .collect()
}

/// The tool results the model was sent, from the run's latest checkpoint.
async fn tool_results(store: &Store, run: &str) -> Vec<(Value, bool)> {
    let record = store.run(run).await.unwrap().unwrap();
    let latest = store
        .latest_checkpoint(&record.thread_id)
        .await
        .unwrap()
        .unwrap();
    latest
        .checkpoint
        .state
        .messages()
        .filter_map(|m| match &*m {
            Message::ToolResult(r) => Some(r.results.clone()),
            _ => None,
        })
        .flatten()
        .map(|r| (r.result, r.is_error))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_needs_approval_suspends_and_runs_exactly_once_when_approved() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let runtime = runtime(&store);
    let policy = ToolPolicy::requiring(["append_line"]);
    let outcome = runtime
        .start(spec(dir.path(), &["a", "b"], policy), false)
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    let RunEnd::AwaitingDecision { decisions } = &outcome.end else {
        panic!("{outcome:?}")
    };
    assert_eq!(outcome.exit_code(), 4);
    assert_eq!(decisions.len(), 1);
    assert_eq!(decisions[0].tool_name, "append_line");
    assert_eq!(decisions[0].arguments, json!({"line": "a"}));
    assert_eq!(decisions[0].kind, DecisionKind::Approval);
    let run = outcome.run_id.clone();
    assert_eq!(
        store.run(&run).await.unwrap().unwrap().status,
        RunStatus::Suspended
    );
    assert!(!dir.path().join("out.txt").exists(), "nothing ran");
    // The pending set is in the store, for any process.
    let stored = runtime.decisions(&run).await.unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].status, DecisionStatus::Pending);

    // A resume without a decision suspends again on the same decision, running nothing.
    let again = resume(&runtime, &run).await;
    assert_eq!(again.exit_code(), 4, "{again:?}");
    assert!(!dir.path().join("out.txt").exists());
    assert_eq!(runtime.decisions(&run).await.unwrap().len(), 1);

    // Approve by decision id: the call runs; the next call asks again.
    runtime
        .decide(&run, &decisions[0].id, Verdict::Approve)
        .await
        .unwrap();
    let second = resume(&runtime, &run).await;
    let RunEnd::AwaitingDecision { decisions: next } = &second.end else {
        panic!("{second:?}")
    };
    assert_eq!(next[0].arguments, json!({"line": "b"}));
    assert_eq!(lines(&dir.path().join("out.txt")), ["call-00 a"]);
    // A decision is single-use: approving it again is refused.
    let reused = runtime
        .decide(&run, &decisions[0].id, Verdict::Approve)
        .await
        .unwrap_err();
    assert_eq!(reused.exit_code(), 2, "{reused}");

    // Approve by the call's id (unique among pending decisions).
    runtime
        .decide(&run, "call-01", Verdict::Approve)
        .await
        .unwrap();
    let done = resume(&runtime, &run).await;
    assert_eq!(
        done.end,
        RunEnd::Completed {
            output: "finished".into()
        }
    );
    assert_eq!(
        lines(&dir.path().join("out.txt")),
        ["call-00 a", "call-01 b"]
    );
    // Each call's handler started exactly once, whatever the number of resumes.
    assert_eq!(lines(&dir.path().join("log.txt")).len(), 2);
    let kinds: Vec<String> = event_types(&store, &run)
        .await
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(
        kinds.iter().filter(|k| *k == "decision_pending").count(),
        3,
        "{kinds:?}"
    );
    assert_eq!(kinds.iter().filter(|k| *k == "decision").count(), 2);
    // A call waiting for a decision has not ended: each call's one `tool_call_end` is
    // logged when it ran, none for the three suspensions.
    assert_eq!(
        kinds.iter().filter(|k| *k == "tool_call_end").count(),
        2,
        "{kinds:?}"
    );
}

/// An approval covers the call it was given for, not another at the same position: a
/// decision whose arguments are not the call's (an edited store) is not used; the run
/// suspends again, and nothing runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_covers_only_the_call_it_was_given_for() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let runtime = runtime(&store);
    let outcome = runtime
        .start(
            spec(dir.path(), &["a"], ToolPolicy::requiring(["append_line"])),
            false,
        )
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    let RunEnd::AwaitingDecision { decisions } = &outcome.end else {
        panic!("{outcome:?}")
    };
    let run = outcome.run_id.clone();
    runtime
        .decide(&run, &decisions[0].id, Verdict::Approve)
        .await
        .unwrap();
    store.flush().await.unwrap();
    let db = rusqlite::Connection::open(dir.path().join("weft.db")).unwrap();
    let changed = db
        .execute("UPDATE decisions SET args_hash = 'other arguments'", [])
        .unwrap();
    assert_eq!(changed, 1);
    let again = resume(&runtime, &run).await;
    let RunEnd::AwaitingDecision { decisions: asked } = &again.end else {
        panic!("the approval was used: {again:?}")
    };
    assert_eq!(asked[0].arguments, json!({"line": "a"}));
    assert!(!dir.path().join("out.txt").exists(), "the call ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_call_reaches_the_model_as_an_error_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let runtime = runtime(&store);
    let outcome = runtime
        .start(
            spec(
                dir.path(),
                &["rm -rf"],
                ToolPolicy::requiring(["append_line"]),
            ),
            false,
        )
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    assert_eq!(outcome.exit_code(), 4, "{outcome:?}");
    let run = outcome.run_id.clone();
    let denied = runtime
        .decide(&run, "call-00", Verdict::Deny("not in production".into()))
        .await
        .unwrap();
    assert_eq!(denied.status, DecisionStatus::Denied);
    let done = resume(&runtime, &run).await;
    assert_eq!(done.exit_code(), 0, "{done:?}");
    assert!(
        !dir.path().join("out.txt").exists(),
        "a denied call never runs"
    );
    let results = tool_results(&store, &run).await;
    assert_eq!(results.len(), 1);
    assert!(results[0].1, "an error result");
    assert!(
        results[0].0.as_str().unwrap().contains("not in production"),
        "{results:?}"
    );
    let refused: Vec<Value> = event_types(&store, &run)
        .await
        .into_iter()
        .filter(|(k, _)| k == "tool_call_refused")
        .map(|(_, p)| p)
        .collect();
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0]["stage"], "approval");
}

#[derive(Debug, Default)]
struct Counting {
    asked: AtomicUsize,
}

#[async_trait]
impl Approver for Counting {
    async fn decide(&self, request: &ApprovalRequest) -> Option<Verdict> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        Some(if request.arguments["line"] == "b" {
            Verdict::Deny("no b".into())
        } else {
            Verdict::Approve
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approver_answers_inline_and_the_decisions_are_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let approver = Arc::new(Counting::default());
    let runtime = runtime(&store).with_approver(approver.clone());
    let outcome = runtime
        .start(
            spec(
                dir.path(),
                &["a", "b"],
                ToolPolicy::requiring(["append_line"]),
            ),
            false,
        )
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    assert_eq!(outcome.exit_code(), 0, "{outcome:?}");
    assert_eq!(approver.asked.load(Ordering::SeqCst), 2);
    assert_eq!(lines(&dir.path().join("out.txt")), ["call-00 a"]);
    let statuses: Vec<DecisionStatus> = runtime
        .decisions(&outcome.run_id)
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.status)
        .collect();
    assert_eq!(statuses, [DecisionStatus::Used, DecisionStatus::Denied]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncertain_call_is_a_decision_a_person_can_deny() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let runtime = runtime(&store);
    let run = runtime
        .create(&spec(dir.path(), &["a"], ToolPolicy::default()))
        .await
        .unwrap();
    // A crash during the first call leaves it pending at its position.
    let record = store.run(&run).await.unwrap().unwrap();
    store
        .with_durability(Durability::Sync)
        .tool_call_started(&ToolCallRecord {
            run_id: run.clone(),
            position: format!("{}@1#0", record.thread_id),
            args_hash: String::new(),
            tool_call_id: "call-00".into(),
            thread_id: record.thread_id.clone(),
            tool_name: "append_line".into(),
            arguments: json!({"line": "a"}),
            status: ToolCallStatus::Pending,
            result: None,
            is_error: false,
            attempts: 1,
            side_effects: true,
            idempotent: false,
            turn: 1,
            started_at: now_string(),
            ended_at: None,
        })
        .await
        .unwrap();
    let stopped = resume(&runtime, &run).await;
    let RunEnd::NeedsApproval { decisions, .. } = &stopped.end else {
        panic!("{stopped:?}")
    };
    assert_eq!(stopped.exit_code(), 3);
    assert_eq!(decisions[0].kind, DecisionKind::Uncertain);
    runtime
        .decide(
            &run,
            &decisions[0].id,
            Verdict::Deny("it already ran".into()),
        )
        .await
        .unwrap();
    let done = resume(&runtime, &run).await;
    assert_eq!(done.exit_code(), 0, "{done:?}");
    assert!(!dir.path().join("out.txt").exists(), "not run again");
    let results = tool_results(&store, &run).await;
    assert!(results[0].1);
    assert!(
        results[0].0.as_str().unwrap().contains("it already ran"),
        "{results:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pre_tool_use_hook_denies_with_exit_2_and_allows_with_exit_0() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let runtime = runtime(&store);
    let seen = dir.path().join("payloads.jsonl");
    // Denies the line "secret", allows others; records every payload it gets.
    let command = format!(
        "payload=$(cat); echo \"$payload\" >> '{}'; case \"$payload\" in *'\"line\":\"secret\"'*) echo 'no secrets in files' >&2; exit 2;; esac; exit 0",
        seen.display()
    );
    let policy = ToolPolicy {
        pre_tool_use: vec![PreToolHook::new(command).matching("append_line")],
        ..ToolPolicy::default()
    };
    let outcome = runtime
        .start(spec(dir.path(), &["secret", "public"], policy), false)
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    assert_eq!(outcome.exit_code(), 0, "{outcome:?}");
    assert_eq!(lines(&dir.path().join("out.txt")), ["call-01 public"]);
    let results = tool_results(&store, &outcome.run_id).await;
    assert_eq!(results[0], (json!("no secrets in files"), true));
    assert!(!results[1].1);
    let payloads: Vec<Value> = lines(&seen)
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(payloads.len(), 2);
    assert_eq!(payloads[0]["hook_event_name"], "PreToolUse");
    assert_eq!(payloads[0]["tool_name"], "append_line");
    assert_eq!(payloads[0]["tool_input"], json!({"line": "secret"}));
    assert_eq!(payloads[0]["tool_use_id"], "call-00");
    let refused: Vec<Value> = event_types(&store, &outcome.run_id)
        .await
        .into_iter()
        .filter(|(k, _)| k == "tool_call_refused")
        .map(|(_, p)| p)
        .collect();
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0]["stage"], "hooks");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_that_fails_otherwise_denies_the_call_fail_closed() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let policy = ToolPolicy {
        pre_tool_use: vec![PreToolHook::new("exit 7")],
        ..ToolPolicy::default()
    };
    let outcome = runtime(&store)
        .start(spec(dir.path(), &["a"], policy), false)
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    assert_eq!(outcome.exit_code(), 0, "{outcome:?}");
    assert!(!dir.path().join("out.txt").exists());
    let results = tool_results(&store, &outcome.run_id).await;
    assert!(
        results[0].0.as_str().unwrap().contains("exit code 7"),
        "{results:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transient_failure_is_retried_visibly_when_the_policy_allows() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let runs = Arc::new(AtomicUsize::new(0));
    let mut registry = ToolRegistry::new();
    let counter = runs.clone();
    registry.register("flaky", move |_config: &Value| {
        let counter = counter.clone();
        Ok(weft_provider::Tool::new(
            "flaky",
            "fails once, then works",
            json!({"type": "object"}),
            move |_args: Value, _ctx| {
                let n = counter.fetch_add(1, Ordering::SeqCst);
                async move {
                    if n == 0 {
                        Err(weft_provider::ToolError::transient("connection reset"))
                    } else {
                        Ok(json!("ok"))
                    }
                }
            },
        ))
    });
    let script_path = dir.path().join("script.json");
    std::fs::write(
        &script_path,
        json!({"responses": [{"toolCalls": [{"id": "f1", "name": "flaky", "arguments": {}}]}, {"text": "done"}]})
            .to_string(),
    )
    .unwrap();
    let mut program = AgentProgram::new(format!("scripted-turns:{}", script_path.display()));
    program.tools = vec![ToolSpec {
        name: "flaky".into(),
        config: json!({}),
    }];
    program.policy.max_retries = 2;
    let outcome = Runtime::new(store.clone())
        .with_tools(registry)
        .start(RunSpec::new("go", Program::Agent(program)), false)
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    assert_eq!(outcome.exit_code(), 0, "{outcome:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 2, "one retry");
    let results = tool_results(&store, &outcome.run_id).await;
    assert_eq!(results, [(json!("ok"), false)]);
    let retries: Vec<Value> = event_types(&store, &outcome.run_id)
        .await
        .into_iter()
        .filter(|(k, _)| k == "tool_call_retry")
        .map(|(_, p)| p)
        .collect();
    assert_eq!(retries.len(), 1);
    assert_eq!(retries[0]["error"], "connection reset");
    assert_eq!(retries[0]["attempt"], 1);
}

/// A registry with `delegate`: a sub-agent (its own scripted model) that calls
/// `append_line` once, writing into `dir`.
fn delegating_registry(dir: &Path) -> ToolRegistry {
    let mut registry = ToolRegistry::with_builtins();
    let config = json!({"out": dir.join("out.txt"), "log": dir.join("log.txt")});
    registry.register("delegate", move |_config: &Value| {
        let writer = weft_store::testing::append_line_tool(&config)?;
        let model = weft_provider::adapters::scripted::model(
            weft_provider::adapters::scripted::Script {
                fresh_ids: false,
                responses: vec![
                    weft_provider::adapters::scripted::ScriptedResponse::tool_call(
                        "child-1",
                        "append_line",
                        json!({"line": "from the sub-agent"}),
                    ),
                    weft_provider::adapters::scripted::ScriptedResponse::text("child done"),
                ],
            },
        );
        let child = weft_agent::agent(weft_agent::AgentOptions::new(model).tool(writer))
            .map_err(|e| e.to_string())?;
        Ok(weft_agent::SubagentTool::new(
            "delegate",
            "Hands a task to a helper agent.",
            json!({"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]}),
            child,
        )
        .build())
    });
    registry
}

fn delegating_spec(dir: &Path, policy: ToolPolicy) -> RunSpec {
    let path = dir.join("parent.json");
    std::fs::write(
        &path,
        json!({"responses": [
            {"toolCalls": [{"id": "p1", "name": "delegate", "arguments": {"prompt": "write a line"}}]},
            {"text": "parent done"}
        ]})
        .to_string(),
    )
    .unwrap();
    let mut program = AgentProgram::new(format!("scripted-turns:{}", path.display()));
    program.tools = vec![ToolSpec {
        name: "delegate".into(),
        config: json!({}),
    }];
    program.policy = policy;
    RunSpec::new("go", Program::Agent(program))
}

/// The run's policy binds a sub-agent's calls too: hooks deny them, and a call that needs
/// approval is asked of the same person — or, when nobody can answer now, becomes a pending
/// decision of the run (the sub-agent is a child run of it) — never run unapproved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_agents_calls_pass_the_runs_hooks_and_approvals() {
    // Approval without anyone to ask: the run suspends with the sub-agent's decision.
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let outcome = Runtime::new(store.clone())
        .with_tools(delegating_registry(dir.path()))
        .start(
            delegating_spec(dir.path(), ToolPolicy::requiring(["append_line"])),
            false,
        )
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    assert_eq!(outcome.exit_code(), 4, "{outcome:?}");
    assert!(
        !dir.path().join("out.txt").exists(),
        "the sub-agent's call did not run"
    );
    let RunEnd::AwaitingDecision { decisions } = &outcome.end else {
        panic!("{outcome:?}")
    };
    assert_eq!(decisions.len(), 1, "{decisions:?}");
    assert_eq!(decisions[0].tool_name, "append_line");
    assert_eq!(decisions[0].tool_call_id, "child-1");

    // The same with a person who approves: it runs.
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let approver = Arc::new(Counting::default());
    let outcome = Runtime::new(store.clone())
        .with_tools(delegating_registry(dir.path()))
        .with_approver(approver.clone())
        .start(
            delegating_spec(dir.path(), ToolPolicy::requiring(["append_line"])),
            false,
        )
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    assert_eq!(outcome.exit_code(), 0, "{outcome:?}");
    assert_eq!(approver.asked.load(Ordering::SeqCst), 1);
    assert_eq!(
        lines(&dir.path().join("out.txt")),
        ["child-1 from the sub-agent"]
    );

    // A hook of the run denies the sub-agent's call.
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let policy = ToolPolicy {
        pre_tool_use: vec![
            PreToolHook::new("echo 'no writes here' >&2; exit 2").matching("append_line"),
        ],
        ..ToolPolicy::default()
    };
    let outcome = Runtime::new(store.clone())
        .with_tools(delegating_registry(dir.path()))
        .start(delegating_spec(dir.path(), policy), false)
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    assert_eq!(outcome.exit_code(), 0, "{outcome:?}");
    assert!(
        !dir.path().join("out.txt").exists(),
        "the hook stopped the sub-agent's call"
    );
}

/// A scripted agent that calls `tool` once (with `arguments`), then answers.
fn calling_once(tool: weft_provider::Tool, call: &str, arguments: Value) -> weft_agent::Agent {
    use weft_provider::adapters::scripted::{Script, ScriptedResponse, model};
    let model = model(Script {
        fresh_ids: false,
        responses: vec![
            ScriptedResponse::tool_call(call, tool.name.clone(), arguments),
            ScriptedResponse::text("child done"),
        ],
    });
    weft_agent::agent(weft_agent::AgentOptions::new(model).tool(tool)).unwrap()
}

/// `name`: a hand-written sub-agent tool that runs `child` itself (with the call's
/// `ToolExecutionContext` as its parent context), not a `SubagentTool`.
fn hand_written(name: &str, child: weft_agent::Agent) -> weft_provider::Tool {
    weft_provider::Tool::new(
        name,
        "Hands a task to a helper agent.",
        json!({"type": "object", "properties": {"prompt": {"type": "string"}}}),
        move |_args: Value, context: weft_provider::ToolContext| {
            let child = child.clone();
            async move {
                let parent = weft_agent::ToolExecutionContext::from_tool(&context).cloned();
                let options = weft_agent::RunOptions {
                    parent_context: parent.map(Arc::new),
                    checkpoints: false,
                    ..weft_agent::RunOptions::default()
                };
                child
                    .generate_with("write a line", &weft_agent::AgentState::initial(), options)
                    .await
                    .map(|result| Value::String(result.turn.text()))
                    .map_err(|e| weft_provider::ToolError::new(e.to_string()))
            }
        },
    )
}

/// A registry with `delegate`: a hand-written sub-agent tool whose agent calls
/// `append_line` once, writing into `dir` — directly, or (`depth` 2) through a hand-written
/// sub-agent of its own.
fn hand_written_registry(dir: &Path, depth: usize) -> ToolRegistry {
    let mut registry = ToolRegistry::with_builtins();
    let config = json!({"out": dir.join("out.txt"), "log": dir.join("log.txt")});
    registry.register("delegate", move |_config: &Value| {
        let writer = weft_store::testing::append_line_tool(&config)?;
        let mut child = calling_once(writer, "child-1", json!({"line": "from the sub-agent"}));
        for level in 1..depth {
            let deeper = hand_written("deeper", child);
            child = calling_once(
                deeper,
                &format!("deeper-{level}"),
                json!({"prompt": "go on"}),
            );
        }
        Ok(hand_written("delegate", child))
    });
    registry
}

/// A sub-agent the runtime does not run as a child run (a hand-written tool running its
/// agent itself) still passes the run's approval stage: with nobody to ask, its call is
/// refused (logged as a sub-agent's refusal), never run unapproved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_written_sub_agents_call_needing_approval_is_refused_when_nobody_can_answer() {
    // The sub-agent's own call, and its sub-agent's.
    for depth in [1, 2] {
        hand_written_call_refused(depth).await;
    }
}

/// A hand-written sub-agent `depth` levels down calls `append_line`, which needs approval.
async fn hand_written_call_refused(depth: usize) {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let outcome = Runtime::new(store.clone())
        .with_tools(hand_written_registry(dir.path(), depth))
        .start(
            delegating_spec(dir.path(), ToolPolicy::requiring(["append_line"])),
            false,
        )
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    assert_eq!(outcome.exit_code(), 0, "{outcome:?}");
    assert!(
        !dir.path().join("out.txt").exists(),
        "the call of the sub-agent at depth {depth} ran"
    );
    let refused: Vec<Value> = event_types(&store, &outcome.run_id)
        .await
        .into_iter()
        .filter(|(k, _)| k == "tool_call_refused")
        .map(|(_, p)| p)
        .collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["subAgent"], true);
}

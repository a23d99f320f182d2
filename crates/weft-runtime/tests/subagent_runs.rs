//! UAP-1.0 sub-agent tools as child runs (issue 21 item 0): a `weft_agent::SubagentTool`
//! called by an agent that `Runtime::start` runs is a child run of the run — its own thread
//! linked to the run's, a lineage node, its events in the run's log under `parent/child`, its
//! usage in the run's, its model responses recorded (a resume never asks its model again) and
//! its approvals pending decisions of the run.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use weft_runtime::approval::ToolPolicy;
use weft_runtime::spec::{AgentProgram, Program, RunSpec, ToolSpec};
use weft_runtime::{ResumeOptions, RunEnd, RunOutcome, Runtime, ToolRegistry};
use weft_store::{
    AgentStatus, DecisionStatus, EventLog as _, EventQuery, Lineage as _, Runs as _, Store,
    Threads as _, Verdict,
};
use weft_testkit::{ReplayServer, Reply};

async fn sqlite(dir: &Path) -> Store {
    Store::open(&format!("sqlite:{}", dir.join("weft.db").display()))
        .await
        .unwrap()
}

/// A Chat Completions answer (not streamed) with `message` and 10 + 4 tokens.
fn completion(message: Value, finish: &str) -> Reply {
    Reply::json(
        200,
        &json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "tiny",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14}}),
    )
}

/// The sub-agent's model on a local HTTP server: first it calls `append_line`, then it
/// answers `child done`. The server counts the requests it gets.
async fn child_model_server() -> ReplayServer {
    ReplayServer::start(vec![
        completion(
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "append_line", "arguments": "{\"line\": \"from the sub-agent\"}"}}]}),
            "tool_calls",
        ),
        completion(
            json!({"role": "assistant", "content": "child done"}),
            "stop",
        ),
    ])
    .await
}

/// A registry with `delegate`: a `SubagentTool` whose agent (its model on `url`) may call
/// `append_line`, writing into `dir`.
fn registry(dir: &Path, url: String) -> ToolRegistry {
    let mut registry = ToolRegistry::with_builtins();
    let config = json!({"out": dir.join("out.txt"), "log": dir.join("log.txt")});
    registry.register("delegate", move |_config: &Value| {
        let writer = weft_store::testing::append_line_tool(&config)?;
        let mut provider =
            Arc::unwrap_or_clone(weft_provider::adapters::openai_chat::compatible_provider());
        provider.default_config = weft_provider::ProviderConfig::default()
            .base_url(format!("{url}/v1"))
            .api_key("test-key");
        let model = Arc::new(provider).model("tiny");
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

/// The parent (a scripted model) calls `delegate` once, then answers `parent done`.
fn spec(dir: &Path, policy: ToolPolicy) -> RunSpec {
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

async fn run(runtime: &Runtime, spec: RunSpec) -> RunOutcome {
    runtime
        .start(spec, false)
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

/// `(type, agent path)` of the run's events.
async fn events(store: &Store, run: &str) -> Vec<(String, String)> {
    store
        .events(&EventQuery {
            run_id: Some(run.to_owned()),
            ..EventQuery::default()
        })
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.event_type, e.agent_id))
        .collect()
}

/// A sub-agent called in a run is a child run: a thread linked to the run's, a lineage node
/// (completed, with its own tokens), its steps and calls in the run's log under
/// `parent/delegate`, its model's tokens in the run's usage, its conversation checkpointed
/// under its thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_agent_tool_in_a_run_is_a_child_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let server = child_model_server().await;
    let runtime = Runtime::new(store.clone()).with_tools(registry(dir.path(), server.url()));
    let outcome = run(&runtime, spec(dir.path(), ToolPolicy::default())).await;
    assert_eq!(outcome.exit_code(), 0, "{outcome:?}");
    assert_eq!(server.received().len(), 2);
    assert_eq!(
        lines(&dir.path().join("out.txt")),
        ["c1 from the sub-agent"]
    );

    // Lineage: the root agent and the child, completed with its model's tokens.
    let record = store.run(&outcome.run_id).await.unwrap().unwrap();
    let lineage = store.lineage(&outcome.run_id).await.unwrap();
    assert_eq!(lineage.len(), 2, "{lineage:?}");
    let root = lineage.iter().find(|n| n.depth == 0).unwrap();
    let child = lineage.iter().find(|n| n.depth == 1).unwrap();
    assert_eq!(child.parent_agent_id.as_deref(), Some(root.id.as_str()));
    assert_eq!(child.role, "delegate");
    assert_eq!(child.status, AgentStatus::Completed);
    assert_eq!(
        (child.usage.input_tokens, child.usage.output_tokens),
        (20, 8)
    );

    // Its thread, linked to the run's, holds its conversation.
    let thread = store.thread(&child.id).await.unwrap().unwrap();
    assert_eq!(
        thread.parent_thread_id.as_deref(),
        Some(record.thread_id.as_str())
    );
    let latest = store.latest_checkpoint(&child.id).await.unwrap().unwrap();
    let texts: Vec<String> = latest
        .checkpoint
        .state
        .messages()
        .map(|m| m.text())
        .collect();
    assert_eq!(texts.first().map(String::as_str), Some("write a line"));
    assert_eq!(texts.last().map(String::as_str), Some("child done"));

    // Usage rolls up: the run's includes the child's 20 + 8 tokens.
    assert!(
        outcome.usage.input_tokens >= 20 && outcome.usage.output_tokens >= 8,
        "{:?}",
        outcome.usage
    );
    assert_eq!(record.usage.input_tokens, outcome.usage.input_tokens);

    // The child's steps and calls are in the run's log under `parent/delegate`; the
    // parent's own call under the parent's path.
    let events = events(&store, &outcome.run_id).await;
    let (_, parent) = events.iter().find(|(kind, _)| kind == "run_start").unwrap();
    assert!(!parent.contains('/'), "{events:?}");
    let path = format!("{parent}/delegate");
    let of = |agent: &str| -> Vec<&str> {
        events
            .iter()
            .filter(|(_, a)| a == agent)
            .map(|(kind, _)| kind.as_str())
            .collect()
    };
    let child_events = of(&path);
    for kind in ["turn_start", "tool_call_start", "tool_call_end", "turn_end"] {
        assert!(child_events.contains(&kind), "{kind}: {events:?}");
    }
    assert_eq!(
        child_events.iter().filter(|k| **k == "turn_start").count(),
        2,
        "the child's two steps: {events:?}"
    );
    assert!(of(parent).contains(&"tool_call_end"), "{events:?}");
}

/// An approval the run's policy asks for inside the sub-agent is a pending decision of the
/// run: the run suspends (exit 4) with the sub-agent's call not run; after `decide` the resume
/// replays the sub-agent's recorded response — its model is NOT asked again — runs the
/// approved call once, and finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_agents_approval_suspends_the_run_and_the_resume_does_not_ask_its_model_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let server = child_model_server().await;
    let runtime = Runtime::new(store.clone()).with_tools(registry(dir.path(), server.url()));
    let outcome = run(
        &runtime,
        spec(dir.path(), ToolPolicy::requiring(["append_line"])),
    )
    .await;
    assert_eq!(outcome.exit_code(), 4, "{outcome:?}");
    assert!(
        matches!(outcome.end, RunEnd::AwaitingDecision { .. }),
        "{outcome:?}"
    );
    assert!(!dir.path().join("out.txt").exists(), "not run unapproved");
    assert_eq!(
        server.received().len(),
        1,
        "the sub-agent's model was asked once"
    );
    let decisions = runtime.decisions(&outcome.run_id).await.unwrap();
    assert_eq!(decisions.len(), 1, "{decisions:?}");
    assert_eq!(decisions[0].tool_name, "append_line");
    assert_eq!(decisions[0].status, DecisionStatus::Pending);
    let lineage = store.lineage(&outcome.run_id).await.unwrap();
    let child = lineage.iter().find(|n| n.depth == 1).unwrap();
    // The decision is the sub-agent's, and it waits.
    assert_eq!(decisions[0].agent_id, child.id);
    assert_eq!(child.status, AgentStatus::Active);

    runtime
        .decide(&outcome.run_id, &decisions[0].id, Verdict::Approve)
        .await
        .unwrap();
    let resumed = runtime
        .resume(&outcome.run_id, ResumeOptions::default(), false)
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    assert_eq!(resumed.exit_code(), 0, "{resumed:?}");
    assert!(
        matches!(&resumed.end, RunEnd::Completed { output } if output == "parent done"),
        "{resumed:?}"
    );
    assert_eq!(
        server.received().len(),
        2,
        "the resume replayed the sub-agent's first response instead of asking again"
    );
    assert_eq!(
        lines(&dir.path().join("out.txt")),
        ["c1 from the sub-agent"],
        "the approved call ran once"
    );
    let lineage = store.lineage(&outcome.run_id).await.unwrap();
    let child = lineage.iter().find(|n| n.depth == 1).unwrap();
    assert_eq!(child.status, AgentStatus::Completed);
    // Both of the sub-agent's model calls are in the run's usage, each counted once.
    assert_eq!(
        (child.usage.input_tokens, child.usage.output_tokens),
        (20, 8)
    );
}

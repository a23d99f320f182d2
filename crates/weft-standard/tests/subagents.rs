//! Subagents (agents §7): a `dual_ai` agent with `exposeAsTool` called from a parent
//! prompt's tools runs as a blocking, non-resumable child run — its own thread linked to the
//! parent's, its events nested under the parent's agent path, its usage rolled up into the
//! run's, and the spec's canonical result or failure text as the call's result.

mod common;

use common::call;

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use weft_runtime::event::{EventKind, RunEvent};
use weft_runtime::{RunEnd, RunOutcome, Runtime};
use weft_standard::{Project, StandardSessions};
use weft_store::{Lineage as _, Runs as _, Store, Threads as _};

fn usage(input: u64, output: u64) -> Value {
    json!({"inputTokens": input, "outputTokens": output})
}

/// `end` as a list of calls (one call, or several).
fn calls(end: Value) -> Value {
    match end {
        Value::Array(_) => end,
        one => Value::Array(vec![one]),
    }
}

/// A lead (`ai_human`) whose prompt calls the `dual_ai` agent `reviewer` as a subagent
/// (its first message is the call's `task`); the reviewer's worker ends the session with
/// `worker_end` (a call of `done` or `fail`, or a list of calls ending with one) after one
/// exchange with its checker.
fn write_project(dir: &Path, worker_end: Value, extra: &str, entry: &str) -> Project {
    let files = [
        (
            "weft.toml",
            format!("name = \"t\"\nmodel = \"scripted-turns:lead.json\"\n{extra}"),
        ),
        (
            "tools/done.toml",
            "name = \"done\"\nparameters = { type = \"object\", properties = { summary = { type = \"string\" } } }\n".into(),
        ),
        (
            "tools/fail.toml",
            "name = \"fail\"\nparameters = { type = \"object\", properties = { reason = { type = \"string\" }, files = { type = \"array\" } } }\n".into(),
        ),
        ("tools/note.toml", "name = \"note\"\n".into()),
        (
            "agents/lead.toml",
            "name = \"lead\"\n[sideA]\nprompt = \"lead\"\n".into(),
        ),
        (
            "prompts/lead.toml",
            format!("name = \"lead\"\ntools = [{{ name = \"reviewer\", initUserMessageProperty = \"task\"{entry} }}]\n"),
        ),
        (
            "agents/reviewer.toml",
            "name = \"reviewer\"\ntype = \"dual_ai\"\nexposeAsTool = true\ntoolDescription = \"Reviews a plan.\"\nmaxSessionTurns = 4\n\
             [sideA]\nprompt = \"worker\"\nsessionStop = { name = \"done\", messageProperty = \"summary\" }\nsessionFail = { name = \"fail\", messageProperty = \"reason\", attachmentsProperty = \"files\" }\n\
             [sideB]\nprompt = \"checker\"\n"
                .into(),
        ),
        (
            "prompts/worker.toml",
            "name = \"worker\"\nmodel = \"scripted-turns:worker.json\"\ntools = [\"done\", \"fail\", \"note\", \"write_file\"]\n".into(),
        ),
        (
            "prompts/checker.toml",
            "name = \"checker\"\nmodel = \"scripted-turns:checker.json\"\n".into(),
        ),
        (
            "lead.json",
            json!({"responses": [
                {"toolCalls": [call("c1", "reviewer", json!({"task": "check the plan"}))], "usage": usage(100, 10)},
                {"text": "all good", "usage": usage(1, 1)},
            ]})
            .to_string(),
        ),
        (
            "worker.json",
            json!({"responses": [
                {"toolCalls": [call("w1", "note", json!({}))], "usage": usage(7, 3)},
                {"text": "draft", "usage": usage(7, 3)},
                {"toolCalls": calls(worker_end), "usage": usage(7, 3)},
            ]})
            .to_string(),
        ),
        (
            "checker.json",
            json!({"responses": [{"text": "looks fine, finish", "usage": usage(5, 2)}]}).to_string(),
        ),
        // A file of the parent's workspace (a child has a folder of its own).
        ("out/log.txt", "the log".into()),
    ];
    for (path, text) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    Project::load(dir).expect("valid project")
}

struct Ran {
    store: Store,
    outcome: RunOutcome,
    events: Vec<RunEvent>,
}

async fn run_lead(worker_end: Value, extra: &str) -> (tempfile::TempDir, Ran) {
    run_lead_with(worker_end, extra, "").await
}

/// [`run_lead`] with `entry` added to the settings of the lead's `reviewer` tool entry.
async fn run_lead_with(worker_end: Value, extra: &str, entry: &str) -> (tempfile::TempDir, Ran) {
    let dir = tempfile::tempdir().expect("tempdir");
    let project = write_project(dir.path(), worker_end, extra, entry);
    let store = common::sqlite_store(dir.path()).await;
    let runtime = Runtime::new(store.clone()).with_sessions(Arc::new(StandardSessions));
    let spec = common::session_spec(&project, "lead", "review my plan");
    let outcome = runtime
        .start(spec, false)
        .await
        .expect("start")
        .outcome()
        .await
        .expect("outcome");
    let events = events_of(&store, &outcome.run_id).await;
    (
        dir,
        Ran {
            store,
            outcome,
            events,
        },
    )
}

async fn events_of(store: &Store, run: &str) -> Vec<RunEvent> {
    common::events(store, run).await
}

/// The result the lead's call of `reviewer` got, and whether it was an error.
fn reviewer_result(events: &[RunEvent]) -> (Value, bool) {
    events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolCallEnd {
                tool,
                result,
                is_error,
                ..
            } if tool == "reviewer" => {
                assert_eq!(e.agent.as_str(), "lead", "the call is the parent's");
                Some((result.clone().unwrap_or(Value::Null), *is_error))
            }
            _ => None,
        })
        .expect("the call of reviewer ended")
}

#[tokio::test]
async fn a_dual_ai_subagent_runs_as_a_child_thread_and_returns_the_canonical_result() {
    let (_dir, ran) = run_lead(
        call("w2", "done", json!({"summary": "the plan is sound"})),
        "",
    )
    .await;
    assert_eq!(
        ran.outcome.end,
        RunEnd::Completed {
            output: "all good".into()
        }
    );
    let run = ran
        .store
        .run(&ran.outcome.run_id)
        .await
        .expect("run")
        .expect("recorded");
    // The child's thread: its own, linked to the parent's, named by its reference.
    let children: Vec<_> = ran
        .store
        .threads()
        .await
        .expect("threads")
        .into_iter()
        .filter(|t| t.parent_thread_id.as_deref() == Some(run.thread_id.as_str()))
        .collect();
    assert_eq!(children.len(), 1, "one child thread");
    let reference = children[0].id.clone();
    // The canonical child → parent payload, byte for byte (agents §7.10).
    let (result, is_error) = reviewer_result(&ran.events);
    assert!(!is_error);
    assert_eq!(
        result,
        Value::String(format!(
            "Subagent (reference: {reference}) has returned the following result:\n\nthe plan is sound"
        ))
    );
    // The child's conversation is its own, and the call's `task` (initUserMessageProperty)
    // is its first message.
    let latest = ran
        .store
        .latest_checkpoint(&reference)
        .await
        .expect("checkpoint")
        .expect("the child's checkpoint");
    let first = latest
        .checkpoint
        .state
        .messages()
        .next()
        .map(|m| m.into_owned());
    assert!(
        matches!(&first, Some(m @ weft_provider::Message::User(_)) if m.text() == "check the plan"),
        "{first:?}"
    );
    // The child's checkpoints are under its own thread (each side its own scope).
    assert!(
        !ran.store
            .list_checkpoints(&reference)
            .await
            .expect("checkpoints")
            .is_empty()
    );
    assert!(
        !ran.store
            .list_checkpoints(&format!("{reference}.sideB"))
            .await
            .expect("checkpoints")
            .is_empty()
    );
    // The lineage: the child under the run's agent, completed.
    let agents = ran
        .store
        .lineage(&ran.outcome.run_id)
        .await
        .expect("lineage");
    let child = agents
        .iter()
        .find(|a| a.id == reference)
        .expect("the child's node");
    assert_eq!(
        child.parent_agent_id.as_deref(),
        Some(run.agent_id.as_str())
    );
    assert_eq!((child.role.as_str(), child.depth), ("reviewer", 1));
    assert_eq!(child.status, weft_store::AgentStatus::Completed);
    assert_eq!(
        (child.usage.input_tokens, child.usage.output_tokens),
        (26, 11)
    );
    // Usage rolled up: the lead's two calls, the worker's three and the checker's one.
    assert_eq!(
        (
            ran.outcome.usage.input_tokens,
            ran.outcome.usage.output_tokens
        ),
        (101 + 21 + 5, 11 + 9 + 2)
    );
    // Each lineage node holds its own; the root's rolled-up usage is the run's.
    let root = agents
        .iter()
        .find(|a| a.id == run.agent_id)
        .expect("the root");
    assert_eq!(
        (root.usage.input_tokens, root.usage.output_tokens),
        (101, 11)
    );
    let rolled = ran
        .store
        .rolled_up_usage(&run.agent_id)
        .await
        .expect("rolled up");
    assert_eq!((rolled.input_tokens, rolled.output_tokens), (127, 22));
    // Deleting the run deletes its child's thread and checkpoints too (the child is the
    // run's alone).
    ran.store
        .delete_run(&ran.outcome.run_id)
        .await
        .expect("delete")
        .expect("the run existed");
    assert!(
        ran.store
            .thread(&reference)
            .await
            .expect("thread")
            .is_none()
    );
    for thread in [reference.clone(), format!("{reference}.sideB")] {
        assert!(
            ran.store
                .list_checkpoints(&thread)
                .await
                .expect("checkpoints")
                .is_empty()
        );
    }
}

#[tokio::test]
async fn a_subagents_events_are_nested_under_the_parents_agent_path() {
    let (_dir, ran) = run_lead(
        call("w2", "done", json!({"summary": "the plan is sound"})),
        "",
    )
    .await;
    let child: Vec<&RunEvent> = ran
        .events
        .iter()
        .filter(|e| e.agent.as_str() == "lead/reviewer")
        .collect();
    let kinds: Vec<String> = child
        .iter()
        .map(|e| e.kind.clone().into_parts().0)
        .collect();
    for kind in [
        "session_start",
        "side_turn_start",
        "turn_start",
        "tool_call_start",
        "tool_call_end",
        "turn_end",
        "side_turn_end",
        "session_end",
    ] {
        assert!(
            kinds.iter().any(|k| k == kind),
            "{kind} of the child in {kinds:?}"
        );
    }
    let tools: Vec<&str> = child
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolCallStart { tool, .. } => Some(tool.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(tools, ["note", "done"]);
    // Every child event comes between the parent's call start and end.
    let position =
        |pred: &dyn Fn(&RunEvent) -> bool| ran.events.iter().position(pred).expect("found");
    let start = position(&|e| {
        e.agent.as_str() == "lead"
            && matches!(&e.kind, EventKind::ToolCallStart { tool, .. } if tool == "reviewer")
    });
    let end = position(&|e| {
        e.agent.as_str() == "lead"
            && matches!(&e.kind, EventKind::ToolCallEnd { tool, .. } if tool == "reviewer")
    });
    for event in &child {
        let at = ran
            .events
            .iter()
            .position(|e| e.seq == event.seq)
            .expect("in the log");
        assert!(
            start < at && at < end,
            "child event {} outside the call",
            event.seq
        );
    }
    // Events of the run are numbered without gaps, the child's included.
    for (i, event) in ran.events.iter().enumerate() {
        assert_eq!(event.seq, i as u64 + 1);
    }
}

#[tokio::test]
async fn a_subagent_ending_by_session_fail_gives_the_canonical_failure() {
    let (_dir, ran) = run_lead(call("w2", "fail", json!({"reason": "cannot verify"})), "").await;
    let (result, is_error) = reviewer_result(&ran.events);
    assert!(is_error, "a failed child is an error result");
    let Value::String(text) = result else {
        panic!("a text result: {result:?}")
    };
    let reference = text
        .strip_prefix("Subagent (reference: ")
        .and_then(|rest| rest.split_once(')'))
        .map(|(reference, _)| reference.to_owned())
        .expect("a reference");
    assert_eq!(
        text,
        format!("Subagent (reference: {reference}) has reported a failure:\n\ncannot verify")
    );
    let agents = ran
        .store
        .lineage(&ran.outcome.run_id)
        .await
        .expect("lineage");
    let child = agents
        .iter()
        .find(|a| a.id == reference)
        .expect("the child");
    assert_eq!(child.status, weft_store::AgentStatus::Failed);
    // The parent goes on: its model heard of the failure and answered.
    assert_eq!(
        ran.outcome.end,
        RunEnd::Completed {
            output: "all good".into()
        }
    );
}

#[tokio::test]
async fn a_failing_subagents_attachments_are_copied_to_the_parent_and_listed_after_the_failure() {
    // The child writes its log in its own folder, and returns it.
    let (dir, ran) = run_lead(
        json!([
            call(
                "w2",
                "write_file",
                json!({"path": "out/log.txt", "content": "the child's log"})
            ),
            call(
                "w3",
                "fail",
                json!({"reason": "cannot verify", "files": ["out/log.txt"]}),
            ),
        ]),
        "",
    )
    .await;
    let (result, is_error) = reviewer_result(&ran.events);
    assert!(is_error, "a failed child is an error result");
    let Value::String(text) = result else {
        panic!("a text result: {result:?}")
    };
    let reference = text
        .strip_prefix("Subagent (reference: ")
        .and_then(|rest| rest.split_once(')'))
        .map(|(reference, _)| reference.to_owned())
        .expect("a reference");
    // The spec's failure text byte for byte, then the parent-local paths of the copies.
    assert_eq!(
        text,
        format!(
            "Subagent (reference: {reference}) has reported a failure:\n\ncannot verify\n\n\
             Attachments:\n- attachments/from-{reference}/log.txt"
        )
    );
    let copy = dir
        .path()
        .join(format!("attachments/from-{reference}/log.txt"));
    assert_eq!(
        std::fs::read_to_string(copy).expect("copied"),
        "the child's log"
    );
    // The parent's file of the same name is not the child's.
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out/log.txt")).expect("kept"),
        "the log"
    );
}

#[tokio::test]
async fn an_approval_a_subagent_waits_for_surfaces_on_the_root_run_and_resumes_once() {
    use weft_store::{Decisions as _, ToolLedger as _, Verdict};
    let (_dir, ran) = run_lead(
        call("w2", "done", json!({"summary": "the plan is sound"})),
        "requiresApproval = [\"note\"]\n",
    )
    .await;
    let RunEnd::AwaitingDecision { decisions } = &ran.outcome.end else {
        panic!(
            "the run waits for the child's decision: {:?}",
            ran.outcome.end
        )
    };
    let [decision] = decisions.as_slice() else {
        panic!("one decision: {decisions:?}")
    };
    assert_eq!(decision.tool_name, "note");
    let run_id = ran.outcome.run_id.clone();
    // The parent's call of the subagent is still pending: it ends after the resume.
    let calls = ran.store.tool_calls(&run_id).await.expect("ledger");
    let parent_call = calls
        .iter()
        .find(|c| c.tool_name == "reviewer")
        .expect("the parent's call");
    assert_eq!(parent_call.status, weft_store::ToolCallStatus::Pending);
    ran.store
        .decide(&run_id, &decision.id, &Verdict::Approve)
        .await
        .expect("approve");
    let runtime = Runtime::new(ran.store.clone()).with_sessions(Arc::new(StandardSessions));
    let resumed = runtime
        .resume(&run_id, weft_runtime::ResumeOptions::default(), false)
        .await
        .expect("resume")
        .outcome()
        .await
        .expect("outcome");
    assert_eq!(
        resumed.end,
        RunEnd::Completed {
            output: "all good".into()
        }
    );
    let events = events_of(&ran.store, &run_id).await;
    let (result, is_error) = reviewer_result(&events);
    assert!(!is_error);
    let text = result.as_str().expect("text").to_owned();
    assert!(
        text.ends_with("has returned the following result:\n\nthe plan is sound"),
        "{text}"
    );
    // The approved call ran once, in the resumed process.
    let calls = ran.store.tool_calls(&run_id).await.expect("ledger");
    let notes: Vec<_> = calls.iter().filter(|c| c.tool_name == "note").collect();
    assert_eq!(notes.len(), 1);
    assert_eq!(notes[0].status, weft_store::ToolCallStatus::Completed);
    let ran_note = events
        .iter()
        .filter(|e| {
            e.agent.as_str() == "lead/reviewer"
                && matches!(&e.kind, EventKind::ToolCallEnd { tool, .. } if tool == "note")
        })
        .count();
    assert_eq!(ran_note, 1, "the note call ended once");
}

#[tokio::test]
async fn an_optional_subagent_branch_is_offered_only_when_its_variable_says_so() {
    let done = || call("w2", "done", json!({"summary": "the plan is sound"}));
    let entry = ", optional = \"REVIEW_BRANCH\"";
    // Enabled (`true`, `1` or `yes`, in any case): the subagent runs.
    let (_dir, ran) = run_lead_with(done(), "[env]\nREVIEW_BRANCH = \" Yes\"\n", entry).await;
    let (result, is_error) = reviewer_result(&ran.events);
    assert!(!is_error, "{result}");
    assert!(
        result
            .as_str()
            .is_some_and(|t| t.ends_with("the following result:\n\nthe plan is sound"))
    );
    // Disabled (another value, or unset): not offered, and a call of it runs nothing.
    for extra in ["[env]\nREVIEW_BRANCH = \"no\"\n", ""] {
        let (_dir, ran) = run_lead_with(done(), extra, entry).await;
        let (result, is_error) = reviewer_result(&ran.events);
        assert!(is_error, "{extra:?}: {result}");
        assert!(
            !ran.events.iter().any(|e| e.agent.depth() > 0),
            "{extra:?}: no child ran"
        );
        let threads = ran.store.threads().await.expect("threads");
        assert!(
            threads.iter().all(|t| t.parent_thread_id.is_none()),
            "{extra:?}"
        );
    }
}

#[tokio::test]
async fn subagents_nest_each_in_its_parents_thread_and_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pair = |name: &str, prompt: &str| {
        format!(
            "name = \"{name}\"\ntype = \"dual_ai\"\nexposeAsTool = true\ntoolDescription = \"t\"\nmaxSessionTurns = 2\n\
             [sideA]\nprompt = \"{prompt}\"\nsessionStop = {{ name = \"done\", messageProperty = \"summary\" }}\n[sideB]\nprompt = \"b\"\n"
        )
    };
    let files = [
        ("weft.toml", "name = \"t\"\nmodel = \"scripted-turns:lead.json\"\n".to_owned()),
        (
            "tools/done.toml",
            "name = \"done\"\nparameters = { type = \"object\", properties = { summary = { type = \"string\" } } }\n".into(),
        ),
        ("agents/lead.toml", "name = \"lead\"\n[sideA]\nprompt = \"lead\"\n".into()),
        ("prompts/lead.toml", "name = \"lead\"\ntools = [\"mid\"]\n".into()),
        ("agents/mid.toml", pair("mid", "m")),
        ("agents/inner.toml", pair("inner", "i")),
        (
            "prompts/m.toml",
            "name = \"m\"\nmodel = \"scripted-turns:mid.json\"\ntools = [\"inner\", \"done\"]\n".into(),
        ),
        (
            "prompts/i.toml",
            "name = \"i\"\nmodel = \"scripted-turns:inner.json\"\ntools = [\"done\"]\n".into(),
        ),
        ("prompts/b.toml", "name = \"b\"\n".into()),
        (
            "lead.json",
            json!({"responses": [{"toolCalls": [call("l1", "mid", json!({"message": "go"}))]}, {"text": "ok"}]}).to_string(),
        ),
        (
            "mid.json",
            json!({"responses": [
                {"toolCalls": [call("m1", "inner", json!({"message": "deeper"}))]},
                {"toolCalls": [call("m2", "done", json!({"summary": "mid done"}))]}]})
            .to_string(),
        ),
        (
            "inner.json",
            json!({"responses": [{"toolCalls": [call("i1", "done", json!({"summary": "inner done"}))]}]}).to_string(),
        ),
    ];
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    let project = Project::load(dir.path()).expect("valid project");
    let store = common::sqlite_store(dir.path()).await;
    let runtime = Runtime::new(store.clone()).with_sessions(Arc::new(StandardSessions));
    let spec = common::session_spec(&project, "lead", "start");
    let outcome = runtime
        .start(spec, false)
        .await
        .expect("start")
        .outcome()
        .await
        .expect("outcome");
    assert_eq!(
        outcome.end,
        RunEnd::Completed {
            output: "ok".into()
        }
    );
    let events = events_of(&store, &outcome.run_id).await;
    let result_of = |path: &str, tool: &str| {
        events
            .iter()
            .find_map(|e| match &e.kind {
                EventKind::ToolCallEnd {
                    tool: t, result, ..
                } if t == tool && e.agent.as_str() == path => {
                    result.as_ref().and_then(Value::as_str).map(str::to_owned)
                }
                _ => None,
            })
            .unwrap_or_else(|| panic!("{path} called {tool}"))
    };
    let lineage = store.lineage(&outcome.run_id).await.expect("lineage");
    let node = |role: &str| lineage.iter().find(|a| a.role == role).expect(role).clone();
    let (root, mid, inner) = (node("lead"), node("mid"), node("inner"));
    assert_eq!(
        result_of("lead", "mid"),
        format!(
            "Subagent (reference: {}) has returned the following result:\n\nmid done",
            mid.id
        )
    );
    assert_eq!(
        result_of("lead/mid", "inner"),
        format!(
            "Subagent (reference: {}) has returned the following result:\n\ninner done",
            inner.id
        )
    );
    assert!(events.iter().any(|e| e.agent.as_str() == "lead/mid/inner"));
    assert_eq!((mid.depth, inner.depth), (1, 2));
    assert_eq!(mid.parent_agent_id.as_deref(), Some(root.id.as_str()));
    assert_eq!(inner.parent_agent_id.as_deref(), Some(mid.id.as_str()));
    let thread = |id: &str| {
        let store = store.clone();
        let id = id.to_owned();
        async move { store.thread(&id).await.expect("thread").expect("recorded") }
    };
    let run = store
        .run(&outcome.run_id)
        .await
        .expect("run")
        .expect("recorded");
    assert_eq!(thread(&mid.id).await.parent_thread_id, Some(run.thread_id));
    assert_eq!(
        thread(&inner.id).await.parent_thread_id,
        Some(mid.id.clone())
    );
}

#[tokio::test]
async fn outside_a_durable_run_a_subagent_runs_in_memory_with_nested_events() {
    use weft_runtime::event::Emitter;
    let dir = tempfile::tempdir().expect("tempdir");
    let project = write_project(
        dir.path(),
        call("w2", "done", json!({"summary": "the plan is sound"})),
        "",
        "",
    );
    let emitter = Emitter::live("in-memory");
    let mut rx = emitter.subscribe(0);
    let mut options = weft_standard::SessionOptions::new(project.dir());
    options.providers = Arc::new(weft_runtime::default_providers());
    options.events = Some(emitter);
    let outcome = weft_standard::run_session(&project, "lead", "review my plan", &options)
        .await
        .expect("session");
    drop(options);
    assert_eq!(outcome.message, "all good");
    let mut events = Vec::new();
    while let Some(e) = rx.next().await {
        events.push(e);
    }
    let (result, is_error) = reviewer_result(&events);
    assert!(!is_error);
    // Without a run there is no child thread: the call's id is the reference.
    assert_eq!(
        result,
        Value::String(
            "Subagent (reference: c1) has returned the following result:\n\nthe plan is sound"
                .into()
        )
    );
    let child: Vec<String> = events
        .iter()
        .filter(|e| e.agent.as_str() == "lead/reviewer")
        .map(|e| e.kind.clone().into_parts().0)
        .collect();
    assert!(child.iter().any(|k| k == "session_start"), "{child:?}");
    assert!(child.iter().any(|k| k == "tool_call_start"), "{child:?}");
}

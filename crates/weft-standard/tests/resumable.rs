//! Resumable subagents (agents §7.7, §7.11): `subagent_create` / `subagent_message`, child
//! instances that persist on their own threads and go on from their checkpoints with each
//! message, `maxInstances`, `receives_messages`, and the child registry the parent's model
//! sees at every step — checked on the exact requests the models receive.

mod common;

use common::{Requests, Seen, call};

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use weft_provider::Message;
use weft_runtime::event::{EventKind, RunEvent};
use weft_runtime::spec::{Program, RunSpec, SessionProgram};
use weft_runtime::{RunEnd, RunOutcome, Runtime};
use weft_standard::Project;
use weft_store::{EventLog as _, Store, Subagents as _, Threads as _};

/// A lead (`ai_human`) offered the `dual_ai` agent `writer` (`resumable` = the settings of its
/// tool entry); the writer's side A drafts, its side B approves with `done`.
fn write_project(
    dir: &Path,
    resumable: &str,
    lead: Value,
    side_a: Value,
    side_b: Value,
    side_a_keys: &str,
) -> Project {
    // The recording provider reads its scripts by absolute path.
    let script = |name: &str| format!("recording:{}", dir.join(name).display());
    let files = [
        ("weft.toml", format!("name = \"t\"\nmodel = \"{}\"\n", script("lead.json"))),
        (
            "tools/progress.toml",
            "name = \"progress\"\nparameters = { type = \"object\", properties = { status = { type = \"string\" } } }\n".into(),
        ),
        (
            "tools/done.toml",
            "name = \"done\"\nparameters = { type = \"object\", properties = { summary = { type = \"string\" }, files = { type = \"array\" } } }\n".into(),
        ),
        ("agents/lead.toml", "name = \"lead\"\n[sideA]\nprompt = \"lead\"\n".into()),
        (
            "prompts/lead.toml",
            format!("name = \"lead\"\nsystem = \"You lead.\"\ntools = [{{ name = \"writer\", {resumable} }}]\n"),
        ),
        (
            "agents/writer.toml",
            format!("name = \"writer\"\ntype = \"dual_ai\"\nexposeAsTool = true\ntoolDescription = \"Writes drafts.\"\nmaxSessionTurns = 4\n\
             [sideA]\nprompt = \"writer_a\"\n{side_a_keys}\
             [sideB]\nprompt = \"writer_b\"\nsessionStop = {{ name = \"done\", messageProperty = \"summary\", attachmentsProperty = \"files\" }}\n"
            ),
        ),
        (
            "prompts/writer_a.toml",
            format!("name = \"writer_a\"\nmodel = \"{}\"\ntools = [\"progress\", \"read_file\", \"write_file\"]\n", script("writer_a.json")),
        ),
        (
            "prompts/writer_b.toml",
            format!("name = \"writer_b\"\nmodel = \"{}\"\ntools = [\"done\"]\n", script("writer_b.json")),
        ),
        ("lead.json", json!({"responses": lead}).to_string()),
        ("writer_a.json", json!({"responses": side_a}).to_string()),
        ("writer_b.json", json!({"responses": side_b}).to_string()),
        // Files of the workspace to attach.
        ("notes/plan.txt", "the plan".into()),
        ("out/report.txt", "the report".into()),
    ];
    for (path, text) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    // A link leading out of the workspace.
    #[cfg(unix)]
    std::os::unix::fs::symlink(dir.parent().expect("a parent folder"), dir.join("up"))
        .expect("symlink");
    Project::load(dir).expect("valid project")
}

struct Ran {
    _dir: tempfile::TempDir,
    runtime: Runtime,
    store: Store,
    outcome: RunOutcome,
    events: Vec<RunEvent>,
    seen: Vec<Seen>,
}

async fn run(resumable: &str, lead: Value, side_a: Value, side_b: Value) -> Ran {
    run_with(resumable, lead, side_a, side_b, "").await
}

/// [`run`] with `side_a_keys` added to the writer's `[sideA]`.
async fn run_with(
    resumable: &str,
    lead: Value,
    side_a: Value,
    side_b: Value,
    side_a_keys: &str,
) -> Ran {
    let dir = tempfile::tempdir().expect("tempdir");
    let project = write_project(dir.path(), resumable, lead, side_a, side_b, side_a_keys);
    let store = common::sqlite_store(dir.path()).await;
    let seen: Requests = Arc::default();
    let runtime = common::runtime(&store, &seen);
    let spec = common::session_spec(&project, "lead", "write me two drafts");
    let outcome = runtime
        .start(spec, false)
        .await
        .expect("start")
        .outcome()
        .await
        .expect("outcome");
    let query = weft_store::EventQuery {
        run_id: Some(outcome.run_id.clone()),
        ..weft_store::EventQuery::default()
    };
    let events = store
        .events(&query)
        .await
        .expect("events")
        .into_iter()
        .map(RunEvent::from_record)
        .collect();
    let seen = seen.lock().expect("lock").clone();
    Ran {
        _dir: dir,
        runtime,
        store,
        outcome,
        events,
        seen,
    }
}

/// The results of the lead's calls of `tool`, in order: (result, is_error).
fn results(events: &[RunEvent], tool: &str) -> Vec<(Value, bool)> {
    events
        .iter()
        .filter(|e| e.agent.as_str() == "lead")
        .filter_map(|e| match &e.kind {
            EventKind::ToolCallEnd {
                tool: t,
                result,
                is_error,
                ..
            } if t == tool => Some((result.clone().unwrap_or(Value::Null), *is_error)),
            _ => None,
        })
        .collect()
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

fn requests<'a>(seen: &'a [Seen], script: &str) -> Vec<&'a Seen> {
    seen.iter().filter(|s| s.model.ends_with(script)).collect()
}

#[tokio::test]
async fn a_resumable_subagent_is_created_by_name_and_messaged_again_from_its_checkpoints() {
    let lead = json!([
        {"toolCalls": [call("l1", "subagent_create", json!({"name": " ", "message": "draft"}))]},
        {"toolCalls": [call("l2", "subagent_create", json!({"name": "alice", "message": "draft the intro"}))]},
        {"toolCalls": [call("l3", "subagent_create", json!({"name": "bob", "message": "draft the outro"}))]},
        {"toolCalls": [call("l4", "subagent_message", json!({"name": "alice", "message": "now the outro"}))]},
        {"text": "two drafts written"},
    ]);
    let side_a = json!([{"text": "intro draft"}, {"text": "outro draft"}]);
    let side_b = json!([
        {"toolCalls": [call("b1", "done", json!({"summary": "intro approved"}))]},
        {"toolCalls": [call("b2", "done", json!({"summary": "outro approved"}))]},
    ]);
    let ran = run(
        "resumable = { receives_messages = \"side_a\", maxInstances = 1 }",
        lead,
        side_a,
        side_b,
    )
    .await;
    assert_eq!(
        ran.outcome.end,
        RunEnd::Completed {
            output: "two drafts written".into()
        }
    );
    let thread = ran
        .store
        .threads()
        .await
        .expect("threads")
        .into_iter()
        .find(|t| t.parent_thread_id.is_none())
        .expect("the lead's thread");
    // One instance, registered under the lead's thread, its reference a random UUID.
    let children = ran.store.children(&thread.id).await.expect("registry");
    assert_eq!(children.len(), 1, "{children:?}");
    let alice = &children[0];
    assert_eq!(
        (
            alice.name.as_str(),
            alice.agent.as_str(),
            alice.status.as_str()
        ),
        ("alice", "writer", "completed")
    );
    assert_eq!((alice.resumable, alice.blocking), (Some(true), Some(true)));
    assert_eq!(alice.parent_communication.as_deref(), Some("implicit"));
    assert_eq!(alice.description, "Writes drafts.");
    assert!(
        alice
            .created_at
            .is_some_and(|us| us > 1_600_000_000_000_000)
    );
    let reference = alice.reference.clone();
    assert_eq!(
        uuid::Uuid::parse_str(&reference)
            .map(|u| u.get_version_num())
            .ok(),
        Some(4)
    );
    // Its thread is linked to the lead's, and keeps the creation arguments.
    let child = ran
        .store
        .thread(&reference)
        .await
        .expect("read")
        .expect("child thread");
    assert_eq!(child.parent_thread_id.as_deref(), Some(thread.id.as_str()));
    assert_eq!(
        child.metadata["arguments"],
        json!({"name": "alice", "message": "draft the intro"})
    );
    let record = ran
        .store
        .child(&reference)
        .await
        .expect("read")
        .expect("record");
    assert_eq!(record.arguments["message"], "draft the intro");

    let create = results(&ran.events, "subagent_create");
    assert_eq!(create.len(), 3);
    // An empty name is the model's mistake: a tool error.
    assert!(create[0].1);
    assert_eq!(
        text(&create[0].0),
        "subagent_create needs a non-empty \"name\" for the new instance"
    );
    // The creation runs the first message; the result is the spec's text.
    assert_eq!(
        create[1],
        (
            Value::String(format!(
                "Subagent (reference: {reference}) has returned the following result:\n\nintro approved"
            )),
            false
        )
    );
    // maxInstances reached: an error that explains the cap and names the instance to message.
    assert!(create[2].1);
    assert_eq!(
        text(&create[2].0),
        format!(
            "writer allows at most 1 instance(s) (maxInstances) and has 1: no new instance was created. \
             Send your message to an existing instance with subagent_message instead: alice (reference: {reference})"
        )
    );
    // The message goes on with the same instance: side A sees its own earlier session.
    let message = results(&ran.events, "subagent_message");
    assert_eq!(
        message,
        [(
            Value::String(format!(
                "Subagent (reference: {reference}) has returned the following result:\n\noutro approved"
            )),
            false
        )]
    );
    let side_a_requests = requests(&ran.seen, "writer_a.json");
    assert_eq!(side_a_requests.len(), 2);
    let texts: Vec<String> = side_a_requests[1]
        .messages
        .iter()
        .map(Message::text)
        .collect();
    assert_eq!(
        texts,
        ["draft the intro", "intro draft", "now the outro"],
        "the second message continues the child's conversation (side A's view)"
    );
    // The registry reaches the lead's model as a system message once the child exists:
    // not before the creation, and at every step after it.
    let lead_requests = requests(&ran.seen, "lead.json");
    assert_eq!(lead_requests.len(), 5);
    assert_eq!(lead_requests[0].system.as_deref(), Some("You lead."));
    assert_eq!(lead_requests[1].system.as_deref(), Some("You lead."));
    let registry = |status: &str| {
        format!(
            "You lead.\n\nSubagent instances of this thread (message one with subagent_message, by reference or name):\n\
             - alice (reference: {reference}) — agent writer, status: {status}, resumable, blocking — Writes drafts."
        )
    };
    assert_eq!(lead_requests[2].system, Some(registry("completed")));
    assert_eq!(lead_requests[4].system, Some(registry("completed")));
    // The lifecycle tools replace a tool named after the agent.
    let tools = lead_requests[0].tool_names();
    assert_eq!(tools, ["subagent_create", "subagent_message"]);
}

#[tokio::test]
async fn receives_messages_side_b_gives_the_message_to_side_b_as_side_as_words() {
    let lead = json!([
        {"toolCalls": [call("l1", "subagent_create", json!({"name": "rev", "message": "please approve v1"}))]},
        {"text": "ok"},
    ]);
    let side_b = json!([{"toolCalls": [call("b1", "done", json!({"summary": "v1 approved"}))]}]);
    let ran = run(
        "resumable = { receives_messages = \"side_b\" }",
        lead,
        json!([]),
        side_b,
    )
    .await;
    assert_eq!(
        ran.outcome.end,
        RunEnd::Completed {
            output: "ok".into()
        }
    );
    // Side A never ran: the message went to side B, as the user's words in B's view (side
    // A's, in the thread).
    assert!(requests(&ran.seen, "writer_a.json").is_empty());
    let b = requests(&ran.seen, "writer_b.json");
    assert_eq!(b.len(), 1);
    assert!(
        matches!(b[0].messages.as_slice(), [m @ Message::User(_)] if m.text() == "please approve v1"),
        "{:?}",
        b[0].messages
    );
    let create = results(&ran.events, "subagent_create");
    assert!(!create[0].1);
    assert!(text(&create[0].0).ends_with("has returned the following result:\n\nv1 approved"));
}

/// The lead's final conversation (its thread's latest checkpoint).
async fn lead_conversation(ran: &Ran) -> Vec<Message> {
    let run = weft_store::Runs::run(&ran.store, &ran.outcome.run_id)
        .await
        .expect("read")
        .expect("run");
    ran.store
        .latest_checkpoint(&run.thread_id)
        .await
        .expect("read")
        .expect("checkpoint")
        .checkpoint
        .state
        .messages_vec()
}

/// A child's result or failure queued on the lead's thread (`expected`, byte for byte) is a
/// *silent* message (§F): in the lead's conversation once, flagged `silent`, in the lead
/// model's next request, and shown by the chat view as a `data-subagent-result` part of the
/// run's assistant message, never as a user message.
async fn arrived_silently(ran: &Ran, expected: &str) {
    let conversation = lead_conversation(ran).await;
    let arrived: Vec<&Message> = conversation
        .iter()
        .filter(|m| matches!(m, Message::User(_)) && m.text() == expected)
        .collect();
    assert_eq!(arrived.len(), 1, "{conversation:#?}");
    assert!(
        weft_runtime::ledger::is_silent(arrived[0]),
        "flagged silent: {:?}",
        arrived[0].metadata()
    );
    assert!(
        requests(&ran.seen, "lead.json")
            .iter()
            .any(|r| r.messages.iter().any(|m| m.text() == expected)),
        "the lead's model read it"
    );
    let run = weft_store::Runs::run(&ran.store, &ran.outcome.run_id)
        .await
        .expect("read")
        .expect("run");
    let transcript = weft_runtime::transcript::Transcript::load(&ran.store, &run.thread_id, None)
        .await
        .expect("transcript");
    let ui = transcript.to_ui_messages(&std::collections::HashMap::new());
    assert!(
        !ui.iter()
            .any(|m| m["role"] == "user" && m["parts"][0]["text"] == expected),
        "not a user message: {ui:#?}"
    );
    let parts: Vec<&Value> = ui
        .iter()
        .filter(|m| m["role"] == "assistant")
        .flat_map(|m| m["parts"].as_array().into_iter().flatten())
        .filter(|p| p["type"] == weft_runtime::ui_messages::SUBAGENT_RESULT_PART)
        .collect();
    assert_eq!(parts.len(), 1, "{ui:#?}");
    assert_eq!(parts[0]["data"]["text"], expected);
}

#[tokio::test]
async fn a_non_blocking_subagent_returns_at_once_and_its_result_arrives_queued_once() {
    let lead = json!([
        {"toolCalls": [call("l1", "writer", json!({"message": "draft the intro"}))]},
        {"text": "ack"},
        {"text": "ack"},
    ]);
    // The child takes its time: the lead is usually idle when its result arrives (whichever
    // comes first, the result is taken exactly once).
    let side_a = json!([{"text": "intro draft", "delayMs": 50}]);
    let side_b = json!([{"toolCalls": [call("b1", "done", json!({"summary": "intro approved"}))]}]);
    let ran = run("blocking = false", lead, side_a, side_b).await;
    assert_eq!(
        ran.outcome.end,
        RunEnd::Completed {
            output: "ack".into()
        }
    );
    let run = weft_store::Runs::run(&ran.store, &ran.outcome.run_id)
        .await
        .expect("read")
        .expect("run");
    let children = ran.store.children(&run.thread_id).await.expect("registry");
    assert_eq!(children.len(), 1);
    let reference = children[0].reference.clone();
    assert_eq!(
        (
            children[0].status.as_str(),
            children[0].blocking,
            children[0].resumable
        ),
        ("completed", Some(false), Some(false))
    );
    // The call returned at once, saying so.
    assert_eq!(
        results(&ran.events, "writer"),
        [(
            Value::String(format!(
                "Subagent writer (reference: {reference}) is working in the background; its result will arrive as a message."
            )),
            false
        )]
    );
    // The result reached the lead's conversation once, with exactly the spec's text.
    let expected = format!(
        "Subagent (reference: {reference}) has returned the following result:\n\nintro approved"
    );
    arrived_silently(&ran, &expected).await;
    let conversation = lead_conversation(&ran).await;
    // The lead's model saw it, and answered after it.
    assert!(matches!(conversation.last(), Some(Message::Assistant(_))));
    // Settled: nothing left in the thread's queue.
    assert!(
        weft_store::ThreadQueue::queued(&ran.store, &run.thread_id)
            .await
            .expect("queue")
            .is_empty()
    );
}

#[tokio::test]
async fn an_explicit_subagent_queues_nothing_itself_and_escalates_with_its_tools() {
    let lead = json!([
        {"toolCalls": [call("l1", "subagent_create", json!({"name": "ex", "message": "outline it"}))]},
        {"text": "noted"},
        {"text": "noted"},
    ]);
    let side_a = json!([
        {"toolCalls": [
            call("a1", "set_status", json!({"status": "outlined"})),
            call("a2", "notify_parent", json!({"content": "the outline is ready"})),
        ]},
        {"text": "outline"},
    ]);
    let side_b = json!([{"toolCalls": [call("b1", "done", json!({"summary": "finished"}))]}]);
    let ran = run(
        "blocking = false, resumable = { receives_messages = \"side_a\", parentCommunication = \"explicit\" }",
        lead,
        side_a,
        side_b,
    )
    .await;
    assert_eq!(
        ran.outcome.end,
        RunEnd::Completed {
            output: "noted".into()
        }
    );
    // The child was offered the escalation tools (and the lead was not).
    let a = requests(&ran.seen, "writer_a.json");
    assert!(
        a[0].tool_names().contains(&"notify_parent") && a[0].tool_names().contains(&"set_status")
    );
    assert!(
        !requests(&ran.seen, "lead.json")[0]
            .tool_names()
            .contains(&"notify_parent")
    );
    let conversation = lead_conversation(&ran).await;
    let texts: Vec<String> = conversation
        .iter()
        .filter(|m| matches!(m, Message::User(_)))
        .map(Message::text)
        .collect();
    // The notification arrived once; the end of the child was not queued.
    assert_eq!(
        texts
            .iter()
            .filter(|t| *t == "the outline is ready")
            .count(),
        1,
        "{texts:?}"
    );
    assert!(
        !texts
            .iter()
            .any(|t| t.contains("has returned the following result")),
        "{texts:?}"
    );
    // The status the child set is what the registry says (its end does not replace it).
    let run = weft_store::Runs::run(&ran.store, &ran.outcome.run_id)
        .await
        .expect("read")
        .expect("run");
    let children = ran.store.children(&run.thread_id).await.expect("registry");
    assert_eq!(children[0].status, "outlined");
    assert_eq!(
        children[0].parent_communication.as_deref(),
        Some("explicit")
    );
}

#[tokio::test]
async fn a_session_status_call_of_a_subagent_sets_its_registry_status_without_ending_it() {
    let lead = json!([
        {"toolCalls": [call("l1", "subagent_create", json!({"name": "st", "message": "go"}))]},
        {"text": "ok"},
        {"text": "ok"},
    ]);
    // Side A reports its progress through its sessionStatus binding, then goes on.
    let side_a = json!([
        {"toolCalls": [call("a1", "progress", json!({"status": "drafting chapter 2"}))]},
        {"text": "chapter 2"},
    ]);
    let side_b = json!([{"toolCalls": [call("b1", "done", json!({"summary": "finished"}))]}]);
    let ran = run_with(
        "blocking = false, resumable = { receives_messages = \"side_a\", parentCommunication = \"explicit\" }",
        lead,
        side_a,
        side_b,
        "sessionStatus = { name = \"progress\", messageProperty = \"status\" }\n",
    )
    .await;
    assert_eq!(
        ran.outcome.end,
        RunEnd::Completed {
            output: "ok".into()
        }
    );
    // The status call did not end the child: side A took its next step, side B finished.
    assert_eq!(requests(&ran.seen, "writer_a.json").len(), 2);
    assert_eq!(requests(&ran.seen, "writer_b.json").len(), 1);
    let run = weft_store::Runs::run(&ran.store, &ran.outcome.run_id)
        .await
        .expect("read")
        .expect("run");
    let children = ran.store.children(&run.thread_id).await.expect("registry");
    assert_eq!(children[0].status, "drafting chapter 2");
}

#[tokio::test]
async fn a_terminated_thread_takes_no_new_work_and_its_parent_registry_says_so() {
    let lead = json!([
        {"toolCalls": [call("l1", "subagent_create", json!({"name": "alice", "message": "draft"}))]},
        {"text": "done"},
    ]);
    let side_a = json!([{"text": "a draft"}]);
    let side_b = json!([{"toolCalls": [call("b1", "done", json!({"summary": "approved"}))]}]);
    let ran = run(
        "resumable = { receives_messages = \"side_a\" }",
        lead,
        side_a,
        side_b,
    )
    .await;
    let run = weft_store::Runs::run(&ran.store, &ran.outcome.run_id)
        .await
        .expect("read")
        .expect("run");
    // ThreadState: a random UUID, its agent, its creation in µs, its children; active.
    let state = ran
        .runtime
        .thread_state(&run.thread_id)
        .await
        .expect("state");
    assert_eq!(
        uuid::Uuid::parse_str(&state.thread_id)
            .map(|u| u.get_version_num())
            .ok(),
        Some(4)
    );
    assert_eq!(state.agent_id.as_deref(), Some("lead"));
    assert!(
        state.created_at > 1_600_000_000_000_000,
        "{}",
        state.created_at
    );
    assert_eq!(state.terminated, None);
    assert_eq!(state.children.len(), 1);
    let child = state.children[0].reference.clone();
    let child_state = ran.runtime.thread_state(&child).await.expect("child state");
    assert_eq!(child_state.agent_id.as_deref(), Some("writer"));
    // Terminating the child: its timestamp is set, its parent's registry says so.
    let before = chrono::Utc::now().timestamp_micros();
    let ended = ran.runtime.terminate(&child).await.expect("terminate");
    assert!(ended.terminated.is_some_and(|t| t >= before));
    let parent = ran
        .runtime
        .thread_state(&run.thread_id)
        .await
        .expect("state");
    assert_eq!(parent.children[0].status, "terminated");
    // And it takes no new work.
    assert!(matches!(
        ran.runtime.queue_message(&child, "more").await,
        Err(weft_runtime::RunError::Terminated(t)) if t == child
    ));
    let spec = RunSpec::new(
        "more",
        Program::Session(SessionProgram {
            project: None,
            workspace: ran._dir.path().to_path_buf(),
            agent: "writer".into(),
            model_override: None,
            project_dir: None,
            sandbox: None,
            base_urls: Default::default(),
            profile: None,
        }),
    );
    assert!(matches!(
        ran.runtime.start_on(Some(&child), spec, false).await,
        Err(weft_runtime::RunError::Terminated(_))
    ));
    // Terminating again changes nothing.
    let again = ran.runtime.terminate(&child).await.expect("terminate");
    assert_eq!(again.terminated, ended.terminated);
}

#[tokio::test]
async fn terminating_a_thread_aborts_its_run_in_flight() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The lead's model takes a minute to answer: only the termination ends the run soon.
    let lead = json!([{"text": "late", "delayMs": 60_000}]);
    let project = write_project(
        dir.path(),
        "resumable = { receives_messages = \"side_a\" }",
        lead,
        json!([]),
        json!([]),
        "",
    );
    let store = common::sqlite_store(dir.path()).await;
    let runtime = common::runtime(&store, &Requests::default());
    let spec = common::session_spec(&project, "lead", "go");
    let handle = runtime.start(spec, false).await.expect("start");
    let run = weft_store::Runs::run(&store, handle.id())
        .await
        .expect("read")
        .expect("run");
    let state = runtime.terminate(&run.thread_id).await.expect("terminate");
    assert!(state.terminated.is_some());
    let outcome = handle.outcome().await.expect("outcome");
    assert!(
        matches!(outcome.end, RunEnd::Interrupted),
        "{:?}",
        outcome.end
    );
    // A resume is refused.
    assert!(matches!(
        runtime
            .resume(
                &outcome.run_id,
                weft_runtime::ResumeOptions::default(),
                false
            )
            .await,
        Err(weft_runtime::RunError::Terminated(_))
    ));
}

#[tokio::test]
async fn terminating_a_background_child_stops_it_inside_its_parents_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lead = json!([
        {"toolCalls": [call("l1", "writer", json!({"message": "draft"}))]},
        {"text": "waiting"},
    ]);
    // The child's model takes a minute to answer: only its termination ends the run soon.
    let side_a = json!([{"text": "late", "delayMs": 60_000}]);
    let project = write_project(dir.path(), "blocking = false", lead, side_a, json!([]), "");
    let store = common::sqlite_store(dir.path()).await;
    let runtime = common::runtime(&store, &Requests::default());
    let spec = common::session_spec(&project, "lead", "go");
    let handle = runtime.start(spec, false).await.expect("start");
    let thread = weft_store::Runs::run(&store, handle.id())
        .await
        .expect("read")
        .expect("run")
        .thread_id;
    // The child is registered before it starts: wait for it.
    let mut children = Vec::new();
    for _ in 0..2_000 {
        children = store.children(&thread).await.expect("registry");
        if !children.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let child = children.first().expect("a child").reference.clone();
    runtime.terminate(&child).await.expect("terminate");
    // The parent's run goes on and ends; the child stopped in flight and reported nothing
    // (a report would start a third turn of the lead, which its script does not have).
    let outcome = handle.outcome().await.expect("outcome");
    assert_eq!(
        outcome.end,
        RunEnd::Completed {
            output: "waiting".into()
        }
    );
    let children = store.children(&thread).await.expect("registry");
    assert_eq!(children[0].status, "terminated");
    let node = weft_store::Lineage::lineage(&store, &outcome.run_id)
        .await
        .expect("lineage")
        .into_iter()
        .find(|a| a.id == child)
        .expect("the child's node");
    assert_eq!(node.status, weft_store::AgentStatus::Failed);
}

#[tokio::test]
async fn a_background_subagents_failure_arrives_queued_with_the_spec_text() {
    let lead = json!([
        {"toolCalls": [call("l1", "writer", json!({"message": "try it"}))]},
        {"text": "noted"},
        {"text": "noted"},
    ]);
    // Side A gives up through its sessionFail binding.
    let side_a = json!([{"toolCalls": [call("a1", "progress", json!({"status": "no luck"}))]}]);
    let ran = run_with(
        "blocking = false",
        lead,
        side_a,
        json!([]),
        "sessionFail = { name = \"progress\", messageProperty = \"status\" }\n",
    )
    .await;
    assert_eq!(
        ran.outcome.end,
        RunEnd::Completed {
            output: "noted".into()
        }
    );
    let run = weft_store::Runs::run(&ran.store, &ran.outcome.run_id)
        .await
        .expect("read")
        .expect("run");
    let children = ran.store.children(&run.thread_id).await.expect("registry");
    assert_eq!(children[0].status, "failed");
    let expected = format!(
        "Subagent (reference: {}) has reported a failure:\n\nno luck",
        children[0].reference
    );
    arrived_silently(&ran, &expected).await;
}

/// The reference a subagent's result or failure text names.
fn reference_in(text: &str) -> String {
    text.split_once("(reference: ")
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(reference, _)| reference.to_owned())
        .expect("a reference")
}

/// The results of the writer's calls of `tool`, in order: (result, is_error).
fn child_results(events: &[RunEvent], tool: &str) -> Vec<(Value, bool)> {
    events
        .iter()
        .filter(|e| e.agent.as_str().ends_with("/writer"))
        .filter_map(|e| match &e.kind {
            EventKind::ToolCallEnd {
                tool: t,
                result,
                is_error,
                ..
            } if t == tool => Some((result.clone().unwrap_or(Value::Null), *is_error)),
            _ => None,
        })
        .collect()
}

/// The writer's side A writes `out/report.txt` in its own folder, then answers `text`.
fn writing_report(text: &str) -> Value {
    json!([
        {"toolCalls": [call("a0", "write_file", json!({"path": "out/report.txt", "content": "the child's report"}))]},
        {"text": text},
    ])
}

/// The folder of the child thread `reference` in the workspace `dir`.
fn child_folder(dir: &Path, reference: &str) -> std::path::PathBuf {
    dir.join(".weft/threads").join(reference)
}

/// Every file under `attachments/` of the workspace, relative to it, sorted.
fn attached_files(dir: &Path) -> Vec<String> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, root, out);
            } else if let Ok(relative) = path.strip_prefix(root) {
                out.push(relative.display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(&dir.join("attachments"), dir, &mut out);
    out.sort();
    out
}

#[tokio::test]
async fn attachments_are_copied_to_a_subagent_and_back_with_destination_local_paths() {
    let lead = json!([
        {"toolCalls": [call("l1", "writer", json!({"message": "polish", "files": ["../secret.txt"]}))]},
        {"toolCalls": [call("l2", "writer", json!({"message": "polish", "files": ["up/secret.txt"]}))]},
        {"toolCalls": [call("l3", "writer", json!({"message": "polish", "files": ["notes/plan.txt", "missing.txt"]}))]},
        {"toolCalls": [call("l4", "writer", json!({"message": "polish the plan", "files": ["notes/plan.txt"]}))]},
        {"text": "polished"},
    ]);
    // The child reads the parent's file by its parent path (not in its filesystem), then
    // its copy, and writes its own report.
    let side_a = json!([
        {"toolCalls": [
            call("a1", "read_file", json!({"path": "notes/plan.txt"})),
            call("a2", "read_file", json!({"path": "attachments/plan.txt"})),
            call("a3", "write_file", json!({"path": "out/report.txt", "content": "the child's report"})),
        ]},
        {"text": "a polished plan"},
    ]);
    let side_b = json!([
        {"toolCalls": [call("b1", "done", json!({"summary": "approved", "files": ["out/report.txt"]}))]},
    ]);
    let ran = run("initAttachmentsProperty = \"files\"", lead, side_a, side_b).await;
    assert_eq!(
        ran.outcome.end,
        RunEnd::Completed {
            output: "polished".into()
        }
    );
    let calls = results(&ran.events, "writer");
    assert_eq!(calls.len(), 4);
    // A path leaving the workspace, a link leading out of it, a missing file: tool errors
    // the model sees, and no child ran for them.
    for ((result, is_error), path) in
        calls[..3]
            .iter()
            .zip(["../secret.txt", "up/secret.txt", "missing.txt"])
    {
        assert!(is_error, "{result}");
        assert!(
            text(result).contains(&format!("the attachment {path:?} cannot be copied")),
            "{result}"
        );
    }
    assert_eq!(requests(&ran.seen, "writer_a.json").len(), 2);
    let (result, is_error) = &calls[3];
    assert!(!is_error, "{result}");
    let reference = reference_in(text(result));
    // The parent gets the spec's text byte for byte, then its own paths of the copies.
    assert_eq!(
        text(result),
        format!(
            "Subagent (reference: {reference}) has returned the following result:\n\napproved\n\n\
             Attachments:\n- attachments/from-{reference}/report.txt"
        )
    );
    // The child's first message lists its own paths of the copies.
    let a = requests(&ran.seen, "writer_a.json");
    assert!(
        matches!(a[0].messages.as_slice(), [m @ Message::User(_)]
            if m.text() == "polish the plan\n\nAttachments:\n- attachments/plan.txt"),
        "{:?}",
        a[0].messages
    );
    // The child has a filesystem of its own (agents §7.1): the parent's file is not in it,
    // its copy is.
    let reads = child_results(&ran.events, "read_file");
    assert!(reads[0].1, "{:?}", reads[0]);
    assert_eq!(reads[1], (json!("the plan"), false));
    // Only the accepted call copied anything: the file to the child's folder, the child's
    // report back to the parent's.
    let dir = ran._dir.path();
    assert_eq!(
        attached_files(dir),
        [format!("attachments/from-{reference}/report.txt")]
    );
    let child = child_folder(dir, &reference);
    assert_eq!(attached_files(&child), ["attachments/plan.txt"]);
    let read = |p: std::path::PathBuf| std::fs::read_to_string(p).expect("copied");
    assert_eq!(read(child.join("attachments/plan.txt")), "the plan");
    assert_eq!(read(child.join("out/report.txt")), "the child's report");
    assert_eq!(
        read(dir.join(format!("attachments/from-{reference}/report.txt"))),
        "the child's report"
    );
    // The parent's own file is untouched.
    assert_eq!(read(dir.join("out/report.txt")), "the report");
}

#[tokio::test]
async fn a_resumable_subagent_gets_attachments_on_creation_and_with_each_message() {
    let lead = json!([
        {"toolCalls": [call("l1", "subagent_create", json!({"name": "eve", "message": "draft", "files": ["../x.txt"]}))]},
        {"toolCalls": [call("l2", "subagent_create", json!({"name": "alice", "message": "draft", "files": "notes/plan.txt"}))]},
        {"toolCalls": [call("l3", "subagent_message", json!({"name": "alice", "message": "again", "attachments": ["up/x.txt"]}))]},
        {"toolCalls": [call("l4", "subagent_message", json!({"name": "alice", "message": "again", "attachments": ["out/report.txt"]}))]},
        {"text": "done"},
    ]);
    let side_a = json!([{"text": "d1"}, {"text": "d2"}]);
    let side_b = json!([
        {"toolCalls": [call("b1", "done", json!({"summary": "ok1"}))]},
        {"toolCalls": [call("b2", "done", json!({"summary": "ok2"}))]},
    ]);
    let ran = run(
        "resumable = { receives_messages = \"side_a\" }, initAttachmentsProperty = \"files\"",
        lead,
        side_a,
        side_b,
    )
    .await;
    assert_eq!(
        ran.outcome.end,
        RunEnd::Completed {
            output: "done".into()
        }
    );
    let create = results(&ran.events, "subagent_create");
    assert!(
        create[0].1,
        "a refused path is a tool error: {:?}",
        create[0]
    );
    assert!(!create[1].1, "{:?}", create[1]);
    let reference = reference_in(text(&create[1].0));
    // The refused creation made no instance.
    let thread = weft_store::Runs::run(&ran.store, &ran.outcome.run_id)
        .await
        .expect("read")
        .expect("run")
        .thread_id;
    let children = ran.store.children(&thread).await.expect("children");
    assert_eq!(
        children.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        ["alice"]
    );
    let message = results(&ran.events, "subagent_message");
    assert!(message[0].1, "{:?}", message[0]);
    assert!(!message[1].1, "{:?}", message[1]);
    // Side A's requests: the first message and the second list the instance's copies.
    let a = requests(&ran.seen, "writer_a.json");
    assert_eq!(a.len(), 2);
    let user_texts = |seen: &Seen| -> Vec<String> {
        seen.messages
            .iter()
            .filter(|m| matches!(m, Message::User(_)))
            .map(Message::text)
            .collect()
    };
    assert_eq!(
        user_texts(a[0]),
        ["draft\n\nAttachments:\n- attachments/plan.txt"]
    );
    assert_eq!(
        user_texts(a[1]).last().cloned(),
        Some("again\n\nAttachments:\n- attachments/report.txt".to_owned())
    );
    // The instance keeps its folder from message to message.
    assert_eq!(
        attached_files(&child_folder(ran._dir.path(), &reference)),
        ["attachments/plan.txt", "attachments/report.txt"]
    );
    assert!(attached_files(ran._dir.path()).is_empty());
}

#[tokio::test]
async fn a_background_subagent_gets_its_attachments_and_its_queued_result_lists_the_returned_ones()
{
    let lead = json!([
        {"toolCalls": [call("l1", "writer", json!({"message": "draft", "files": ["up/x.txt"]}))]},
        {"toolCalls": [call("l2", "writer", json!({"message": "draft", "files": ["notes/plan.txt"]}))]},
        {"text": "ack"},
        {"text": "ack"},
        {"text": "ack"},
    ]);
    let side_a = writing_report("a draft");
    let side_b = json!([
        {"toolCalls": [call("b1", "done", json!({"summary": "approved", "files": ["out/report.txt"]}))]},
    ]);
    let ran = run(
        "blocking = false, initAttachmentsProperty = \"files\"",
        lead,
        side_a,
        side_b,
    )
    .await;
    assert_eq!(
        ran.outcome.end,
        RunEnd::Completed {
            output: "ack".into()
        }
    );
    let calls = results(&ran.events, "writer");
    assert!(calls[0].1, "a link out is a tool error: {:?}", calls[0]);
    assert!(!calls[1].1, "{:?}", calls[1]);
    // Only the accepted call started (and registered) a child.
    let run = weft_store::Runs::run(&ran.store, &ran.outcome.run_id)
        .await
        .expect("read")
        .expect("run");
    let children = ran.store.children(&run.thread_id).await.expect("registry");
    assert_eq!(children.len(), 1);
    let reference = children[0].reference.clone();
    let a = requests(&ran.seen, "writer_a.json");
    assert!(
        matches!(a[0].messages.as_slice(), [m @ Message::User(_)]
            if m.text() == "draft\n\nAttachments:\n- attachments/plan.txt"),
        "{:?}",
        a[0].messages
    );
    // The queued result: the spec's text, then the lead's own paths of the returned files.
    let expected = format!(
        "Subagent (reference: {reference}) has returned the following result:\n\napproved\n\n\
         Attachments:\n- attachments/from-{reference}/report.txt"
    );
    let conversation = lead_conversation(&ran).await;
    assert_eq!(
        conversation
            .iter()
            .filter(|m| matches!(m, Message::User(_)) && m.text() == expected)
            .count(),
        1,
        "{conversation:#?}"
    );
    assert_eq!(
        std::fs::read_to_string(
            ran._dir
                .path()
                .join(format!("attachments/from-{reference}/report.txt"))
        )
        .expect("copied"),
        "the child's report"
    );
}

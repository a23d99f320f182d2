//! Queued tool calls (Standard Agents `queueTool()`, SA-026/SA-080/SA-081/SA-082) through
//! `weft serve`'s `POST /threads/{thread_id}/queue`: on an idle thread the call starts a run
//! whose first step takes it (through the tool pipeline) before the model is asked; while a
//! run works, the call joins it before its next model step; a call of an `ai_human` agent's
//! handoff tool hands the thread over (a manual handoff); bad requests are refused and a
//! call of a tool the agent lacks is a tool error the model reads.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;
#[path = "langgraph/support.rs"]
mod support;

use serde_json::{Value, json};
use support::{Served, until};

fn input(text: &str) -> Value {
    json!({"messages": [{"role": "user", "content": text}]})
}

/// A served project of agent `a` (tools `tools`, answering with `script`); `files` are
/// written into it first.
async fn serve(tools: &[&str], script: &Value, files: &[(&str, String)]) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("p");
    common::scripted_project(&project, "defaultAgent = \"a\"\n", tools, script);
    for (path, text) in files {
        std::fs::write(project.join(path), text).unwrap();
    }
    Served::serve(dir).await
}

/// Waits until the thread has `n` runs, all ended `success`.
async fn runs_succeeded(s: &Served, thread: &str, n: usize) -> Vec<Value> {
    let path = format!("/threads/{thread}/runs");
    until(|| async {
        let (_, listed) = s.get(&path).await;
        listed
            .as_array()
            .is_some_and(|l| l.len() == n && l.iter().all(|r| r["status"] == "success"))
    })
    .await;
    s.get(&path).await.1.as_array().cloned().unwrap_or_default()
}

/// The thread's conversation as (type, text, tool names called).
async fn conversation(s: &Served, thread: &str) -> Vec<(String, String, Vec<String>)> {
    let (_, state) = s.get(&format!("/threads/{thread}/state")).await;
    state["values"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let calls = m["tool_calls"]
                .as_array()
                .map(|c| {
                    c.iter()
                        .map(|c| c["name"].as_str().unwrap_or_default().to_owned())
                        .collect()
                })
                .unwrap_or_default();
            (
                m["type"].as_str().unwrap_or_default().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
                calls,
            )
        })
        .collect()
}

/// The types of a run's logged events.
async fn event_types(s: &Served, run: &str) -> Vec<String> {
    weft_store::EventLog::events(
        &s.store(),
        &weft_store::EventQuery {
            run_id: Some(run.to_owned()),
            ..Default::default()
        },
    )
    .await
    .unwrap()
    .iter()
    .map(|e| e.event_type.clone())
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_queued_on_an_idle_thread_starts_a_run_that_runs_it_before_asking_the_model() {
    let script = json!({"responses": [{"text": "Hi."}, {"text": "The file is written."}]});
    let s = serve(&["write_file"], &script, &[]).await;
    let thread = s.thread().await;
    let (status, _) = s
        .post(
            &format!("/threads/{thread}/runs/wait"),
            &json!({"assistant_id": "a", "input": input("hello")}),
        )
        .await;
    assert_eq!(status, 200);
    // The thread is idle: the queued call starts a run.
    let call = json!({"tool": "write_file", "arguments": {"path": "queued.txt", "content": "from the queue"}});
    let (status, queued) = s.post(&format!("/threads/{thread}/queue"), &call).await;
    assert_eq!(status, 202, "{queued}");
    assert_eq!(queued["started"], true, "{queued}");
    assert_eq!(queued["tool"], "write_file");
    let run = queued["run_id"].as_str().unwrap().to_owned();
    runs_succeeded(&s, &thread, 2).await;
    // The call ran (through the tool pipeline: its side effect, its events) ...
    assert_eq!(
        std::fs::read_to_string(s.project_dir().join("queued.txt")).unwrap(),
        "from the queue"
    );
    let types = event_types(&s, &run).await;
    assert!(
        types.iter().any(|t| t == "tool_call_end"),
        "the queued call is logged: {types:?}"
    );
    // ... before the model was asked: its answer follows the call and its result, and no
    // user message was added.
    let said = conversation(&s, &thread).await;
    let shape: Vec<(&str, &str, Vec<&str>)> = said
        .iter()
        .map(|(t, c, calls)| {
            (
                t.as_str(),
                c.as_str(),
                calls.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    assert_eq!(
        shape,
        vec![
            ("human", "hello", vec![]),
            ("ai", "Hi.", vec![]),
            ("ai", "", vec!["write_file"]),
            ("tool", shape[3].1, vec![]),
            ("ai", "The file is written.", vec![]),
        ]
    );
    // The queue is empty again.
    assert!(
        weft_store::ThreadQueue::queued(&s.store(), &thread)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_queued_while_a_run_works_joins_it_before_its_next_model_step() {
    let script = json!({"responses": [
        {"toolCalls": [{"id": "c1", "name": "write_file", "arguments": {"path": "first.txt", "content": "1"}}], "delayMs": 1000},
        {"text": "Both written."}
    ]});
    let s = serve(&["write_file"], &script, &[]).await;
    let thread = s.thread().await;
    let (_, first) = s
        .post(
            &format!("/threads/{thread}/runs"),
            &json!({"assistant_id": "a", "input": input("go")}),
        )
        .await;
    let run = first["run_id"].as_str().unwrap().to_owned();
    let store = s.store();
    // The run's first step has begun (its model answers after a second).
    until(|| async {
        weft_store::EventLog::events(
            &store,
            &weft_store::EventQuery {
                run_id: Some(run.clone()),
                types: vec!["turn_start".into()],
                ..Default::default()
            },
        )
        .await
        .is_ok_and(|e| !e.is_empty())
    })
    .await;
    let call = json!({"tool": "write_file", "arguments": {"path": "second.txt", "content": "2"}});
    let (status, queued) = s.post(&format!("/threads/{thread}/queue"), &call).await;
    assert_eq!(status, 202, "{queued}");
    assert_eq!(queued["started"], false, "{queued}");
    assert_eq!(
        queued["run_id"],
        run.as_str(),
        "the run in progress takes it"
    );
    let runs = runs_succeeded(&s, &thread, 1).await;
    assert_eq!(runs[0]["run_id"], run.as_str());
    assert!(s.project_dir().join("second.txt").exists());
    let calls: Vec<Vec<String>> = conversation(&s, &thread)
        .await
        .into_iter()
        .filter(|(t, _, _)| t == "ai")
        .map(|(_, c, calls)| if calls.is_empty() { vec![c] } else { calls })
        .collect();
    // The model's call, then the queued one (taken before the next model step), then the
    // model's answer.
    assert_eq!(
        calls,
        vec![
            vec!["write_file".to_owned()],
            vec!["write_file".to_owned()],
            vec!["Both written.".to_owned()]
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_queued_for_an_ai_human_agent_hands_the_thread_over() {
    let dir = tempfile::tempdir().unwrap();
    let support_script = dir.path().join("support.json");
    std::fs::write(
        &support_script,
        json!({"responses": [{"text": "Refund issued."}]}).to_string(),
    )
    .unwrap();
    let script = json!({"responses": [{"text": "Hi."}]});
    let project = dir.path().join("p");
    common::scripted_project(&project, "defaultAgent = \"a\"\n", &["support"], &script);
    std::fs::write(
        project.join("agents/support.toml"),
        "name = \"support\"\nexposeAsTool = true\ntoolDescription = \"Support.\"\n[sideA]\nprompt = \"ps\"\n",
    )
    .unwrap();
    std::fs::write(
        project.join("prompts/ps.toml"),
        format!(
            "name = \"ps\"\nmodel = \"scripted-turns:{}\"\n",
            support_script.display()
        ),
    )
    .unwrap();
    let s = Served::serve(dir).await;
    let thread = s.thread().await;
    s.post(
        &format!("/threads/{thread}/runs/wait"),
        &json!({"assistant_id": "a", "input": input("hello")}),
    )
    .await;
    let call = json!({"tool": "support", "arguments": {"message": "wants a refund"}});
    let (status, queued) = s.post(&format!("/threads/{thread}/queue"), &call).await;
    assert_eq!(status, 202, "{queued}");
    let run = queued["run_id"].as_str().unwrap().to_owned();
    runs_succeeded(&s, &thread, 2).await;
    // The queued call handed the thread to `support`, which answered on the same history.
    let handoffs = weft_store::EventLog::events(
        &s.store(),
        &weft_store::EventQuery {
            run_id: Some(run.clone()),
            types: vec!["handoff".into()],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(handoffs.len(), 1, "{:?}", event_types(&s, &run).await);
    assert_eq!(handoffs[0].payload["from"], "a");
    assert_eq!(handoffs[0].payload["to"], "support");
    let said = conversation(&s, &thread).await;
    assert_eq!(said.last().unwrap().1, "Refund issued.");
    assert_eq!(said[0].1, "hello");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_queued_call_is_refused_or_becomes_a_tool_error_the_model_reads() {
    let script = json!({"responses": [{"text": "Hi."}, {"text": "That tool does not exist."}]});
    let s = serve(&["write_file"], &script, &[]).await;
    let (status, _) = s
        .post("/threads/nope/queue", &json!({"tool": "write_file"}))
        .await;
    assert_eq!(status, 404);
    let thread = s.thread().await;
    let path = format!("/threads/{thread}/queue");
    let (status, body) = s.post(&path, &json!({"tool": ""})).await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = s
        .post(&path, &json!({"tool": "write_file", "arguments": [1]}))
        .await;
    assert_eq!(status, 400, "{body}");
    s.post(
        &format!("/threads/{thread}/runs/wait"),
        &json!({"assistant_id": "a", "input": input("hello")}),
    )
    .await;
    // A tool the agent does not have: the run goes on, the model reads the error.
    let (status, queued) = s.post(&path, &json!({"tool": "launch_rockets"})).await;
    assert_eq!(status, 202, "{queued}");
    runs_succeeded(&s, &thread, 2).await;
    let said = conversation(&s, &thread).await;
    let result = &said[3];
    assert_eq!(result.0, "tool");
    assert!(result.1.contains("launch_rockets"), "{result:?}");
    assert_eq!(said[4].1, "That tool does not exist.");
}

/// A silent message (a child's result, queued once by the runtime) left in the queue when a
/// run ends starts the next run as a silent message — read by the model, flagged for the
/// views — not as the user's input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_message_left_in_the_queue_starts_the_next_run_and_stays_silent() {
    let script = json!({"responses": [
        {"text": "First answer.", "delayMs": 1000},
        {"text": "Noted the result."}
    ]});
    let s = serve(&[], &script, &[]).await;
    let thread = s.thread().await;
    let (_, first) = s
        .post(
            &format!("/threads/{thread}/runs"),
            &json!({"assistant_id": "a", "input": input("one")}),
        )
        .await;
    let run = first["run_id"].as_str().unwrap().to_owned();
    let store = s.store();
    until(|| async {
        weft_store::EventLog::events(
            &store,
            &weft_store::EventQuery {
                run_id: Some(run.clone()),
                types: vec!["turn_start".into()],
                ..Default::default()
            },
        )
        .await
        .is_ok_and(|e| !e.is_empty())
    })
    .await;
    // During the run's last model call: too late for it, so the next run takes it.
    let text = "Subagent (reference: r1) has returned the following result:\n\nok";
    assert!(
        weft_store::ThreadQueue::queue_message_once(&store, &thread, "q-child-r1", text)
            .await
            .unwrap()
    );
    let runs = runs_succeeded(&s, &thread, 2).await;
    let second = runs
        .iter()
        .find(|r| r["run_id"] != run.as_str())
        .unwrap()
        .clone();
    let second_id = second["run_id"].as_str().unwrap();
    let record = weft_store::Runs::run(&store, second_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        record.spec["input"], "",
        "the silent message is not a user's input"
    );
    let latest = store.latest_checkpoint(&thread).await.unwrap().unwrap();
    let messages: Vec<_> = latest.checkpoint.state.messages().collect();
    let taken = messages
        .iter()
        .find(|m| m.text() == text)
        .expect("the run took the silent message");
    assert!(weft_runtime::ledger::is_silent(taken));
    assert_eq!(messages.last().unwrap().text(), "Noted the result.");
}

//! The Vercel AI SDK chat contract of `weft serve`, over real HTTP: a message streams its
//! answer as UI message chunks, the history is stored (and a diverging one refused), a
//! stream is rejoined from the durable log, stop keeps the partial answer, and approvals
//! are bound to the run's pending decisions (forged, replayed and stale answers refused).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use serde_json::{Value, json};
use weft_store::Runs as _;

use common::{chat, scripted_project, sse_data, start, types};

fn greeter(dir: &std::path::Path) {
    let script = json!({"responses": [
        {"toolCalls": [{"id": "c1", "name": "write_file", "arguments": {"path": "hello.txt", "content": "hi\n"}}]},
        {"text": "I wrote hello.txt."},
        {"text": "Second answer."}
    ]});
    scripted_project(dir, "", &["write_file"], &script);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_streams_its_answer_and_the_thread_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    greeter(dir.path());
    let server = start(dir.path()).await;
    let response = server
        .post("/api/chat", &chat("t1", &[], "u1", "Write hello"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["x-vercel-ai-ui-message-stream"],
        "v1",
        "the AI SDK reads the stream by this header"
    );
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let chunks = sse_data(&response.text().await.unwrap());
    let kinds = types(&chunks);
    assert_eq!(kinds.first().map(String::as_str), Some("start"));
    assert_eq!(kinds.last().map(String::as_str), Some("[DONE]"));
    assert!(
        kinds.contains(&"tool-input-available".to_owned()),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&"tool-output-available".to_owned()),
        "{kinds:?}"
    );
    let text: String = chunks
        .iter()
        .filter(|c| c["type"] == "text-delta")
        .filter_map(|c| c["delta"].as_str())
        .collect();
    assert_eq!(text, "I wrote hello.txt.");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("hello.txt")).unwrap(),
        "hi\n"
    );
    let message_id = chunks[0]["messageId"].as_str().unwrap().to_owned();

    // The stored thread as UIMessages: the user's message with its id, the answer with the
    // id its stream had.
    let stored: Vec<Value> = server.messages("t1").await;
    assert_eq!(stored.len(), 2, "{stored:#?}");
    assert_eq!(stored[0]["id"], "u1");
    assert_eq!(stored[1]["id"], message_id.as_str());
    assert_eq!(stored[1]["role"], "assistant");
    let parts = stored[1]["parts"].as_array().unwrap();
    assert!(
        parts
            .iter()
            .any(|p| p["type"] == "tool-write_file" && p["state"] == "output-available")
    );

    // Nothing runs now: the resume endpoint answers 204.
    let rejoin = server.get("/api/chat/t1/stream").send().await.unwrap();
    assert_eq!(rejoin.status(), 204);

    // The next message carries the history; a history that differs is refused.
    let forged = vec![
        json!({"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Something else"}]}),
        stored[1].clone(),
    ];
    let refused = server
        .post("/api/chat", &chat("t1", &forged, "u2", "Again"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 409);
    let next = server
        .post("/api/chat", &chat("t1", &stored, "u2", "Again"))
        .send()
        .await
        .unwrap();
    assert_eq!(next.status(), 200);
    let chunks = sse_data(&next.text().await.unwrap());
    let text: String = chunks
        .iter()
        .filter(|c| c["type"] == "text-delta")
        .filter_map(|c| c["delta"].as_str())
        .collect();
    assert_eq!(text, "Second answer.");
    server.stop().await;
}

/// A project whose agent writes `note.txt` (call `w1`, which needs approval) and then
/// answers.
fn approver(dir: &std::path::Path) {
    let script = json!({"responses": [
        {"toolCalls": [{"id": "w1", "name": "write_file", "arguments": {"path": "note.txt", "content": "one\n"}}]},
        {"text": "Written."},
        {"text": "Understood, nothing written."}
    ]});
    scripted_project(
        dir,
        "requiresApproval = [\"write_file\"]\n",
        &["write_file"],
        &script,
    );
}

async fn post_chat(server: &common::TestServer, body: &Value) -> (u16, Vec<Value>) {
    let response = server.post("/api/chat", body).send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let chunks = if status == 200 {
        sse_data(&text)
    } else {
        vec![json!({"body": text})]
    };
    (status, chunks)
}

/// The assistant message a client holds after `chunks`, with its approval answered.
fn answered(chunks: &[Value], approved: bool, input: Value) -> (String, Value) {
    let message_id = chunks[0]["messageId"].as_str().unwrap().to_owned();
    let request = chunks
        .iter()
        .find(|c| c["type"] == "tool-approval-request")
        .unwrap_or_else(|| panic!("no approval request in {chunks:#?}"));
    let message = json!({
        "id": message_id,
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {
                "type": "tool-write_file",
                "toolCallId": request["toolCallId"],
                "state": "approval-responded",
                "input": input,
                "approval": {"id": request["approvalId"], "approved": approved}
            }
        ]
    });
    (request["approvalId"].as_str().unwrap().to_owned(), message)
}

fn user(id: &str, text: &str) -> Value {
    json!({"id": id, "role": "user", "parts": [{"type": "text", "text": text}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_comes_back_in_the_replayed_message_and_is_checked_against_the_store() {
    let dir = tempfile::tempdir().unwrap();
    approver(dir.path());
    let server = start(dir.path()).await;
    let (status, chunks) = post_chat(&server, &chat("t1", &[], "u1", "Write a note")).await;
    assert_eq!(status, 200);
    let kinds = types(&chunks);
    assert!(
        kinds.contains(&"tool-approval-request".to_owned()),
        "{kinds:?}"
    );
    assert!(
        !dir.path().join("note.txt").exists(),
        "nothing runs before the approval"
    );
    let arguments = json!({"path": "note.txt", "content": "one\n"});

    // A forged approval id, and the right id with other arguments, are refused; nothing runs.
    let (_, mut forged) = answered(&chunks, true, arguments.clone());
    forged["parts"][1]["approval"]["id"] = json!("d-00000000");
    let body = json!({"id": "t1", "messages": [user("u1", "Write a note"), forged]});
    assert_eq!(post_chat(&server, &body).await.0, 409);
    let (_, tampered) = answered(
        &chunks,
        true,
        json!({"path": "../elsewhere.txt", "content": "x"}),
    );
    let body = json!({"id": "t1", "messages": [user("u1", "Write a note"), tampered]});
    assert_eq!(post_chat(&server, &body).await.0, 409);
    assert!(!dir.path().join("note.txt").exists());

    // The real answer resumes the run: the same message goes on and the call runs once.
    let (_, message) = answered(&chunks, true, arguments.clone());
    let body = json!({"id": "t1", "messages": [user("u1", "Write a note"), message.clone()]});
    let (status, resumed) = post_chat(&server, &body).await;
    assert_eq!(status, 200, "{resumed:?}");
    assert_eq!(resumed[0]["type"], "start");
    assert_eq!(
        resumed[0]["messageId"], chunks[0]["messageId"],
        "the same message goes on"
    );
    assert!(
        resumed
            .iter()
            .any(|c| c["type"] == "tool-output-available" && c["toolCallId"] == "w1"),
        "{resumed:#?}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("note.txt")).unwrap(),
        "one\n"
    );

    // Replaying the same approval is refused (single use): nothing runs again.
    std::fs::remove_file(dir.path().join("note.txt")).unwrap();
    assert_eq!(post_chat(&server, &body).await.0, 409);
    assert!(!dir.path().join("note.txt").exists());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_call_is_reported_denied_and_a_new_message_instead_of_an_answer_denies_it() {
    let dir = tempfile::tempdir().unwrap();
    approver(dir.path());
    let server = start(dir.path()).await;
    let (_, chunks) = post_chat(&server, &chat("t1", &[], "u1", "Write a note")).await;
    let (_, message) = answered(
        &chunks,
        false,
        json!({"path": "note.txt", "content": "one\n"}),
    );
    let body = json!({"id": "t1", "messages": [user("u1", "Write a note"), message]});
    let (status, resumed) = post_chat(&server, &body).await;
    assert_eq!(status, 200);
    assert!(
        resumed
            .iter()
            .any(|c| c["type"] == "tool-output-denied" && c["toolCallId"] == "w1"),
        "{resumed:#?}"
    );
    assert!(!dir.path().join("note.txt").exists());

    // Another chat: the user types instead of answering; the pending call is denied with
    // that reason and the new message runs.
    let (_, chunks) = post_chat(&server, &chat("t2", &[], "u1", "Write a note")).await;
    assert!(types(&chunks).contains(&"tool-approval-request".to_owned()));
    // The waiting call is in the stored history too (a reloaded page can answer it).
    let stored: Vec<Value> = server.messages("t2").await;
    let (approval, held) = answered(
        &chunks,
        true,
        json!({"path": "note.txt", "content": "one\n"}),
    );
    assert_eq!(stored.len(), 2, "{stored:#?}");
    assert_eq!(stored[1]["id"], held["id"]);
    let waiting = stored[1]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["state"] == "approval-requested")
        .unwrap_or_else(|| panic!("{stored:#?}"))
        .clone();
    assert_eq!(waiting["approval"]["id"], approval.as_str());
    assert_eq!(waiting["toolCallId"], "w1");
    // The client sends what it holds from the live stream (not a reloaded history).
    let live = vec![user("u1", "Write a note"), held];
    let (status, next) = post_chat(&server, &chat("t2", &live, "u2", "Never mind")).await;
    assert_eq!(status, 200, "{next:?}");
    assert!(
        !dir.path().join("note.txt").exists(),
        "the pending call never ran"
    );
    let runs = server.state.store().thread_runs("t2").await.unwrap();
    let first = runs.last().unwrap();
    let decisions = weft_store::Decisions::decisions(server.state.store(), &first.run_id)
        .await
        .unwrap();
    assert_eq!(decisions.len(), 1);
    assert_eq!(decisions[0].status, weft_store::DecisionStatus::Denied);
    assert!(
        decisions[0]
            .reason
            .as_deref()
            .unwrap_or_default()
            .contains("Never mind"),
        "{:?}",
        decisions[0].reason
    );
    server.stop().await;
}

/// A project whose agent says something, lists the folder, then thinks for `delay_ms`
/// before answering.
fn slow(dir: &std::path::Path, delay_ms: u64) {
    let script = json!({"responses": [
        {"text": "Looking.", "toolCalls": [{"id": "c1", "name": "list_dir", "arguments": {"path": "."}}]},
        {"text": "Done.", "delayMs": delay_ms}
    ]});
    scripted_project(dir, "", &["list_dir"], &script);
}

/// Waits until the thread's run has logged a `tool_call_end` (the first step is done).
async fn first_step_done(server: &common::TestServer, thread: &str) -> String {
    for _ in 0..400 {
        if let Some(run) = server
            .state
            .store()
            .thread_runs(thread)
            .await
            .unwrap()
            .first()
        {
            let events = weft_store::EventLog::events(
                server.state.store(),
                &weft_store::EventQuery {
                    run_id: Some(run.run_id.clone()),
                    types: vec!["tool_call_end".into()],
                    ..Default::default()
                },
            )
            .await
            .unwrap();
            if !events.is_empty() {
                return run.run_id.clone();
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("the run's first step never ended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_is_rejoined_from_the_log_by_another_server_process_and_stop_keeps_the_partial_answer()
 {
    let dir = tempfile::tempdir().unwrap();
    slow(dir.path(), 1_500);
    let a = start(dir.path()).await;
    // A second server over the same store: it does not drive the run, so it serves the
    // stream from the event log.
    let b = start(dir.path()).await;
    let first = tokio::spawn({
        let request = a.post("/api/chat", &chat("t1", &[], "u1", "Look around"));
        async move { request.send().await.unwrap().text().await.unwrap() }
    });
    let run = first_step_done(&a, "t1").await;
    let rejoined = b.get("/api/chat/t1/stream").send().await.unwrap();
    assert_eq!(rejoined.status(), 200);
    assert_eq!(rejoined.headers()["x-vercel-ai-ui-message-stream"], "v1");
    let replay = sse_data(&rejoined.text().await.unwrap());
    let live = sse_data(&first.await.unwrap());
    assert_eq!(replay[0]["type"], "start");
    assert_eq!(replay[0]["messageId"], format!("msg-{run}").as_str());
    assert_eq!(
        replay, live,
        "the rejoined stream is the same message, start to end"
    );
    assert_eq!(live.last().unwrap(), "[DONE]");

    // Stop: the run ends interrupted, what it said is kept.
    std::fs::write(
        dir.path().join("script.json"),
        json!({"responses": [
            {"text": "Looking.", "toolCalls": [{"id": "c1", "name": "list_dir", "arguments": {"path": "."}}]},
            {"text": "Done.", "delayMs": 60_000}
        ]})
        .to_string(),
    )
    .unwrap();
    let second = tokio::spawn({
        let request = a.post("/api/chat", &chat("t2", &[], "u1", "Look around"));
        async move { request.send().await.unwrap().text().await.unwrap() }
    });
    let run = first_step_done(&a, "t2").await;
    let stopped: Value = a
        .post("/api/chat/t2/stop", &json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(stopped["stopped"], true);
    assert_eq!(stopped["runId"], run.as_str());
    let chunks = sse_data(&second.await.unwrap());
    assert_eq!(chunks.last().unwrap(), "[DONE]", "the open stream ends");
    let record = a.state.store().run(&run).await.unwrap().unwrap();
    assert_eq!(record.status, weft_store::RunStatus::Interrupted);
    let stored: Vec<Value> = a.messages("t2").await;
    assert_eq!(stored.len(), 2, "{stored:#?}");
    assert!(stored[1]["parts"].to_string().contains("Looking."));
    assert_eq!(
        a.get("/api/chat/t2/stream").send().await.unwrap().status(),
        204
    );
    a.stop().await;
    b.stop().await;
}

//! `weft serve` with a real HTTP model: a project whose model is `openai-compatible:`,
//! pointed at a local OpenAI-compatible test server (weft-testkit's replay server) that
//! streams Chat Completions chunks. The chat streams the model's text as it arrives, and a
//! streamed tool call that needs approval goes round the AI SDK v6 approval flow; the model
//! is asked exactly once per step.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::time::Duration;

use serde_json::{Value, json};
use weft_testkit::{ReplayServer, Reply};

use common::{chat, sse_data, start, types};

fn chunk(delta: Value, finish: Option<&str>) -> String {
    let chunk = json!({"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "llama3.2",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {chunk}\n\n")
}

/// A streamed answer, `pieces` one SSE event each, 30 ms apart.
fn text(pieces: &[&str]) -> Reply {
    let mut body = String::new();
    for (i, piece) in pieces.iter().enumerate() {
        let delta = if i == 0 {
            json!({"role": "assistant", "content": piece})
        } else {
            json!({"content": piece})
        };
        body.push_str(&chunk(delta, None));
    }
    body.push_str(&chunk(json!({}), Some("stop")));
    let usage = json!({"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "llama3.2",
        "choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15}});
    body.push_str(&format!("data: {usage}\n\ndata: [DONE]\n\n"));
    let events: Vec<String> = body.split_inclusive("\n\n").map(str::to_owned).collect();
    Reply {
        chunks: events.into_iter().map(String::into_bytes).collect(),
        ..Reply::sse("", 1)
    }
    .delay(Duration::from_millis(30))
}

/// A streamed call of `write_file`, its arguments in two pieces.
fn write_call() -> Reply {
    let mut body = chunk(
        json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
            "function": {"name": "write_file", "arguments": "{\"path\": \"note.txt\", "}}]}),
        None,
    );
    body.push_str(&chunk(
        json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"content\": \"one\\n\"}"}}]}),
        None,
    ));
    body.push_str(&chunk(json!({}), Some("tool_calls")));
    body.push_str("data: [DONE]\n\n");
    Reply::sse(&body, 64)
}

fn project(dir: &std::path::Path, url: &str) {
    std::fs::create_dir_all(dir.join("agents")).unwrap();
    std::fs::create_dir_all(dir.join("prompts")).unwrap();
    std::fs::write(
        dir.join("weft.toml"),
        format!(
            "name = \"compat\"\nmodel = \"openai-compatible:llama3.2\"\nrequiresApproval = [\"write_file\"]\n\
             [providers.openai-compatible]\nbaseUrl = \"{url}\"\n"
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("agents/a.toml"),
        "name = \"a\"\n[sideA]\nprompt = \"p\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("prompts/p.toml"),
        "name = \"p\"\nsystem = \"Be brief.\"\ntools = [\"write_file\"]\n",
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_http_model_streams_through_the_chat_and_its_call_waits_for_approval() {
    let model = ReplayServer::start(vec![
        text(&["Hel", "lo ", "world"]),
        write_call(),
        text(&["Written."]),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    project(dir.path(), &format!("{}/v1", model.url()));
    let server = start(dir.path()).await;

    // The text arrives in the pieces the model streamed.
    let response = server
        .post("/api/chat", &chat("t1", &[], "u1", "Say hello"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let chunks = sse_data(&response.text().await.unwrap());
    let deltas: Vec<&str> = chunks
        .iter()
        .filter(|c| c["type"] == "text-delta")
        .filter_map(|c| c["delta"].as_str())
        .collect();
    assert_eq!(deltas.concat(), "Hello world");
    assert!(
        deltas.len() >= 2,
        "streamed in pieces, not at the end: {deltas:?}"
    );
    let received = model.received();
    assert_eq!(received.len(), 1);
    let request = received[0].json();
    assert_eq!(request["stream"], true);
    assert!(request["messages"].to_string().contains("Say hello"));
    let run = chunks[0]["messageId"]
        .as_str()
        .unwrap()
        .trim_start_matches("msg-")
        .to_owned();
    let record: Value = server
        .get(&format!("/api/runs/{run}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(record["usage"]["inputTokens"], 11);
    assert_eq!(record["usage"]["outputTokens"], 4);

    // A streamed tool call that needs approval: the answer stops there.
    let history = server.messages("t1").await;
    let response = server
        .post("/api/chat", &chat("t1", &history, "u2", "Write a note"))
        .send()
        .await
        .unwrap();
    let chunks = sse_data(&response.text().await.unwrap());
    let request = chunks
        .iter()
        .find(|c| c["type"] == "tool-approval-request")
        .unwrap_or_else(|| panic!("{:?}", types(&chunks)))
        .clone();
    let input = chunks
        .iter()
        .find(|c| c["type"] == "tool-input-available")
        .map(|c| c["input"].clone())
        .unwrap();
    assert_eq!(input, json!({"path": "note.txt", "content": "one\n"}));
    assert!(!dir.path().join("note.txt").exists());

    // Approved: the recorded response is used (the model is not asked for that step again),
    // the call runs, the model answers once more.
    let mut messages = server.messages("t1").await;
    messages.truncate(2);
    messages.push(
        json!({"id": "u2", "role": "user", "parts": [{"type": "text", "text": "Write a note"}]}),
    );
    messages.push(json!({
        "id": chunks[0]["messageId"],
        "role": "assistant",
        "parts": [{"type": "tool-write_file", "toolCallId": request["toolCallId"], "state": "approval-responded",
                   "input": input, "approval": {"id": request["approvalId"], "approved": true}}]
    }));
    let response = server
        .post("/api/chat", &json!({"id": "t1", "messages": messages}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let chunks = sse_data(&response.text().await.unwrap());
    let text: String = chunks
        .iter()
        .filter(|c| c["type"] == "text-delta")
        .filter_map(|c| c["delta"].as_str())
        .collect();
    assert_eq!(text, "Written.");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("note.txt")).unwrap(),
        "one\n"
    );
    assert_eq!(
        model.received().len(),
        3,
        "three model calls in all: no step asked twice"
    );
    server.stop().await;
}

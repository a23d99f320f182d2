//! The Vercel AI SDK chat contract of `weft serve`, over real HTTP: a message streams its
//! answer as UI message chunks, the history is stored (and a diverging one refused), a
//! stream is rejoined from the durable log, stop keeps the partial answer, and approvals
//! are bound to the run's pending decisions (forged, replayed and stale answers refused).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use serde_json::{Value, json};

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
    let stored: Vec<Value> = server
        .get("/api/chat/t1/messages")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
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

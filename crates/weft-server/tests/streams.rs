//! Stream hygiene of `weft serve` over real HTTP: keep-alive `: ping` comments while a run is
//! quiet, a stream whose run lost its driver ends with an error instead of hanging, and a
//! client that reads nothing for a while still gets every chunk, in order (the producer
//! waits on a bounded queue and reads the run's events back from the log).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::time::Duration;

use serde_json::{Value, json};
use weft_store::{RunStatus, Runs as _, ThreadRecord, Threads as _};

use common::{TestServer, chat, scripted_project, sse_data, start_with, types};

async fn stopped_run(server: &TestServer, thread: &str) -> weft_store::RunRecord {
    for _ in 0..1200 {
        if let Some(run) = server
            .state
            .store()
            .thread_runs(thread)
            .await
            .unwrap()
            .into_iter()
            .next()
            && run.status != RunStatus::Running
            && !server.state.runtime().is_live(&run.run_id)
        {
            return run;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the run of {thread} did not stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_stream_gets_ping_comments() {
    let dir = tempfile::tempdir().unwrap();
    let script = json!({"responses": [{"text": "late answer", "delayMs": 1500}]});
    scripted_project(dir.path(), "", &[], &script);
    let server = start_with(dir.path(), |config| {
        config.stream.ping = Duration::from_millis(50);
    })
    .await;
    let body = server
        .post("/api/chat", &chat("t1", &[], "u1", "hi"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let pings = body.lines().filter(|l| *l == ": ping").count();
    assert!(
        pings >= 2,
        "a 1.5 s silence with a 50 ms ping interval: {body}"
    );
    // The pings are comments: a client's data is unchanged.
    let chunks = sse_data(&body);
    assert_eq!(
        types(&chunks).last().map(String::as_str),
        Some("[DONE]"),
        "{body}"
    );
    let first_ping = body.find(": ping").unwrap();
    let answer = body.find("\"text-delta\"").unwrap();
    assert!(first_ping < answer, "pings came while the model was quiet");
    server.stop().await;
}

/// ThreadProtocol's heartbeat: a run's event stream sends `ping` events (data `{}`) while
/// the run is quiet, so a client can judge the stream dead after two missing intervals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_run_event_stream_gets_ping_events() {
    let dir = tempfile::tempdir().unwrap();
    let script = json!({"responses": [{"text": "late answer", "delayMs": 1500}]});
    scripted_project(dir.path(), "", &[], &script);
    let server = start_with(dir.path(), |config| {
        config.stream.ping = Duration::from_millis(50);
    })
    .await;
    let chat = tokio::spawn({
        let request = server.post("/api/chat", &chat("t1", &[], "u1", "hi"));
        async move { request.send().await.unwrap().text().await.unwrap() }
    });
    let run = loop {
        if let Some(run) = weft_store::Runs::thread_runs(server.state.store(), "t1")
            .await
            .unwrap()
            .first()
        {
            break run.run_id.clone();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let body = server
        .get(&format!("/api/runs/{run}/events"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    chat.await.unwrap();
    let pings = body.matches("event: ping\ndata: {}\n").count();
    assert!(
        pings >= 2,
        "a 1.5 s silence with a 50 ms ping interval: {body}"
    );
    assert!(body.contains("event: run_end"), "{body}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_of_a_run_whose_driver_died_ends_with_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let script = json!({"responses": [{"text": "hello"}]});
    scripted_project(dir.path(), "", &[], &script);
    let server = start_with(dir.path(), |config| {
        config.stream.idle_timeout = Duration::from_millis(200);
    })
    .await;
    server
        .post("/api/chat", &chat("t1", &[], "u1", "hi"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let done = stopped_run(&server, "t1").await;

    // A run recorded `running` by a process of this host that died before `run_end`.
    let store = server.state.store();
    store
        .put_thread(&ThreadRecord::new("t-dead"))
        .await
        .unwrap();
    let mut dead = done.clone();
    dead.run_id = "run-dead-0001".into();
    dead.thread_id = "t-dead".into();
    dead.status = RunStatus::Running;
    dead.ended_at = None;
    dead.output = None;
    dead.owner_pid = Some(u32::MAX - 1);
    dead.owner_host = Some(weft_runtime::ownership::host_id());
    store.put_run(&dead).await.unwrap();

    let response = tokio::time::timeout(
        Duration::from_secs(60),
        server.get("/api/runs/run-dead-0001/events").send(),
    )
    .await
    .expect("the stream answered")
    .unwrap();
    assert_eq!(response.status(), 200);
    let body = tokio::time::timeout(Duration::from_secs(60), response.text())
        .await
        .expect("the stream ended instead of hanging")
        .unwrap();
    assert!(body.contains("event: error"), "{body}");
    let error = sse_data(&body).pop().unwrap();
    assert_eq!(error["error"], "abandoned", "{body}");

    // A finished run's stream ends normally, without an error.
    let body = server
        .get(&format!("/api/runs/{}/events", done.run_id))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!body.contains("event: error"), "{body}");
    assert!(body.contains("event: run_end"), "{body}");
    // The chat stream of the dead run's thread: nothing runs there.
    assert_eq!(
        server
            .get("/api/chat/t-dead/stream")
            .send()
            .await
            .unwrap()
            .status(),
        204
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_never_gets_a_first_event_gives_up_after_the_stream_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let script = json!({"responses": [{"text": "hello"}]});
    scripted_project(dir.path(), "", &[], &script);
    let server = start_with(dir.path(), |config| {
        config.stream.idle_timeout = Duration::from_millis(100);
        config.stream.stream_timeout = Duration::from_millis(500);
    })
    .await;
    server
        .post("/api/chat", &chat("t1", &[], "u1", "hi"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let done = stopped_run(&server, "t1").await;

    // A run another host's process says it drives (no lease to expire), which never
    // logs an event: the stream checks every idle timeout that it is still driven, and
    // gives up once the stream timeout passes without a first event.
    let store = server.state.store();
    store.put_thread(&ThreadRecord::new("t-far")).await.unwrap();
    let mut far = done.clone();
    far.run_id = "run-far-0001".into();
    far.thread_id = "t-far".into();
    far.status = RunStatus::Running;
    far.ended_at = None;
    far.output = None;
    far.owner_host = Some("another-host.invalid".into());
    store.put_run(&far).await.unwrap();

    let response = server
        .get("/api/runs/run-far-0001/events")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body = tokio::time::timeout(Duration::from_secs(60), response.text())
        .await
        .expect("the stream gave up instead of hanging")
        .unwrap();
    assert!(body.contains("event: error"), "{body}");
    assert_eq!(sse_data(&body).pop().unwrap()["error"], "abandoned");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_reads_late_gets_every_chunk_in_order() {
    let dir = tempfile::tempdir().unwrap();
    // 300 steps of a tool call each, then a long answer: well over a thousand events
    // (text deltas are logged coalesced, so the steps make the count), more than the live
    // channel (1,024), the queue (64) and the socket buffers hold together.
    let mut responses: Vec<Value> = (0..300)
        .map(|i| {
            json!({"toolCalls": [{"id": format!("c{i}"), "name": "write_file",
                "arguments": {"path": "step.txt", "content": format!("{i}\n")}}]})
        })
        .collect();
    let text: String = (0..100_000).map(|i| format!("w{i:06} ")).collect();
    responses.push(json!({"text": text}));
    scripted_project(
        dir.path(),
        "",
        &["write_file"],
        &json!({"responses": responses}),
    );
    let server = start_with(dir.path(), |config| {
        config.launch.budget.max_steps = Some(1_000);
    })
    .await;

    // Two clients start reading only once the run is over: their producers waited on
    // their queues and, lagging behind the live channel, read the events back from the log.
    let chat_stream = server
        .post("/api/chat", &chat("t1", &[], "u1", "go"))
        .send()
        .await
        .unwrap();
    assert_eq!(chat_stream.status(), 200);
    let run_id = server
        .state
        .store()
        .thread_runs("t1")
        .await
        .unwrap()
        .remove(0)
        .run_id;
    let events_stream = server
        .get(&format!("/api/runs/{run_id}/events"))
        .send()
        .await
        .unwrap();
    let run = stopped_run(&server, "t1").await;
    assert_eq!(run.status, RunStatus::Completed);

    let body = chat_stream.text().await.unwrap();
    let chunks = sse_data(&body);
    let kinds = types(&chunks);
    assert_eq!(kinds.first().map(String::as_str), Some("start"));
    assert_eq!(kinds.last().map(String::as_str), Some("[DONE]"));
    let streamed: String = chunks
        .iter()
        .filter(|c| c["type"] == "text-delta")
        .filter_map(|c| c["delta"].as_str())
        .collect();
    assert_eq!(streamed.len(), text.len());
    assert!(streamed == text, "every delta, in order");

    let body = events_stream.text().await.unwrap();
    let seqs: Vec<u64> = body
        .lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .map(|s| s.parse().unwrap())
        .collect();
    assert!(seqs.len() > 1_200, "{}", seqs.len());
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "every event once, in order"
    );
    let last: Value = sse_data(&body).pop().unwrap();
    assert_eq!(last["type"], "run_end");
    server.stop().await;
}

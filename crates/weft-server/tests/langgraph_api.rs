//! The run and thread API in the LangGraph SDK's shape, driven over HTTP against a project
//! with a scripted model: threads, streamed / background / waited runs, joining a stream
//! with `Last-Event-ID`, cancelling, the busy-thread strategies (enqueue, reject,
//! interrupt), interrupts resumed with decisions keyed by id, copy from a checkpoint,
//! ThreadProtocol export and import, and the OpenAPI document.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;
#[path = "langgraph/support.rs"]
mod support;

use reqwest::Method;
use serde_json::{Value, json};
use support::{Served, until};

fn input(text: &str) -> Value {
    json!({"messages": [{"role": "user", "content": text}]})
}

fn texts(values: &Value) -> Vec<(String, String)> {
    values["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["type"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// A script that answers each turn with a line of text.
fn chatty() -> Value {
    json!({"responses": [{"text": "hello one"}, {"text": "hello two"}, {"text": "hello three"}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_run_sends_metadata_modes_with_seq_ids_and_end_and_joins_from_last_event_id() {
    let s = Served::start("", &[], &chatty()).await;
    let thread = s.thread().await;
    let (status, parts) = s
        .sse(
            s.request(Method::POST, &format!("/threads/{thread}/runs/stream"))
                .json(&json!({
                    "assistant_id": "a",
                    "input": input("hi"),
                    "stream_mode": ["updates", "messages-tuple", "values"],
                })),
        )
        .await;
    assert_eq!(status, 200);
    let events: Vec<&str> = parts.iter().map(|p| p.event.as_str()).collect();
    assert_eq!(events.first(), Some(&"metadata"), "{events:?}");
    assert_eq!(events.last(), Some(&"end"), "{events:?}");
    let run_id = parts[0].data["run_id"].as_str().unwrap().to_owned();
    assert_eq!(parts[0].data["thread_id"], thread.as_str());
    // Text deltas as message chunks with their metadata.
    let said: String = parts
        .iter()
        .filter(|p| p.event == "messages")
        .map(|p| p.data[0]["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(said, "hello one");
    let chunk = parts.iter().find(|p| p.event == "messages").unwrap();
    assert_eq!(chunk.data[0]["type"], "AIMessageChunk");
    assert_eq!(chunk.data[1]["run_id"], run_id.as_str());
    // One update per step, naming the agent.
    let update = parts.iter().find(|p| p.event == "updates").unwrap();
    assert_eq!(update.data["a"]["messages"][0]["content"], "hello one");
    // Values: the whole state, ending with the answer.
    let last_values = parts.iter().rev().find(|p| p.event == "values").unwrap();
    assert_eq!(
        texts(&last_values.data),
        [
            ("human".to_owned(), "hi".to_owned()),
            ("ai".to_owned(), "hello one".to_owned())
        ]
    );
    // Every run part carries the event's seq, in order.
    let ids: Vec<u64> = parts.iter().filter_map(|p| p.id).collect();
    assert!(ids.len() >= 3, "{parts:?}");
    assert!(ids.windows(2).all(|w| w[0] <= w[1]), "{ids:?}");

    // Joining the finished run's stream replays its events; with Last-Event-ID only later ones.
    let (status, all) = s
        .sse(s.request(
            Method::GET,
            &format!(
                "/threads/{thread}/runs/{run_id}/stream?stream_mode=updates&stream_mode=values"
            ),
        ))
        .await;
    assert_eq!(status, 200);
    assert!(all.iter().any(|p| p.event == "updates"));
    let middle = ids[ids.len() / 2];
    let (_, later) = s
        .sse(
            s.request(
                Method::GET,
                &format!(
                    "/threads/{thread}/runs/{run_id}/stream?stream_mode=values&stream_mode=updates"
                ),
            )
            .header("Last-Event-ID", middle.to_string()),
        )
        .await;
    let later_ids: Vec<u64> = later.iter().filter_map(|p| p.id).collect();
    assert!(!later_ids.is_empty(), "{later:?}");
    assert!(
        later_ids.iter().all(|id| *id > middle),
        "{later_ids:?} after {middle}"
    );
    assert!(later_ids.len() < all.iter().filter(|p| p.id.is_some()).count());
    assert_eq!(later.last().unwrap().event, "end");

    // The run and the thread as the SDK reads them.
    let (status, run) = s.get(&format!("/threads/{thread}/runs/{run_id}")).await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["status"], "success");
    assert_eq!(run["assistant_id"], "a");
    let (_, got) = s.get(&format!("/threads/{thread}")).await;
    assert_eq!(got["status"], "idle");
    assert_eq!(texts(&got["values"]).len(), 2);
    let (_, runs) = s.get(&format!("/threads/{thread}/runs")).await;
    assert_eq!(runs.as_array().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_and_join_answer_the_final_values_and_history_has_a_state_per_checkpoint() {
    let s = Served::start("", &[], &chatty()).await;
    let thread = s.thread().await;
    let (status, values) = s
        .post(
            &format!("/threads/{thread}/runs/wait"),
            &json!({"assistant_id": "a", "input": input("one")}),
        )
        .await;
    assert_eq!(status, 200, "{values}");
    assert_eq!(texts(&values).last().unwrap().1, "hello one");

    // A background run, then join it.
    let (status, run) = s
        .post(
            &format!("/threads/{thread}/runs"),
            &json!({"assistant_id": "a", "input": input("two")}),
        )
        .await;
    assert_eq!(status, 200, "{run}");
    assert!(
        matches!(run["status"].as_str(), Some("running" | "success")),
        "{run}"
    );
    let run_id = run["run_id"].as_str().unwrap();
    let (status, joined) = s
        .get(&format!("/threads/{thread}/runs/{run_id}/join"))
        .await;
    assert_eq!(status, 200, "{joined}");
    assert_eq!(
        texts(&joined),
        [
            ("human".to_owned(), "one".to_owned()),
            ("ai".to_owned(), "hello one".to_owned()),
            ("human".to_owned(), "two".to_owned()),
            ("ai".to_owned(), "hello two".to_owned()),
        ]
    );

    // State and history: checkpoint ids are Weft's; the newest state first.
    let (_, state) = s.get(&format!("/threads/{thread}/state")).await;
    let latest = state["checkpoint"]["checkpoint_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, history) = s
        .post(
            &format!("/threads/{thread}/history"),
            &json!({"limit": 100}),
        )
        .await;
    assert_eq!(status, 200, "{history}");
    let history = history.as_array().unwrap();
    assert!(history.len() >= 2, "{history:?}");
    assert_eq!(history[0]["checkpoint"]["checkpoint_id"], latest.as_str());
    assert_eq!(
        history[0]["parent_checkpoint"]["checkpoint_id"],
        history[1]["checkpoint"]["checkpoint_id"]
    );
    // `before` as the SDK may send it: an id, or a checkpoint.
    let second = history[1]["checkpoint"]["checkpoint_id"].as_str().unwrap();
    let (_, older) = s
        .post(
            &format!("/threads/{thread}/history"),
            &json!({"before": latest, "limit": 1}),
        )
        .await;
    assert_eq!(older[0]["checkpoint"]["checkpoint_id"], second);
    let (_, older) = s
        .post(
            &format!("/threads/{thread}/history"),
            &json!({"before": {"checkpoint_id": latest}, "limit": 1}),
        )
        .await;
    assert_eq!(older[0]["checkpoint"]["checkpoint_id"], second);
    let oldest = history.last().unwrap();
    assert!(texts(&oldest["values"]).len() < 4);
    let id = oldest["checkpoint"]["checkpoint_id"].as_str().unwrap();
    let (status, at) = s.get(&format!("/threads/{thread}/state/{id}")).await;
    assert_eq!(status, 200);
    assert_eq!(at["values"], oldest["values"]);
    let (status, _) = s.get(&format!("/threads/{thread}/state/nope")).await;
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_run_ends_interrupted_and_the_thread_is_idle() {
    let script = json!({"responses": [{"text": "never", "delayMs": 60000}]});
    let s = Served::start("", &[], &script).await;
    let thread = s.thread().await;
    let (_, run) = s
        .post(
            &format!("/threads/{thread}/runs"),
            &json!({"assistant_id": "a", "input": input("slow")}),
        )
        .await;
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    let (_, got) = s.get(&format!("/threads/{thread}")).await;
    assert_eq!(got["status"], "busy");
    let (status, cancelled) = s
        .post(
            &format!("/threads/{thread}/runs/{run_id}/cancel?wait=1&action=interrupt"),
            &Value::Null,
        )
        .await;
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(cancelled["status"], "interrupted");
    let (_, got) = s.get(&format!("/threads/{thread}")).await;
    assert_eq!(got["status"], "idle");
    // Cancelling it again: it is not running.
    let (status, _) = s
        .post(
            &format!("/threads/{thread}/runs/{run_id}/cancel"),
            &Value::Null,
        )
        .await;
    assert_eq!(status, 409);
    let (status, _) = s
        .post(
            &format!("/threads/{thread}/runs/{run_id}/cancel?action=rollback"),
            &Value::Null,
        )
        .await;
    assert_eq!(status, 422);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_thread_queues_rejects_or_interrupts_a_second_run() {
    // Every run of this thread waits on the model until it is cancelled (no run finishes, so
    // each one gets the first scripted answer). Queued runs are for agent `b` while `a` runs
    // (a message for the same agent joins its run: see the test after this one).
    let script = json!({"responses": [{"text": "never", "delayMs": 60000}]});
    let s = Served::start_two_agents(&script).await;
    let thread = s.thread().await;
    let runs = format!("/threads/{thread}/runs");
    let (_, first) = s
        .post(&runs, &json!({"assistant_id": "a", "input": input("one")}))
        .await;
    let first_id = first["run_id"].as_str().unwrap().to_owned();

    let (status, refused) = s
        .post(
            &runs,
            &json!({"assistant_id": "a", "input": input("two"), "multitask_strategy": "reject"}),
        )
        .await;
    assert_eq!(status, 409, "{refused}");
    assert_eq!(refused["error"]["code"], "busy");

    // Enqueue (the default): answered at once, pending, listed on the thread.
    let (status, queued) = s
        .post(&runs, &json!({"assistant_id": "b", "input": input("two")}))
        .await;
    assert_eq!(status, 200, "{queued}");
    assert_eq!(queued["status"], "pending");
    let queued_id = queued["run_id"].as_str().unwrap().to_owned();
    let (_, got) = s.get(&format!("{runs}/{queued_id}")).await;
    assert_eq!(got["status"], "pending");
    let (_, listed) = s.get(&runs).await;
    assert_eq!(listed[0]["run_id"], queued_id.as_str());
    let (_, t) = s.get(&format!("/threads/{thread}")).await;
    assert_eq!(t["status"], "busy");
    assert_eq!(t["metadata"]["weftQueue"][0]["runId"], queued_id.as_str());

    // The first run ends: the queued one starts, under the id it was given.
    let (status, _) = s
        .post(&format!("{runs}/{first_id}/cancel?wait=1"), &Value::Null)
        .await;
    assert_eq!(status, 200);
    until(|| async {
        let (_, run) = s.get(&format!("{runs}/{queued_id}")).await;
        let (_, t) = s.get(&format!("/threads/{thread}")).await;
        run["status"] == "running" && t["metadata"].get("weftQueue").is_none()
    })
    .await;
    let (_, listed) = s.get(&runs).await;
    assert_eq!(listed.as_array().unwrap().len(), 2, "{listed}");

    // Interrupt: the run in progress stops (resumable) and the new one starts.
    let (status, third) = s
        .post(
            &runs,
            &json!({"assistant_id": "a", "input": input("three"), "multitask_strategy": "interrupt"}),
        )
        .await;
    assert_eq!(status, 200, "{third}");
    assert_eq!(third["status"], "running");
    let (_, second) = s.get(&format!("{runs}/{queued_id}")).await;
    assert_eq!(second["status"], "interrupted");
    let third_id = third["run_id"].as_str().unwrap().to_owned();

    // A queued run can be cancelled before it starts.
    let (_, fourth) = s
        .post(&runs, &json!({"assistant_id": "b", "input": input("four")}))
        .await;
    let fourth_id = fourth["run_id"].as_str().unwrap().to_owned();
    let (status, cancelled) = s
        .post(&format!("{runs}/{fourth_id}/cancel"), &Value::Null)
        .await;
    assert_eq!(status, 200, "{cancelled}");
    let (status, _) = s.get(&format!("{runs}/{fourth_id}")).await;
    assert_eq!(status, 404);
    let (status, _) = s
        .post(&format!("{runs}/{third_id}/cancel?wait=1"), &Value::Null)
        .await;
    assert_eq!(status, 200);
    let (_, t) = s.get(&format!("/threads/{thread}")).await;
    assert_eq!(t["status"], "idle");
    let (status, bad) = s
        .post(
            &runs,
            &json!({"assistant_id": "a", "input": input("x"), "multitask_strategy": "rollback"}),
        )
        .await;
    assert_eq!(status, 422, "{bad}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_needing_approval_interrupts_the_thread_and_resume_with_decisions_goes_on() {
    let script = json!({"responses": [
        {"toolCalls": [{"id": "w1", "name": "write_file", "arguments": {"path": "note.txt", "content": "one\n"}}]},
        {"text": "written"}
    ]});
    let s = Served::start(
        "requiresApproval = [\"write_file\"]\n",
        &["write_file"],
        &script,
    )
    .await;
    let thread = s.thread().await;
    let (status, values) = s
        .post(
            &format!("/threads/{thread}/runs/wait"),
            &json!({"assistant_id": "a", "input": input("write it")}),
        )
        .await;
    assert_eq!(status, 200, "{values}");
    let interrupt = &values["__interrupt__"][0];
    assert_eq!(interrupt["value"]["tool"], "write_file");
    assert_eq!(interrupt["value"]["toolCallId"], "w1");
    assert_eq!(interrupt["value"]["kind"], "approval");
    let decision = interrupt["id"].as_str().unwrap().to_owned();
    assert!(!s.project_dir().join("note.txt").exists());

    let (_, t) = s.get(&format!("/threads/{thread}")).await;
    assert_eq!(t["status"], "interrupted");
    let waiting: Vec<&Value> = t["interrupts"].as_object().unwrap().values().collect();
    assert_eq!(waiting[0][0]["id"], decision.as_str());
    let (_, state) = s.get(&format!("/threads/{thread}/state")).await;
    assert_eq!(state["interrupts"][0]["id"], decision.as_str());
    assert_eq!(state["next"][0], "a");
    assert_eq!(state["tasks"][0]["interrupts"][0]["id"], decision.as_str());
    let (_, found) = s
        .post("/threads/search", &json!({"status": "interrupted"}))
        .await;
    assert_eq!(found.as_array().unwrap().len(), 1);

    // A new message while it waits, or decisions that are not pending: 409.
    let runs = format!("/threads/{thread}/runs");
    let (status, _) = s
        .post(
            &runs,
            &json!({"assistant_id": "a", "input": input("other")}),
        )
        .await;
    assert_eq!(status, 409);
    let (status, refused) = s
        .post(
            &runs,
            &json!({"assistant_id": "a", "command": {"resume": {"d-unknown": {"approve": true}}}}),
        )
        .await;
    assert_eq!(status, 409, "{refused}");

    // Resume with the decision keyed by its id, streaming the rest of the run.
    let (status, parts) = s
        .sse(
            s.request(Method::POST, &format!("{runs}/stream"))
                .json(&json!({
                    "assistant_id": "a",
                    "command": {"resume": {decision.clone(): {"approve": true}}},
                    "stream_mode": ["messages-tuple", "updates"],
                })),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(parts.last().unwrap().event, "end");
    let tool = parts
        .iter()
        .find(|p| p.event == "messages" && p.data[0]["type"] == "tool")
        .unwrap_or_else(|| panic!("no tool message: {parts:?}"));
    assert_eq!(tool.data[0]["tool_call_id"], "w1");
    let said: String = parts
        .iter()
        .filter(|p| p.event == "messages" && p.data[0]["type"] == "AIMessageChunk")
        .filter_map(|p| p.data[0]["content"].as_str())
        .collect();
    assert_eq!(said, "written");
    assert_eq!(
        std::fs::read_to_string(s.project_dir().join("note.txt")).unwrap(),
        "one\n"
    );
    let (_, t) = s.get(&format!("/threads/{thread}")).await;
    assert_eq!(t["status"], "idle");
    // The decision is taken: resuming again is refused.
    let (status, _) = s
        .post(
            &runs,
            &json!({"assistant_id": "a", "command": {"resume": {decision: true}}}),
        )
        .await;
    assert_eq!(status, 409);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threads_copy_from_a_checkpoint_export_import_and_delete() {
    let s = Served::start("", &[], &chatty()).await;
    let thread = s.thread().await;
    let (status, _) = s
        .post(
            &format!("/threads/{thread}/runs/wait"),
            &json!({"assistant_id": "a", "input": input("one")}),
        )
        .await;
    assert_eq!(status, 200);
    let (_, history) = s
        .post(
            &format!("/threads/{thread}/history"),
            &json!({"limit": 100}),
        )
        .await;
    let first = history.as_array().unwrap().last().unwrap().clone();
    let checkpoint = first["checkpoint"]["checkpoint_id"].as_str().unwrap();

    // Copy from the first checkpoint: the new thread holds that state.
    // Running from the latest checkpoint (named) is running on the thread.
    let (_, state) = s.get(&format!("/threads/{thread}/state")).await;
    let latest = state["checkpoint"]["checkpoint_id"].as_str().unwrap();
    let (status, values) = s
        .post(
            &format!("/threads/{thread}/runs/wait"),
            &json!({"assistant_id": "a", "input": input("two"), "checkpoint": {"checkpoint_id": latest}}),
        )
        .await;
    assert_eq!(status, 200, "{values}");
    let (status, copy) = s
        .post(
            &format!("/threads/{thread}/copy"),
            &json!({"checkpoint_id": checkpoint}),
        )
        .await;
    assert_eq!(status, 200, "{copy}");
    assert_ne!(copy["thread_id"], thread.as_str());
    assert_eq!(copy["values"], first["values"]);
    assert_eq!(copy["metadata"]["forkedFrom"]["thread"], thread.as_str());
    // Copy without a body (as the SDK sends it): from the latest.
    let response = s
        .request(Method::POST, &format!("/threads/{thread}/copy"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let latest_copy: Value = response.json().await.unwrap();
    assert_eq!(texts(&latest_copy["values"]).len(), 4);

    // Export as ThreadProtocol, import as a new thread with the same conversation.
    let (status, exported) = s.get(&format!("/threads/{thread}/thread-protocol")).await;
    assert_eq!(status, 200, "{exported}");
    assert!(weft_thread::validate(&exported).is_valid());
    let (status, imported) = s.post("/threads/import", &exported).await;
    assert_eq!(status, 201, "{imported}");
    let new_thread = imported["thread_id"].as_str().unwrap().to_owned();
    assert_ne!(new_thread, thread);
    let (_, original) = s.get(&format!("/threads/{thread}")).await;
    assert_eq!(texts(&imported["values"]), texts(&original["values"]));
    // The imported thread goes on like any other.
    let (status, values) = s
        .post(
            &format!("/threads/{new_thread}/runs/wait"),
            &json!({"assistant_id": "a", "input": input("again")}),
        )
        .await;
    assert_eq!(status, 200, "{values}");
    assert_eq!(texts(&values).last().unwrap().1, "hello three");
    let (status, invalid) = s
        .post("/threads/import", &json!({"thread_id": "x", "turns": 3}))
        .await;
    assert_eq!(status, 400, "{invalid}");
    assert_eq!(invalid["error"]["code"], "invalid_thread");

    // Delete: gone, with its runs.
    let response = s
        .request(Method::DELETE, &format!("/threads/{thread}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 204);
    let (status, _) = s.get(&format!("/threads/{thread}")).await;
    assert_eq!(status, 404);
    let (status, _) = s.get(&format!("/threads/{thread}/runs")).await;
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threads_and_assistants_are_searched_and_bad_requests_are_answered_not_panicked() {
    let s = Served::start("", &[], &chatty()).await;
    let (status, assistants) = s.post("/assistants/search", &json!({})).await;
    assert_eq!(status, 200);
    assert_eq!(assistants[0]["assistant_id"], "a");
    assert_eq!(assistants[0]["graph_id"], "a");
    let (status, _) = s.get("/assistants/nope").await;
    assert_eq!(status, 404);

    let (status, t) = s
        .post(
            "/threads",
            &json!({"thread_id": "chosen-1", "metadata": {"user": "u1"}}),
        )
        .await;
    assert_eq!(status, 200, "{t}");
    assert_eq!(t["status"], "idle");
    assert_eq!(t["values"]["messages"], json!([]));
    let (status, _) = s.post("/threads", &json!({"thread_id": "chosen-1"})).await;
    assert_eq!(status, 409);
    let (status, again) = s
        .post(
            "/threads",
            &json!({"thread_id": "chosen-1", "if_exists": "do_nothing"}),
        )
        .await;
    assert_eq!((status, &again["metadata"]["user"]), (200, &json!("u1")));
    s.thread().await;
    let (_, found) = s
        .post("/threads/search", &json!({"metadata": {"user": "u1"}}))
        .await;
    assert_eq!(found.as_array().unwrap().len(), 1);
    let (_, count) = s.post("/threads/count", &json!({})).await;
    assert_eq!(count, 2);

    // Bad input: answered with the API's error shape.
    let response = s
        .request(Method::POST, "/threads")
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "bad_request");
    let (status, _) = s
        .post("/threads/chosen-1/runs", &json!({"assistant_id": "a"}))
        .await;
    assert_eq!(status, 400);
    let (status, _) = s
        .post(
            "/threads/chosen-1/runs",
            &json!({"assistant_id": "nope", "input": input("x")}),
        )
        .await;
    assert_eq!(status, 404);
    let (status, _) = s
        .post(
            "/threads/missing/runs",
            &json!({"assistant_id": "a", "input": input("x")}),
        )
        .await;
    assert_eq!(status, 404);
    let (status, _) = s
        .post(
            "/threads/chosen-1/runs",
            &json!({"assistant_id": "a", "input": {"nothing": 1}}),
        )
        .await;
    assert_eq!(status, 400);
    let (status, _) = s
        .post(
            "/threads/chosen-1/runs",
            &json!({"input": input("x"), "stream_mode": "bogus"}),
        )
        .await;
    assert_eq!(status, 200, "an unknown mode only matters to a stream");
    let (status, _) = s
        .post("/threads/chosen-1/runs", &json!({"command": {"goto": "x"}}))
        .await;
    assert_eq!(status, 422);
    // What Weft does not do is refused, not ignored.
    for body in [
        json!({"input": input("x"), "interrupt_before": ["a"]}),
        json!({"input": input("x"), "webhook": "http://example.invalid/hook"}),
        json!({"input": input("x"), "after_seconds": 5}),
        json!({"input": input("x"), "checkpoint_id": "not-the-latest"}),
    ] {
        let (status, refused) = s.post("/threads/chosen-1/runs", &body).await;
        assert_eq!(status, 422, "{body}: {refused}");
        assert_eq!(refused["error"]["code"], "unsupported");
    }
    // if_not_exists: create.
    let (status, values) = s
        .post(
            "/threads/made-on-run/runs/wait",
            &json!({"input": input("x"), "if_not_exists": "create"}),
        )
        .await;
    assert_eq!(status, 200, "{values}");

    // A read-only token reads (searches, history and states are POSTs) but writes nothing.
    let reader = s.read_only_token().await;
    for (method, path, expected) in [
        (Method::POST, "/threads/search", 200),
        (Method::POST, "/threads/count", 200),
        (Method::POST, "/assistants/search", 200),
        (Method::POST, "/threads/chosen-1/history", 200),
        (Method::POST, "/threads/chosen-1/state/checkpoint", 200),
        (Method::GET, "/threads/chosen-1/runs", 200),
        (Method::POST, "/threads", 403),
        (Method::POST, "/threads/chosen-1/runs", 403),
        (Method::POST, "/threads/chosen-1/runs/wait", 403),
        (Method::POST, "/threads/chosen-1/copy", 403),
        (Method::POST, "/threads/import", 403),
        (Method::PATCH, "/threads/chosen-1", 403),
        (Method::DELETE, "/threads/chosen-1", 403),
    ] {
        let response = s
            .http
            .request(method.clone(), format!("{}{path}", s.base))
            .header("x-api-key", &reader)
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), expected, "{method} {path}");
    }

    // Without a token: 401.
    let response = s
        .http
        .get(format!("{}/threads/chosen-1", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_is_openapi_3_and_documents_every_route() {
    let s = Served::start("", &[], &chatty()).await;
    // Served without a token: it holds no data.
    let response = s
        .http
        .get(format!("{}/openapi.json", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let doc: Value = response.json().await.unwrap();
    assert!(
        doc["openapi"].as_str().unwrap().starts_with("3."),
        "{}",
        doc["openapi"]
    );
    assert!(doc["info"]["title"].is_string());
    // It parses as an OpenAPI document.
    let parsed: utoipa::openapi::OpenApi = serde_json::from_value(doc.clone()).unwrap();
    assert_eq!(
        parsed.paths.paths.len(),
        doc["paths"].as_object().unwrap().len()
    );
    let paths = doc["paths"].as_object().unwrap();
    for (method, path) in weft_server::api::ROUTES {
        let operation = &paths
            .get(*path)
            .unwrap_or_else(|| panic!("{path} is not documented"))[*method];
        assert!(operation.is_object(), "{method} {path} is not documented");
        assert!(operation["responses"].is_object(), "{method} {path}");
    }
    // Operation ids are unique (OpenAPI requires it; generators name methods after them).
    let mut ids: Vec<&str> = paths
        .values()
        .flat_map(|item| item.as_object().unwrap().values())
        .filter_map(|op| op["operationId"].as_str())
        .collect();
    let count = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), count, "duplicate operation ids");
    assert_eq!(count, weft_server::api::ROUTES.len());
    // Every documented path is served, and the schemas the SDK reads are there.
    assert_eq!(paths.len(), {
        let mut unique: Vec<&str> = weft_server::api::ROUTES.iter().map(|(_, p)| *p).collect();
        unique.sort_unstable();
        unique.dedup();
        unique.len()
    });
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    for name in [
        "Thread",
        "Run",
        "ThreadState",
        "Assistant",
        "Interrupt",
        "RunCreate",
    ] {
        assert!(schemas.contains_key(name), "no schema {name}");
    }
    // Each route answers (not 404/405) as the router has it.
    for (method, path) in weft_server::api::ROUTES {
        let concrete = path
            .replace("{thread_id}", "t-none")
            .replace("{run_id}", "r-none")
            .replace("{checkpoint_id}", "c-none")
            .replace("{assistant_id}", "a");
        let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
        let response = s.request(method.clone(), &concrete).send().await.unwrap();
        assert_ne!(response.status().as_u16(), 405, "{method} {path}");
        if response.status().as_u16() == 404 {
            let body: Value = response.json().await.unwrap_or(Value::Null);
            assert_eq!(
                body["error"]["code"], "not_found",
                "{method} {path} is not routed"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_run_is_kept_when_the_server_stops_and_starts_with_the_next_server() {
    let script = json!({"responses": [{"text": "never", "delayMs": 60000}]});
    let s = Served::start_two_agents(&script).await;
    let thread = s.thread().await;
    let runs = format!("/threads/{thread}/runs");
    let (_, first) = s
        .post(&runs, &json!({"assistant_id": "a", "input": input("one")}))
        .await;
    let (_, queued) = s
        .post(&runs, &json!({"assistant_id": "b", "input": input("two")}))
        .await;
    assert_eq!(queued["status"], "pending");
    let queued_id = queued["run_id"].as_str().unwrap().to_owned();

    // The server stops: its run stops (resumable), the queued one stays queued.
    let dir = s.shutdown().await;
    let s = Served::serve(dir).await;
    let first_id = first["run_id"].as_str().unwrap();
    let (_, stopped) = s.get(&format!("{runs}/{first_id}")).await;
    assert_eq!(stopped["status"], "interrupted");
    until(|| async {
        let (_, run) = s.get(&format!("{runs}/{queued_id}")).await;
        run["status"] == "running"
    })
    .await;
    let (status, _) = s
        .post(&format!("{runs}/{queued_id}/cancel?wait=1"), &Value::Null)
        .await;
    assert_eq!(status, 200);
}

/// The thread's queue (Standard Agents SA-064): a message for the agent of the run in
/// progress joins that run, taken before its next model step; the answer names that run,
/// and its final state holds the message before the answer to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_for_the_running_agent_joins_its_run_before_the_next_model_step() {
    // The first step lists the folder (the model answers after 1.5 s), the second answers.
    let script = json!({"responses": [
        {"toolCalls": [{"id": "c1", "name": "list_dir", "arguments": {"path": "."}}], "delayMs": 1500},
        {"text": "Both done."}
    ]});
    let s = Served::start("", &["list_dir"], &script).await;
    let thread = s.thread().await;
    let runs = format!("/threads/{thread}/runs");
    let (_, first) = s
        .post(&runs, &json!({"assistant_id": "a", "input": input("one")}))
        .await;
    let first_id = first["run_id"].as_str().unwrap().to_owned();
    let (status, joined) = s
        .post(
            &runs,
            &json!({"assistant_id": "a", "input": input("and two")}),
        )
        .await;
    assert_eq!(status, 200, "{joined}");
    assert_eq!(
        joined["run_id"],
        first_id.as_str(),
        "the message joined the run in progress"
    );
    let (status, values) = s.get(&format!("{runs}/{first_id}/join")).await;
    assert_eq!(status, 200, "{values}");
    let texts: Vec<String> = values["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect();
    let at = texts
        .iter()
        .position(|t| t == "and two")
        .unwrap_or_else(|| panic!("{texts:?}"));
    assert_eq!(texts.last().map(String::as_str), Some("Both done."));
    assert!(
        at > 0 && at < texts.len() - 1,
        "taken before the last model step: {texts:?}"
    );
    let (_, listed) = s.get(&runs).await;
    assert_eq!(
        listed.as_array().unwrap().len(),
        1,
        "no second run: {listed}"
    );
}

/// A message that joined a run during its last model call is not lost: when that run ends,
/// the next run starts with it (SA-065: a queued message on an idle thread starts a turn).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_queued_during_the_last_model_call_starts_the_next_run() {
    let script = json!({"responses": [
        {"text": "First answer.", "delayMs": 1000},
        {"text": "Second answer."}
    ]});
    let s = Served::start("", &[], &script).await;
    let thread = s.thread().await;
    let runs = format!("/threads/{thread}/runs");
    let (_, first) = s
        .post(&runs, &json!({"assistant_id": "a", "input": input("one")}))
        .await;
    // The run's only step has begun (it took the queue, empty then) and its model call is
    // under way (it answers after a second): a message now joins the run too late for it.
    let first_id = first["run_id"].as_str().unwrap().to_owned();
    let store = s.store();
    until(|| async {
        weft_store::EventLog::events(
            &store,
            &weft_store::EventQuery {
                run_id: Some(first_id.clone()),
                types: vec!["turn_start".into()],
                ..Default::default()
            },
        )
        .await
        .is_ok_and(|e| !e.is_empty())
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let (_, joined) = s
        .post(
            &runs,
            &json!({"assistant_id": "a", "input": input("and two")}),
        )
        .await;
    assert_eq!(joined["run_id"], first["run_id"]);
    until(|| async {
        let (_, listed) = s.get(&runs).await;
        listed
            .as_array()
            .is_some_and(|l| l.len() == 2 && l.iter().all(|r| r["status"] == "success"))
    })
    .await;
    let (_, state) = s.get(&format!("/threads/{thread}/state")).await;
    let texts: Vec<&str> = state["values"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(texts, ["one", "First answer.", "and two", "Second answer."]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminating_a_thread_stops_its_run_and_refuses_new_ones() {
    let script = json!({"responses": [{"text": "never", "delayMs": 60000}]});
    let s = Served::start("", &[], &script).await;
    let thread = s.thread().await;
    let (status, state) = s.get(&format!("/threads/{thread}/thread-state")).await;
    assert_eq!(status, 200, "{state}");
    assert_eq!(state["threadId"], thread.as_str());
    assert!(state["terminated"].is_null());
    assert_eq!(state["children"], json!([]));
    let (_, run) = s
        .post(
            &format!("/threads/{thread}/runs"),
            &json!({"assistant_id": "a", "input": input("slow")}),
        )
        .await;
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    let (status, ended) = s
        .post(&format!("/threads/{thread}/terminate"), &Value::Null)
        .await;
    assert_eq!(status, 200, "{ended}");
    assert!(
        ended["terminated"].as_i64().is_some_and(|t| t > 0),
        "{ended}"
    );
    // The run in progress stopped (its model would have answered in a minute).
    let (status, joined) = s
        .get(&format!("/threads/{thread}/runs/{run_id}/join"))
        .await;
    assert_eq!(status, 200, "{joined}");
    let (_, got) = s.get(&format!("/threads/{thread}/runs/{run_id}")).await;
    assert_eq!(got["status"], "interrupted", "{got}");
    // No new run.
    let (status, refused) = s
        .post(
            &format!("/threads/{thread}/runs/wait"),
            &json!({"assistant_id": "a", "input": input("again")}),
        )
        .await;
    assert_eq!(status, 409, "{refused}");
    let (status, _) = s.get("/threads/nope/thread-state").await;
    assert_eq!(status, 404);
}

//! Scheduled effects (Standard Agents `scheduleEffect`, SA-081) through `weft serve`'s
//! `POST/GET /threads/{thread_id}/effects` and `DELETE /threads/{thread_id}/effects/{id}`:
//! an effect due on an idle thread starts a run whose first step makes its call; one due
//! while a run works joins that run before its next model step; a removed effect and one of
//! a terminated thread never fire. (A `kill -9` of the server with an effect due: the CLI's
//! `tests/effects_cli.rs`.)
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;
#[path = "langgraph/support.rs"]
mod support;

use serde_json::{Value, json};
use support::{Served, until};

fn input(text: &str) -> Value {
    json!({"messages": [{"role": "user", "content": text}]})
}

async fn serve(script: &Value) -> Served {
    Served::start("defaultAgent = \"a\"\n", &["write_file"], script).await
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

/// The ids and names of the tool calls in the thread's conversation, in order.
async fn calls(s: &Served, thread: &str) -> Vec<(String, String)> {
    let (_, state) = s.get(&format!("/threads/{thread}/state")).await;
    state["values"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
        .map(|c| {
            (
                c["id"].as_str().unwrap_or_default().to_owned(),
                c["name"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn write(path: &str, delay_ms: u64) -> Value {
    json!({"name": "write_file", "arguments": {"path": path, "content": path}, "delay": delay_ms})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_effect_due_on_an_idle_thread_starts_a_run_that_makes_its_call() {
    let script = json!({"responses": [{"text": "Hi."}, {"text": "Done as scheduled."}]});
    let s = serve(&script).await;
    let thread = s.thread().await;
    let (status, _) = s
        .post(
            &format!("/threads/{thread}/runs/wait"),
            &json!({"assistant_id": "a", "input": input("hello")}),
        )
        .await;
    assert_eq!(status, 200);
    let (status, effect) = s
        .post(
            &format!("/threads/{thread}/effects"),
            &write("later.txt", 1000),
        )
        .await;
    assert_eq!(status, 201, "{effect}");
    assert_eq!(effect["name"], "write_file");
    let id = effect["id"].as_str().unwrap().to_owned();
    let (_, listed) = s.get(&format!("/threads/{thread}/effects")).await;
    assert_eq!(listed[0]["id"], id.as_str(), "{listed}");
    let (_, none) = s
        .get(&format!("/threads/{thread}/effects?name=other"))
        .await;
    assert_eq!(none, json!([]));
    // When it is due, a run starts for it: the call runs first, then the model answers.
    let runs = runs_succeeded(&s, &thread, 2).await;
    assert_eq!(
        std::fs::read_to_string(s.project_dir().join("later.txt")).unwrap(),
        "later.txt"
    );
    assert_eq!(calls(&s, &thread).await, [(id, "write_file".to_owned())]);
    let (_, state) = s.get(&format!("/threads/{thread}/state")).await;
    let last = state["values"]["messages"]
        .as_array()
        .unwrap()
        .last()
        .cloned();
    assert_eq!(last.unwrap()["content"], "Done as scheduled.");
    assert_eq!(runs.len(), 2);
    let (_, listed) = s.get(&format!("/threads/{thread}/effects")).await;
    assert_eq!(listed, json!([]), "fired once, gone from the schedule");
    // Bad requests.
    let bad = [
        json!({"name": "", "delay": 1}),
        json!({"name": "write_file", "arguments": [1]}),
        json!({"name": "write_file", "delay": 1, "at": "2030-01-01T00:00:00Z"}),
        json!({"name": "write_file", "at": "tomorrow"}),
    ];
    for body in bad {
        let (status, _) = s.post(&format!("/threads/{thread}/effects"), &body).await;
        assert_eq!(status, 400, "{body}");
    }
    let (status, _) = s.post("/threads/nope/effects", &write("x", 1)).await;
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_effect_due_while_a_run_works_joins_it_before_its_next_model_step() {
    let script = json!({"responses": [
        {"toolCalls": [{"id": "c1", "name": "write_file", "arguments": {"path": "first.txt", "content": "1"}}], "delayMs": 1500},
        {"text": "Both written."}
    ]});
    let s = serve(&script).await;
    let thread = s.thread().await;
    let (_, first) = s
        .post(
            &format!("/threads/{thread}/runs"),
            &json!({"assistant_id": "a", "input": input("go")}),
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
    // Due at once, while the run's first model call works.
    let (status, effect) = s
        .post(
            &format!("/threads/{thread}/effects"),
            &write("second.txt", 0),
        )
        .await;
    assert_eq!(status, 201, "{effect}");
    let runs = runs_succeeded(&s, &thread, 1).await;
    assert_eq!(runs[0]["run_id"], run.as_str(), "no second run");
    assert!(s.project_dir().join("second.txt").exists());
    let names: Vec<String> = calls(&s, &thread)
        .await
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(
        names,
        ["c1", effect["id"].as_str().unwrap()],
        "the model's call, then the effect's, before the model's answer"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removed_effects_and_those_of_terminated_threads_never_fire() {
    let script = json!({"responses": [{"text": "Hi."}, {"text": "Done."}]});
    let s = serve(&script).await;
    let (kept, ended) = (s.thread().await, s.thread().await);
    for thread in [&kept, &ended] {
        let (status, _) = s
            .post(
                &format!("/threads/{thread}/runs/wait"),
                &json!({"assistant_id": "a", "input": input("hello")}),
            )
            .await;
        assert_eq!(status, 200);
    }
    // Removed: never fires.
    let (_, removed) = s
        .post(
            &format!("/threads/{kept}/effects"),
            &write("removed.txt", 1000),
        )
        .await;
    let path = format!(
        "/threads/{kept}/effects/{}",
        removed["id"].as_str().unwrap()
    );
    let response = s
        .request(reqwest::Method::DELETE, &path)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 204);
    let response = s
        .request(reqwest::Method::DELETE, &path)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 404, "gone already");
    // A terminated thread's: never fires, and it takes no new one.
    let (status, _) = s
        .post(
            &format!("/threads/{ended}/effects"),
            &write("ended.txt", 1000),
        )
        .await;
    assert_eq!(status, 201);
    let (status, _) = s
        .post(&format!("/threads/{ended}/terminate"), &json!({}))
        .await;
    assert_eq!(status, 200);
    let (status, _) = s
        .post(&format!("/threads/{ended}/effects"), &write("ended.txt", 0))
        .await;
    assert_eq!(status, 409);
    // A later effect on the kept thread fires: by then the others were due too.
    let (_, marker) = s
        .post(
            &format!("/threads/{kept}/effects"),
            &write("marker.txt", 2500),
        )
        .await;
    runs_succeeded(&s, &kept, 2).await;
    assert_eq!(
        calls(&s, &kept).await,
        [(
            marker["id"].as_str().unwrap().to_owned(),
            "write_file".to_owned()
        )]
    );
    assert!(!s.project_dir().join("removed.txt").exists());
    assert!(!s.project_dir().join("ended.txt").exists());
    let (_, runs) = s.get(&format!("/threads/{ended}/runs")).await;
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs}");
    let (_, listed) = s.get(&format!("/threads/{ended}/effects")).await;
    assert_eq!(listed, json!([]));
}

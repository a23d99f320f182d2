//! Model routing (runtime spec §5.7, issue 22 item 5) through `weft run`: two local servers
//! speaking Chat Completions (`openai-compatible:big` on one, `openai:small` on the other);
//! `[runtime.routing]` picks the model of each call from the phase, the policy and the run's
//! remaining budget, logs the decision as a `routing` event, uses the safe default when
//! routing fails, falls back when the resolved model is out, and never changes a turn's model.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};
use weft_testkit::{ReplayServer, Reply};

/// Runs `weft` in `cwd` off the async runtime (the servers live on it).
async fn weft(cwd: &Path, args: &[&str]) -> Output {
    let cwd = cwd.to_path_buf();
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_weft"))
            .args(&args)
            .current_dir(&cwd)
            .env_remove("WEFT_DATABASE_URL")
            .env_remove("WEFT_OPENAI_COMPATIBLE_BASE_URL")
            .env_remove("OPENAI_BASE_URL")
            .env("OPENAI_API_KEY", "sk-test-openai")
            .env("WEFT_OPENAI_COMPATIBLE_API_KEY", "sk-test-compatible")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .output()
            .expect("weft runs")
    })
    .await
    .expect("join")
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A project whose agent `a` asks for `openai-compatible:big` (server `big`), with
/// `openai:small` on server `small`, and `routing` as its `[runtime.routing]` table.
fn project(dir: &Path, big: &str, small: &str, routing: &str) {
    for sub in ["agents", "prompts"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    std::fs::write(
        dir.join("weft.toml"),
        format!(
            "model = \"openai-compatible:big\"\n\
             [providers.openai-compatible]\nbaseUrl = \"{big}/v1\"\n\
             [providers.openai]\nbaseUrl = \"{small}/v1\"\n\
             [runtime]\n{routing}"
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
        "name = \"p\"\ntools = [\"read_file\"]\n",
    )
    .unwrap();
    std::fs::write(dir.join("notes.md"), "# notes\n").unwrap();
}

/// A streamed Chat Completions answer calling `tool` with `arguments`, using `tokens` tokens.
fn calls(model: &str, tool: &str, arguments: Value, tokens: (u64, u64)) -> Reply {
    let chunk = json!({"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": model,
        "choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [{"index": 0,
            "id": format!("call_{tool}"), "type": "function",
            "function": {"name": tool, "arguments": arguments.to_string()}}]},
            "finish_reason": null}]});
    let end = json!({"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": model,
        "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": tokens.0, "completion_tokens": tokens.1,
                  "total_tokens": tokens.0 + tokens.1}});
    Reply::sse(
        &format!("data: {chunk}\n\ndata: {end}\n\ndata: [DONE]\n\n"),
        64,
    )
}

fn complete(model: &str, summary: &str) -> Reply {
    calls(model, "complete_task", json!({"summary": summary}), (5, 5))
}

/// A server error the provider retries (at once: `retry-after-ms`).
fn down(status: u16) -> Reply {
    Reply::json(
        status,
        &json!({"error": {"message": "the server is down", "type": "server_error"}}),
    )
    .header("retry-after-ms", "1")
}

fn events(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The `routing` events' payloads.
fn routes(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["type"] == "routing")
        .map(|e| e["payload"].clone())
        .collect()
}

fn output(events: &[Value]) -> Value {
    events
        .iter()
        .rev()
        .find(|e| e["type"] == "run_end")
        .map(|e| e["payload"]["output"].clone())
        .expect("run_end")
}

/// The model named in each request a server received.
fn models(server: &ReplayServer) -> Vec<String> {
    server
        .received()
        .iter()
        .map(|r| r.json()["model"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_crossing_switches_the_model_between_turns_never_within_one() {
    // Turn 1 on `big`: a server error the provider retries (the same turn, the same model),
    // then an answer that spends 50 of the run's 100 tokens. Turn 2: 50 left, below the
    // rule's 60, so `small`.
    let big = ReplayServer::start(vec![
        down(500),
        calls("big", "read_file", json!({"path": "notes.md"}), (40, 10)),
    ])
    .await;
    let small = ReplayServer::start(vec![complete("small", "read it cheaply")]).await;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    project(
        p,
        &big.url(),
        &small.url(),
        "[runtime.routing]\ndefault = \"openai:small\"\n\
         [[runtime.routing.budget]]\nremainingTokens = 60\nmodel = \"openai:small\"\n",
    );
    let out = weft(p, &["run", "--json", "--max-total-tokens", "100", "go"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let events = events(&out);
    assert_eq!(output(&events), "read it cheaply");
    let routes = routes(&events);
    assert_eq!(routes.len(), 2, "one decision per turn: {routes:?}");
    assert_eq!(
        (
            &routes[0]["requested"],
            &routes[0]["resolved"],
            &routes[0]["reason"],
            &routes[0]["policy"]
        ),
        (
            &json!("openai-compatible:big"),
            &json!("openai-compatible:big"),
            &json!("requested"),
            &json!("quality")
        )
    );
    assert_eq!(routes[1]["resolved"], "openai:small", "{routes:?}");
    let reason = routes[1]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("budget: 50 tokens left of 100")
            && reason.contains("remainingTokens < 60"),
        "{reason}"
    );
    // The first turn's two requests (the retry included) went to `big` and carried the same
    // conversation; `small` served only the second turn.
    assert_eq!(models(&big), ["big", "big"]);
    let received = big.received();
    assert_eq!(
        received[0].json()["messages"],
        received[1].json()["messages"]
    );
    assert_eq!(models(&small), ["small"]);
    assert_eq!(
        small.received()[0].json()["messages"]
            .as_array()
            .unwrap()
            .len(),
        received[0].json()["messages"].as_array().unwrap().len() + 2,
        "the second turn carries the first turn's call and result"
    );
    // Every turn has exactly one routing decision, before its model call.
    let kinds: Vec<&str> = events
        .iter()
        .filter_map(|e| e["type"].as_str())
        .filter(|t| matches!(*t, "routing" | "turn_start" | "turn_end"))
        .collect();
    assert_eq!(
        kinds,
        [
            "turn_start",
            "routing",
            "turn_end",
            "turn_start",
            "routing",
            "turn_end"
        ],
        "{kinds:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_of_the_resolved_model_falls_back_and_says_so() {
    // `big` is down (every attempt of the provider's retries fails); its fallback answers.
    let big = ReplayServer::start(vec![down(503), down(503), down(503)]).await;
    let small = ReplayServer::start(vec![complete("small", "done on the fallback")]).await;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    project(
        p,
        &big.url(),
        &small.url(),
        "[runtime.routing]\ndefault = \"openai:small\"\n\
         [runtime.routing.fallbacks]\n\"openai-compatible:big\" = [\"openai:small\"]\n",
    );
    let out = weft(p, &["run", "--json", "go"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let events = events(&out);
    assert_eq!(output(&events), "done on the fallback");
    let routes = routes(&events);
    assert_eq!(routes.len(), 2, "{routes:?}");
    assert_eq!(routes[0]["resolved"], "openai-compatible:big");
    assert_eq!(
        (&routes[1]["requested"], &routes[1]["resolved"]),
        (&json!("openai-compatible:big"), &json!("openai:small"))
    );
    let reason = routes[1]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("outage of openai-compatible:big (PROVIDER_ERROR")
            && reason.ends_with("fallback to openai:small"),
        "{reason}"
    );
    assert_eq!(models(&big), ["big", "big", "big"]);
    assert_eq!(models(&small), ["small"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_route_uses_the_safe_default_and_says_so() {
    // The work phase routes to a model no provider knows: the default serves the call.
    let big = ReplayServer::start(vec![]).await;
    let small = ReplayServer::start(vec![complete("small", "done on the default")]).await;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    project(
        p,
        &big.url(),
        &small.url(),
        "[runtime.routing]\ndefault = \"openai:small\"\n\
         [runtime.routing.phases.work]\nmodel = \"nosuch:model\"\n",
    );
    let out = weft(p, &["run", "--json", "go"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let events = events(&out);
    assert_eq!(output(&events), "done on the default");
    let routes = routes(&events);
    assert_eq!(routes.len(), 1, "{routes:?}");
    assert_eq!(routes[0]["resolved"], "openai:small");
    let reason = routes[0]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("routing failed: nosuch:model")
            && reason.ends_with("the safe default is used"),
        "{reason}"
    );
    assert!(big.received().is_empty());
    assert_eq!(models(&small), ["small"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_routing_rules_are_a_load_error_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    for (routing, key) in [
        (
            "[runtime.routing]\npolicy = \"cheap\"\n",
            "runtime.routing.policy",
        ),
        (
            "[runtime.routing]\npolicy = \"cost\"\n",
            "runtime.routing.default",
        ),
        (
            "[runtime.routing]\ndefault = \"openai:small\"\n[[runtime.routing.budget]]\nmodel = \"openai:small\"\n",
            "runtime.routing.budget[0]",
        ),
    ] {
        project(p, "http://127.0.0.1:9", "http://127.0.0.1:9", routing);
        let out = weft(p, &["run", "go"]).await;
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("weft.toml") && stderr.contains(key),
            "{key}: {stderr}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_recovery_phase_routes_by_its_own_policy() {
    // maxTurns 3, graceTurns 2: the second call is in the grace period (phase `recovery`),
    // whose policy is `cost`, whose model is `small`.
    let big = ReplayServer::start(vec![calls(
        "big",
        "read_file",
        json!({"path": "notes.md"}),
        (5, 5),
    )])
    .await;
    let small = ReplayServer::start(vec![complete("small", "wrapped up cheaply")]).await;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    project(
        p,
        &big.url(),
        &small.url(),
        "maxTurns = 3\n[runtime.routing]\ndefault = \"openai:small\"\n\
         [runtime.routing.models]\ncost = \"openai:small\"\n\
         [runtime.routing.phases.recovery]\npolicy = \"cost\"\n",
    );
    let out = weft(p, &["run", "--json", "go"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let events = events(&out);
    assert_eq!(output(&events), "wrapped up cheaply");
    let routes = routes(&events);
    assert_eq!(routes.len(), 2, "{routes:?}");
    assert_eq!(
        (&routes[0]["resolved"], &routes[0]["policy"]),
        (&json!("openai-compatible:big"), &json!("quality"))
    );
    assert_eq!(
        (
            &routes[1]["resolved"],
            &routes[1]["reason"],
            &routes[1]["policy"]
        ),
        (
            &json!("openai:small"),
            &json!("phase recovery: policy cost"),
            &json!("cost")
        )
    );
    assert_eq!(models(&small), ["small"]);
}

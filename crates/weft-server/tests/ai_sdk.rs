//! The real Vercel AI SDK as the client: the `ai` npm package, v5 and v6, in Node, driving
//! `weft serve` with `AbstractChat` (what `useChat` wraps) and `DefaultChatTransport` —
//! sending messages and reading the stream into `UIMessage`s, rejoining a stream after a
//! reload (`resumeStream`), stopping, and (v6) the approval round trip
//! (`addToolApprovalResponse`, sent automatically). The clients live in
//! `tests/ai-sdk/` (`npm ci` there installs them; `.ci/run` does). Without Node or the
//! packages the tests skip, unless `CI` is set: then they fail.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

fn clients() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ai-sdk");
    let node = std::process::Command::new("node").arg("--version").output();
    let ready = node.is_ok_and(|o| o.status.success())
        && dir.join("node_modules/ai5/package.json").exists()
        && dir.join("node_modules/ai6/package.json").exists();
    if ready {
        return Some(dir);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "Node and the AI SDK clients are required in CI: run `npm ci` in {}",
        dir.display()
    );
    eprintln!(
        "skipped: Node or the AI SDK clients are missing (npm ci in {})",
        dir.display()
    );
    None
}

fn write(dir: &Path, path: &str, text: &str) {
    let path = dir.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Four agents, each with its own scripted model: `a` answers, `slow` looks around then
/// thinks 1.5 s, `stuck` looks around then thinks a minute, `writer` writes a file (which
/// needs approval).
fn project(dir: &Path) {
    write(
        dir,
        "weft.toml",
        "name = \"sdk\"\ndefaultAgent = \"a\"\nrequiresApproval = [\"write_file\"]\n",
    );
    let list = json!({"id": "c1", "name": "list_dir", "arguments": {"path": "."}});
    let agents = [
        (
            "a",
            json!([{"text": "Hello there."}, {"text": "Hello again."}]),
            "[]",
        ),
        (
            "slow",
            json!([{"text": "Looking.", "toolCalls": [list]}, {"text": "Done.", "delayMs": 1500}]),
            "[\"list_dir\"]",
        ),
        (
            "stuck",
            json!([{"text": "Looking.", "toolCalls": [list]}, {"text": "never", "delayMs": 60000}]),
            "[\"list_dir\"]",
        ),
        (
            "writer",
            json!([
                {"toolCalls": [{"id": "w1", "name": "write_file", "arguments": {"path": "note.txt", "content": "one\n"}}]},
                {"text": "Written."}
            ]),
            "[\"write_file\"]",
        ),
    ];
    for (name, responses, tools) in agents {
        write(
            dir,
            &format!("agents/{name}.toml"),
            &format!("name = \"{name}\"\n[sideA]\nprompt = \"{name}\"\n"),
        );
        write(
            dir,
            &format!("prompts/{name}.toml"),
            &format!(
                "name = \"{name}\"\nmodel = \"scripted-turns:{name}.json\"\ntools = {tools}\n"
            ),
        );
        write(
            dir,
            &format!("{name}.json"),
            &json!({"responses": responses}).to_string(),
        );
    }
}

async fn run_client(version: &str) -> Option<Vec<Value>> {
    let clients = clients()?;
    let dir = tempfile::tempdir().unwrap();
    project(dir.path());
    let server = common::start(dir.path()).await;
    let output = tokio::process::Command::new("node")
        .arg("client.mjs")
        .args([version, &server.base, &server.token])
        .current_dir(&clients)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "the AI SDK v{version} client failed:\n{stdout}\n{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("note.txt"))
            .ok()
            .as_deref(),
        (version == "6").then_some("one\n"),
        "the approved call ran once (v6 only)"
    );
    server.stop().await;
    Some(
        stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect(),
    )
}

fn scenario<'a>(results: &'a [Value], name: &str) -> &'a Value {
    results
        .iter()
        .find(|r| r["scenario"] == name)
        .unwrap_or_else(|| panic!("no {name} in {results:#?}"))
}

fn check_common(results: &[Value]) {
    let errors = scenario(results, "errors");
    assert_eq!(errors["errors"], json!([]), "the client reported errors");

    let send = scenario(results, "send");
    assert_eq!(send["status"], "ready");
    let messages = send["messages"].as_array().unwrap();
    let texts: Vec<&str> = messages
        .iter()
        .map(|m| m["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["Hi", "Hello there.", "And again", "Hello again."]);
    // The server's stored thread has the same messages, with the ids the client knows.
    let stored: Vec<&str> = send["stored"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    let held: Vec<&str> = messages.iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(stored, held);

    let resume = scenario(results, "resume");
    let last = resume["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["role"], "assistant");
    assert_eq!(
        last["id"], resume["original"],
        "the rejoined stream continues the same message"
    );
    assert_eq!(last["text"], "Looking.Done.", "{resume:#}");

    let stop = scenario(results, "stop");
    assert_eq!(stop["stopped"]["stopped"], true, "{stop:#}");
    assert_eq!(stop["resumeStatus"], 204, "nothing runs after a stop");
    let kept = stop["stored"].as_array().unwrap().last().unwrap();
    assert!(
        kept["parts"].to_string().contains("Looking."),
        "the partial answer is kept: {kept}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ai_sdk_v5_sends_resumes_and_stops() {
    let Some(results) = run_client("5").await else {
        return;
    };
    check_common(&results);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ai_sdk_v6_sends_resumes_stops_and_approves() {
    let Some(results) = run_client("6").await else {
        return;
    };
    check_common(&results);
    let approve = scenario(&results, "approve");
    assert_eq!(approve["status"], "ready");
    let messages = approve["messages"].as_array().unwrap();
    assert_eq!(
        messages.len(),
        2,
        "the approval continued the same message: {approve:#}"
    );
    let last = &messages[1];
    assert_eq!(last["id"], approve["requested"]["id"]);
    assert_eq!(last["text"], "Written.");
    // One part for the call, updated in place: approval-requested → approval-responded →
    // output-available (the continued stream does not send its input again).
    let calls: Vec<&Value> = last["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["toolCallId"] == "w1")
        .collect();
    assert_eq!(calls.len(), 1, "{last:#}");
    assert_eq!(calls[0]["state"], "output-available");
}

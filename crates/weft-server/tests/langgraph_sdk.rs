//! The real LangGraph SDK client against the run API: `tests/langgraph/client.py` uses
//! `langgraph_sdk.get_client(url=…, api_key=…)` (the `langgraph-sdk` package from PyPI) to
//! create a thread, stream a run, join its stream from a `Last-Event-ID`, wait on a run,
//! join a background run, cancel a run, and resume an interrupted run with decisions keyed by
//! interrupt id. Skipped (with a message) when the package is not installed, unless `CI` is
//! set: then it fails.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;
#[path = "langgraph/support.rs"]
mod support;

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use support::Served;

fn sdk_installed() -> bool {
    std::process::Command::new("python3")
        .args(["-c", "import langgraph_sdk"])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn write(dir: &Path, path: &str, text: &str) {
    let file = dir.join(path);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(file, text).unwrap();
}

/// Three agents, each with its own scripted model (see client.py).
fn project(dir: &Path) {
    write(
        dir,
        "weft.toml",
        "defaultAgent = \"chat\"\nrequiresApproval = [\"write_file\"]\n",
    );
    for (agent, tools, script) in [
        (
            "chat",
            "",
            json!({"responses": [{"text": "hello one"}, {"text": "hello two"}, {"text": "hello three"}]}),
        ),
        (
            "slow",
            "",
            json!({"responses": [{"text": "never", "delayMs": 60000}]}),
        ),
        (
            "approver",
            "\"write_file\"",
            json!({"responses": [
                {"toolCalls": [{"id": "w1", "name": "write_file", "arguments": {"path": "note.txt", "content": "one\n"}}]},
                {"text": "written"}
            ]}),
        ),
    ] {
        write(
            dir,
            &format!("agents/{agent}.toml"),
            &format!("name = \"{agent}\"\n[sideA]\nprompt = \"{agent}\"\n"),
        );
        write(
            dir,
            &format!("prompts/{agent}.toml"),
            &format!(
                "name = \"{agent}\"\nmodel = \"scripted-turns:{agent}.json\"\ntools = [{tools}]\n"
            ),
        );
        write(dir, &format!("{agent}.json"), &script.to_string());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_langgraph_sdk_python_client_drives_threads_and_runs() {
    if !sdk_installed() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set and the langgraph-sdk Python package is missing: python3 -m pip install langgraph-sdk"
        );
        eprintln!(
            "skipped: the langgraph-sdk Python package is not installed (python3 -m pip install langgraph-sdk)"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    project(&dir.path().join("p"));
    let served = Served::serve(dir).await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/langgraph/client.py");
    let run = tokio::process::Command::new("python3")
        .arg(&script)
        .arg(&served.base)
        .arg(&served.token)
        .env_remove("LANGGRAPH_API_KEY")
        .env_remove("LANGSMITH_API_KEY")
        .env_remove("LANGCHAIN_API_KEY")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(180), run)
        .await
        .expect("the client finished within three minutes")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the client failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("all checks passed"), "{stdout}\n{stderr}");
    eprintln!("{stdout}");
    assert_eq!(
        std::fs::read_to_string(served.project_dir().join("note.txt")).unwrap(),
        "one\n"
    );
}

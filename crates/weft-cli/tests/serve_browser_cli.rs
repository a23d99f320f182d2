//! The web page of `weft serve`, in a real browser: the test starts the real `weft serve`
//! binary on a scripted-model project and drives Debian's `chromium` headless through
//! playwright-core (`tests/browser/drive.mjs`): open the page's URL with its token, pick the
//! agent, send a message and see the streamed answer, approve a call whose arguments the page
//! shows, reload in the middle of an answer and see it resume, open the thread's runs and
//! checkpoints, watch a run's nested view (a sub-agent under the call that started it), fork
//! from a checkpoint, export the thread, deny a call after a reload, and stop a slow answer. With `WEFT_UPDATE_SCREENSHOTS=1` its screenshots
//! replace `docs/images/serve-*.png`.
//!
//! Needs `node`, `chromium` (or `WEFT_CHROMIUM`) and `npm ci` in `tests/browser/`; without
//! them the test says what is missing and passes, unless `CI` is set (then it fails).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};
use weft_store::{EventLog as _, NewEvent, RunRecord, RunStatus, Runs as _, Store, Usage};

/// The agent's answers, one per model call of the chat's conversation.
fn script() -> Value {
    let usage = json!({"inputTokens": 120, "outputTokens": 30});
    json!({"responses": [
        {"text": "Hello from the scripted model.", "usage": usage},
        {"toolCalls": [{"id": "w1", "name": "write_file",
            "arguments": {"path": "note.txt", "content": "hello note\n"}}], "usage": usage},
        {"text": "The note is written.", "usage": usage},
        {"text": "Reading the note first.", "toolCalls": [{"id": "r1", "name": "read_file",
            "arguments": {"path": "note.txt"}}], "usage": usage},
        // Late, so the page can be reloaded while this answer runs.
        {"text": "The note says: hello note.", "usage": usage, "delayMs": 10000},
        {"toolCalls": [{"id": "w2", "name": "write_file",
            "arguments": {"path": "other.txt", "content": "never\n"}}], "usage": usage},
        {"text": "Not written, as you wish.", "usage": usage},
        // Slower than the test: stopped from the page.
        {"text": "Too late.", "usage": usage, "delayMs": 120_000}
    ]})
}

/// What the browser test needs, or why it cannot run here.
struct Browser {
    node: PathBuf,
    chromium: PathBuf,
    dir: PathBuf,
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    })
}

fn browser() -> Result<Browser, String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
    let node = find_on_path("node").ok_or("`node` is not on PATH")?;
    let chromium = std::env::var_os("WEFT_CHROMIUM")
        .map(PathBuf::from)
        .or_else(|| find_on_path("chromium"))
        .ok_or("`chromium` is not installed (apt-get install chromium, or set WEFT_CHROMIUM)")?;
    if !dir
        .join("node_modules/playwright-core/package.json")
        .is_file()
    {
        return Err(format!(
            "playwright-core is not installed: run `npm ci` in {}",
            dir.display()
        ));
    }
    Ok(Browser {
        node,
        chromium,
        dir,
    })
}

/// `weft serve` running; killed when dropped.
struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `weft serve PROJECT` and waits for the page's URL (with its token) on its output.
fn serve(project: &Path) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["serve", &project.to_string_lossy(), "--port", "0"])
        .current_dir(project)
        .env_remove("WEFT_DATABASE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel::<String>();
    for stream in [
        Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().unwrap()),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                eprintln!("[weft serve] {line}");
                // Once nobody listens, keep draining so the server never blocks on a pipe.
                let _ = tx.send(line);
            }
        });
    }
    drop(tx);
    // Owned by the guard from here on, so the process is killed and waited for on every path.
    let mut server = Server {
        child,
        url: String::new(),
    };
    let mut seen = Vec::new();
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(120)) {
        if let Some(url) = page_url(&line) {
            server.url = url;
            return server;
        }
        seen.push(line);
    }
    panic!("weft serve printed no page URL:\n{}", seen.join("\n"));
}

/// The page's URL in a line `weft serve` printed: `http://HOST:PORT/?token=…`.
fn page_url(line: &str) -> Option<String> {
    let start = line.find("http://")?;
    let url: String = line[start..]
        .chars()
        .take_while(|c| !c.is_whitespace())
        .collect();
    url.contains("token=").then_some(url)
}

/// A finished run whose log holds a sub-agent's events (`a/helper`) inside the call that
/// started it, as the runtime logs them (docs/events.md, `agentPath`). Standard Agents
/// projects do not start sub-agents yet, so the page's nested view is checked on this log.
async fn seed_nested_run(project: &Path) -> String {
    let db = project.join(".weft/weft.db");
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    let store = Store::open(&format!("sqlite:{}", db.display()))
        .await
        .unwrap();
    let (run, thread) = ("run-nested-demo", "thread-nested-demo");
    let now = weft_store::now_string();
    store
        .put_run(&RunRecord {
            run_id: run.into(),
            thread_id: thread.into(),
            agent_id: "a".into(),
            status: RunStatus::Completed,
            spec: json!({}),
            started_at: now.clone(),
            updated_at: now.clone(),
            ended_at: Some(now.clone()),
            steps: 1,
            usage: Usage {
                input_tokens: 300,
                output_tokens: 40,
                cost: None,
            },
            owner_pid: None,
            owner_host: None,
            error: None,
            output: Some("The helper found it.".into()),
            parent_run_id: None,
            lease: weft_store::Lease::default(),
        })
        .await
        .unwrap();
    let event = |agent: &str, kind: &str, call: Option<&str>, payload: Value| {
        let mut e = NewEvent::new(kind, run, thread, agent, payload);
        e.turn = 1;
        e.tool_call_id = call.map(str::to_owned);
        e
    };
    store
        .append_events(vec![
            event("a", "run_start", None, json!({"agent": "a", "threadId": thread})),
            event("a", "turn_start", None, json!({"messages": 1})),
            event("a", "text_delta", None, json!({"text": "Asking the helper."})),
            event("a", "tool_call_start", Some("h1"),
                json!({"tool": "helper", "arguments": {"question": "where is the note?"}})),
            event("a/helper", "turn_start", None, json!({"messages": 1})),
            event("a/helper", "tool_call_start", Some("c1"),
                json!({"tool": "read_file", "arguments": {"path": "note.txt"}})),
            event("a/helper", "tool_call_end", Some("c1"),
                json!({"tool": "read_file", "isError": false, "result": "hello note"})),
            event("a/helper", "text_delta", None, json!({"text": "It is in note.txt."})),
            event("a", "tool_call_end", Some("h1"),
                json!({"tool": "helper", "isError": false, "result": "It is in note.txt."})),
            event("a", "text_delta", None, json!({"text": "The helper found it."})),
            event("a", "turn_end", None, json!({"toolCalls": 1, "inputTokens": 300, "outputTokens": 40,
                "runInputTokens": 300, "runOutputTokens": 40, "cost": null})),
            event("a", "run_end", None, json!({"status": "completed", "exitCode": 0, "steps": 1,
                "inputTokens": 300, "outputTokens": 40, "cost": null, "output": "The helper found it."})),
        ])
        .await
        .unwrap();
    store.flush().await.unwrap();
    run.to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_chats_approves_resumes_and_browses_runs_in_chromium() {
    let browser = match browser() {
        Ok(browser) => browser,
        Err(missing) if std::env::var_os("CI").is_some() => {
            panic!("the browser test cannot run in CI: {missing}")
        }
        Err(missing) => {
            eprintln!(
                "skipped: the browser test needs node, chromium and playwright-core: {missing}"
            );
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("p");
    common::scripted_project(
        &project,
        "requiresApproval = [\"write_file\"]\n",
        &["write_file", "read_file"],
        &script(),
    );
    let nested_run = seed_nested_run(&project).await;
    let server = serve(&project);
    // `WEFT_UPDATE_SCREENSHOTS=1` refreshes the committed screenshots in docs/images/.
    let shots = if std::env::var_os("WEFT_UPDATE_SCREENSHOTS").is_some() {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/images")
    } else {
        dir.path().join("screenshots")
    };

    let output = tokio::task::spawn_blocking({
        let (url, shots) = (server.url.clone(), shots.clone());
        move || {
            Command::new(&browser.node)
                .arg("drive.mjs")
                .args(["--url", &url, "--agent", "a"])
                .args(["--screenshots", &shots.to_string_lossy()])
                .args(["--chromium", &browser.chromium.to_string_lossy()])
                .args(["--nested-run", &nested_run])
                .current_dir(&browser.dir)
                .stdin(Stdio::null())
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{stdout}");
    assert!(
        output.status.success(),
        "the browser run failed:\n{stdout}\n{stderr}"
    );
    let result: Value = stdout
        .lines()
        .find_map(|l| l.strip_prefix("DRIVE-RESULT "))
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no result:\n{stdout}\n{stderr}"));
    for step in [
        "open",
        "chat",
        "approve",
        "reload mid-stream",
        "runs and checkpoints",
        "run view",
        "nested view",
        "fork",
        "export",
        "deny",
        "stop",
    ] {
        assert!(
            result["steps"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s == step),
            "step {step} missing: {result}"
        );
    }
    // The approved call ran exactly once, with the arguments the page showed.
    assert_eq!(
        std::fs::read_to_string(project.join("note.txt")).unwrap(),
        "hello note\n"
    );
    assert!(
        !project.join("other.txt").exists(),
        "a denied call never runs"
    );
    assert_ne!(result["forkId"], result["chatId"]);
    drop(server);
}

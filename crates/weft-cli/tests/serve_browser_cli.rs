//! The web page of `weft serve`, in a real browser: the test starts the real `weft serve`
//! binary on a scripted-model project and drives Debian's `chromium` headless through
//! playwright-core (`tests/browser/drive.mjs`): open the page's URL with its token, pick the
//! agent, send a message and see the streamed answer, approve a call whose arguments the page
//! shows, reload in the middle of an answer and see it resume, open the thread's runs and
//! checkpoints, watch a real run's nested view (a `dual_ai` subagent under the call that started it), fork
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

/// A real run with a sub-agent: the agent `lead` calls `helper`, a `dual_ai` agent exposed as
/// a tool, which reads `found.txt` and finishes; run with `weft run` before the server starts,
/// so the page's nested view shows the child's events (`agentPath` `lead/helper`) under the
/// call that started it. Returns the run's id.
fn nested_run(dir: &Path, project: &Path) -> String {
    let files = [
        ("agents/lead.toml", "name = \"lead\"\n[sideA]\nprompt = \"lead\"\n".to_owned()),
        (
            "prompts/lead.toml",
            "name = \"lead\"\nmodel = \"scripted-turns:lead.json\"\n\
             tools = [{ name = \"helper\", initUserMessageProperty = \"question\" }]\n"
                .to_owned(),
        ),
        (
            "agents/helper.toml",
            "name = \"helper\"\ntype = \"dual_ai\"\nexposeAsTool = true\ntoolDescription = \"Finds notes.\"\n\
             maxSessionTurns = 2\n[sideA]\nprompt = \"hw\"\n\
             sessionStop = { name = \"finish\", messageProperty = \"summary\" }\n[sideB]\nprompt = \"hb\"\n"
                .to_owned(),
        ),
        (
            "prompts/hw.toml",
            "name = \"hw\"\nmodel = \"scripted-turns:helper.json\"\ntools = [\"read_file\", \"finish\"]\n"
                .to_owned(),
        ),
        ("prompts/hb.toml", "name = \"hb\"\n".to_owned()),
        (
            "tools/finish.toml",
            "name = \"finish\"\nparameters = { type = \"object\", properties = { summary = { type = \"string\" } } }\n"
                .to_owned(),
        ),
        (
            "lead.json",
            json!({"responses": [
                {"text": "Asking the helper.", "toolCalls": [{"id": "h1", "name": "helper",
                    "arguments": {"question": "Where is the note?"}}]},
                {"text": "The helper found it."}
            ]})
            .to_string(),
        ),
        (
            "helper.json",
            json!({"responses": [
                {"toolCalls": [{"id": "c1", "name": "read_file", "arguments": {"path": "found.txt"}}]},
                {"toolCalls": [{"id": "f1", "name": "finish", "arguments": {"summary": "It is in found.txt."}}]}
            ]})
            .to_string(),
        ),
        // Not note.txt: the chat's approved call writes that one, and the test checks it.
        ("found.txt", "the lost note\n".to_owned()),
    ];
    for (path, text) in files {
        let path = project.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let out = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args([
            "run",
            "p",
            "--agent",
            "lead",
            "--json",
            "Where is the note?",
        ])
        .current_dir(dir)
        .env_remove("WEFT_DATABASE_URL")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "the nested run failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("lead/helper"),
        "the child's events are nested: {stdout}"
    );
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find_map(|e| e["runId"].as_str().map(str::to_owned))
        .unwrap()
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
        "defaultAgent = \"a\"\nrequiresApproval = [\"write_file\"]\n",
        &["write_file", "read_file"],
        &script(),
    );
    let nested_run = nested_run(dir.path(), &project);
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

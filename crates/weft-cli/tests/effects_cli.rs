//! Scheduled effects from the command line (`weft thread schedule|effects|cancel-effect`,
//! Standard Agents `scheduleEffect`, SA-081) fired by the real `weft serve`: an effect
//! scheduled while no server runs, with the server killed (`kill -9`) before it fired, fires
//! exactly once when a server runs again — and not again after another `kill -9` and restart.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use common::weft;

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

fn stdout_json(out: &Output) -> Value {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A `weft serve` child: its base address and token.
struct Serve {
    child: Child,
    addr: String,
    token: String,
    _stdout: BufReader<std::process::ChildStdout>,
}

impl Serve {
    fn start(dir: &Path) -> Serve {
        let mut child = Command::new(env!("CARGO_BIN_EXE_weft"))
            .args(["serve", ".", "--port", "0", "--json"])
            .current_dir(dir)
            .env_remove("WEFT_DATABASE_URL")
            .env_remove("WEFT_SERVE_TOKEN")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("weft serve starts");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let info: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
        Serve {
            child,
            addr: info["baseUrl"]
                .as_str()
                .unwrap()
                .trim_start_matches("http://")
                .to_owned(),
            token: info["token"].as_str().unwrap_or_default().to_owned(),
            _stdout: stdout,
        }
    }

    /// `kill -9`: no shutdown of any kind.
    fn kill_9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// One request (`Connection: close`) → (status, JSON body).
    fn request(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let mut stream = std::net::TcpStream::connect(&self.addr).unwrap();
        let body = body.map(Value::to_string).unwrap_or_default();
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nx-api-key: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.addr,
            self.token,
            body.len()
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let status = response
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
        let body = if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            dechunk(body)
        } else {
            body.to_owned()
        };
        (status, serde_json::from_str(&body).unwrap_or(Value::Null))
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || after.len() < size {
            break;
        }
        out.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    out
}

/// Waits (up to two minutes) until `check` holds.
fn until(mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !check() {
        assert!(Instant::now() < deadline, "the condition did not hold");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The ids of the tool calls in the thread's conversation.
fn call_ids(serve: &Serve, thread: &str) -> Vec<String> {
    let (_, state) = serve.request("GET", &format!("/threads/{thread}/state"), None);
    state["values"]["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
        .filter_map(|c| c["id"].as_str().map(str::to_owned))
        .collect()
}

/// Whether the thread has `n` runs, none of them running.
fn runs_ended(serve: &Serve, thread: &str, n: usize) -> bool {
    let (_, runs) = serve.request("GET", &format!("/threads/{thread}/runs"), None);
    runs.as_array()
        .is_some_and(|r| r.len() == n && r.iter().all(|r| r["status"] == "success"))
}

#[test]
fn an_effect_scheduled_with_the_cli_fires_exactly_once_across_kill_9_of_serve() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    let script = json!({"responses": [
        {"text": "Hi."}, {"text": "Done as scheduled."}, {"text": "And the marker."}
    ]});
    common::scripted_project(&p, "", &["write_file"], &script);
    let first = weft(&p, &["run", "--json", "hello"]);
    assert_eq!(first.status.code(), Some(0));
    let thread = String::from_utf8_lossy(&first.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(common::flat)
        .find(|e| e["type"] == "run_start")
        .and_then(|e| e["threadId"].as_str().map(str::to_owned))
        .unwrap();

    // Scheduled, listed, cancelled.
    let args = r#"{"path": "later.txt", "content": "from the effect"}"#;
    let effect = stdout_json(&weft(
        &p,
        &[
            "thread",
            "schedule",
            &thread,
            "write_file",
            "--args",
            args,
            "--in",
            "2s",
            "--json",
        ],
    ));
    let id = effect["id"].as_str().unwrap().to_owned();
    assert_eq!(effect["name"], "write_file");
    let cancelled = stdout_json(&weft(
        &p,
        &[
            "thread",
            "schedule",
            &thread,
            "write_file",
            "--args",
            r#"{"path": "cancelled.txt", "content": "no"}"#,
            "--json",
        ],
    ));
    let listed = stdout_json(&weft(&p, &["thread", "effects", &thread, "--json"]));
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["id"].as_str())
        .collect();
    assert_eq!(ids, [cancelled["id"].as_str().unwrap(), id.as_str()]);
    let cancel = cancelled["id"].as_str().unwrap();
    assert_eq!(
        weft(&p, &["thread", "cancel-effect", cancel]).status.code(),
        Some(0)
    );
    assert_eq!(
        weft(&p, &["thread", "cancel-effect", cancel]).status.code(),
        Some(2)
    );
    let unknown = weft(&p, &["thread", "schedule", "no-such-thread", "write_file"]);
    assert_eq!(unknown.status.code(), Some(2));
    let bad = weft(
        &p,
        &["thread", "schedule", &thread, "write_file", "--args", "[1]"],
    );
    assert_eq!(bad.status.code(), Some(2));

    // A server starts and is killed at once, before or while the effect is due.
    Serve::start(&p).kill_9();
    std::thread::sleep(Duration::from_secs(2));
    // The next one fires it: one run, its call the effect's.
    let serve = Serve::start(&p);
    until(|| runs_ended(&serve, &thread, 2) && call_ids(&serve, &thread) == [id.clone()]);
    assert_eq!(
        std::fs::read_to_string(p.join("later.txt")).unwrap(),
        "from the effect"
    );
    assert!(!p.join("cancelled.txt").exists());
    serve.kill_9();
    // Killed again and restarted: nothing fires twice. A marker effect scheduled now fires,
    // after which the first effect's call is still there once.
    let serve = Serve::start(&p);
    let (status, marker) = serve.request(
        "POST",
        &format!("/threads/{thread}/effects"),
        Some(&json!({"name": "write_file", "arguments": {"path": "marker.txt", "content": "m"}})),
    );
    assert_eq!(status, 201, "{marker}");
    let marker = marker["id"].as_str().unwrap().to_owned();
    until(|| runs_ended(&serve, &thread, 3) && call_ids(&serve, &thread).len() == 2);
    assert_eq!(call_ids(&serve, &thread), [id, marker]);
    let listed = stdout_json(&weft(&p, &["thread", "effects", &thread, "--json"]));
    assert_eq!(listed, json!([]));
}

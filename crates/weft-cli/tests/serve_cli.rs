//! `weft serve`, the real binary: the token it prints is required (header or the page's
//! cookie), `--no-auth` only on loopback, and SIGTERM stops it cleanly, leaving the run in
//! progress interrupted and resumable with `weft resume`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use common::{output_text, weft};

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use common::scripted_project;

/// A `weft serve` child and what its first stdout line said.
struct Served {
    child: Child,
    /// `{"url", "baseUrl", "token", "project"}`.
    info: Value,
    /// Its stdout, kept open so a later line does not meet a closed pipe.
    _stdout: BufReader<std::process::ChildStdout>,
}

impl Served {
    fn start(dir: &Path, extra: &[&str]) -> Served {
        let mut child = Command::new(env!("CARGO_BIN_EXE_weft"))
            .args(["serve", ".", "--port", "0", "--json"])
            .args(extra)
            .current_dir(dir)
            .env_remove("WEFT_DATABASE_URL")
            .env_remove("WEFT_SERVE_TOKEN")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("weft serve starts");
        let mut line = String::new();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        stdout.read_line(&mut line).unwrap();
        let info: Value = match serde_json::from_str(&line) {
            Ok(info) => info,
            Err(e) => {
                let _ = child.kill();
                let output = child.wait_with_output().unwrap();
                panic!("not JSON ({e}): {line:?}\n{}", output_text(&output));
            }
        };
        Served {
            child,
            info,
            _stdout: stdout,
        }
    }

    /// `host:port`.
    fn addr(&self) -> String {
        self.info["baseUrl"]
            .as_str()
            .unwrap()
            .trim_start_matches("http://")
            .to_owned()
    }

    fn token(&self) -> String {
        self.info["token"].as_str().unwrap_or_default().to_owned()
    }

    /// Sends SIGTERM (to this child only) and waits for it to exit, at most a minute: its
    /// exit status and what it wrote to stderr.
    fn terminate(mut self) -> (std::process::ExitStatus, String) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("weft serve did not stop on SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let status = self.child.wait().unwrap();
        let mut stderr = String::new();
        if let Some(mut pipe) = self.child.stderr.take() {
            let _ = pipe.read_to_string(&mut stderr);
        }
        (status, stderr)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A response: status, headers (lowercase names), body.
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

fn send(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    if !body.is_empty() {
        request.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).unwrap();
    stream
}

/// One HTTP/1.1 request, read to its end (no chunked decoding needed for what is checked).
fn http(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Response {
    let mut stream = send(addr, method, path, headers, body);
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Response {
        status,
        headers,
        body: body.to_owned(),
    }
}

fn project(dir: &Path, script: &Value) {
    scripted_project(dir, "name = \"served\"\n", &[], script);
}

#[test]
fn the_printed_token_is_required_and_the_page_url_sets_a_cookie() {
    let dir = tempfile::tempdir().unwrap();
    project(dir.path(), &json!({"responses": [{"text": "hello"}]}));
    let served = Served::start(dir.path(), &[]);
    let (addr, token) = (served.addr(), served.token());
    assert!(token.len() >= 32, "a generated token: {}", served.info);
    assert_eq!(
        served.info["url"].as_str().unwrap(),
        format!("http://{addr}/?token={token}"),
        "the page's URL carries the token, as Jupyter's does"
    );
    assert!(
        addr.starts_with("127.0.0.1:"),
        "loopback by default: {addr}"
    );

    assert_eq!(http(&addr, "GET", "/api/info", &[], "").status, 401);
    let bearer = format!("Bearer {token}");
    let info = http(&addr, "GET", "/api/info", &[("Authorization", &bearer)], "");
    assert_eq!(info.status, 200);
    assert!(info.body.contains("served"), "{}", info.body);

    // The page's URL sets the cookie, so the page's own requests carry the token.
    let page = http(&addr, "GET", &format!("/?token={token}"), &[], "");
    assert_eq!(page.status, 200);
    let cookie = page.header("set-cookie").expect("a cookie");
    assert!(
        cookie.starts_with(&format!("weft_token={token}")),
        "{cookie}"
    );
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(cookie.contains("SameSite=Strict"), "{cookie}");
    let with_cookie = format!("weft_token={token}");
    let by_cookie = http(&addr, "GET", "/api/info", &[("Cookie", &with_cookie)], "");
    assert_eq!(by_cookie.status, 200);
    let wrong = http(
        &addr,
        "GET",
        "/api/info",
        &[("Cookie", "weft_token=not-the-token")],
        "",
    );
    assert_eq!(wrong.status, 401);

    let (status, stderr) = served.terminate();
    assert_eq!(status.code(), Some(0), "{stderr}");
}

#[test]
fn no_auth_is_loopback_only() {
    let dir = tempfile::tempdir().unwrap();
    project(dir.path(), &json!({"responses": [{"text": "hello"}]}));
    let refused = weft(
        dir.path(),
        &[
            "serve",
            ".",
            "--no-auth",
            "--host",
            "0.0.0.0",
            "--port",
            "0",
        ],
    );
    assert_eq!(refused.status.code(), Some(2), "{}", output_text(&refused));
    assert!(
        output_text(&refused).contains("--no-auth"),
        "{}",
        output_text(&refused)
    );

    let served = Served::start(dir.path(), &["--no-auth"]);
    assert!(served.info["token"].is_null(), "{}", served.info);
    let info = http(&served.addr(), "GET", "/api/info", &[], "");
    assert_eq!(info.status, 200, "{}", info.body);
    // Host and Origin are still checked without a token.
    let rebound = http(
        &served.addr(),
        "GET",
        "/api/info",
        &[("Origin", "http://evil.example")],
        "",
    );
    assert_eq!(rebound.status, 403);
    let (status, stderr) = served.terminate();
    assert_eq!(status.code(), Some(0), "{stderr}");
}

#[test]
fn sigterm_stops_the_server_and_leaves_the_run_resumable() {
    let dir = tempfile::tempdir().unwrap();
    // The first answer takes a minute: the run is in the model call when SIGTERM comes.
    project(
        dir.path(),
        &json!({"responses": [{"text": "late answer", "delayMs": 60_000}]}),
    );
    let served = Served::start(dir.path(), &[]);
    let (addr, token) = (served.addr(), served.token());
    let bearer = format!("Bearer {token}");
    let body = json!({"id": "t1", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
    ], "trigger": "submit-message"})
    .to_string();
    let stream = send(
        &addr,
        "POST",
        "/api/chat",
        &[("Authorization", &bearer)],
        &body,
    );
    // Read until the stream's `start` chunk names the run.
    let mut reader = BufReader::new(stream);
    let mut run = None;
    let mut line = String::new();
    while reader.read_line(&mut line).unwrap() > 0 {
        if let Some(data) = line.trim_end().strip_prefix("data: ")
            && let Ok(chunk) = serde_json::from_str::<Value>(data)
            && chunk["type"] == "start"
        {
            let id = chunk["messageId"].as_str().unwrap();
            run = Some(id.strip_prefix("msg-").unwrap_or(id).to_owned());
            break;
        }
        line.clear();
    }
    let run = run.expect("the stream started");

    let (status, stderr) = served.terminate();
    assert_eq!(status.code(), Some(0), "{stderr}");
    // The open stream ended with the server.
    let mut rest = String::new();
    let _ = reader.read_to_string(&mut rest);

    let shown: Value =
        serde_json::from_slice(&weft(dir.path(), &["runs", "show", &run, "--json"]).stdout)
            .unwrap();
    assert_eq!(shown["status"], "interrupted", "{shown}");

    // Resumable: the next process goes on with it (the model now answers at once).
    project(dir.path(), &json!({"responses": [{"text": "late answer"}]}));
    let resumed = weft(dir.path(), &["resume", &run]);
    assert_eq!(resumed.status.code(), Some(0), "{}", output_text(&resumed));
    let shown: Value =
        serde_json::from_slice(&weft(dir.path(), &["runs", "show", &run, "--json"]).stdout)
            .unwrap();
    assert_eq!(shown["status"], "completed", "{shown}");
    assert_eq!(shown["output"], "late answer", "{shown}");
}

#[test]
fn a_served_run_records_nothing_matching_the_projects_secret_patterns() {
    // The chat message and the model's answer carry a secret of the project's own shape.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    scripted_project(
        p,
        "name = \"served\"\n[runtime.policy]\nsecretPatterns = [\"ACME-[0-9]{6}\"]\n",
        &[],
        &json!({"responses": [{"toolCalls": [{"id": "c1", "name": "complete_task",
            "arguments": {"summary": "stored ACME-424242 for you"}}]}]}),
    );
    let served = Served::start(p, &[]);
    let (addr, token) = (served.addr(), served.token());
    let bearer = format!("Bearer {token}");
    let body = json!({"id": "t1", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "my key is ACME-123456"}]}
    ], "trigger": "submit-message"})
    .to_string();
    let reply = http(
        &addr,
        "POST",
        "/api/chat",
        &[("Authorization", &bearer)],
        &body,
    );
    assert_eq!(reply.status, 200, "{}", reply.body);
    let (status, stderr) = served.terminate();
    assert_eq!(status.code(), Some(0), "{stderr}");
    let listed: Value =
        serde_json::from_slice(&weft(p, &["runs", "list", "--json"]).stdout).unwrap();
    let run = listed[0]["run_id"]
        .as_str()
        .expect("the served run")
        .to_owned();
    let shown = weft(p, &["runs", "show", &run, "--json"]);
    let shown_text = output_text(&shown);
    assert!(shown_text.contains("\"completed\""), "{shown_text}");
    assert!(
        shown_text.contains("stored [REDACTED] for you"),
        "{shown_text}"
    );
    let mut bytes = Vec::new();
    for entry in std::fs::read_dir(p.join(".weft")).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            bytes.extend(std::fs::read(path).unwrap());
        }
    }
    let stored = String::from_utf8_lossy(&bytes);
    assert!(
        !stored.contains("ACME-424242") && !stored.contains("ACME-123456"),
        "a secret reached the store"
    );
}

//! Test support for Weft: a local HTTP/1.1 server that replays recorded provider exchanges
//! (VCR cassettes from `testdata/fixtures`) or crafted responses, and records every request
//! it receives so tests can check what the client sent.
//!
//! Each connection serves one request and is closed (`Connection: close`); responses are
//! served in the order they were queued. A response body can be sent in chunks with delays,
//! or cut short to imitate a dropped connection.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The repository's `testdata/fixtures` folder.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/fixtures")
}

/// A cassette under `testdata/fixtures/pydantic-ai/tests/models/cassettes/`.
pub fn cassette_path(relative: &str) -> PathBuf {
    fixtures_dir()
        .join("pydantic-ai/tests/models/cassettes")
        .join(relative)
}

/// The text of a fixture Weft wrote itself, under `testdata/fixtures/weft/` (modelled on the
/// providers' documented examples; see that folder's README).
///
/// # Panics
/// When the file cannot be read (a broken checkout).
pub fn weft_fixture(name: &str) -> String {
    let path = fixtures_dir().join("weft").join(name);
    #[allow(clippy::expect_used)]
    std::fs::read_to_string(&path).expect("a fixture under testdata/fixtures/weft")
}

/// The Python that has the `mcp` package (the official MCP SDK), for tests against the real
/// MCP servers in [`mcp_servers_dir`]: (its executable, its installation prefix, both with
/// symbolic links resolved: a sandboxed server needs its prefix readable). `None` when there
/// is none: the test prints why and skips.
///
/// # Panics
/// When there is none and `CI` is set: there the tests must run.
pub fn mcp_python() -> Option<(PathBuf, PathBuf)> {
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import mcp, sys, os; print(os.path.realpath(sys.executable)); print(os.path.realpath(sys.prefix))",
        ])
        .output();
    match out {
        Ok(out) if out.status.success() => {
            let text = String::from_utf8_lossy(&out.stdout).to_string();
            let mut lines = text.lines();
            Some((PathBuf::from(lines.next()?), PathBuf::from(lines.next()?)))
        }
        _ => {
            let reason =
                "python3 with the `mcp` package is not available (python3 -m pip install mcp)";
            assert!(std::env::var_os("CI").is_none(), "{reason}");
            eprintln!("skipped: {reason}");
            None
        }
    }
}

/// The MCP servers written with the official Python SDK for Weft's tests
/// (`crates/weft-mcp/tests/servers`: `demo_server.py` and others), as a canonical path.
pub fn mcp_servers_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../weft-mcp/tests/servers");
    std::fs::canonicalize(&dir).unwrap_or(dir)
}

/// `demo_server.py` of [`mcp_servers_dir`] serving streamable HTTP on a free port of
/// 127.0.0.1, run by `python` in `dir`; stopped when dropped.
#[derive(Debug)]
pub struct McpHttpServer {
    child: std::process::Child,
    /// The MCP endpoint: `http://127.0.0.1:PORT/mcp`.
    pub url: String,
}

impl McpHttpServer {
    /// Starts the server and waits (up to 10 s) until it accepts connections.
    ///
    /// # Panics
    /// When no port is free or the server cannot be started.
    #[allow(clippy::expect_used)]
    pub async fn start(python: &Path, dir: &Path) -> McpHttpServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = std::process::Command::new(python)
            .arg(mcp_servers_dir().join("demo_server.py"))
            .args(["http", &port.to_string()])
            .current_dir(dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("the demo MCP server starts");
        for _ in 0..100 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        McpHttpServer {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

impl Drop for McpHttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A canned HTTP response.
#[derive(Debug, Clone)]
pub struct Reply {
    /// Status code.
    pub status: u16,
    /// Headers (content-length is computed).
    pub headers: Vec<(String, String)>,
    /// Body pieces, sent in order with `delay` between them.
    pub chunks: Vec<Vec<u8>>,
    /// Delay between chunks (and before the first).
    pub delay: Duration,
    /// Announce this many extra bytes in `Content-Length` that never come (a cut body).
    pub missing_bytes: usize,
    /// Send no `Content-Length`, end the body by closing (SSE style).
    pub close_delimited: bool,
}

impl Reply {
    /// A JSON response.
    pub fn json(status: u16, body: &Value) -> Self {
        Reply {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            chunks: vec![body.to_string().into_bytes()],
            delay: Duration::ZERO,
            missing_bytes: 0,
            close_delimited: false,
        }
    }

    /// A raw body with a content type.
    pub fn raw(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        Reply {
            status,
            headers: vec![("content-type".into(), content_type.into())],
            chunks: vec![body.into()],
            delay: Duration::ZERO,
            missing_bytes: 0,
            close_delimited: false,
        }
    }

    /// An SSE stream sent in chunks of `chunk_size` bytes, ended by closing the connection.
    pub fn sse(body: &str, chunk_size: usize) -> Self {
        let chunks = body
            .as_bytes()
            .chunks(chunk_size.max(1))
            .map(<[u8]>::to_vec)
            .collect();
        Reply {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            chunks,
            delay: Duration::ZERO,
            missing_bytes: 0,
            close_delimited: true,
        }
    }

    /// Adds a header.
    #[must_use]
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sets the delay between chunks.
    #[must_use]
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct Received {
    /// Method.
    pub method: String,
    /// Path and query.
    pub path: String,
    /// Headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// Raw body.
    pub body: Vec<u8>,
}

impl Received {
    /// The body as JSON (`Null` if it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Debug, Default)]
struct Shared {
    replies: VecDeque<Reply>,
    received: Vec<Received>,
}

/// The replay server; stops when dropped.
#[derive(Debug)]
pub struct ReplayServer {
    addr: std::net::SocketAddr,
    shared: Arc<Mutex<Shared>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ReplayServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ReplayServer {
    /// Starts a server on 127.0.0.1 serving `replies` in order. Once they run out it answers
    /// 599 with a message saying so.
    ///
    /// # Panics
    /// When no local port can be bound (a broken test machine).
    pub async fn start(replies: Vec<Reply>) -> Self {
        #[allow(clippy::expect_used)]
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        #[allow(clippy::expect_used)]
        let addr = listener.local_addr().expect("local addr");
        let shared = Arc::new(Mutex::new(Shared {
            replies: replies.into(),
            received: Vec::new(),
        }));
        let state = shared.clone();
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let state = state.clone();
                tokio::spawn(async move {
                    let _ = serve(socket, state).await;
                });
            }
        });
        ReplayServer { addr, shared, task }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request received so far.
    pub fn received(&self) -> Vec<Received> {
        self.shared
            .lock()
            .map(|s| s.received.clone())
            .unwrap_or_default()
    }

    /// Replies not served yet.
    pub fn remaining(&self) -> usize {
        self.shared.lock().map(|s| s.replies.len()).unwrap_or(0)
    }
}

async fn serve(
    mut socket: tokio::net::TcpStream,
    state: Arc<Mutex<Shared>>,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 8192];
    let head_end = loop {
        let n = socket.read(&mut tmp).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&tmp[..n]);
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < length {
        let n = socket.read(&mut tmp).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&tmp[..n]);
    }
    let reply = {
        let mut shared = state
            .lock()
            .map_err(|_| std::io::Error::other("poisoned"))?;
        shared.received.push(Received {
            method,
            path,
            headers,
            body,
        });
        shared.replies.pop_front()
    };
    let reply = reply.unwrap_or_else(|| {
        Reply::raw(
            599,
            "text/plain",
            "weft-testkit: no reply queued for this request",
        )
    });
    let total: usize = reply.chunks.iter().map(Vec::len).sum();
    let mut head = format!("HTTP/1.1 {} Replay\r\nconnection: close\r\n", reply.status);
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if !reply.close_delimited {
        head.push_str(&format!(
            "content-length: {}\r\n",
            total + reply.missing_bytes
        ));
    }
    head.push_str("\r\n");
    socket.write_all(head.as_bytes()).await?;
    for chunk in &reply.chunks {
        if !reply.delay.is_zero() {
            tokio::time::sleep(reply.delay).await;
        }
        socket.write_all(chunk).await?;
        socket.flush().await?;
    }
    socket.shutdown().await?;
    Ok(())
}

/// One recorded exchange of a cassette.
#[derive(Debug, Clone)]
pub struct Interaction {
    /// The recorded request body (`parsed_body`), `Null` when absent.
    pub request_body: Value,
    /// The recorded request URI.
    pub uri: String,
    /// The recorded response status.
    pub status: u16,
    /// The recorded response: a JSON body (`parsed_body`) …
    pub response_json: Option<Value>,
    /// … or a raw body (`body.string`, e.g. an SSE stream).
    pub response_text: Option<String>,
    /// The recorded content type.
    pub content_type: Option<String>,
}

impl Interaction {
    /// The recorded response as a [`Reply`]; SSE bodies are sent in `chunk_size` pieces.
    pub fn reply(&self, chunk_size: usize) -> Reply {
        match (&self.response_json, &self.response_text) {
            (Some(json), _) => Reply::json(self.status, json),
            (None, Some(text)) => {
                let sse = self
                    .content_type
                    .as_deref()
                    .is_some_and(|c| c.contains("event-stream"))
                    || text.starts_with("data:")
                    || text.starts_with("event:");
                if sse {
                    let mut reply = Reply::sse(text, chunk_size);
                    reply.status = self.status;
                    reply
                } else {
                    Reply::raw(
                        self.status,
                        self.content_type.as_deref().unwrap_or("application/json"),
                        text.clone(),
                    )
                }
            }
            (None, None) => Reply::raw(self.status, "application/json", Vec::new()),
        }
    }
}

/// Why a cassette could not be loaded.
#[derive(Debug)]
pub struct CassetteError(pub String);

impl std::fmt::Display for CassetteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CassetteError {}

/// Loads a VCR cassette (YAML with `interactions:`).
///
/// # Errors
/// When the file is missing or not a cassette.
pub fn load_cassette(path: &Path) -> Result<Vec<Interaction>, CassetteError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CassetteError(format!("{}: {e}", path.display())))?;
    let doc: Value = serde_norway::from_str(&text)
        .map_err(|e| CassetteError(format!("{}: {e}", path.display())))?;
    let interactions = doc
        .get("interactions")
        .and_then(Value::as_array)
        .ok_or_else(|| CassetteError(format!("{}: no interactions", path.display())))?;
    Ok(interactions
        .iter()
        .map(|i| {
            let header = |name: &str| {
                i.pointer(&format!("/response/headers/{name}"))
                    .and_then(|v| v.get(0).or(Some(v)))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            };
            Interaction {
                request_body: i
                    .pointer("/request/parsed_body")
                    .cloned()
                    .unwrap_or(Value::Null),
                uri: i
                    .pointer("/request/uri")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                status: i
                    .pointer("/response/status/code")
                    .and_then(Value::as_u64)
                    .and_then(|c| u16::try_from(c).ok())
                    .unwrap_or(200),
                response_json: i.pointer("/response/parsed_body").cloned(),
                response_text: i
                    .pointer("/response/body/string")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                content_type: header("content-type"),
            }
        })
        .collect())
}

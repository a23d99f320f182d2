//! `cargo bench -p weft-server --bench serve`: how many concurrent streaming chats `weft serve`
//! holds on this machine, the server's memory per open stream, and the latency a streamed
//! chunk gains between the model and the client.
//!
//! The server runs in a child process (this same executable, started with
//! `WEFT_SERVE_BENCH_CHILD=1`) so its memory (`VmRSS` of `/proc/PID/status`) is the server's
//! alone; this process is the client. The model (`paced:CHUNKSxMS`) streams `CHUNKS` text
//! chunks, one every `MS` milliseconds, each holding its send time in microseconds (`t=…;`);
//! the client reads every UI message stream chunk and takes, for each, receive time minus
//! send time: what the runtime (event numbering, the event log, publishing), the server (SSE
//! encoding, the bounded queue) and the HTTP connection add to a chunk.
//!
//! For each level N (`WEFT_SERVE_BENCH_LEVELS`, default `100,500,1000`) a fresh server is
//! started and N chats are opened at once (each on its own thread, as its own caller limit
//! allows); a level is *held* when every stream delivers every chunk and `[DONE]`. One JSON
//! line per level goes to stdout. Not part of `cargo test`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::BufRead as _;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use weft_provider::{
    AssistantMessage, LlmCapabilities, LlmModel, LlmRequest, LlmResponse, LlmStream, LlmStreamPart,
    Provider, StreamEvent, TokenUsage, UppError,
};

const TOKEN: &str = "bench-token-0123456789abcdef";

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// A model that streams `chunks` text chunks, one every `interval`, each carrying its send
/// time.
#[derive(Debug)]
struct Paced {
    id: String,
    chunks: usize,
    interval: Duration,
}

impl Paced {
    fn parse(id: &str) -> Paced {
        let (chunks, ms) = id.split_once('x').unwrap_or(("40", "250"));
        Paced {
            id: id.to_owned(),
            chunks: chunks.parse().unwrap_or(40),
            interval: Duration::from_millis(ms.parse().unwrap_or(250)),
        }
    }
}

const CAPABILITIES: LlmCapabilities = LlmCapabilities {
    streaming: true,
    tools: true,
    structured_output: false,
    image_input: false,
    document_input: false,
    video_input: false,
    audio_input: false,
};

fn response(text: String) -> LlmResponse {
    LlmResponse {
        message: AssistantMessage::text(text),
        usage: TokenUsage::default(),
        stop_reason: "end_turn".into(),
        data: None,
    }
}

impl LlmModel for Paced {
    fn model_id(&self) -> &str {
        &self.id
    }

    fn provider(&self) -> &str {
        "paced"
    }

    fn capabilities(&self) -> LlmCapabilities {
        CAPABILITIES
    }

    fn complete(
        &self,
        _request: LlmRequest,
    ) -> weft_provider::tool::BoxFuture<'_, Result<LlmResponse, UppError>> {
        Box::pin(async move { Ok(response("done".into())) })
    }

    fn stream(
        &self,
        request: LlmRequest,
    ) -> weft_provider::tool::BoxFuture<'_, Result<LlmStream, UppError>> {
        let (chunks, interval) = (self.chunks, self.interval);
        Box::pin(async move {
            let (tx, rx) = tokio::sync::mpsc::channel::<Result<LlmStreamPart, UppError>>(4);
            tokio::spawn(async move {
                let signal = request.signal.clone();
                let _ = tx
                    .send(Ok(LlmStreamPart::Event(StreamEvent::message_start())))
                    .await;
                let _ = tx
                    .send(Ok(LlmStreamPart::Event(StreamEvent::block_start(0))))
                    .await;
                let mut text = String::new();
                for _ in 0..chunks {
                    tokio::select! {
                        () = signal.cancelled() => return,
                        () = tokio::time::sleep(interval) => {}
                    }
                    let chunk = format!("t={};", now_us());
                    text.push_str(&chunk);
                    if tx
                        .send(Ok(LlmStreamPart::Event(StreamEvent::text_delta(0, chunk))))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                let _ = tx
                    .send(Ok(LlmStreamPart::Event(StreamEvent::block_stop(0))))
                    .await;
                let _ = tx.send(Ok(LlmStreamPart::Response(response(text)))).await;
            });
            let stream = futures_util::stream::unfold(rx, |mut rx| async move {
                rx.recv().await.map(|part| (part, rx))
            });
            Ok(Box::pin(stream) as LlmStream)
        })
    }
}

fn paced_provider() -> Arc<Provider> {
    Arc::new(Provider::new("paced", "0").with_llm(|id: &str, _: &Value| {
        let model: Arc<dyn LlmModel> = Arc::new(Paced::parse(id));
        Ok(model)
    }))
}

fn write_project(dir: &Path, model: &str) {
    for sub in ["agents", "prompts", ".weft"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    std::fs::write(
        dir.join("weft.toml"),
        format!("name = \"bench\"\nmodel = \"{model}\"\n"),
    )
    .unwrap();
    std::fs::write(
        dir.join("agents/a.toml"),
        "name = \"a\"\n[sideA]\nprompt = \"p\"\n",
    )
    .unwrap();
    std::fs::write(dir.join("prompts/p.toml"), "name = \"p\"\ntools = []\n").unwrap();
}

/// The child: a server of a fresh project on a free port (printed), until killed.
fn child(model: &str) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        weft_provider::http::install_crypto_provider();
        let dir = tempfile::tempdir().unwrap();
        write_project(dir.path(), model);
        let url = format!("sqlite:{}", dir.path().join(".weft/weft.db").display());
        let store = weft_store::Store::open(&url).await.unwrap();
        let mut providers = weft_runtime::default_providers();
        providers.register("paced", paced_provider);
        let weft = weft_runtime::Runtime::new(store)
            .with_providers(providers)
            .with_sessions(Arc::new(weft_standard::StandardSessions));
        let project = weft_standard::Project::load(dir.path()).unwrap();
        let mut config = weft_server::ServerConfig::new("127.0.0.1:0".parse().unwrap());
        config.auth = weft_server::Auth::Token(TOKEN.into());
        config.limits.runs_per_token = 1_000_000;
        // As `weft serve` runs them.
        config.launch.durability = weft_store::Durability::Sync;
        let listener = tokio::net::TcpListener::bind(config.addr).await.unwrap();
        println!("{}", listener.local_addr().unwrap().port());
        let server = weft_server::Server::new(config, project, weft);
        server
            .serve(listener, std::future::pending())
            .await
            .unwrap();
        drop(dir);
    });
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

#[derive(Default)]
struct Outcome {
    ok: bool,
    chunks: usize,
    latencies_us: Vec<u64>,
}

/// One chat: POST, read the UI message stream to `[DONE]`, time every chunk.
async fn one_chat(
    port: u16,
    thread: usize,
    open: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
) -> Outcome {
    let body = json!({"id": format!("t{thread}"), "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "stream"}]}
    ], "trigger": "submit-message"})
    .to_string();
    let request = format!(
        "POST /api/chat HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\n\
Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    one_stream(port, request, open, peak, None).await
}

/// One follower of a run's events (`GET /api/runs/{run}/events`), timing the chunks sent
/// after it joined.
async fn one_follower(
    port: u16,
    run: String,
    open: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
) -> Outcome {
    let request = format!(
        "GET /api/runs/{run}/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
Authorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
    );
    one_stream(port, request, open, peak, Some(now_us())).await
}

/// Sends `request`, reads the SSE response to its end and times every text chunk (sent
/// after `since`, when given). `ok` when the stream ended properly (`[DONE]` or `run_end`).
async fn one_stream(
    port: u16,
    request: String,
    open: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
    since: Option<u64>,
) -> Outcome {
    let mut outcome = Outcome::default();
    let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return outcome;
    };
    if stream.write_all(request.as_bytes()).await.is_err() {
        return outcome;
    }
    let mut buffer = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    let mut counted = false;
    let mut scanned = 0;
    loop {
        let n = match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let received = now_us();
        buffer.extend_from_slice(&chunk[..n]);
        if !counted && buffer.starts_with(b"HTTP/1.1 200") {
            counted = true;
            let now = open.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
        }
        // Each complete line from where the last scan stopped.
        while let Some(end) = buffer[scanned..].iter().position(|b| *b == b'\n') {
            let line = String::from_utf8_lossy(&buffer[scanned..scanned + end]).into_owned();
            scanned += end + 1;
            let Some(data) = line.trim_end().strip_prefix("data: ") else {
                continue;
            };
            if data == "[DONE]" {
                outcome.ok = true;
                continue;
            }
            let Ok(value) = serde_json::from_str::<Value>(data) else {
                continue;
            };
            let text = match value["type"].as_str() {
                Some("text-delta") => value["delta"].as_str(),
                Some("text_delta") => value["payload"]["text"].as_str(),
                Some("run_end") => {
                    outcome.ok = true;
                    None
                }
                _ => None,
            };
            for sent in text
                .unwrap_or_default()
                .split(';')
                .filter_map(|t| t.strip_prefix("t="))
                .filter_map(|t| t.parse::<u64>().ok())
            {
                outcome.chunks += 1;
                if since.is_none_or(|since| sent >= since) {
                    outcome.latencies_us.push(received.saturating_sub(sent));
                }
            }
        }
        if scanned > 64 * 1024 {
            buffer.drain(..scanned);
            scanned = 0;
        }
    }
    if counted {
        open.fetch_sub(1, Ordering::SeqCst);
    }
    outcome
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let at = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[at] as f64 / 1000.0
}

/// A server child process.
struct ServerChild {
    child: std::process::Child,
    pid: u32,
    port: u16,
}

impl ServerChild {
    fn spawn(chunks: usize, interval_ms: u64) -> ServerChild {
        let exe = std::env::current_exe().unwrap();
        let mut child = std::process::Command::new(exe)
            .env(
                "WEFT_SERVE_BENCH_CHILD",
                format!("paced:{chunks}x{interval_ms}"),
            )
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port: u16 = line.trim().parse().unwrap();
        ServerChild { child, pid, port }
    }
}

impl Drop for ServerChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a set of streams measured.
struct Measured {
    outcomes: Vec<Outcome>,
    peak_open: usize,
    rss_peak: u64,
    rss_at_peak_open: u64,
    elapsed: Duration,
}

/// Waits for `streams`, sampling the server's memory and the number of open streams.
async fn measure(
    pid: u32,
    before: u64,
    streams: Vec<tokio::task::JoinHandle<Outcome>>,
    open: &AtomicUsize,
    peak: &AtomicUsize,
) -> Measured {
    let started = Instant::now();
    let mut rss_peak = before;
    let mut rss_at_peak_open = before;
    let mut max_open = 0;
    while streams.iter().any(|c| !c.is_finished()) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let rss = rss_kib(pid);
        rss_peak = rss_peak.max(rss);
        let now_open = open.load(Ordering::SeqCst);
        if now_open >= max_open && now_open > 0 {
            max_open = now_open;
            rss_at_peak_open = rss_at_peak_open.max(rss);
        }
    }
    let elapsed = started.elapsed();
    let mut outcomes = Vec::new();
    for stream in streams {
        outcomes.push(stream.await.unwrap());
    }
    Measured {
        outcomes,
        peak_open: peak.load(Ordering::SeqCst),
        rss_peak,
        rss_at_peak_open,
        elapsed,
    }
}

fn report(
    kind: &str,
    n: usize,
    chunks: usize,
    interval_ms: u64,
    before: u64,
    m: &Measured,
) -> Value {
    let held = m
        .outcomes
        .iter()
        .filter(|o| o.ok && o.chunks == chunks)
        .count();
    let mut latencies: Vec<u64> = m
        .outcomes
        .iter()
        .flat_map(|o| o.latencies_us.iter().copied())
        .collect();
    latencies.sort_unstable();
    let mean = latencies.iter().sum::<u64>() as f64 / latencies.len().max(1) as f64 / 1000.0;
    json!({
        "kind": kind,
        "streams": n,
        "held": held,
        "peak_open": m.peak_open,
        "chunks_per_stream": chunks,
        "chunk_interval_ms": interval_ms,
        "chunks_timed": latencies.len(),
        "latency_ms_p50": percentile(&latencies, 0.5),
        "latency_ms_p90": percentile(&latencies, 0.9),
        "latency_ms_p99": percentile(&latencies, 0.99),
        "latency_ms_max": percentile(&latencies, 1.0),
        "latency_ms_mean": mean,
        "rss_before_kib": before,
        "rss_peak_kib": m.rss_peak,
        "rss_kib_per_open_stream":
            m.rss_at_peak_open.saturating_sub(before) as f64 / m.peak_open.max(1) as f64,
        "wall_s": m.elapsed.as_secs_f64(),
    })
}

fn client_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// N concurrent chats, each its own run and stream.
fn chats(n: usize, chunks: usize, interval_ms: u64) -> Value {
    let server = ServerChild::spawn(chunks, interval_ms);
    let (pid, port) = (server.pid, server.port);
    client_runtime().block_on(async {
        // One warm-up chat (first-use costs: the store's pages, the provider), then the
        // baseline.
        let warm = one_chat(port, usize::MAX, Arc::default(), Arc::default()).await;
        assert!(warm.ok, "the warm-up chat failed");
        tokio::time::sleep(Duration::from_millis(500)).await;
        let before = rss_kib(pid);
        let open = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let streams = (0..n)
            .map(|i| tokio::spawn(one_chat(port, i, open.clone(), peak.clone())))
            .collect();
        let measured = measure(pid, before, streams, &open, &peak).await;
        report("chats", n, chunks, interval_ms, before, &measured)
    })
}

/// N followers of one run's events: the memory and latency of a stream alone.
fn followers(n: usize, chunks: usize, interval_ms: u64) -> Value {
    let server = ServerChild::spawn(chunks, interval_ms);
    let (pid, port) = (server.pid, server.port);
    client_runtime().block_on(async {
        let warm = one_chat(port, usize::MAX, Arc::default(), Arc::default());
        let leader = tokio::spawn(warm);
        // The leader's run id: the newest run, read from its chat's stored messages once
        // it has started.
        let mut run = None;
        for _ in 0..200 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let raw = get(port, &format!("/api/chat/t{}/messages", usize::MAX)).await;
            if let Some(at) = raw.find("\"id\":\"msg-") {
                let rest = &raw[at + "\"id\":\"msg-".len()..];
                run = rest.split('"').next().map(str::to_owned);
            }
            if run.is_some() {
                break;
            }
            // Not stored yet: the stream endpoint knows it once the run has begun.
            let raw = get(port, &format!("/api/chat/t{}/stream", usize::MAX)).await;
            if let Some(at) = raw.find("\"messageId\":\"msg-") {
                let rest = &raw[at + "\"messageId\":\"msg-".len()..];
                run = rest.split('"').next().map(str::to_owned);
                break;
            }
        }
        let run = run.expect("the leader's run started");
        tokio::time::sleep(Duration::from_millis(300)).await;
        let before = rss_kib(pid);
        let open = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let streams = (0..n)
            .map(|_| tokio::spawn(one_follower(port, run.clone(), open.clone(), peak.clone())))
            .collect();
        let measured = measure(pid, before, streams, &open, &peak).await;
        let _ = leader.await;
        report("followers", n, chunks, interval_ms, before, &measured)
    })
}

/// The head of a GET's response and its first bytes (enough to find an id).
async fn get(port: u16, path: &str) -> String {
    let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return String::new();
    };
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
    );
    if stream.write_all(request.as_bytes()).await.is_err() {
        return String::new();
    }
    let mut out = Vec::new();
    let mut chunk = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
    while out.len() < 16 * 1024 && !out.windows(9).any(|w| w == b"messageId") {
        match tokio::time::timeout_at(deadline, stream.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => out.extend_from_slice(&chunk[..n]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn main() {
    if let Ok(model) = std::env::var("WEFT_SERVE_BENCH_CHILD") {
        child(&model);
        return;
    }
    let levels: Vec<usize> = std::env::var("WEFT_SERVE_BENCH_LEVELS")
        .unwrap_or_else(|_| "100,500,1000".into())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    let chunks: usize = std::env::var("WEFT_SERVE_BENCH_CHUNKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let interval: u64 = std::env::var("WEFT_SERVE_BENCH_INTERVAL_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(250);
    for n in levels {
        println!("{}", chats(n, chunks, interval));
    }
    let followers_levels: Vec<usize> = std::env::var("WEFT_SERVE_BENCH_FOLLOWERS")
        .unwrap_or_else(|_| "1000".into())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    for n in followers_levels {
        // A longer run, so every follower has joined well before it ends.
        println!("{}", followers(n, chunks * 3, interval));
    }
}

//! Test support: a Standard Agents project with a scripted model, and `weft serve`'s server
//! running in-process on a free loopback port over a SQLite store in the project.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use weft_server::{Auth, Server, ServerConfig};

/// A project in `dir`: one `ai_human` agent `a` (prompt `p` with `tools`) whose model is
/// `scripted-turns:script.json` with `script`; `extra` is added to `weft.toml`.
pub fn scripted_project(dir: &Path, extra: &str, tools: &[&str], script: &Value) {
    for sub in ["agents", "prompts"] {
        std::fs::create_dir_all(dir.join(sub)).expect("mkdir");
    }
    std::fs::write(
        dir.join("weft.toml"),
        format!("name = \"test\"\nmodel = \"scripted-turns:script.json\"\n{extra}"),
    )
    .expect("weft.toml");
    std::fs::write(
        dir.join("agents/a.toml"),
        "name = \"a\"\ndescription = \"The test agent.\"\n[sideA]\nprompt = \"p\"\n",
    )
    .expect("agent");
    let tools: Vec<String> = tools.iter().map(|t| format!("{t:?}")).collect();
    std::fs::write(
        dir.join("prompts/p.toml"),
        format!("name = \"p\"\ntools = [{}]\n", tools.join(", ")),
    )
    .expect("prompt");
    std::fs::write(dir.join("script.json"), script.to_string()).expect("script");
}

/// A server running in this process.
pub struct TestServer {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// The token it requires.
    pub token: String,
    /// The project folder.
    pub dir: PathBuf,
    /// Its state (the runtime, the store).
    pub state: weft_server::AppState,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

/// The store URL of a project's server.
pub fn store_url(dir: &Path) -> String {
    format!("sqlite:{}", dir.join(".weft/weft.db").display())
}

/// Starts a server of the project in `dir`.
pub async fn start(dir: &Path) -> TestServer {
    start_with(dir, |_| {}).await
}

/// Starts a server of the project in `dir`, its configuration adjusted by `configure`.
pub async fn start_with(dir: &Path, configure: impl FnOnce(&mut ServerConfig)) -> TestServer {
    weft_provider::http::install_crypto_provider();
    std::fs::create_dir_all(dir.join(".weft")).expect("mkdir .weft");
    let store = weft_store::Store::open(&store_url(dir))
        .await
        .expect("store");
    let runtime = weft_runtime::Runtime::new(store)
        .with_providers(weft_runtime::default_providers())
        .with_sessions(Arc::new(weft_standard::StandardSessions));
    let project = weft_standard::Project::load(dir).expect("project");
    let mut config = ServerConfig::new("127.0.0.1:0".parse().expect("addr"));
    config.auth = Auth::Token("test-token-0123456789".into());
    configure(&mut config);
    let token = match &config.auth {
        Auth::Token(token) => token.clone(),
        Auth::Disabled => String::new(),
    };
    let listener = tokio::net::TcpListener::bind(config.addr)
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let server = Server::new(config, project, runtime);
    let state = server.state().clone();
    let stop = CancellationToken::new();
    let task = tokio::spawn(server.serve(listener, stop.clone().cancelled_owned()));
    TestServer {
        base,
        token,
        dir: dir.to_owned(),
        state,
        stop,
        task,
    }
}

impl TestServer {
    /// `base` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A request with the token.
    pub fn get(&self, path: &str) -> reqwest::RequestBuilder {
        reqwest::Client::new()
            .get(self.url(path))
            .bearer_auth(&self.token)
    }

    /// A JSON POST with the token.
    pub fn post(&self, path: &str, body: &Value) -> reqwest::RequestBuilder {
        reqwest::Client::new()
            .post(self.url(path))
            .bearer_auth(&self.token)
            .json(body)
    }

    /// The stored conversation of `thread` as `UIMessage`s (`GET /api/chat/{id}/messages`).
    pub async fn messages(&self, thread: &str) -> Vec<Value> {
        self.get(&format!("/api/chat/{thread}/messages"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// Stops it gracefully (runs in progress end interrupted) and waits.
    pub async fn stop(self) {
        self.stop.cancel();
        self.task.await.expect("server task").expect("server");
    }
}

/// The JSON of each `data:` line of an SSE body (`[DONE]` as the string "[DONE]").
pub fn sse_data(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap_or_else(|_| Value::String(d.to_owned())))
        .collect()
}

/// The `type`s of UI message stream chunks.
pub fn types(chunks: &[Value]) -> Vec<String> {
    chunks
        .iter()
        .map(|c| {
            c["type"]
                .as_str()
                .unwrap_or(c.as_str().unwrap_or("?"))
                .to_owned()
        })
        .collect()
}

/// A chat request with one new user message `text` (id `id`) after `history`.
pub fn chat(thread: &str, history: &[Value], id: &str, text: &str) -> Value {
    let mut messages = history.to_vec();
    messages.push(
        serde_json::json!({"id": id, "role": "user", "parts": [{"type": "text", "text": text}]}),
    );
    serde_json::json!({"id": thread, "messages": messages, "trigger": "submit-message", "messageId": null})
}

//! A project with a scripted model served in-process, and an HTTP client for it (shared by
//! the run API's tests).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use weft_server::{Auth, Server, ServerConfig};
use weft_standard::{Launch, Project};
use weft_store::{Durability, Store};

/// A served project.
pub(crate) struct Served {
    /// The temporary directory (project in `p/`, store in `weft.db`).
    pub(crate) dir: tempfile::TempDir,
    /// `http://127.0.0.1:PORT`.
    pub(crate) base: String,
    /// The token.
    pub(crate) token: String,
    /// A client.
    pub(crate) http: reqwest::Client,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// Writes a project whose agent `a` answers with `script` (a `scripted-turns` script: the
/// k-th answer of a thread is response k), with `tools`, and `extra` lines in `weft.toml`.
pub(crate) fn project(dir: &Path, extra: &str, tools: &[&str], script: &Value) {
    for sub in ["agents", "prompts"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    std::fs::write(
        dir.join("weft.toml"),
        format!("model = \"scripted-turns:script.json\"\n{extra}"),
    )
    .unwrap();
    std::fs::write(
        dir.join("agents/a.toml"),
        "name = \"a\"\ndescription = \"The test agent\"\n[sideA]\nprompt = \"p\"\n",
    )
    .unwrap();
    let tools: Vec<String> = tools.iter().map(|t| format!("{t:?}")).collect();
    std::fs::write(
        dir.join("prompts/p.toml"),
        format!("name = \"p\"\ntools = [{}]\n", tools.join(", ")),
    )
    .unwrap();
    std::fs::write(dir.join("script.json"), script.to_string()).unwrap();
}

impl Served {
    /// Serves a project made by [`project`] on 127.0.0.1, port 0.
    pub(crate) async fn start(extra: &str, tools: &[&str], script: &Value) -> Served {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("p");
        project(&p, extra, tools, script);
        Self::serve(dir).await
    }

    /// Serves the project in `dir/p` with the store `dir/weft.db`.
    pub(crate) async fn serve(dir: tempfile::TempDir) -> Served {
        let p = dir.path().join("p");
        let project = Project::load(&p).unwrap();
        let db: PathBuf = dir.path().join("weft.db");
        let store = Store::open(&format!("sqlite:{}", db.display()))
            .await
            .unwrap();
        let runtime = weft_runtime::Runtime::new(store)
            .with_providers(weft_runtime::default_providers())
            .with_sessions(Arc::new(weft_standard::StandardSessions));
        let mut config = ServerConfig::new("127.0.0.1:0".parse::<SocketAddr>().unwrap());
        let token = "test-token-0123456789abcdef".to_owned();
        config.auth = Auth::Token(token.clone());
        config.launch = Launch {
            durability: Durability::Sync,
            ..Launch::default()
        };
        config.stream.idle_timeout = Duration::from_millis(200);
        let server = Server::new(config, project, runtime);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            server
                .serve(listener, async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
        Served {
            dir,
            base,
            token,
            http: {
                weft_provider::http::install_crypto_provider();
                reqwest::Client::new()
            },
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Stops the server (its runs stop, resumable) and gives the directory back.
    pub(crate) async fn shutdown(mut self) -> tempfile::TempDir {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.unwrap();
        }
        let empty = tempfile::tempdir().unwrap();
        std::mem::replace(&mut self.dir, empty)
    }

    /// The project's directory.
    pub(crate) fn project_dir(&self) -> PathBuf {
        self.dir.path().join("p")
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A request with the token in `x-api-key` (the LangGraph SDK's header).
    pub(crate) fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, self.url(path))
            .header("x-api-key", &self.token)
    }

    /// `GET path` → (status, JSON).
    pub(crate) async fn get(&self, path: &str) -> (u16, Value) {
        let response = self
            .request(reqwest::Method::GET, path)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// `POST path` with `body` → (status, JSON).
    pub(crate) async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let response = self
            .request(reqwest::Method::POST, path)
            .json(body)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// A new thread's id.
    pub(crate) async fn thread(&self) -> String {
        let (status, thread) = self.post("/threads", &json!({})).await;
        assert_eq!(status, 200, "{thread}");
        thread["thread_id"].as_str().unwrap().to_owned()
    }

    /// Reads a whole SSE response: its events as (id, event, data).
    pub(crate) async fn sse(&self, request: reqwest::RequestBuilder) -> (u16, Vec<Part>) {
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = tokio::time::timeout(Duration::from_secs(60), response.text())
            .await
            .expect("the stream ended")
            .unwrap();
        (status, parse_sse(&text))
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// One server-sent event.
#[derive(Debug, Clone)]
pub(crate) struct Part {
    /// `id:`.
    pub(crate) id: Option<u64>,
    /// `event:`.
    pub(crate) event: String,
    /// `data:` as JSON (null when absent).
    pub(crate) data: Value,
}

/// The events of an SSE body.
pub(crate) fn parse_sse(text: &str) -> Vec<Part> {
    let mut parts = Vec::new();
    for block in text.split("\n\n") {
        let mut part = Part {
            id: None,
            event: String::new(),
            data: Value::Null,
        };
        let mut data = String::new();
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("id:") {
                part.id = v.trim().parse().ok();
            } else if let Some(v) = line.strip_prefix("event:") {
                part.event = v.trim().to_owned();
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push_str(v.strip_prefix(' ').unwrap_or(v));
            }
        }
        if part.event.is_empty() && data.is_empty() {
            continue;
        }
        part.data = serde_json::from_str(&data).unwrap_or(Value::Null);
        parts.push(part);
    }
    parts
}

/// Waits (up to a minute) until `check` holds.
pub(crate) async fn until<F, Fut>(mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..1200 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the condition did not hold within a minute");
}

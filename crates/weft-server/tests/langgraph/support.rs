//! The run API's tests' client side over `tests/common`'s in-process server: requests with
//! the token in `x-api-key`, JSON helpers, SSE parts with their ids.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use weft_standard::Launch;
use weft_store::Durability;

use crate::common;

/// A served project (the tests' harness, `tests/common`, with the run API's client side).
pub(crate) struct Served {
    /// The temporary directory (the project in `p/`).
    pub(crate) dir: tempfile::TempDir,
    /// `http://127.0.0.1:PORT`.
    pub(crate) base: String,
    /// The token.
    pub(crate) token: String,
    /// A client.
    pub(crate) http: reqwest::Client,
    server: Option<common::TestServer>,
}

impl Served {
    /// Serves a project of one agent `a` answering with `script` (a `scripted-turns`
    /// script: the k-th answer of a thread is response k), with `tools`, and `extra` lines
    /// in `weft.toml`.
    pub(crate) async fn start(extra: &str, tools: &[&str], script: &Value) -> Served {
        let dir = tempfile::tempdir().unwrap();
        common::scripted_project(&dir.path().join("p"), extra, tools, script);
        Self::serve(dir).await
    }

    /// Serves the project in `dir/p` (its store in the project's `.weft/`).
    pub(crate) async fn serve(dir: tempfile::TempDir) -> Served {
        let server = common::start_with(&dir.path().join("p"), |config| {
            config.launch = Launch {
                durability: Durability::Sync,
                ..Launch::default()
            };
            config.stream.idle_timeout = Duration::from_millis(200);
        })
        .await;
        Served {
            dir,
            base: server.base.clone(),
            token: server.token.clone(),
            http: reqwest::Client::new(),
            server: Some(server),
        }
    }

    /// A new read-only token (`weft tokens create --read-only`).
    pub(crate) async fn read_only_token(&self) -> String {
        use weft_store::Tokens as _;
        let server = self.server.as_ref().unwrap();
        let (_, secret) = server
            .state
            .store()
            .create_token("read-only", weft_store::TokenScope::Read)
            .await
            .unwrap();
        secret.expose().to_owned()
    }

    /// Stops the server (its runs stop, resumable) and gives the directory back.
    pub(crate) async fn shutdown(mut self) -> tempfile::TempDir {
        if let Some(server) = self.server.take() {
            server.stop().await;
        }
        self.dir
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

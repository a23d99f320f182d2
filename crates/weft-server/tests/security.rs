//! `weft serve`'s guard over real HTTP: every route (streams included) needs a token, a
//! stored read-only token cannot write, a revoked one is refused from the next request on,
//! bodies and messages have limits, `Host` and `Origin` are checked (DNS rebinding,
//! cross-site requests; CORS only for allowed origins), ids in paths cannot reach outside the
//! project (nor can the agent's tools), a caller drives a bounded number of runs, and no
//! secret reaches a response or an event.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use weft_store::{Runs as _, TokenScope, Tokens as _};

use common::{TestServer, chat, scripted_project, sse_data, start, start_with};

/// A project whose model answers `text`.
fn answering(dir: &Path, text: &str) {
    scripted_project(dir, "", &[], &json!({"responses": [{"text": text}]}));
}

/// A project whose first answer takes `ms` milliseconds.
fn slow(dir: &Path, ms: u64) {
    let script = json!({"responses": [
        {"text": "slow answer", "delayMs": ms},
        {"text": "second"}
    ]});
    scripted_project(dir, "", &[], &script);
}

/// The status of `path` requested with `builder`.
async fn status(builder: reqwest::RequestBuilder) -> u16 {
    builder.send().await.unwrap().status().as_u16()
}

fn client() -> reqwest::Client {
    reqwest::Client::new()
}

/// Waits (generously) until the thread's newest run has stopped.
async fn wait_until_stopped(server: &TestServer, thread: &str) -> weft_store::RunRecord {
    for _ in 0..600 {
        if let Some(run) = server
            .state
            .store()
            .thread_runs(thread)
            .await
            .unwrap()
            .into_iter()
            .next()
            && run.status != weft_store::RunStatus::Running
            && !server.state.runtime().is_live(&run.run_id)
        {
            return run;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the run of {thread} did not stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_streams_included_needs_a_valid_token() {
    let dir = tempfile::tempdir().unwrap();
    answering(dir.path(), "hello");
    let server = start(dir.path()).await;
    // A run to stream.
    let body = server
        .post("/api/chat", &chat("t1", &[], "u1", "hi"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let run_id = wait_until_stopped(&server, "t1").await.run_id;
    assert!(body.contains("hello"), "{body}");

    for path in [
        "/api/info".to_owned(),
        "/api/chat/t1/messages".to_owned(),
        "/api/chat/t1/stream".to_owned(),
        format!("/api/runs/{run_id}"),
        format!("/api/runs/{run_id}/events"),
    ] {
        assert_eq!(
            status(client().get(server.url(&path))).await,
            401,
            "no token: {path}"
        );
        assert_eq!(
            status(
                client()
                    .get(server.url(&path))
                    .bearer_auth("test-token-0123456789-wrong")
            )
            .await,
            401,
            "a wrong token: {path}"
        );
        let ok = status(server.get(&path)).await;
        assert!(ok == 200 || ok == 204, "the token: {path} -> {ok}");
    }
    let no_token = client()
        .post(server.url("/api/chat"))
        .json(&chat("t2", &[], "u1", "hi"))
        .send()
        .await
        .unwrap();
    assert_eq!(no_token.status(), 401);
    let error: Value = no_token.json().await.unwrap();
    assert_eq!(error["error"]["code"], "unauthorized");
    assert!(
        server
            .state
            .store()
            .thread_runs("t2")
            .await
            .unwrap()
            .is_empty(),
        "a refused request starts nothing"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_tokens_are_scoped_and_revocable() {
    let dir = tempfile::tempdir().unwrap();
    answering(dir.path(), "hello");
    let server = start(dir.path()).await;
    let store = server.state.store();
    let (_, reader) = store
        .create_token("reader", TokenScope::Read)
        .await
        .unwrap();
    let (_, writer) = store
        .create_token("writer", TokenScope::Full)
        .await
        .unwrap();
    let get = |token: &str, path: &str| client().get(server.url(path)).bearer_auth(token);
    let post_chat = |token: &str, thread: &str| {
        client()
            .post(server.url("/api/chat"))
            .bearer_auth(token)
            .json(&chat(thread, &[], "u1", "hi"))
    };

    // Read-only: reads pass, writes are 403 and start nothing.
    assert_eq!(status(get(reader.expose(), "/api/info")).await, 200);
    assert_eq!(
        status(get(reader.expose(), "/api/chat/t1/messages")).await,
        200
    );
    let refused = post_chat(reader.expose(), "t1").send().await.unwrap();
    assert_eq!(refused.status(), 403);
    let error: Value = refused.json().await.unwrap();
    assert_eq!(error["error"]["code"], "read_only");
    assert_eq!(
        status(
            client()
                .post(server.url("/api/chat/t1/stop"))
                .bearer_auth(reader.expose())
        )
        .await,
        403
    );
    assert!(store.thread_runs("t1").await.unwrap().is_empty());

    // Full: writes pass.
    let answer = post_chat(writer.expose(), "t1").send().await.unwrap();
    assert_eq!(answer.status(), 200);
    assert!(answer.text().await.unwrap().contains("hello"));

    // Revoked: refused from the next request on, streams included.
    store.revoke_token("writer").await.unwrap();
    assert_eq!(status(get(writer.expose(), "/api/info")).await, 401);
    assert_eq!(
        status(get(writer.expose(), "/api/chat/t1/stream")).await,
        401
    );
    assert_eq!(status(post_chat(writer.expose(), "t2")).await, 401);
    // The reader is untouched.
    assert_eq!(status(get(reader.expose(), "/api/info")).await, 200);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_and_messages_have_limits() {
    let dir = tempfile::tempdir().unwrap();
    answering(dir.path(), "hello");
    let server = start_with(dir.path(), |config| {
        config.limits.body_bytes = 4096;
        config.limits.message_chars = 100;
    })
    .await;
    let oversized = chat("t1", &[], "u1", &"x".repeat(8192));
    let response = server.post("/api/chat", &oversized).send().await.unwrap();
    assert_eq!(response.status(), 413, "a body over limits.body_bytes");
    let long = chat("t1", &[], "u1", &"é".repeat(101));
    let response = server.post("/api/chat", &long).send().await.unwrap();
    assert_eq!(
        response.status(),
        413,
        "a message over limits.message_chars"
    );
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["code"], "message_too_large");
    assert!(
        server
            .state
            .store()
            .thread_runs("t1")
            .await
            .unwrap()
            .is_empty(),
        "nothing ran"
    );
    // At the limit it runs.
    let fits = chat("t1", &[], "u1", &"é".repeat(100));
    assert_eq!(status(server.post("/api/chat", &fits)).await, 200);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn origins_and_hosts_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    answering(dir.path(), "hello");
    let server = start_with(dir.path(), |config| {
        config.allowed_origins = vec!["http://app.example".into()];
    })
    .await;
    let acao = "access-control-allow-origin";

    // A page of another origin: refused, and no CORS header lets the browser read it.
    let refused = server
        .get("/api/info")
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
    assert!(refused.headers().get(acao).is_none());
    let preflight = client()
        .request(reqwest::Method::OPTIONS, server.url("/api/chat"))
        .header("origin", "http://evil.example")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert!(preflight.headers().get(acao).is_none());
    let cross_post = server
        .post("/api/chat", &chat("t1", &[], "u1", "hi"))
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(cross_post.status(), 403);
    assert!(cross_post.headers().get(acao).is_none());
    assert!(
        server
            .state
            .store()
            .thread_runs("t1")
            .await
            .unwrap()
            .is_empty(),
        "a cross-site request starts nothing"
    );

    // An allowed origin: CORS headers on the preflight (no token needed for it) and on the
    // response.
    let preflight = client()
        .request(reqwest::Method::OPTIONS, server.url("/api/chat"))
        .header("origin", "http://app.example")
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization, content-type",
        )
        .send()
        .await
        .unwrap();
    assert!(preflight.status().is_success());
    assert_eq!(preflight.headers()[acao], "http://app.example");
    let methods = preflight.headers()["access-control-allow-methods"]
        .to_str()
        .unwrap();
    assert!(methods.contains("POST"), "{methods}");
    let headers = preflight.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap();
    assert!(headers.contains("authorization"), "{headers}");
    let allowed = server
        .get("/api/info")
        .header("origin", "http://app.example")
        .send()
        .await
        .unwrap();
    assert_eq!(allowed.status(), 200);
    assert_eq!(allowed.headers()[acao], "http://app.example");
    // CORS does not replace the token.
    let no_token = client()
        .get(server.url("/api/info"))
        .header("origin", "http://app.example")
        .send()
        .await
        .unwrap();
    assert_eq!(no_token.status(), 401);

    // DNS rebinding: a request naming another host is refused, even with the token.
    let rebound = server
        .get("/api/info")
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 403);
    let error: Value = rebound.json().await.unwrap();
    assert_eq!(error["error"]["code"], "host_not_allowed");
    let port = server.base.rsplit(':').next().unwrap().to_owned();
    assert_eq!(
        status(
            server
                .get("/api/info")
                .header("host", format!("localhost:{port}"))
        )
        .await,
        200
    );
    server.stop().await;
}

/// Every file under `dir`, relative, skipping the store's folder.
fn files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name().is_some_and(|n| n == ".weft") {
                continue;
            }
            if path.is_dir() {
                stack.push(path.clone());
            }
            out.push(path.strip_prefix(dir).unwrap().display().to_string());
        }
    }
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paths_in_requests_and_tools_stay_inside_the_project() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("project");
    let script = json!({"responses": [
        {"toolCalls": [
            {"id": "c1", "name": "write_file", "arguments": {"path": "../outside.txt", "content": "escaped\n"}},
            {"id": "c2", "name": "write_file", "arguments": {"path": "/tmp/weft-security-escape.txt", "content": "escaped\n"}}
        ]},
        {"text": "done"}
    ]});
    scripted_project(&dir, "", &["write_file"], &script);
    let server = start(&dir).await;
    let before = files(root.path());

    for id in ["../x", "..", "a/b", "..%2F..%2Fetc", "/etc/passwd", "a\\b"] {
        let response = server
            .post("/api/chat", &chat(id, &[], "u1", "hi"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "thread id {id:?}");
    }
    for path in [
        "/api/chat/..%2F..%2Fetc/stream",
        "/api/chat/..%2Fx/messages",
        "/api/chat/a%2Fb/messages",
        "/api/agents/a/chat/..%2F..%2Fetc/stream",
    ] {
        let code = status(server.get(path)).await;
        assert!(code == 400 || code == 404, "{path} -> {code}");
    }
    let code = status(
        client()
            .post(server.url("/api/chat/..%2F..%2Fetc/stop"))
            .bearer_auth(&server.token),
    )
    .await;
    assert!(code == 400 || code == 404, "stop -> {code}");
    for path in ["/api/runs/..%2F..%2Fetc", "/api/runs/..%2F..%2Fetc/events"] {
        assert_eq!(status(server.get(path)).await, 404, "{path}");
    }
    assert_eq!(files(root.path()), before, "no request created anything");

    // The agent's tools are confined to the project too.
    let body = server
        .post("/api/chat", &chat("t1", &[], "u1", "escape"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let chunks = sse_data(&body);
    let outputs: Vec<&Value> = chunks
        .iter()
        .filter(|c| c["type"] == "tool-output-available" || c["type"] == "tool-output-error")
        .collect();
    assert_eq!(outputs.len(), 2, "{chunks:#?}");
    assert!(!root.path().join("outside.txt").exists());
    assert!(!Path::new("/tmp/weft-security-escape.txt").exists());
    assert_eq!(files(root.path()), before, "the tools wrote nothing");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_drives_a_bounded_number_of_runs() {
    let dir = tempfile::tempdir().unwrap();
    slow(dir.path(), 30_000);
    let server = start_with(dir.path(), |config| config.limits.runs_per_token = 1).await;
    let first = server
        .post("/api/chat", &chat("t1", &[], "u1", "hi"))
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 200);
    let second = server
        .post("/api/chat", &chat("t2", &[], "u1", "hi"))
        .send()
        .await
        .unwrap();
    assert_eq!(second.status(), 429);
    let error: Value = second.json().await.unwrap();
    assert_eq!(error["error"]["code"], "too_many_runs");
    assert!(
        server
            .state
            .store()
            .thread_runs("t2")
            .await
            .unwrap()
            .is_empty()
    );

    // Another caller has its own count.
    let (_, other) = server
        .state
        .store()
        .create_token("other", TokenScope::Full)
        .await
        .unwrap();
    let third = client()
        .post(server.url("/api/chat"))
        .bearer_auth(other.expose())
        .json(&chat("t3", &[], "u1", "hi"))
        .send()
        .await
        .unwrap();
    assert_eq!(third.status(), 200);

    // Stopping the first run gives its place back.
    let stopped: Value = server
        .post("/api/chat/t1/stop", &json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(stopped["stopped"], true);
    drop(first);
    let mut admitted = false;
    for _ in 0..200 {
        let response = server
            .post("/api/chat", &chat("t2", &[], "u1", "hi"))
            .send()
            .await
            .unwrap();
        if response.status() == 200 {
            admitted = true;
            break;
        }
        assert_eq!(response.status(), 429);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(admitted, "the permit came back when the run stopped");
    drop(third);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_reaches_a_response_or_an_event() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "sk-weftsecret-0123456789abcdef";
    let script = json!({"responses": [
        {"toolCalls": [{"id": "c1", "name": "write_file",
            "arguments": {"path": "note.txt", "content": format!("key={secret}\n")}}]},
        {"text": format!("The key is {secret} as you asked.")}
    ]});
    scripted_project(
        dir.path(),
        &format!("[env]\nSERVICE_KEY = \"{secret}\"\n"),
        &["write_file"],
        &script,
    );
    let server = start(dir.path()).await;
    let mut seen = Vec::new();
    let stream = server
        .post("/api/chat", &chat("t1", &[], "u1", "What is the key?"))
        .send()
        .await
        .unwrap();
    seen.push(format!("{:?}", stream.headers()));
    seen.push(stream.text().await.unwrap());
    let run = wait_until_stopped(&server, "t1").await;
    for path in [
        format!("/api/runs/{}", run.run_id),
        format!("/api/runs/{}/events", run.run_id),
        "/api/chat/t1/messages".to_owned(),
        "/api/info".to_owned(),
    ] {
        let response = server.get(&path).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        seen.push(format!("{:?}", response.headers()));
        seen.push(response.text().await.unwrap());
    }
    let all = seen.join("\n");
    assert!(
        all.contains("[REDACTED]"),
        "the secret was there to redact: {all}"
    );
    assert!(!all.contains(secret), "a secret leaked: {all}");
    assert!(
        !all.contains(&server.token),
        "the server's token leaked: {all}"
    );
    // The tool itself got the real value (redaction is for what is shown and stored).
    assert_eq!(
        std::fs::read_to_string(dir.path().join("note.txt")).unwrap(),
        format!("key={secret}\n")
    );
    server.stop().await;
}

//! Issue 17 item 4: pointing a project at a proxy or a local server. `weft run --base-url`,
//! `[providers.NAME] baseUrl` and `[env]` in `weft.toml` reach the provider; the base URL
//! settled at the start is recorded with the run (never the key), so `weft resume` reaches
//! the same server without the environment variable that started the run.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};
use weft_testkit::{ReplayServer, Reply};

const SECRET: &str = "sk-compatible-secret-0123456789";

/// Runs `weft` off the async runtime (the replay server lives on it), with the compatible
/// server's key set and `env` added.
async fn weft(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let cwd = cwd.to_path_buf();
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    tokio::task::spawn_blocking(move || {
        let mut command = Command::new(env!("CARGO_BIN_EXE_weft"));
        command
            .args(&args)
            .current_dir(&cwd)
            .env_remove("WEFT_DATABASE_URL")
            .env_remove("WEFT_OPENAI_COMPATIBLE_BASE_URL")
            .env("WEFT_OPENAI_COMPATIBLE_API_KEY", SECRET);
        for (k, v) in &env {
            command.env(k, v);
        }
        command.output().expect("weft runs")
    })
    .await
    .expect("join")
}

fn say(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn project(dir: &Path, weft_toml: &str) {
    for sub in ["agents", "prompts"] {
        std::fs::create_dir_all(dir.join(sub)).expect("mkdir");
    }
    std::fs::write(dir.join("weft.toml"), weft_toml).expect("weft.toml");
    std::fs::write(
        dir.join("agents/a.toml"),
        "name = \"a\"\n[sideA]\nprompt = \"p\"\n",
    )
    .expect("agent");
    std::fs::write(dir.join("prompts/p.toml"), "name = \"p\"\n").expect("prompt");
}

/// A Chat Completions answer, streamed.
fn answer(text: &str) -> Reply {
    let chunk = json!({"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "llama3.2",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": null}]});
    let end = json!({"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "llama3.2",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}});
    Reply::sse(
        &format!("data: {chunk}\n\ndata: {end}\n\ndata: [DONE]\n\n"),
        64,
    )
}

/// A refusal that is not retried.
fn bad_request() -> Reply {
    Reply::json(
        400,
        &json!({"error": {"message": "model is loading", "type": "invalid_request_error"}}),
    )
}

fn run_id(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .expect("run id first")
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_base_url_is_recorded_so_resume_needs_no_environment() {
    let server = ReplayServer::start(vec![bad_request(), answer("hello from the server")]).await;
    let url = format!("{}/v1", server.url());
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("p");
    project(&p, "model = \"openai-compatible:llama3.2\"\n");
    // Started with the environment variable: the server refuses once, the run fails with
    // the resume command.
    let out = weft(
        dir.path(),
        &["run", "p", "hi"],
        &[("WEFT_OPENAI_COMPATIBLE_BASE_URL", &url)],
    )
    .await;
    assert_eq!(out.status.code(), Some(1), "{}", say(&out));
    let run = run_id(&out);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!("resume with: weft resume {run}")),
        "{}",
        say(&out)
    );
    // The run recorded the base URL, and not the key.
    let show = weft(&p, &["runs", "show", &run, "--json"], &[]).await;
    let shown: Value = serde_json::from_slice(&show.stdout).expect("json");
    assert_eq!(
        shown["spec"]["program"]["baseUrls"]["openai-compatible"], url,
        "{shown}"
    );
    assert!(!shown.to_string().contains(SECRET), "{shown}");
    // Resumed without the variable: the same server answers.
    let out = weft(&p, &["resume", &run], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", say(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("hello from the server"),
        "{}",
        say(&out)
    );
    let received = server.received();
    assert_eq!(received.len(), 2);
    assert!(
        received
            .iter()
            .all(|r| r.path.ends_with("/v1/chat/completions")),
        "{:?}",
        received.iter().map(|r| &r.path).collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_project_names_the_server_and_the_flag_overrides_it() {
    let server =
        ReplayServer::start(vec![answer("from the project"), answer("from the flag")]).await;
    let url = format!("{}/v1", server.url());
    let dir = tempfile::tempdir().expect("tempdir");
    // `[providers.openai-compatible] baseUrl`.
    let p = dir.path().join("p");
    project(
        &p,
        &format!(
            "model = \"openai-compatible:llama3.2\"\n[providers.openai-compatible]\nbaseUrl = \"{url}\"\n"
        ),
    );
    let out = weft(dir.path(), &["run", "p", "hi"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", say(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("from the project"));
    // `[env]` names a dead port; --base-url wins.
    let q = dir.path().join("q");
    project(
        &q,
        "model = \"openai-compatible:llama3.2\"\n[env]\nWEFT_OPENAI_COMPATIBLE_BASE_URL = \"http://127.0.0.1:9/v1\"\n",
    );
    let out = weft(dir.path(), &["run", "q", "--base-url", &url, "hi"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", say(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("from the flag"));
    assert_eq!(server.received().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verbose_shows_the_http_exchange_with_the_key_redacted() {
    let server = ReplayServer::start(vec![
        answer("traced"),
        Reply::json(
            401,
            &json!({"error": {"message": "bad key", "type": "invalid_request_error"}}),
        ),
    ])
    .await;
    let url = format!("{}/v1", server.url());
    let dir = tempfile::tempdir().expect("tempdir");
    // `--verbose` on a run: request line, headers, body, status, each event.
    let p = dir.path().join("p");
    project(&p, "model = \"openai-compatible:llama3.2\"\n");
    let out = weft(
        dir.path(),
        &["run", "p", "--verbose", "--base-url", &url, "hi there"],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", say(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for want in [
        format!("weft: http: openai-compatible → POST {url}/chat/completions"),
        "weft: http: openai-compatible → authorization: [REDACTED]".to_owned(),
        "weft: http: openai-compatible → content-type: application/json".to_owned(),
        "\"hi there\"".to_owned(),
        "weft: http: openai-compatible ← 200".to_owned(),
        "weft: http: openai-compatible ← data: {".to_owned(),
        "weft: http: openai-compatible ← data: [DONE]".to_owned(),
    ] {
        assert!(stderr.contains(&want), "missing {want:?}: {}", say(&out));
    }
    assert!(!stderr.contains(SECRET), "{}", say(&out));
    // `WEFT_LOG=debug` on `weft llm`: the error body too.
    let out = weft(
        dir.path(),
        &[
            "llm",
            "--model",
            "openai-compatible:llama3.2",
            "--base-url",
            &url,
            "hi",
        ],
        &[("WEFT_LOG", "debug")],
    )
    .await;
    assert_eq!(out.status.code(), Some(1), "{}", say(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("weft: http: openai-compatible ← 401"),
        "{}",
        say(&out)
    );
    assert!(stderr.contains("bad key"), "{}", say(&out));
    assert!(!stderr.contains(SECRET), "{}", say(&out));
    // Without either, nothing is traced.
    let server = ReplayServer::start(vec![answer("quiet")]).await;
    let url = format!("{}/v1", server.url());
    let out = weft(dir.path(), &["run", "p", "--base-url", &url, "hi"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", say(&out));
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("weft: http:"),
        "{}",
        say(&out)
    );
}

/// An OpenAI key in the environment is never sent to a server the user names: the
/// `openai-compatible` provider reads `WEFT_OPENAI_COMPATIBLE_API_KEY` only (it once fell back
/// to `OPENAI_API_KEY`, which handed a real OpenAI key to any proxy or local server).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openai_key_is_not_sent_to_a_compatible_server() {
    let server = ReplayServer::start(vec![answer("no key"), answer("own key")]).await;
    let url = format!("{}/v1", server.url());
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("p");
    project(&p, "model = \"openai-compatible:llama3.2\"\n");
    let openai_key = "sk-openai-real-key-0123456789abcdef";
    let out = weft(
        dir.path(),
        &["run", "p", "--base-url", &url, "hi"],
        &[
            ("OPENAI_API_KEY", openai_key),
            ("WEFT_OPENAI_COMPATIBLE_API_KEY", ""),
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", say(&out));
    let out = weft(
        dir.path(),
        &["run", "p", "--base-url", &url, "hi"],
        &[("OPENAI_API_KEY", openai_key)],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", say(&out));
    let received = server.received();
    assert_eq!(received.len(), 2);
    assert_eq!(received[0].header("authorization"), None);
    assert_eq!(
        received[1].header("authorization"),
        Some(format!("Bearer {SECRET}").as_str())
    );
}

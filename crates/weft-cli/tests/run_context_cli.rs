//! Issue 23 item 7: with `[gates] runs = true`, a Weft run starts like a harness session —
//! the Universal Agent Protocol's `<uap-context>` (its rules and the project's memory) is in
//! the system prompt the model receives. Checked on the wire, with a local server speaking
//! the Chat Completions format.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::json;
use weft_testkit::{ReplayServer, Reply};

async fn weft(cwd: &Path, args: &[&str], url: &str) -> Output {
    let (cwd, url) = (cwd.to_path_buf(), url.to_owned());
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_weft"))
            .args(&args)
            .current_dir(&cwd)
            .env_remove("WEFT_DATABASE_URL")
            .env("WEFT_OPENAI_COMPATIBLE_BASE_URL", url)
            .env("WEFT_OPENAI_COMPATIBLE_API_KEY", "sk-local-0123456789")
            .output()
            .expect("weft runs")
    })
    .await
    .expect("join")
}

/// A Chat Completions answer, streamed (`weft run` streams).
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

fn project(dir: &Path, extra: &str) {
    for sub in ["agents", "prompts"] {
        std::fs::create_dir_all(dir.join(sub)).expect("mkdir");
    }
    std::fs::write(
        dir.join("weft.toml"),
        format!("model = \"openai-compatible:llama3.2\"\n{extra}"),
    )
    .expect("weft.toml");
    std::fs::write(
        dir.join("agents/a.toml"),
        "name = \"a\"\n[sideA]\nprompt = \"p\"\n",
    )
    .expect("agent");
    std::fs::write(
        dir.join("prompts/p.toml"),
        "name = \"p\"\nsystem = \"Be brief.\"\n",
    )
    .expect("prompt");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_with_gates_on_starts_with_the_protocol_context_and_memory() {
    let server = ReplayServer::start(vec![answer("noted"), answer("plain")]).await;
    let url = format!("{}/v1", server.url());
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("p");
    project(&p, "[gates]\nruns = true\n");
    let stored = weft(
        &p,
        &[
            "memory",
            "store",
            "Chose SQLite for memory because hooks read it locally",
            "--type",
            "decision",
            "--importance",
            "8",
        ],
        &url,
    )
    .await;
    assert_eq!(
        stored.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&stored.stderr)
    );
    let out = weft(&p, &["run", "Fix the crash in the parser"], &url).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Without the setting, the system prompt is the prompt's own.
    let q = dir.path().join("q");
    project(&q, "");
    let out = weft(&q, &["run", "hi"], &url).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let received = server.received();
    assert_eq!(received.len(), 2);
    let with = String::from_utf8_lossy(&received[0].body).into_owned();
    assert!(with.contains("Be brief."), "{with}");
    assert!(with.contains("<uap-context>"), "{with}");
    assert!(with.contains("Chose SQLite for memory"), "{with}");
    // The decision loop's ACT step: the run's task is classified and the loop planned.
    assert!(
        with.contains("<uap-task>")
            && with.contains("Task class: debugging")
            && with.contains("weft deliver"),
        "{with}"
    );
    let without = String::from_utf8_lossy(&received[1].body).into_owned();
    assert!(
        without.contains("Be brief.") && !without.contains("<uap-context>"),
        "{without}"
    );
}

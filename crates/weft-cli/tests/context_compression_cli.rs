//! The runtime profile's context management (runtime spec §5.11, issue 22 item 7) through
//! `weft run`, on the wire: a local server speaks the Chat Completions format and reports
//! token usage; past `compressionThreshold` × `maxTokens` the history is compressed before
//! the next model call (`summarize` asks the model, `truncate` and `hybrid` may not), the
//! system prompt, the last user messages and the current turn's tool results stay, the
//! project's knowledge is in the system prompt after compression, and `weft runs show
//! --expand` restores what was replaced from the checkpoints that hold it.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use common::output_text;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};
use weft_testkit::{ReplayServer, Reply};

async fn weft(cwd: &Path, args: &[&str], url: &str) -> Output {
    let (cwd, url) = (cwd.to_path_buf(), url.to_owned());
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_weft"))
            .args(&args)
            .current_dir(&cwd)
            .env_remove("WEFT_DATABASE_URL")
            .env("NO_COLOR", "1")
            .env("WEFT_OPENAI_COMPATIBLE_BASE_URL", url)
            .env("WEFT_OPENAI_COMPATIBLE_API_KEY", "sk-local-0123456789")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("weft runs")
    })
    .await
    .expect("join")
}

fn chunk(delta: Value, finish: Value, usage: Option<Value>) -> String {
    let mut chunk = json!({"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "llama3.2",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    if let Some(usage) = usage {
        chunk["usage"] = usage;
    }
    format!("data: {chunk}\n\n")
}

fn usage(prompt: u64) -> Value {
    json!({"prompt_tokens": prompt, "completion_tokens": 10, "total_tokens": prompt + 10})
}

/// A streamed answer calling `name` with `arguments`; the provider reports `prompt` input
/// tokens.
fn tool_call(id: &str, name: &str, arguments: &Value, prompt: u64) -> Reply {
    let call = chunk(
        json!({"role": "assistant", "tool_calls": [{"index": 0, "id": id, "type": "function",
            "function": {"name": name, "arguments": arguments.to_string()}}]}),
        Value::Null,
        None,
    );
    let end = chunk(json!({}), json!("tool_calls"), Some(usage(prompt)));
    Reply::sse(&format!("{call}{end}data: [DONE]\n\n"), 256)
}

/// The summary call's answer (not streamed).
fn summary(text: &str) -> Reply {
    Reply::json(
        200,
        &json!({"id": "s1", "object": "chat.completion", "created": 0, "model": "llama3.2",
            "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": text}}],
            "usage": usage(120)}),
    )
}

const ALPHA: &str = "ALPHA-CONTENT";
const BETA: &str = "BETA-CONTENT";
const GAMMA: &str = "GAMMA-CONTENT";
const KNOWLEDGE: &str = "The deploy key lives in vault/prod.";

/// A project whose agent `a` (tool `read_file`, system prompt "Be brief.") runs under the
/// runtime profile with `context` as its `[runtime.context]` table; three files to read and a
/// `knowledge/` folder.
fn project(dir: &Path, context: &str, file_size: usize) {
    for sub in ["agents", "prompts", "knowledge"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    std::fs::write(
        dir.join("weft.toml"),
        format!(
            "model = \"openai-compatible:llama3.2\"\n[runtime]\nmaxTurns = 10\n\
             [runtime.policy]\nmode = \"batch\"\n[runtime.context]\n{context}"
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("agents/a.toml"),
        "name = \"a\"\n[sideA]\nprompt = \"p\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("prompts/p.toml"),
        "name = \"p\"\nsystem = \"Be brief.\"\ntools = [\"read_file\"]\n",
    )
    .unwrap();
    for (file, content) in [("a.md", ALPHA), ("b.md", BETA), ("c.md", GAMMA)] {
        let padding = "x".repeat(file_size);
        std::fs::write(dir.join(file), format!("{content} {padding}\n")).unwrap();
    }
    std::fs::write(dir.join("knowledge/deploy.md"), format!("{KNOWLEDGE}\n")).unwrap();
}

/// Three reads (the third answer reports 900 input tokens: over 0.8 × 1000), then
/// `complete_task`.
fn reads() -> Vec<Reply> {
    vec![
        tool_call("r1", "read_file", &json!({"path": "a.md"}), 100),
        tool_call("r2", "read_file", &json!({"path": "b.md"}), 300),
        tool_call("r3", "read_file", &json!({"path": "c.md"}), 900),
    ]
}

fn complete() -> Reply {
    tool_call(
        "done",
        "complete_task",
        &json!({"summary": "read the three files"}),
        200,
    )
}

fn events(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn compressions(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["type"] == "compression")
        .map(|e| e["payload"].clone())
        .collect()
}

fn run_id(events: &[Value]) -> String {
    events
        .iter()
        .find_map(|e| e["runId"].as_str())
        .expect("a run id")
        .to_owned()
}

/// The request's messages: (role, everything it says as text).
fn messages(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["role"].as_str().unwrap().to_owned(), m.to_string()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn summarize_replaces_the_middle_keeps_what_the_spec_keeps_and_expands() {
    let mut replies = reads();
    replies.push(summary("Read a.md (ALPHA) and b.md (BETA)."));
    replies.push(complete());
    let server = ReplayServer::start(replies).await;
    let url = format!("{}/v1", server.url());
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    project(
        p,
        "maxTokens = 1000\npreserveLastN = 1\ncompressionStrategy = \"summarize\"\n",
        10,
    );
    let out = weft(p, &["run", "--json", "Read a.md, b.md and c.md"], &url).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let events = events(&out);

    // One compression, before the fourth step's model call, counted from the provider's
    // reported usage (900 + 10 and the third result) against 0.8 × 1000.
    let found = compressions(&events);
    assert_eq!(found.len(), 1, "{found:?}");
    let c = &found[0];
    assert_eq!(c["strategy"], "summarize");
    assert_eq!(c["tokenSource"], "usage");
    assert_eq!(
        (c["limit"].as_u64(), c["trigger"].as_u64()),
        (Some(1000), Some(800))
    );
    assert_eq!(c["limitSource"], "maxTokens");
    assert!(c["tokensBefore"].as_u64().unwrap() > 910, "{c}");
    assert!(c["tokensAfter"].as_u64().unwrap() < c["tokensBefore"].as_u64().unwrap());
    // History: 0 task, 1-2 read a, 3-4 read b, 5-6 read c (the current turn).
    assert_eq!(c["agentStep"], 3);
    assert_eq!(c["replaced"][0]["from"], 1);
    assert_eq!(c["replaced"][0]["to"], 5);

    let received = server.received();
    assert_eq!(received.len(), 5, "three steps, the summary, the last step");
    // The summary call: a real model call without tools, over the middle only; the
    // knowledge is not in it (it is never part of the history).
    let ask = received[3].json();
    assert!(ask.get("tools").is_none_or(Value::is_null), "{ask}");
    let ask_text = ask.to_string();
    assert!(
        ask_text.contains(ALPHA) && ask_text.contains(BETA),
        "{ask_text}"
    );
    assert!(
        !ask_text.contains(GAMMA),
        "the current turn is not summarized"
    );
    assert!(!ask_text.contains(KNOWLEDGE), "{ask_text}");
    // The call after it: the system prompt (with the knowledge, added after compression),
    // the task (the last user message), the summary, the current turn's call and result.
    let next = received[4].json();
    let said = messages(&next);
    let roles: Vec<&str> = said.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(
        roles,
        ["system", "user", "user", "assistant", "tool"],
        "{said:?}"
    );
    assert!(said[0].1.contains("Be brief.") && said[0].1.contains(KNOWLEDGE));
    assert!(said[1].1.contains("Read a.md, b.md and c.md"));
    assert!(said[2].1.contains("Read a.md (ALPHA) and b.md (BETA)."));
    assert!(said[3].1.contains("c.md") && said[4].1.contains(GAMMA));
    let next_text = next.to_string();
    assert!(!next_text.contains(ALPHA) && !next_text.contains(BETA));
    // Before the compression the knowledge was in the system prompt too.
    assert!(received[0].json().to_string().contains(KNOWLEDGE));

    // The checkpoint references the rows the store already had: every message is stored
    // once (7 before the compression, the summary, the last call and its result).
    let db = rusqlite::Connection::open(p.join(".weft/weft.db")).unwrap();
    let rows: i64 = db
        .query_row(
            "SELECT COUNT(*) FROM checkpoint_items WHERE kind NOT IN ('r', 't')",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(rows, 10);

    // The summary call is a model call of the run: the last checkpoint's usage total (and
    // the run's) counts it — input 100 + 300 + 900 + 120 (the summary) + 200, output 5 × 10.
    let (input, output): (i64, i64) = db
        .query_row(
            "SELECT usage_input_tokens, usage_output_tokens FROM checkpoints ORDER BY step DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((input, output), (1620, 50));
    let run = run_id(&events);
    let record = weft(p, &["runs", "show", &run, "--json"], &url).await;
    let record: Value = serde_json::from_slice(&record.stdout).unwrap();
    assert_eq!(
        (
            &record["usage"]["input_tokens"],
            &record["usage"]["output_tokens"]
        ),
        (&json!(1620), &json!(50)),
        "{record}"
    );

    // `weft runs show --expand` restores what the summary replaced.
    let shown = weft(p, &["runs", "show", &run, "--expand"], &url).await;
    assert_eq!(shown.status.code(), Some(0), "{}", output_text(&shown));
    let shown_text = output_text(&shown);
    assert!(
        shown_text.contains("compression 1 (summarize, summary) at step 3: 4 message(s) replaced"),
        "{shown_text}"
    );
    assert!(
        shown_text.contains(&format!("was: tool result: {ALPHA}")),
        "{shown_text}"
    );
    let json_out = weft(p, &["runs", "show", &run, "--expand", "--json"], &url).await;
    let v: Value = serde_json::from_slice(&json_out.stdout).unwrap();
    let replaced = v["compressions"][0]["replaced"].as_array().unwrap();
    assert_eq!(replaced.len(), 4);
    assert!(replaced[1].to_string().contains(ALPHA));
    // Without the flag, nothing of it.
    let plain = weft(p, &["runs", "show", &run], &url).await;
    assert!(!output_text(&plain).contains("compressed history"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncate_and_hybrid_compress_without_a_summary_call() {
    // Settings the profile cannot use are load errors naming the key.
    let dir = tempfile::tempdir().unwrap();
    for (setting, key) in [
        (
            "compressionStrategy = \"drop\"\n",
            "runtime.context.compressionStrategy",
        ),
        (
            "compressionThreshold = 1.5\n",
            "runtime.context.compressionThreshold",
        ),
    ] {
        let p = dir.path().join("bad");
        project(&p, setting, 10);
        let out = weft(&p, &["run", "hi"], "http://127.0.0.1:9").await;
        assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
        assert!(output_text(&out).contains(key), "{}", output_text(&out));
    }

    // truncate: the middle goes, a note says so; no summary call.
    let mut replies = reads();
    replies.push(complete());
    let server = ReplayServer::start(replies).await;
    let url = format!("{}/v1", server.url());
    let p = dir.path().join("t");
    project(
        &p,
        "maxTokens = 1000\npreserveLastN = 1\ncompressionStrategy = \"truncate\"\n",
        10,
    );
    let out = weft(&p, &["run", "--json", "Read a.md, b.md and c.md"], &url).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let found = compressions(&events(&out));
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["strategy"], "truncate");
    let received = server.received();
    assert_eq!(received.len(), 4, "no summary call");
    let said = messages(&received[3].json());
    let roles: Vec<&str> = said.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(
        roles,
        ["system", "user", "user", "assistant", "tool"],
        "{said:?}"
    );
    assert!(said[2].1.contains("4 earlier messages were removed"));
    assert!(said[4].1.contains(GAMMA));
    assert!(!received[3].json().to_string().contains(ALPHA));

    // hybrid: the old tool outputs (large here) are cleared; that is enough, so no summary
    // call and every call stays in the conversation.
    let mut replies = reads();
    replies.push(complete());
    let server = ReplayServer::start(replies).await;
    let url = format!("{}/v1", server.url());
    let p = dir.path().join("h");
    project(
        &p,
        "maxTokens = 1000\npreserveLastN = 1\ncompressionStrategy = \"hybrid\"\n",
        1600,
    );
    let out = weft(&p, &["run", "--json", "Read a.md, b.md and c.md"], &url).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let events = events(&out);
    let found = compressions(&events);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        (&found[0]["strategy"], &found[0]["stage"]),
        (&json!("hybrid"), &json!("cleared"))
    );
    let received = server.received();
    assert_eq!(received.len(), 4, "no summary call");
    let said = messages(&received[3].json());
    let roles: Vec<&str> = said.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant",
            "tool"
        ]
    );
    assert!(said[3].1.contains("output cleared by context compression"));
    assert!(said[5].1.contains("output cleared by context compression"));
    assert!(said[7].1.contains(GAMMA), "the current turn's result stays");
    let run = run_id(&events);
    let shown = weft(&p, &["runs", "show", &run, "--expand"], &url).await;
    let shown_text = output_text(&shown);
    assert!(
        shown_text.contains("compression 1 (hybrid, cleared) at step 3: 1 message(s) replaced"),
        "{shown_text}"
    );
    assert!(shown_text.contains(&format!("was: tool result: {BETA}")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_after_a_compression_replays_the_recorded_summary_and_calls() {
    // Interactive mode: the call after the compression (write_file) waits for a person.
    let mut replies = reads();
    replies.push(summary("Read a.md (ALPHA) and b.md (BETA)."));
    replies.push(tool_call(
        "w1",
        "write_file",
        &json!({"path": "out.md", "content": "done"}),
        300,
    ));
    replies.push(complete());
    let server = ReplayServer::start(replies).await;
    let url = format!("{}/v1", server.url());
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    project(p, "", 1200);
    std::fs::write(
        p.join("weft.toml"),
        "model = \"openai-compatible:llama3.2\"\n[runtime]\nmaxTurns = 10\n\
         [runtime.context]\nmaxTokens = 1000\npreserveLastN = 1\n",
    )
    .unwrap();
    std::fs::write(
        p.join("prompts/p.toml"),
        "name = \"p\"\nsystem = \"Be brief.\"\ntools = [\"read_file\", \"write_file\"]\n",
    )
    .unwrap();
    let out = weft(p, &["run", "--json", "Read a.md, b.md and c.md"], &url).await;
    assert_eq!(out.status.code(), Some(4), "{}", output_text(&out));
    let events = events(&out);
    assert_eq!(compressions(&events).len(), 1);
    assert_eq!(server.received().len(), 5);
    let run = run_id(&events);
    let decision = events
        .iter()
        .find(|e| e["type"] == "decision_pending")
        .map(|e| e["payload"]["decision"].as_str().unwrap().to_owned())
        .expect("a pending decision");
    let approved = weft(p, &["approve", &run, &decision], &url).await;
    assert_eq!(
        approved.status.code(),
        Some(0),
        "{}",
        output_text(&approved)
    );

    // The resume starts from the last checkpoint (before the compression), counts by
    // estimate, compresses the same history again — and the summary and the write_file call
    // come from the run's record: only the last step asks the model (the run keeps its
    // endpoint).
    let resumed = weft(p, &["resume", &run, "--json"], &url).await;
    assert_eq!(resumed.status.code(), Some(0), "{}", output_text(&resumed));
    let resumed_events = self::events(&resumed);
    let found = compressions(&resumed_events);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["tokenSource"], "estimate");
    assert_eq!(
        server.received().len(),
        6,
        "the recorded answers were replayed, not asked again"
    );
    assert_eq!(std::fs::read_to_string(p.join("out.md")).unwrap(), "done");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_summary_call_falls_back_to_truncate_and_the_run_goes_on() {
    // The summary request fails (the provider answers 400: not retried); the compression
    // truncates instead, says why in its event, and the task completes.
    for strategy in ["summarize", "hybrid"] {
        let mut replies = reads();
        replies.push(Reply::json(
            400,
            &json!({"error": {"message": "summaries are off today", "type": "invalid_request_error"}}),
        ));
        replies.push(complete());
        let server = ReplayServer::start(replies).await;
        let url = format!("{}/v1", server.url());
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        project(
            p,
            &format!("maxTokens = 1000\npreserveLastN = 1\ncompressionStrategy = \"{strategy}\"\n"),
            10,
        );
        let out = weft(p, &["run", "--json", "Read a.md, b.md and c.md"], &url).await;
        assert_eq!(
            out.status.code(),
            Some(0),
            "{strategy}: {}",
            output_text(&out)
        );
        let events = events(&out);
        let found = compressions(&events);
        assert_eq!(found.len(), 1, "{strategy}: {found:?}");
        let c = &found[0];
        assert_eq!(c["strategy"], "truncate", "{c}");
        assert_eq!(c["fallbackFrom"], strategy, "{c}");
        assert!(
            c["reason"]
                .as_str()
                .unwrap()
                .contains("summaries are off today"),
            "{c}"
        );
        let received = server.received();
        assert_eq!(
            received.len(),
            5,
            "three steps, the failed summary, the last step"
        );
        // The last call reads the truncation note instead of the middle.
        let said = messages(&received[4].json());
        let roles: Vec<&str> = said.iter().map(|(r, _)| r.as_str()).collect();
        assert_eq!(
            roles,
            ["system", "user", "user", "assistant", "tool"],
            "{said:?}"
        );
        assert!(
            said[2].1.contains("4 earlier messages were removed"),
            "{said:?}"
        );
        assert!(!received[4].json().to_string().contains(ALPHA));
        let end = events
            .iter()
            .rev()
            .find(|e| e["type"] == "run_end")
            .unwrap();
        assert_eq!(end["payload"]["status"], "completed", "{end}");
    }
}

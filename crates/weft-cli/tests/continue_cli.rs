//! `weft run PROJECT --continue THREAD "follow-up"` (issue 17 item 9): a new run on the same
//! thread, whose model sees the conversation so far.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use common::weft;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

fn run_end(out: &Output) -> Value {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(common::flat)
        .rfind(|e| e["type"] == "run_end")
        .unwrap_or_else(|| panic!("{}", String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn continue_goes_on_with_the_threads_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    // The scripted model answers by the conversation's position: the second answer only
    // comes when the first exchange is in the history.
    let script = json!({"responses": [{"text": "first answer"}, {"text": "second answer, with the first in view"}]});
    common::scripted_project(&p, "", &[], &script);
    let first = weft(&p, &["run", "--json", "hello"]);
    assert_eq!(first.status.code(), Some(0));
    let first_end = run_end(&first);
    assert_eq!(first_end["output"], "first answer");
    let run = first_end["runId"].as_str().unwrap().to_owned();

    // By run id prefix.
    let second = weft(&p, &["run", "--json", "--continue", &run[..8], "and then?"]);
    assert_eq!(
        second.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    let second_end = run_end(&second);
    assert_eq!(
        second_end["output"],
        "second answer, with the first in view"
    );
    assert_ne!(second_end["runId"], first_end["runId"], "a new run");
    let show = |id: &str| -> Value {
        serde_json::from_slice(&weft(&p, &["runs", "show", id, "--json"]).stdout).unwrap()
    };
    let thread = show(&run)["thread_id"].clone();
    assert_eq!(
        show(second_end["runId"].as_str().unwrap())["thread_id"],
        thread
    );

    // An unknown thread is a usage error; nothing is recorded.
    let runs_before = weft(&p, &["runs", "list", "--json"]).stdout;
    let unknown = weft(&p, &["run", "--continue", "no-such-thread", "x"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no-such-thread"));
    assert_eq!(weft(&p, &["runs", "list", "--json"]).stdout, runs_before);
}

#[test]
fn fork_starts_a_new_thread_from_a_checkpoint_and_the_origin_is_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    let script = json!({"responses": [{"text": "first answer"}, {"text": "second answer"}, {"text": "third answer"}]});
    common::scripted_project(&p, "", &[], &script);
    let first = run_end(&weft(&p, &["run", "--json", "hello"]));
    let run = first["runId"].as_str().unwrap().to_owned();
    let second = run_end(&weft(&p, &["run", "--json", "--continue", &run, "more"]));
    assert_eq!(second["output"], "second answer");

    // Fork the thread at its first checkpoint after the first answer: the new thread holds
    // the first exchange only, so its next answer is the second again.
    let list = weft(&p, &["checkpoints", "list", &run, "--json"]);
    let checkpoints: Value = serde_json::from_slice(&list.stdout).unwrap();
    let after_first = checkpoints
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["message_count"] == 2 || c["messageCount"] == 2)
        .unwrap_or_else(|| panic!("{checkpoints}"));
    let step = after_first["step"].as_u64().unwrap().to_string();
    let forked = weft(&p, &["fork", &run, "--at", &step, "--json"]);
    assert_eq!(
        forked.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&forked.stderr)
    );
    let fork: Value = serde_json::from_slice(&forked.stdout).unwrap();
    let thread = fork["fork"]["threadId"].as_str().unwrap().to_owned();
    assert_eq!(fork["fork"]["messages"], 2);
    let branch = run_end(&weft(
        &p,
        &["run", "--json", "--continue", &thread, "other way"],
    ));
    assert_eq!(
        branch["output"], "second answer",
        "the branch does not see the origin's later turns"
    );
    // The origin goes on where it was.
    let origin = run_end(&weft(
        &p,
        &["run", "--json", "--continue", &run, "and more"],
    ));
    assert_eq!(origin["output"], "third answer");

    let missing = weft(&p, &["fork", &run, "--at", "999"]);
    assert_eq!(missing.status.code(), Some(2));
}

fn chat(cwd: &Path, args: &[&str], messages: &str) -> Output {
    use std::io::Write as _;
    let mut child = Command::new(env!("CARGO_BIN_EXE_weft"))
        .arg("chat")
        .args(args)
        .current_dir(cwd)
        .env_remove("WEFT_DATABASE_URL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let _ = stdin.write_all(messages.as_bytes());
    drop(stdin);
    child.wait_with_output().unwrap()
}

#[test]
fn chat_runs_one_message_after_another_on_one_thread() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    let script = json!({"responses": [{"text": "answer one"}, {"text": "answer two"}, {"text": "answer three"}]});
    common::scripted_project(&p, "", &[], &script);
    let out = chat(
        &p,
        &["--json"],
        "hi\n\nand again\nonce more\n/exit\nnot read\n",
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ends: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(common::flat)
        .filter(|e| e["type"] == "run_end")
        .collect();
    let outputs: Vec<&str> = ends.iter().map(|e| e["output"].as_str().unwrap()).collect();
    assert_eq!(outputs, ["answer one", "answer two", "answer three"]);
    let threads: Vec<Value> = ends
        .iter()
        .map(|e| {
            let shown: Value = serde_json::from_slice(
                &weft(
                    &p,
                    &["runs", "show", e["runId"].as_str().unwrap(), "--json"],
                )
                .stdout,
            )
            .unwrap();
            shown["thread_id"].clone()
        })
        .collect();
    assert!(threads.windows(2).all(|w| w[0] == w[1]), "{threads:?}");
}

#[test]
fn a_chat_that_outgrows_the_context_says_what_to_do_next() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    let script = json!({"responses": [
        {"text": "answer one"},
        {"error": {"code": "CONTEXT_LENGTH_EXCEEDED", "message": "maximum context length is 8192 tokens"}}
    ]});
    common::scripted_project(&p, "", &[], &script);
    let out = chat(&p, &[], "hi\ntell me everything\nnever sent\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("no longer fits the model's context window"),
        "{stderr}"
    );
    assert!(stderr.contains("weft fork"), "{stderr}");
    // The chat stopped at the overflow: two runs, the third message never sent.
    let runs: Value =
        serde_json::from_slice(&weft(&p, &["runs", "list", "--json"]).stdout).unwrap();
    assert_eq!(runs.as_array().unwrap().len(), 2, "{runs}");
}

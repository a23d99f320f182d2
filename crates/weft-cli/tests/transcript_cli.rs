//! "See what happened" (issue 17 item 8): `weft runs show RUN` shows the transcript (each
//! side's messages, tool calls with arguments and results, handoffs), and `weft thread export
//! RUN|THREAD` writes a ThreadProtocol thread that `weft thread validate` accepts, with a hash
//! that is the same for two exports of the same run.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use common::weft;

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

fn ok(out: &Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `args` (a `weft run … --json`) and returns the run id.
fn run(dir: &Path, args: &[&str]) -> String {
    let stdout = ok(&weft(dir, args));
    let end = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(common::flat)
        .rfind(|e| e["type"] == "run_end")
        .expect("a run_end event");
    end["runId"].as_str().unwrap().to_owned()
}

fn show_json(dir: &Path, run: &str) -> Value {
    serde_json::from_str(&ok(&weft(dir, &["runs", "show", run, "--json"]))).unwrap()
}

/// Exports `origin` twice (to a file, then to standard output): both validate, hash the same,
/// and are the same thread. Returns the thread.
fn export_checked(dir: &Path, origin: &str) -> Value {
    let file = dir.join("export.json");
    ok(&weft(
        dir,
        &["thread", "export", origin, "-o", file.to_str().unwrap()],
    ));
    let validated = ok(&weft(dir, &["thread", "validate", file.to_str().unwrap()]));
    assert!(validated.starts_with("valid:"), "{validated}");
    let first_hash = ok(&weft(dir, &["thread", "hash", file.to_str().unwrap()]));
    let again = ok(&weft(dir, &["thread", "export", origin]));
    let again_file = dir.join("export-again.json");
    std::fs::write(&again_file, &again).unwrap();
    let second_hash = ok(&weft(
        dir,
        &["thread", "hash", again_file.to_str().unwrap()],
    ));
    assert!(first_hash.starts_with("sha256:"), "{first_hash}");
    assert_eq!(first_hash, second_hash, "two exports hash the same");
    let thread: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(thread, serde_json::from_str::<Value>(&again).unwrap());
    thread
}

/// Every part of every message of the thread's agent turns, with the agent's name.
fn parts(thread: &Value) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for turn in thread["turns"].as_array().unwrap() {
        let agent = thread["agents"][turn["agent_id"].as_str().unwrap_or("")]["agent_name"]
            .as_str()
            .unwrap_or("user")
            .to_owned();
        for part in turn["parts"].as_array().into_iter().flatten() {
            out.push((agent.clone(), part.clone()));
        }
        for message in turn["messages"].as_array().into_iter().flatten() {
            if message["message_type"] == "system" {
                out.push((agent.clone(), message.clone()));
            }
            for part in message["parts"].as_array().into_iter().flatten() {
                out.push((agent.clone(), part.clone()));
            }
        }
    }
    out
}

#[test]
fn ai_human_run_shows_its_transcript_and_exports_a_valid_thread() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    let script = json!({"responses": [
        {"text": "Let me look.", "toolCalls": [{"id": "c1", "name": "read_file", "arguments": {"path": "notes.txt"}}]},
        {"toolCalls": [{"id": "c2", "name": "read_file", "arguments": {"path": "missing.txt"}}]},
        {"text": "The notes say hello."}
    ]});
    common::scripted_project(&p, "", &["read_file"], &script);
    let long = format!("hello {}", "x".repeat(400));
    std::fs::write(p.join("notes.txt"), &long).unwrap();
    let run_id = run(&p, &["run", "--json", "What do the notes say?"]);

    // Text: who said what, each call with its arguments and (clipped) result.
    let text = ok(&weft(&p, &["runs", "show", &run_id[..8]]));
    let transcript = text
        .split_once("transcript:\n")
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("no transcript in:\n{text}"));
    for expected in [
        "user: What do the notes say?",
        "a: Let me look.",
        "a → read_file {\"path\":\"notes.txt\"} [c1]",
        "a ← read_file: hello xxx",
        "a → read_file {\"path\":\"missing.txt\"} [c2]",
        "a ← read_file (error): ",
        "a: The notes say hello.",
    ] {
        assert!(transcript.contains(expected), "{expected:?} in:\n{text}");
    }
    assert!(
        !transcript.contains(&long),
        "results are clipped in the text view"
    );

    // JSON: the same, whole.
    let show = show_json(&p, &run_id);
    let lines = show["transcript"].as_array().unwrap();
    let kinds: Vec<&str> = lines.iter().map(|l| l["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "user",
            "assistant",
            "tool_call",
            "tool_result",
            "tool_call",
            "tool_result",
            "assistant"
        ]
    );
    assert_eq!(lines[0]["text"], "What do the notes say?");
    assert_eq!(lines[0]["input"], true);
    assert_eq!(lines[2]["arguments"], json!({"path": "notes.txt"}));
    assert_eq!(lines[3]["name"], "read_file");
    assert_eq!(lines[3]["result"], json!(long), "the whole result");
    assert_eq!(lines[5]["is_error"], true);
    assert!(
        lines
            .iter()
            .all(|l| l["side"] == "sideA" && l["agent"] == "a")
    );
    assert_eq!(show["transcript_earlier_entries"], 0);

    // Export: valid, stable, with the tool calls and their results.
    let thread = export_checked(&p, &run_id);
    assert_eq!(thread["thread_id"], show["thread_id"]);
    let parts = parts(&thread);
    let calls: Vec<&Value> = parts
        .iter()
        .filter(|(_, p)| p["part_kind"] == "tool-call")
        .map(|(_, p)| p)
        .collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (
            &calls[0]["tool_name"],
            &calls[0]["tool_call_id"],
            &calls[0]["args"]
        ),
        (
            &json!("read_file"),
            &json!("c1"),
            &json!({"path": "notes.txt"})
        )
    );
    let returns: Vec<&Value> = parts
        .iter()
        .filter(|(_, p)| p["part_kind"] == "tool-return")
        .map(|(_, p)| p)
        .collect();
    assert_eq!(returns.len(), 2);
    assert_eq!(returns[0]["content"], json!(long));
    assert_eq!(returns[1]["status"], "error");
    assert_eq!(thread["turns"][0]["turn_type"], "user");

    // The thread id exports the same thread.
    let by_thread = ok(&weft(
        &p,
        &["thread", "export", show["thread_id"].as_str().unwrap()],
    ));
    assert_eq!(serde_json::from_str::<Value>(&by_thread).unwrap(), thread);

    // Neither a run nor a thread: exit 2.
    let missing = weft(&p, &["thread", "export", "nothing-like-this"]);
    assert_eq!(missing.status.code(), Some(2));
}

/// A `dual_ai` pair: side A drafts (reading a file first), side B approves.
fn write_pair(dir: &Path) {
    for sub in ["agents", "prompts", "tools"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    let files = [
        ("weft.toml", "model = \"scripted-turns:a.json\"\n"),
        (
            "agents/pair.toml",
            "name = \"pair\"\ntype = \"dual_ai\"\nmaxSessionTurns = 6\n[sideA]\nprompt = \"pa\"\n[sideB]\nprompt = \"pb\"\nsessionStop = { name = \"done\", messageProperty = \"summary\" }\n",
        ),
        ("prompts/pa.toml", "name = \"pa\"\ntools = [\"list_dir\"]\n"),
        (
            "prompts/pb.toml",
            "name = \"pb\"\nmodel = \"scripted-turns:b.json\"\ntools = [\"done\"]\n",
        ),
        (
            "tools/done.toml",
            "name = \"done\"\nparameters = { type = \"object\", properties = { summary = { type = \"string\" } } }\n",
        ),
        (
            "a.json",
            r#"{"responses":[{"toolCalls":[{"id":"l1","name":"list_dir","arguments":{"path":"."}}]},{"text":"draft 1"},{"text":"draft 2"}]}"#,
        ),
        (
            "b.json",
            r#"{"responses":[{"text":"fix the title"},{"toolCalls":[{"id":"d1","name":"done","arguments":{"summary":"approved"}}]}]}"#,
        ),
    ];
    for (path, body) in files {
        std::fs::write(dir.join(path), body).unwrap();
    }
}

#[test]
fn dual_ai_run_shows_both_sides_and_exports_them() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("pair");
    write_pair(&p);
    let run_id = run(&p, &["run", "--json", "write a title"]);

    let show = show_json(&p, &run_id);
    let said: Vec<(String, String, String)> = show["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let what = match l["kind"].as_str().unwrap() {
                "tool_call" | "tool_result" => format!("{}:{}", l["kind"], l["name"]),
                kind => format!("{kind}:{}", l["text"].as_str().unwrap_or_default()),
            };
            (
                l["side"].as_str().unwrap().to_owned(),
                l["agent"].as_str().unwrap().to_owned(),
                what.replace('"', ""),
            )
        })
        .collect();
    let expected: Vec<(String, String, String)> = [
        ("sideA", "user:write a title"),
        ("sideA", "tool_call:list_dir"),
        ("sideA", "tool_result:list_dir"),
        ("sideA", "assistant:draft 1"),
        ("sideB", "user:draft 1"),
        ("sideB", "assistant:fix the title"),
        ("sideA", "user:fix the title"),
        ("sideA", "assistant:draft 2"),
        ("sideB", "user:draft 2"),
        ("sideB", "tool_call:done"),
        ("sideB", "tool_result:done"),
    ]
    .iter()
    .map(|(side, what)| ((*side).to_owned(), "pair".to_owned(), (*what).to_owned()))
    .collect();
    assert_eq!(said, expected);

    let text = ok(&weft(&p, &["runs", "show", &run_id]));
    for expected in [
        "[sideA] pair → list_dir {\"path\":\".\"} [l1]",
        "[sideA] pair: draft 1",
        "[sideB] pair heard: draft 1",
        "[sideB] pair: fix the title",
        "[sideB] pair → done {\"summary\":\"approved\"} [d1]",
    ] {
        assert!(text.contains(expected), "{expected:?} in:\n{text}");
    }

    let thread = export_checked(&p, &run_id);
    let mut names: Vec<&str> = thread["agents"]
        .as_object()
        .unwrap()
        .values()
        .map(|a| a["agent_name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["pair (sideA)", "pair (sideB)"]);
    let turns: Vec<String> = thread["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| match t["turn_type"].as_str().unwrap() {
            "user" => "user".to_owned(),
            _ => thread["agents"][t["agent_id"].as_str().unwrap()]["agent_name"]
                .as_str()
                .unwrap()
                .to_owned(),
        })
        .collect();
    assert_eq!(
        turns,
        [
            "user",
            "pair (sideA)",
            "pair (sideB)",
            "pair (sideA)",
            "pair (sideB)"
        ]
    );
    let parts = parts(&thread);
    let call_of = |name: &str| {
        parts
            .iter()
            .find(|(_, p)| p["part_kind"] == "tool-call" && p["tool_name"] == name)
            .map(|(agent, _)| agent.clone())
    };
    assert_eq!(call_of("list_dir").as_deref(), Some("pair (sideA)"));
    assert_eq!(call_of("done").as_deref(), Some("pair (sideB)"));
}

#[test]
fn handoff_is_in_the_transcript_and_the_export() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("h");
    for sub in ["agents", "prompts"] {
        std::fs::create_dir_all(p.join(sub)).unwrap();
    }
    let files = [
        ("weft.toml", "model = \"scripted-turns:a.json\"\n"),
        (
            "agents/triage.toml",
            "name = \"triage\"\n[sideA]\nprompt = \"triage\"\n",
        ),
        (
            "agents/billing.toml",
            "name = \"billing\"\nexposeAsTool = true\ntoolDescription = \"Billing.\"\n[sideA]\nprompt = \"billing\"\n",
        ),
        (
            "prompts/triage.toml",
            "name = \"triage\"\ntools = [\"list_dir\", \"billing\"]\n",
        ),
        (
            "prompts/billing.toml",
            "name = \"billing\"\nmodel = \"scripted-turns:b.json\"\n",
        ),
        (
            "a.json",
            r#"{"responses":[{"toolCalls":[{"id":"c1","name":"list_dir","arguments":{"path":"."}}]},{"toolCalls":[{"id":"h1","name":"billing","arguments":{"message":"refund please"}}]}]}"#,
        ),
        // The billing agent's script answers from its own first answer after the handoff.
        ("b.json", r#"{"responses":[{"text":"Refund issued."}]}"#),
    ];
    for (path, body) in files {
        std::fs::write(p.join(path), body).unwrap();
    }
    let run_id = run(
        &p,
        &["run", "--json", "--agent", "triage", "I want a refund"],
    );

    let show = show_json(&p, &run_id);
    let lines = show["transcript"].as_array().unwrap();
    let handoff = lines
        .iter()
        .position(|l| l["kind"] == "handoff")
        .expect("a handoff line");
    assert_eq!(
        (
            &lines[handoff]["from"],
            &lines[handoff]["to"],
            &lines[handoff]["message"]
        ),
        (&json!("triage"), &json!("billing"), &json!("refund please"))
    );
    assert!(
        lines[..handoff]
            .iter()
            .skip(1)
            .all(|l| l["agent"] == "triage")
    );
    let last = lines.last().unwrap();
    assert_eq!(
        (&last["agent"], &last["text"]),
        (&json!("billing"), &json!("Refund issued."))
    );
    let text = ok(&weft(&p, &["runs", "show", &run_id]));
    assert!(
        text.contains("handoff triage → billing: refund please"),
        "{text}"
    );
    assert!(text.contains("billing: Refund issued."), "{text}");

    let thread = export_checked(&p, &run_id);
    let parts = parts(&thread);
    let system = parts
        .iter()
        .find(|(_, p)| p["message_type"] == "system")
        .expect("a system message");
    assert_eq!(system.0, "triage", "the handoff closes triage's turn");
    assert_eq!(system.1["event_type"], "agent.handoff");
    let target = system.1["target_agents"][0].as_str().unwrap();
    assert_eq!(thread["agents"][target]["agent_name"], "billing");
    assert_eq!(
        (
            &system.1["event_data"]["from"],
            &system.1["event_data"]["to"]
        ),
        (&json!("triage"), &json!("billing"))
    );
    let text_of = |agent: &str| {
        parts
            .iter()
            .filter(|(a, p)| a == agent && p["part_kind"] == "text")
            .map(|(_, p)| p["content"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(text_of("billing"), ["Refund issued."]);
    assert!(
        parts
            .iter()
            .any(|(a, p)| a == "triage" && p["tool_name"] == "billing")
    );
}

#[test]
fn a_continued_run_shows_its_part_and_exports_the_thread_so_far() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    let script = json!({"responses": [{"text": "first answer"}, {"text": "second answer"}]});
    common::scripted_project(&p, "", &[], &script);
    let first = run(&p, &["run", "--json", "hello"]);
    let second = run(&p, &["run", "--json", "--continue", &first, "and then?"]);

    let show = show_json(&p, &second);
    let said: Vec<(&str, &str)> = show["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l["kind"].as_str().unwrap(), l["text"].as_str().unwrap()))
        .collect();
    assert_eq!(
        said,
        [("user", "and then?"), ("assistant", "second answer")]
    );
    assert_eq!(show["transcript_earlier_entries"], 2);
    let text = ok(&weft(&p, &["runs", "show", &second]));
    assert!(
        text.contains("transcript (this run's part; 2 earlier entries of thread"),
        "{text}"
    );

    // The second run's export is the whole thread up to it: two user turns.
    let thread = export_checked(&p, &second);
    let users: Vec<&Value> = thread["turns"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["turn_type"] == "user")
        .collect();
    assert_eq!(users.len(), 2);
    // The first run's export ends where it ended.
    let earlier = export_checked(&p, &first);
    assert_eq!(earlier["turns"].as_array().unwrap().len(), 2);
    assert_eq!(
        show_json(&p, &first)["transcript"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

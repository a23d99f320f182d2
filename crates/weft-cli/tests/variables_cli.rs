//! Standard Agents variables through the CLI (issue 21, SA-073/074/075): a required variable
//! without a value stops `weft run` before anything is recorded (exit 2, the names and how to
//! give them); `weft variables set` gives them to a thread (a secret encrypted in the store);
//! the run's tools get them through their context (`run_command`'s environment); a secret
//! never reaches the store's files in clear, nor the event log.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use common::output_text;

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

const SECRET: &str = "tok-4f9a1c77e2b0";

fn weft_with(cwd: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .current_dir(cwd)
        .env_remove("WEFT_DATABASE_URL")
        .env_remove("WEFT_SECRET_KEY")
        .env_remove("WEFT_SECRET_KEY_FILE")
        .env_remove("API_TOKEN")
        .env_remove("REGION")
        .env("NO_COLOR", "1")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    child.wait_with_output().unwrap()
}

fn weft(cwd: &Path, args: &[&str]) -> Output {
    weft_with(cwd, args, None)
}

/// Agent `a` declares the required secret `API_TOKEN`; its prompt declares the required
/// `REGION` and the optional `TIER` (whose value is in the prompt's env). The model runs a
/// command that prints them, then answers.
fn project(p: &Path) {
    let script = json!({"responses": [
        {"toolCalls": [{"id": "c1", "name": "run_command",
            "arguments": {"command": "echo \"region=$REGION tier=$TIER token=$API_TOKEN home=${HOME:-unset}\""}}]},
        {"text": "done"}
    ]});
    common::scripted_project(p, "sandbox = \"none\"\n", &["run_command"], &script);
    std::fs::write(
        p.join("agents/a.toml"),
        "name = \"a\"\n[sideA]\nprompt = \"p\"\n\
         [[variables]]\nname = \"API_TOKEN\"\ntype = \"secret\"\nrequired = true\ndescription = \"The service token\"\n",
    )
    .unwrap();
    std::fs::write(
        p.join("prompts/p.toml"),
        "name = \"p\"\nsystem = \"You work in ${REGION}.\"\ntools = [\"run_command\"]\n\
         [env]\nTIER = \"gold\"\n\
         [[variables]]\nname = \"REGION\"\nrequired = true\ndescription = \"Where\"\n\
         [[variables]]\nname = \"TIER\"\n",
    )
    .unwrap();
}

#[test]
fn required_variables_block_the_run_until_the_thread_has_them() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    project(&p);

    // Nothing set: refused before anything is recorded, the names and the way out said.
    let out = weft(&p, &["run", "go"]);
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    let said = output_text(&out);
    for expected in [
        "API_TOKEN (secret; The service token)",
        "REGION (Where)",
        "weft variables set NAME=VALUE",
    ] {
        assert!(said.contains(expected), "{expected:?} in {said}");
    }
    assert!(!said.contains("TIER ("), "{said}");
    let runs = weft(&p, &["runs", "list", "--json"]);
    let runs: Value = serde_json::from_slice(&runs.stdout).unwrap_or(json!([]));
    assert_eq!(runs.as_array().map_or(0, Vec::len), 0, "{runs}");

    // `list` names what is missing (exit 3).
    let out = weft(&p, &["variables", "list", "--json"]);
    assert_eq!(out.status.code(), Some(3), "{}", output_text(&out));
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let missing: Vec<&str> = listed["variables"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["missing"] == true)
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(missing, ["API_TOKEN", "REGION"]);

    // Give them to a thread: REGION as text, the token as a secret read from stdin.
    let out = weft(
        &p,
        &[
            "variables",
            "set",
            "REGION=eu-west-1",
            "--thread",
            "th-vars",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let out = weft_with(
        &p,
        &[
            "variables",
            "set",
            "API_TOKEN",
            "--secret",
            "--thread",
            "th-vars",
        ],
        Some(SECRET),
    );
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let out = weft(&p, &["variables", "list", "--thread", "th-vars", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    assert!(!output_text(&out).contains(SECRET));
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let sources: Vec<(&str, &str)> = listed["variables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["name"].as_str().unwrap(),
                v["source"].as_str().unwrap_or("-"),
            )
        })
        .collect();
    assert_eq!(
        sources,
        [
            ("API_TOKEN", "thread"),
            ("REGION", "thread"),
            ("TIER", "prompt or tool env")
        ]
    );
    // The key file was made beside the database, for its owner only.
    let key = p.join(".weft").join(weft_store::SECRET_KEY_FILE);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(
            std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }

    // Now the run starts on the thread; the command sees the declared variables (and only
    // them beyond its allowlist), the secret among them.
    let out = weft(&p, &["run", "--continue", "th-vars", "--json", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let events = String::from_utf8_lossy(&out.stdout);
    assert!(
        events.contains("region=eu-west-1 tier=gold token="),
        "{events}"
    );
    // The secret never appears in the event stream: the redactor learned it.
    assert!(!events.contains(SECRET), "{events}");
    // Nor in any file of the store (database, WAL).
    for entry in std::fs::read_dir(p.join(".weft")).unwrap() {
        let path = entry.unwrap().path();
        if path == key || path.is_dir() {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(SECRET),
            "{} holds the secret",
            path.display()
        );
    }

    // Unset: the run is refused again on that thread.
    let out = weft(&p, &["variables", "unset", "REGION", "--thread", "th-vars"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let out = weft(&p, &["run", "--continue", "th-vars", "again"]);
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    assert!(
        output_text(&out).contains("REGION"),
        "{}",
        output_text(&out)
    );
}

/// `a` creates the resumable `writer` instance `alice` with the attachment `notes/plan.txt`;
/// `writer` requires the scoped variable `DOC_DB`, so the creation is deferred. `a` then
/// tries the name again. Alice's worker reads her copy of the plan and ends with `done`.
fn deferring_project(p: &Path) {
    let lead = json!({"responses": [
        {"toolCalls": [{"id": "l1", "name": "subagent_create",
            "arguments": {"name": "alice", "message": "draft", "files": ["notes/plan.txt"]}}]},
        {"toolCalls": [{"id": "l2", "name": "subagent_create",
            "arguments": {"name": "alice", "message": "again"}}]},
        {"text": "waiting for variables"}
    ]});
    common::scripted_project(p, "defaultAgent = \"a\"\n", &[], &lead);
    let files = [
        (
            "prompts/p.toml",
            "name = \"p\"\ntools = [{ name = \"writer\", resumable = { receives_messages = \"side_a\" }, initAttachmentsProperty = \"files\" }]\n",
        ),
        (
            "agents/writer.toml",
            "name = \"writer\"\ntype = \"dual_ai\"\nexposeAsTool = true\ntoolDescription = \"Writes.\"\nmaxSessionTurns = 2\n\
             [sideA]\nprompt = \"wa\"\nsessionStop = { name = \"done\", messageProperty = \"summary\" }\n\
             [sideB]\nprompt = \"wb\"\n\
             [[variables]]\nname = \"DOC_DB\"\nrequired = true\nscoped = true\n",
        ),
        (
            "prompts/wa.toml",
            "name = \"wa\"\nmodel = \"scripted-turns:writer.json\"\ntools = [\"read_file\", \"done\"]\n",
        ),
        ("prompts/wb.toml", "name = \"wb\"\n"),
        (
            "tools/done.toml",
            "name = \"done\"\nparameters = { type = \"object\", properties = { summary = { type = \"string\" } } }\n",
        ),
        ("notes/plan.txt", "the plan"),
    ];
    for (path, body) in files {
        let path = p.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body).unwrap();
    }
    std::fs::write(
        p.join("writer.json"),
        json!({"responses": [
            {"toolCalls": [{"id": "w1", "name": "read_file", "arguments": {"path": "attachments/plan.txt"}}]},
            {"toolCalls": [{"id": "w2", "name": "done", "arguments": {"summary": "read the plan"}}]}
        ]})
        .to_string(),
    )
    .unwrap();
}

#[test]
fn weft_variables_boots_a_deferred_creation_with_its_attachments_and_holds_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    deferring_project(&p);
    let out = weft(&p, &["run", "--json", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let parent = events[0]["payload"]["threadId"]
        .as_str()
        .unwrap()
        .to_owned();
    let created: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_call_end" && e["payload"]["tool"] == "subagent_create")
        .collect();
    assert_eq!(created.len(), 2);
    let deferred = created[0]["payload"]["result"].to_string();
    let request = deferred
        .split_once("vr-")
        .map(|(_, rest)| format!("vr-{}", &rest[..16]))
        .unwrap();
    // The deferred creation holds its name: the second is refused.
    let again = created[1]["payload"]["result"].to_string();
    assert!(
        again.contains(&format!(
            "is already waiting for its variables (request {request})"
        )),
        "{again}"
    );
    // Still missing: exit 3, nothing booted.
    let out = weft(&p, &["variables", "boot", &request, "--thread", &parent]);
    assert_eq!(out.status.code(), Some(3), "{}", output_text(&out));
    assert!(
        output_text(&out).contains("DOC_DB"),
        "{}",
        output_text(&out)
    );
    let out = weft(
        &p,
        &[
            "variables",
            "set",
            "DOC_DB=pg://alice",
            "--thread",
            &request,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    // Booted: the child runs in its own folder, with its copy of the attachment.
    let out = weft(
        &p,
        &["variables", "boot", &request, "--thread", &parent, "--json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let booted: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(booted["threadId"], request.as_str());
    let copy = p
        .join(".weft/threads")
        .join(&request)
        .join("attachments/plan.txt");
    assert_eq!(std::fs::read_to_string(copy).unwrap(), "the plan");
    let run = booted["runId"].as_str().unwrap();
    let logged = weft(&p, &["events", run, "--json"]);
    let read: Vec<Value> = String::from_utf8_lossy(&logged.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["type"] == "tool_call_end" && e["payload"]["tool"] == "read_file")
        .collect();
    assert_eq!(read[0]["payload"]["result"], "the plan", "{read:?}");
    // The instance is in its parent's registry under its name, done.
    let state = weft(&p, &["thread", "state", &parent]);
    let state: Value = serde_json::from_slice(&state.stdout).unwrap();
    let children = state["children"].as_array().unwrap();
    assert_eq!(children.len(), 1, "{state:#}");
    assert_eq!(children[0]["name"], "alice");
    assert_eq!(children[0]["reference"], request.as_str());
    assert_eq!(children[0]["status"], "completed");
    // Once only.
    let out = weft(&p, &["variables", "boot", &request, "--thread", &parent]);
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
}

//! Standard Agents variables through the CLI (issue 21, SA-073/074/075): a required variable
//! without a value stops `weft run` before anything is recorded (exit 2, the names and how to
//! give them); `weft variables set` gives them to a thread (a secret encrypted in the store);
//! the run's tools get them through their context (`run_command`'s environment); a secret
//! never reaches the store's files in clear, nor the event log.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

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

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
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
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let said = text(&out);
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
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
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
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
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
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = weft(&p, &["variables", "list", "--thread", "th-vars", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(!text(&out).contains(SECRET));
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
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
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
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = weft(&p, &["run", "--continue", "th-vars", "again"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("REGION"), "{}", text(&out));
}

//! Issue 16 through the CLI: nothing an agent does may damage Weft's data or leave its
//! workspace. A scripted model drives `weft run`: it attacks the run store and the definition
//! files with every tool, tries to escape the sandbox (outside writes, files beside the
//! workspace, `~/.ssh`, symlinks, TCP/UDP/Unix sockets to local listeners, a background process
//! that should outlive the call, a huge output), and Weft itself is killed with SIGKILL while a
//! command runs. Also: where the store lives, `--workspace`, and the sandbox modes.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::weft;

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A project in `dir` whose one agent makes `calls` (each `[tool, arguments]`) in one step,
/// then answers "done". `extra` is appended to weft.toml.
fn project(dir: &Path, calls: &[(&str, Value)], extra: &str) {
    let tool_calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| json!({"id": format!("c{i}"), "name": name, "arguments": args}))
        .collect();
    let script = json!({"responses": [{"toolCalls": tool_calls}, {"text": "done"}]});
    common::scripted_project(
        dir,
        extra,
        &["read_file", "write_file", "run_command", "list_dir"],
        &script,
    );
}

/// The `tool_result` events of a `--json` run, by call id.
fn json_events(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect()
}

fn results(stdout: &str) -> Vec<(String, Value, bool)> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(common::flat)
        .filter(|e| e["type"] == "tool_call_end")
        .map(|e| {
            (
                e["toolCallId"].as_str().unwrap_or_default().to_owned(),
                e["result"].clone(),
                e["isError"] == true,
            )
        })
        .collect()
}

fn definitions(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    [
        "weft.toml",
        "agents/a.toml",
        "prompts/p.toml",
        "script.json",
    ]
    .iter()
    .map(|f| (dir.join(f), std::fs::read(dir.join(f)).unwrap()))
    .collect()
}

fn processes_with(marker: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
        })
        .count()
}

#[test]
fn an_agent_cannot_damage_the_store_or_the_definition_files() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("proj");
    project(
        &root,
        &[
            (
                "write_file",
                json!({"path": ".weft/weft.db", "content": "garbage"}),
            ),
            (
                "write_file",
                json!({"path": "agents/a.toml", "content": "garbage"}),
            ),
            (
                "write_file",
                json!({"path": "weft.toml", "content": "garbage"}),
            ),
            ("read_file", json!({"path": ".weft/weft.db"})),
            (
                "run_command",
                json!({"command": "echo garbage > .weft/weft.db; echo garbage > weft.toml; echo garbage > agents/a.toml; rm -rf .weft agents prompts weft.toml; ln -s .weft/weft.db link; echo ok"}),
            ),
            ("write_file", json!({"path": "link", "content": "garbage"})),
            (
                "write_file",
                json!({"path": "notes.md", "content": "allowed"}),
            ),
        ],
        "",
    );
    let before = definitions(&root);
    // Run from inside the project, as weft.toml's comment suggests (`weft run . "…"`).
    let out = weft(&root, &["run", ".", "--json", "wreck it"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let results = results(&text(&out.stdout));
    assert_eq!(results.len(), 7, "{results:?}");
    for (id, result, is_error) in &results[..4] {
        assert!(is_error, "{id} must be refused: {result}");
    }
    assert!(
        results[5].2,
        "a link to the store is refused: {:?}",
        results[5]
    );
    assert!(
        !results[6].2,
        "ordinary files are writable: {:?}",
        results[6]
    );
    assert_eq!(
        definitions(&root),
        before,
        "the definition files are untouched"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("notes.md")).unwrap(),
        "allowed"
    );
    // The store is intact and the run is in it, completed.
    let out = weft(&root, &["runs", "list", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let runs: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(runs[0]["status"], "completed", "{runs}");
}

#[test]
fn escape_attempts_through_weft_run_are_contained() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("proj");
    std::fs::write(dir.path().join("beside.txt"), "SECRET-BESIDE").unwrap();
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let unix = std::os::unix::net::UnixListener::bind(dir.path().join("s.sock")).unwrap();
    unix.set_nonblocking(true).unwrap();
    let (tcp_port, udp_port) = (
        tcp.local_addr().unwrap().port(),
        udp.local_addr().unwrap().port(),
    );
    let unix_client = if Path::new("/usr/bin/python3").exists() {
        format!(
            "python3 -c \"import socket; socket.socket(socket.AF_UNIX).connect('{}')\" && echo UNIX-CONNECTED; ",
            dir.path().join("s.sock").display()
        )
    } else {
        String::new()
    };
    let escape = format!(
        "echo x > ../escaped.txt; echo x > {}/escaped2.txt; cat ../beside.txt {}/beside.txt; \
         cat ~/.ssh/id_rsa /root/.ssh/id_rsa; ln -s {}/beside.txt out-link; cat out-link; \
         bash -c 'echo hi > /dev/tcp/127.0.0.1/{tcp_port}' && echo TCP-CONNECTED; \
         bash -c 'echo hi > /dev/udp/127.0.0.1/{udp_port}' && echo UDP-SENT; {unix_client}\
         sleep 1000.8181 & echo done",
        dir.path().display(),
        dir.path().display(),
        dir.path().display()
    );
    project(
        &root,
        &[
            ("run_command", json!({"command": escape})),
            ("read_file", json!({"path": "out-link"})),
            (
                "run_command",
                json!({"command": "head -c 3000000 /dev/zero | tr '\\0' y"}),
            ),
        ],
        "",
    );
    let out = weft(dir.path(), &["run", "proj", "--json", "escape"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let results = results(&text(&out.stdout));
    let escape_result = results[0].1.to_string();
    for leak in [
        "SECRET-BESIDE",
        "TCP-CONNECTED",
        "UDP-SENT",
        "UNIX-CONNECTED",
        "PRIVATE KEY",
    ] {
        assert!(!escape_result.contains(leak), "{leak}: {escape_result}");
    }
    assert!(escape_result.contains("done"), "{escape_result}");
    assert!(!dir.path().join("escaped.txt").exists());
    assert!(!dir.path().join("escaped2.txt").exists());
    assert!(
        results[1].2,
        "read_file refuses the link out: {:?}",
        results[1]
    );
    assert_eq!(tcp.accept().unwrap_err().kind(), ErrorKind::WouldBlock);
    assert_eq!(
        udp.recv_from(&mut [0u8; 8]).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    assert_eq!(unix.accept().unwrap_err().kind(), ErrorKind::WouldBlock);
    assert_eq!(
        processes_with("1000.8181"),
        0,
        "the background process outlived the call"
    );
    // A huge output is capped at the source; the event refers to the ledger's copy of
    // what the model saw (below) rather than repeating it.
    let events = json_events(&text(&out.stdout));
    let capped = events
        .iter()
        .filter(|e| e["type"] == "tool_call_end")
        .nth(2)
        .expect("the third call's end");
    let bytes = capped["payload"]["resultBytes"].as_u64().unwrap();
    assert!(bytes > 16 * 1024 && bytes < 70_000, "{capped}");
    let run_id = text(&out.stdout)
        .lines()
        .find_map(|l| {
            serde_json::from_str::<Value>(l)
                .ok()
                .and_then(|v| v["runId"].as_str().map(str::to_owned))
        })
        .unwrap();
    let events = weft(&root, &["events", &run_id, "--json", "--full"]);
    assert_eq!(events.status.code(), Some(0), "{}", text(&events.stderr));
    let log = text(&events.stdout);
    // The capped result is large, so the event refers to the ledger's one copy of it.
    assert!(log.contains("resultRef"), "{}", &log[..log.len().min(2000)]);
    assert!(
        !log.contains(&"y".repeat(70_000)),
        "the log holds no more than the model saw"
    );
    let show = weft(&root, &["runs", "show", &run_id, "--json"]);
    let ledger = text(&show.stdout);
    assert!(
        ledger.contains("truncated by Weft: 65536 of 3000000 bytes shown"),
        "the ledger holds what the model saw"
    );
    assert!(!ledger.contains(&"y".repeat(70_000)));
}

#[test]
fn killing_weft_kills_the_commands_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("proj");
    project(
        &root,
        &[(
            "run_command",
            json!({"command": "sleep 1000.9191 & while true; do echo tick >> ticks.txt; sleep 0.02; done"}),
        )],
        "",
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["run", "proj", "--json", "go"])
        .current_dir(dir.path())
        .env_remove("WEFT_DATABASE_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let ticks = root.join("ticks.txt");
    while !ticks.exists() {
        std::thread::yield_now();
    }
    child.kill().unwrap(); // SIGKILL: no clean-up code of Weft runs
    child.wait().unwrap();
    // The parent-death signals take the helper, the PID namespace's init and so everything
    // the command started down; wait (bounded) until the kernel has finished.
    let mut gone = false;
    for _ in 0..2000 {
        if processes_with("1000.9191") == 0 && processes_with("tick >> ticks.txt") == 0 {
            gone = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(gone, "a command outlived `kill -9` of weft");
    let size = std::fs::metadata(&ticks).unwrap().len();
    assert_eq!(processes_with("ticks.txt"), 0);
    assert_eq!(std::fs::metadata(&ticks).unwrap().len(), size);
}

#[test]
fn the_store_is_the_projects_whatever_the_folder_and_read_only_commands_never_create_one() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("proj");
    project(&root, &[], "");
    std::fs::create_dir_all(root.join("src")).unwrap();
    // An old store in a subfolder (from an earlier version's cwd-based default) is reported.
    std::fs::create_dir_all(root.join("src/.weft")).unwrap();
    std::fs::write(root.join("src/.weft/weft.db"), "").unwrap();
    let out = weft(&root.join("src"), &["run", "..", "hi"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(root.join(".weft/weft.db").is_file());
    assert!(
        text(&out.stderr).contains("is a store in the current folder, not the project's"),
        "{}",
        text(&out.stderr)
    );
    // From a subfolder, `weft runs list` finds the project's store.
    let out = weft(&root.join("src"), &["runs", "list", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let runs: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(runs.as_array().map(Vec::len), Some(1), "{runs}");
    // Outside any project, read-only commands fail naming the path and create nothing.
    let empty = tempfile::tempdir().unwrap();
    for args in [
        &["runs", "list"][..],
        &["runs", "show", "r1"],
        &["events", "r1"],
        &["checkpoints", "list", "t1"],
    ] {
        let out = weft(empty.path(), args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains("there is no store at") && stderr.contains(".weft/weft.db"),
            "{args:?}: {stderr}"
        );
    }
    assert!(!empty.path().join(".weft").exists());
}

#[test]
fn workspace_and_sandbox_modes_from_the_command_line_and_weft_toml() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("proj");
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::write(repo.join("lib.rs"), "// repo\n").unwrap();
    project(
        &root,
        &[
            (
                "run_command",
                json!({"command": "pwd; cat lib.rs; echo made > made.txt"}),
            ),
            ("write_file", json!({"path": "written.txt", "content": "w"})),
        ],
        "",
    );
    let repo_arg = repo.display().to_string();
    let out = weft(
        dir.path(),
        &["run", "proj", "--json", "--workspace", &repo_arg, "work"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let first = results(&text(&out.stdout));
    assert!(
        first[0].1["stdout"].as_str().unwrap().contains("// repo"),
        "{first:?}"
    );
    assert!(repo.join("made.txt").is_file() && repo.join("written.txt").is_file());
    assert!(!root.join("made.txt").exists() && !root.join("written.txt").exists());

    // `sandbox = "strict"`: only a scratch folder.
    let strict = dir.path().join("strict");
    project(
        &strict,
        &[(
            "run_command",
            json!({"command": "pwd; ls \"$WEFT_WORKSPACE\" || echo no-workspace"}),
        )],
        "sandbox = \"strict\"\n",
    );
    let out = weft(dir.path(), &["run", "strict", "--json", "work"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = results(&text(&out.stdout))[0].1["stdout"].to_string();
    assert!(
        stdout.contains("/tmp/home") && stdout.contains("no-workspace"),
        "{stdout}"
    );

    // `--sandbox none` is announced, and then really unconfined.
    std::fs::write(dir.path().join("beside.txt"), "BESIDE").unwrap();
    project(
        &strict,
        &[("run_command", json!({"command": "cat ../beside.txt"}))],
        "sandbox = \"strict\"\n",
    );
    let out = weft(
        dir.path(),
        &["run", "strict", "--json", "--sandbox", "none", "x"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("sandbox = \"none\": commands run unconfined"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        results(&text(&out.stdout))[0].1["stdout"]
            .to_string()
            .contains("BESIDE")
    );

    // An unknown mode is a definition error.
    project(&strict, &[], "sandbox = \"off\"\n");
    let out = weft(dir.path(), &["run", "strict", "x"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

/// A secret of the environment (`…_PASSWORD`, `…_TOKEN`, `…_KEY`: any value, not only
/// key-shaped ones) that the model repeats never reaches what Weft prints or records: the
/// live events, the event log, the store's file.
#[test]
fn a_secret_variable_the_model_repeats_is_never_printed_or_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "hunter2-correct-horse-battery";
    let script = json!({"responses": [{"text": format!("The password is {secret}.")}]});
    common::scripted_project(dir.path(), "", &[], &script);
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_weft"))
            .args(args)
            .current_dir(dir.path())
            .env_remove("WEFT_DATABASE_URL")
            .env("DB_PASSWORD", secret)
            .output()
            .expect("weft runs")
    };
    let out = run(&["run", "--json", ".", "What is the password?"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let live = text(&out.stdout);
    assert!(!live.contains(secret), "{live}");
    assert!(
        live.contains("The password is"),
        "the rest of the answer is kept: {live}"
    );
    let run_id = json_events(&live)
        .iter()
        .find_map(|e| e["runId"].as_str().map(str::to_owned))
        .unwrap();
    let logged = run(&["events", &run_id, "--json"]);
    assert!(!text(&logged.stdout).contains(secret));
    for entry in std::fs::read_dir(dir.path().join(".weft")).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "{} holds the secret",
                path.display()
            );
        }
    }
}

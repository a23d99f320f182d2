//! The built-in tools through their public `Tool` interface: behaviour, errors the model can
//! read, sandbox escapes refused, secrets kept out of commands, timeouts and aborts.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use weft_provider::{Extensions, Tool, ToolContext, ToolError};
use weft_tools::{
    CommandLimits, CommandSandbox, Confinement, Workspace, builtin_tool, builtin_tools, run_command,
};

fn context(id: &str) -> ToolContext {
    ToolContext {
        tool_call_id: id.into(),
        signal: CancellationToken::new(),
        extensions: Extensions::new(),
    }
}

async fn call(tool: &Tool, args: Value) -> Result<Value, ToolError> {
    tool.run(args, context("call_1")).await
}

fn setup() -> (tempfile::TempDir, Workspace) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(
        dir.path().join("src/main.rs"),
        "fn main() {\n    println!(\"hi\");\n}\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("README.md"), "# Demo\nHello world\n").unwrap();
    std::fs::write(dir.path().join(".gitignore"), "target/\n").unwrap();
    std::fs::create_dir_all(dir.path().join("target")).unwrap();
    std::fs::write(dir.path().join("target/junk.rs"), "fn main() {}\n").unwrap();
    // Commands run in the OS sandbox, through this package's helper binary.
    let workspace = Workspace::new(dir.path())
        .unwrap()
        .with_confinement(Confinement {
            sandbox: CommandSandbox {
                helper: Some(env!("CARGO_BIN_EXE_weft-sandbox-exec").into()),
                ..CommandSandbox::default()
            },
            ..Confinement::default()
        });
    (dir, workspace)
}

fn tool(workspace: &Workspace, name: &str) -> Tool {
    builtin_tool(workspace, name).unwrap()
}

#[tokio::test]
async fn declarations_say_which_tools_have_side_effects() {
    let (_dir, ws) = setup();
    let flags: Vec<(String, bool, bool)> = builtin_tools(&ws)
        .into_iter()
        .map(|t| (t.name.clone(), t.side_effects, t.idempotent))
        .collect();
    assert_eq!(
        flags,
        [
            ("read_file".into(), false, false),
            ("write_file".into(), true, true),
            ("list_dir".into(), false, false),
            ("search_code".into(), false, false),
            ("run_command".into(), true, false),
            ("read_url".into(), false, true),
            ("search_web".into(), false, true),
            ("complete_task".into(), false, false),
        ]
    );
    for t in builtin_tools(&ws) {
        assert_eq!(t.parameters["type"], "object", "{}", t.name);
    }
}

#[tokio::test]
async fn read_write_and_ranges() {
    let (dir, ws) = setup();
    let text = call(&tool(&ws, "read_file"), json!({"path": "src/main.rs"}))
        .await
        .unwrap();
    assert!(text.as_str().unwrap().contains("println!"));
    let range = call(
        &tool(&ws, "read_file"),
        json!({"path": "src/main.rs", "start_line": 2, "end_line": 2}),
    )
    .await
    .unwrap();
    assert_eq!(range, json!("    println!(\"hi\");"));
    let written = call(
        &tool(&ws, "write_file"),
        json!({"path": "out/notes.txt", "content": "x"}),
    )
    .await
    .unwrap();
    assert_eq!(written["bytes"], 1);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out/notes.txt")).unwrap(),
        "x"
    );
    let error = call(&tool(&ws, "read_file"), json!({"path": "nope.txt"}))
        .await
        .unwrap_err();
    assert!(error.message.contains("nope.txt"), "{error}");
    let error = call(&tool(&ws, "read_file"), json!({"file": "x"}))
        .await
        .unwrap_err();
    assert!(
        error.message.contains("invalid arguments for read_file"),
        "{error}"
    );
    std::fs::write(dir.path().join("bin.dat"), [0u8, 1, 2]).unwrap();
    assert!(
        call(&tool(&ws, "read_file"), json!({"path": "bin.dat"}))
            .await
            .unwrap_err()
            .message
            .contains("binary")
    );
}

#[tokio::test]
async fn list_and_search_honour_gitignore() {
    let (_dir, ws) = setup();
    let listing = call(&tool(&ws, "list_dir"), json!({})).await.unwrap();
    let entries: Vec<&str> = listing["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        entries.contains(&"src/") && entries.contains(&"README.md"),
        "{entries:?}"
    );
    let deep = call(&tool(&ws, "list_dir"), json!({"recursive": true}))
        .await
        .unwrap();
    let deep: Vec<&str> = deep["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(deep.contains(&"src/main.rs"));
    assert!(
        !deep.iter().any(|e| e.starts_with("target")),
        "ignored folder listed: {deep:?}"
    );
    let found = call(&tool(&ws, "search_code"), json!({"pattern": "fn\\s+main"}))
        .await
        .unwrap();
    assert_eq!(found["matches"], json!(["src/main.rs:1: fn main() {"]));
    let found = call(
        &tool(&ws, "search_code"),
        json!({"pattern": "hello", "case_insensitive": true, "glob": "*.md"}),
    )
    .await
    .unwrap();
    assert_eq!(found["matches"], json!(["README.md:2: Hello world"]));
    let error = call(&tool(&ws, "search_code"), json!({"pattern": "("}))
        .await
        .unwrap_err();
    assert!(error.message.contains("invalid pattern"));
}

#[cfg(unix)]
#[tokio::test]
async fn sandbox_escapes_are_refused_by_every_tool() {
    let (dir, ws) = setup();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "top secret").unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
    let attempts = [
        ("read_file", json!({"path": "/etc/passwd"})),
        ("read_file", json!({"path": "../../etc/passwd"})),
        ("read_file", json!({"path": "link/secret.txt"})),
        (
            "write_file",
            json!({"path": "../escape.txt", "content": "x"}),
        ),
        (
            "write_file",
            json!({"path": "link/planted.txt", "content": "x"}),
        ),
        (
            "write_file",
            json!({"path": "/tmp/weft-escape.txt", "content": "x"}),
        ),
        ("list_dir", json!({"path": ".."})),
        ("list_dir", json!({"path": "link"})),
        ("search_code", json!({"pattern": "secret", "path": "link"})),
        ("search_code", json!({"pattern": "root", "path": "/etc"})),
        ("run_command", json!({"command": "pwd", "cwd": "../"})),
        ("run_command", json!({"command": "pwd", "cwd": "link"})),
    ];
    for (name, args) in attempts {
        let error = call(&tool(&ws, name), args.clone()).await.unwrap_err();
        assert!(
            error.message.contains("workspace") || error.message.contains("absolute"),
            "{name} {args}: {error}"
        );
    }
    assert!(!outside.path().join("planted.txt").exists());
    assert!(!std::path::Path::new("/tmp/weft-escape.txt").exists());
}

#[tokio::test]
async fn commands_run_in_the_workspace_without_our_environment() {
    let (_dir, ws) = setup();
    // `cargo test` runs this process with CARGO_MANIFEST_DIR set: it stands for any variable of
    // Weft's own environment (API keys included) that must not reach a command.
    assert!(std::env::var("CARGO_MANIFEST_DIR").is_ok());
    let result = tool(&ws, "run_command")
        .run(
            json!({"command": "pwd; echo $WEFT_TOOL_CALL_ID; echo ${CARGO_MANIFEST_DIR:-none}; test -n \"$PATH\" && echo path; exit 3"}),
            context("call_42"),
        )
        .await
        .unwrap();
    let stdout = result["stdout"].as_str().unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], ws.root().display().to_string());
    assert_eq!(lines[1], "call_42");
    assert_eq!(
        lines[2], "none",
        "our environment must not reach the command"
    );
    assert_eq!(lines[3], "path", "PATH is passed on");
    assert_eq!(result["exit_code"], 3);
}

#[tokio::test]
async fn output_is_capped_and_timeouts_and_aborts_kill_the_command() {
    let (_dir, ws) = setup();
    let limits = CommandLimits {
        output_cap: 100,
        ..CommandLimits::default()
    };
    let big = run_command(&ws, limits)
        .run(json!({"command": "yes hello | head -c 5000"}), context("c"))
        .await
        .unwrap();
    let stdout = big["stdout"].as_str().unwrap();
    assert!(stdout.starts_with(&"hello\n".repeat(20)[..100]), "{stdout}");
    assert!(
        stdout.ends_with("[… truncated by Weft: 100 of 5000 bytes shown …]"),
        "{stdout}"
    );
    assert_eq!(big["truncated"], true);
    assert_eq!(big["dropped_bytes"], 4900);

    let error = tool(&ws, "run_command")
        .run(
            json!({"command": "sleep 30", "timeout_secs": 0.2}),
            context("c"),
        )
        .await
        .unwrap_err();
    assert!(
        error.message.contains("timed out") && error.transient,
        "{error}"
    );

    let ctx = context("c");
    let signal = ctx.signal.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        signal.cancel();
    });
    let started = std::time::Instant::now();
    let error = tool(&ws, "run_command")
        .run(json!({"command": "sleep 30"}), ctx)
        .await
        .unwrap_err();
    assert!(error.message.contains("cancelled"));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the abort did not kill the command"
    );
}

#[tokio::test]
async fn complete_task_validates_its_output() {
    let (_dir, ws) = setup();
    let done = call(
        &tool(&ws, "complete_task"),
        json!({"summary": "Fixed it", "artifacts": ["a.rs"], "nextSteps": "ship"}),
    )
    .await
    .unwrap();
    assert_eq!(
        done,
        json!({"status": "completed", "summary": "Fixed it", "artifacts": ["a.rs"], "nextSteps": "ship"})
    );
    assert!(
        call(&tool(&ws, "complete_task"), json!({"summary": "  "}))
            .await
            .is_err()
    );
    assert!(call(&tool(&ws, "complete_task"), json!({})).await.is_err());
    assert!(
        call(
            &tool(&ws, "complete_task"),
            json!({"summary": "x", "extra": 1})
        )
        .await
        .is_err()
    );
}

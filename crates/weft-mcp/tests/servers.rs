//! The MCP client against real MCP servers: `tests/servers/demo_server.py`, written with the
//! official Python SDK (`mcp`, FastMCP), over stdio (in the command sandbox, and without it)
//! and streamable HTTP. Without the `mcp` package the tests are skipped with a printed
//! reason — unless `CI` is set, where they fail.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use weft_mcp::{McpHub, Sandboxing, ServerConfig};
use weft_provider::{Extensions, Tool, ToolContext, ToolError};
use weft_sandbox::Mode;

const HELPER: &str = env!("CARGO_BIN_EXE_weft-mcp-sandbox-exec");

fn python() -> Option<(PathBuf, PathBuf)> {
    weft_testkit::mcp_python()
}

fn servers_dir() -> PathBuf {
    weft_testkit::mcp_servers_dir()
}

fn stdio_config(exe: &Path, prefix: &Path) -> ServerConfig {
    ServerConfig {
        command: Some(exe.display().to_string()),
        args: vec![
            servers_dir().join("demo_server.py").display().to_string(),
            "stdio".into(),
        ],
        read_only: vec![prefix.to_path_buf(), servers_dir()],
        ..ServerConfig::default()
    }
}

fn hub(config: ServerConfig, mode: Mode, workspace: &Path) -> McpHub {
    let mut sandboxing = Sandboxing::new(mode, workspace.canonicalize().unwrap());
    sandboxing.helper = Some(HELPER.into());
    McpHub::new(BTreeMap::from([("demo".to_owned(), config)]), sandboxing)
}

fn context(signal: CancellationToken) -> ToolContext {
    ToolContext {
        tool_call_id: "call_1".into(),
        signal,
        extensions: Extensions::new(),
    }
}

async fn tools(hub: &McpHub) -> Vec<Tool> {
    hub.tools("demo").await.unwrap().tools
}

fn named<'a>(tools: &'a [Tool], name: &str) -> &'a Tool {
    tools.iter().find(|t| t.name == name).unwrap_or_else(|| {
        panic!(
            "no tool {name} in {:?}",
            tools.iter().map(|t| &t.name).collect::<Vec<_>>()
        )
    })
}

async fn call(tool: &Tool, arguments: Value) -> Result<Value, ToolError> {
    tool.run(arguments, context(CancellationToken::new())).await
}

/// The text a FastMCP tool returned (its structured `{"result": …}`).
fn text(value: &Value) -> String {
    value
        .get("result")
        .and_then(Value::as_str)
        .or_else(|| value.as_str())
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_servers_tools_are_namespaced_with_their_schemas_and_run() {
    let Some((exe, prefix)) = python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let hub = hub(stdio_config(&exe, &prefix), Mode::None, dir.path());
    let tools = tools(&hub).await;
    let echo = named(&tools, "demo__echo");
    assert_eq!(echo.description, "Returns the text it is given.");
    assert_eq!(echo.parameters["properties"]["text"]["type"], "string");
    assert_eq!(echo.parameters["required"], json!(["text"]));
    // The server's schema is what arguments are checked against.
    assert!(echo.schema_problems(&json!({"text": 3})).is_some());
    assert_eq!(
        text(&call(echo, json!({"text": "hi"})).await.unwrap()),
        "hi"
    );
    // Untrusted: the read-only annotation is not taken at its word.
    assert!(echo.side_effects);
    assert!(named(&tools, "demo__read_note").side_effects);
    // A failing tool is an error result for the model, not an uncertain call.
    let missing = call(
        named(&tools, "demo__read_file"),
        json!({"path": "nope.txt"}),
    )
    .await
    .unwrap_err();
    assert!(!missing.uncertain, "{missing:?}");
    assert!(missing.message.contains("nope.txt"), "{}", missing.message);
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_servers_read_only_tools_have_no_side_effects() {
    let Some((exe, prefix)) = python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let config = ServerConfig {
        trusted: true,
        ..stdio_config(&exe, &prefix)
    };
    let hub = hub(config, Mode::None, dir.path());
    let tools = tools(&hub).await;
    let note = named(&tools, "demo__read_note");
    assert!(!note.side_effects && note.idempotent);
    assert!(named(&tools, "demo__echo").side_effects);
    assert_eq!(text(&call(note, json!({})).await.unwrap()), "the note");
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_added_mid_run_is_offered_after_list_changed() {
    let Some((exe, prefix)) = python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let hub = hub(stdio_config(&exe, &prefix), Mode::None, dir.path());
    let before = hub.tools("demo").await.unwrap();
    assert!(!before.tools.iter().any(|t| t.name == "demo__extra"));
    // Listing again without a change costs nothing and changes nothing.
    assert_eq!(
        hub.tools("demo").await.unwrap().fingerprint,
        before.fingerprint
    );
    let added = call(
        named(&before.tools, "demo__add_tool"),
        json!({"name": "extra"}),
    )
    .await
    .unwrap();
    assert_eq!(text(&added), "tool extra added");
    let after = hub.tools("demo").await.unwrap();
    assert_ne!(after.fingerprint, before.fingerprint);
    let extra = named(&after.tools, "demo__extra");
    assert_eq!(text(&call(extra, json!({})).await.unwrap()), "added extra");
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_crashing_mid_call_leaves_the_call_uncertain_and_is_restarted_with_a_limit() {
    let Some((exe, prefix)) = python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let config = ServerConfig {
        max_restarts: Some(1),
        ..stdio_config(&exe, &prefix)
    };
    let hub = hub(config, Mode::None, dir.path());
    let tools = tools(&hub).await;
    let crash = named(&tools, "demo__crash");
    let error = call(crash, json!({})).await.unwrap_err();
    assert!(error.uncertain, "{error:?}");
    assert!(!error.transient);
    assert!(
        error.message.contains("gave no answer"),
        "{}",
        error.message
    );
    // The call did start: its effect happened, though it never answered.
    let log = std::fs::read_to_string(dir.path().join("crash.log")).unwrap();
    assert_eq!(log, "crash\n");
    // Its next use starts it again (after a backoff).
    let echo = named(&tools, "demo__echo");
    assert_eq!(
        text(&call(echo, json!({"text": "back"})).await.unwrap()),
        "back"
    );
    // A second crash exceeds maxRestarts = 1: the server is given up on.
    assert!(call(crash, json!({})).await.unwrap_err().uncertain);
    let down = call(echo, json!({"text": "again"})).await.unwrap_err();
    assert!(
        down.message.contains("is not started again"),
        "{}",
        down.message
    );
    assert!(hub.tools("demo").await.is_err());
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_times_out_is_uncertain_and_cancelled_on_the_server() {
    let Some((exe, prefix)) = python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let config = ServerConfig {
        trusted: true,
        timeout: Some(1.0),
        ..stdio_config(&exe, &prefix)
    };
    let hub = hub(config, Mode::None, dir.path());
    let tools = tools(&hub).await;
    // A timeout of a side-effecting tool: uncertain, and the server is told to cancel.
    let slow = named(&tools, "demo__slow");
    let error = call(slow, json!({"seconds": 30})).await.unwrap_err();
    assert!(error.uncertain, "{error:?}");
    assert!(
        error.message.contains("no answer within 1 s"),
        "{}",
        error.message
    );
    wait_for(&dir.path().join("slow.log"), "cancelled\n").await;
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_call_cancels_it_on_the_server() {
    let Some((exe, prefix)) = python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let hub = hub(stdio_config(&exe, &prefix), Mode::None, dir.path());
    let tools = tools(&hub).await;
    let slow = named(&tools, "demo__slow").clone();
    let signal = CancellationToken::new();
    let started = std::time::Instant::now();
    let call = tokio::spawn({
        let signal = signal.clone();
        async move { slow.run(json!({"seconds": 30}), context(signal)).await }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    signal.cancel();
    let error = call.await.unwrap().unwrap_err();
    assert!(error.message.contains("cancelled"), "{}", error.message);
    assert!(started.elapsed() < Duration::from_secs(10));
    wait_for(&dir.path().join("slow.log"), "cancelled\n").await;
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_start_on_first_use_and_shutdown_stops_them() {
    let Some((exe, prefix)) = python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let hub = hub(stdio_config(&exe, &prefix), Mode::None, dir.path());
    let tools = tools(&hub).await;
    let pid = call(named(&tools, "demo__pid"), json!({})).await.unwrap();
    let pid = pid["result"].as_u64().unwrap();
    let proc = PathBuf::from(format!("/proc/{pid}"));
    assert!(proc.exists());
    hub.shutdown().await;
    for _ in 0..50 {
        if !proc.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !proc.exists(),
        "the server's process {pid} outlived the shutdown"
    );
    // A stopped hub starts nothing again.
    assert!(hub.tools("demo").await.is_err());
}

async fn wait_for(path: &Path, content: &str) {
    for _ in 0..100 {
        if std::fs::read_to_string(path).is_ok_and(|c| c == content) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "{} never held {content:?} (it holds {:?})",
        path.display(),
        std::fs::read_to_string(path).ok()
    );
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_runs_in_the_command_sandbox() {
    let Some((exe, prefix)) = python() else {
        return;
    };
    let parent = tempfile::tempdir().unwrap();
    let workspace = parent.path().join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("inside.txt"), "inside").unwrap();
    std::fs::write(parent.path().join("beside.txt"), "SECRET-BESIDE").unwrap();
    let hub = hub(stdio_config(&exe, &prefix), Mode::Workspace, &workspace);
    let tools = tools(&hub).await;
    let read = named(&tools, "demo__read_file");
    let inside = call(read, json!({"path": "inside.txt"})).await.unwrap();
    assert_eq!(text(&inside), "inside");
    let beside = parent.path().canonicalize().unwrap().join("beside.txt");
    let refused = call(read, json!({"path": beside.display().to_string()}))
        .await
        .unwrap_err();
    assert!(!refused.message.contains("SECRET"), "{}", refused.message);
    let home = std::env::var("HOME").unwrap();
    let bashrc = call(read, json!({"path": format!("{home}/.bashrc")})).await;
    assert!(bashrc.is_err() || !std::path::Path::new(&format!("{home}/.bashrc")).exists());
    hub.shutdown().await;
}

/// A free local port (the server binds it a moment later).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamable_http_servers_tools_run_with_the_configured_headers_and_announce_list_changes()
{
    let Some((exe, _prefix)) = python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let server = weft_testkit::McpHttpServer::start(&exe, dir.path()).await;
    let config = ServerConfig {
        url: Some(server.url.clone()),
        headers: BTreeMap::from([("X-Weft-Test".to_owned(), "token-1".to_owned())]),
        ..ServerConfig::default()
    };
    assert!(config.problems("demo").is_empty());
    let hub = hub(config, Mode::Workspace, dir.path());
    let tools = tools(&hub).await;
    let echo = named(&tools, "demo__echo");
    assert_eq!(
        text(&call(echo, json!({"text": "over http"})).await.unwrap()),
        "over http"
    );
    let header = call(
        named(&tools, "demo__header"),
        json!({"name": "x-weft-test"}),
    )
    .await
    .unwrap();
    assert_eq!(text(&header), "token-1");
    let added = call(named(&tools, "demo__add_tool"), json!({"name": "late"})).await;
    assert!(added.is_ok(), "{added:?}");
    // The server's list_changed reaches the client over HTTP too.
    let mut listed = hub.tools("demo").await.unwrap().tools;
    for _ in 0..20 {
        if listed.iter().any(|t| t.name == "demo__late") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        listed = hub.tools("demo").await.unwrap().tools;
    }
    let late = named(&listed, "demo__late");
    assert_eq!(text(&call(late, json!({})).await.unwrap()), "added late");
    hub.shutdown().await;
}

//! Escape attempts through the real tools, with commands in the OS sandbox (RT-072, UPP-244):
//! writing outside, reading beside the workspace and the home folder, symlinks out, TCP, UDP
//! and Unix sockets to local listeners, a fork bomb, a memory hog, a huge output, an orphaned
//! background process, and the run store and definition files through every tool. Each is
//! refused or contained. Every attempt is bounded (no test waits on a clock).

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use weft_provider::{Extensions, ToolContext, ToolError};
use weft_tools::{
    CommandLimits, CommandSandbox, Confinement, Limits, Mode, Protection, Workspace, builtin_tool,
    run_command,
};

const HELPER: &str = env!("CARGO_BIN_EXE_weft-sandbox-exec");

fn context() -> ToolContext {
    ToolContext {
        tool_call_id: "call_1".into(),
        signal: CancellationToken::new(),
        extensions: Extensions::new(),
    }
}

/// A parent folder holding `ws/` (the workspace, laid out as a project with a store) and a
/// secret file beside it.
struct Fixture {
    parent: tempfile::TempDir,
    workspace: Workspace,
}

impl Fixture {
    fn new(sandbox: CommandSandbox) -> Fixture {
        let parent = tempfile::tempdir().unwrap();
        let ws = parent.path().join("ws");
        std::fs::create_dir_all(ws.join(".weft")).unwrap();
        std::fs::create_dir_all(ws.join("agents")).unwrap();
        std::fs::write(ws.join(".weft/weft.db"), "RUNS").unwrap();
        std::fs::write(ws.join("weft.toml"), "name = \"demo\"\n").unwrap();
        std::fs::write(ws.join("agents/coder.toml"), "name = \"coder\"\n").unwrap();
        std::fs::write(ws.join("notes.txt"), "hello\n").unwrap();
        std::fs::write(parent.path().join("beside.txt"), "SECRET-BESIDE").unwrap();
        let workspace = Workspace::new(&ws).unwrap().with_confinement(Confinement {
            protected: vec![
                (".weft".into(), Protection::Hidden),
                ("weft.toml".into(), Protection::ReadOnly),
                ("agents".into(), Protection::ReadOnly),
            ],
            sandbox: CommandSandbox {
                helper: Some(HELPER.into()),
                ..sandbox
            },
        });
        Fixture { parent, workspace }
    }

    fn ws(&self) -> PathBuf {
        self.workspace.root().to_path_buf()
    }

    async fn tool(&self, name: &str, args: Value) -> Result<Value, ToolError> {
        builtin_tool(&self.workspace, name)
            .unwrap()
            .run(args, context())
            .await
    }

    async fn sh(&self, command: &str) -> Value {
        self.tool("run_command", json!({"command": command}))
            .await
            .unwrap()
    }

    /// The project files are as the fixture wrote them.
    fn assert_intact(&self) {
        let ws = self.ws();
        assert_eq!(
            std::fs::read_to_string(ws.join(".weft/weft.db")).unwrap(),
            "RUNS"
        );
        assert_eq!(
            std::fs::read_to_string(ws.join("weft.toml")).unwrap(),
            "name = \"demo\"\n"
        );
        assert_eq!(
            std::fs::read_to_string(ws.join("agents/coder.toml")).unwrap(),
            "name = \"coder\"\n"
        );
    }
}

fn out(result: &Value) -> String {
    format!(
        "{}{}",
        result["stdout"].as_str().unwrap_or_default(),
        result["stderr"].as_str().unwrap_or_default()
    )
}

fn with_limits(limits: Limits) -> CommandSandbox {
    CommandSandbox {
        limits,
        ..CommandSandbox::default()
    }
}

/// Processes on this machine whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if text.contains(marker) {
                found.push(text);
            }
        }
    }
    found
}

#[tokio::test]
async fn commands_cannot_write_outside_or_read_beside_the_workspace_or_home() {
    let f = Fixture::new(CommandSandbox::default());
    let marker = f.parent.path().join("escaped.txt");
    let result = f
        .sh(&format!(
            "echo in > inside.txt; echo x > ../escaped.txt; echo x > {}; cat ../beside.txt; cat {}; \
             ls -a /root; cat /root/.ssh/id_rsa /root/.ssh/id_ed25519; cat /etc/shadow; echo HOME=$HOME",
            marker.display(),
            f.parent.path().join("beside.txt").display()
        ))
        .await;
    let text = out(&result);
    assert!(!text.contains("SECRET-BESIDE"), "{text}");
    assert!(text.contains("HOME=/tmp/home"), "a private HOME: {text}");
    assert!(!marker.exists(), "a file was written outside the workspace");
    assert_eq!(
        std::fs::read_to_string(f.ws().join("inside.txt")).unwrap(),
        "in\n",
        "the workspace is writable"
    );
    // Nothing of /root or /etc/shadow is in the sandbox at all.
    assert!(text.contains("/root"), "{text}");
    assert!(!text.contains("root:"), "{text}");
}

#[tokio::test]
async fn symlinks_out_of_the_workspace_lead_nowhere() {
    let f = Fixture::new(CommandSandbox::default());
    let beside = f.parent.path().join("beside.txt");
    let planted = format!("/etc/weft-planted-{}", std::process::id());
    let result = f
        .sh(&format!(
            "ln -s {} abs-link; ln -s ../beside.txt rel-link; cat abs-link rel-link; \
             ln -s /etc dir-link; echo planted > dir-link/{}",
            beside.display(),
            &planted[5..]
        ))
        .await;
    assert!(!out(&result).contains("SECRET-BESIDE"), "{}", out(&result));
    assert!(!Path::new(&planted).exists());
    // The links exist in the workspace now; the file tools refuse to follow them out.
    for link in ["abs-link", "rel-link"] {
        let error = f
            .tool("read_file", json!({"path": link}))
            .await
            .unwrap_err();
        assert!(error.message.contains("outside the workspace"), "{error}");
        let error = f
            .tool("write_file", json!({"path": link, "content": "x"}))
            .await
            .unwrap_err();
        assert!(error.message.contains("outside the workspace"), "{error}");
    }
    assert_eq!(std::fs::read_to_string(&beside).unwrap(), "SECRET-BESIDE");
}

#[tokio::test]
async fn no_network_tcp_udp_or_unix_sockets_to_local_listeners() {
    let f = Fixture::new(CommandSandbox::default());
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let socket_path = f.parent.path().join("listener.sock");
    let unix = std::os::unix::net::UnixListener::bind(&socket_path).unwrap();
    unix.set_nonblocking(true).unwrap();
    let name = format!("weft-test-{}", std::process::id());
    let abstract_addr =
        <std::os::unix::net::SocketAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(
            name.as_bytes(),
        )
        .unwrap();
    let abstract_listener = std::os::unix::net::UnixListener::bind_addr(&abstract_addr).unwrap();
    abstract_listener.set_nonblocking(true).unwrap();
    let tcp_port = tcp.local_addr().unwrap().port();
    let udp_port = udp.local_addr().unwrap().port();
    let python = Path::new("/usr/bin/python3").exists();
    let unix_attempts = if python {
        format!(
            "python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect('{}')\" && echo UNIX-CONNECTED; \
             python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect('\\0{name}')\" && echo ABSTRACT-CONNECTED; ",
            socket_path.display()
        )
    } else {
        String::new()
    };
    let result = f
        .sh(&format!(
            "bash -c 'echo hi > /dev/tcp/127.0.0.1/{tcp_port}' && echo TCP-CONNECTED; \
             bash -c 'echo hi > /dev/udp/127.0.0.1/{udp_port}' && echo UDP-SENT; {unix_attempts}true"
        ))
        .await;
    let text = out(&result);
    for leak in [
        "TCP-CONNECTED",
        "UDP-SENT",
        "UNIX-CONNECTED",
        "ABSTRACT-CONNECTED",
    ] {
        assert!(!text.contains(leak), "{leak}: {text}");
    }
    // The command has ended: anything it had sent would be queued on our side already.
    assert_eq!(tcp.accept().unwrap_err().kind(), ErrorKind::WouldBlock);
    let mut buffer = [0u8; 16];
    assert_eq!(
        udp.recv_from(&mut buffer).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    assert_eq!(unix.accept().unwrap_err().kind(), ErrorKind::WouldBlock);
    assert_eq!(
        abstract_listener.accept().unwrap_err().kind(),
        ErrorKind::WouldBlock
    );

    // The policy's network switch: with it, the same TCP connection goes through.
    let open = Fixture::new(CommandSandbox {
        network: true,
        ..CommandSandbox::default()
    });
    let result = open
        .sh(&format!(
            "bash -c 'echo hi > /dev/tcp/127.0.0.1/{tcp_port}' && echo TCP-CONNECTED"
        ))
        .await;
    assert!(out(&result).contains("TCP-CONNECTED"), "{}", out(&result));
}

#[tokio::test]
async fn a_fork_bomb_is_contained() {
    let f = Fixture::new(with_limits(Limits {
        max_processes: 24,
        ..Limits::default()
    }));
    // A real doubling bomb, bounded at depth 10 (2,047 processes if nothing contained it).
    let result = f
        .sh("b() { if [ $1 -gt 0 ]; then b $(($1-1)) & b $(($1-1)) & wait; fi; }; b 10; echo bomb-over")
        .await;
    let text = out(&result);
    assert!(
        text.contains("fork") || text.contains("Resource temporarily unavailable"),
        "the process limit never bound: {text}"
    );
}

#[tokio::test]
async fn a_memory_hog_is_stopped() {
    let f = Fixture::new(with_limits(Limits {
        memory_bytes: 64 << 20,
        ..Limits::default()
    }));
    let result = f
        .sh("x=$(head -c 300000000 /dev/zero | tr '\\0' a); echo survived ${#x}")
        .await;
    assert!(!out(&result).contains("survived"), "{result}");
    assert_ne!(result["exit_code"], 0, "{result}");
}

#[tokio::test]
async fn huge_output_is_capped_with_a_marker_and_files_are_size_limited() {
    let f = Fixture::new(with_limits(Limits {
        file_size_bytes: 1 << 20,
        ..Limits::default()
    }));
    let limits = CommandLimits::default();
    let result = run_command(&f.workspace, limits)
        .run(
            json!({"command": "head -c 20000000 /dev/zero | tr '\\0' y; head -c 5000000 /dev/zero > big.bin"}),
            context(),
        )
        .await
        .unwrap();
    let stdout = result["stdout"].as_str().unwrap();
    assert!(stdout.len() < limits.output_cap + 100);
    assert!(
        stdout.ends_with(&format!(
            "[… truncated by Weft: {} of 20000000 bytes shown …]",
            limits.output_cap
        )),
        "{}",
        &stdout[stdout.len() - 80..]
    );
    assert_eq!(result["dropped_bytes"], 20_000_000 - limits.output_cap);
    assert_eq!(
        std::fs::metadata(f.ws().join("big.bin")).unwrap().len(),
        1 << 20,
        "RLIMIT_FSIZE binds"
    );
}

#[tokio::test]
async fn background_processes_die_with_the_call_and_with_a_cancel() {
    let f = Fixture::new(CommandSandbox::default());
    let result = f.sh("sleep 1000.4242 & echo started").await;
    assert!(out(&result).contains("started"));
    assert_eq!(processes_with("1000.4242"), Vec::<String>::new());

    // A cancelled call: the command and what it started are killed, and the call says so.
    let ctx = context();
    let signal = ctx.signal.clone();
    let tool = builtin_tool(&f.workspace, "run_command").unwrap();
    let call = tokio::spawn(async move {
        tool.run(
            json!({"command": "sleep 1000.4343 & touch running; sleep 1000.4444"}),
            ctx,
        )
        .await
    });
    let running = f.ws().join("running");
    while !running.exists() {
        tokio::task::yield_now().await;
    }
    signal.cancel();
    let error = call.await.unwrap().unwrap_err();
    assert!(error.message.contains("cancelled"), "{error}");
    assert_eq!(processes_with("1000.4343"), Vec::<String>::new());
    assert_eq!(processes_with("1000.4444"), Vec::<String>::new());
}

#[tokio::test]
async fn the_store_and_definition_files_are_out_of_reach_of_every_tool() {
    let f = Fixture::new(CommandSandbox::default());
    let result = f
        .sh(
            "cat .weft/weft.db; ls -a .weft; echo x > .weft/weft.db; echo x > weft.toml; \
             echo x > agents/coder.toml; echo x > agents/new.toml; rm -rf .weft agents weft.toml; \
             mv weft.toml moved.toml; ln -s .weft/weft.db db-link; ln weft.toml hard-link; true",
        )
        .await;
    assert!(!out(&result).contains("RUNS"), "{}", out(&result));
    f.assert_intact();
    assert!(!f.ws().join("agents/new.toml").exists());

    for (name, args) in [
        ("read_file", json!({"path": ".weft/weft.db"})),
        ("read_file", json!({"path": "db-link"})),
        (
            "write_file",
            json!({"path": ".weft/weft.db", "content": "x"}),
        ),
        ("write_file", json!({"path": "db-link", "content": "x"})),
        ("write_file", json!({"path": "weft.toml", "content": "x"})),
        (
            "write_file",
            json!({"path": "agents/coder.toml", "content": "x"}),
        ),
        (
            "write_file",
            json!({"path": "agents/new.toml", "content": "x"}),
        ),
        ("list_dir", json!({"path": ".weft"})),
        ("search_code", json!({"pattern": "RUNS", "path": ".weft"})),
    ] {
        let error = f.tool(name, args.clone()).await.unwrap_err();
        assert!(
            error.message.contains("run store") || error.message.contains("read-only"),
            "{name} {args}: {error}"
        );
    }
    // Reading a definition file is fine; listings and searches skip the store.
    let toml = f
        .tool("read_file", json!({"path": "weft.toml"}))
        .await
        .unwrap();
    assert_eq!(toml, json!("name = \"demo\"\n"));
    let listing = f
        .tool("list_dir", json!({"path": ".", "recursive": true}))
        .await
        .unwrap();
    assert!(!listing.to_string().contains(".weft"), "{listing}");
    let found = f
        .tool("search_code", json!({"pattern": "RUNS"}))
        .await
        .unwrap();
    assert_eq!(found["matches"], json!([]));
    f.assert_intact();
}

#[tokio::test]
async fn strict_mode_sees_only_a_scratch_folder_and_none_mode_is_unconfined() {
    let strict = Fixture::new(CommandSandbox {
        mode: Mode::Strict,
        ..CommandSandbox::default()
    });
    let result = strict
        .sh("pwd; cat \"$WEFT_WORKSPACE/notes.txt\"; echo scratch > s.txt && cat s.txt")
        .await;
    let text = out(&result);
    assert!(text.starts_with("/tmp/home\n"), "{text}");
    assert!(!text.contains("hello"), "{text}");
    assert!(text.contains("scratch"), "{text}");
    // The file tools have no filesystem either.
    for (name, args) in [
        ("read_file", json!({"path": "notes.txt"})),
        ("write_file", json!({"path": "x.txt", "content": "x"})),
        ("list_dir", json!({})),
        ("search_code", json!({"pattern": "hello"})),
    ] {
        let error = strict.tool(name, args).await.unwrap_err();
        assert!(
            error.message.contains("no filesystem access"),
            "{name}: {error}"
        );
    }
    assert!(!strict.ws().join("x.txt").exists());

    let none = Fixture::new(CommandSandbox {
        mode: Mode::None,
        ..CommandSandbox::default()
    });
    let result = none.sh("cat ../beside.txt").await;
    assert!(
        out(&result).contains("SECRET-BESIDE"),
        "mode none is explicit and unconfined"
    );
}

#[tokio::test]
async fn read_file_caps_a_ranged_read_of_a_huge_line() {
    let f = Fixture::new(CommandSandbox::default());
    std::fs::write(f.ws().join("one-line.txt"), "z".repeat(5_000_000)).unwrap();
    let text = f
        .tool(
            "read_file",
            json!({"path": "one-line.txt", "start_line": 1, "end_line": 1}),
        )
        .await
        .unwrap();
    let text = text.as_str().unwrap();
    assert!(
        text.len() < weft_tools::cap::MAX_OUTPUT_BYTES + 200,
        "{}",
        text.len()
    );
    assert!(
        text.ends_with(&format!(
            "[… truncated by Weft: {} of 5000000 bytes shown; the rest of this range was not read …]",
            weft_tools::cap::MAX_OUTPUT_BYTES
        )),
        "{}",
        &text[text.len() - 100..]
    );
}

//! OpenTelemetry traces of `weft run` / `weft resume` (issue 18 §3): with an OTLP endpoint
//! configured (the standard variables or `[telemetry]` in `weft.toml`), every run exports
//! GenAI spans over OTLP/HTTP (protobuf). A receiver started by the test decodes the export
//! requests and checks the span tree, the `gen_ai.*` attributes, content capture (off by
//! default, on when opted in) and, across `weft approve` + `weft resume`, that the resumed
//! process continues the same trace under the first process's `invoke_agent` span.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use common::output_text;

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message as _;
use serde_json::{Value, json};

/// An OTLP/HTTP receiver on 127.0.0.1: every `POST /v1/traces` body is decoded and kept
/// with the resource's `service.name`.
struct Receiver {
    port: u16,
    spans: Arc<Mutex<Vec<(String, Span)>>>,
    paths: Arc<Mutex<Vec<String>>>,
}

impl Receiver {
    fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let spans = Arc::new(Mutex::new(Vec::new()));
        let paths = Arc::new(Mutex::new(Vec::new()));
        let (s, p) = (spans.clone(), paths.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (s, p) = (s.clone(), p.clone());
                std::thread::spawn(move || serve(stream, &s, &p));
            }
        });
        Receiver { port, spans, paths }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The spans received so far (and forgets them).
    fn take(&self) -> Vec<(String, Span)> {
        std::mem::take(&mut *self.spans.lock().unwrap())
    }
}

/// Minimal HTTP/1.1: requests with a `Content-Length` body on a kept-alive connection.
fn serve(stream: TcpStream, spans: &Mutex<Vec<(String, Span)>>, paths: &Mutex<Vec<String>>) {
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let mut length = 0usize;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        paths.lock().unwrap().push(
            request_line
                .split_whitespace()
                .nth(1)
                .unwrap_or_default()
                .to_owned(),
        );
        let request = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
        for resource in request.resource_spans {
            let service = resource
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|kv| kv.key == "service.name")
                .and_then(|kv| kv.value.as_ref()?.value.as_ref())
                .map(|v| match v {
                    Any::StringValue(s) => s.clone(),
                    other => format!("{other:?}"),
                })
                .unwrap_or_default();
            for scope in resource.scope_spans {
                for span in scope.spans {
                    spans.lock().unwrap().push((service.clone(), span));
                }
            }
        }
        let reply =
            "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        if writer.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

fn weft(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_weft"));
    command
        .args(args)
        .current_dir(cwd)
        .env_remove("WEFT_DATABASE_URL")
        .stdin(Stdio::null());
    for (name, _) in std::env::vars() {
        if name.starts_with("OTEL_") {
            command.env_remove(name);
        }
    }
    command.envs(env.iter().copied()).output().unwrap()
}

/// A span attribute holding JSON text (`gen_ai.input.messages`, …), parsed.
fn json_attr(span: &Span, key: &str) -> Value {
    let text = attr(span, key).unwrap_or_else(|| panic!("no attribute {key}"));
    serde_json::from_str(text.as_str().unwrap()).unwrap()
}

fn attr(span: &Span, key: &str) -> Option<Value> {
    let value = span
        .attributes
        .iter()
        .find(|kv| kv.key == key)?
        .value
        .as_ref()?
        .value
        .as_ref()?;
    Some(match value {
        Any::StringValue(s) => json!(s),
        Any::IntValue(i) => json!(i),
        Any::BoolValue(b) => json!(b),
        Any::DoubleValue(d) => json!(d),
        Any::ArrayValue(a) => Value::Array(
            a.values
                .iter()
                .filter_map(|v| match v.value.as_ref()? {
                    Any::StringValue(s) => Some(json!(s)),
                    _ => None,
                })
                .collect(),
        ),
        other => json!(format!("{other:?}")),
    })
}

fn named<'a>(spans: &'a [(String, Span)], name: &str) -> Vec<&'a Span> {
    spans
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s.name == name)
        .collect()
}

/// The run id printed by `weft run` (`run ID …`).
fn run_id(out: &Output) -> String {
    output_text(out)
        .lines()
        .find_map(|l| l.strip_prefix("run "))
        .and_then(|l| l.split(' ').next())
        .unwrap_or_else(|| panic!("no run id: {}", output_text(out)))
        .to_owned()
}

/// The agent writes `note.txt` (call `w1`), then answers; usage is scripted per call.
fn project(dir: &Path, extra: &str) {
    let script = json!({"responses": [
        {"toolCalls": [{"id": "w1", "name": "write_file", "arguments": {"path": "note.txt", "content": "one\n"}}],
         "usage": {"inputTokens": 11, "outputTokens": 7}},
        {"text": "written", "usage": {"inputTokens": 23, "outputTokens": 3}}
    ]});
    common::scripted_project(dir, extra, &["write_file"], &script);
}

#[test]
fn a_traced_run_exports_invoke_agent_with_chat_and_execute_tool_children() {
    let receiver = Receiver::start();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    project(&p, "");
    let endpoint = receiver.endpoint();
    let out = weft(
        dir.path(),
        &["run", "p", "go"],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_SERVICE_NAME", "weft-under-test"),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let spans = receiver.take();
    assert!(
        receiver
            .paths
            .lock()
            .unwrap()
            .iter()
            .all(|p| p == "/v1/traces")
    );
    assert!(
        spans
            .iter()
            .all(|(service, _)| service == "weft-under-test")
    );
    assert_eq!(
        spans.len(),
        4,
        "{:#?}",
        spans.iter().map(|(_, s)| &s.name).collect::<Vec<_>>()
    );

    let agents = named(&spans, "invoke_agent a");
    let [agent] = agents.as_slice() else {
        panic!("one invoke_agent span: {spans:#?}")
    };
    assert!(
        agent.parent_span_id.is_empty(),
        "the run's span is the root"
    );
    assert_eq!(agent.kind, SpanKind::Internal as i32);
    assert_eq!(
        attr(agent, "gen_ai.operation.name"),
        Some(json!("invoke_agent"))
    );
    assert_eq!(attr(agent, "gen_ai.agent.name"), Some(json!("a")));
    assert_eq!(attr(agent, "weft.run.id"), Some(json!(run_id(&out))));
    assert_eq!(attr(agent, "weft.run.end"), Some(json!("completed")));
    let conversation = attr(agent, "gen_ai.conversation.id").unwrap();

    let chats: Vec<&Span> = spans
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s.name.starts_with("chat "))
        .collect();
    assert_eq!(chats.len(), 2);
    let mut chats = chats;
    chats.sort_by_key(|s| s.start_time_unix_nano);
    for chat in &chats {
        assert_eq!(chat.trace_id, agent.trace_id);
        assert_eq!(
            chat.parent_span_id, agent.span_id,
            "chat is a child of invoke_agent"
        );
        assert_eq!(chat.kind, SpanKind::Client as i32);
        assert_eq!(attr(chat, "gen_ai.operation.name"), Some(json!("chat")));
        assert_eq!(attr(chat, "gen_ai.provider.name"), Some(json!("scripted")));
        let model = attr(chat, "gen_ai.request.model").unwrap();
        assert_eq!(chat.name, format!("chat {}", model.as_str().unwrap()));
        assert_eq!(attr(chat, "gen_ai.response.model"), Some(model));
        assert_eq!(
            attr(chat, "gen_ai.conversation.id"),
            Some(conversation.clone())
        );
        assert_eq!(
            attr(chat, "gen_ai.input.messages"),
            None,
            "no content by default"
        );
        assert_eq!(
            attr(chat, "gen_ai.output.messages"),
            None,
            "no content by default"
        );
    }
    assert_eq!(attr(chats[0], "gen_ai.usage.input_tokens"), Some(json!(11)));
    assert_eq!(attr(chats[0], "gen_ai.usage.output_tokens"), Some(json!(7)));
    assert_eq!(
        attr(chats[0], "gen_ai.response.finish_reasons"),
        Some(json!(["tool_use"]))
    );
    assert_eq!(attr(chats[1], "gen_ai.usage.input_tokens"), Some(json!(23)));
    assert_eq!(attr(chats[1], "gen_ai.usage.output_tokens"), Some(json!(3)));
    assert_eq!(
        attr(chats[1], "gen_ai.response.finish_reasons"),
        Some(json!(["end_turn"]))
    );

    let tools = named(&spans, "execute_tool write_file");
    let [tool] = tools.as_slice() else {
        panic!("one execute_tool span: {spans:#?}")
    };
    assert_eq!(tool.trace_id, agent.trace_id);
    assert_eq!(
        tool.parent_span_id, agent.span_id,
        "execute_tool is a child of invoke_agent"
    );
    assert_eq!(tool.kind, SpanKind::Internal as i32);
    assert_eq!(
        attr(tool, "gen_ai.operation.name"),
        Some(json!("execute_tool"))
    );
    assert_eq!(attr(tool, "gen_ai.tool.name"), Some(json!("write_file")));
    assert_eq!(attr(tool, "gen_ai.tool.call.id"), Some(json!("w1")));
    assert_eq!(
        attr(tool, "gen_ai.tool.call.arguments"),
        None,
        "no content by default"
    );
    assert_eq!(attr(tool, "error.type"), None);
    // The tool ran between the two model calls, inside the run.
    assert!(tool.start_time_unix_nano >= chats[0].end_time_unix_nano);
    assert!(tool.end_time_unix_nano <= chats[1].start_time_unix_nano);
    assert!(agent.start_time_unix_nano <= chats[0].start_time_unix_nano);
    assert!(agent.end_time_unix_nano >= chats[1].end_time_unix_nano);
}

#[test]
fn message_content_is_recorded_when_the_project_opts_in() {
    let receiver = Receiver::start();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    // Configured by weft.toml alone (no OTEL_* variables).
    project(
        &p,
        &format!(
            "[telemetry]\nendpoint = \"{}\"\ncaptureContent = true\n",
            receiver.endpoint()
        ),
    );
    let out = weft(dir.path(), &["run", "p", "please write the note"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let spans = receiver.take();
    assert!(
        spans.iter().all(|(service, _)| service == "weft"),
        "default service.name"
    );
    let mut chats: Vec<&Span> = spans
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s.name.starts_with("chat "))
        .collect();
    chats.sort_by_key(|s| s.start_time_unix_nano);
    assert_eq!(chats.len(), 2);
    let input: Value = json_attr(chats[0], "gen_ai.input.messages");
    assert_eq!(input[0]["role"], "user");
    assert_eq!(input[0]["parts"][0]["content"], "please write the note");
    let output: Value = json_attr(chats[0], "gen_ai.output.messages");
    assert_eq!(output[0]["role"], "assistant");
    assert_eq!(output[0]["parts"][0]["type"], "tool_call");
    assert_eq!(output[0]["parts"][0]["id"], "w1");
    let answer: Value = json_attr(chats[1], "gen_ai.output.messages");
    assert_eq!(answer[0]["parts"][0]["content"], "written");
    // The second call carries the tool's result back.
    let history: Value = json_attr(chats[1], "gen_ai.input.messages");
    assert!(
        history
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["role"] == "tool" && m["parts"][0]["id"] == "w1"),
        "{history}"
    );

    let tools = named(&spans, "execute_tool write_file");
    let arguments: Value = json_attr(tools[0], "gen_ai.tool.call.arguments");
    assert_eq!(arguments["path"], "note.txt");
    assert!(attr(tools[0], "gen_ai.tool.call.result").is_some());
}

#[test]
fn a_resumed_run_continues_the_trace_under_the_first_process_span() {
    let receiver = Receiver::start();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    project(&p, "requiresApproval = [\"write_file\"]\n");
    let endpoint = receiver.endpoint();
    let env = [(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        format!("{endpoint}/v1/traces"),
    )];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();

    // The first process suspends on the approval (exit 4).
    let out = weft(dir.path(), &["run", "p", "go"], &env);
    assert_eq!(out.status.code(), Some(4), "{}", output_text(&out));
    let run = run_id(&out);
    let first = receiver.take();
    let names: Vec<&str> = first.iter().map(|(_, s)| s.name.as_str()).collect();
    let [root] = named(&first, "invoke_agent a")[..] else {
        panic!("{names:?}")
    };
    assert!(root.parent_span_id.is_empty());
    assert_eq!(attr(root, "weft.run.end"), Some(json!("suspended")));
    assert_eq!(attr(root, "weft.run.resumed"), Some(json!(false)));
    // Its context is stored with the run.
    let show = weft(&p, &["runs", "show", &run, "--json"], &[]);
    let shown: Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(
        shown["spec"]["trace"],
        json!(format!(
            "00-{}-{}-01",
            hex(&root.trace_id),
            hex(&root.span_id)
        ))
    );
    // The model asked for the call; the call did not run (it waits for a person).
    assert_eq!(
        names.iter().filter(|n| n.starts_with("chat ")).count(),
        1,
        "{names:?}"
    );
    assert!(
        named(&first, "execute_tool write_file").is_empty(),
        "{names:?}"
    );

    // Approved from another process (which is not a run: no spans), then resumed.
    let show = weft(&p, &["runs", "show", &run, "--json"], &env);
    let shown: Value = serde_json::from_slice(&show.stdout).unwrap();
    let decision = shown["decisions"][0]["id"].as_str().unwrap().to_owned();
    let approve = weft(&p, &["approve", &run, &decision], &env);
    assert_eq!(approve.status.code(), Some(0), "{}", output_text(&approve));
    let resumed = weft(&p, &["resume", &run], &env);
    assert_eq!(resumed.status.code(), Some(0), "{}", output_text(&resumed));
    let second = receiver.take();
    let names: Vec<&str> = second.iter().map(|(_, s)| s.name.as_str()).collect();
    let [again] = named(&second, "invoke_agent a")[..] else {
        panic!("{names:?}")
    };
    assert_eq!(
        again.trace_id, root.trace_id,
        "the resume continues the run's trace"
    );
    assert_eq!(
        again.parent_span_id, root.span_id,
        "as a child of the first process's span"
    );
    assert_eq!(attr(again, "weft.run.resumed"), Some(json!(true)));
    assert_eq!(attr(again, "weft.run.end"), Some(json!("completed")));
    assert_eq!(attr(again, "weft.run.id"), Some(json!(run)));
    // The recorded first answer is replayed (no model call); the approved call runs, then
    // the model answers once.
    let [tool] = named(&second, "execute_tool write_file")[..] else {
        panic!("{names:?}")
    };
    assert_eq!(attr(tool, "gen_ai.tool.call.id"), Some(json!("w1")));
    assert_eq!(tool.parent_span_id, again.span_id);
    assert_eq!(tool.trace_id, root.trace_id);
    let chats: Vec<&Span> = second
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s.name.starts_with("chat "))
        .collect();
    assert_eq!(chats.len(), 1, "{names:?}");
    assert_eq!(chats[0].parent_span_id, again.span_id);
    assert_eq!(
        attr(chats[0], "gen_ai.response.finish_reasons"),
        Some(json!(["end_turn"]))
    );
    assert_eq!(
        std::fs::read_to_string(p.join("note.txt")).unwrap(),
        "one\n"
    );
}

#[test]
fn without_an_endpoint_nothing_is_exported_and_a_bad_telemetry_table_is_refused() {
    let receiver = Receiver::start();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    project(&p, "");
    let out = weft(dir.path(), &["run", "p", "go"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    std::thread::sleep(Duration::from_millis(200));
    assert!(receiver.take().is_empty());
    assert!(receiver.paths.lock().unwrap().is_empty());

    let q = dir.path().join("q");
    project(&q, "[telemetry]\nendpont = \"http://127.0.0.1:1\"\n");
    let out = weft(dir.path(), &["run", "q", "go"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    assert!(
        output_text(&out).contains("telemetry"),
        "{}",
        output_text(&out)
    );
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn a_run_resumed_after_a_crash_continues_the_trace_stored_with_it() {
    let receiver = Receiver::start();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    // The first attempt of the call marks that it started and hangs; a rerun returns at once.
    let command = "if [ -f started ]; then echo again; else touch started; sleep 30; fi";
    let script = json!({"responses": [
        {"toolCalls": [{"id": "c1", "name": "run_command", "arguments": {"command": command}}]},
        {"text": "done"}
    ]});
    common::scripted_project(&p, "", &["run_command"], &script);
    let endpoint = receiver.endpoint();
    let mut command = Command::new(env!("CARGO_BIN_EXE_weft"));
    command
        .args(["run", "p", "go"])
        .current_dir(dir.path())
        .env_remove("WEFT_DATABASE_URL")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !p.join("started").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the call never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL: nothing is flushed
    let out = child.wait_with_output().unwrap();
    let run = run_id(&out);

    // The run's spec holds the traceparent of the first process's invoke_agent span.
    let show = weft(&p, &["runs", "show", &run, "--json"], &[]);
    let shown: Value = serde_json::from_slice(&show.stdout).unwrap();
    let stored = shown["spec"]["trace"].as_str().unwrap().to_owned();
    let parts: Vec<&str> = stored.split('-').collect();
    assert_eq!((parts.len(), parts[0]), (4, "00"), "{stored}");

    receiver.take();
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str())];
    let resumed = weft(&p, &["resume", &run, "--rerun-uncertain"], &env);
    assert_eq!(resumed.status.code(), Some(0), "{}", output_text(&resumed));
    let spans = receiver.take();
    let names: Vec<&str> = spans.iter().map(|(_, s)| s.name.as_str()).collect();
    let [agent] = named(&spans, "invoke_agent a")[..] else {
        panic!("{names:?}")
    };
    assert_eq!(
        hex(&agent.trace_id),
        parts[1],
        "the resume continues the stored trace"
    );
    assert_eq!(
        hex(&agent.parent_span_id),
        parts[2],
        "under the stored span"
    );
    let [tool] = named(&spans, "execute_tool run_command")[..] else {
        panic!("{names:?}")
    };
    assert_eq!(tool.parent_span_id, agent.span_id);
    assert_eq!(attr(tool, "gen_ai.tool.call.id"), Some(json!("c1")));
    // A second resume of the completed run changes nothing in the stored context.
    let show = weft(&p, &["runs", "show", &run, "--json"], &[]);
    let shown: Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(shown["spec"]["trace"], json!(stored));
}

#[test]
fn a_failed_tool_call_has_an_error_type_and_status() {
    let receiver = Receiver::start();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    let script = json!({"responses": [
        {"toolCalls": [{"id": "r1", "name": "read_file", "arguments": {"path": "missing.txt"}}]},
        {"text": "no such file"}
    ]});
    common::scripted_project(&p, "", &["read_file"], &script);
    let endpoint = receiver.endpoint();
    let out = weft(
        dir.path(),
        &["run", "p", "go"],
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str())],
    );
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let spans = receiver.take();
    let [tool] = named(&spans, "execute_tool read_file")[..] else {
        panic!("{spans:#?}")
    };
    assert_eq!(attr(tool, "gen_ai.tool.call.id"), Some(json!("r1")));
    assert_eq!(attr(tool, "error.type"), Some(json!("tool_error")));
    let status = tool.status.as_ref().unwrap();
    assert_eq!(status.code, 2, "STATUS_CODE_ERROR");
    assert!(!status.message.is_empty());
}

#[test]
fn a_subagents_invoke_agent_span_nests_under_the_parent_calls_execute_tool_span() {
    let receiver = Receiver::start();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    // `a` calls the dual_ai subagent `pair`, whose worker writes a file and ends the session.
    let script = json!({"responses": [
        {"toolCalls": [{"id": "s1", "name": "pair", "arguments": {"message": "write the note"}}]},
        {"text": "done"}
    ]});
    common::scripted_project(&p, "defaultAgent = \"a\"\n", &["pair"], &script);
    let files = [
        (
            "agents/pair.toml",
            "name = \"pair\"\ntype = \"dual_ai\"\nexposeAsTool = true\ntoolDescription = \"Writes notes.\"\n\
             maxSessionTurns = 2\n[sideA]\nprompt = \"w\"\nsessionStop = \"finish\"\n[sideB]\nprompt = \"b\"\n"
                .to_owned(),
        ),
        (
            "prompts/w.toml",
            "name = \"w\"\nmodel = \"scripted-turns:worker.json\"\ntools = [\"write_file\", \"finish\"]\n"
                .to_owned(),
        ),
        ("prompts/b.toml", "name = \"b\"\n".to_owned()),
        ("tools/finish.toml", "name = \"finish\"\n".to_owned()),
        (
            "worker.json",
            json!({"responses": [
                {"toolCalls": [{"id": "w1", "name": "write_file", "arguments": {"path": "note.txt", "content": "one\n"}}]},
                {"toolCalls": [{"id": "f1", "name": "finish", "arguments": {}}]}
            ]})
            .to_string(),
        ),
    ];
    for (path, body) in files {
        let path = p.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body).unwrap();
    }
    let endpoint = receiver.endpoint();
    let out = weft(
        dir.path(),
        &["run", "p", "go"],
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str())],
    );
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let spans = receiver.take();
    let one = |name: &str| -> Span {
        let found = named(&spans, name);
        let [span] = found.as_slice() else {
            panic!(
                "one {name} span: {:#?}",
                spans.iter().map(|(_, s)| &s.name).collect::<Vec<_>>()
            )
        };
        (*span).clone()
    };
    let root = one("invoke_agent a");
    let call = one("execute_tool pair");
    let child = one("invoke_agent pair");
    assert!(root.parent_span_id.is_empty(), "the run's span is the root");
    assert_eq!(call.parent_span_id, root.span_id, "the parent's call");
    assert_eq!(
        child.parent_span_id, call.span_id,
        "the child's span is under the parent call's execute_tool span"
    );
    assert_eq!(attr(&child, "gen_ai.agent.name"), Some(json!("pair")));
    assert_eq!(attr(&child, "weft.run.id"), Some(json!(run_id(&out))));
    assert_eq!(attr(&child, "weft.run.end"), Some(json!("completed")));
    // The child's thread is its conversation.
    let conversation = attr(&child, "gen_ai.conversation.id").unwrap();
    assert_ne!(
        Some(&conversation),
        attr(&root, "gen_ai.conversation.id").as_ref()
    );
    for tool in ["execute_tool write_file", "execute_tool finish"] {
        assert_eq!(
            one(tool).parent_span_id,
            child.span_id,
            "{tool} is the child's"
        );
    }
    let chats: Vec<&Span> = spans
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s.name.starts_with("chat "))
        .collect();
    let under = |parent: &Span| {
        chats
            .iter()
            .filter(|c| c.parent_span_id == parent.span_id)
            .count()
    };
    assert_eq!((under(&root), under(&child), chats.len()), (2, 2, 4));
    for chat in &chats {
        if chat.parent_span_id == child.span_id {
            assert_eq!(
                attr(chat, "gen_ai.conversation.id"),
                Some(conversation.clone())
            );
        }
    }
    assert!(
        spans.iter().all(|(_, s)| s.trace_id == root.trace_id),
        "one trace"
    );
    assert_eq!(spans.len(), 9);
    // The child ran inside the parent's call.
    assert!(call.start_time_unix_nano <= child.start_time_unix_nano);
    assert!(child.end_time_unix_nano <= call.end_time_unix_nano);
}

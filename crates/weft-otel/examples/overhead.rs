//! What tracing adds to one agent step (one `chat` span with its response attributes and
//! one `execute_tool` span, both children of an `invoke_agent` span), measured on the
//! calling thread: first with no tracer installed (the branch a run without an exporter
//! pays), then with the OTLP/HTTP exporter sending to a sink on 127.0.0.1 (spans are
//! queued on the calling thread and exported by the SDK's own thread).
//!
//! ```sh
//! cargo run --release -p weft-otel --features export --example overhead
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpListener;
use std::time::Instant;

use weft_otel::{Config, GenAiSpan};

const STEPS: u32 = 20_000;

fn step(agent: &GenAiSpan) {
    let parent = agent.parent();
    let chat = GenAiSpan::chat(&parent, "openai", "gpt-4o", Some("thread-1"));
    chat.set_content("gen_ai.input.messages", || "[]".to_owned());
    chat.set_response(Some("gpt-4o"), 1200, 80, "tool_use");
    chat.end();
    let tool = GenAiSpan::execute_tool(&parent, "read_file", "call_1", "Reads a file");
    tool.end();
    black_box((&chat, &tool));
}

fn per_step_ns(agent: &GenAiSpan) -> f64 {
    let start = Instant::now();
    for _ in 0..STEPS {
        step(agent);
    }
    start.elapsed().as_nanos() as f64 / f64::from(STEPS)
}

/// Accepts OTLP/HTTP requests and answers 200 (bodies are read and dropped).
fn sink() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut writer = stream.try_clone().unwrap();
                let mut reader = BufReader::new(stream);
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let mut length = 0;
                    loop {
                        let mut header = String::new();
                        if reader.read_line(&mut header).unwrap_or(0) == 0 {
                            return;
                        }
                        let header = header.trim_end();
                        if header.is_empty() {
                            break;
                        }
                        if let Some((k, v)) = header.split_once(':')
                            && k.eq_ignore_ascii_case("content-length")
                        {
                            length = v.trim().parse().unwrap();
                        }
                    }
                    let mut body = vec![0; length];
                    reader.read_exact(&mut body).unwrap();
                    let reply = "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
                    if writer.write_all(reply.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

fn main() {
    let agent = GenAiSpan::invoke_agent("a", "agent-1", "thread-1", None);
    per_step_ns(&agent); // warm-up
    let off = per_step_ns(&agent);
    println!("no exporter: {off:.1} ns per step (chat + execute_tool)");

    let port = sink();
    let settings = weft_otel::Settings {
        endpoint: Some(format!("http://127.0.0.1:{port}")),
        ..weft_otel::Settings::default()
    };
    let config = Config::resolve(&settings, |_| None).unwrap();
    weft_otel::export::init(&config).unwrap();
    let agent = GenAiSpan::invoke_agent("a", "agent-1", "thread-1", None);
    // Below the SDK's queue (2,048 spans) per burst: a real run's steps take far longer
    // than the export interval, so nothing is dropped there either.
    let mut total = 0.0;
    let rounds = 40;
    for _ in 0..rounds {
        let start = Instant::now();
        for _ in 0..500 {
            step(&agent);
        }
        total += start.elapsed().as_nanos() as f64 / 500.0;
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    println!(
        "OTLP exporter: {:.1} ns per step (chat + execute_tool), {rounds} bursts of 500 steps",
        total / f64::from(rounds)
    );
    agent.end();
    let start = Instant::now();
    weft_otel::export::shutdown();
    println!(
        "shutdown (flush): {:.1} ms",
        start.elapsed().as_secs_f64() * 1e3
    );
}

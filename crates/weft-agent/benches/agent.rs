//! Criterion benchmarks: framework overhead per loop step, 20-step runs on a 2,000-message
//! history (generated and streamed: no step may copy the history), `with_message` and
//! branching on a 10,000-message state. Run with `cargo bench -p weft-agent --bench agent`.
#![allow(missing_docs, clippy::unwrap_used)]

use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use weft_agent::{AgentOptions, AgentState, agent};
use weft_provider::adapters::scripted::{self, ScriptedResponse};
use weft_provider::{LlmOptions, LlmRequest, Message, Tool, ToolUseStrategy, llm};

/// Calls `noop` when the last message is the user's, answers otherwise: two steps per run.
fn model() -> weft_provider::ModelReference {
    scripted::function_model(|req: &LlmRequest| {
        Ok(match req.messages().last() {
            Some(Message::User(_)) => ScriptedResponse::tool_call("c1", "noop", json!({})),
            _ => ScriptedResponse::text("done"),
        })
    })
}

fn noop() -> Tool {
    Tool::new(
        "noop",
        "Does nothing.",
        json!({"type": "object"}),
        |_a: Value, _c| async { Ok(json!("ok")) },
    )
}

fn bench_loop(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let agent = agent(AgentOptions::new(model()).tool(noop())).unwrap();
    let state = AgentState::initial();
    let mut group = c.benchmark_group("loop");
    // One generate = 2 steps (tool call + answer), 2 model calls, 1 tool run.
    group.bench_function("agent_generate_2_steps", |b| {
        b.iter(|| {
            runtime
                .block_on(agent.generate("go", black_box(&state)))
                .unwrap()
        })
    });
    // The same exchange through the bare provider loop, for the framework overhead.
    let instance = llm(LlmOptions::new(model())
        .tool(noop())
        .tool_strategy(ToolUseStrategy::unbounded()))
    .unwrap();
    group.bench_function("provider_generate_same_exchange", |b| {
        b.iter(|| runtime.block_on(instance.generate(&[], "go")).unwrap())
    });
    group.finish();
}

/// Calls `noop` until the run made 20 tool calls, then answers: 21 steps per run.
fn twenty_steps() -> weft_provider::ModelReference {
    scripted::function_model(|req: &LlmRequest| {
        let since_input = req
            .messages()
            .rev()
            .take_while(|m| !matches!(m, Message::User(_)))
            .filter(|m| m.is_tool_result())
            .count();
        Ok(if since_input < 20 {
            ScriptedResponse::tool_call(format!("c{since_input}"), "noop", json!({}))
        } else {
            ScriptedResponse::text("done")
        })
    })
}

fn bench_long_history(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let agent = agent(AgentOptions::new(twenty_steps()).tool(noop())).unwrap();
    let state = AgentState::initial().with_messages((0..2_000).map(|i| {
        if i % 2 == 0 {
            Message::user(format!("question {i}: {}", "words ".repeat(20)))
        } else {
            Message::assistant(format!("answer {i}: {}", "words ".repeat(40)))
        }
    }));
    let mut group = c.benchmark_group("history_2k");
    group.throughput(criterion::Throughput::Elements(21));
    group.bench_function("generate_21_steps", |b| {
        b.iter(|| {
            runtime
                .block_on(agent.generate("go", black_box(&state)))
                .unwrap()
        })
    });
    group.bench_function("stream_21_steps", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let mut stream = agent.stream("go", black_box(&state));
                while futures_util::StreamExt::next(&mut stream).await.is_some() {}
                stream.result().await.unwrap()
            })
        })
    });
    group.finish();
}

fn big_state() -> AgentState {
    AgentState::initial().with_messages((0..10_000).map(|i| Message::user(format!("message {i}"))))
}

fn bench_state(c: &mut Criterion) {
    let state = big_state();
    let message = Message::user("one more");
    let mut group = c.benchmark_group("state_10k");
    group.bench_function("with_message", |b| {
        b.iter_batched(
            || message.clone(),
            |m| state.with_message(m),
            BatchSize::SmallInput,
        )
    });
    group.bench_function("branch_clone", |b| b.iter(|| black_box(&state).clone()));
    group.bench_function("branch_two_children", |b| {
        b.iter_batched(
            || (message.clone(), message.clone()),
            |(m1, m2)| (state.with_message(m1), state.with_message(m2)),
            BatchSize::SmallInput,
        )
    });
    group.bench_function("with_step", |b| b.iter(|| state.with_step(black_box(3))));
    group.finish();
}

criterion_group!(benches, bench_loop, bench_long_history, bench_state);
criterion_main!(benches);

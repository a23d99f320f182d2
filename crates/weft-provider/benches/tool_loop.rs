//! Framework overhead of the tool loop with the scripted provider: one `generate` of ten tool
//! rounds plus the final answer (11 model calls, 10 tool calls). The per-cycle figure is the
//! total divided by 11. Allocations per cycle are counted with a counting allocator and
//! printed once. Target (issue 2): under 5 µs per cycle.

#![allow(missing_docs, clippy::unwrap_used, unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use weft_provider::adapters::scripted::{self, ScriptedResponse, ScriptedToolCall};
use weft_provider::{LlmInstance, LlmOptions, Tool, llm};

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: delegates every call to the system allocator unchanged; it only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const ROUNDS: usize = 10;

fn instance() -> LlmInstance {
    // The model reads the conversation: it asks for `add` until ten results are in.
    let model = scripted::function_model(|request| {
        let rounds = request.messages.len().saturating_sub(1) / 2;
        Ok(if rounds < ROUNDS {
            ScriptedResponse {
                tool_calls: vec![ScriptedToolCall {
                    id: Some(format!("c{rounds}")),
                    name: "add".into(),
                    arguments: json!({"a": rounds, "b": 1}),
                    after: Vec::new(),
                }],
                ..ScriptedResponse::default()
            }
        } else {
            ScriptedResponse::text("done")
        })
    });
    let add = Tool::new(
        "add",
        "Adds two integers.",
        json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}),
        |args: Value, _ctx| async move {
            Ok(json!(
                args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)
            ))
        },
    );
    llm(LlmOptions::new(model).tool(add)).unwrap()
}

fn tool_loop(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let instance = instance();
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    let turn = runtime.block_on(instance.generate(&[], "count")).unwrap();
    let allocations = ALLOCATIONS.load(Ordering::Relaxed) - before;
    assert_eq!(turn.cycles as usize, ROUNDS + 1);
    eprintln!(
        "tool_loop: {} allocations per generate of {} cycles = {:.0} per cycle",
        allocations,
        ROUNDS + 1,
        allocations as f64 / (ROUNDS + 1) as f64
    );
    c.bench_function("tool_loop/generate_10_rounds", |b| {
        b.iter(|| runtime.block_on(instance.generate(&[], "count")).unwrap());
    });
}

criterion_group!(benches, tool_loop);
criterion_main!(benches);

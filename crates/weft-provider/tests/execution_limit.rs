//! How many calls of one response run at once (`ExecutionMode`): `Limited(n)` — the runtime
//! profile's `batch` mode with `maxParallel` (RT-016, RT-018) — never runs more than `n`, and
//! `Sequential` — its `interactive` mode and the Standard Agents default — one. Under paused
//! time, so the overlap is decided by the scheduler, not by the clock.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use weft_provider::adapters::scripted::{self, Script, ScriptedResponse, ScriptedToolCall};
use weft_provider::{ExecutionMode, LlmOptions, Tool, llm};

/// The most calls of `work` in flight at once when five run in `mode`.
async fn most_at_once(mode: ExecutionMode) -> usize {
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (r, m) = (running.clone(), most.clone());
    let work = Tool::new(
        "work",
        "",
        json!({"type": "object"}),
        move |_a: Value, _c| {
            let (running, most) = (r.clone(), m.clone());
            async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(10)).await;
                running.fetch_sub(1, Ordering::SeqCst);
                Ok(json!("done"))
            }
        },
    );
    let calls = ScriptedResponse {
        tool_calls: (0..5)
            .map(|i| ScriptedToolCall {
                id: Some(format!("c{i}")),
                name: "work".into(),
                arguments: json!({}),
                after: Vec::new(),
            })
            .collect(),
        ..ScriptedResponse::default()
    };
    let script = Script {
        responses: vec![calls, ScriptedResponse::text("ok")],
        fresh_ids: false,
    };
    let instance = llm(LlmOptions::new(scripted::model(script))
        .tool(work)
        .execution_mode(mode))
    .unwrap();
    let turn = instance.generate(&[], "go").await.unwrap();
    assert_eq!(turn.tool_executions.len(), 5);
    most.load(Ordering::SeqCst)
}

#[tokio::test(start_paused = true)]
async fn limited_mode_runs_at_most_n_calls_at_once() {
    assert_eq!(most_at_once(ExecutionMode::Limited(2)).await, 2);
    assert_eq!(most_at_once(ExecutionMode::Limited(3)).await, 3);
    assert_eq!(most_at_once(ExecutionMode::Parallel).await, 5);
    assert_eq!(most_at_once(ExecutionMode::Sequential).await, 1);
}

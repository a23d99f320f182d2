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

/// `LlmOptions::offered`: only the named tools are sent to the model; the others stay
/// callable (the runtime profile's SOP phases rely on it: a call of a tool of another phase
/// reaches the pipeline, whose policy stage refuses it with a reason).
#[tokio::test]
async fn offered_tools_are_sent_and_the_others_stay_callable() {
    use weft_provider::adapters::scripted::ScriptedModel;
    let seen = Arc::new(std::sync::Mutex::new(Vec::<Vec<String>>::new()));
    let log = seen.clone();
    let model = ScriptedModel::from_fn("offered", move |request| {
        let names = request.tools.iter().map(|t| t.name.clone()).collect();
        let mut log = log.lock().unwrap();
        log.push(names);
        Ok(if log.len() == 1 {
            ScriptedResponse {
                tool_calls: vec![ScriptedToolCall {
                    id: Some("h1".into()),
                    name: "hidden".into(),
                    arguments: json!({}),
                    after: Vec::new(),
                }],
                ..ScriptedResponse::default()
            }
        } else {
            ScriptedResponse::text("ok")
        })
    });
    let tool = |name: &str| {
        Tool::new(name, "", json!({"type": "object"}), |_a: Value, _c| async {
            Ok(json!("ran"))
        })
    };
    let instance = llm(LlmOptions::new(scripted::from_model(model))
        .tool(tool("shown"))
        .tool(tool("hidden"))
        .offer_only(vec!["shown".into()]))
    .unwrap();
    let turn = instance.generate(&[], "go").await.unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        [vec!["shown".to_owned()], vec!["shown".to_owned()]]
    );
    // The call of the tool that was not offered ran (no policy stage refused it here).
    assert_eq!(turn.tool_executions.len(), 1);
    assert_eq!(turn.tool_executions[0].result, json!("ran"));
}

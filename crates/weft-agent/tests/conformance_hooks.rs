//! UAP-1.0 §10: strategy hooks and the `toolStrategy` passthrough.
#![allow(clippy::unwrap_used, clippy::type_complexity)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use weft_agent::{AgentError, AgentOptions, AgentState, AgentStrategy, GenerateResult, agent};
use weft_provider::{ToolUseStrategy, Turn};

use common::*;

fn two_rounds() -> weft_provider::ModelReference {
    script(vec![
        call("c1", "add", json!({"a": 1, "b": 2})),
        call("c2", "add", json!({"a": 3, "b": 4})),
        text("done"),
    ])
}

#[tokio::test]
async fn uap_109_every_hook_is_accepted_with_its_signature() {
    let l = log();
    let (a, b, c, d, e, f, g) = (
        l.clone(),
        l.clone(),
        l.clone(),
        l.clone(),
        l.clone(),
        l.clone(),
        l.clone(),
    );
    let strategy = AgentStrategy::new()
        .stop_condition_async(|state: AgentState| async move { state.step() > 100 })
        .on_step_start(move |step, _s: &AgentState| a.lock().unwrap().push(format!("start {step}")))
        .on_reason(move |step, r: &str| b.lock().unwrap().push(format!("reason {step} {r}")))
        .on_act(move |step, calls| {
            c.lock()
                .unwrap()
                .push(format!("act {step} {}", calls[0].tool_call_id))
        })
        .on_observe(move |step, results| {
            d.lock()
                .unwrap()
                .push(format!("observe {step} {}", results[0].result))
        })
        .on_step_end(move |step, r: &GenerateResult| {
            e.lock()
                .unwrap()
                .push(format!("end {step} {}", r.state.step()))
        })
        .on_complete(move |r: &GenerateResult| {
            f.lock()
                .unwrap()
                .push(format!("complete {}", r.turn.text()))
        })
        .on_error(move |error: &AgentError, _s: &AgentState| {
            g.lock().unwrap().push(format!("error {error}"));
            None
        });
    let agent = agent(
        AgentOptions::new(two_rounds())
            .tool(add_tool())
            .strategy(strategy),
    )
    .unwrap();
    agent.generate("go", &AgentState::initial()).await.unwrap();
    assert_eq!(
        entries(&l),
        [
            "start 1",
            "act 1 c1",
            "observe 1 3",
            "end 1 1",
            "start 2",
            "act 2 c2",
            "observe 2 7",
            "end 2 2",
            "start 3",
            "end 3 3",
            "complete done"
        ]
    );
}

#[tokio::test]
async fn uap_110_on_complete_is_called_once() {
    let n = Arc::new(AtomicUsize::new(0));
    let c = n.clone();
    let a = agent(AgentOptions::new(two_rounds()).tool(add_tool()).strategy(
        AgentStrategy::new().on_complete(move |_| {
            c.fetch_add(1, Ordering::SeqCst);
        }),
    ))
    .unwrap();
    a.generate("go", &AgentState::initial()).await.unwrap();
    assert_eq!(n.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn uap_111_on_error_is_called_and_may_recover() {
    let seen = log();
    let s = seen.clone();
    let a = agent(
        AgentOptions::new(texts(&[])).strategy(AgentStrategy::new().on_error(
            move |error, state| {
                s.lock().unwrap().push(error.to_string());
                Some(GenerateResult {
                    turn: Turn {
                        messages: vec![],
                        response: weft_provider::AssistantMessage::text("recovered").into(),
                        tool_executions: vec![],
                        usage: Default::default(),
                        cycles: 0,
                        data: None,
                    },
                    state: state.clone(),
                })
            },
        )),
    )
    .unwrap();
    let r = a.generate("go", &AgentState::initial()).await.unwrap();
    assert_eq!(r.turn.text(), "recovered");
    assert_eq!(entries(&seen).len(), 1);
    // Without recovery the error propagates.
    let a =
        agent(AgentOptions::new(texts(&[])).strategy(AgentStrategy::new().on_error(|_, _| None)))
            .unwrap();
    assert!(a.generate("go", &AgentState::initial()).await.is_err());
}

#[tokio::test]
async fn uap_112_every_built_in_strategy_honours_stop_condition() {
    use weft_agent::execution::{PlanOptions, ReactOptions, plan, react};
    let endless = || {
        weft_provider::adapters::scripted::function_model(|req: &weft_provider::LlmRequest| {
            if req.structure.is_some() {
                return Ok(text(
                    r#"{"steps": [{"id": "1", "description": "a"}, {"id": "2", "description": "b"}, {"id": "3", "description": "c"}]}"#,
                ));
            }
            Ok(call(&format!("c{}", req.messages.len()), "add", json!({})))
        })
    };
    let stop = || AgentStrategy::new().stop_condition(|s| s.step() >= 2);
    for execution in ["loop", "react", "plan"] {
        let options = AgentOptions::new(endless())
            .tool(add_tool())
            .strategy(stop());
        let options = match execution {
            "loop" => options,
            "react" => options.execution(react(ReactOptions::default())),
            _ => options.execution(plan(PlanOptions::default())),
        };
        let r = agent(options)
            .unwrap()
            .generate("go", &AgentState::initial())
            .await;
        match r {
            Ok(r) => assert_eq!(r.state.step(), 2, "{execution}"),
            Err(e) => panic!("{execution}: {e}"),
        }
    }
}

#[tokio::test]
async fn uap_113_tool_strategy_hooks_fire_in_real_time() {
    // toolStrategy hooks fire during tool execution, before the step's on_step_end.
    let l = log();
    let (a, b, c) = (l.clone(), l.clone(), l.clone());
    let agent = agent(
        AgentOptions::new(two_rounds())
            .tool(add_tool())
            .tool_strategy(
                ToolUseStrategy::unbounded()
                    .on_tool_call(move |tool, _| {
                        a.lock().unwrap().push(format!("tool {}", tool.name))
                    })
                    .on_after_call(move |tool, _, _| {
                        b.lock().unwrap().push(format!("after {}", tool.name));
                        None
                    }),
            )
            .strategy(
                AgentStrategy::new()
                    .on_step_end(move |step, _| c.lock().unwrap().push(format!("end {step}"))),
            ),
    )
    .unwrap();
    agent.generate("go", &AgentState::initial()).await.unwrap();
    assert_eq!(
        entries(&l),
        [
            "tool add",
            "after add",
            "end 1",
            "tool add",
            "after add",
            "end 2",
            "end 3"
        ]
    );
}

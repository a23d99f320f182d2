//! UAP-1.0 §8.5–§8.6: tool ordering through the agent (`sequential`, `dependsOn`, `after`,
//! parallel by default). The scheduling lives in the weft-provider executor; these tests
//! check it end to end through `agent().generate()`.
#![allow(clippy::unwrap_used, clippy::type_complexity)]

mod common;

use weft_agent::{AgentOptions, AgentState, agent};
use weft_provider::Tool;

use common::*;

fn position(log: &[String], entry: &str) -> usize {
    log.iter()
        .position(|e| e == entry)
        .unwrap_or_else(|| panic!("{entry} not in {log:?}"))
}

async fn run(
    tools: Vec<Tool>,
    round: weft_provider::adapters::scripted::ScriptedResponse,
) -> weft_agent::GenerateResult {
    let model = script(vec![round, text("done")]);
    let a = agent(AgentOptions::new(model).tools(tools)).unwrap();
    a.generate("go", &AgentState::initial()).await.unwrap()
}

#[test]
fn uap_075_sequential_false_and_depends_on_empty_by_default() {
    let t = add_tool();
    assert!(!t.sequential);
    assert!(t.depends_on.is_empty());
}

#[tokio::test]
async fn uap_076_a_sequential_tool_completes_before_others_start() {
    let l = log();
    let tools = vec![
        timed_tool("read", 30, &l).with_sequential(true),
        timed_tool("a", 5, &l),
        timed_tool("b", 5, &l),
    ];
    run(
        tools,
        calls(&[("1", "read", &[]), ("2", "a", &[]), ("3", "b", &[])]),
    )
    .await;
    let e = entries(&l);
    assert!(position(&e, "end:read") < position(&e, "start:a"));
    assert!(position(&e, "end:read") < position(&e, "start:b"));
}

#[tokio::test]
async fn uap_077_depends_on_waits_for_the_named_tools() {
    let l = log();
    let tools = vec![
        timed_tool("write", 5, &l).with_depends_on(["read"]),
        timed_tool("read", 30, &l),
    ];
    run(tools, calls(&[("1", "write", &[]), ("2", "read", &[])])).await;
    let e = entries(&l);
    assert!(position(&e, "end:read") < position(&e, "start:write"));
}

#[tokio::test]
async fn uap_078_model_declared_after_is_respected() {
    let l = log();
    let tools = vec![
        timed_tool("read", 20, &l),
        timed_tool("process", 20, &l),
        timed_tool("write", 5, &l),
    ];
    let r = run(
        tools,
        calls(&[
            ("call_3", "write", &["call_2"]),
            ("call_2", "process", &["call_1"]),
            ("call_1", "read", &[]),
        ]),
    )
    .await;
    let e = entries(&l);
    assert!(position(&e, "end:read") < position(&e, "start:process"));
    assert!(position(&e, "end:process") < position(&e, "start:write"));
    // Results stay in call order.
    let ids: Vec<&str> = r
        .turn
        .tool_executions
        .iter()
        .map(|x| x.tool_call_id.as_str())
        .collect();
    assert_eq!(ids.len(), 3);
}

#[tokio::test]
async fn uap_078_a_cycle_in_after_is_a_tool_error_not_a_hang() {
    let l = log();
    let tools = vec![timed_tool("a", 1, &l), timed_tool("b", 1, &l)];
    let r = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        run(tools, calls(&[("x", "a", &["y"]), ("y", "b", &["x"])])),
    )
    .await
    .expect("no hang");
    assert!(r.turn.tool_executions.iter().all(|e| e.is_error));
    assert!(
        r.turn.tool_executions[0]
            .result
            .as_str()
            .unwrap()
            .contains("cycle")
    );
    assert!(entries(&l).is_empty());
    assert_eq!(r.turn.text(), "done");
}

#[tokio::test]
async fn uap_079_independent_calls_run_in_parallel() {
    let l = log();
    let tools = vec![
        timed_tool("a", 50, &l),
        timed_tool("b", 50, &l),
        timed_tool("c", 50, &l),
    ];
    let started = std::time::Instant::now();
    run(
        tools,
        calls(&[("1", "a", &[]), ("2", "b", &[]), ("3", "c", &[])]),
    )
    .await;
    let e = entries(&l);
    // Every call starts before any ends.
    let last_start = ["start:a", "start:b", "start:c"]
        .iter()
        .map(|s| position(&e, s))
        .max()
        .unwrap();
    let first_end = ["end:a", "end:b", "end:c"]
        .iter()
        .map(|s| position(&e, s))
        .min()
        .unwrap();
    assert!(last_start < first_end, "{e:?}");
    assert!(started.elapsed() < std::time::Duration::from_millis(140));
}

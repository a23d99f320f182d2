//! UAP-1.0 §11: streaming events, result equivalence with `generate`, abort.
#![allow(clippy::unwrap_used, clippy::type_complexity)]

mod common;

use futures_util::StreamExt as _;
use serde_json::json;
use weft_agent::execution::{PlanOptions, ReactOptions, plan, react};
use weft_agent::{
    AgentError, AgentOptions, AgentState, AgentStreamEvent, EventSource, UapEventType, agent,
};
use weft_provider::adapters::scripted::ScriptedResponse;
use weft_provider::{StreamEventType, Tool};

use common::*;

fn tool_script() -> Vec<ScriptedResponse> {
    vec![call("c1", "add", json!({"a": 1, "b": 2})), text("three")]
}

async fn collect(stream: &mut weft_agent::AgentStreamResult) -> Vec<AgentStreamEvent> {
    let mut events = Vec::new();
    while let Some(e) = stream.next().await {
        events.push(e);
    }
    events
}

#[tokio::test]
async fn uap_114_events_have_uap_or_upp_source() {
    let a = agent(AgentOptions::new(script(tool_script())).tool(add_tool())).unwrap();
    let mut stream = a.stream("go", &AgentState::initial());
    let events = collect(&mut stream).await;
    stream.result().await.unwrap();
    let uap: Vec<_> = events.iter().filter_map(AgentStreamEvent::uap).collect();
    assert!(!uap.is_empty());
    for e in &uap {
        assert_eq!(e.agent_id, a.id());
        assert!(e.step >= 1);
        assert!(e.data.is_object());
    }
    let upp: Vec<_> = events.iter().filter_map(AgentStreamEvent::upp).collect();
    assert!(
        upp.iter()
            .any(|e| e.event_type == StreamEventType::TextDelta)
    );
    assert!(
        upp.iter()
            .any(|e| e.event_type == StreamEventType::ToolExecutionEnd)
    );
    let json = serde_json::to_value(&events[0]).unwrap();
    assert_eq!(json["source"], "uap");
    assert!(events.iter().any(|e| e.source() == EventSource::Upp));
}

#[test]
fn uap_115_every_uap_event_type() {
    let names: Vec<&str> = UapEventType::ALL.iter().map(|t| t.as_str()).collect();
    assert_eq!(
        names,
        [
            "step_start",
            "step_end",
            "reasoning",
            "action",
            "observation",
            "subagent_start",
            "subagent_event",
            "subagent_end"
        ]
    );
    for t in UapEventType::ALL {
        assert_eq!(serde_json::to_value(t).unwrap(), json!(t.as_str()));
    }
}

#[tokio::test]
async fn uap_116_step_start_and_step_end_bracket_each_step() {
    let a = agent(AgentOptions::new(script(tool_script())).tool(add_tool())).unwrap();
    let mut stream = a.stream("go", &AgentState::initial());
    let events = collect(&mut stream).await;
    let steps: Vec<(UapEventType, u64)> = events
        .iter()
        .filter_map(AgentStreamEvent::uap)
        .filter(|e| {
            matches!(
                e.event_type,
                UapEventType::StepStart | UapEventType::StepEnd
            )
        })
        .map(|e| (e.event_type, e.step))
        .collect();
    assert_eq!(
        steps,
        [
            (UapEventType::StepStart, 1),
            (UapEventType::StepEnd, 1),
            (UapEventType::StepStart, 2),
            (UapEventType::StepEnd, 2)
        ]
    );
    // UPP events of a step fall between its start and end.
    let first_upp = events
        .iter()
        .position(|e| e.source() == EventSource::Upp)
        .unwrap();
    assert!(first_upp > 0);
}

#[tokio::test]
async fn uap_117_react_streams_reasoning_action_observation() {
    let model = script(vec![
        text("I should add"),
        call("c1", "add", json!({"a": 1, "b": 2})),
        text("done thinking"),
        text("three"),
    ]);
    let a = agent(
        AgentOptions::new(model)
            .tool(add_tool())
            .execution(react(ReactOptions::default())),
    )
    .unwrap();
    let mut stream = a.stream("go", &AgentState::initial());
    let types: Vec<UapEventType> = collect(&mut stream)
        .await
        .iter()
        .filter_map(AgentStreamEvent::uap_type)
        .collect();
    assert_eq!(
        types,
        [
            UapEventType::StepStart,
            UapEventType::Reasoning,
            UapEventType::Action,
            UapEventType::Observation,
            UapEventType::StepEnd,
            UapEventType::StepStart,
            UapEventType::Reasoning,
            UapEventType::StepEnd,
        ]
    );
}

fn react_script() -> Vec<ScriptedResponse> {
    vec![
        text("think 1"),
        call("c1", "add", json!({"a": 1, "b": 2})),
        text("think 2"),
        text("three"),
    ]
}

fn plan_script() -> Vec<ScriptedResponse> {
    vec![
        text(
            r#"{"steps": [{"id": "a", "description": "add", "tool": "add"}, {"id": "b", "description": "report", "dependsOn": ["a"]}]}"#,
        ),
        call("c1", "add", json!({"a": 1, "b": 2})),
        text("added"),
        text("reported"),
    ]
}

#[tokio::test]
async fn uap_118_stream_result_state_is_complete() {
    let a = agent(
        AgentOptions::new(script(plan_script()))
            .tool(add_tool())
            .execution(plan(PlanOptions::default())),
    )
    .unwrap();
    let r = a
        .stream("go", &AgentState::initial())
        .result()
        .await
        .unwrap();
    assert_eq!(r.state.step(), 3);
    assert!(r.state.messages().any(|m| m.is_tool_result()));
    assert!(
        r.state
            .plan()
            .unwrap()
            .iter()
            .all(|s| s.status == weft_agent::PlanStepStatus::Completed)
    );
    let a = agent(
        AgentOptions::new(script(react_script()))
            .tool(add_tool())
            .execution(react(ReactOptions::default())),
    )
    .unwrap();
    let r = a
        .stream("go", &AgentState::initial())
        .result()
        .await
        .unwrap();
    assert_eq!(
        r.state.reasoning().collect::<Vec<_>>(),
        ["think 1", "think 2"]
    );
}

#[tokio::test]
async fn uap_119_stream_and_generate_give_equivalent_results() {
    type Build = fn() -> AgentOptions;
    let builds: [(&str, Build); 3] = [
        ("loop", || {
            AgentOptions::new(script(tool_script())).tool(add_tool())
        }),
        ("react", || {
            AgentOptions::new(script(react_script()))
                .tool(add_tool())
                .execution(react(ReactOptions::default()))
        }),
        ("plan", || {
            AgentOptions::new(script(plan_script()))
                .tool(add_tool())
                .execution(plan(PlanOptions::default()))
        }),
    ];
    for (name, build) in builds {
        let s0 = AgentState::initial().with_metadata("k", json!(1));
        let generated = agent(build()).unwrap().generate("go", &s0).await.unwrap();
        let streamed = agent(build())
            .unwrap()
            .stream("go", &s0)
            .result()
            .await
            .unwrap();
        assert_eq!(
            content(&generated.state),
            content(&streamed.state),
            "{name}"
        );
        assert_eq!(generated.state.step(), streamed.state.step(), "{name}");
        assert_eq!(
            generated.state.metadata(),
            streamed.state.metadata(),
            "{name}"
        );
        assert_eq!(generated.state.plan(), streamed.state.plan(), "{name}");
        assert_eq!(
            generated.state.reasoning().collect::<Vec<_>>(),
            streamed.state.reasoning().collect::<Vec<_>>(),
            "{name}"
        );
        assert_eq!(generated.turn.text(), streamed.turn.text(), "{name}");
        assert_eq!(generated.turn.cycles, streamed.turn.cycles, "{name}");
        assert_eq!(
            generated.turn.tool_executions.len(),
            streamed.turn.tool_executions.len(),
            "{name}"
        );
    }
}

#[tokio::test]
async fn abort_stops_cleanly_with_the_last_step_state() {
    let slow = Tool::new(
        "slow",
        "Sleeps.",
        object_schema(),
        |_a: serde_json::Value, ctx: weft_provider::ToolContext| async move {
            tokio::select! {
                () = ctx.signal.cancelled() => Err(weft_provider::ToolError::new("cancelled")),
                () = tokio::time::sleep(std::time::Duration::from_secs(30)) => Ok(json!("late")),
            }
        },
    );
    let model = script(vec![
        call("c1", "add", json!({"a": 1, "b": 1})),
        call("c2", "slow", json!({})),
        text("never"),
    ]);
    let a = agent(AgentOptions::new(model).tool(add_tool()).tool(slow)).unwrap();
    let s0 = AgentState::initial();
    let mut stream = a.stream("go", &s0);
    // Abort once step 2 has started.
    while let Some(event) = stream.next().await {
        if event
            .uap()
            .is_some_and(|e| e.event_type == UapEventType::StepStart && e.step == 2)
        {
            stream.abort();
        }
    }
    let error = tokio::time::timeout(std::time::Duration::from_secs(5), stream.result())
        .await
        .unwrap()
        .unwrap_err();
    let AgentError::Cancelled { state } = error else {
        panic!("{error:?}")
    };
    // The state is the end of step 1: input, the add call and its result; nothing of step 2.
    assert_eq!(state.step(), 1);
    assert_eq!(state.message_count(), 3);
    assert!(state.last_message().unwrap().is_tool_result());
    assert_eq!(s0.message_count(), 0);
}

#[tokio::test]
async fn generate_with_signal_cancels_too() {
    let model = script(vec![ScriptedResponse {
        text: Some("x".into()),
        delay_ms: Some(5_000),
        ..Default::default()
    }]);
    let a = agent(AgentOptions::new(model)).unwrap();
    let options = weft_agent::RunOptions::default();
    let signal = options.signal.clone();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        signal.cancel();
    });
    let error = a
        .generate_with("go", &AgentState::initial(), options)
        .await
        .unwrap_err();
    assert!(error.is_cancelled());
}

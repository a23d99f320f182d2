//! UAP-1.0 §3.4, §8: sub-agents as explicit tools, context injection, events, traces.
#![allow(clippy::unwrap_used, clippy::type_complexity)]

mod common;

use std::sync::{Arc, Mutex};

use futures_util::StreamExt as _;
use serde_json::{Value, json};
use weft_agent::{
    AgentOptions, AgentState, AgentStrategy, AgentStreamEvent, SubagentTool, ToolExecutionContext,
    UapEventType, agent,
};
use weft_provider::adapters::scripted::{self, ScriptedResponse};
use weft_provider::{LlmRequest, Tool, ToolContext};

use common::*;

fn explore_schema() -> Value {
    json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]})
}

/// A child agent that calls `add` once and answers "found it".
fn explorer() -> weft_agent::Agent {
    agent(
        AgentOptions::new(script(vec![
            call("e1", "add", json!({"a": 2, "b": 2})),
            text("found it"),
        ]))
        .tool(add_tool())
        .system("You explore."),
    )
    .unwrap()
}

fn parent_with(tool: Tool) -> weft_agent::Agent {
    agent(
        AgentOptions::new(script(vec![
            call("parent_call", "explore", json!({"query": "main"})),
            text("parent done"),
        ]))
        .tool(tool),
    )
    .unwrap()
}

fn explore_tool() -> Tool {
    SubagentTool::new(
        "explore",
        "Explore the codebase",
        explore_schema(),
        explorer(),
    )
    .subagent_type("explorer")
    .prompt_from("query")
    .build()
}

#[test]
fn uap_016_no_schema_generation() {
    // A sub-agent tool needs a schema written by the developer; the tool carries it unchanged.
    let tool = explore_tool();
    assert_eq!(tool.parameters, explore_schema());
    assert_eq!(tool.description, "Explore the codebase");
}

#[tokio::test]
async fn uap_025_execution_context_records_lineage() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let probe = Tool::new(
        "probe",
        "Records its context.",
        object_schema(),
        move |_a: Value, ctx: ToolContext| {
            let record = record.clone();
            async move {
                let exec = ToolExecutionContext::from_tool(&ctx).unwrap();
                record.lock().unwrap().push((
                    exec.agent_id.clone(),
                    exec.depth(),
                    exec.parent.as_ref().map(|p| p.agent_id.clone()),
                ));
                Ok(json!("ok"))
            }
        },
    );
    let child = agent(
        AgentOptions::new(script(vec![
            call("p1", "probe", json!({})),
            text("child done"),
        ]))
        .tool(probe),
    )
    .unwrap();
    let child_id = child.id().to_owned();
    let tool = SubagentTool::new("explore", "d", explore_schema(), child).build();
    let parent = parent_with(tool);
    parent.generate("go", &AgentState::initial()).await.unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen, vec![(child_id, 1, Some(parent.id().to_owned()))]);
}

#[tokio::test]
async fn uap_072_explicit_model_is_used() {
    let parent_calls = Arc::new(Mutex::new(0));
    let counter = parent_calls.clone();
    let parent_model = scripted::function_model(move |req: &LlmRequest| {
        *counter.lock().unwrap() += 1;
        if req.messages.len() == 1 {
            Ok(call("pc", "explore", json!({"query": "x"})))
        } else {
            Ok(text("parent done"))
        }
    });
    let parent = agent(AgentOptions::new(parent_model).tool(explore_tool())).unwrap();
    let r = parent.generate("go", &AgentState::initial()).await.unwrap();
    assert_eq!(*parent_calls.lock().unwrap(), 2);
    assert_eq!(r.turn.tool_executions[0].result, json!("found it"));
}

#[tokio::test]
async fn uap_073_model_less_sub_agent_inherits_at_execution_time() {
    let model = scripted::function_model(|req: &LlmRequest| {
        if req.system.as_deref() == Some("helper") {
            return Ok(text("helped"));
        }
        if req.messages.len() == 1 {
            Ok(call("pc", "helper", json!({"task": "x"})))
        } else {
            Ok(text("parent done"))
        }
    });
    let helper = SubagentTool::inheriting(
        "helper",
        "Helps",
        json!({"type": "object", "properties": {"task": {"type": "string"}}}),
        |model, config| {
            agent(
                AgentOptions::new(model.clone())
                    .config(config.clone())
                    .system("helper"),
            )
        },
    )
    .build();
    let parent = agent(AgentOptions::new(model).tool(helper)).unwrap();
    let r = parent.generate("go", &AgentState::initial()).await.unwrap();
    assert_eq!(r.turn.tool_executions[0].result, json!("helped"));
}

#[tokio::test]
async fn uap_074_context_is_injected_into_tools() {
    let seen = Arc::new(Mutex::new(None));
    let record = seen.clone();
    let probe = Tool::new(
        "probe",
        "Records its context.",
        object_schema(),
        move |_a: Value, ctx: ToolContext| {
            let record = record.clone();
            async move {
                let exec = ToolExecutionContext::from_tool(&ctx).unwrap();
                *record.lock().unwrap() = Some((
                    exec.parent_model.model_id.clone(),
                    exec.agent_id.clone(),
                    exec.state_id.clone(),
                    ctx.tool_call_id.clone(),
                ));
                Ok(json!("ok"))
            }
        },
    );
    let model = script(vec![call("p1", "probe", json!({})), text("done")]);
    let model_id = model.model_id.clone();
    let a = agent(AgentOptions::new(model).tool(probe)).unwrap();
    let s = AgentState::initial();
    a.generate("go", &s).await.unwrap();
    let (m, agent_id, state_id, call_id) = seen.lock().unwrap().clone().unwrap();
    assert_eq!(m, model_id);
    assert_eq!(agent_id, a.id());
    assert_eq!(state_id, s.id());
    assert_eq!(call_id, "p1");
}

async fn streamed_events() -> (Vec<AgentStreamEvent>, weft_agent::GenerateResult) {
    let parent = parent_with(explore_tool());
    let mut stream = parent.stream("go", &AgentState::initial());
    let mut events = Vec::new();
    while let Some(e) = stream.next().await {
        events.push(e);
    }
    (events, stream.result().await.unwrap())
}

fn subagent_events(events: &[AgentStreamEvent]) -> Vec<&weft_agent::UapEvent> {
    events
        .iter()
        .filter_map(AgentStreamEvent::uap)
        .filter(|e| {
            matches!(
                e.event_type,
                UapEventType::SubagentStart
                    | UapEventType::SubagentEvent
                    | UapEventType::SubagentEnd
            )
        })
        .collect()
}

#[tokio::test]
async fn uap_080_sub_agent_events_reach_the_parent_stream() {
    let (events, _) = streamed_events().await;
    assert!(subagent_events(&events).len() > 3);
}

#[tokio::test]
async fn uap_081_sub_agent_event_types_and_fields() {
    let (events, _) = streamed_events().await;
    let sub = subagent_events(&events);
    assert_eq!(sub.first().unwrap().event_type, UapEventType::SubagentStart);
    assert_eq!(sub.last().unwrap().event_type, UapEventType::SubagentEnd);
    for e in &sub {
        assert_eq!(e.data["subagentType"], "explorer");
        if e.event_type == UapEventType::SubagentEvent {
            assert!(e.data["innerEvent"]["source"].is_string());
        }
    }
}

#[tokio::test]
async fn uap_082_every_sub_agent_event_has_subagent_id() {
    let (events, _) = streamed_events().await;
    let sub = subagent_events(&events);
    let id = sub[0].data["subagentId"].as_str().unwrap().to_owned();
    assert!(is_uuid_v4(&id));
    assert!(sub.iter().all(|e| e.data["subagentId"] == json!(id)));
}

#[tokio::test]
async fn uap_083_every_sub_agent_event_has_parent_tool_call_id() {
    let (events, _) = streamed_events().await;
    assert!(
        subagent_events(&events)
            .iter()
            .all(|e| e.data["parentToolCallId"] == "parent_call")
    );
}

#[tokio::test]
async fn uap_084_subagent_start_comes_first_with_prompt_and_timestamp() {
    let (events, _) = streamed_events().await;
    let sub = subagent_events(&events);
    let start = sub[0];
    assert_eq!(start.event_type, UapEventType::SubagentStart);
    assert_eq!(start.data["prompt"], "main");
    assert!(start.data["timestamp"].as_i64().unwrap() > 1_600_000_000_000);
}

#[tokio::test]
async fn uap_085_subagent_end_on_success_and_failure() {
    let (events, _) = streamed_events().await;
    let end = *subagent_events(&events).last().unwrap();
    assert_eq!(end.data["success"], true);
    assert_eq!(end.data["result"], "found it");
    assert!(end.data["timestamp"].is_i64());
    assert_eq!(end.data["toolExecutions"][0]["toolName"], "add");
    assert!(end.data["usage"].is_object());
    // Failure: the child's script is empty.
    let failing = agent(AgentOptions::new(texts(&[]))).unwrap();
    let tool = SubagentTool::new("explore", "d", explore_schema(), failing).build();
    let parent = parent_with(tool);
    let mut stream = parent.stream("go", &AgentState::initial());
    let mut events = Vec::new();
    while let Some(e) = stream.next().await {
        events.push(e);
    }
    let r = stream.result().await.unwrap();
    let end = *subagent_events(&events).last().unwrap();
    assert_eq!(end.event_type, UapEventType::SubagentEnd);
    assert_eq!(end.data["success"], false);
    assert!(end.data["error"].is_string());
    assert!(r.turn.tool_executions[0].is_error);
}

#[tokio::test]
async fn uap_086_inner_tool_executions_and_text_deltas_are_forwarded() {
    let (events, _) = streamed_events().await;
    let inner: Vec<&Value> = subagent_events(&events)
        .iter()
        .filter(|e| e.event_type == UapEventType::SubagentEvent)
        .map(|e| &e.data["innerEvent"])
        .collect();
    assert!(inner.iter().any(|e| e["upp"]["type"] == "text_delta"));
    assert!(
        inner
            .iter()
            .any(|e| e["upp"]["type"] == "tool_execution_end")
    );
    assert!(inner.iter().any(|e| e["uap"]["type"] == "step_start"));
}

#[tokio::test]
async fn uap_087_tools_emit_through_the_injected_event_callback() {
    // A hand-written sub-agent tool uses SubagentEmitter on the injected sink.
    let tool = Tool::new(
        "explore",
        "d",
        explore_schema(),
        |args: Value, ctx: ToolContext| async move {
            let exec = ToolExecutionContext::from_tool(&ctx).unwrap();
            let emitter = weft_agent::SubagentEmitter::start(
                &exec.events,
                "manual",
                &ctx.tool_call_id,
                args["query"].as_str().unwrap_or(""),
            );
            let turn = explorer()
                .query("find")
                .await
                .map_err(|e| weft_provider::ToolError::new(e.to_string()))?;
            let text = turn.text();
            emitter.end(Ok(&turn));
            Ok(json!(text))
        },
    );
    let parent = parent_with(tool);
    let mut stream = parent.stream("go", &AgentState::initial());
    let mut events = Vec::new();
    while let Some(e) = stream.next().await {
        events.push(e);
    }
    let r = stream.result().await.unwrap();
    let sub = subagent_events(&events);
    assert_eq!(sub.len(), 2);
    assert_eq!(sub[0].data["subagentType"], "manual");
    assert_eq!(
        r.state.subagent_traces().next().unwrap().subagent_type,
        "manual"
    );
}

#[test]
fn uap_088_helper_builds_sub_agent_tools() {
    let tool = SubagentTool::new("explore", "d", explore_schema(), explorer())
        .subagent_type("explorer")
        .prompt(|args| Ok(format!("Find: {}", args["query"])))
        .build();
    assert_eq!(tool.name, "explore");
}

#[tokio::test]
async fn uap_090_traces_are_stored_in_state() {
    let parent = parent_with(explore_tool());
    let r = parent.generate("go", &AgentState::initial()).await.unwrap();
    let traces: Vec<_> = r.state.subagent_traces().collect();
    assert_eq!(traces.len(), 1);
    assert_eq!(traces[0].subagent_type, "explorer");
}

#[tokio::test]
async fn uap_091_trace_has_required_and_optional_fields() {
    let r = parent_with(explore_tool())
        .generate("go", &AgentState::initial())
        .await
        .unwrap();
    let t = r.state.subagent_traces().next().unwrap();
    assert!(is_uuid_v4(&t.subagent_id));
    assert_eq!(t.parent_tool_call_id, "parent_call");
    assert_eq!(t.prompt, "main");
    assert!(t.end_time >= t.start_time);
    assert!(t.success);
    assert_eq!(t.result.as_deref(), Some("found it"));
    assert!(t.error.is_none());
    assert!(t.usage.is_some());
    let json = serde_json::to_value(t).unwrap();
    for f in [
        "subagentId",
        "subagentType",
        "parentToolCallId",
        "prompt",
        "startTime",
        "endTime",
        "success",
    ] {
        assert!(json.get(f).is_some(), "{f}");
    }
}

#[tokio::test]
async fn uap_092_tool_execution_trace_fields() {
    let r = parent_with(explore_tool())
        .generate("go", &AgentState::initial())
        .await
        .unwrap();
    let t = r.state.subagent_traces().next().unwrap();
    let e = &t.tool_executions.as_ref().unwrap()[0];
    assert_eq!(e.tool_name, "add");
    assert_eq!(e.arguments, json!({"a": 2, "b": 2}));
    assert_eq!(e.result, "4");
    assert_eq!(e.tool_call_id.as_deref(), Some("e1"));
    assert_eq!(e.is_error, Some(false));
    assert!(e.duration.is_some());
}

#[tokio::test]
async fn uap_093_a_trace_is_collected_whenever_subagent_end_is_emitted() {
    let (events, result) = streamed_events().await;
    let ends = subagent_events(&events)
        .iter()
        .filter(|e| e.event_type == UapEventType::SubagentEnd)
        .count();
    assert_eq!(ends, result.state.subagent_traces().count());
}

#[tokio::test]
async fn uap_094_trace_includes_all_tool_executions() {
    let child = agent(
        AgentOptions::new(script(vec![
            call("e1", "add", json!({"a": 1, "b": 1})),
            call("e2", "add", json!({"a": 2, "b": 2})),
            text("found it"),
        ]))
        .tool(add_tool()),
    )
    .unwrap();
    let tool = SubagentTool::new("explore", "d", explore_schema(), child).build();
    let r = parent_with(tool)
        .generate("go", &AgentState::initial())
        .await
        .unwrap();
    let t = r.state.subagent_traces().next().unwrap();
    assert_eq!(t.tool_executions.as_ref().unwrap().len(), 2);
}

#[tokio::test]
async fn uap_095_traces_are_serialized() {
    let r = parent_with(explore_tool())
        .generate("go", &AgentState::initial())
        .await
        .unwrap();
    let json = serde_json::to_value(r.state.to_json()).unwrap();
    assert_eq!(json["subagentTraces"][0]["subagentType"], "explorer");
}

#[tokio::test]
async fn uap_096_traces_are_restored() {
    let r = parent_with(explore_tool())
        .generate("go", &AgentState::initial())
        .await
        .unwrap();
    let restored = AgentState::from_json_str(&r.state.to_json_string().unwrap()).unwrap();
    assert_eq!(
        restored.subagent_traces().collect::<Vec<_>>(),
        r.state.subagent_traces().collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn uap_144_parent_stop_condition_does_not_reach_sub_agents() {
    // The parent stops after one step; the child still runs its two steps.
    let parent = agent(
        AgentOptions::new(script(vec![
            call("parent_call", "explore", json!({"query": "main"})),
            text("never"),
        ]))
        .tool(explore_tool())
        .strategy(AgentStrategy::new().stop_condition(|s| s.step() >= 1)),
    )
    .unwrap();
    let r = parent.generate("go", &AgentState::initial()).await.unwrap();
    assert_eq!(r.state.step(), 1);
    let t = r.state.subagent_traces().next().unwrap();
    assert_eq!(t.result.as_deref(), Some("found it"));
    assert_eq!(t.tool_executions.as_ref().unwrap().len(), 1);
}

#[tokio::test]
async fn sub_agent_without_parent_context_still_runs() {
    let tool = explore_tool();
    let ctx = ToolContext {
        tool_call_id: "x".into(),
        signal: Default::default(),
        extensions: Default::default(),
    };
    let out = tool.run(json!({"query": "q"}), ctx).await.unwrap();
    assert_eq!(out, json!("found it"));
    let _ = ScriptedResponse::default();
}

/// A [`weft_agent::ChildRunner`] that records what it is asked: the sub-agent's agent as
/// given, an observer counting steps, the outcome it is ended with.
struct RecordingRunner {
    opened: Mutex<Vec<String>>,
    steps: Arc<Mutex<Vec<u64>>>,
    ended: Arc<Mutex<Vec<weft_agent::ChildOutcome>>>,
    model: weft_provider::ModelReference,
}

struct StepCounter(Arc<Mutex<Vec<u64>>>);

#[async_trait::async_trait]
impl weft_agent::execution::StepObserver for StepCounter {
    async fn step_started(&self, step: u64, _state: &AgentState) {
        self.0.lock().unwrap().push(step);
    }
}

struct Opened {
    agent: weft_agent::Agent,
    steps: Arc<Mutex<Vec<u64>>>,
    ended: Arc<Mutex<Vec<weft_agent::ChildOutcome>>>,
}

impl weft_agent::OpenChild for Opened {
    fn agent(&self) -> &weft_agent::Agent {
        &self.agent
    }
    fn observer(&self) -> Option<Arc<dyn weft_agent::execution::StepObserver>> {
        Some(Arc::new(StepCounter(self.steps.clone())))
    }
    fn end(
        self: Box<Self>,
        outcome: weft_agent::ChildOutcome,
    ) -> weft_provider::tool::BoxFuture<'static, Result<(), weft_provider::ToolError>> {
        self.ended.lock().unwrap().push(outcome);
        Box::pin(async { Ok(()) })
    }
}

impl weft_agent::ChildRunner for RecordingRunner {
    fn open<'a>(
        &'a self,
        name: &'a str,
        agent: &'a weft_agent::Agent,
        call: &'a ToolContext,
    ) -> weft_provider::tool::BoxFuture<
        'a,
        Result<Box<dyn weft_agent::OpenChild>, weft_provider::ToolError>,
    > {
        self.opened
            .lock()
            .unwrap()
            .push(format!("{name} {}", call.tool_call_id));
        let opened = Opened {
            agent: agent.clone(),
            steps: self.steps.clone(),
            ended: self.ended.clone(),
        };
        Box::pin(async move { Ok(Box::new(opened) as Box<dyn weft_agent::OpenChild>) })
    }
    fn model(&self) -> &weft_provider::ModelReference {
        &self.model
    }
}

/// Inside a runtime's run (a `ChildRuns` in the call's extensions) a `SubagentTool` runs its
/// agent as the runner opens it — its steps reported to the runner's observer, the child
/// ended with its outcome — and its UAP-1.0 events still reach the parent's stream.
#[tokio::test]
async fn inside_a_run_a_sub_agent_tool_runs_as_a_child_run_with_its_events_in_the_parent_stream() {
    let runner = Arc::new(RecordingRunner {
        opened: Mutex::default(),
        steps: Arc::default(),
        ended: Arc::default(),
        model: script(vec![text("inherited")]),
    });
    let parent = agent(
        AgentOptions::new(script(vec![
            call("parent_call", "explore", json!({"query": "main"})),
            text("parent done"),
        ]))
        .tool(explore_tool())
        .tool_extension(weft_agent::ChildRuns(runner.clone())),
    )
    .unwrap();
    let mut stream = parent.stream("go", &AgentState::initial());
    let mut events = Vec::new();
    while let Some(e) = stream.next().await {
        events.push(e);
    }
    let result = stream.result().await.unwrap();
    assert_eq!(result.turn.text(), "parent done");
    assert_eq!(*runner.opened.lock().unwrap(), ["explorer parent_call"]);
    assert_eq!(
        *runner.steps.lock().unwrap(),
        [1, 2],
        "the child's two steps"
    );
    assert_eq!(
        *runner.ended.lock().unwrap(),
        [weft_agent::ChildOutcome::Succeeded]
    );
    let sub = subagent_events(&events);
    assert_eq!(sub.first().unwrap().event_type, UapEventType::SubagentStart);
    assert_eq!(sub.last().unwrap().event_type, UapEventType::SubagentEnd);
    assert_eq!(sub.last().unwrap().data["result"], "found it");
    assert!(
        sub.iter()
            .all(|e| e.data["parentToolCallId"] == "parent_call")
    );
}

//! UAP-1.0 §2.4, §5: loop, react, plan, custom strategies, unbounded defaults.
#![allow(clippy::unwrap_used, clippy::type_complexity)]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::json;
use weft_agent::execution::{
    DEFAULT_ACTION_PROMPT, DEFAULT_REASONING_PROMPT, LoopOptions, PlanOptions, ReactOptions,
    default_plan_schema, r#loop, plan, react,
};
use weft_agent::{
    AgentError, AgentOptions, AgentState, AgentStrategy, ExecutionContext, ExecutionResult,
    ExecutionStrategy, GenerateResult, PlanStepStatus, agent,
};
use weft_provider::adapters::scripted::{self, ScriptedResponse};
use weft_provider::{LlmRequest, Message, ToolUseStrategy};

use common::*;

/// A model that asks for `add` `n` times, then answers.
fn calls_then_answer(n: usize) -> weft_provider::ModelReference {
    let mut responses: Vec<ScriptedResponse> = (0..n)
        .map(|i| call(&format!("c{i}"), "add", json!({"a": i, "b": 1})))
        .collect();
    responses.push(text("done"));
    script(responses)
}

/// A model that always asks for a tool (the run only ends by a limit or stop condition).
fn endless() -> weft_provider::ModelReference {
    let n = Arc::new(AtomicUsize::new(0));
    scripted::function_model(move |_req: &LlmRequest| {
        let i = n.fetch_add(1, Ordering::SeqCst);
        Ok(call(&format!("c{i}"), "add", json!({"a": 1, "b": 1})))
    })
}

fn last_prompt(req: &LlmRequest) -> String {
    req.messages().last().map(Message::text).unwrap_or_default()
}

#[tokio::test]
async fn uap_010_no_limits_by_default() {
    // 40 tool rounds, more than UPP's default of 10: the agent runs them all.
    let a = agent(AgentOptions::new(calls_then_answer(40)).tool(add_tool())).unwrap();
    let r = a.generate("go", &AgentState::initial()).await.unwrap();
    assert_eq!(r.turn.tool_executions.len(), 40);
    assert_eq!(r.turn.text(), "done");
    assert_eq!(r.state.step(), 41);
}

#[test]
fn uap_011_loop_max_iterations_defaults_to_unbounded() {
    assert_eq!(LoopOptions::default().max_iterations, None);
    assert_eq!(
        r#loop(LoopOptions::default()).options().max_iterations,
        None
    );
}

#[test]
fn uap_012_react_max_steps_defaults_to_unbounded() {
    assert_eq!(ReactOptions::default().max_steps, None);
}

#[tokio::test]
async fn uap_013_tool_strategy_max_iterations_defaults_to_unbounded() {
    let a = agent(AgentOptions::new(calls_then_answer(12)).tool(add_tool())).unwrap();
    assert_eq!(a.llm_options().tool_strategy.max_iterations, None);
    let r = a.generate("go", &AgentState::initial()).await.unwrap();
    assert_eq!(r.turn.tool_executions.len(), 12);
}

#[tokio::test]
async fn uap_014_no_timeout_by_default() {
    let a = agent(AgentOptions::new(texts(&[]))).unwrap();
    assert!(a.config().timeout.is_none());
}

#[tokio::test]
async fn uap_015_limits_apply_when_configured() {
    // loop maxIterations
    let a = agent(
        AgentOptions::new(endless())
            .tool(add_tool())
            .execution(r#loop(LoopOptions {
                max_iterations: Some(3),
            })),
    )
    .unwrap();
    let r = a.generate("go", &AgentState::initial()).await.unwrap();
    assert_eq!(r.turn.tool_executions.len(), 3);
    // toolStrategy.maxIterations: UPP semantics (error with the partial turn)
    let a = agent(
        AgentOptions::new(endless())
            .tool(add_tool())
            .tool_strategy(ToolUseStrategy::unbounded().max_iterations(Some(2))),
    )
    .unwrap();
    let e = a.generate("go", &AgentState::initial()).await.unwrap_err();
    assert!(matches!(e, AgentError::Upp(ref u) if u.message.contains("maxIterations")));
    // stopCondition
    let a = agent(
        AgentOptions::new(endless())
            .tool(add_tool())
            .strategy(AgentStrategy::new().stop_condition(|s| s.step() >= 4)),
    )
    .unwrap();
    let r = a.generate("go", &AgentState::initial()).await.unwrap();
    assert_eq!(r.state.step(), 4);
}

#[tokio::test]
async fn uap_038_strategy_has_name_execute_and_stream() {
    let s: Arc<dyn ExecutionStrategy> = Arc::new(r#loop(LoopOptions::default()));
    assert_eq!(s.name(), "loop");
    let a = agent(AgentOptions::new(texts(&["x", "y"])).execution_arc(s)).unwrap();
    assert_eq!(
        a.generate("go", &AgentState::initial())
            .await
            .unwrap()
            .turn
            .text(),
        "x"
    );
    assert_eq!(
        a.stream("go", &AgentState::initial())
            .result()
            .await
            .unwrap()
            .turn
            .text(),
        "y"
    );
}

#[derive(Debug)]
struct Inspect(Arc<Mutex<Option<(String, String, String, usize, bool)>>>);

#[async_trait]
impl ExecutionStrategy for Inspect {
    fn name(&self) -> &str {
        "inspect"
    }
    async fn execute(&self, ctx: ExecutionContext) -> Result<ExecutionResult, AgentError> {
        *self.0.lock().unwrap() = Some((
            ctx.agent.id().to_owned(),
            ctx.input.text(),
            ctx.state.id().to_owned(),
            ctx.tools().len(),
            ctx.signal.is_cancelled(),
        ));
        let turn = ctx
            .llm
            .generate(&ctx.state.messages_vec(), ctx.input.clone())
            .await?;
        let state = ctx.state.with_messages(turn.messages.iter().cloned());
        let _ = &ctx.strategy;
        Ok(GenerateResult { turn, state })
    }
}

#[tokio::test]
async fn uap_039_execution_context_fields() {
    let seen = Arc::new(Mutex::new(None));
    let a = agent(
        AgentOptions::new(texts(&["ok"]))
            .tool(add_tool())
            .execution(Inspect(seen.clone())),
    )
    .unwrap();
    let s = AgentState::initial();
    a.generate("input text", &s).await.unwrap();
    let (agent_id, input, state_id, tools, cancelled) = seen.lock().unwrap().clone().unwrap();
    assert_eq!(agent_id, a.id());
    assert_eq!(input, "input text");
    assert_eq!(state_id, s.id());
    assert_eq!(tools, 1);
    assert!(!cancelled);
}

#[tokio::test]
async fn uap_040_loop_runs_tools_until_the_model_stops() {
    let a = agent(AgentOptions::new(calls_then_answer(2)).tool(add_tool())).unwrap();
    let r = a.generate("go", &AgentState::initial()).await.unwrap();
    assert_eq!(r.turn.text(), "done");
    assert_eq!(r.turn.tool_executions.len(), 2);
    assert_eq!(r.turn.cycles, 3);
    assert_eq!(r.turn.messages.len(), 6); // user, (assistant, results) x2, answer
}

#[tokio::test]
async fn uap_041_loop_stops_without_tool_calls_or_at_max_iterations() {
    let a = agent(AgentOptions::new(texts(&["no tools"])).tool(add_tool())).unwrap();
    let r = a.generate("go", &AgentState::initial()).await.unwrap();
    assert_eq!(r.state.step(), 1);
    let a = agent(
        AgentOptions::new(endless())
            .tool(add_tool())
            .execution(r#loop(LoopOptions {
                max_iterations: Some(5),
            })),
    )
    .unwrap();
    let r = a.generate("go", &AgentState::initial()).await.unwrap();
    assert_eq!(r.state.step(), 5);
    // The state is consistent: every tool call has its result.
    assert!(r.state.last_message().unwrap().is_tool_result());
}

/// A react model: reasoning calls answer with "reason N", action calls call `add` twice, then
/// answer.
fn react_model(action_calls: usize) -> (weft_provider::ModelReference, Log) {
    let prompts = log();
    let record = prompts.clone();
    let actions = Arc::new(AtomicUsize::new(0));
    let model = scripted::function_model(move |req: &LlmRequest| {
        let prompt = last_prompt(req);
        record.lock().unwrap().push(prompt.clone());
        if prompt == DEFAULT_REASONING_PROMPT || prompt.starts_with("THINK") {
            assert!(req.tools.is_empty(), "the reasoning phase offers no tools");
            return Ok(text(&format!("reason {}", req.messages.len())));
        }
        let i = actions.fetch_add(1, Ordering::SeqCst);
        if i < action_calls {
            Ok(call(&format!("a{i}"), "add", json!({"a": i, "b": 1})))
        } else {
            Ok(text("final answer"))
        }
    });
    (model, prompts)
}

#[tokio::test]
async fn uap_042_react_runs_reason_act_observe() {
    let (model, prompts) = react_model(1);
    let a = agent(
        AgentOptions::new(model)
            .tool(add_tool())
            .execution(react(ReactOptions::default())),
    )
    .unwrap();
    let r = a.generate("task", &AgentState::initial()).await.unwrap();
    assert_eq!(
        entries(&prompts),
        [
            DEFAULT_REASONING_PROMPT,
            DEFAULT_ACTION_PROMPT,
            DEFAULT_REASONING_PROMPT,
            DEFAULT_ACTION_PROMPT
        ]
    );
    assert_eq!(r.turn.text(), "final answer");
    assert_eq!(r.turn.tool_executions.len(), 1);
    assert_eq!(r.state.step(), 2);
}

#[tokio::test]
async fn uap_043_react_step_hooks_and_with_step() {
    let (model, _) = react_model(2);
    let l = log();
    let (l1, l2) = (l.clone(), l.clone());
    let a = agent(
        AgentOptions::new(model)
            .tool(add_tool())
            .execution(react(ReactOptions::default()))
            .strategy(
                AgentStrategy::new()
                    .on_step_start(move |step, state| {
                        assert_eq!(state.step(), step);
                        l1.lock().unwrap().push(format!("start {step}"));
                    })
                    .on_step_end(move |step, result| {
                        assert_eq!(result.state.step(), step);
                        l2.lock().unwrap().push(format!("end {step}"));
                    }),
            ),
    )
    .unwrap();
    a.generate("task", &AgentState::initial()).await.unwrap();
    assert_eq!(
        entries(&l),
        ["start 1", "end 1", "start 2", "end 2", "start 3", "end 3"]
    );
}

fn react_hooks(l: &Log) -> AgentStrategy {
    let (a, b, c) = (l.clone(), l.clone(), l.clone());
    AgentStrategy::new()
        .on_reason(move |step, reasoning| {
            a.lock().unwrap().push(format!("reason {step} {reasoning}"))
        })
        .on_act(move |step, calls| {
            b.lock()
                .unwrap()
                .push(format!("act {step} {}", calls.len()))
        })
        .on_observe(move |step, results| {
            c.lock()
                .unwrap()
                .push(format!("observe {step} {}", results[0].result))
        })
}

#[tokio::test]
async fn uap_044_react_calls_on_reason() {
    let (model, _) = react_model(0);
    let l = log();
    let a = agent(
        AgentOptions::new(model)
            .execution(react(ReactOptions::default()))
            .strategy(react_hooks(&l)),
    )
    .unwrap();
    a.generate("task", &AgentState::initial()).await.unwrap();
    assert_eq!(entries(&l), ["reason 1 reason 2"]);
}

#[tokio::test]
async fn uap_045_react_calls_on_act_with_tool_calls() {
    let (model, _) = react_model(1);
    let l = log();
    let a = agent(
        AgentOptions::new(model)
            .tool(add_tool())
            .execution(react(ReactOptions::default()))
            .strategy(react_hooks(&l)),
    )
    .unwrap();
    a.generate("task", &AgentState::initial()).await.unwrap();
    assert!(entries(&l).contains(&"act 1 1".to_owned()));
}

#[tokio::test]
async fn uap_046_react_calls_on_observe_after_tools() {
    let (model, _) = react_model(1);
    let l = log();
    let a = agent(
        AgentOptions::new(model)
            .tool(add_tool())
            .execution(react(ReactOptions::default()))
            .strategy(react_hooks(&l)),
    )
    .unwrap();
    a.generate("task", &AgentState::initial()).await.unwrap();
    let e = entries(&l);
    let act = e.iter().position(|x| x == "act 1 1").unwrap();
    let observe = e.iter().position(|x| x == "observe 1 1").unwrap();
    assert!(observe > act);
}

#[tokio::test]
async fn uap_047_react_tracks_reasoning_in_state() {
    let (model, _) = react_model(2);
    let a = agent(
        AgentOptions::new(model)
            .tool(add_tool())
            .execution(react(ReactOptions::default())),
    )
    .unwrap();
    let r = a.generate("task", &AgentState::initial()).await.unwrap();
    assert_eq!(r.state.reasoning().count(), 3);
    assert!(r.state.reasoning().all(|x| x.starts_with("reason")));
}

#[tokio::test]
async fn uap_048_react_checks_stop_condition_after_each_step() {
    let (model, _) = react_model(100);
    let checks = Arc::new(AtomicUsize::new(0));
    let c = checks.clone();
    let a = agent(
        AgentOptions::new(model)
            .tool(add_tool())
            .execution(react(ReactOptions::default()))
            .strategy(AgentStrategy::new().stop_condition(move |s| {
                c.fetch_add(1, Ordering::SeqCst);
                s.step() >= 3
            })),
    )
    .unwrap();
    let r = a.generate("task", &AgentState::initial()).await.unwrap();
    assert_eq!(r.state.step(), 3);
    assert_eq!(checks.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn uap_049_react_stops_without_tool_calls() {
    let (model, prompts) = react_model(0);
    let a = agent(
        AgentOptions::new(model)
            .tool(add_tool())
            .execution(react(ReactOptions::default())),
    )
    .unwrap();
    let r = a.generate("task", &AgentState::initial()).await.unwrap();
    assert_eq!(r.state.step(), 1);
    assert_eq!(entries(&prompts).len(), 2);
}

#[tokio::test]
async fn uap_050_react_stops_at_max_steps_only_when_finite() {
    let (model, _) = react_model(100);
    let a = agent(
        AgentOptions::new(model)
            .tool(add_tool())
            .execution(react(ReactOptions {
                max_steps: Some(4),
                ..ReactOptions::default()
            })),
    )
    .unwrap();
    let r = a.generate("task", &AgentState::initial()).await.unwrap();
    assert_eq!(r.state.step(), 4);
    let (model, _) = react_model(15);
    let a = agent(
        AgentOptions::new(model)
            .tool(add_tool())
            .execution(react(ReactOptions::default())),
    )
    .unwrap();
    let r = a.generate("task", &AgentState::initial()).await.unwrap();
    assert_eq!(r.state.step(), 16);
}

#[tokio::test]
async fn uap_051_react_has_a_configurable_reasoning_prompt() {
    assert_eq!(
        ReactOptions::default().reasoning_prompt,
        "Think about what to do next."
    );
    assert_eq!(
        ReactOptions::default().action_prompt,
        "Based on your reasoning, take action."
    );
    let (model, prompts) = react_model(0);
    let a = agent(AgentOptions::new(model).execution(react(ReactOptions {
        reasoning_prompt: "THINK HARD".into(),
        ..ReactOptions::default()
    })))
    .unwrap();
    a.generate("task", &AgentState::initial()).await.unwrap();
    assert_eq!(entries(&prompts)[0], "THINK HARD");
}

#[test]
fn uap_052_plan_max_plan_steps_defaults_to_unbounded() {
    assert_eq!(PlanOptions::default().max_plan_steps, None);
    assert_eq!(PlanOptions::default().max_replans, None);
}

#[test]
fn uap_053_plan_allow_replan_defaults_to_true() {
    assert!(PlanOptions::default().allow_replan);
}

#[test]
fn uap_054_plan_has_a_default_schema_and_plan_step_fields() {
    let schema = default_plan_schema();
    assert_eq!(schema["type"], "object");
    let item = &schema["properties"]["steps"]["items"]["properties"];
    for field in ["id", "description", "tool", "dependsOn"] {
        assert!(item.get(field).is_some(), "{field}");
    }
    let statuses: Vec<String> = [
        PlanStepStatus::Pending,
        PlanStepStatus::InProgress,
        PlanStepStatus::Completed,
        PlanStepStatus::Failed,
    ]
    .iter()
    .map(|s| {
        serde_json::to_value(s)
            .unwrap()
            .as_str()
            .unwrap()
            .to_owned()
    })
    .collect();
    assert_eq!(statuses, ["pending", "in_progress", "completed", "failed"]);
}

/// A plan model: the planning call returns `plan`, a replanning call `replan`; step calls
/// call the step's tool once (when named) then say "step ok".
fn plan_model(
    plan: serde_json::Value,
    replan: serde_json::Value,
) -> (weft_provider::ModelReference, Log) {
    let order = log();
    let record = order.clone();
    let model = scripted::function_model(move |req: &LlmRequest| {
        if req.structure.is_some() {
            let prompt = last_prompt(req);
            let body = if prompt.contains("failed") {
                &replan
            } else {
                &plan
            };
            return Ok(text(&body.to_string()));
        }
        match req.messages().last() {
            Some(Message::User(_)) => {
                let prompt = last_prompt(req);
                record.lock().unwrap().push(prompt.clone());
                if let Some(tool) = prompt.split("(use the tool ").nth(1) {
                    let tool = tool.trim_end_matches(')');
                    return Ok(call(
                        &format!("t{}", req.messages.len()),
                        tool,
                        json!({"a": 1, "b": 2}),
                    ));
                }
                Ok(text("step ok"))
            }
            _ => Ok(text("step ok")),
        }
    });
    (model, order)
}

#[tokio::test]
async fn uap_055_plan_is_produced_through_structured_output() {
    let seen = Arc::new(Mutex::new(None));
    let record = seen.clone();
    let model = scripted::function_model(move |req: &LlmRequest| {
        if req.structure.is_some() {
            *record.lock().unwrap() = req.structure.clone();
            return Ok(text(r#"{"steps": [{"id": "s1", "description": "only"}]}"#));
        }
        Ok(text("ok"))
    });
    let a = agent(AgentOptions::new(model).execution(plan(PlanOptions::default()))).unwrap();
    let r = a.generate("task", &AgentState::initial()).await.unwrap();
    assert_eq!(seen.lock().unwrap().clone(), Some(default_plan_schema()));
    assert_eq!(r.state.plan().unwrap()[0].id, "s1");
}

#[tokio::test]
async fn uap_056_plan_executes_in_topological_order() {
    let (model, order) = plan_model(
        json!({"steps": [
            {"id": "c", "description": "third", "dependsOn": ["b"]},
            {"id": "b", "description": "second", "dependsOn": ["a"]},
            {"id": "a", "description": "first"},
        ]}),
        json!({}),
    );
    let a = agent(AgentOptions::new(model).execution(plan(PlanOptions::default()))).unwrap();
    a.generate("task", &AgentState::initial()).await.unwrap();
    let executed: Vec<String> = entries(&order)
        .into_iter()
        .filter(|p| p.starts_with("Execute"))
        .collect();
    assert_eq!(
        executed,
        [
            "Execute plan step a: first",
            "Execute plan step b: second",
            "Execute plan step c: third"
        ]
    );
}

#[tokio::test]
async fn uap_057_plan_is_kept_in_state() {
    let (model, _) = plan_model(
        json!({"steps": [{"id": "a", "description": "x", "tool": "add"}]}),
        json!({}),
    );
    let a = agent(
        AgentOptions::new(model)
            .tool(add_tool())
            .execution(plan(PlanOptions::default())),
    )
    .unwrap();
    let r = a.generate("task", &AgentState::initial()).await.unwrap();
    let p = r.state.plan().unwrap();
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].tool.as_deref(), Some("add"));
    assert_eq!(r.turn.tool_executions.len(), 1);
}

#[tokio::test]
async fn uap_058_plan_updates_status_during_execution() {
    let (model, _) = plan_model(
        json!({"steps": [{"id": "a", "description": "x"}, {"id": "b", "description": "y", "dependsOn": ["a"]}]}),
        json!({}),
    );
    let statuses = log();
    let (s1, s2) = (statuses.clone(), statuses.clone());
    let fmt = |state: &AgentState| {
        state
            .plan()
            .map(|p| {
                p.iter()
                    .map(|s| format!("{}={:?}", s.id, s.status))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default()
    };
    let a = agent(
        AgentOptions::new(model)
            .execution(plan(PlanOptions::default()))
            .strategy(
                AgentStrategy::new()
                    .on_step_start(move |_, s| s1.lock().unwrap().push(format!("start {}", fmt(s))))
                    .on_step_end(move |_, r| {
                        s2.lock().unwrap().push(format!("end {}", fmt(&r.state)))
                    }),
            ),
    )
    .unwrap();
    let r = a.generate("task", &AgentState::initial()).await.unwrap();
    assert_eq!(
        entries(&statuses),
        [
            "start ",
            "end a=Pending,b=Pending",
            "start a=InProgress,b=Pending",
            "end a=Completed,b=Pending",
            "start a=Completed,b=InProgress",
            "end a=Completed,b=Completed",
        ]
    );
    assert!(
        r.state
            .plan()
            .unwrap()
            .iter()
            .all(|s| s.status == PlanStepStatus::Completed)
    );
}

#[tokio::test]
async fn uap_059_plan_replans_when_a_step_fails() {
    let (model, order) = plan_model(
        json!({"steps": [{"id": "a", "description": "break", "tool": "broken"}]}),
        json!({"steps": [{"id": "r1", "description": "recover", "tool": "add"}]}),
    );
    let a = agent(
        AgentOptions::new(model)
            .tool(add_tool())
            .tool(failing_tool("broken"))
            .execution(plan(PlanOptions::default())),
    )
    .unwrap();
    let r = a.generate("task", &AgentState::initial()).await.unwrap();
    let p = r.state.plan().unwrap();
    assert_eq!(p[0].id, "r1");
    assert_eq!(p[0].status, PlanStepStatus::Completed);
    assert!(entries(&order).iter().any(|p| p.contains("recover")));
    // Without replanning the failure ends the run, with the plan showing it.
    let (model, _) = plan_model(
        json!({"steps": [{"id": "a", "description": "break", "tool": "broken"}]}),
        json!({}),
    );
    let a = agent(
        AgentOptions::new(model)
            .tool(failing_tool("broken"))
            .execution(plan(PlanOptions {
                allow_replan: false,
                ..PlanOptions::default()
            })),
    )
    .unwrap();
    match a.generate("task", &AgentState::initial()).await {
        Err(AgentError::PlanStepFailed { step_id, state, .. }) => {
            assert_eq!(step_id, "a");
            assert_eq!(state.plan().unwrap()[0].status, PlanStepStatus::Failed);
        }
        other => panic!("{other:?}"),
    }
}

#[derive(Debug)]
struct Twice;

#[async_trait]
impl ExecutionStrategy for Twice {
    fn name(&self) -> &str {
        "twice"
    }
    async fn execute(&self, ctx: ExecutionContext) -> Result<ExecutionResult, AgentError> {
        let step = ctx.state.step() + 1;
        let state = ctx.state.with_step(step);
        ctx.strategy.step_start(step, &state);
        let first = ctx
            .llm
            .generate(&state.messages_vec(), ctx.input.clone())
            .await?;
        let state = state.with_messages(first.messages.iter().cloned());
        let second = ctx.llm.generate(&state.messages_vec(), "again").await?;
        let state = state.with_messages(second.messages.iter().cloned());
        let state = ctx.finish_step(step, &second, state).await;
        Ok(GenerateResult {
            turn: second,
            state,
        })
    }
}

#[tokio::test]
async fn uap_060_custom_strategies_are_accepted() {
    let a =
        agent(AgentOptions::new(texts(&["one", "two", "three", "four"])).execution(Twice)).unwrap();
    let r = a.generate("go", &AgentState::initial()).await.unwrap();
    assert_eq!(r.turn.text(), "two");
    assert_eq!(r.state.message_count(), 4);
    let s = a.stream("go", &r.state).result().await.unwrap();
    assert_eq!(s.turn.text(), "four");
    assert_eq!(s.state.message_count(), 8);
}

#[tokio::test]
async fn uap_141_level_2_advanced_execution() {
    let (model, _) = react_model(1);
    let a = agent(
        AgentOptions::new(model)
            .tool(add_tool())
            .execution(react(ReactOptions::default())),
    )
    .unwrap();
    assert!(a.generate("x", &AgentState::initial()).await.is_ok());
    let (model, _) = plan_model(
        json!({"steps": [{"id": "a", "description": "x"}]}),
        json!({}),
    );
    let a = agent(AgentOptions::new(model).execution(plan(PlanOptions::default()))).unwrap();
    assert!(a.generate("x", &AgentState::initial()).await.is_ok());
    let a = agent(AgentOptions::new(texts(&["1", "2"])).execution(Twice)).unwrap();
    assert!(a.generate("x", &AgentState::initial()).await.is_ok());
}

#[tokio::test]
async fn plan_rejects_a_cyclic_plan() {
    let (model, _) = plan_model(
        json!({"steps": [{"id": "a", "description": "x", "dependsOn": ["b"]}, {"id": "b", "description": "y", "dependsOn": ["a"]}]}),
        json!({}),
    );
    let a = agent(AgentOptions::new(model).execution(plan(PlanOptions::default()))).unwrap();
    let e = a.generate("x", &AgentState::initial()).await.unwrap_err();
    assert!(
        matches!(e, AgentError::InvalidPlan(ref m) if m.contains("cycle")),
        "{e}"
    );
}

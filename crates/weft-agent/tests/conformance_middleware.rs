//! UAP-1.0 §9 and §6.2: middleware, `logging()`, context-window middleware.
#![allow(clippy::unwrap_used, clippy::type_complexity)]

mod common;

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::json;
use weft_agent::middleware::{
    LogLevel, LoggingOptions, Middleware, MiddlewareContext, PruneOptions, SummarizeOptions,
    logging, prune_tool_outputs, sliding_window, summarize,
};
use weft_agent::{AgentError, AgentOptions, AgentState, GenerateResult, agent};
use weft_provider::adapters::scripted::{self, ScriptedResponse};
use weft_provider::{LlmOptions, LlmRequest, Message, llm};

use common::*;

#[derive(Debug)]
struct Named(&'static str, Log);

#[async_trait]
impl Middleware for Named {
    fn name(&self) -> &str {
        self.0
    }
    async fn before(&self, ctx: &mut MiddlewareContext) -> Result<(), AgentError> {
        self.1.lock().unwrap().push(format!("before {}", self.0));
        ctx.metadata.insert(self.0.into(), json!(true));
        Ok(())
    }
    async fn after(
        &self,
        ctx: &mut MiddlewareContext,
        result: GenerateResult,
    ) -> Result<GenerateResult, AgentError> {
        assert_eq!(ctx.metadata[self.0], json!(true));
        self.1.lock().unwrap().push(format!("after {}", self.0));
        Ok(result)
    }
}

#[derive(Debug)]
struct Defaults;

#[async_trait]
impl Middleware for Defaults {
    fn name(&self) -> &str {
        "defaults"
    }
}

#[tokio::test]
async fn uap_097_middleware_has_name_and_optional_hooks() {
    let m = Defaults;
    assert_eq!(m.name(), "defaults");
    let a = agent(AgentOptions::new(texts(&["ok"])).middleware(Defaults)).unwrap();
    assert_eq!(
        a.generate("go", &AgentState::initial())
            .await
            .unwrap()
            .turn
            .text(),
        "ok"
    );
}

#[derive(Debug)]
struct Inspect(Arc<Mutex<Option<(String, String, String)>>>);

#[async_trait]
impl Middleware for Inspect {
    fn name(&self) -> &str {
        "inspect"
    }
    async fn before(&self, ctx: &mut MiddlewareContext) -> Result<(), AgentError> {
        *self.0.lock().unwrap() = Some((
            ctx.agent.id().to_owned(),
            ctx.input.text(),
            ctx.state.id().to_owned(),
        ));
        ctx.metadata.insert("k".into(), json!(1));
        Ok(())
    }
}

#[tokio::test]
async fn uap_098_context_has_agent_input_state_metadata() {
    let seen = Arc::new(Mutex::new(None));
    let a = agent(AgentOptions::new(texts(&["ok"])).middleware(Inspect(seen.clone()))).unwrap();
    let s = AgentState::initial();
    a.generate("hello", &s).await.unwrap();
    let (agent_id, input, state_id) = seen.lock().unwrap().clone().unwrap();
    assert_eq!(agent_id, a.id());
    assert_eq!(input, "hello");
    assert_eq!(state_id, s.id());
}

#[derive(Debug)]
struct Replace;

#[async_trait]
impl Middleware for Replace {
    fn name(&self) -> &str {
        "replace"
    }
    async fn before(&self, ctx: &mut MiddlewareContext) -> Result<(), AgentError> {
        ctx.state = ctx.state.with_context([Message::user("pruned")]);
        Ok(())
    }
    async fn after(
        &self,
        _ctx: &mut MiddlewareContext,
        mut result: GenerateResult,
    ) -> Result<GenerateResult, AgentError> {
        result.state = result.state.with_metadata("afterRan", json!(true));
        Ok(result)
    }
}

#[tokio::test]
async fn uap_099_a_returned_context_replaces_the_context() {
    let seen = Arc::new(Mutex::new(0));
    let record = seen.clone();
    let model = scripted::function_model(move |req: &LlmRequest| {
        *record.lock().unwrap() = req.messages.len();
        Ok(ScriptedResponse::text("ok"))
    });
    let a = agent(AgentOptions::new(model).middleware(Replace)).unwrap();
    let s = AgentState::initial().with_messages((0..10).map(|i| Message::user(format!("{i}"))));
    let r = a.generate("go", &s).await.unwrap();
    assert_eq!(*seen.lock().unwrap(), 2);
    assert_eq!(r.state.message(0).unwrap().text(), "pruned");
}

#[tokio::test]
async fn uap_100_a_returned_result_replaces_the_result() {
    let a = agent(AgentOptions::new(texts(&["ok"])).middleware(Replace)).unwrap();
    let r = a.generate("go", &AgentState::initial()).await.unwrap();
    assert_eq!(r.state.metadata()["afterRan"], json!(true));
}

#[derive(Debug)]
struct Recover(bool);

#[async_trait]
impl Middleware for Recover {
    fn name(&self) -> &str {
        "recover"
    }
    async fn on_error(
        &self,
        ctx: &mut MiddlewareContext,
        error: &AgentError,
    ) -> Option<GenerateResult> {
        assert!(matches!(error, AgentError::Upp(_)));
        self.0.then(|| GenerateResult {
            turn: weft_provider::Turn {
                messages: vec![],
                response: weft_provider::AssistantMessage::text("fallback").into(),
                tool_executions: vec![],
                usage: Default::default(),
                cycles: 0,
                data: None,
            },
            state: ctx.state.clone(),
        })
    }
}

#[tokio::test]
async fn uap_101_on_error_may_recover_or_let_the_error_propagate() {
    let a = agent(AgentOptions::new(texts(&[])).middleware(Recover(true))).unwrap();
    assert_eq!(
        a.generate("go", &AgentState::initial())
            .await
            .unwrap()
            .turn
            .text(),
        "fallback"
    );
    let a = agent(AgentOptions::new(texts(&[])).middleware(Recover(false))).unwrap();
    assert!(a.generate("go", &AgentState::initial()).await.is_err());
}

#[tokio::test]
async fn uap_102_before_in_order_after_in_reverse() {
    let l = log();
    let a = agent(
        AgentOptions::new(texts(&["ok"]))
            .middleware(Named("first", l.clone()))
            .middleware(Named("second", l.clone()))
            .middleware(Named("third", l.clone())),
    )
    .unwrap();
    a.generate("go", &AgentState::initial()).await.unwrap();
    assert_eq!(
        entries(&l),
        [
            "before first",
            "before second",
            "before third",
            "after third",
            "after second",
            "after first"
        ]
    );
}

fn capture() -> (Log, weft_agent::middleware::Logger) {
    let lines = log();
    let sink = lines.clone();
    (
        lines,
        Arc::new(move |level: LogLevel, line: &str| {
            sink.lock()
                .unwrap()
                .push(format!("{}|{line}", level.as_str()))
        }),
    )
}

#[tokio::test]
async fn uap_103_logging_middleware_logs_runs() {
    let (lines, logger) = capture();
    let a = agent(
        AgentOptions::new(texts(&["ok"])).middleware(logging(LoggingOptions {
            logger: Some(logger),
            ..LoggingOptions::default()
        })),
    )
    .unwrap();
    a.generate("go", &AgentState::initial()).await.unwrap();
    let lines = entries(&lines);
    assert_eq!(lines.len(), 2);
    assert!(lines[0].starts_with("info|agent") && lines[0].contains("start"));
    assert!(lines[1].contains("done"));
}

#[test]
fn uap_104_logging_level_defaults_to_info() {
    assert_eq!(LoggingOptions::default().level, LogLevel::Info);
    let names: Vec<&str> = [
        LogLevel::Debug,
        LogLevel::Info,
        LogLevel::Warn,
        LogLevel::Error,
    ]
    .iter()
    .map(|l| l.as_str())
    .collect();
    assert_eq!(names, ["debug", "info", "warn", "error"]);
}

#[tokio::test]
async fn uap_105_logging_defaults_to_stdout_and_accepts_a_logger() {
    assert!(LoggingOptions::default().logger.is_none()); // None = println!
    let a = agent(AgentOptions::new(texts(&["ok"])).middleware(logging(LoggingOptions::default())))
        .unwrap();
    a.generate("go", &AgentState::initial()).await.unwrap();
    // A level above info filters the run lines out.
    let (lines, logger) = capture();
    let a = agent(
        AgentOptions::new(texts(&["ok"])).middleware(logging(LoggingOptions {
            level: LogLevel::Warn,
            logger: Some(logger),
            ..LoggingOptions::default()
        })),
    )
    .unwrap();
    a.generate("go", &AgentState::initial()).await.unwrap();
    assert!(entries(&lines).is_empty());
}

#[tokio::test]
async fn uap_106_include_messages_defaults_to_false() {
    assert!(!LoggingOptions::default().include_messages);
    let (lines, logger) = capture();
    let a = agent(
        AgentOptions::new(texts(&["secret reply"])).middleware(logging(LoggingOptions {
            logger: Some(logger.clone()),
            ..LoggingOptions::default()
        })),
    )
    .unwrap();
    a.generate("secret input", &AgentState::initial())
        .await
        .unwrap();
    assert!(entries(&lines).iter().all(|l| !l.contains("secret")));
    let (lines, logger) = capture();
    let a = agent(
        AgentOptions::new(texts(&["secret reply"])).middleware(logging(LoggingOptions {
            logger: Some(logger),
            include_messages: true,
            ..LoggingOptions::default()
        })),
    )
    .unwrap();
    a.generate("secret input", &AgentState::initial())
        .await
        .unwrap();
    let all = entries(&lines).join("\n");
    assert!(all.contains("secret input") && all.contains("secret reply"));
}

#[tokio::test]
async fn uap_107_include_timing_defaults_to_true() {
    assert!(LoggingOptions::default().include_timing);
    let (lines, logger) = capture();
    let a = agent(
        AgentOptions::new(texts(&["ok"])).middleware(logging(LoggingOptions {
            logger: Some(logger),
            ..LoggingOptions::default()
        })),
    )
    .unwrap();
    a.generate("go", &AgentState::initial()).await.unwrap();
    assert!(entries(&lines)[1].contains(" ms"));
}

#[tokio::test]
async fn uap_108_custom_middleware_is_supported() {
    let l = log();
    let a =
        agent(AgentOptions::new(texts(&["ok"])).middleware(Named("custom", l.clone()))).unwrap();
    a.generate("go", &AgentState::initial()).await.unwrap();
    assert_eq!(entries(&l), ["before custom", "after custom"]);
}

#[tokio::test]
async fn uap_143_level_4_middleware() {
    let l = log();
    let (lines, logger) = capture();
    let a = agent(
        AgentOptions::new(texts(&["ok"]))
            .middleware(logging(LoggingOptions {
                logger: Some(logger),
                ..LoggingOptions::default()
            }))
            .middleware(Named("custom", l.clone())),
    )
    .unwrap();
    a.generate("go", &AgentState::initial()).await.unwrap();
    assert_eq!(entries(&lines).len(), 2);
    assert_eq!(entries(&l).len(), 2);
}

// ----- context window (§6.2) -----

fn long_history(exchanges: usize) -> AgentState {
    let mut state = AgentState::initial();
    for i in 0..exchanges {
        let id = format!("c{i}");
        state = state.with_messages([
            Message::user(format!("q{i}")),
            Message::Assistant(
                weft_provider::AssistantMessage::new(
                    vec![],
                    vec![weft_provider::ToolCall::new(&id, "read", json!({}))],
                    Default::default(),
                )
                .unwrap(),
            ),
            Message::ToolResult(weft_provider::ToolResultMessage::new(vec![
                weft_provider::ToolResult {
                    tool_call_id: id,
                    result: json!("x".repeat(2000)),
                    is_error: false,
                },
            ])),
            Message::assistant(format!("a{i}")),
        ]);
    }
    state
}

fn request_recorder() -> (weft_provider::ModelReference, Arc<Mutex<Vec<Message>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let model = scripted::function_model(move |req: &LlmRequest| {
        *record.lock().unwrap() = req.messages().cloned().collect();
        Ok(ScriptedResponse::text("ok"))
    });
    (model, seen)
}

#[tokio::test]
async fn context_window_prune_tool_outputs() {
    let (model, seen) = request_recorder();
    let a = agent(
        AgentOptions::new(model).middleware(prune_tool_outputs(PruneOptions {
            context_limit: 4000,
            output_reserve: 0,
            protect_recent: 1500,
            ..PruneOptions::default()
        })),
    )
    .unwrap();
    let r = a.generate("go", &long_history(10)).await.unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 41);
    let cleared = seen
        .iter()
        .filter(|m| {
            m.text().is_empty() && serde_json::to_string(m).unwrap().contains("Output cleared")
        })
        .count();
    assert!(cleared >= 8, "{cleared}");
    assert_eq!(r.state.message_count(), 42);
}

#[tokio::test]
async fn context_window_sliding_window_keeps_tool_pairs() {
    let (model, seen) = request_recorder();
    let a = agent(AgentOptions::new(model).middleware(sliding_window(7))).unwrap();
    a.generate("go", &long_history(10)).await.unwrap();
    let seen = seen.lock().unwrap().clone();
    // 7 allowed: the window moves forward to the next user message (4), plus the input.
    assert_eq!(seen.len(), 5);
    assert!(seen[0].is_user());
}

#[tokio::test]
async fn context_window_summarize_with_an_llm() {
    let (model, seen) = request_recorder();
    let summarizer = llm(LlmOptions::new(texts(&["the user asked ten questions"]))).unwrap();
    let a = agent(AgentOptions::new(model).middleware(summarize(
        summarizer,
        SummarizeOptions {
            threshold_tokens: 1000,
            keep_recent: 6,
            ..SummarizeOptions::default()
        },
    )))
    .unwrap();
    a.generate("go", &long_history(10)).await.unwrap();
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen[0]
            .text()
            .starts_with("[Previous conversation summary]\nthe user asked")
    );
    assert!(seen[1].is_user());
    assert_eq!(seen.len(), 1 + 8 + 1);
}

//! The UAP-1.0 agent layer of Weft: `agent()`, the immutable [`AgentState`], execution
//! strategies (`loop`, `react`, `plan`, custom), middleware, strategy hooks, thread trees,
//! sub-agents as explicit tools, streaming, and checkpoints.
//!
//! It uses the UPP types of `weft-provider` (`Turn`, `Message`, `Tool`, `LlmOptions`,
//! `UppError`, …) directly and re-exports none of them (UAP-1.0 §2.1): import those from
//! `weft_provider`.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use serde_json::json;
//! use weft_agent::{agent, AgentOptions, AgentState};
//! use weft_provider::adapters::scripted::{self, Script, ScriptedResponse};
//! use weft_provider::Tool;
//!
//! let model = scripted::model(Script { fresh_ids: false, responses: vec![
//!     ScriptedResponse::tool_call("c1", "add", json!({"a": 2, "b": 3})),
//!     ScriptedResponse::text("2 + 3 = 5"),
//! ]});
//! let add = Tool::new("add", "Adds two integers.",
//!     json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}),
//!     |args: serde_json::Value, _ctx| async move {
//!         Ok(json!(args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)))
//!     });
//! let calculator = agent(AgentOptions::new(model).tool(add).system("You add numbers."))?;
//!
//! let s0 = AgentState::initial();
//! let result = calculator.generate("What is 2 + 3?", &s0).await?;
//! assert_eq!(result.turn.text(), "2 + 3 = 5");
//! assert_eq!(result.state.step(), 2);            // tool step + answer step
//! assert_eq!(result.state.message_count(), 4);   // user, assistant(call), results, answer
//! assert_eq!(s0.message_count(), 0);             // s0 is untouched
//! # Ok(())
//! # }
//! ```
//!
//! # Entry points (UAP-1.0 §13.3)
//!
//! | path | what |
//! |---|---|
//! | `weft_agent` | [`agent()`], [`Agent`], [`AgentOptions`], [`AgentState`], [`ThreadTree`], [`ThreadNode`] |
//! | [`execution`] | `r#loop` (`loop` is a Rust keyword), `react`, `plan`, [`ExecutionStrategy`] |
//! | [`middleware`] | [`middleware::logging()`], context-window middleware, [`middleware::Middleware`] |
//! | [`checkpoint`] | [`checkpoint::file_checkpoints()`], [`checkpoint::CheckpointStore`] |
//!
//! # Code map
//!
//! | module | what |
//! |---|---|
//! | `agent` | `agent()`, `Agent`, `generate` / `stream` / `ask` / `query`, the run pipeline |
//! | `options` | `AgentOptions` (contains the UPP `LlmOptions`, passed through unchanged) |
//! | `state` | `AgentState` (persistent vectors), JSON form, `PlanStep`, sub-agent traces |
//! | `strategy` | `ExecutionStrategy`, `ExecutionContext`, the step driver, loop / react / plan |
//! | `hooks` | `AgentStrategy` (stop condition and lifecycle hooks) |
//! | `middleware` | the `Middleware` trait, `logging`, context-window middleware |
//! | `stream` | `AgentStreamEvent`, `AgentStreamResult`, `EventSink` |
//! | `subagent` | the tool execution context, `SubagentTool`, `SubagentEmitter` |
//! | `thread_tree` | `ThreadTree`, `ThreadNode` and their JSON |
//! | `checkpoint` | `CheckpointStore`, `Checkpoint`, `FileCheckpoints`, codecs, the writer |
//!
//! # Feature flags
//!
//! | feature | default | what |
//! |---|---|---|
//! | `compression` | yes | `checkpoint::GzipCodec` (pure-Rust gzip via `flate2`/`miniz_oxide`) |
//!
//! # Limits
//!
//! None by default (UAP-1.0 §2.4): `loop()` and `react()` run until the model stops asking
//! for tools, and the agent passes an unbounded `ToolUseStrategy` to `llm()`. Set
//! `LoopOptions::max_iterations`, `ReactOptions::max_steps`, a tool strategy limit, or a
//! `stop_condition` when you want one.

mod agent;
pub mod checkpoint;
mod error;
mod hooks;
pub mod middleware;
mod options;
mod state;
mod strategy;
mod stream;
mod subagent;
mod thread_tree;

pub use agent::{Agent, AgentInput, ExecutionResult, GenerateResult, RunOptions, agent};
pub use error::{AgentError, StateError};
pub use hooks::AgentStrategy;
pub use options::AgentOptions;
pub use state::{
    AgentState, AgentStateJson, FromJsonOptions, PlanStep, PlanStepStatus, SESSION_ID_KEY,
    STATE_VERSION, SubagentExecutionTrace, ToolExecutionTrace,
};
pub use strategy::{ExecutionContext, ExecutionStrategy};
pub use stream::{
    AgentStreamEvent, AgentStreamResult, EventSink, EventSource, UapEvent, UapEventType,
};
pub use subagent::{
    ChildOutcome, ChildRunner, ChildRuns, OpenChild, SubagentEmitter, SubagentSource, SubagentTool,
    ToolExecutionContext,
};
pub use thread_tree::{ThreadNode, ThreadNodeJson, ThreadTree, ThreadTreeError, ThreadTreeJson};

/// Execution strategies (UAP-1.0 §5): `loop`, `react`, `plan`, and the trait for your own.
pub mod execution {
    pub use crate::strategy::{
        DEFAULT_ACTION_PROMPT, DEFAULT_REASONING_PROMPT, ExecutionContext, ExecutionStrategy,
        LoopOptions, LoopStrategy, PlanOptions, PlanStrategy, ReactOptions, ReactStrategy,
        StepObserver, StepOutcome, StepProgress, Steps, default_plan_schema, r#loop, plan, react,
    };
}

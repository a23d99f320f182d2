//! The tool pipeline: every call of a tool round passes one stack of layers, in one
//! documented order, whoever runs the round (a plain `llm()` loop, an agent step, a durable
//! run, a sub-agent at any depth).
//!
//! ```text
//! replay   a result recorded for this call is returned at once: nothing below runs or asks
//! validate the tool's JSON Schema                 → Refused (the model sees why, can correct)
//! policy   allow / deny / ask, by the runtime's rules
//! hooks    external pre-tool-use scripts and gates (exit 2 = deny)
//! before   ToolUseStrategy.on_before_call (may skip or replace the arguments)
//! approval a person (or the tool's approval hook) decides → Deferred when nobody can answer now
//! record   the pending record is durable before a side-effecting handler starts
//! after    ToolUseStrategy.on_after_call / on_error, around the handler
//! handler  the tool itself
//! ```
//!
//! A layer is a [`ToolLayer`]: it sees the [`Invocation`] and the rest of the stack as
//! [`Next`], and either answers ([`ToolOutcome`]) or calls `next.run(inv)`. `weft-provider`
//! supplies validate, before, the tool's own approval hook and after; the runtime adds replay,
//! policy, hooks, approval (pending decisions) and record through
//! [`crate::LlmOptions::tool_layer`]. Layers are sorted by [`Stage`] once, when the
//! [`crate::LlmInstance`] is built (layers of one stage keep the order they were added in).
//! Unknown tools and argument text that is not JSON are answered before the pipeline (there
//! is no tool to run it for).
//!
//! # Examples
//!
//! A policy layer that refuses one tool:
//!
//! ```
//! use std::sync::Arc;
//! use weft_provider::pipeline::{Invocation, Next, Stage, ToolLayer, ToolOutcome};
//! use weft_provider::tool::BoxFuture;
//!
//! struct NoDeploys;
//!
//! impl ToolLayer for NoDeploys {
//!     fn stage(&self) -> Stage {
//!         Stage::Policy
//!     }
//!     fn call<'a, 't>(&'a self, inv: &'a mut Invocation<'t>, next: Next<'a>) -> BoxFuture<'a, ToolOutcome> {
//!         if inv.tool.name == "deploy" {
//!             let reason = "deploys are not allowed here".to_owned();
//!             return Box::pin(async move { ToolOutcome::Refused { stage: Stage::Policy, reason } });
//!         }
//!         next.run(inv)
//!     }
//! }
//!
//! let options = weft_provider::LlmOptions::new(weft_provider::adapters::scripted::model(
//!     weft_provider::adapters::scripted::Script::texts(["ok"]),
//! ))
//! .tool_layer(Arc::new(NoDeploys));
//! assert_eq!(options.tool_layers.len(), 1);
//! ```

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use crate::strategy::{BeforeCall, BeforeCallResult, ToolUseStrategy};
use crate::stream::{EventDelta, StreamEvent, StreamEventType};
use crate::tool::{BoxFuture, Tool, ToolCall, ToolContext, ToolError};

/// Where a layer sits in the pipeline; the variants are in pipeline order (outermost first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stage {
    /// A recorded result is returned without running anything below.
    Replay,
    /// Arguments checked against the tool's JSON Schema.
    Validate,
    /// The runtime's policy: allow, deny or ask.
    Policy,
    /// External pre-tool-use hooks and gates.
    Hooks,
    /// `ToolUseStrategy.on_before_call`.
    Before,
    /// A person (or the tool's approval hook) decides.
    Approval,
    /// The call is made durable before its handler starts.
    Record,
    /// `ToolUseStrategy.on_after_call` / `on_error`, right around the handler.
    After,
}

impl Stage {
    /// The stage's name, as events and `weft runs show` print it.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Replay => "replay",
            Stage::Validate => "validate",
            Stage::Policy => "policy",
            Stage::Hooks => "hooks",
            Stage::Before => "before",
            Stage::Approval => "approval",
            Stage::Record => "record",
            Stage::After => "after",
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a call ended.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutcome {
    /// The tool ran (or a recorded run was replayed) and returned this value.
    Done(Value),
    /// The tool ran (or a recorded run was replayed) and failed; the model sees the error.
    Failed(ToolError),
    /// The call was not run: a stage refused it (bad arguments, policy, a hook, a person, a
    /// skip). The model sees the reason as an error result and can correct the call.
    Refused {
        /// The stage that refused.
        stage: Stage,
        /// Why, in words the model (and the user) can act on.
        reason: String,
    },
    /// The call waits for a decision nobody could give now (an approval without a person at
    /// the terminal). The step that asked for it must not go on: the run suspends and the
    /// call is asked again, with the decision, when it resumes.
    Deferred {
        /// What the call waits for (e.g. `approval of run_command (decision d-3f2a)`).
        reason: String,
    },
}

impl ToolOutcome {
    /// The result the model sees, and whether it is an error.
    pub fn to_result(&self) -> (Value, bool) {
        match self {
            ToolOutcome::Done(value) => (value.clone(), false),
            ToolOutcome::Failed(error) => (Value::String(error.message.clone()), true),
            ToolOutcome::Refused { reason, .. } | ToolOutcome::Deferred { reason } => {
                (Value::String(reason.clone()), true)
            }
        }
    }

    /// [`ToolOutcome::to_result`] taking the outcome: the value moves instead of being copied.
    pub fn into_result(self) -> (Value, bool) {
        match self {
            ToolOutcome::Done(value) => (value, false),
            ToolOutcome::Failed(error) => (Value::String(error.message), true),
            ToolOutcome::Refused { reason, .. } | ToolOutcome::Deferred { reason } => {
                (Value::String(reason), true)
            }
        }
    }
}

/// Something that emits the round's stream events (only while streaming).
pub type EventEmitter<'a> = Option<&'a (dyn Fn(StreamEvent) + Sync)>;

/// One call on its way through the pipeline.
pub struct Invocation<'t> {
    /// The tool called.
    pub tool: &'t Tool,
    /// The call as the model sent it.
    pub call: &'t ToolCall,
    /// Every call of the model's response this call came with, in the model's order
    /// (empty when the call was run on its own).
    pub round: &'t [ToolCall],
    /// The call's index in [`Invocation::round`].
    pub index: usize,
    /// The arguments the handler will run with (`on_before_call` may replace them).
    pub arguments: Value,
    /// The context handed to the tool (call id, cancellation, extensions).
    pub context: ToolContext,
    /// A stable key for this call within its run, set by an outer stage (the runtime's
    /// replay stage sets the call's position, `SCOPE@N#I`) for the stages below it.
    pub key: Option<String>,
    /// The approval decision taken for this call, when a stage asked for one.
    pub approved: Option<bool>,
    /// Whether the handler started (false for replayed, refused and deferred calls).
    pub ran: bool,
    pub(crate) events: EventEmitter<'t>,
    /// Set when the generation must be aborted (a failing approval hook, UPP-125).
    pub(crate) abort: Option<String>,
}

impl fmt::Debug for Invocation<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Invocation")
            .field("tool", &self.tool.name)
            .field("call", &self.call.tool_call_id)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl<'t> Invocation<'t> {
    /// A call of `tool` with the model's `call`, before any stage ran.
    pub fn new(tool: &'t Tool, call: &'t ToolCall, context: ToolContext) -> Self {
        Invocation {
            tool,
            call,
            round: &[],
            index: 0,
            arguments: call.arguments.clone(),
            context,
            key: None,
            approved: None,
            ran: false,
            events: None,
            abort: None,
        }
    }

    /// This call as call `index` of the model's response `round`.
    pub(crate) fn in_round(mut self, round: &'t [ToolCall], index: usize) -> Self {
        self.round = round;
        self.index = index;
        self
    }

    pub(crate) fn with_events(mut self, events: EventEmitter<'t>) -> Self {
        self.events = events;
        self
    }
}

/// A stage of the pipeline.
pub trait ToolLayer: Send + Sync {
    /// Where the layer sits.
    fn stage(&self) -> Stage;

    /// Handles `inv`: answer with an outcome, or pass it on with `next.run(inv)`.
    fn call<'a, 't>(
        &'a self,
        inv: &'a mut Invocation<'t>,
        next: Next<'a>,
    ) -> BoxFuture<'a, ToolOutcome>;

    /// The stage a sub-agent's tool calls pass in its place (`None`: this stage is the
    /// parent's own, e.g. its durable record). Policy stages return themselves, so a
    /// runtime's policy binds at every sub-agent depth.
    fn for_child(&self) -> Option<Arc<dyn ToolLayer>> {
        None
    }
}

impl fmt::Debug for dyn ToolLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ToolLayer({})", self.stage())
    }
}

/// The rest of the pipeline below a layer (ending with the tool's handler).
#[derive(Clone, Copy)]
pub struct Next<'a> {
    layers: &'a [Arc<dyn ToolLayer>],
}

impl fmt::Debug for Next<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.layers.iter().map(|l| l.stage()))
            .finish()
    }
}

impl<'a> Next<'a> {
    /// Runs the rest of the pipeline.
    pub fn run<'b, 't>(self, inv: &'b mut Invocation<'t>) -> BoxFuture<'b, ToolOutcome>
    where
        'a: 'b,
    {
        match self.layers.split_first() {
            Some((layer, rest)) => layer.call(inv, Next { layers: rest }),
            None => Box::pin(handler(inv)),
        }
    }
}

/// The innermost stage: the tool's own code.
async fn handler(inv: &mut Invocation<'_>) -> ToolOutcome {
    inv.ran = true;
    emit(inv, StreamEventType::ToolExecutionStart, None);
    match inv
        .tool
        .run(inv.arguments.clone(), inv.context.clone())
        .await
    {
        Ok(value) => ToolOutcome::Done(value),
        Err(error) => ToolOutcome::Failed(error),
    }
}

pub(crate) fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Emits a tool-execution event for `inv`, when the round streams.
pub(crate) fn emit(inv: &Invocation<'_>, event_type: StreamEventType, end: Option<(&Value, bool)>) {
    emit_for(inv.events, inv.call, event_type, end);
}

/// Emits a tool-execution event for `call` to `events`, when there is a sink.
pub(crate) fn emit_for(
    events: EventEmitter<'_>,
    call: &ToolCall,
    event_type: StreamEventType,
    end: Option<(&Value, bool)>,
) {
    if let Some(events) = events {
        events(StreamEvent {
            event_type,
            index: 0,
            delta: EventDelta {
                tool_call_id: Some(call.tool_call_id.clone()),
                tool_name: Some(call.tool_name.clone()),
                result: end.map(|(value, _)| value.clone()),
                is_error: end.map(|(_, is_error)| is_error),
                timestamp: Some(now_ms()),
                ..EventDelta::default()
            },
        });
    }
}

/// The layers of one `llm()` instance, sorted by stage.
#[derive(Clone, Default)]
pub(crate) struct Pipeline {
    layers: Arc<[Arc<dyn ToolLayer>]>,
    /// What it was built from, to rebuild it with inherited stages.
    validate: bool,
    extra: Arc<[Arc<dyn ToolLayer>]>,
}

impl fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.layers.iter().map(|l| l.stage()))
            .finish()
    }
}

impl Pipeline {
    /// The built-in stages (validation when asked, the strategy's hooks, the tools' approval
    /// hooks) and the caller's, in stage order.
    pub(crate) fn new(
        validate: bool,
        strategy: &ToolUseStrategy,
        extra: &[Arc<dyn ToolLayer>],
    ) -> Self {
        let mut layers: Vec<Arc<dyn ToolLayer>> = Vec::with_capacity(extra.len() + 4);
        // A stage with nothing to do is left out: each layer that runs costs a call (and the
        // after stage a boxed future) per tool call.
        if validate {
            layers.push(Arc::new(ValidateLayer));
        }
        if strategy.has_before_hooks() {
            layers.push(Arc::new(BeforeLayer(strategy.clone())));
        }
        layers.push(Arc::new(ApprovalHookLayer));
        if strategy.has_after_hooks() {
            layers.push(Arc::new(AfterLayer(strategy.clone())));
        }
        layers.extend(extra.iter().cloned());
        // Stable: layers of one stage keep their order (built-ins first).
        layers.sort_by_key(|l| l.stage());
        Pipeline {
            layers: layers.into(),
            validate,
            extra: extra.into(),
        }
    }

    /// This pipeline with `inherited` stages added (a sub-agent's, from its parent).
    pub(crate) fn with_inherited(
        &self,
        strategy: &ToolUseStrategy,
        inherited: &[Arc<dyn ToolLayer>],
    ) -> Self {
        let mut extra: Vec<Arc<dyn ToolLayer>> = self.extra.to_vec();
        extra.extend(inherited.iter().cloned());
        Pipeline::new(self.validate, strategy, &extra)
    }

    /// The stages a sub-agent's calls must pass (see [`ToolLayer::for_child`]).
    pub(crate) fn child_layers(&self) -> Vec<Arc<dyn ToolLayer>> {
        self.extra.iter().filter_map(|l| l.for_child()).collect()
    }

    /// Runs `inv` through every stage.
    pub(crate) async fn run(&self, inv: &mut Invocation<'_>) -> ToolOutcome {
        Next {
            layers: &self.layers,
        }
        .run(inv)
        .await
    }
}

/// Checks the arguments against the tool's schema.
struct ValidateLayer;

impl ToolLayer for ValidateLayer {
    fn stage(&self) -> Stage {
        Stage::Validate
    }

    fn call<'a, 't>(
        &'a self,
        inv: &'a mut Invocation<'t>,
        next: Next<'a>,
    ) -> BoxFuture<'a, ToolOutcome> {
        match inv.tool.schema_problems(&inv.arguments) {
            Some(problems) => {
                let reason = format!(
                    "the arguments of this call to {} do not match its parameters schema: {problems}; call it \
                     again with corrected arguments",
                    inv.tool.name
                );
                Box::pin(async move {
                    ToolOutcome::Refused {
                        stage: Stage::Validate,
                        reason,
                    }
                })
            }
            None => next.run(inv),
        }
    }
}

/// `on_tool_call` and `on_before_call` (UPP-1.2 §10.5).
struct BeforeLayer(ToolUseStrategy);

impl ToolLayer for BeforeLayer {
    fn stage(&self) -> Stage {
        Stage::Before
    }

    fn call<'a, 't>(
        &'a self,
        inv: &'a mut Invocation<'t>,
        next: Next<'a>,
    ) -> BoxFuture<'a, ToolOutcome> {
        self.0.fire_tool_call(inv.tool, &inv.arguments);
        match self.0.before_call(inv.tool, &inv.arguments) {
            BeforeCall::Proceed => next.run(inv),
            BeforeCall::Skip | BeforeCall::Result(BeforeCallResult { proceed: false, .. }) => {
                let reason = format!(
                    "tool call {} was skipped by the tool strategy",
                    inv.call.tool_call_id
                );
                Box::pin(async move {
                    ToolOutcome::Refused {
                        stage: Stage::Before,
                        reason,
                    }
                })
            }
            BeforeCall::Result(BeforeCallResult {
                proceed: true,
                params,
            }) => {
                if let Some(params) = params {
                    inv.arguments = params;
                }
                next.run(inv)
            }
        }
    }
}

/// The tool's own approval hook (UPP-1.2 §10.3): yes runs it, no refuses it; a failing hook
/// aborts the generation (UPP-125: its error propagates to the caller).
struct ApprovalHookLayer;

impl ToolLayer for ApprovalHookLayer {
    fn stage(&self) -> Stage {
        Stage::Approval
    }

    fn call<'a, 't>(
        &'a self,
        inv: &'a mut Invocation<'t>,
        next: Next<'a>,
    ) -> BoxFuture<'a, ToolOutcome> {
        if !inv.tool.requires_approval() {
            return next.run(inv);
        }
        Box::pin(async move {
            match inv.tool.approve(&inv.arguments).await {
                Ok(true) => {
                    inv.approved = Some(true);
                    next.run(inv).await
                }
                Ok(false) => {
                    inv.approved = Some(false);
                    ToolOutcome::Refused {
                        stage: Stage::Approval,
                        reason: format!("the user did not approve running {}", inv.tool.name),
                    }
                }
                Err(error) => {
                    let reason = format!(
                        "the approval hook of tool {} failed: {}",
                        inv.tool.name, error.message
                    );
                    inv.abort = Some(reason.clone());
                    ToolOutcome::Refused {
                        stage: Stage::Approval,
                        reason,
                    }
                }
            }
        })
    }
}

/// `on_after_call` and `on_error` (UPP-1.2 §10.5), right around the handler.
struct AfterLayer(ToolUseStrategy);

impl ToolLayer for AfterLayer {
    fn stage(&self) -> Stage {
        Stage::After
    }

    fn call<'a, 't>(
        &'a self,
        inv: &'a mut Invocation<'t>,
        next: Next<'a>,
    ) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let outcome = next.run(inv).await;
            match &outcome {
                ToolOutcome::Done(value) => {
                    match self.0.after_call(inv.tool, &inv.arguments, value) {
                        Some(replaced) => ToolOutcome::Done(replaced.result),
                        None => outcome,
                    }
                }
                ToolOutcome::Failed(error) => {
                    self.0.fire_error(inv.tool, &inv.arguments, error);
                    outcome
                }
                _ => outcome,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::atomic::{AtomicUsize, Ordering};

    use serde_json::json;
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::tool::Extensions;

    fn context() -> ToolContext {
        ToolContext {
            tool_call_id: "c1".into(),
            signal: CancellationToken::new(),
            extensions: Extensions::default(),
        }
    }

    fn echo() -> Tool {
        Tool::new(
            "echo",
            "Echoes.",
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
            |args: Value, _ctx: ToolContext| async move { Ok(args) },
        )
    }

    /// A policy stage that counts the calls it sees and lets them pass; `child` says whether
    /// a sub-agent's calls pass it too.
    struct Counting {
        seen: Arc<AtomicUsize>,
        child: bool,
    }

    impl ToolLayer for Counting {
        fn stage(&self) -> Stage {
            Stage::Policy
        }

        fn call<'a, 't>(
            &'a self,
            inv: &'a mut Invocation<'t>,
            next: Next<'a>,
        ) -> BoxFuture<'a, ToolOutcome> {
            self.seen.fetch_add(1, Ordering::SeqCst);
            next.run(inv)
        }

        fn for_child(&self) -> Option<Arc<dyn ToolLayer>> {
            self.child.then(|| {
                Arc::new(Counting {
                    seen: self.seen.clone(),
                    child: true,
                }) as Arc<dyn ToolLayer>
            })
        }
    }

    #[test]
    fn an_outcome_is_the_result_the_model_reads() {
        let outcomes = [
            (ToolOutcome::Done(json!({"n": 1})), (json!({"n": 1}), false)),
            (
                ToolOutcome::Failed(ToolError::new("disk full")),
                (json!("disk full"), true),
            ),
            (
                ToolOutcome::Refused {
                    stage: Stage::Policy,
                    reason: "not allowed".into(),
                },
                (json!("not allowed"), true),
            ),
            (
                ToolOutcome::Deferred {
                    reason: "approval of rm".into(),
                },
                (json!("approval of rm"), true),
            ),
        ];
        for (outcome, expected) in outcomes {
            assert_eq!(outcome.to_result(), expected, "{outcome:?}");
            assert_eq!(outcome.into_result(), expected);
        }
    }

    #[tokio::test]
    async fn a_sub_agents_pipeline_keeps_its_parents_stages_and_validation() {
        let strategy = ToolUseStrategy::default();
        let seen = Arc::new(AtomicUsize::new(0));
        let parent_only = Arc::new(AtomicUsize::new(0));
        let layers: Vec<Arc<dyn ToolLayer>> = vec![
            Arc::new(Counting {
                seen: seen.clone(),
                child: true,
            }),
            Arc::new(Counting {
                seen: parent_only.clone(),
                child: false,
            }),
        ];
        let parent = Pipeline::new(true, &strategy, &layers);
        assert_eq!(
            format!("{parent:?}"),
            "[Validate, Policy, Policy, Approval]"
        );
        // Only the stages that bind a sub-agent are handed down.
        let inherited = parent.child_layers();
        assert_eq!(inherited.len(), 1);
        let child = Pipeline::new(true, &strategy, &[]).with_inherited(&strategy, &inherited);
        assert_eq!(format!("{child:?}"), "[Validate, Policy, Approval]");

        let tool = echo();
        let good = ToolCall::new("c1", "echo", json!({"n": 1}));
        let mut inv = Invocation::new(&tool, &good, context());
        assert_eq!(
            child.run(&mut inv).await,
            ToolOutcome::Done(json!({"n": 1}))
        );
        assert!(inv.ran);
        assert_eq!(seen.load(Ordering::SeqCst), 1);
        assert_eq!(parent_only.load(Ordering::SeqCst), 0);
        // The child validates as its parent does: a bad call never reaches the stage below.
        let bad = ToolCall::new("c2", "echo", json!({"n": "one"}));
        let mut inv = Invocation::new(&tool, &bad, context());
        let outcome = child.run(&mut inv).await;
        assert!(
            matches!(
                outcome,
                ToolOutcome::Refused {
                    stage: Stage::Validate,
                    ..
                }
            ),
            "{outcome:?}"
        );
        assert!(!inv.ran);
        assert_eq!(seen.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn the_debug_forms_name_the_call_and_the_stages() {
        let tool = echo();
        let call = ToolCall::new("c7", "echo", json!({}));
        let mut inv = Invocation::new(&tool, &call, context());
        inv.key = Some("t@1#0".into());
        let text = format!("{inv:?}");
        assert!(text.starts_with("Invocation {"), "{text}");
        assert!(
            text.contains("\"echo\"") && text.contains("\"c7\"") && text.contains("t@1#0"),
            "{text}"
        );
        let layer: Arc<dyn ToolLayer> = Arc::new(ValidateLayer);
        assert_eq!(format!("{layer:?}"), "ToolLayer(validate)");
        let layers = [layer];
        assert_eq!(format!("{:?}", Next { layers: &layers }), "[Validate]");
    }

    #[test]
    fn a_tool_event_is_stamped_with_the_time_it_happened() {
        let before = chrono::Utc::now().timestamp_millis();
        let events = std::sync::Mutex::new(Vec::new());
        let sink = |event: StreamEvent| events.lock().unwrap().push(event);
        let call = ToolCall::new("c1", "echo", json!({}));
        emit_for(
            Some(&sink),
            &call,
            StreamEventType::ToolExecutionEnd,
            Some((&json!(3), false)),
        );
        let after = chrono::Utc::now().timestamp_millis();
        let events = events.into_inner().unwrap();
        let [event] = events.as_slice() else {
            panic!("{events:?}")
        };
        let at = event.delta.timestamp.unwrap();
        assert!((before..=after).contains(&at), "{before} {at} {after}");
        assert_eq!(event.delta.tool_call_id.as_deref(), Some("c1"));
        assert_eq!(event.delta.result, Some(json!(3)));
        assert_eq!(event.delta.is_error, Some(false));
    }
}

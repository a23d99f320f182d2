//! OpenTelemetry spans of a run ([`weft_otel`], the GenAI semantic conventions), when the
//! process installed a tracer (`weft` does when an OTLP endpoint is configured):
//!
//! * `invoke_agent {agent}` — the run in this process (`RunSpan`, opened and ended by the
//!   run's drive). Its W3C `traceparent` is stored in the run's spec
//!   ([`crate::spec::RunSpec::trace`]) in the same write that marks the run running, so a
//!   process that resumes the run (after a crash, an approval) opens its own `invoke_agent`
//!   span as a **child** of the stored one: one trace per run, one `invoke_agent` per
//!   process, the resumed ones nested under the first;
//! * `chat {model}` — each model call that reaches the model (a recorded response replayed
//!   by a resume is not a call), child of the run's span (`ChatSpan`, opened by
//!   [`crate::recorded`]);
//! * `execute_tool {tool}` — each tool call whose handler runs, child of the run's span
//!   (`TraceLayer`, a stage of the tool pipeline just inside `record`: replayed, refused
//!   and deferred calls run nothing and get no span; a failed call's span has `error.type`);
//! * `invoke_agent {child}` — a child run started by a tool call (a subagent), child of that
//!   call's `execute_tool` span and parent of the child's `chat` and `execute_tool` spans
//!   (opened by [`crate::child::ChildRun::open`]; the trace stage hands the call's span to the
//!   tool as [`crate::child::ToolSpan`]).
//!
//! Without a tracer, [`weft_otel::enabled`] is false and each of these is one branch.

use std::sync::Arc;

use serde_json::{Value, json};
use weft_otel::semconv::{
    ERROR_OTHER, GEN_AI_INPUT_MESSAGES, GEN_AI_OUTPUT_MESSAGES, GEN_AI_PROVIDER_NAME,
    GEN_AI_REQUEST_MODEL, GEN_AI_SYSTEM_INSTRUCTIONS, GEN_AI_TOOL_CALL_ARGUMENTS,
    GEN_AI_TOOL_CALL_RESULT, WEFT_RUN_END, WEFT_RUN_ID, WEFT_RUN_RESUMED, provider_name,
};
use weft_otel::{GenAiSpan, SpanParent};
use weft_provider::pipeline::{Invocation, Next, Stage, ToolLayer, ToolOutcome};
use weft_provider::tool::BoxFuture;
use weft_provider::{ContentBlock, LlmRequest, LlmResponse, Message, UppError};
use weft_store::RunRecord;

use crate::ledger::RunContext;
use crate::run::RunEnd;
use crate::spec::{Program, RunSpec};

/// The `invoke_agent` span of a run in this process.
#[derive(Debug)]
pub(crate) struct RunSpan {
    span: GenAiSpan,
    /// The `traceparent` to store with the run (a run with none stored yet).
    new_traceparent: Option<String>,
}

impl RunSpan {
    /// Opens the span of `record`'s run: a child of the context stored with the run, or the
    /// root of a new trace.
    pub(crate) fn open(spec: &RunSpec, record: &RunRecord, resumed: bool) -> RunSpan {
        if !weft_otel::enabled() {
            return RunSpan {
                span: GenAiSpan::inert(),
                new_traceparent: None,
            };
        }
        let span = GenAiSpan::invoke_agent(
            spec.role(),
            &record.agent_id,
            &record.thread_id,
            spec.trace.as_deref(),
        );
        span.set(WEFT_RUN_ID, record.run_id.clone());
        span.set(WEFT_RUN_RESUMED, resumed);
        if let Program::Agent(agent) = &spec.program
            && let Some((provider, model)) = agent.model.split_once(':')
        {
            span.set(GEN_AI_PROVIDER_NAME, provider_name(provider).to_owned());
            span.set(GEN_AI_REQUEST_MODEL, model.to_owned());
        }
        let new_traceparent = if spec.trace.is_none() {
            span.traceparent()
        } else {
            None
        };
        RunSpan {
            span,
            new_traceparent,
        }
    }

    /// Stores the span's context in the run's stored spec when the run has none yet (the
    /// caller writes the record next).
    pub(crate) fn stamp(&self, record: &mut RunRecord) {
        if let (Some(traceparent), Value::Object(spec)) = (&self.new_traceparent, &mut record.spec)
        {
            spec.insert("trace".to_owned(), Value::String(traceparent.clone()));
        }
    }

    /// The parent of the run's `chat` and `execute_tool` spans.
    pub(crate) fn parent(&self) -> SpanParent {
        self.span.parent()
    }

    /// Ends the span with how the run ended in this process.
    pub(crate) fn end(self, end: &RunEnd) {
        if !self.span.is_recording() {
            return;
        }
        let name = match end {
            RunEnd::Completed { .. } => "completed",
            RunEnd::Failed { .. } => "failed",
            RunEnd::Interrupted => "interrupted",
            RunEnd::NeedsApproval { .. } => "needs_approval",
            RunEnd::AwaitingDecision { .. } => "suspended",
        };
        self.span.set(WEFT_RUN_END, name);
        if let RunEnd::Failed { error } = end {
            self.span.set_error(ERROR_OTHER, error);
        }
        self.span.end();
    }
}

/// The `chat` span of one model call.
#[derive(Debug)]
pub(crate) struct ChatSpan(GenAiSpan);

impl ChatSpan {
    /// Opens the span of `request` to `provider`'s `model` in `run`.
    pub(crate) fn open(
        run: &RunContext,
        provider: &str,
        model: &str,
        request: &LlmRequest,
    ) -> ChatSpan {
        if !weft_otel::enabled() {
            return ChatSpan(GenAiSpan::inert());
        }
        let span = GenAiSpan::chat(run.trace(), provider, model, Some(run.thread_id()));
        span.set_content(GEN_AI_INPUT_MESSAGES, || {
            input_messages(&request.messages).to_string()
        });
        if let Some(system) = &request.system {
            span.set_content(GEN_AI_SYSTEM_INSTRUCTIONS, || {
                json!([{"type": "text", "content": system}]).to_string()
            });
        }
        ChatSpan(span)
    }

    /// Ends the span with the call's outcome.
    pub(crate) fn end(&self, provider: &str, model: &str, result: Result<&LlmResponse, &UppError>) {
        let span = &self.0;
        if !span.is_recording() {
            return;
        }
        match result {
            Ok(response) => {
                let answered = response
                    .message
                    .metadata
                    .as_ref()
                    .and_then(|m| m.get(provider))
                    .and_then(|m| m.get("model"))
                    .and_then(Value::as_str)
                    .unwrap_or(model);
                span.set_response(
                    Some(answered),
                    response.usage.input_tokens,
                    response.usage.output_tokens,
                    &response.stop_reason,
                );
                span.set_content(GEN_AI_OUTPUT_MESSAGES, || {
                    json!([{
                        "role": "assistant",
                        "parts": assistant_parts(&response.message.content, &response.message.tool_calls),
                        "finish_reason": response.stop_reason,
                    }])
                    .to_string()
                });
            }
            Err(error) => {
                // The UPP code (`RATE_LIMITED`, `PROVIDER_ERROR`, …): low cardinality.
                let code = serde_json::to_value(error.code)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_else(|| ERROR_OTHER.to_owned());
                span.set_error(&code, &error.to_string());
            }
        }
        span.end();
    }
}

fn text_parts(content: &[ContentBlock]) -> Vec<Value> {
    content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text(t) => Some(json!({"type": "text", "content": t.text})),
            ContentBlock::Reasoning(r) => {
                serde_json::to_value(r).ok().map(|v| {
                    json!({"type": "reasoning", "content": v.get("text").cloned().unwrap_or(Value::Null)})
                })
            }
            _ => None,
        })
        .collect()
}

fn assistant_parts(content: &[ContentBlock], calls: &[weft_provider::ToolCall]) -> Vec<Value> {
    let mut parts = text_parts(content);
    parts.extend(calls.iter().map(|c| {
        json!({"type": "tool_call", "id": c.tool_call_id, "name": c.tool_name, "arguments": c.arguments})
    }));
    parts
}

/// The conversation in the conventions' input messages form (`role`, `parts`).
fn input_messages<M: std::borrow::Borrow<Message>>(messages: &[M]) -> Value {
    Value::Array(
        messages
            .iter()
            .map(|message| match message.borrow() {
                Message::User(user) => json!({"role": "user", "parts": text_parts(&user.content)}),
                Message::Assistant(a) => {
                    json!({"role": "assistant", "parts": assistant_parts(&a.content, &a.tool_calls)})
                }
                Message::ToolResult(results) => json!({"role": "tool", "parts": results.results.iter().map(|r| json!({
                    "type": "tool_call_response", "id": r.tool_call_id, "result": r.result})).collect::<Vec<_>>()}),
            })
            .collect(),
    )
}

/// The `execute_tool` stage: a span around each call whose handler runs (inside `record`,
/// so replayed, refused and deferred calls get none), with `error.type` when it fails.
#[derive(Debug)]
pub(crate) struct TraceLayer(pub(crate) Arc<RunContext>);

impl ToolLayer for TraceLayer {
    fn stage(&self) -> Stage {
        Stage::Record
    }

    fn for_child(&self) -> Option<Arc<dyn ToolLayer>> {
        // A sub-agent's tool calls are the run's too.
        Some(Arc::new(TraceLayer(self.0.clone())))
    }

    fn call<'a, 't>(
        &'a self,
        inv: &'a mut Invocation<'t>,
        next: Next<'a>,
    ) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let span = GenAiSpan::execute_tool(
                self.0.trace(),
                &inv.tool.name,
                &inv.call.tool_call_id,
                &inv.tool.description,
            );
            span.set_content(GEN_AI_TOOL_CALL_ARGUMENTS, || inv.arguments.to_string());
            // A child run started by the tool nests its `invoke_agent` span here.
            inv.context
                .extensions
                .insert(crate::child::ToolSpan(span.parent()));
            let outcome = next.run(inv).await;
            match &outcome {
                ToolOutcome::Done(value) => {
                    span.set_content(GEN_AI_TOOL_CALL_RESULT, || value.to_string());
                }
                ToolOutcome::Failed(error) => {
                    span.set_content(GEN_AI_TOOL_CALL_RESULT, || {
                        Value::String(error.message.clone()).to_string()
                    });
                    span.set_error("tool_error", &error.message);
                }
                ToolOutcome::Refused { stage, reason } => {
                    span.set_error(&format!("refused_{}", stage.as_str()), reason);
                }
                ToolOutcome::Deferred { .. } => span.set("weft.tool.deferred", true),
            }
            span.end();
            outcome
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversations_map_to_the_input_messages_schema() {
        let messages = vec![
            Message::user("Weather in Paris?"),
            Message::assistant("rainy"),
        ];
        let value = input_messages(&messages);
        assert_eq!(
            value,
            json!([
                {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]},
                {"role": "assistant", "parts": [{"type": "text", "content": "rainy"}]},
            ])
        );
    }
}

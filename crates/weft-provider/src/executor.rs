//! Runs one round of tool calls (UPP-1.2 §10.4, §10.8; UAP-1.0 §8.5–§8.6).
//!
//! Calls run in parallel by default, within one task (no spawn per call). Ordering
//! constraints hold in every mode: a `sequential` tool waits for every earlier call and every
//! later call waits for it; `depends_on` waits for all calls of the named tools; a call's
//! `after` waits for the named call ids. A constraint cycle fails the calls in it with an
//! error result instead of hanging. Results are returned in call order.

use std::collections::HashMap;
use std::time::Instant;

use futures_util::StreamExt as _;
use futures_util::stream::FuturesUnordered;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::error::{ErrorCode, UppError};
use crate::pipeline::{self, Invocation, Pipeline, ToolOutcome};
use crate::stream::{StreamEvent, StreamEventType};
use crate::tool::{Extensions, Tool, ToolCall, ToolContext, ToolExecution, ToolResult};

/// How many calls of one round may run at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExecutionMode {
    /// All independent calls at once (the UPP and UAP default).
    #[default]
    Parallel,
    /// One call at a time, in the model's order (the Standard Agents default).
    Sequential,
    /// At most this many at once (the runtime spec's `batch` mode with `maxParallel`).
    Limited(usize),
}

pub(crate) struct RoundContext<'a> {
    pub(crate) tools: &'a [Tool],
    pub(crate) pipeline: &'a Pipeline,
    pub(crate) signal: &'a CancellationToken,
    pub(crate) extensions: &'a Extensions,
    pub(crate) mode: ExecutionMode,
    pub(crate) provider: &'a str,
    pub(crate) events: Option<&'a (dyn Fn(StreamEvent) + Sync)>,
}

pub(crate) struct CallOutcome {
    pub(crate) result: ToolResult,
    pub(crate) execution: Option<ToolExecution>,
    /// The call waits for a decision: the step must not go on.
    pub(crate) deferred: bool,
}

/// Runs every call of a round through the pipeline. `Err` only for abort (`CANCELLED`) or a
/// failing approval hook (UPP-125).
pub(crate) async fn run_round(
    calls: &[ToolCall],
    cx: &RoundContext<'_>,
) -> Result<Vec<CallOutcome>, UppError> {
    if let [_] = calls {
        // One call (most rounds): no ordering to work out and nothing to run beside it.
        if cx.signal.is_cancelled() {
            return Err(UppError::cancelled(cx.provider, crate::Modality::Llm));
        }
        let outcome = tokio::select! {
            biased;
            () = cx.signal.cancelled() => return Err(UppError::cancelled(cx.provider, crate::Modality::Llm)),
            outcome = run_call(calls, 0, cx) => outcome?,
        };
        return Ok(vec![outcome]);
    }
    let prerequisites = prerequisites(calls, cx.tools, cx.mode);
    let mut outcomes: Vec<Option<CallOutcome>> = (0..calls.len()).map(|_| None).collect();
    let mut remaining: Vec<usize> = (0..calls.len()).collect();
    let limit = match cx.mode {
        ExecutionMode::Parallel => usize::MAX,
        ExecutionMode::Sequential => 1,
        ExecutionMode::Limited(n) => n.max(1),
    };
    let mut running = FuturesUnordered::new();
    loop {
        if cx.signal.is_cancelled() {
            return Err(UppError::cancelled(cx.provider, crate::Modality::Llm));
        }
        // Start every call whose prerequisites are done, up to the limit, in call order.
        let mut started = Vec::new();
        for &i in &remaining {
            if running.len() + started.len() >= limit {
                break;
            }
            if prerequisites[i].iter().all(|&p| outcomes[p].is_some()) {
                started.push(i);
            }
        }
        remaining.retain(|i| !started.contains(i));
        for i in started {
            running.push(async move { (i, run_call(calls, i, cx).await) });
        }
        if running.is_empty() {
            // Nothing runs and nothing can start: what is left is a constraint cycle.
            for i in remaining.drain(..) {
                outcomes[i] = Some(error_outcome(
                    &calls[i],
                    format!(
                        "tool call {} was not run: its ordering constraints (sequential, dependsOn, after) form a cycle",
                        calls[i].tool_call_id
                    ),
                ));
            }
            break;
        }
        let next = tokio::select! {
            biased;
            () = cx.signal.cancelled() => return Err(UppError::cancelled(cx.provider, crate::Modality::Llm)),
            next = running.next() => next,
        };
        if let Some((i, outcome)) = next {
            outcomes[i] = Some(outcome?);
        }
        if remaining.is_empty() && running.is_empty() {
            break;
        }
    }
    Ok(outcomes.into_iter().flatten().collect())
}

/// For each call, the indices of the calls that must finish first.
fn prerequisites(calls: &[ToolCall], tools: &[Tool], mode: ExecutionMode) -> Vec<Vec<usize>> {
    let tool_of = |name: &str| tools.iter().find(|t| t.name == name);
    let index_of_id: HashMap<&str, usize> = calls
        .iter()
        .enumerate()
        .map(|(i, c)| (c.tool_call_id.as_str(), i))
        .collect();
    let sequential: Vec<bool> = calls
        .iter()
        .map(|c| tool_of(&c.tool_name).is_some_and(|t| t.sequential))
        .collect();
    calls
        .iter()
        .enumerate()
        .map(|(i, call)| {
            let mut before = Vec::new();
            if mode == ExecutionMode::Sequential || sequential[i] {
                before.extend(0..i);
            } else if let Some(last_seq) = (0..i).rev().find(|&j| sequential[j]) {
                before.push(last_seq);
            }
            if let Some(tool) = tool_of(&call.tool_name) {
                for (j, other) in calls.iter().enumerate() {
                    if j != i && tool.depends_on.contains(&other.tool_name) {
                        before.push(j);
                    }
                }
            }
            for id in &call.after {
                if let Some(&j) = index_of_id.get(id.as_str())
                    && j != i
                {
                    before.push(j);
                }
            }
            before.sort_unstable();
            before.dedup();
            before
        })
        .collect()
}

fn error_outcome(call: &ToolCall, message: String) -> CallOutcome {
    CallOutcome {
        result: ToolResult {
            tool_call_id: call.tool_call_id.clone(),
            result: Value::String(message.clone()),
            is_error: true,
        },
        execution: Some(ToolExecution {
            tool_name: call.tool_name.clone(),
            tool_call_id: call.tool_call_id.clone(),
            arguments: call.arguments.clone(),
            result: Value::String(message),
            is_error: true,
            duration: 0,
            approved: None,
        }),
        deferred: false,
    }
}

/// A call refused before its tool ran: an error result the model can correct, shown as a
/// tool execution that started and failed at once (so every outcome is visible).
fn rejected(call: &ToolCall, message: String, cx: &RoundContext<'_>) -> CallOutcome {
    let result = Value::String(message.clone());
    pipeline::emit_for(cx.events, call, StreamEventType::ToolExecutionStart, None);
    pipeline::emit_for(
        cx.events,
        call,
        StreamEventType::ToolExecutionEnd,
        Some((&result, true)),
    );
    error_outcome(call, message)
}

async fn run_call(
    calls: &[ToolCall],
    index: usize,
    cx: &RoundContext<'_>,
) -> Result<CallOutcome, UppError> {
    let call = &calls[index];
    let Some(tool) = cx.tools.iter().find(|t| t.name == call.tool_name) else {
        let known: Vec<&str> = cx.tools.iter().map(|t| t.name.as_str()).collect();
        let message = format!(
            "unknown tool {:?}; available tools: {}",
            call.tool_name,
            known.join(", ")
        );
        return Ok(rejected(call, message, cx));
    };
    if let Value::String(text) = &call.arguments {
        // The model's argument text was not JSON (adapters keep it as a string).
        let reason = serde_json::from_str::<Value>(text)
            .err()
            .map_or_else(|| "not an object".to_owned(), |e| e.to_string());
        let message = format!(
            "the arguments of this call to {} are not valid JSON ({reason}); call it again with a JSON object \
             that matches its parameters schema",
            tool.name
        );
        return Ok(rejected(call, message, cx));
    }
    let context = ToolContext {
        tool_call_id: call.tool_call_id.clone(),
        signal: cx.signal.child_token(),
        extensions: cx.extensions.clone(),
    };
    let mut inv = Invocation::new(tool, call, context)
        .in_round(calls, index)
        .with_events(cx.events);
    let started = Instant::now();
    let outcome = cx.pipeline.run(&mut inv).await;
    if let Some(reason) = inv.abort.take() {
        return Err(UppError::llm(
            ErrorCode::InvalidRequest,
            cx.provider,
            reason,
        ));
    }
    let duration = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let deferred = matches!(outcome, ToolOutcome::Deferred { .. });
    let (result, is_error) = outcome.into_result();
    if inv.ran {
        pipeline::emit(
            &inv,
            StreamEventType::ToolExecutionEnd,
            Some((&result, is_error)),
        );
    } else {
        // Answered without running (replayed, refused, deferred): one start and one end.
        pipeline::emit(&inv, StreamEventType::ToolExecutionStart, None);
        pipeline::emit(
            &inv,
            StreamEventType::ToolExecutionEnd,
            Some((&result, is_error)),
        );
    }
    Ok(CallOutcome {
        result: ToolResult {
            tool_call_id: call.tool_call_id.clone(),
            result: result.clone(),
            is_error,
        },
        execution: Some(ToolExecution {
            tool_name: tool.name.clone(),
            tool_call_id: call.tool_call_id.clone(),
            arguments: inv.arguments,
            result,
            is_error,
            duration,
            approved: inv.approved,
        }),
        deferred,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str) -> Tool {
        Tool::new(name, "", json!({"type": "object"}), |_a: Value, _c| async {
            Ok(Value::Null)
        })
    }

    fn call(id: &str, name: &str) -> ToolCall {
        ToolCall::new(id, name, json!({}))
    }

    #[test]
    fn prerequisites_follow_sequential_depends_on_and_after() {
        let tools = vec![
            tool("read").with_sequential(true),
            tool("write").with_depends_on(["process"]),
            tool("process"),
        ];
        let mut calls = vec![
            call("1", "process"),
            call("2", "read"),
            call("3", "write"),
            call("4", "process"),
        ];
        calls[3].after = vec!["1".into()];
        let p = prerequisites(&calls, &tools, ExecutionMode::Parallel);
        assert_eq!(p[0], Vec::<usize>::new());
        assert_eq!(p[1], vec![0]);
        assert_eq!(p[2], vec![0, 1, 3]);
        assert_eq!(p[3], vec![0, 1]);
    }
}

//! Proptest generators of `AgentState`s with everything a state can hold: messages of every
//! kind with every content block (and ids, timestamps, metadata), tool calls with ordering
//! constraints, tool results, step numbers, metadata, reasoning traces, plans and sub-agent
//! traces — built, as an agent builds them, by a sequence of `with_*` operations; and
//! checkpoints of them.
//!
//! Shared with weft-store's checkpoint property test (`#[path]`): it depends on nothing else
//! in this directory.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use chrono::{DateTime, Utc};
use proptest::prelude::*;
use serde_json::{Map, Value};
use weft_agent::checkpoint::{Checkpoint, CheckpointMetadata};
use weft_agent::{
    AgentState, PlanStep, PlanStepStatus, SubagentExecutionTrace, ToolExecutionTrace,
};
use weft_provider::{
    AssistantMessage, AudioBlock, BinaryBlock, Blob, ContentBlock, DocumentBlock, DocumentSource,
    ImageBlock, ImageSource, Message, ReasoningBlock, TextBlock, TokenUsage, ToolCall,
    ToolExecution, ToolResult, ToolResultMessage, UserMessage, VideoBlock,
};

/// Any text, including control characters, quotes and characters beyond the BMP.
fn text() -> BoxedStrategy<String> {
    prop_oneof![
        "[a-zA-Z0-9 ]{0,12}",
        "\\PC{0,10}",
        any::<String>().prop_map(|s| s.chars().take(12).collect())
    ]
    .boxed()
}

fn json_value() -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::vec(("[a-zA-Z_:é]{0,6}", inner), 0..3)
                .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
    .boxed()
}

fn metadata() -> BoxedStrategy<Map<String, Value>> {
    prop::collection::vec(("[a-zA-Z_]{1,6}", json_value()), 0..3)
        .prop_map(|members| members.into_iter().collect())
        .boxed()
}

/// Any instant from 1970 to 2096, to the nanosecond.
fn timestamp() -> BoxedStrategy<DateTime<Utc>> {
    (0i64..4_000_000_000, 0u32..1_000_000_000)
        .prop_map(|(seconds, nanos)| DateTime::from_timestamp(seconds, nanos).unwrap())
        .boxed()
}

fn blob() -> BoxedStrategy<Blob> {
    prop::collection::vec(any::<u8>(), 0..12)
        .prop_map(Blob)
        .boxed()
}

fn finite() -> BoxedStrategy<f64> {
    any::<f64>()
        .prop_filter("finite", |f| f.is_finite())
        .boxed()
}

/// Every content block; `binary` only when `user` (assistant content may not hold one).
fn block(user: bool) -> BoxedStrategy<ContentBlock> {
    let mime = || prop::sample::select(vec!["image/png", "application/pdf", "audio/wav", "x/y"]);
    let image_source = prop_oneof![
        "[A-Za-z0-9+/]{0,8}".prop_map(|data| ImageSource::Base64 { data }),
        "https://[a-z]{1,6}\\.example/[a-z]{0,4}".prop_map(|url| ImageSource::Url { url }),
        blob().prop_map(|data| ImageSource::Bytes { data }),
    ];
    let document_source = prop_oneof![
        "[A-Za-z0-9+/]{0,8}".prop_map(|data| DocumentSource::Base64 { data }),
        "https://[a-z]{1,6}\\.example/d".prop_map(|url| DocumentSource::Url { url }),
        text().prop_map(|data| DocumentSource::Text { data }),
    ];
    let mut kinds = vec![
        text()
            .prop_map(|text| ContentBlock::Text(TextBlock { text }))
            .boxed(),
        (
            text(),
            prop::option::of("[A-Za-z0-9=]{1,8}"),
            prop::option::of(metadata()),
        )
            .prop_map(|(text, signature, metadata)| {
                ContentBlock::Reasoning(ReasoningBlock {
                    text,
                    signature,
                    metadata,
                })
            })
            .boxed(),
        (
            image_source,
            mime(),
            prop::option::of(any::<u32>()),
            prop::option::of(any::<u32>()),
        )
            .prop_map(|(source, mime, width, height)| {
                ContentBlock::Image(ImageBlock {
                    source,
                    mime_type: mime.into(),
                    width,
                    height,
                })
            })
            .boxed(),
        (document_source, mime(), prop::option::of(text()))
            .prop_map(|(source, mime, title)| {
                ContentBlock::Document(DocumentBlock {
                    source,
                    mime_type: mime.into(),
                    title,
                })
            })
            .boxed(),
        (blob(), mime(), prop::option::of(finite()))
            .prop_map(|(data, mime, duration)| {
                ContentBlock::Audio(AudioBlock {
                    data,
                    mime_type: mime.into(),
                    duration,
                })
            })
            .boxed(),
        (
            blob(),
            mime(),
            prop::option::of(finite()),
            prop::option::of(any::<u32>()),
            prop::option::of(any::<u32>()),
        )
            .prop_map(|(data, mime, duration, width, height)| {
                ContentBlock::Video(VideoBlock {
                    data,
                    mime_type: mime.into(),
                    duration,
                    width,
                    height,
                })
            })
            .boxed(),
    ];
    if user {
        kinds.push(
            (blob(), mime(), prop::option::of(metadata()))
                .prop_map(|(data, mime, metadata)| {
                    ContentBlock::Binary(BinaryBlock {
                        data,
                        mime_type: mime.into(),
                        metadata,
                    })
                })
                .boxed(),
        );
    }
    prop::strategy::Union::new(kinds).boxed()
}

fn tool_call() -> BoxedStrategy<ToolCall> {
    (
        "call_[a-z0-9]{1,4}",
        "[a-z_]{1,8}",
        json_value(),
        prop::collection::vec("call_[a-z0-9]{1,4}", 0..2),
    )
        .prop_map(|(id, name, arguments, after)| ToolCall {
            tool_call_id: id,
            tool_name: name,
            arguments,
            after,
        })
        .boxed()
}

/// `id` made unique: UPP gives every message a unique id, and the SQL store keeps a thread's
/// history once, keyed by message id (two different messages generated with the same short
/// id would break the invariant the store relies on, not the store).
fn unique(id: String) -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{id}-{n}")
}

/// A message of any kind, with a unique id, a timestamp and (maybe) metadata.
pub fn message() -> BoxedStrategy<Message> {
    let id = "[a-z0-9-]{1,12}";
    prop_oneof![
        (
            id,
            prop::collection::vec(block(true), 0..4),
            timestamp(),
            prop::option::of(metadata())
        )
            .prop_map(|(id, content, timestamp, metadata)| {
                Message::User(UserMessage {
                    id: unique(id),
                    content,
                    timestamp,
                    metadata,
                })
            }),
        (
            id,
            prop::collection::vec(block(false), 0..4),
            prop::collection::vec(tool_call(), 0..3),
            timestamp(),
            prop::option::of(metadata())
        )
            .prop_map(|(id, content, tool_calls, timestamp, metadata)| {
                Message::Assistant(AssistantMessage {
                    id: unique(id),
                    content,
                    tool_calls,
                    timestamp,
                    metadata,
                })
            }),
        (
            id,
            prop::collection::vec(("call_[a-z0-9]{1,4}", json_value(), any::<bool>()), 0..3),
            timestamp(),
            prop::option::of(metadata())
        )
            .prop_map(|(id, results, timestamp, metadata)| {
                Message::ToolResult(ToolResultMessage {
                    id: unique(id),
                    results: results
                        .into_iter()
                        .map(|(tool_call_id, result, is_error)| ToolResult {
                            tool_call_id,
                            result,
                            is_error,
                        })
                        .collect(),
                    timestamp,
                    metadata,
                })
            }),
    ]
    .boxed()
}

fn plan_step() -> BoxedStrategy<PlanStep> {
    (
        "[a-z0-9]{1,4}",
        text(),
        prop::option::of("[a-z_]{1,6}"),
        prop::collection::vec("[a-z0-9]{1,4}", 0..3),
        prop::sample::select(vec![
            PlanStepStatus::Pending,
            PlanStepStatus::InProgress,
            PlanStepStatus::Completed,
            PlanStepStatus::Failed,
        ]),
    )
        .prop_map(|(id, description, tool, depends_on, status)| PlanStep {
            id,
            description,
            tool,
            depends_on,
            status,
        })
        .boxed()
}

fn usage() -> BoxedStrategy<TokenUsage> {
    (0u64..10_000, 0u64..10_000, 0u64..100, 0u64..100)
        .prop_map(|(input, output, read, write)| TokenUsage {
            input_tokens: input,
            output_tokens: output,
            total_tokens: input + output,
            cache_read_tokens: read,
            cache_write_tokens: write,
            ..TokenUsage::default()
        })
        .boxed()
}

fn trace() -> BoxedStrategy<SubagentExecutionTrace> {
    let execution = (
        "[a-z_]{1,6}",
        prop::option::of("call_[0-9]{1,3}"),
        json_value(),
        text(),
        prop::option::of(any::<bool>()),
        prop::option::of(any::<u64>()),
    )
        .prop_map(
            |(tool_name, tool_call_id, arguments, result, is_error, duration)| ToolExecutionTrace {
                tool_name,
                tool_call_id,
                arguments,
                result,
                is_error,
                duration,
            },
        );
    (
        ("sub-[a-z0-9]{1,6}", "[a-z]{1,8}", "call_[0-9]{1,3}", text()),
        (any::<i64>(), any::<i64>(), any::<bool>()),
        (prop::option::of(text()), prop::option::of(text())),
        prop::option::of(prop::collection::vec(execution, 0..3)),
        prop::option::of(usage()),
    )
        .prop_map(
            |(
                (subagent_id, subagent_type, parent_tool_call_id, prompt),
                (start_time, end_time, success),
                (result, error),
                tool_executions,
                usage,
            )| SubagentExecutionTrace {
                subagent_id,
                subagent_type,
                parent_tool_call_id,
                prompt,
                start_time,
                end_time,
                success,
                result,
                error,
                tool_executions,
                usage,
            },
        )
        .boxed()
}

/// One `with_*` operation.
#[derive(Debug, Clone)]
pub enum Op {
    Message(Message),
    Messages(Vec<Message>),
    Context(Vec<Message>),
    Step(u64),
    Metadata(String, Value),
    Reasoning(String),
    Plan(Vec<PlanStep>),
    Trace(SubagentExecutionTrace),
}

impl Op {
    /// Whether the operation keeps the history of the state it applies to (every operation
    /// but a `with_context` replacement).
    pub fn appends(&self) -> bool {
        !matches!(self, Op::Context(_))
    }
}

pub fn op() -> BoxedStrategy<Op> {
    prop_oneof![
        4 => message().prop_map(Op::Message),
        1 => prop::collection::vec(message(), 0..3).prop_map(Op::Messages),
        1 => prop::collection::vec(message(), 0..3).prop_map(Op::Context),
        1 => any::<u64>().prop_map(Op::Step),
        1 => ("[a-zA-Z]{1,6}", json_value()).prop_map(|(k, v)| Op::Metadata(k, v)),
        1 => text().prop_map(Op::Reasoning),
        1 => prop::collection::vec(plan_step(), 0..4).prop_map(Op::Plan),
        1 => trace().prop_map(Op::Trace),
    ]
    .boxed()
}

pub fn apply(state: &AgentState, op: &Op) -> AgentState {
    match op {
        Op::Message(m) => state.with_message(m.clone()),
        Op::Messages(ms) => state.with_messages(ms.iter().cloned()),
        Op::Context(ms) => state.with_context(ms.iter().cloned()),
        Op::Step(s) => state.with_step(*s),
        Op::Metadata(k, v) => state.with_metadata(k.as_str(), v.clone()),
        Op::Reasoning(r) => state.with_reasoning(r.as_str()),
        Op::Plan(steps) => state.with_plan(steps.clone()),
        Op::Trace(t) => state.with_subagent_trace(t.clone()),
    }
}

/// A state built from the initial one by up to `max_ops` operations.
pub fn state(max_ops: usize) -> BoxedStrategy<AgentState> {
    prop::collection::vec(op(), 0..max_ops)
        .prop_map(|ops| {
            ops.iter()
                .fold(AgentState::initial(), |state, op| apply(&state, op))
        })
        .boxed()
}

fn execution() -> BoxedStrategy<ToolExecution> {
    (
        "[a-z_]{1,6}",
        "call_[a-z0-9]{1,4}",
        json_value(),
        json_value(),
        any::<bool>(),
        any::<u64>(),
        prop::option::of(any::<bool>()),
    )
        .prop_map(
            |(tool_name, tool_call_id, arguments, result, is_error, duration, approved)| {
                ToolExecution {
                    tool_name,
                    tool_call_id,
                    arguments,
                    result,
                    is_error,
                    duration,
                    approved,
                }
            },
        )
        .boxed()
}

/// The checkpoint of `state` for `session`, with generated id, time, agent, pending and
/// completed tool calls and usage.
pub fn checkpoint_of(session: &str, state: AgentState) -> BoxedStrategy<Checkpoint> {
    let session = session.to_owned();
    (
        "[a-f0-9-]{8,36}",
        timestamp(),
        "[a-z-]{1,8}",
        prop::collection::vec(tool_call(), 0..3),
        prop::collection::vec(execution(), 0..3),
        prop::option::of(usage()),
    )
        .prop_map(
            move |(checkpoint_id, timestamp, agent_id, pending, completed, usage)| Checkpoint {
                metadata: CheckpointMetadata {
                    session_id: session.clone(),
                    checkpoint_id,
                    timestamp,
                    step: state.step(),
                    agent_id,
                },
                state: state.clone(),
                pending_tool_calls: pending,
                completed_tool_calls: completed,
                usage,
            },
        )
        .boxed()
}

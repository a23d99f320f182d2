//! One request on the engine: plan (options, template mode, grammar), generate on a blocking
//! thread, and turn the result into an [`LlmResponse`] or a stream of events.
//!
//! Streaming: text is sent as `text_delta`s as it decodes. When tools are offered, a reply
//! that starts with `{` is a tool call (the grammar allows nothing else to start with `{`
//! unless a structure is also given); it is held back and sent as `tool_call_delta`s once
//! complete, so a consumer never sees call JSON as text.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use weft_provider::{
    AssistantMessage, ContentBlock, CycleUsage, ErrorCode, LlmRequest, LlmResponse, LlmStream,
    LlmStreamPart, MessageOptions, Modality, StreamEvent, TokenUsage, ToolCall, UppError,
};

use crate::NAME;
use crate::calls::{parse_calls, tools_grammar};
use crate::constrain::Grammar;
use crate::engine::{Engine, GenerateError, Generation, Stop};
use crate::options::{GenerationOptions, ToolChoice};
use crate::template::{self, OutputMode, ToolSpec};

/// Everything decided before generating.
#[derive(Debug, Clone)]
struct Plan {
    options: GenerationOptions,
    mode: OutputMode,
    grammar: Option<Grammar>,
    tools: Vec<ToolSpec>,
    structured: bool,
}

impl Plan {
    fn new(request: &LlmRequest) -> Result<Self, UppError> {
        let options =
            GenerationOptions::from_request(request.params.as_ref(), &request.tool_choice)?;
        let tools: Vec<ToolSpec> = request
            .tools
            .iter()
            .filter(|t| {
                options
                    .only_tool
                    .as_ref()
                    .is_none_or(|only| &t.name == only)
            })
            .map(|t| ToolSpec {
                name: t.name.clone(),
                description: t.description.clone(),
                parameters: t.parameters.clone(),
            })
            .collect();
        let tools = if options.tool_choice == ToolChoice::None {
            Vec::new()
        } else {
            tools
        };
        let required = options.tool_choice == ToolChoice::Required;
        let (mode, grammar) = if !tools.is_empty() {
            let grammar = tools_grammar(
                &tools,
                options.parallel_tool_calls,
                required,
                request.structure.as_ref(),
            );
            (
                OutputMode::Tools {
                    tools: tools.clone(),
                    parallel: options.parallel_tool_calls,
                    required,
                    structure: request.structure.clone(),
                },
                Some(Grammar::Lark(grammar)),
            )
        } else if let Some(schema) = &request.structure {
            (
                OutputMode::Structured(schema.clone()),
                Some(Grammar::JsonSchema(schema.clone())),
            )
        } else {
            (OutputMode::Text, None)
        };
        Ok(Plan {
            options,
            mode,
            grammar,
            tools,
            structured: request.structure.is_some(),
        })
    }
}

fn to_upp(error: GenerateError) -> UppError {
    match error {
        GenerateError::ContextLength { .. } => {
            UppError::llm(ErrorCode::ContextLengthExceeded, NAME, error.to_string())
        }
        GenerateError::Cancelled => UppError::cancelled(NAME, Modality::Llm),
        GenerateError::Grammar(_) => {
            UppError::llm(ErrorCode::InvalidRequest, NAME, error.to_string())
        }
        GenerateError::Model(_) => UppError::llm(ErrorCode::ProviderError, NAME, error.to_string()),
    }
}

fn join_error(error: tokio::task::JoinError) -> UppError {
    UppError::llm(
        ErrorCode::ProviderError,
        NAME,
        format!("the generation thread failed: {error}"),
    )
}

/// The reply as a response: tool calls when the text is calls, text otherwise.
fn build_response(
    plan: &Plan,
    generation: Generation,
    model_file: &str,
) -> Result<LlmResponse, UppError> {
    let calls = if plan.tools.is_empty() {
        None
    } else {
        parse_calls(&generation.text, &plan.tools)
    };
    let (content, tool_calls) = match calls {
        Some(calls) => (
            Vec::new(),
            calls
                .into_iter()
                .map(|(name, arguments)| {
                    ToolCall::new(
                        format!("call_{}", weft_provider::message::new_id()),
                        name,
                        arguments,
                    )
                })
                .collect::<Vec<_>>(),
        ),
        None => (
            vec![ContentBlock::text(generation.text.clone())],
            Vec::new(),
        ),
    };
    let raw_stop = match generation.stop {
        Stop::EndOfTurn => "end_of_turn",
        Stop::MaxTokens => "max_tokens",
        Stop::Sequence => "stop_sequence",
    };
    let stop_reason = if !tool_calls.is_empty() {
        "tool_use"
    } else {
        match generation.stop {
            Stop::EndOfTurn => "end_turn",
            Stop::MaxTokens => "max_tokens",
            Stop::Sequence => "stop_sequence",
        }
    };
    let data = if plan.structured && tool_calls.is_empty() {
        serde_json::from_str::<Value>(generation.text.trim()).ok()
    } else {
        None
    };
    let timings = generation.timings;
    let decode_seconds = timings.decode.as_secs_f64();
    let mut metadata = weft_provider::Metadata::new();
    metadata.insert(
        NAME.to_owned(),
        json!({
            "stopReason": raw_stop,
            "file": model_file,
            "timings": {
                "grammarMs": timings.grammar.as_secs_f64() * 1000.0,
                "prefillMs": timings.prefill.as_secs_f64() * 1000.0,
                "decodeMs": decode_seconds * 1000.0,
                "tokensPerSecond": if decode_seconds > 0.0 { generation.output_tokens as f64 / decode_seconds } else { 0.0 },
            },
        }),
    );
    let message = AssistantMessage::new(
        content,
        tool_calls,
        MessageOptions {
            id: None,
            metadata: Some(metadata),
        },
    )
    .map_err(|e| UppError::llm(ErrorCode::InvalidResponse, NAME, e.to_string()))?;
    Ok(LlmResponse {
        message,
        usage: TokenUsage::from_cycle(CycleUsage {
            input_tokens: generation.prompt_tokens as u64,
            output_tokens: generation.output_tokens as u64,
            ..CycleUsage::default()
        }),
        stop_reason: stop_reason.to_owned(),
        data,
    })
}

fn prompt_for(engine: &Engine, request: &LlmRequest, plan: &Plan) -> Vec<u32> {
    let segments = template::render(
        request.system.as_deref(),
        request.messages.as_slice(),
        &plan.mode,
    );
    engine.encode_prompt(&segments)
}

/// One non-streaming request.
pub(crate) async fn complete(
    engine: Arc<Engine>,
    request: LlmRequest,
    context_limit: Option<usize>,
) -> Result<LlmResponse, UppError> {
    let plan = Plan::new(&request)?;
    tokio::task::spawn_blocking(move || {
        let prompt = prompt_for(&engine, &request, &plan);
        let generation = engine
            .generate(
                &prompt,
                &plan.options,
                plan.grammar.as_ref(),
                context_limit,
                &request.signal,
                &mut |_| true,
            )
            .map_err(to_upp)?;
        build_response(&plan, generation, &engine.file_name())
    })
    .await
    .map_err(join_error)?
}

type Sender = mpsc::UnboundedSender<Result<LlmStreamPart, UppError>>;

/// How streamed text is being shown.
enum Shown {
    Nothing,
    Text,
    HeldBack,
}

/// One streaming request: the events, then the response.
pub(crate) fn stream(
    engine: Arc<Engine>,
    request: LlmRequest,
    context_limit: Option<usize>,
) -> LlmStream {
    let (sender, mut receiver) = mpsc::unbounded_channel();
    let events = sender.clone();
    let task =
        tokio::task::spawn_blocking(move || run_stream(&engine, &request, context_limit, &events));
    tokio::spawn(async move {
        if let Err(error) = task.await {
            let _ = sender.send(Err(join_error(error)));
        }
    });
    Box::pin(futures_util::stream::poll_fn(move |cx| {
        receiver.poll_recv(cx)
    }))
}

fn run_stream(
    engine: &Engine,
    request: &LlmRequest,
    context_limit: Option<usize>,
    sender: &Sender,
) {
    let event = |event: StreamEvent| sender.send(Ok(LlmStreamPart::Event(event))).is_ok();
    let plan = match Plan::new(request) {
        Ok(plan) => plan,
        Err(error) => {
            let _ = sender.send(Err(error));
            return;
        }
    };
    let prompt = prompt_for(engine, request, &plan);
    if !event(StreamEvent::message_start()) {
        return;
    }
    let hold_calls = !plan.tools.is_empty();
    let mut shown = Shown::Nothing;
    let mut on_text = |delta: &str| -> bool {
        if delta.is_empty() {
            return true;
        }
        if let Shown::Nothing = shown {
            if hold_calls && delta.starts_with('{') {
                shown = Shown::HeldBack;
            } else {
                shown = Shown::Text;
                if !event(StreamEvent::block_start(0)) {
                    return false;
                }
            }
        }
        match shown {
            Shown::Text => event(StreamEvent::text_delta(0, delta)),
            _ => !sender.is_closed(),
        }
    };
    let result = engine.generate(
        &prompt,
        &plan.options,
        plan.grammar.as_ref(),
        context_limit,
        &request.signal,
        &mut on_text,
    );
    let generation = match result {
        Ok(generation) => generation,
        Err(error) => {
            let _ = sender.send(Err(to_upp(error)));
            return;
        }
    };
    let response = match build_response(&plan, generation, &engine.file_name()) {
        Ok(response) => response,
        Err(error) => {
            let _ = sender.send(Err(error));
            return;
        }
    };
    match shown {
        Shown::Text => {
            event(StreamEvent::block_stop(0));
        }
        Shown::HeldBack | Shown::Nothing => {
            let message = &response.message;
            if message.tool_calls.is_empty() {
                let text = message.text_content();
                event(StreamEvent::block_start(0));
                if !text.is_empty() {
                    event(StreamEvent::text_delta(0, text));
                }
                event(StreamEvent::block_stop(0));
            }
            for (index, call) in message.tool_calls.iter().enumerate() {
                let index = index as u32;
                event(StreamEvent::block_start(index));
                event(StreamEvent::tool_call_delta(
                    index,
                    Some(call.tool_call_id.clone()),
                    Some(call.tool_name.clone()),
                    None,
                ));
                event(StreamEvent::tool_call_delta(
                    index,
                    None,
                    None,
                    Some(call.arguments.to_string()),
                ));
                event(StreamEvent::block_stop(index));
            }
        }
    }
    event(StreamEvent::message_stop());
    let _ = sender.send(Ok(LlmStreamPart::Response(response)));
}

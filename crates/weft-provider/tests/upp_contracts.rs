//! UPP-1.2 promises that the re-read of the conformance rows (issue 24) found cited by a test
//! that did not check them: each test here is named for the requirements it proves and goes
//! through the code users call (`llm()`, `embedding()`, the crate root), over real HTTP where
//! a vendor is involved.
//!
//! - the public names of §14 are reachable from the crate root (UPP-180…188, 195);
//! - the twelve `StreamEventType` wire strings (UPP-111, UPP-189);
//! - message accessors and `hasToolCalls` both ways (UPP-072, UPP-076); the required fields of
//!   tool calls and results (UPP-079, UPP-080); what each `Thread` method selects (UPP-104); the media helpers read files and convert
//!   both ways (UPP-090…095);
//! - capabilities do not vary per model (UPP-039);
//! - custom headers go with every request: retries, tool rounds, embedding batches (UPP-009);
//! - a strategy's `beforeRequest` delay is waited before every request, on paused time
//!   (UPP-018);
//! - `onAfterCall` returning nothing keeps the result (UPP-134);
//! - metadata namespaces of other providers never reach the wire (UPP-074, UPP-120);
//! - every dialect's errors name their provider and `modality: "llm"` (UPP-207, UPP-222);
//! - content filtering is `CONTENT_FILTERED`, final, whether refused with a 400 or in the
//!   reply (UPP-249); missing cache counts are 0 (UPP-103);
//! - Gemini gets audio and documents as inline data or text (UPP-212, UPP-214);
//! - the native-tool helpers of each adapter reach the body after the function tools, and
//!   native outputs come back as blocks, the rest kept in metadata (UPP-138…142);
//! - embedding models declare their limits, and an image given to a text-only model is refused
//!   before any request (UPP-152, UPP-160); vendors without an embedding API have no handler
//!   (UPP-202); batches run one at a time unless `concurrency`
//!   says otherwise (UPP-155);
//! - each adapter takes exactly the media its capabilities declare (UPP-203, UPP-212);
//! - every vendor is reached over TLS unless a base URL says otherwise (UPP-250);
//! - the README's provider table names the key variable each provider falls back to, the one its
//!   missing-key error names (UPP-034, UPP-242).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod adapter_support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use adapter_support::{KEY, config_no_retry};
use serde_json::{Value, json};
use weft_provider::adapters::scripted::{self, Script, ScriptedResponse, ScriptedToolCall};
use weft_provider::{
    AssistantMessage, AudioBlock, Blob, ContentBlock, DocumentBlock, DocumentSource, EmbedOptions,
    EmbeddingInput, EmbeddingOptions, ErrorCode, ImageBlock, ImageSource, LlmOptions, Message,
    MessageOptions, Modality, ProviderConfig, ProviderRegistry, RetryStrategy, StreamEventType,
    Tool, ToolCall, ToolUseStrategy, UppError, UserMessage, VideoBlock, embedding, llm,
};
use weft_testkit::{ReplayServer, Reply};

/// `(the name as written, the name the compiler resolved)` for each type.
macro_rules! type_names {
    ($($t:ty),* $(,)?) => {
        vec![$((stringify!($t), std::any::type_name::<$t>())),*]
    };
}

/// The last path segment of a type name, without `dyn `.
fn short(name: &str) -> &str {
    let name = name.trim_start_matches("dyn ");
    name.rsplit("::").next().unwrap_or(name)
}

#[test]
fn upp_180_to_188_195_the_crate_root_exposes_every_upp_name() {
    use weft_provider as upp;
    // UPP-180 (LLMProvider is the `LlmHandler` of a `Provider`, BoundLLMModel the `LlmModel`,
    // LLMStreamResult the `LlmStream`), UPP-181 (MessageMetadata is `Metadata`), UPP-182,
    // UPP-183, UPP-184 (ThreadJSON is `ThreadJson`), UPP-185 (as far as it goes: EmbedManyOptions
    // is `EmbedOptions`, EmbeddingBatch the `EmbeddingResponse`), UPP-187, UPP-188, UPP-195.
    let names = type_names![
        upp::LlmOptions,
        upp::LlmInstance,
        upp::LlmCapabilities,
        upp::Provider,
        dyn upp::LlmHandler,
        dyn upp::LlmModel,
        upp::LlmRequest,
        upp::LlmResponse,
        upp::LlmStreamPart,
        upp::StreamResult,
        upp::InferenceInput,
        upp::Message,
        upp::UserMessage,
        upp::AssistantMessage,
        upp::ToolResultMessage,
        upp::MessageOptions,
        upp::MessageType,
        upp::ContentBlock,
        upp::TextBlock,
        upp::ReasoningBlock,
        upp::ImageBlock,
        upp::DocumentBlock,
        upp::AudioBlock,
        upp::VideoBlock,
        upp::BinaryBlock,
        upp::ImageSource,
        upp::DocumentSource,
        upp::ToolCall,
        upp::ToolResult,
        upp::Tool,
        upp::ToolUseStrategy,
        upp::BeforeCallResult,
        upp::AfterCallResult,
        upp::ToolExecution,
        upp::Turn,
        upp::TokenUsage,
        upp::CycleUsage,
        upp::Thread,
        upp::ThreadJson,
        upp::StreamEvent,
        upp::StreamEventType,
        upp::EventDelta,
        upp::EmbeddingOptions,
        upp::EmbeddingInstance,
        dyn upp::EmbeddingModel,
        upp::EmbeddingRequest,
        upp::EmbeddingResponse,
        upp::EmbeddingInput,
        upp::EmbeddingInputType,
        upp::Embedding,
        upp::EmbeddingResult,
        upp::EmbeddingUsage,
        upp::EmbedOptions,
        upp::ProviderConfig,
        dyn upp::KeyStrategy,
        upp::RoundRobinKeys,
        upp::WeightedKeys,
        upp::DynamicKey,
        dyn upp::RetryStrategy,
        upp::ExponentialBackoff,
        upp::LinearBackoff,
        upp::NoRetry,
        upp::TokenBucket,
        upp::RetryAfterStrategy,
        upp::UppError,
        upp::ErrorCode,
        upp::Modality,
        upp::Image,
        upp::Document,
        upp::Audio,
        upp::Video,
        upp::adapters::anthropic::AnthropicLlmParams,
        upp::adapters::openai_responses::OpenAiResponsesParams,
        upp::adapters::google::GoogleLlmParams,
    ];
    for (written, resolved) in &names {
        assert_eq!(short(written), short(resolved), "{written} is {resolved}");
    }
    // The entry points and type guards (UPP-179, UPP-188), by signature.
    let _: fn(LlmOptions) -> Result<upp::LlmInstance, UppError> = upp::llm;
    let _: fn(LlmOptions) -> Result<upp::LlmInstance, UppError> = upp::ai::llm;
    let _: fn(EmbeddingOptions) -> Result<upp::EmbeddingInstance, UppError> = upp::embedding;
    let _: fn(EmbeddingOptions) -> Result<upp::EmbeddingInstance, UppError> = upp::ai::embedding;
    let guards: [fn(&Message) -> bool; 3] = [
        upp::is_user_message,
        upp::is_assistant_message,
        upp::is_tool_result_message,
    ];
    let messages = [
        Message::user("hi"),
        Message::assistant("hello"),
        Message::ToolResult(weft_provider::ToolResultMessage::new(vec![])),
    ];
    for (i, message) in messages.iter().enumerate() {
        let expected: Vec<bool> = (0..3).map(|j| i == j).collect();
        assert_eq!(
            guards.map(|guard| guard(message)).to_vec(),
            expected,
            "{message:?}"
        );
    }
}

#[test]
fn upp_111_189_every_stream_event_type_has_its_wire_string() {
    use StreamEventType::*;
    let table = [
        (TextDelta, "text_delta"),
        (ReasoningDelta, "reasoning_delta"),
        (ImageDelta, "image_delta"),
        (AudioDelta, "audio_delta"),
        (VideoDelta, "video_delta"),
        (ToolCallDelta, "tool_call_delta"),
        (ToolExecutionStart, "tool_execution_start"),
        (ToolExecutionEnd, "tool_execution_end"),
        (MessageStart, "message_start"),
        (MessageStop, "message_stop"),
        (ContentBlockStart, "content_block_start"),
        (ContentBlockStop, "content_block_stop"),
    ];
    for (event_type, wire) in table {
        assert_eq!(event_type.as_str(), wire);
        assert_eq!(serde_json::to_value(event_type).unwrap(), json!(wire));
        assert_eq!(
            serde_json::from_value::<StreamEventType>(json!(wire)).unwrap(),
            event_type
        );
    }
    assert!(serde_json::from_value::<StreamEventType>(json!("TextDelta")).is_err());
}

fn bytes_block(kind: &str, mime_type: &str) -> ContentBlock {
    let data = Blob(vec![1, 2, 3]);
    match kind {
        "audio" => ContentBlock::Audio(AudioBlock {
            data,
            mime_type: mime_type.into(),
            duration: None,
        }),
        "video" => ContentBlock::Video(VideoBlock {
            data,
            mime_type: mime_type.into(),
            duration: None,
            width: None,
            height: None,
        }),
        _ => ContentBlock::Binary(weft_provider::BinaryBlock {
            data,
            mime_type: mime_type.into(),
            metadata: None,
        }),
    }
}

fn document(source: DocumentSource, mime_type: &str) -> ContentBlock {
    ContentBlock::Document(DocumentBlock {
        source,
        mime_type: mime_type.into(),
        title: None,
    })
}

fn image_url(url: &str) -> ContentBlock {
    ContentBlock::Image(ImageBlock {
        source: ImageSource::Url { url: url.into() },
        mime_type: "image/png".into(),
        width: None,
        height: None,
    })
}

#[test]
fn upp_072_076_messages_expose_their_media_and_tool_calls() {
    let message = Message::User(UserMessage::new(vec![
        ContentBlock::text("look"),
        image_url("https://example.com/a.png"),
        bytes_block("audio", "audio/wav"),
        document(
            DocumentSource::Text {
                data: "notes".into(),
            },
            "text/plain",
        ),
        image_url("https://example.com/b.png"),
        bytes_block("video", "video/mp4"),
        bytes_block("binary", "application/zip"),
    ]));
    let urls: Vec<_> = message
        .images()
        .iter()
        .map(|i| match &i.source {
            ImageSource::Url { url } => url.as_str(),
            _ => "",
        })
        .collect();
    assert_eq!(
        urls,
        ["https://example.com/a.png", "https://example.com/b.png"]
    );
    assert_eq!(message.documents()[0].mime_type, "text/plain");
    assert_eq!(message.audio()[0].mime_type, "audio/wav");
    assert_eq!(message.video()[0].mime_type, "video/mp4");
    assert_eq!(
        (
            message.documents().len(),
            message.audio().len(),
            message.video().len()
        ),
        (1, 1, 1)
    );
    assert!(Message::user("plain").images().is_empty());

    // `hasToolCalls` is true exactly when there are tool calls.
    let Message::Assistant(plain) = Message::assistant("text only") else {
        panic!("not an assistant message")
    };
    assert!(!plain.has_tool_calls());
    let calling = AssistantMessage::new(
        vec![ContentBlock::text("calling")],
        vec![ToolCall::new("c1", "t", json!({}))],
        MessageOptions::default(),
    )
    .unwrap();
    assert!(calling.has_tool_calls());
    let json = serde_json::to_value(Message::Assistant(calling)).unwrap();
    let Message::Assistant(back) = serde_json::from_value(json).unwrap() else {
        panic!("not an assistant message")
    };
    assert!(back.has_tool_calls());
}

#[tokio::test]
async fn upp_039_capabilities_are_the_same_for_every_model_of_a_provider() {
    let registry = ProviderRegistry::with_builtins();
    for provider in [
        "openai",
        "openai-compatible",
        "openai-responses",
        "anthropic",
        "google",
    ] {
        let capabilities = |model: &str| {
            let reference = registry.resolve(&format!("{provider}:{model}")).unwrap();
            llm(LlmOptions::new(reference)).unwrap().capabilities()
        };
        let first = capabilities("small-model");
        assert_eq!(first, capabilities("another-model-2"), "{provider}");
        assert!(first.streaming && first.tools, "{provider}: {first:?}");
    }
}

/// A strategy that asks for `wait` before every request and retries once, at once.
struct WaitFirst {
    wait: Duration,
    asked: AtomicU32,
}

impl RetryStrategy for WaitFirst {
    fn on_retry(&self, _error: &UppError, attempt: u32) -> Option<Duration> {
        (attempt < 2).then_some(Duration::ZERO)
    }

    fn before_request(&self) -> Option<Duration> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        Some(self.wait)
    }
}

/// A server that accepts connections, reads, and never answers.
async fn silent_server() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    url
}

#[tokio::test(start_paused = true)]
async fn upp_018_the_before_request_delay_is_waited_before_every_request() {
    let url = silent_server().await;
    let strategy = Arc::new(WaitFirst {
        wait: Duration::from_secs(3600),
        asked: AtomicU32::new(0),
    });
    let reference = ProviderRegistry::with_builtins()
        .resolve("openai-compatible:m")
        .unwrap();
    let mut config = ProviderConfig::default()
        .base_url(format!("{url}/v1"))
        .api_key(KEY)
        .idle_timeout(Duration::from_secs(5));
    config.retry_strategy = Some(strategy.clone());
    let started = tokio::time::Instant::now();
    let error = llm(LlmOptions::new(reference).config(config))
        .unwrap()
        .generate(&[], "hi")
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::Timeout, "{error}");
    assert_eq!(
        strategy.asked.load(Ordering::SeqCst),
        2,
        "asked per request"
    );
    // Paused time: two waits of an hour, two idle timeouts of 5 s (each deadline rounded up
    // to the next millisecond by the timer wheel).
    let expected = Duration::from_secs(2 * 3600 + 2 * 5);
    let elapsed = started.elapsed();
    assert!(
        elapsed >= expected && elapsed < expected + Duration::from_millis(50),
        "{elapsed:?} vs {expected:?}"
    );
}

fn echo(name: &str) -> Tool {
    Tool::new(
        name,
        "echoes",
        json!({"type": "object"}),
        |args: Value, _ctx| async move { Ok(args) },
    )
}

#[tokio::test]
async fn upp_134_after_call_returning_nothing_keeps_the_result() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let strategy = ToolUseStrategy::default().on_after_call(move |tool, _args, result| {
        log.lock()
            .unwrap()
            .push((tool.name.clone(), result.clone()));
        None
    });
    let call = ScriptedToolCall {
        id: Some("1".into()),
        name: "echo".into(),
        arguments: json!({"x": 7}),
        after: Vec::new(),
    };
    let turn = llm(LlmOptions::new(scripted::model(Script {
        responses: vec![
            ScriptedResponse {
                tool_calls: vec![call],
                ..ScriptedResponse::default()
            },
            ScriptedResponse::text("done"),
        ],
        fresh_ids: false,
    }))
    .tool(echo("echo"))
    .tool_strategy(strategy))
    .unwrap()
    .generate(&[], "go")
    .await
    .unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        [("echo".to_owned(), json!({"x": 7}))]
    );
    assert_eq!(turn.tool_executions[0].result, json!({"x": 7}));
    let Message::ToolResult(sent) = &*turn.messages[2] else {
        panic!("no tool result message: {:?}", turn.messages)
    };
    assert_eq!(sent.results[0].result, json!({"x": 7}), "sent unchanged");
}

/// Metadata for every namespace but `keep`.
fn foreign_metadata(keep: &str) -> serde_json::Map<String, Value> {
    let all = json!({
        "anthropic": {"cache_control": {"type": "ephemeral"}},
        "openai": {"strict": true},
        "google": {"thoughtSignature": "c2ln"},
        "some-future-provider": {"anything": [1, 2]},
    });
    let mut map = all.as_object().unwrap().clone();
    map.remove(keep);
    map
}

/// A user message, then an assistant answer carrying `metadata`.
fn history_with_metadata(metadata: serde_json::Map<String, Value>) -> Vec<Message> {
    let answer = AssistantMessage::new(
        vec![ContentBlock::text("sure")],
        vec![],
        MessageOptions {
            id: None,
            metadata: Some(metadata),
        },
    )
    .unwrap();
    vec![Message::user("earlier"), Message::Assistant(answer)]
}

fn chat_ok() -> Reply {
    Reply::json(
        200,
        &json!({"choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": "ok"}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1}}),
    )
}

#[tokio::test]
async fn upp_074_120_metadata_of_other_providers_never_reaches_the_wire() {
    let schema = json!({"type": "object", "properties": {}});
    // Chat Completions reads `openai`: every other namespace is ignored.
    let history = history_with_metadata(foreign_metadata("openai"));
    let server = ReplayServer::start(vec![chat_ok()]).await;
    let reference = ProviderRegistry::with_builtins()
        .resolve("openai:gpt-4o")
        .unwrap();
    let tool = echo("lookup").with_metadata(foreign_metadata("openai"));
    let turn = llm(LlmOptions::new(reference)
        .config(config_no_retry(&server, "/v1"))
        .tool(tool))
    .unwrap()
    .generate(&history, "again")
    .await
    .unwrap();
    assert_eq!(turn.text(), "ok");
    let body = server.received()[0].json();
    assert_eq!(
        body["messages"][1],
        json!({"role": "assistant", "content": "sure"})
    );
    assert_eq!(
        body["tools"][0],
        json!({"type": "function", "function": {"name": "lookup", "description": "echoes",
            "parameters": {"type": "object"}}})
    );

    // Anthropic reads `anthropic`: `openai.strict` and the rest stay out.
    let server = ReplayServer::start(vec![Reply::json(
        200,
        &json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 3, "output_tokens": 1}}),
    )])
    .await;
    let reference = ProviderRegistry::with_builtins()
        .resolve("anthropic:claude-x")
        .unwrap();
    let tool = Tool::new("lookup", "d", schema.clone(), |_a: Value, _c| async {
        Ok(Value::Null)
    })
    .with_metadata(foreign_metadata("anthropic"));
    llm(LlmOptions::new(reference)
        .config(config_no_retry(&server, "/v1"))
        .tool(tool))
    .unwrap()
    .generate(
        &history_with_metadata(foreign_metadata("anthropic")),
        "again",
    )
    .await
    .unwrap();
    let body = server.received()[0].json();
    assert_eq!(
        body["tools"][0],
        json!({"name": "lookup", "description": "d", "input_schema": schema})
    );
    assert_eq!(
        body["messages"][1],
        json!({"role": "assistant", "content": [{"type": "text", "text": "sure"}]})
    );
}

/// One dialect: a model reference, the base path, and a body that is a 401 in its words.
struct Dialect {
    reference: &'static str,
    provider: &'static str,
    base_path: &'static str,
    unauthorized: Value,
}

fn dialects() -> Vec<Dialect> {
    let openai = json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}});
    vec![
        Dialect {
            reference: "openai:gpt-4o",
            provider: "openai",
            base_path: "/v1",
            unauthorized: openai.clone(),
        },
        Dialect {
            reference: "openai-compatible:llama3.2",
            provider: "openai-compatible",
            base_path: "/v1",
            unauthorized: openai.clone(),
        },
        Dialect {
            reference: "openai-responses:gpt-4.1",
            provider: "openai-responses",
            base_path: "/v1",
            unauthorized: openai,
        },
        Dialect {
            reference: "anthropic:claude-sonnet-4-5",
            provider: "anthropic",
            base_path: "/v1",
            unauthorized: json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}),
        },
        Dialect {
            reference: "google:gemini-2.5-flash",
            provider: "google",
            base_path: "/v1beta",
            unauthorized: json!({"error": {"code": 401, "message": "API key not valid", "status": "UNAUTHENTICATED"}}),
        },
    ]
}

#[tokio::test]
async fn upp_207_222_llm_errors_name_their_provider_and_modality() {
    for dialect in dialects() {
        let server = ReplayServer::start(vec![Reply::json(401, &dialect.unauthorized)]).await;
        let reference = ProviderRegistry::with_builtins()
            .resolve(dialect.reference)
            .unwrap();
        let instance =
            llm(LlmOptions::new(reference).config(config_no_retry(&server, dialect.base_path)))
                .unwrap();
        let error = instance.generate(&[], "hi").await.unwrap_err();
        let what = dialect.reference;
        assert_eq!(
            error.code,
            ErrorCode::AuthenticationFailed,
            "{what}: {error}"
        );
        assert_eq!(error.provider, dialect.provider, "{what}");
        assert_eq!(error.modality, Modality::Llm, "{what}");
        assert_eq!(error.status_code, Some(401), "{what}");
        assert_eq!(error.cause, Some(dialect.unauthorized.clone()), "{what}");
        // Streamed, the same.
        let server = ReplayServer::start(vec![Reply::json(401, &dialect.unauthorized)]).await;
        let reference = ProviderRegistry::with_builtins()
            .resolve(dialect.reference)
            .unwrap();
        let stream =
            llm(LlmOptions::new(reference).config(config_no_retry(&server, dialect.base_path)))
                .unwrap()
                .stream(&[], "hi")
                .unwrap();
        let error = stream.turn().await.unwrap_err();
        assert_eq!(
            (error.code, error.modality, error.provider.as_str()),
            (
                ErrorCode::AuthenticationFailed,
                Modality::Llm,
                dialect.provider
            ),
            "{what} (stream)"
        );
    }
}

#[tokio::test]
async fn upp_103_249_content_filtering_is_final_and_missing_cache_counts_are_zero() {
    let reference = || {
        ProviderRegistry::with_builtins()
            .resolve("openai:gpt-4o")
            .unwrap()
    };
    // Refused up front (400) or blocked in the reply: CONTENT_FILTERED, and not retried even
    // with a strategy that would retry anything retryable.
    let refused = Reply::json(
        400,
        &json!({"error": {"message": "Your request was rejected as a result of our safety system.",
            "type": "invalid_request_error", "code": "content_policy_violation"}}),
    );
    let blocked = Reply::json(
        200,
        &json!({"choices": [{"index": 0, "finish_reason": "content_filter",
            "message": {"role": "assistant", "content": null}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 0}}),
    );
    for reply in [refused, blocked] {
        let server = ReplayServer::start(vec![reply, chat_ok()]).await;
        let error =
            llm(LlmOptions::new(reference()).config(adapter_support::config(&server, "/v1")))
                .unwrap()
                .generate(&[], "hi")
                .await
                .unwrap_err();
        assert_eq!(error.code, ErrorCode::ContentFiltered, "{error}");
        assert_eq!(server.received().len(), 1, "not retried");
    }
    // A reply whose usage has no cache details: both cache counts are 0.
    let server = ReplayServer::start(vec![chat_ok()]).await;
    let turn = llm(LlmOptions::new(reference()).config(config_no_retry(&server, "/v1")))
        .unwrap()
        .generate(&[], "hi")
        .await
        .unwrap();
    assert_eq!(
        (
            turn.usage.input_tokens,
            turn.usage.cache_read_tokens,
            turn.usage.cache_write_tokens
        ),
        (3, 0, 0)
    );
}

#[tokio::test]
async fn upp_212_214_gemini_gets_audio_and_documents_inline() {
    let reply = json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "heard"}]},
        "finishReason": "STOP"}], "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 1}});
    let server = ReplayServer::start(vec![Reply::json(200, &reply)]).await;
    let reference = ProviderRegistry::with_builtins()
        .resolve("google:gemini-2.5-flash")
        .unwrap();
    let instance =
        llm(LlmOptions::new(reference).config(config_no_retry(&server, "/v1beta"))).unwrap();
    assert!(instance.capabilities().audio_input && instance.capabilities().document_input);
    let input = Message::User(UserMessage::new(vec![
        ContentBlock::text("what is this?"),
        bytes_block("audio", "audio/wav"),
        document(
            DocumentSource::Base64 {
                data: "JVBERi0=".into(),
            },
            "application/pdf",
        ),
        document(
            DocumentSource::Url {
                url: "gs://bucket/a.pdf".into(),
            },
            "application/pdf",
        ),
        document(
            DocumentSource::Text {
                data: "plain notes".into(),
            },
            "text/plain",
        ),
    ]));
    let turn = instance.generate(&[], input).await.unwrap();
    assert_eq!(turn.text(), "heard");
    let body = server.received()[0].json();
    assert_eq!(
        body["contents"][0]["parts"],
        json!([
            {"text": "what is this?"},
            {"inlineData": {"mimeType": "audio/wav", "data": "AQID"}},
            {"inlineData": {"mimeType": "application/pdf", "data": "JVBERi0="}},
            {"fileData": {"mimeType": "application/pdf", "fileUri": "gs://bucket/a.pdf"}},
            {"text": "plain notes"},
        ])
    );
}

#[tokio::test]
async fn upp_150_152_160_embedding_models_declare_their_limits_and_refuse_images() {
    for (reference, provider, max_batch, max_input) in [
        ("openai:text-embedding-3-small", "openai", 2048, 8192),
        ("google:gemini-embedding-001", "google", 100, 2048),
    ] {
        let server = ReplayServer::start(vec![]).await;
        let model = ProviderRegistry::with_builtins()
            .resolve(reference)
            .unwrap();
        let params = json!({"dimensions": 8}).as_object().cloned();
        let instance = embedding(EmbeddingOptions {
            model,
            config: config_no_retry(&server, "/v1"),
            params: params.clone(),
        })
        .unwrap();
        assert_eq!(instance.params(), params.as_ref(), "{reference}");
        let bound = instance.model();
        assert_eq!(
            (bound.model_id(), bound.provider(), bound.max_batch_size()),
            (reference.split_once(':').unwrap().1, provider, max_batch),
            "{reference}"
        );
        assert_eq!(
            (bound.max_input_length(), bound.dimensions()),
            (Some(max_input), None),
            "{reference}: the vector length depends on `dimensions` in params"
        );
        assert_eq!(bound.supported_inputs(), ["text"], "{reference}");
        let ContentBlock::Image(image) = image_url("https://example.com/a.png") else {
            unreachable!()
        };
        let error = instance
            .embed(
                vec!["words".into(), EmbeddingInput::Image(image)],
                EmbedOptions::default(),
            )
            .await
            .unwrap_err();
        assert_eq!(
            (error.code, error.modality, error.provider.as_str()),
            (ErrorCode::InvalidRequest, Modality::Embedding, provider),
            "{reference}: {error}"
        );
        assert!(server.received().is_empty(), "{reference}: nothing sent");
    }
}

#[test]
fn upp_202_providers_without_an_embedding_api_have_no_embedding_handler() {
    let registry = ProviderRegistry::with_builtins();
    for reference in ["anthropic:claude-sonnet-4-5", "openai-responses:gpt-4.1"] {
        let error = embedding(EmbeddingOptions {
            model: registry.resolve(reference).unwrap(),
            config: ProviderConfig::default(),
            params: None,
        })
        .unwrap_err();
        assert_eq!(
            (error.code, error.modality),
            (ErrorCode::InvalidRequest, Modality::Embedding),
            "{reference}: {error}"
        );
    }
    for reference in [
        "openai:text-embedding-3-small",
        "openai-compatible:nomic-embed-text",
        "google:gemini-embedding-001",
    ] {
        let model = registry.resolve(reference).unwrap();
        assert!(
            embedding(EmbeddingOptions {
                model,
                config: ProviderConfig::default(),
                params: None,
            })
            .is_ok(),
            "{reference}"
        );
    }
}

/// The `…_API_KEY` words of a text.
fn key_variables(text: &str) -> Vec<&str> {
    text.split(|c: char| !(c.is_ascii_uppercase() || c == '_'))
        .filter(|word| word.ends_with("_API_KEY"))
        .collect()
}

#[tokio::test]
async fn upp_034_242_the_readme_names_the_variable_each_provider_reads() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    for provider in ["openai", "openai-responses", "anthropic", "google"] {
        let row = readme
            .lines()
            .find(|line| line.starts_with(&format!("| `{provider}:")))
            .unwrap_or_else(|| panic!("README.md: no row for {provider} in the provider table"));
        let documented = key_variables(row);
        assert!(!documented.is_empty(), "{row}");
        if documented.iter().any(|v| std::env::var(v).is_ok()) {
            continue; // a real key is set: the fallback cannot be observed here
        }
        let reference = ProviderRegistry::with_builtins()
            .resolve(&format!("{provider}:some-model"))
            .unwrap();
        let config = ProviderConfig::default()
            .base_url("http://127.0.0.1:9/v1")
            .retry_strategy(weft_provider::NoRetry);
        let error = llm(LlmOptions::new(reference).config(config))
            .unwrap()
            .generate(&[], "hi")
            .await
            .unwrap_err();
        assert_eq!(
            error.code,
            ErrorCode::AuthenticationFailed,
            "{provider}: {error}"
        );
        assert_eq!(
            key_variables(&error.message),
            documented,
            "{provider}: the error names what README.md documents"
        );
    }
}

/// An embedding model of batch size 1 that counts the batches in flight at once.
#[derive(Debug, Default)]
struct CountingEmbeddings {
    in_flight: std::sync::atomic::AtomicUsize,
    most: std::sync::atomic::AtomicUsize,
}

impl weft_provider::EmbeddingModel for CountingEmbeddings {
    fn model_id(&self) -> &str {
        "counting"
    }
    fn provider(&self) -> &str {
        "counting"
    }
    fn max_batch_size(&self) -> usize {
        1
    }
    fn max_input_length(&self) -> Option<usize> {
        None
    }
    fn dimensions(&self) -> Option<usize> {
        Some(1)
    }
    fn supported_inputs(&self) -> &[&'static str] {
        &["text"]
    }
    fn embed(
        &self,
        request: weft_provider::EmbeddingRequest,
    ) -> weft_provider::tool::BoxFuture<'_, Result<weft_provider::EmbeddingResponse, UppError>>
    {
        Box::pin(async move {
            let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(now, Ordering::SeqCst);
            // Give the core the chance to start the next batch meanwhile.
            for _ in 0..3 {
                tokio::task::yield_now().await;
            }
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            Ok(weft_provider::EmbeddingResponse {
                embeddings: (0..request.inputs.len())
                    .map(|index| weft_provider::embedding::EmbeddingVector {
                        vector: weft_provider::embedding::VectorData::Floats(vec![1.0]),
                        index,
                        tokens: None,
                        metadata: None,
                    })
                    .collect(),
                usage: weft_provider::EmbeddingUsage { total_tokens: 1 },
                metadata: None,
            })
        })
    }
}

#[tokio::test]
async fn upp_155_embedding_batches_run_one_at_a_time_unless_asked() {
    for (concurrency, most) in [(None, 1), (Some(3), 3)] {
        let model = Arc::new(CountingEmbeddings::default());
        let shared = model.clone();
        let provider = Arc::new(
            weft_provider::Provider::new("counting", "1").with_embedding(
                move |_: &str, _: &Value| {
                    let bound: Arc<dyn weft_provider::EmbeddingModel> = shared.clone();
                    Ok(bound)
                },
            ),
        );
        let instance = embedding(EmbeddingOptions {
            model: provider.model("counting"),
            config: ProviderConfig::default(),
            params: None,
        })
        .unwrap();
        let inputs: Vec<EmbeddingInput> = (0..6).map(|i| format!("t{i}").into()).collect();
        let options = EmbedOptions {
            concurrency,
            ..EmbedOptions::default()
        };
        let result = instance.embed(inputs, options).await.unwrap();
        assert_eq!(result.embeddings.len(), 6);
        assert_eq!(
            model.most.load(Ordering::SeqCst),
            most,
            "concurrency {concurrency:?}"
        );
    }
}

#[tokio::test]
async fn upp_138_139_141_native_tools_from_the_helpers_follow_the_function_tools() {
    use weft_provider::adapters::{anthropic, google, openai_responses};
    let function = || {
        Tool::new(
            "lookup",
            "d",
            json!({"type": "object", "properties": {}}),
            |_a: Value, _c| async { Ok(Value::Null) },
        )
    };
    let anthropic_reply = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
        "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
        "usage": {"input_tokens": 3, "output_tokens": 1}});
    let google_reply = json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]},
        "finishReason": "STOP"}], "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1}});
    let cases = [
        (
            "anthropic:claude-sonnet-4-5",
            "/v1",
            anthropic_reply,
            vec![
                anthropic::tools::web_search(Some(2)),
                anthropic::tools::web_fetch(),
            ],
        ),
        (
            "google:gemini-2.5-flash",
            "/v1beta",
            google_reply,
            vec![
                google::tools::google_search(),
                google::tools::code_execution(),
                google::tools::url_context(),
            ],
        ),
        (
            "openai-responses:gpt-4.1",
            "/v1",
            responses_reply(vec![responses_message("ok")]),
            vec![
                openai_responses::tools::web_search(),
                openai_responses::tools::file_search(&["vs_1"]),
                openai_responses::tools::code_interpreter(),
                openai_responses::tools::image_generation(),
            ],
        ),
    ];
    for (reference, base_path, reply, native) in cases {
        let server = ReplayServer::start(vec![Reply::json(200, &reply)]).await;
        let model = ProviderRegistry::with_builtins()
            .resolve(reference)
            .unwrap();
        llm(LlmOptions::new(model)
            .config(config_no_retry(&server, base_path))
            .tool(function())
            .param("tools", Value::Array(native.clone())))
        .unwrap()
        .generate(&[], "search")
        .await
        .unwrap();
        let tools = server.received()[0].json()["tools"].clone();
        let tools = tools.as_array().unwrap();
        assert_eq!(tools.len(), 1 + native.len(), "{reference}: {tools:?}");
        assert_eq!(
            &tools[1..],
            native.as_slice(),
            "{reference}: native tools last, as given"
        );
        let first = tools[0].to_string();
        assert!(
            first.contains("lookup"),
            "{reference}: the function tool first: {first}"
        );
    }
}

fn responses_message(text: &str) -> Value {
    json!({"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

fn responses_reply(output: Vec<Value>) -> Value {
    json!({"id": "resp_1", "object": "response", "status": "completed", "model": "gpt-x",
        "output": output, "usage": {"input_tokens": 3, "output_tokens": 1}})
}

#[tokio::test]
async fn upp_140_142_native_tool_outputs_become_blocks_and_the_rest_is_kept() {
    // Responses: a generated image is an image block; the call item is kept without its data.
    let call = json!({"type": "image_generation_call", "id": "ig_1", "status": "completed",
        "output_format": "png", "result": "iVBORw0KGgo="});
    let server = ReplayServer::start(vec![Reply::json(
        200,
        &responses_reply(vec![call, responses_message("here it is")]),
    )])
    .await;
    let model = ProviderRegistry::with_builtins()
        .resolve("openai-responses:gpt-4.1")
        .unwrap();
    let turn = llm(LlmOptions::new(model).config(config_no_retry(&server, "/v1")))
        .unwrap()
        .generate(&[], "draw a cat")
        .await
        .unwrap();
    let message = Message::Assistant(turn.response.clone().into_assistant());
    let images = message.images();
    assert_eq!(images.len(), 1);
    assert_eq!(images[0].mime_type, "image/png");
    assert!(
        matches!(&images[0].source, ImageSource::Base64 { data } if data == "iVBORw0KGgo="),
        "{:?}",
        images[0].source
    );
    assert_eq!(turn.text(), "here it is");
    let kept = &turn.response.provider_metadata("openai-responses").unwrap()["extra_items"][0];
    assert_eq!(
        (&kept["type"], &kept["id"]),
        (&json!("image_generation_call"), &json!("ig_1"))
    );
    assert!(
        kept.get("result").is_none(),
        "the image is in the block, not twice"
    );

    // Gemini: inline image and audio parts are blocks; code execution parts are kept.
    let code = json!({"executableCode": {"language": "PYTHON", "code": "print(1)"}});
    let reply = json!({"candidates": [{"content": {"role": "model", "parts": [
            {"text": "done"},
            {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
            {"inlineData": {"mimeType": "audio/wav", "data": "AQID"}},
            code.clone()]},
        "finishReason": "STOP"}], "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1}});
    let server = ReplayServer::start(vec![Reply::json(200, &reply)]).await;
    let model = ProviderRegistry::with_builtins()
        .resolve("google:gemini-2.5-flash")
        .unwrap();
    let turn = llm(LlmOptions::new(model).config(config_no_retry(&server, "/v1beta")))
        .unwrap()
        .generate(&[], "run it")
        .await
        .unwrap();
    let message = Message::Assistant(turn.response.clone().into_assistant());
    assert_eq!(message.images().len(), 1);
    assert_eq!(message.audio()[0].data, Blob(vec![1, 2, 3]));
    assert_eq!(
        turn.response.provider_metadata("google").unwrap()["extraParts"],
        json!([code])
    );
}

#[test]
fn upp_079_080_tool_calls_and_results_require_their_fields() {
    let call = json!({"toolCallId": "c1", "toolName": "t", "arguments": {"a": 1}});
    assert!(serde_json::from_value::<ToolCall>(call.clone()).is_ok());
    for missing in ["toolCallId", "toolName", "arguments"] {
        let mut partial = call.clone();
        partial.as_object_mut().unwrap().remove(missing);
        assert!(
            serde_json::from_value::<ToolCall>(partial).is_err(),
            "a tool call without {missing}"
        );
    }
    let result = json!({"toolCallId": "c1", "result": {"ok": true}});
    let parsed: weft_provider::ToolResult = serde_json::from_value(result.clone()).unwrap();
    assert!(!parsed.is_error, "isError defaults to false");
    for missing in ["toolCallId", "result"] {
        let mut partial = result.clone();
        partial.as_object_mut().unwrap().remove(missing);
        assert!(
            serde_json::from_value::<weft_provider::ToolResult>(partial).is_err(),
            "a tool result without {missing}"
        );
    }
}

#[tokio::test]
async fn upp_009_custom_headers_go_with_every_request() {
    let tool_call = json!({"choices": [{"index": 0, "finish_reason": "tool_calls",
        "message": {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1",
            "type": "function", "function": {"name": "echo", "arguments": "{\"x\": 1}"}}]}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1}});
    // A retried request, then a tool round: three requests of one `generate()`.
    let server = ReplayServer::start(vec![
        Reply::json(429, &json!({"error": {"message": "slow down"}})).header("retry-after-ms", "1"),
        Reply::json(200, &tool_call),
        chat_ok(),
    ])
    .await;
    let reference = ProviderRegistry::with_builtins()
        .resolve("openai:gpt-4o")
        .unwrap();
    let config = adapter_support::config(&server, "/v1").header("X-Team", "evals");
    let turn = llm(LlmOptions::new(reference).config(config).tool(echo("echo")))
        .unwrap()
        .generate(&[], "go")
        .await
        .unwrap();
    assert_eq!(turn.cycles, 2);
    // Two embedding batches.
    let embeddings = |offset: usize| {
        Reply::json(
            200,
            &json!({"object": "list", "model": "m", "usage": {"prompt_tokens": 1, "total_tokens": 1},
                "data": [{"object": "embedding", "index": 0, "embedding": [offset as f32]}]}),
        )
    };
    let vectors = ReplayServer::start(vec![embeddings(0), embeddings(1)]).await;
    let instance = embedding(EmbeddingOptions {
        model: ProviderRegistry::with_builtins()
            .resolve("openai:text-embedding-3-small")
            .unwrap(),
        config: config_no_retry(&vectors, "/v1").header("X-Team", "evals"),
        params: None,
    })
    .unwrap();
    let options = EmbedOptions {
        batch_size: Some(1),
        ..EmbedOptions::default()
    };
    instance
        .embed(vec!["a".into(), "b".into()], options)
        .await
        .unwrap();
    let received = [server.received(), vectors.received()].concat();
    assert_eq!(received.len(), 5);
    for request in &received {
        assert_eq!(request.header("x-team"), Some("evals"), "{}", request.path);
        assert!(
            request.header("authorization").is_some(),
            "the required headers stay beside the custom one"
        );
    }
}

#[test]
fn upp_104_a_thread_keeps_order_and_its_methods_select_what_they_say() {
    let mut thread = weft_provider::Thread::new();
    thread.user("q1");
    thread.assistant("a1");
    thread.push([Message::user("q2"), Message::assistant("a2")]);
    let texts = |messages: &[Message]| messages.iter().map(Message::text).collect::<Vec<_>>();
    assert_eq!(texts(thread.messages()), ["q1", "a1", "q2", "a2"]);
    assert_eq!(
        thread.iter().map(Message::text).collect::<Vec<_>>(),
        ["q1", "a1", "q2", "a2"]
    );
    assert_eq!(texts(&thread.to_messages()), ["q1", "a1", "q2", "a2"]);
    let users: Vec<_> = thread
        .filter(weft_provider::MessageType::User)
        .into_iter()
        .map(Message::text)
        .collect();
    assert_eq!(users, ["q1", "q2"]);
    assert_eq!(texts(thread.tail(2)), ["q2", "a2"], "the last n");
    let middle = thread.slice(Some(1), Some(3));
    assert_eq!(texts(middle.messages()), ["a1", "q2"]);
    assert_eq!(texts(thread.slice(Some(2), None).messages()), ["q2", "a2"]);
    assert_eq!(thread.len(), 4, "slicing leaves the thread as it was");
    let json = serde_json::to_value(thread.to_json()).unwrap();
    let mut cleared = thread.clone();
    cleared.clear();
    assert!(cleared.is_empty());
    assert_eq!(cleared.id(), thread.id(), "clear keeps the id");
    assert_eq!(json["messages"].as_array().unwrap().len(), 4);
}

#[test]
fn upp_090_092_094_095_media_helpers_read_files_and_convert_both_ways() {
    use weft_provider::{Audio, Document, Image, Video};
    let dir = std::env::temp_dir().join(format!("weft-upp-media-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    };
    // Image: from a file, from base64, through a block and back.
    let image = Image::from_path(write("a.png", &[0x89, b'P', b'N', b'G'])).unwrap();
    assert_eq!(
        (image.mime_type.as_str(), image.to_base64().unwrap()),
        ("image/png", "iVBORw==".to_owned())
    );
    assert_eq!(
        Image::from_base64("iVBORw==", "image/png")
            .to_bytes()
            .unwrap(),
        [0x89, b'P', b'N', b'G']
    );
    assert_eq!(Image::from_block(&image.to_block()).unwrap(), image);
    assert!(Image::from_block(&ContentBlock::text("not an image")).is_err());
    // Document: a text file is text, base64 stays base64, blocks round-trip.
    let notes = Document::from_path(write("notes.txt", b"hello")).unwrap();
    assert!(notes.is_text() && notes.has_data());
    assert_eq!(notes.to_text().unwrap(), "hello");
    assert_eq!(notes.title.as_deref(), Some("notes.txt"));
    let pdf = Document::from_base64("JVBERi0=");
    assert!(pdf.is_pdf() && pdf.to_url().is_err());
    assert_eq!(pdf.to_base64().unwrap(), "JVBERi0=");
    assert_eq!(Document::from_block(&pdf.to_block()).unwrap(), pdf);
    // Audio and video: files, base64 (refused when it is not), data URLs, sizes.
    let audio = Audio::from_path(write("a.wav", &[1, 2, 3])).unwrap();
    assert_eq!(audio.mime_type, "audio/wav");
    assert_eq!(audio.to_data_url(), "data:audio/wav;base64,AQID");
    assert_eq!(Audio::from_base64("AQID", "audio/wav").unwrap(), audio);
    assert!(Audio::from_base64("not base64!", "audio/wav").is_err());
    let video = Video::from_path(write("a.mp4", &[4, 5])).unwrap();
    assert_eq!((video.mime_type.as_str(), video.size()), ("video/mp4", 2));
    assert_eq!(video.to_bytes(), [4, 5]);
    assert_eq!(Video::from_block(&video.to_block()).unwrap(), video);
    assert!(Video::from_block(&audio.to_block()).is_err());
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn upp_250_every_vendor_is_reached_over_tls_by_default() {
    // Through a proxy: an `https://` target is tunnelled (`CONNECT host:443`); a plain
    // `http://` one would be sent to the proxy as `POST http://…`.
    weft_provider::http::install_crypto_provider();
    for (reference, host) in [
        ("openai:gpt-4o", "api.openai.com:443"),
        ("openai-responses:gpt-4.1", "api.openai.com:443"),
        ("anthropic:claude-sonnet-4-5", "api.anthropic.com:443"),
        (
            "google:gemini-2.5-flash",
            "generativelanguage.googleapis.com:443",
        ),
    ] {
        let proxy = ReplayServer::start(vec![]).await;
        let client = reqwest::Client::builder()
            .proxy(reqwest::Proxy::all(proxy.url()).unwrap())
            .build()
            .unwrap();
        let config = ProviderConfig::default()
            .api_key(KEY)
            .http_client(client)
            .retry_strategy(weft_provider::NoRetry);
        let model = ProviderRegistry::with_builtins()
            .resolve(reference)
            .unwrap();
        let error = llm(LlmOptions::new(model).config(config))
            .unwrap()
            .generate(&[], "hi")
            .await
            .unwrap_err();
        let received = proxy.received();
        assert_eq!(received.len(), 1, "{reference}: {error}");
        assert_eq!(
            (received[0].method.as_str(), received[0].path.as_str()),
            ("CONNECT", host),
            "{reference}"
        );
    }
}

/// A successful reply in the dialect of `provider`.
fn ok_reply(provider: &str) -> Value {
    match provider {
        "anthropic" => json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 3, "output_tokens": 1}}),
        "google" => json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]},
            "finishReason": "STOP"}], "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1}}),
        "openai-responses" => responses_reply(vec![responses_message("ok")]),
        _ => json!({"choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": "ok"}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1}}),
    }
}

#[tokio::test]
async fn upp_203_each_adapter_takes_exactly_the_media_it_declares() {
    let image_base64 = ContentBlock::Image(ImageBlock {
        source: ImageSource::Base64 {
            data: "iVBORw==".into(),
        },
        mime_type: "image/png".into(),
        width: None,
        height: None,
    });
    let pdf = |source| document(source, "application/pdf");
    let media = [
        ("image", image_url("https://example.com/a.png")),
        ("image", image_base64),
        (
            "document",
            pdf(DocumentSource::Base64 {
                data: "JVBERi0=".into(),
            }),
        ),
        (
            "document",
            pdf(DocumentSource::Url {
                url: "https://example.com/a.pdf".into(),
            }),
        ),
        (
            "document",
            document(
                DocumentSource::Text {
                    data: "notes".into(),
                },
                "text/plain",
            ),
        ),
        ("audio", bytes_block("audio", "audio/wav")),
        ("video", bytes_block("video", "video/mp4")),
    ];
    let mut mismatches = Vec::new();
    for dialect in dialects() {
        for (kind, block) in &media {
            let server =
                ReplayServer::start(vec![Reply::json(200, &ok_reply(dialect.provider))]).await;
            let model = ProviderRegistry::with_builtins()
                .resolve(dialect.reference)
                .unwrap();
            let instance =
                llm(LlmOptions::new(model).config(config_no_retry(&server, dialect.base_path)))
                    .unwrap();
            let capabilities = instance.capabilities();
            let declared = match *kind {
                "image" => capabilities.image_input,
                "document" => capabilities.document_input,
                "audio" => capabilities.audio_input,
                _ => capabilities.video_input,
            };
            let input = vec![ContentBlock::text("look"), block.clone()];
            let outcome = instance.generate(&[], input).await;
            let sent = server.received().len();
            let what = format!("{} {kind} {block:?}", dialect.reference);
            match (declared, outcome) {
                (true, Ok(turn)) if turn.text() == "ok" && sent == 1 => {}
                (false, Err(error)) if error.code == ErrorCode::InvalidRequest && sent == 0 => {}
                // The one form an API with `documentInput` cannot take: Chat Completions has
                // no URL form for files, so a PDF by URL is refused before sending (UPP-212).
                (true, Err(error))
                    if dialect.reference.starts_with("openai")
                        && !dialect.reference.starts_with("openai-responses")
                        && matches!(
                            block,
                            ContentBlock::Document(DocumentBlock {
                                source: DocumentSource::Url { .. },
                                ..
                            })
                        )
                        && error.code == ErrorCode::InvalidRequest
                        && error.message.contains("cannot take a document by URL")
                        && sent == 0 => {}
                (declared, outcome) => mismatches.push(format!(
                    "{what}: declared {declared}, sent {sent}, got {:?}",
                    outcome.map(|t| t.text())
                )),
            }
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

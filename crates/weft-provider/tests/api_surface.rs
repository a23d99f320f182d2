//! The public surface of UPP-1.2 that is not the tool loop: providers and references (§4.5),
//! modality checks (§4.6), inputs (§5.3), the instance (§5.3), type guards (§6.9), `Thread`
//! as history (§8), retry strategy hooks (§4.3), a custom HTTP client (§16.2.2), and the
//! embedding core's batching (§12).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use weft_provider::adapters::scripted::{self, Script, ScriptedResponse};
use weft_provider::embedding::{EmbeddingModel, EmbeddingVector, VectorData};
use weft_provider::tool::BoxFuture;
use weft_provider::{
    ContentBlock, EmbedOptions, EmbeddingInput, EmbeddingOptions, EmbeddingRequest,
    EmbeddingResponse, EmbeddingUsage, ErrorCode, InferenceInput, LlmOptions, Message, MessageType,
    Modality, Provider, ProviderConfig, ProviderRegistry, RetryStrategy, Thread, UppError, ai,
    embedding, is_assistant_message, is_tool_result_message, is_user_message, llm,
};
use weft_testkit::{ReplayServer, Reply};

#[test]
fn upp_001_007_029_references_name_their_provider() {
    let registry = ProviderRegistry::with_builtins();
    let reference = registry.resolve("openai-compatible:llama3:8b").unwrap();
    assert_eq!(
        reference.model_id, "llama3:8b",
        "the model part may contain ':'"
    );
    assert_eq!(reference.provider.name, "openai-compatible");
    assert!(!reference.provider.version.is_empty());
    assert_eq!(
        reference.to_reference_string(),
        "openai-compatible:llama3:8b"
    );
    assert!(registry.names().any(|n| n == "scripted"));
    assert!(matches!(
        registry.resolve(":x"),
        Err(weft_provider::ModelRefError::Malformed(_))
    ));
}

#[tokio::test]
async fn upp_031_032_202_a_provider_without_the_modality_is_an_invalid_request() {
    let embedding_only = Arc::new(Provider::new("vectors", "1"));
    let error = llm(LlmOptions::new(embedding_only.model("m"))).unwrap_err();
    assert_eq!(
        (error.code, error.modality),
        (ErrorCode::InvalidRequest, Modality::Llm)
    );
    let error = embedding(EmbeddingOptions {
        model: scripted::model(Script::default()),
        config: ProviderConfig::default(),
        params: None,
    })
    .unwrap_err();
    assert_eq!(
        (error.code, error.modality),
        (ErrorCode::InvalidRequest, Modality::Embedding)
    );
}

#[tokio::test]
async fn upp_002_035_036_037_instance_surface_and_input_forms() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let model = scripted::function_model(move |request| {
        log.lock().unwrap().push(
            request
                .messages()
                .map(|m| (m.message_type(), m.content().len()))
                .collect::<Vec<_>>(),
        );
        Ok(ScriptedResponse::text("ok"))
    });
    let instance = ai::llm(
        LlmOptions::new(model)
            .system("sys")
            .param("temperature", json!(0.1)),
    )
    .unwrap();
    assert_eq!(instance.system(), Some("sys"));
    assert_eq!(instance.params().unwrap()["temperature"], 0.1);
    assert!(instance.capabilities().streaming);
    assert_eq!(instance.model().provider(), "scripted");

    instance.generate(&[], "one").await.unwrap();
    instance
        .generate(&[], ContentBlock::text("block"))
        .await
        .unwrap();
    instance
        .generate(
            &[],
            vec![
                InferenceInput::Text("a".into()),
                InferenceInput::Block(ContentBlock::text("b")),
            ],
        )
        .await
        .unwrap();
    instance
        .generate(&[], Message::user("whole message"))
        .await
        .unwrap();
    let mut thread = Thread::new();
    thread.user("before");
    thread.assistant("reply");
    let turn = instance.generate(&thread, "after").await.unwrap();
    thread.append(&turn);
    assert_eq!(thread.len(), 4, "UPP-105: a Thread is history");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen[0], [(MessageType::User, 1)]);
    assert_eq!(seen[1], [(MessageType::User, 1)]);
    assert_eq!(
        seen[2],
        [(MessageType::User, 2)],
        "consecutive inputs form one user message"
    );
    assert_eq!(
        seen[4],
        [
            (MessageType::User, 1),
            (MessageType::Assistant, 1),
            (MessageType::User, 1)
        ]
    );
}

#[test]
fn upp_096_type_guards() {
    let user = Message::user("u");
    let assistant = Message::assistant("a");
    assert!(is_user_message(&user) && !is_user_message(&assistant));
    assert!(is_assistant_message(&assistant));
    assert!(!is_tool_result_message(&assistant));
}

#[derive(Default)]
struct CountingStrategy {
    before: AtomicUsize,
    resets: AtomicUsize,
    retries: Mutex<Vec<(ErrorCode, u32)>>,
}

impl RetryStrategy for CountingStrategy {
    fn on_retry(&self, error: &UppError, attempt: u32) -> Option<Duration> {
        self.retries.lock().unwrap().push((error.code, attempt));
        (attempt < 2).then_some(Duration::from_millis(1))
    }
    fn before_request(&self) -> Option<Duration> {
        self.before.fetch_add(1, Ordering::SeqCst);
        Some(Duration::from_millis(1))
    }
    fn reset(&self) {
        self.resets.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn upp_017_018_019_234_retry_strategy_hooks_are_used() {
    let ok = json!({"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}]});
    let server =
        ReplayServer::start(vec![Reply::json(502, &json!({})), Reply::json(200, &ok)]).await;
    let strategy = Arc::new(CountingStrategy::default());
    let mut config = ProviderConfig::default().base_url(format!("{}/v1", server.url()));
    config.retry_strategy = Some(strategy.clone());
    let reference = ProviderRegistry::with_builtins()
        .resolve("openai-compatible:m")
        .unwrap();
    llm(LlmOptions::new(reference).config(config))
        .unwrap()
        .generate(&[], "hi")
        .await
        .unwrap();
    assert_eq!(
        strategy.before.load(Ordering::SeqCst),
        2,
        "before every request"
    );
    assert_eq!(
        *strategy.retries.lock().unwrap(),
        [(ErrorCode::ProviderError, 1)]
    );
    assert_eq!(
        strategy.resets.load(Ordering::SeqCst),
        1,
        "after the success"
    );
}

#[tokio::test]
async fn upp_232_a_custom_http_client_is_used() {
    let ok = json!({"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}]});
    let server = ReplayServer::start(vec![Reply::json(200, &ok)]).await;
    weft_provider::http::install_crypto_provider();
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("x-from-custom-client", "yes".parse().unwrap());
    let client = reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .unwrap();
    let config = ProviderConfig::default()
        .base_url(format!("{}/v1", server.url()))
        .http_client(client);
    let reference = ProviderRegistry::with_builtins()
        .resolve("openai-compatible:m")
        .unwrap();
    llm(LlmOptions::new(reference).config(config))
        .unwrap()
        .generate(&[], "hi")
        .await
        .unwrap();
    assert_eq!(
        server.received()[0].header("x-from-custom-client"),
        Some("yes")
    );
}

#[derive(Debug)]
struct FakeEmbeddings {
    batches: Mutex<Vec<usize>>,
}

impl EmbeddingModel for FakeEmbeddings {
    fn model_id(&self) -> &str {
        "fake"
    }
    fn provider(&self) -> &str {
        "fake"
    }
    fn max_batch_size(&self) -> usize {
        3
    }
    fn max_input_length(&self) -> Option<usize> {
        None
    }
    fn dimensions(&self) -> Option<usize> {
        Some(2)
    }
    fn supported_inputs(&self) -> &[&'static str] {
        &["text"]
    }
    fn embed(
        &self,
        request: EmbeddingRequest,
    ) -> BoxFuture<'_, Result<EmbeddingResponse, UppError>> {
        self.batches.lock().unwrap().push(request.inputs.len());
        Box::pin(async move {
            let embeddings = request
                .inputs
                .iter()
                .enumerate()
                .map(|(i, input)| {
                    let EmbeddingInput::Text(text) = input else {
                        unreachable!("text only")
                    };
                    let value: f32 = text.parse().unwrap_or(0.0);
                    // Every other batch answers in base64 (little-endian f32).
                    let vector = if i % 2 == 0 {
                        VectorData::Floats(vec![value, -value])
                    } else {
                        use base64::Engine as _;
                        let bytes: Vec<u8> = [value, -value]
                            .iter()
                            .flat_map(|f| f.to_le_bytes())
                            .collect();
                        VectorData::Base64(base64::engine::general_purpose::STANDARD.encode(bytes))
                    };
                    EmbeddingVector {
                        vector,
                        index: i,
                        tokens: Some(1),
                        metadata: None,
                    }
                })
                .rev()
                .collect();
            Ok(EmbeddingResponse {
                embeddings,
                usage: EmbeddingUsage {
                    total_tokens: request.inputs.len() as u64,
                },
                metadata: None,
            })
        })
    }
}

#[tokio::test]
async fn upp_153_to_163_216_embedding_core_batches_orders_and_decodes() {
    let fake = Arc::new(FakeEmbeddings {
        batches: Mutex::new(Vec::new()),
    });
    let shared = fake.clone();
    let provider = Arc::new(Provider::new("fake", "1").with_embedding(
        move |_: &str, _: &Value| {
            let model: Arc<dyn EmbeddingModel> = shared.clone();
            Ok(model)
        },
    ));
    let instance = embedding(EmbeddingOptions {
        model: provider.model("fake"),
        config: ProviderConfig::default(),
        params: None,
    })
    .unwrap();
    let inputs: Vec<EmbeddingInput> = (0..8)
        .map(|i| EmbeddingInput::from(i.to_string()))
        .collect();
    let mut progress = Vec::new();
    let result = instance
        .embed_with_progress(
            inputs,
            EmbedOptions {
                batch_size: Some(100),
                ..EmbedOptions::default()
            },
            |batch, done, total| {
                progress.push((batch.len(), done, total));
            },
        )
        .await
        .unwrap();
    assert_eq!(
        *fake.batches.lock().unwrap(),
        [3, 3, 2],
        "never more than max_batch_size"
    );
    assert_eq!(progress, [(3, 3, 8), (3, 6, 8), (2, 8, 8)]);
    assert_eq!(result.usage.total_tokens, 8);
    for (i, e) in result.embeddings.iter().enumerate() {
        assert_eq!(e.index, i);
        assert_eq!(e.vector, vec![i as f32, -(i as f32)]);
        assert_eq!(e.dimensions, 2);
    }
    let image = weft_provider::Image::from_url("https://example.com/a.png", "image/png").to_block();
    let ContentBlock::Image(image) = image else {
        unreachable!()
    };
    let error = instance
        .embed(vec![EmbeddingInput::Image(image)], EmbedOptions::default())
        .await
        .unwrap_err();
    assert_eq!(
        (error.code, error.modality),
        (ErrorCode::InvalidRequest, Modality::Embedding)
    );
    let signal = tokio_util::sync::CancellationToken::new();
    signal.cancel();
    let error = instance
        .embed(
            vec!["1".into()],
            EmbedOptions {
                signal: Some(signal),
                ..EmbedOptions::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::Cancelled, "UPP-156");
}

//! Embedding handlers over real HTTP against the local replay server: OpenAI `/embeddings`
//! (max batch 2048), Gemini `batchEmbedContents` (max batch 100) and an OpenAI-compatible
//! server (Ollama's `/v1/embeddings`). No request may hold more inputs than the model's
//! `max_batch_size`; vectors come back as f32 (base64 decoded by the core), in input order,
//! with usage and metadata kept.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod adapter_support;

use adapter_support::KEY;
use base64::Engine as _;
use serde_json::{Value, json};
use weft_provider::{
    EmbedOptions, EmbeddingInput, EmbeddingInputType, EmbeddingOptions, ErrorCode, Modality,
    NoRetry, ProviderConfig, ProviderRegistry, embedding,
};
use weft_testkit::{ReplayServer, Reply};

fn openai_reply(count: usize, offset: usize, base64: bool) -> Reply {
    let data: Vec<Value> = (0..count)
        .map(|i| {
            let value = (offset + i) as f32;
            let embedding = if base64 {
                let bytes: Vec<u8> = [value, 0.5].iter().flat_map(|f| f.to_le_bytes()).collect();
                json!(base64::engine::general_purpose::STANDARD.encode(bytes))
            } else {
                json!([value, 0.5])
            };
            json!({"object": "embedding", "index": i, "embedding": embedding})
        })
        .collect();
    Reply::json(
        200,
        &json!({"object": "list", "data": data, "model": "text-embedding-3-small",
                "usage": {"prompt_tokens": count, "total_tokens": count}}),
    )
}

fn instance(
    reference: &str,
    config: ProviderConfig,
    params: Option<Value>,
) -> weft_provider::EmbeddingInstance {
    let model = ProviderRegistry::with_builtins()
        .resolve(reference)
        .unwrap();
    embedding(EmbeddingOptions {
        model,
        config,
        params: params.and_then(|p| p.as_object().cloned()),
    })
    .unwrap()
}

fn texts(count: usize) -> Vec<EmbeddingInput> {
    (0..count)
        .map(|i| EmbeddingInput::from(format!("text {i}")))
        .collect()
}

#[tokio::test]
async fn openai_splits_at_2048_and_decodes_base64() {
    let server = ReplayServer::start(vec![
        openai_reply(2048, 0, false),
        openai_reply(2, 2048, true),
    ])
    .await;
    let config = ProviderConfig::default()
        .base_url(format!("{}/v1", server.url()))
        .api_key(KEY);
    let instance = instance(
        "openai:text-embedding-3-small",
        config,
        Some(json!({"dimensions": 2})),
    );
    assert_eq!(instance.model().max_batch_size(), 2048);
    let result = instance
        .embed(texts(2050), EmbedOptions::default())
        .await
        .unwrap();
    assert_eq!(result.embeddings.len(), 2050);
    assert_eq!(result.embeddings[2049].vector, vec![2049.0, 0.5]);
    assert_eq!(result.embeddings[2049].index, 2049);
    assert_eq!(result.embeddings[7].dimensions, 2);
    assert_eq!(result.usage.total_tokens, 2050);
    let batches = result.metadata.unwrap()["batches"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(batches, 2);
    let received = server.received();
    assert_eq!(received.len(), 2);
    for request in &received {
        assert_eq!(request.path, "/v1/embeddings");
        assert_eq!(
            request.header("authorization"),
            Some(format!("Bearer {KEY}").as_str())
        );
        let body = request.json();
        assert!(body["input"].as_array().unwrap().len() <= 2048);
        assert_eq!(body["dimensions"], 2);
        assert_eq!(body["model"], "text-embedding-3-small");
    }
    assert_eq!(
        received[1].json()["input"],
        json!(["text 2048", "text 2049"])
    );
}

#[tokio::test]
async fn smaller_batch_size_is_respected() {
    let server = ReplayServer::start(vec![
        openai_reply(3, 0, false),
        openai_reply(3, 3, false),
        openai_reply(1, 6, false),
    ])
    .await;
    let config = ProviderConfig::default()
        .base_url(server.url())
        .api_key(KEY);
    let instance = instance("openai:text-embedding-3-small", config, None);
    let options = EmbedOptions {
        batch_size: Some(3),
        ..EmbedOptions::default()
    };
    let result = instance.embed(texts(7), options).await.unwrap();
    assert_eq!(
        result
            .embeddings
            .iter()
            .map(|e| e.vector[0])
            .collect::<Vec<_>>(),
        [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    );
    let sizes: Vec<usize> = server
        .received()
        .iter()
        .map(|r| r.json()["input"].as_array().unwrap().len())
        .collect();
    assert_eq!(sizes, [3, 3, 1]);
}

fn gemini_reply(count: usize, offset: usize) -> Reply {
    let embeddings: Vec<Value> = (0..count)
        .map(|i| json!({"values": [(offset + i) as f64, -1.0, 0.25]}))
        .collect();
    Reply::json(200, &json!({"embeddings": embeddings}))
}

#[tokio::test]
async fn gemini_splits_at_100_with_task_type_and_params() {
    let server = ReplayServer::start(vec![
        gemini_reply(100, 0),
        gemini_reply(100, 100),
        gemini_reply(50, 200),
    ])
    .await;
    let config = ProviderConfig::default()
        .base_url(format!("{}/v1beta", server.url()))
        .api_key(KEY);
    let instance = instance(
        "google:gemini-embedding-001",
        config,
        Some(json!({"outputDimensionality": 3})),
    );
    let options = EmbedOptions {
        input_type: Some(EmbeddingInputType::Query),
        ..EmbedOptions::default()
    };
    let result = instance.embed(texts(250), options).await.unwrap();
    assert_eq!(result.embeddings.len(), 250);
    assert_eq!(result.embeddings[249].vector, vec![249.0, -1.0, 0.25]);
    let received = server.received();
    let sizes: Vec<usize> = received
        .iter()
        .map(|r| r.json()["requests"].as_array().unwrap().len())
        .collect();
    assert_eq!(sizes, [100, 100, 50]);
    let first = received[0].json();
    assert_eq!(
        received[0].path,
        "/v1beta/models/gemini-embedding-001:batchEmbedContents"
    );
    assert_eq!(received[0].header("x-goog-api-key"), Some(KEY));
    assert_eq!(
        first["requests"][0],
        json!({"model": "models/gemini-embedding-001", "content": {"parts": [{"text": "text 0"}]},
               "taskType": "RETRIEVAL_QUERY", "outputDimensionality": 3})
    );
}

#[tokio::test]
async fn compatible_server_without_key_keeps_item_metadata() {
    let reply = Reply::json(
        200,
        &json!({"object": "list", "model": "nomic-embed-text",
        "data": [{"object": "embedding", "index": 0, "embedding": [0.1, 0.2], "truncated": false}],
        "usage": {"prompt_tokens": 4, "total_tokens": 4}}),
    );
    let server = ReplayServer::start(vec![reply]).await;
    let config = ProviderConfig::default().base_url(format!("{}/v1", server.url()));
    let instance = instance("openai-compatible:nomic-embed-text", config, None);
    let result = instance
        .embed(vec!["hello".into()], EmbedOptions::default())
        .await
        .unwrap();
    assert_eq!(result.embeddings[0].vector, vec![0.1, 0.2]);
    assert_eq!(
        result.embeddings[0].metadata.as_ref().unwrap()["openai-compatible"]["truncated"],
        false
    );
    assert_eq!(result.usage.total_tokens, 4);
    let request = &server.received()[0];
    assert_eq!(request.path, "/v1/embeddings");
    if std::env::var("WEFT_OPENAI_COMPATIBLE_API_KEY").is_err() {
        assert_eq!(request.header("authorization"), None);
    }
}

#[tokio::test]
async fn embedding_errors_are_normalized_with_their_modality() {
    let server = ReplayServer::start(vec![
        Reply::json(
            401,
            &json!({"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}}),
        ),
        Reply::json(
            429,
            &json!({"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}),
        )
        .header("retry-after", "0"),
        gemini_reply(1, 0),
    ])
    .await;
    let openai = instance(
        "openai:text-embedding-3-small",
        ProviderConfig::default()
            .base_url(server.url())
            .api_key(KEY)
            .retry_strategy(NoRetry),
        None,
    );
    let error = openai
        .embed(texts(1), EmbedOptions::default())
        .await
        .unwrap_err();
    assert_eq!(
        (error.code, error.modality),
        (ErrorCode::AuthenticationFailed, Modality::Embedding)
    );
    assert!(error.cause.is_some());
    let gemini = instance(
        "google:gemini-embedding-001",
        ProviderConfig::default()
            .base_url(server.url())
            .api_key(KEY),
        None,
    );
    let result = gemini
        .embed(texts(1), EmbedOptions::default())
        .await
        .unwrap();
    assert_eq!(result.embeddings.len(), 1);
    assert_eq!(server.received().len(), 3);
}

#[test]
fn providers_without_embeddings_say_so() {
    let model = ProviderRegistry::with_builtins()
        .resolve("anthropic:claude-x")
        .unwrap();
    let error = embedding(EmbeddingOptions {
        model,
        config: ProviderConfig::default(),
        params: None,
    })
    .unwrap_err();
    assert_eq!(error.code, ErrorCode::InvalidRequest);
}

//! Provider adapters. Only an adapter knows its vendor's wire JSON; adapters never import
//! each other (shared pieces live in [`crate::http`], [`crate::sse`], [`accumulate`] and the
//! private `driver` module).
//!
//! | reference | module | API |
//! |---|---|---|
//! | `openai:MODEL` | [`openai_chat`] | OpenAI Chat Completions (+ embeddings) |
//! | `openai-compatible:MODEL` | [`openai_chat`] | any Chat Completions server (+ `/embeddings`) |
//! | `openai-responses:MODEL` | [`openai_responses`] | OpenAI Responses |
//! | `anthropic:MODEL` | [`anthropic`] | Anthropic Messages |
//! | `google:MODEL` | [`google`] | Gemini `generateContent` (+ `batchEmbedContents`) |
//! | `scripted:…` | [`scripted`] | a scripted test model |
//!
//! UPP-012 says the OpenAI factory defaults to the Responses API with an `api` option for
//! Chat Completions. Weft uses explicit prefixes instead (`openai:` is Chat Completions,
//! `openai-responses:` the Responses API), so a model reference always names its wire dialect.

pub mod accumulate;
pub mod anthropic;
pub(crate) mod driver;
pub mod google;
pub mod openai_chat;
pub mod openai_embeddings;
pub mod openai_responses;
pub mod scripted;

use std::sync::Arc;

use crate::provider::{Provider, ProviderRegistry};

/// Registers every adapter of this crate under its model-reference prefix.
pub fn register_builtins(registry: &mut ProviderRegistry) {
    registry.register(scripted::NAME, scripted::provider);
    registry.register(openai_chat::COMPATIBLE, || {
        with_embeddings(
            openai_chat::compatible_provider(),
            openai_embeddings::compatible_handler(),
        )
    });
    registry.register(openai_chat::OPENAI, || {
        with_embeddings(
            openai_chat::openai_provider(),
            openai_embeddings::openai_handler(),
        )
    });
    registry.register(openai_responses::NAME, openai_responses::provider);
    registry.register(anthropic::NAME, anthropic::provider);
    registry.register(google::NAME, google::provider);
}

fn with_embeddings(
    provider: Arc<Provider>,
    handler: impl crate::embedding::EmbeddingHandler + 'static,
) -> Arc<Provider> {
    Arc::new(Arc::unwrap_or_clone(provider).with_embedding(handler))
}

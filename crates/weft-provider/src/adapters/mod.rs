//! Provider adapters. Only an adapter knows its vendor's wire JSON; adapters never import
//! each other (shared pieces live in [`crate::http`], [`crate::sse`] and [`accumulate`]).

pub mod accumulate;
pub mod openai_chat;
pub mod scripted;

use crate::provider::ProviderRegistry;

/// Registers every adapter of this crate under its model-reference prefix.
pub fn register_builtins(registry: &mut ProviderRegistry) {
    registry.register(scripted::NAME, scripted::provider);
    registry.register(openai_chat::COMPATIBLE, openai_chat::compatible_provider);
    registry.register(openai_chat::OPENAI, openai_chat::openai_provider);
}

//! Images and models without vision (SA-090, excerpts D §4): when the provider of a session's
//! model declares no image input (`LlmCapabilities::image_input`, e.g. the embedded local
//! model), every image part of a request — an image block of a message, or an image part
//! of a tool result given as content parts — is replaced, at request time, by the text
//! [`IMAGE_OMITTED`]; the conversation the session keeps (its states, checkpoints, the
//! messages' attachments) is not changed. A model with image input gets the request
//! unchanged.

use std::sync::Arc;

use serde_json::Value;
use weft_provider::provider::{LlmCapabilities, LlmModel, Provider};
use weft_provider::tool::BoxFuture;
use weft_provider::{
    ContentBlock, LlmRequest, LlmResponse, LlmStream, Message, ModelReference, UppError,
};

/// What a model without vision reads in place of an image.
pub const IMAGE_OMITTED: &str = "[image omitted: the model has no vision]";

/// `model`, its requests without image parts when the model it binds to takes no image
/// input. The model is bound when the session binds it (as before); binding errors come
/// from there unchanged.
pub(crate) fn without_images_if_blind(model: ModelReference) -> ModelReference {
    let original = model.provider.clone();
    let mut provider = Provider::new(original.name.clone(), original.version.clone()).with_llm(
        move |model_id: &str, options: &Value| {
            let inner = original.llm_handler()?.bind(model_id, options)?;
            Ok(if inner.capabilities().image_input {
                inner
            } else {
                Arc::new(Blind { inner }) as Arc<dyn LlmModel>
            })
        },
    );
    provider.default_config = model.provider.default_config.clone();
    ModelReference {
        provider: Arc::new(provider),
        ..model
    }
}

/// A model without image input, its requests' images replaced by [`IMAGE_OMITTED`].
#[derive(Debug)]
struct Blind {
    inner: Arc<dyn LlmModel>,
}

impl Blind {
    fn filtered(request: LlmRequest) -> LlmRequest {
        if !request.messages.iter().any(|m| has_image(m)) {
            return request;
        }
        let messages = request
            .messages
            .iter()
            .map(|m| {
                if has_image(m) {
                    Arc::new(without_images(m))
                } else {
                    m.clone()
                }
            })
            .collect();
        LlmRequest {
            messages: Arc::new(messages),
            ..request
        }
    }
}

/// Whether `message` holds an image: an image block, or an image part of a tool result
/// given as content parts (`[{"type": "text", …}, {"type": "image", …}]`, the form the
/// adapters pass to the provider as is).
fn has_image(message: &Message) -> bool {
    match message {
        Message::ToolResult(m) => m.results.iter().any(|r| image_parts(&r.result).is_some()),
        _ => message
            .content()
            .iter()
            .any(|b| matches!(b, ContentBlock::Image(_))),
    }
}

/// The parts of a tool result given as content parts, when one of them is an image.
fn image_parts(result: &Value) -> Option<&Vec<Value>> {
    let Value::Array(parts) = result else {
        return None;
    };
    let is_part = |p: &Value| p.get("type").is_some_and(Value::is_string);
    let is_image = |p: &Value| p.get("type").and_then(Value::as_str) == Some("image");
    (parts.iter().all(is_part) && parts.iter().any(is_image)).then_some(parts)
}

/// `message` with each image replaced by the text [`IMAGE_OMITTED`].
fn without_images(message: &Message) -> Message {
    let mut message = message.clone();
    let content = match &mut message {
        Message::User(m) => &mut m.content,
        Message::Assistant(m) => &mut m.content,
        Message::ToolResult(m) => {
            for result in &mut m.results {
                if let Some(parts) = image_parts(&result.result) {
                    let parts = parts
                        .iter()
                        .map(|p| {
                            if p.get("type").and_then(Value::as_str) == Some("image") {
                                serde_json::json!({"type": "text", "text": IMAGE_OMITTED})
                            } else {
                                p.clone()
                            }
                        })
                        .collect();
                    result.result = Value::Array(parts);
                }
            }
            return message;
        }
    };
    for block in content.iter_mut() {
        if matches!(block, ContentBlock::Image(_)) {
            *block = ContentBlock::text(IMAGE_OMITTED);
        }
    }
    message
}

impl LlmModel for Blind {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn provider(&self) -> &str {
        self.inner.provider()
    }

    fn capabilities(&self) -> LlmCapabilities {
        // Images are taken (and left out here), so the request is not refused for them.
        LlmCapabilities {
            image_input: true,
            ..self.inner.capabilities()
        }
    }

    fn complete(&self, request: LlmRequest) -> BoxFuture<'_, Result<LlmResponse, UppError>> {
        self.inner.complete(Self::filtered(request))
    }

    fn stream(&self, request: LlmRequest) -> BoxFuture<'_, Result<LlmStream, UppError>> {
        self.inner.stream(Self::filtered(request))
    }
}

//! Recorded model responses (RUNTIME.md §2): a run's model is wrapped so that every response
//! is stored **before its tools run**, at its position in the run (the conversation scope and
//! the number of messages the request carried). When a resumed run reaches a position whose
//! response is recorded, the recording is returned and the model is not asked again: real
//! providers give new call ids on every answer, so asking again would make recorded tool calls
//! unrecognisable and run their side effects twice.
//!
//! **Invariant:** within one scope the conversation only grows between model calls (a
//! compressed conversation starts a new generation of the scope), so the message count
//! identifies a request; the request's fingerprint (count and last message) is
//! checked on replay, and a different one is a divergence, reported, never replayed.

use std::borrow::Borrow;
use std::sync::Arc;

use futures_util::StreamExt as _;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use weft_provider::pricing::Quote;
use weft_provider::provider::{LlmCapabilities, LlmModel, Provider};
use weft_provider::tool::BoxFuture;
use weft_provider::{
    AssistantMessage, ErrorCode, LlmRequest, LlmResponse, LlmStream, LlmStreamPart, Message,
    ModelReference, TokenUsage, UppError,
};
use weft_store::{RecordedResponse, Responses as _};

use crate::cost::cost_fields;
use crate::ledger::RunContext;
use crate::spec::hex;
use crate::trace::ChatSpan;

/// `model` wrapped so its responses are recorded in (and replayed from) `run`'s store, in
/// conversation scope `scope` (the checkpoint thread: each `dual_ai` side has its own).
///
/// # Errors
/// When `model` cannot be bound.
pub fn recorded_model(
    model: &ModelReference,
    run: Arc<RunContext>,
    scope: impl Into<String>,
) -> Result<ModelReference, UppError> {
    let inner = model
        .provider
        .llm_handler()?
        .bind(&model.model_id, &model.options)?;
    // Priced once, when bound: every call of this model is charged at this price.
    let reference = format!("{}:{}", model.provider.name, model.model_id);
    let quote = run.prices().quote(&model.provider.name, &model.model_id);
    let wrapped: Arc<dyn LlmModel> = Arc::new(RecordedModel {
        inner,
        run,
        scope: scope.into(),
        priced: Arc::new((reference, quote)),
        generation: std::sync::Mutex::default(),
    });
    let mut provider = Provider::new(model.provider.name.clone(), model.provider.version.clone())
        .with_llm(move |_id: &str, _options: &Value| Ok(wrapped.clone()));
    provider.default_config = model.provider.default_config.clone();
    Ok(ModelReference {
        model_id: model.model_id.clone(),
        provider: Arc::new(provider),
        options: Value::Null,
    })
}

struct RecordedModel {
    inner: Arc<dyn LlmModel>,
    run: Arc<RunContext>,
    scope: String,
    /// The model's reference and its price (`None`: unknown).
    priced: Arc<(String, Option<Quote>)>,
    /// The compression generation of the conversation as far as the last request read it,
    /// so that a request's position reads only the messages added since (no O(history) work
    /// per model call).
    generation: std::sync::Mutex<GenerationScan>,
}

/// How far [`RecordedModel::position`] read a conversation for its compression markers.
#[derive(Debug, Default)]
struct GenerationScan {
    /// Messages read.
    len: usize,
    /// The ids of the first and the last message read: the next request continues the same
    /// conversation only when both are still there (a compressed or another conversation is
    /// read again from its start).
    first_id: String,
    last_id: String,
    /// The fold so far ([`crate::profile::context::newest_marker`]).
    best: Option<(u64, bool)>,
}

impl GenerationScan {
    /// The compression generation label of `messages` (as
    /// [`crate::profile::context::generation_label`]), reading only the messages added since
    /// the last call when `messages` continues the conversation read then.
    fn read<M: Borrow<Message>>(&mut self, messages: &[M]) -> Option<String> {
        let continues = self.len > 0
            && self.len <= messages.len()
            && messages[0].borrow().id() == self.first_id
            && messages[self.len - 1].borrow().id() == self.last_id;
        if !continues {
            *self = GenerationScan::default();
        }
        let best = messages[self.len..].iter().fold(self.best, |best, m| {
            crate::profile::context::newest_marker(best, m.borrow())
        });
        if let (Some(first), Some(last)) = (messages.first(), messages.last()) {
            if !continues {
                self.first_id = first.borrow().id().to_owned();
            }
            self.len = messages.len();
            self.last_id = last.borrow().id().to_owned();
            self.best = best;
        }
        crate::profile::context::label(best)
    }
}

impl std::fmt::Debug for RecordedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordedModel")
            .field("model", &self.inner.model_id())
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

/// The fingerprint of a request: its message count and its last message **without** the
/// message's generated `id` and `timestamp` (a step taken again rebuilds its input — side B's
/// input in a `dual_ai` session, say — with a new id and time, and it is still the same
/// conversation). Written as `2:HEX`.
fn fingerprint<M: Borrow<Message>>(messages: &[M]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(messages.len().to_le_bytes());
    if let Some(last) = messages.last()
        && let Ok(mut value) = serde_json::to_value(last.borrow())
    {
        if let Some(object) = value.as_object_mut() {
            object.remove("id");
            object.remove("timestamp");
        }
        if let Ok(json) = serde_json::to_vec(&value) {
            hasher.update(json);
        }
    }
    format!("2:{}", hex(&hasher.finalize()[..12]))
}

/// The fingerprint records written before `2:` (the whole last message, id and time
/// included), so runs recorded by an earlier build still resume.
fn legacy_fingerprint<M: Borrow<Message>>(messages: &[M]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(messages.len().to_le_bytes());
    if let Some(last) = messages.last()
        && let Ok(json) = serde_json::to_vec(last.borrow())
    {
        hasher.update(json);
    }
    hex(&hasher.finalize()[..12])
}

/// Whether `recorded` is the fingerprint of `messages` (in its own format).
fn same_request<M: Borrow<Message>>(recorded: &str, messages: &[M]) -> bool {
    if recorded.starts_with("2:") {
        recorded == fingerprint(messages)
    } else {
        recorded == legacy_fingerprint(messages)
    }
}

fn encode(response: &LlmResponse, priced: &Value) -> Value {
    let mut value = json!({"message": response.message, "usage": response.usage,
           "stopReason": response.stop_reason, "data": response.data});
    if let (Value::Object(value), Value::Object(priced)) = (&mut value, priced) {
        value.extend(priced.clone());
    }
    value
}

fn decode(value: &Value, provider: &str) -> Result<LlmResponse, UppError> {
    let bad = |e: serde_json::Error| {
        UppError::llm(
            ErrorCode::InvalidResponse,
            provider,
            format!("the recorded response cannot be read: {e}"),
        )
    };
    let message: AssistantMessage =
        serde_json::from_value(value["message"].clone()).map_err(bad)?;
    let usage: TokenUsage = serde_json::from_value(value["usage"].clone()).map_err(bad)?;
    Ok(LlmResponse {
        message,
        usage,
        stop_reason: value["stopReason"]
            .as_str()
            .unwrap_or("end_turn")
            .to_owned(),
        data: value.get("data").filter(|d| !d.is_null()).cloned(),
    })
}

impl RecordedModel {
    fn position(&self, request: &LlmRequest) -> String {
        let messages = &request.messages;
        match self.generation.lock() {
            Ok(mut scan) => at(&self.scope, messages.len(), scan.read(messages)),
            Err(_) => position(&self.scope, messages),
        }
    }

    /// The response of a step that took queued tool calls (`queueTool()`): the calls,
    /// recorded at the request's position like a model's response (a resume replays it),
    /// without asking the model. `None` when the step took none.
    async fn queued(&self, request: &LlmRequest) -> Result<Option<LlmResponse>, UppError> {
        let calls = self.run.queued_calls();
        if calls.is_empty() {
            return Ok(None);
        }
        // Flagged as the queue's (metadata `queued: true`), not the model's answer.
        let mut metadata = weft_provider::Metadata::new();
        metadata.insert(crate::ledger::QUEUED.into(), Value::Bool(true));
        let options = weft_provider::MessageOptions {
            id: None,
            metadata: Some(metadata),
        };
        let message = AssistantMessage::new(Vec::new(), calls, options).map_err(|e| {
            UppError::llm(
                ErrorCode::InvalidRequest,
                self.inner.provider(),
                e.to_string(),
            )
        })?;
        let response = LlmResponse {
            message,
            usage: TokenUsage::default(),
            stop_reason: "tool_use".into(),
            data: None,
        };
        record(
            &self.run,
            self.inner.provider(),
            &self.priced,
            self.position(request),
            fingerprint(&request.messages),
            &response,
        )
        .await?;
        Ok(Some(response))
    }

    /// The recorded response at the request's position, if any.
    fn replay(&self, request: &LlmRequest) -> Result<Option<LlmResponse>, UppError> {
        let position = self.position(request);
        let Some(recorded) = self.run.recorded_response(&position) else {
            return Ok(None);
        };
        if !same_request(&recorded.fingerprint, &request.messages) {
            let message = format!(
                "the run diverged from its record at {position}: the conversation there is not the one the recorded \
                 response answered (was the project or the model changed since?); it was not replayed"
            );
            self.run.fail(message.clone());
            return Err(UppError::llm(
                ErrorCode::InvalidRequest,
                self.inner.provider(),
                message,
            ));
        }
        // Already counted against the budget: the run's recorded responses are what it spent.
        let response = decode(&recorded.response, self.inner.provider())?;
        self.run.begin_round(&position, &response.message);
        Ok(Some(response))
    }
}

/// The position of a request with `messages` in `scope`: `scope@LEN`, or `scope~G@LEN` once
/// the runtime profile compressed the conversation (generation `G`; `Gs` for the summary
/// request of compression `G`): a compressed conversation is shorter than before, and
/// within one generation it only grows again.
fn position<M: Borrow<Message>>(scope: &str, messages: &[M]) -> String {
    at(
        scope,
        messages.len(),
        crate::profile::context::generation_label(messages),
    )
}

fn at(scope: &str, len: usize, generation: Option<String>) -> String {
    match generation {
        Some(generation) => format!("{scope}~{generation}@{len}"),
        None => format!("{scope}@{len}"),
    }
}

/// Stores `response` at its position (committed before returning in `sync`
/// durability) and makes its calls the current round of the ledger.
async fn record(
    run: &RunContext,
    provider: &str,
    priced: &(String, Option<Quote>),
    position: String,
    fingerprint: String,
    response: &LlmResponse,
) -> Result<(), UppError> {
    // Priced now that its usage is known, with the price kept beside it.
    let (cost, fields) = cost_fields(&priced.0, priced.1.as_ref(), &response.usage);
    let record = RecordedResponse {
        run_id: run.run_id().to_owned(),
        position: position.clone(),
        fingerprint,
        response: encode(response, &fields),
    };
    if let Err(error) = run.store().record_response(&record).await {
        // Without the record a crash would re-ask the model: refuse to go on.
        return Err(UppError::llm(
            ErrorCode::InvalidRequest,
            provider,
            format!(
                "the model's response could not be recorded, so its tools were not run: {error}"
            ),
        ));
    }
    run.spend(&response.usage, cost);
    run.begin_round(&position, &response.message);
    Ok(())
}

/// Refuses a model call the run's budget does not allow (the run then ends failed).
fn within_budget(run: &RunContext, provider: &str, priced: bool) -> Result<(), UppError> {
    run.check_budget(priced)
        .map_err(|reason| UppError::llm(ErrorCode::InvalidRequest, provider, reason))
}

impl LlmModel for RecordedModel {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn provider(&self) -> &str {
        self.inner.provider()
    }

    fn capabilities(&self) -> LlmCapabilities {
        self.inner.capabilities()
    }

    fn complete(&self, request: LlmRequest) -> BoxFuture<'_, Result<LlmResponse, UppError>> {
        Box::pin(async move {
            if let Some(response) = self.replay(&request)? {
                return Ok(response);
            }
            if let Some(response) = self.queued(&request).await? {
                return Ok(response);
            }
            within_budget(&self.run, self.inner.provider(), self.priced.1.is_some())?;
            let at = self.position(&request);
            let print = fingerprint(&request.messages);
            let (provider, model) = (self.inner.provider(), self.inner.model_id());
            let chat = ChatSpan::open(&self.run, provider, model, &request);
            let response = self.inner.complete(request).await;
            chat.end(provider, model, response.as_ref());
            let response = response?;
            record(
                &self.run,
                self.inner.provider(),
                &self.priced,
                at,
                print,
                &response,
            )
            .await?;
            Ok(response)
        })
    }

    fn stream(&self, request: LlmRequest) -> BoxFuture<'_, Result<LlmStream, UppError>> {
        Box::pin(async move {
            if let Some(response) = self.replay(&request)? {
                return Ok(response.into_stream());
            }
            if let Some(response) = self.queued(&request).await? {
                return Ok(response.into_stream());
            }
            within_budget(&self.run, self.inner.provider(), self.priced.1.is_some())?;
            let position = self.position(&request);
            let print = fingerprint(&request.messages);
            let (provider, model) = (self.inner.provider(), self.inner.model_id());
            let chat = ChatSpan::open(&self.run, provider, model, &request);
            let inner = match self.inner.stream(request).await {
                Ok(inner) => inner,
                Err(error) => {
                    chat.end(provider, model, Err(&error));
                    return Err(error);
                }
            };
            // One shared handle, so each passing event costs a reference count, not copies.
            let at = Arc::new((
                self.run.clone(),
                position,
                self.inner.provider().to_owned(),
                print,
                self.priced.clone(),
                (chat, model.to_owned()),
            ));
            // Events pass through as they arrive; the final response is recorded before it is
            // handed on, so the tool round (which starts after it) always finds it recorded.
            let stream = inner.then(move |part| {
                let at = at.clone();
                async move {
                    let (run, position, provider, print, priced, (chat, model)) = &*at;
                    match part {
                        Ok(LlmStreamPart::Response(response)) => {
                            chat.end(provider, model, Ok(&response));
                            record(
                                run,
                                provider,
                                priced,
                                position.clone(),
                                print.clone(),
                                &response,
                            )
                            .await?;
                            Ok(LlmStreamPart::Response(response))
                        }
                        Err(error) => {
                            chat.end(provider, model, Err(&error));
                            Err(error)
                        }
                        other => other,
                    }
                }
            });
            let stream: LlmStream = Box::pin(stream);
            Ok(stream)
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::profile::context::{CompressionStrategy, ContextConfig, compress};

    /// The incremental read of a model's requests gives the same generation as reading each
    /// request whole: a growing conversation, its compressed successor, a summary request, and
    /// the compressed conversation growing again.
    #[tokio::test]
    async fn the_incremental_generation_read_matches_the_whole_read() {
        use weft_provider::adapters::scripted::{self, Script};
        let mut history = vec![Message::user("task")];
        for i in 0..6 {
            history.push(Message::assistant(format!("step {i}")));
        }
        let llm = weft_provider::llm(weft_provider::LlmOptions::new(scripted::model(
            Script::texts(["summary"]),
        )))
        .unwrap();
        let config = ContextConfig {
            preserve_last_n: 1,
            compression_strategy: CompressionStrategy::Summarize,
            ..ContextConfig::default()
        };
        let compressed = compress(
            &config,
            &history,
            3,
            1,
            100,
            10,
            &llm,
            tokio_util::sync::CancellationToken::new(),
        )
        .await
        .unwrap()
        .unwrap()
        .history;
        let mut grown = compressed.clone();
        grown.push(Message::assistant("after"));
        let summary_request = vec![
            Message::assistant("step 1"),
            Message::User(weft_provider::UserMessage::with_options(
                vec![weft_provider::ContentBlock::text("summarize")],
                weft_provider::MessageOptions {
                    id: None,
                    metadata: Some(
                        [(
                            crate::profile::context::MARKER_KEY.to_owned(),
                            serde_json::json!({"generation": 1, "request": true}),
                        )]
                        .into_iter()
                        .collect(),
                    ),
                },
            )),
        ];
        let requests: Vec<&[Message]> = vec![
            &history[..2],
            &history[..4],
            &history,
            &summary_request,
            &compressed,
            &grown,
            &grown,
            &history[..3],
        ];
        let mut scan = GenerationScan::default();
        for request in requests {
            assert_eq!(
                scan.read(request),
                crate::profile::context::generation_label(request),
                "{} messages",
                request.len()
            );
        }
        assert_eq!(
            crate::profile::context::generation_label(&grown).as_deref(),
            Some("1")
        );
    }

    #[tokio::test]
    async fn a_compressed_conversation_and_its_summary_request_have_their_own_positions() {
        use weft_provider::adapters::scripted::{self, Script};
        let history = vec![
            Message::user("task"),
            Message::assistant("one"),
            Message::assistant("two"),
            Message::assistant("three"),
        ];
        assert_eq!(position("t", &history[..2]), "t@2");
        let llm = weft_provider::llm(weft_provider::LlmOptions::new(scripted::model(
            Script::texts(["summary"]),
        )))
        .unwrap();
        let config = ContextConfig {
            preserve_last_n: 1,
            compression_strategy: CompressionStrategy::Summarize,
            ..ContextConfig::default()
        };
        let compressed = compress(
            &config,
            &history,
            3,
            1,
            100,
            10,
            &llm,
            tokio_util::sync::CancellationToken::new(),
        )
        .await
        .unwrap()
        .unwrap();
        // Shorter than before, yet not the position of the earlier request of that length:
        // a resume replays the right answers.
        assert_eq!(compressed.history.len(), 3);
        assert_eq!(position("t", &compressed.history), "t~1@3");
        assert_ne!(
            position("t", &compressed.history),
            position("t", &history[..3])
        );
        let request = Message::User(weft_provider::UserMessage::with_options(
            vec![weft_provider::ContentBlock::text("summarize")],
            weft_provider::MessageOptions {
                id: None,
                metadata: Some(
                    [(
                        crate::profile::context::MARKER_KEY.to_owned(),
                        serde_json::json!({"generation": 2, "request": true}),
                    )]
                    .into_iter()
                    .collect(),
                ),
            },
        ));
        assert_eq!(position("t", &[request]), "t~2s@1");
    }
}

//! Tests against the real Gemma 3 270M weights (feature `candle`, release build).
//!
//! When the weights are missing these tests print why and pass, unless
//! `WEFT_REQUIRE_LOCAL_MODEL=1` (set by CI), in which case they fail with the way to install
//! them. Run: `WEFT_REQUIRE_LOCAL_MODEL=1 RUSTFLAGS="-C target-cpu=native"
//! cargo test --release -p weft-local --features candle`.

#![cfg(feature = "candle")]
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use serde_json::{Value, json};
use weft_provider::{
    ErrorCode, LlmOptions, Message, StreamEventType, Tool, ToolUseStrategy, UppError, llm,
};

/// The GGUF file, or `None` (after printing why) when the test should be skipped.
fn weights() -> Option<PathBuf> {
    match weft_local::Locator::from_environment().ensure_file(&weft_local::GEMMA3_270M) {
        Ok(path) => Some(path),
        Err(error) => {
            let required = std::env::var("WEFT_REQUIRE_LOCAL_MODEL").is_ok_and(|v| v == "1");
            assert!(
                !required,
                "WEFT_REQUIRE_LOCAL_MODEL=1 but the local model is unavailable: {error}"
            );
            eprintln!(
                "skipping: the local model is unavailable ({error}); set WEFT_REQUIRE_LOCAL_MODEL=1 to fail instead"
            );
            None
        }
    }
}

fn options() -> LlmOptions {
    LlmOptions::new(weft_local::model("gemma3-270m"))
}

fn no_op_tool(name: &str, description: &str, parameters: Value) -> Tool {
    Tool::new(name, description, parameters, |_args: Value, _ctx| async {
        Ok(json!("ok"))
    })
}

fn validate(schema: &Value, instance: &Value) {
    let validator = jsonschema::validator_for(schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|e| e.to_string())
        .collect();
    assert!(
        errors.is_empty(),
        "{instance} does not match {schema}: {errors:?}"
    );
}

#[test]
fn the_tokenizer_matches_known_ids() {
    let Some(path) = weights() else { return };
    let tokenizer = weft_local::bench::read_tokenizer(&path).unwrap();
    assert_eq!(
        tokenizer.encode_with_bos("The capital of France is"),
        vec![2, 818, 5279, 529, 7001, 563]
    );
    assert_eq!(tokenizer.control("<start_of_turn>"), Some(105));
    assert_eq!(tokenizer.control("<end_of_turn>"), Some(106));
    let text = "Grüße, 世界!\n\n  {\"a\": 1}\t🦀";
    assert_eq!(tokenizer.decode(&tokenizer.encode(text)), text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn greedy_output_is_deterministic_and_counts_tokens() {
    if weights().is_none() {
        return;
    }
    let instance = llm(options().param("max_tokens", json!(24))).unwrap();
    let first = instance
        .generate(&[], "Name the capital of France.")
        .await
        .unwrap();
    let second = instance
        .generate(&[], "Name the capital of France.")
        .await
        .unwrap();
    assert!(!first.text().trim().is_empty());
    assert_eq!(first.text(), second.text());
    assert!(first.usage.input_tokens > 5, "{:?}", first.usage);
    assert!(
        (1..=24).contains(&first.usage.output_tokens),
        "{:?}",
        first.usage
    );
    assert_eq!(first.usage, second.usage);
    let metadata = first.response.provider_metadata("local").unwrap();
    assert!(metadata["timings"]["tokensPerSecond"].as_f64().unwrap() > 0.0);
    // A raw continuation through the benchmark API is greedy too.
    let path = weights().unwrap();
    let raw = weft_local::bench::measure(&path, "The capital of France is", 8).unwrap();
    assert!(
        raw.text.contains("France") || raw.text.contains("Paris"),
        "{:?}",
        raw.text
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn constrained_tool_calls_parse_and_validate_for_two_schemas() {
    if weights().is_none() {
        return;
    }
    let weather = json!({"type": "object",
        "properties": {"city": {"type": "string", "maxLength": 40},
                       "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"], "additionalProperties": false});
    let add = json!({"type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"], "additionalProperties": false});
    let cases = [
        (
            "get_weather",
            "Get the current weather in a city.",
            weather.clone(),
            "What is the weather in Paris today?",
        ),
        (
            "add",
            "Add two integers.",
            add.clone(),
            "What is 17 plus 25?",
        ),
    ];
    for (name, description, schema, prompt) in cases {
        let instance = llm(options()
            .tool(no_op_tool(
                "get_weather",
                "Get the current weather in a city.",
                weather.clone(),
            ))
            .tool(no_op_tool("add", "Add two integers.", add.clone()))
            .param("tool_choice", json!("required"))
            .param("parallel_tool_calls", json!(false))
            .param("max_tokens", json!(64))
            .tool_strategy(ToolUseStrategy::default().max_iterations(Some(0))))
        .unwrap();
        let started = Instant::now();
        let turn = instance.generate(&[], prompt).await.unwrap();
        let calls = &turn.response.tool_calls;
        assert_eq!(calls.len(), 1, "{name}: {:?} / {:?}", calls, turn.text());
        let call = &calls[0];
        let offered = if call.tool_name == "add" {
            &add
        } else {
            &weather
        };
        validate(offered, &call.arguments);
        eprintln!(
            "{name}: {} {} in {:?}",
            call.tool_name,
            call.arguments,
            started.elapsed()
        );
        // Each prompt is meant for one tool; the base model usually picks it.
        if call.tool_name == name {
            validate(&schema, &call.arguments);
        }
        let _ = description;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_loop_runs_the_called_tool_and_finishes() {
    if weights().is_none() {
        return;
    }
    let add = Tool::new(
        "add",
        "Add two integers.",
        json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
               "required": ["a", "b"], "additionalProperties": false}),
        |args: Value, _ctx| async move {
            Ok(json!(
                args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)
            ))
        },
    );
    let instance = llm(options()
        .tool(add)
        .param("max_tokens", json!(48))
        .tool_strategy(ToolUseStrategy::default().max_iterations(Some(2))))
    .unwrap();
    // Whether the model calls the tool is its choice; either way the turn completes and every
    // call it made validated and ran.
    match instance
        .generate(&[], "Use the add tool to add 2 and 3.")
        .await
    {
        Ok(turn) => {
            for execution in &turn.tool_executions {
                assert_eq!(execution.tool_name, "add");
                assert!(!execution.is_error, "{execution:?}");
            }
        }
        Err(error) => assert_eq!(error.code, ErrorCode::InvalidResponse, "{error}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn structured_output_matches_the_schema() {
    if weights().is_none() {
        return;
    }
    let schema = json!({"type": "object",
        "properties": {"name": {"type": "string", "maxLength": 30},
                       "age": {"type": "integer", "minimum": 0, "maximum": 150},
                       "city": {"type": "string", "maxLength": 30}},
        "required": ["name", "age", "city"], "additionalProperties": false});
    let instance = llm(options()
        .structure(schema.clone())
        .param("max_tokens", json!(80)))
    .unwrap();
    let turn = instance
        .generate(
            &[],
            "Alice is 31 years old and lives in Lyon. Extract her details.",
        )
        .await
        .unwrap();
    let data = turn.data.clone().unwrap();
    validate(&schema, &data);
    assert_eq!(serde_json::from_str::<Value>(&turn.text()).unwrap(), data);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_deltas_concatenate_to_the_generated_text() {
    if weights().is_none() {
        return;
    }
    let instance = llm(options().param("max_tokens", json!(40))).unwrap();
    let prompt = "Write one sentence about the sea.";
    let generated = instance.generate(&[], prompt).await.unwrap();
    let mut stream = instance.stream(&[], prompt).unwrap();
    let mut text = String::new();
    let mut kinds = Vec::new();
    while let Some(event) = stream.next().await {
        let event = event.unwrap();
        if event.event_type == StreamEventType::TextDelta {
            text.push_str(event.delta.text.as_deref().unwrap_or_default());
        }
        kinds.push(event.event_type);
    }
    let streamed = stream.turn().await.unwrap();
    assert_eq!(text, generated.text());
    assert_eq!(streamed.text(), generated.text());
    assert_eq!(kinds.first(), Some(&StreamEventType::MessageStart));
    assert_eq!(kinds.last(), Some(&StreamEventType::MessageStop));
    assert!(
        kinds
            .iter()
            .filter(|k| **k == StreamEventType::TextDelta)
            .count()
            > 3
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_stops_generation_between_tokens() {
    if weights().is_none() {
        return;
    }
    let instance = llm(options()
        .param("max_tokens", json!(400))
        .param("temperature", json!(0.8))
        .param("seed", json!(7)))
    .unwrap();
    let mut stream = instance
        .stream(&[], "Tell me a very long story about a dragon.")
        .unwrap();
    let mut deltas = 0;
    while let Some(event) = stream.next().await {
        if event.unwrap().event_type == StreamEventType::TextDelta {
            deltas += 1;
            if deltas == 3 {
                break;
            }
        }
    }
    let cancelled_at = Instant::now();
    stream.abort();
    let error: UppError = stream.turn().await.unwrap_err();
    assert_eq!(error.code, ErrorCode::Cancelled);
    assert!(
        cancelled_at.elapsed() < Duration::from_secs(2),
        "{:?}",
        cancelled_at.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_longer_than_the_context_is_a_context_length_error() {
    if weights().is_none() {
        return;
    }
    let reference = weft_local::model("gemma3-270m").with_options(json!({"context_length": 64}));
    let instance = llm(LlmOptions::new(reference)).unwrap();
    let error = instance
        .generate(&[], "word ".repeat(200))
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::ContextLengthExceeded, "{error}");
    assert!(error.message.contains("64"), "{error}");
    // The model's own 32k context is enforced too.
    let instance = llm(options()).unwrap();
    let error = instance
        .generate(&[], "word ".repeat(40_000))
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::ContextLengthExceeded, "{error}");
    let _ = Message::user("unused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_sequences_and_sampling_params_apply() {
    if weights().is_none() {
        return;
    }
    let instance = llm(options().param("max_tokens", json!(60))).unwrap();
    let full = instance
        .generate(&[], "Count from 1 to 20, separated by commas.")
        .await
        .unwrap();
    let text = full.text();
    // Stop at the first comma the model writes (if any): the output is everything before it.
    if let Some(at) = text.find(',').filter(|at| *at > 0) {
        let stopped = llm(options()
            .param("max_tokens", json!(60))
            .param("stop", json!([","])))
        .unwrap()
        .generate(&[], "Count from 1 to 20, separated by commas.")
        .await
        .unwrap();
        assert_eq!(stopped.text(), text[..at]);
        assert_eq!(
            stopped.response.provider_metadata("local").unwrap()["stopReason"],
            "stop_sequence"
        );
    }
    let sampled = |seed: u64| {
        let instance = llm(options()
            .param("max_tokens", json!(16))
            .param("temperature", json!(1.0))
            .param("top_p", json!(0.95))
            .param("top_k", json!(50))
            .param("seed", json!(seed)))
        .unwrap();
        async move {
            instance
                .generate(&[], "Once upon a time")
                .await
                .unwrap()
                .text()
        }
    };
    assert_eq!(sampled(11).await, sampled(11).await);
}

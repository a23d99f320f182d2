//! Decoding of every recorded streaming response of the provider cassettes
//! (`testdata/fixtures/pydantic-ai/tests/models/cassettes/`), per provider: the whole SSE
//! body through the adapter's stream decoder to the final `LlmResponse`, offline (no HTTP).
//! Throughput is reported in SSE events per second.
//!
//! Run: `cargo bench -p weft-provider --bench decode`.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use weft_provider::adapters::{anthropic, google, openai_responses};
use weft_provider::{LlmStreamPart, UppError};
use weft_testkit::{cassette_path, load_cassette};

type Decode = fn(&[u8]) -> Result<Vec<LlmStreamPart>, UppError>;

const STREAMS: &[(&str, &str, Decode)] = &[
    (
        "anthropic",
        "test_anthropic/test_anthropic_model_thinking_part_stream.yaml",
        anthropic::decode_stream,
    ),
    (
        "anthropic",
        "test_anthropic/test_anthropic_model_thinking_part_redacted_stream.yaml",
        anthropic::decode_stream,
    ),
    (
        "openai-responses",
        "test_openai_responses/test_openai_responses_stream.yaml",
        openai_responses::decode_stream,
    ),
    (
        "google",
        "test_google/test_google_model_stream.yaml",
        google::decode_stream,
    ),
    (
        "google",
        "test_google/test_google_model_thinking_part_iter.yaml",
        google::decode_stream,
    ),
    (
        "google",
        "test_google/test_google_streaming_tool_call_thought_signature.yaml",
        google::decode_stream,
    ),
];

fn events_in(body: &str) -> u64 {
    body.lines().filter(|l| l.starts_with("data:")).count() as u64
}

fn decode(c: &mut Criterion) {
    for (provider, path, decode) in STREAMS {
        let interactions = load_cassette(&cassette_path(path)).expect("cassette");
        let name = path
            .rsplit('/')
            .next()
            .unwrap_or(path)
            .trim_end_matches(".yaml");
        for (turn, interaction) in interactions.iter().enumerate() {
            let Some(body) = interaction.response_text.as_deref() else {
                continue;
            };
            let bytes = body.as_bytes().to_vec();
            assert!(matches!(
                decode(&bytes).unwrap().last(),
                Some(LlmStreamPart::Response(_))
            ));
            let mut group = c.benchmark_group(format!("decode/{provider}"));
            group.throughput(Throughput::Elements(events_in(body)));
            group.bench_function(format!("{name}#{turn}"), |b| {
                b.iter(|| decode(&bytes).unwrap().len())
            });
            group.finish();
        }
    }
}

criterion_group!(benches, decode);
criterion_main!(benches);

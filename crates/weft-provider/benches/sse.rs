//! SSE decoding throughput: `data:` lines of realistic chunk JSON, fed in 16 KiB reads.
//! Target (issue 2): at least 1 GB/s on the project machine.

#![allow(missing_docs)]

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use weft_provider::sse::SseDecoder;

fn corpus() -> Vec<u8> {
    let line = r#"data: {"id":"chatcmpl-Dx0XpqH8w09uBXwq1zFGYdETjtnEl","object":"chat.completion.chunk","created":1782955817,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{"content":" token"},"finish_reason":null}]}"#;
    let mut out = Vec::new();
    while out.len() < 8 * 1024 * 1024 {
        out.extend_from_slice(line.as_bytes());
        out.extend_from_slice(b"\n\n");
    }
    out
}

fn decode(c: &mut Criterion) {
    let data = corpus();
    let mut group = c.benchmark_group("sse");
    group.throughput(Throughput::Bytes(data.len() as u64));
    group.bench_function("decode_16k_reads", |b| {
        let mut events = Vec::with_capacity(1024);
        b.iter(|| {
            let mut decoder = SseDecoder::new();
            let mut count = 0usize;
            for chunk in data.chunks(16 * 1024) {
                decoder.push(chunk, &mut events);
                count += events.len();
                events.clear();
            }
            count
        });
    });
    group.finish();
}

criterion_group!(benches, decode);
criterion_main!(benches);

//! Fuzz the SSE decoder and the stream assembler: never panic; any split of the bytes gives the
//! same events; every assembled thread serializes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_thread::Timestamp;
use weft_thread::clock::FixedClock;
use weft_thread::ui_stream::{
    self, Assembler, AssemblerOptions, ThreadBuilder, ThreadDefaults, sse::SseDecoder,
};

fuzz_target!(|data: &[u8]| {
    let split = data
        .first()
        .map_or(0, |byte| usize::from(*byte))
        .min(data.len());
    let mut whole = SseDecoder::new();
    let mut expected = whole.push(data);
    expected.extend(whole.finish());
    let mut parts = SseDecoder::new();
    let mut events = parts.push(&data[..split]);
    events.extend(parts.push(&data[split..]));
    events.extend(parts.finish());
    assert_eq!(events, expected);

    let clock = FixedClock(Timestamp::from_unix_nanos(0));
    let mut assembler = Assembler::with_clock(AssemblerOptions::default(), clock);
    let mut builder = ThreadBuilder::new();
    for event in expected {
        if let Ok(chunk) = ui_stream::UiChunk::from_json(&event.data) {
            for output in assembler.push(chunk) {
                builder.apply(output);
            }
        }
    }
    for output in assembler.finish() {
        builder.apply(output);
    }
    if let Ok(assembled) = builder.build(&ThreadDefaults::default(), &clock) {
        let _ = assembled.thread.to_value().expect("serializes");
    }
});

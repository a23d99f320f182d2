//! `thread_parse` and `stream_assemble`: weft-thread's ThreadProtocol parser and validator,
//! and the UI message stream assembler.

use serde_json::Value;
use weft_thread::clock::FixedClock;
use weft_thread::ui_stream::sse::SseDecoder;
use weft_thread::ui_stream::{
    self, Assembler, AssemblerOptions, EncodeOptions, ThreadBuilder, ThreadDefaults,
};
use weft_thread::{HashOptions, Thread, Timestamp, hash_thread, validate};

/// Any bytes as thread JSON: never a panic; whatever validates parses into the typed model,
/// serializes back to the same JSON, hashes like its re-serialization, and survives the UI
/// stream round trip (encode, assemble) unchanged.
pub fn thread_parse(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = weft_thread::validate_json(text);
    let Ok(value) = serde_json::from_str::<Value>(text) else {
        return;
    };
    let report = validate(&value);
    let hash = hash_thread(&value, HashOptions::default());
    let typed = Thread::from_value(value.clone());
    if report.is_valid() {
        let thread = typed.expect("a valid thread parses");
        let back = thread.to_value().expect("serializes");
        assert_eq!(back, value);
        assert!(validate(&back).is_valid(), "its re-serialization validates");
        assert_eq!(
            hash_thread(&back, HashOptions::default()),
            hash,
            "hash of the re-serialization"
        );
        let clock = FixedClock(Timestamp::from_unix_nanos(0));
        let chunks = ui_stream::encode_thread(&thread, &EncodeOptions::default());
        let assembled = ui_stream::assemble_thread(
            chunks,
            AssemblerOptions::default(),
            &ThreadDefaults::default(),
            clock,
        )
        .expect("its own stream assembles");
        assert_eq!(assembled.thread, thread);
    }
}

fn sse_events(chunks: &[&[u8]]) -> Vec<weft_thread::ui_stream::sse::SseEvent> {
    let mut decoder = SseDecoder::new();
    let mut events = Vec::new();
    for chunk in chunks {
        events.extend(decoder.push(chunk));
    }
    events.extend(decoder.finish());
    events
}

/// Any bytes as a UI message stream (SSE): the same events for any cut of the bytes; the
/// assembler never panics; a thread it builds serializes, and when it validates it parses back to
/// the same value.
pub fn stream_assemble(data: &[u8]) {
    let expected = sse_events(&[data]);
    for point in crate::splits::points(data) {
        let (a, b) = data.split_at(point);
        assert_eq!(sse_events(&[a, b]), expected, "cut at {point}");
    }
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
        let value = assembled.thread.to_value().expect("serializes");
        // Whatever the stream, the assembled thread validates (the output of a call the
        // stream never announced is a stream error, not a dangling tool-return part:
        // fuzz/regressions/stream_assemble/) and parses back equal.
        let report = validate(&value);
        assert!(report.is_valid(), "assembled thread invalid: {report:?}");
        let back = Thread::from_value(value).expect("a valid assembled thread parses");
        assert_eq!(back, assembled.thread);
    }
}

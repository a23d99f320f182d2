//! Fuzz the thread parser and validator: never panic, and whatever validates must parse into the
//! typed model, serialize back unchanged and survive the UI stream round trip.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use weft_thread::clock::FixedClock;
use weft_thread::ui_stream::{self, AssemblerOptions, EncodeOptions, ThreadDefaults};
use weft_thread::{HashOptions, Thread, Timestamp, hash_thread, validate};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = weft_thread::validate_json(text);
    let Ok(value) = serde_json::from_str::<Value>(text) else {
        return;
    };
    let report = validate(&value);
    let _ = hash_thread(&value, HashOptions::default());
    let typed = Thread::from_value(value.clone());
    if report.is_valid() {
        let thread = typed.expect("a valid thread parses");
        assert_eq!(thread.to_value().expect("serializes"), value);
        let clock = FixedClock(Timestamp::from_unix_nanos(0));
        let chunks = ui_stream::encode_thread(&thread, &EncodeOptions::default());
        let back = ui_stream::assemble_thread(
            chunks,
            AssemblerOptions::default(),
            &ThreadDefaults::default(),
            clock,
        )
        .expect("own header parses");
        assert_eq!(back.thread, thread);
    }
});

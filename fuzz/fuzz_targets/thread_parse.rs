//! cargo-fuzz target `thread_parse`: see `weft_fuzz::thread_parse` for what it asserts.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| weft_fuzz::thread_parse(data));

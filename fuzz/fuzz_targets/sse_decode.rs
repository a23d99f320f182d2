//! cargo-fuzz target `sse_decode`: see `weft_fuzz::sse_decode` for what it asserts.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| weft_fuzz::sse_decode(data));

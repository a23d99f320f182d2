//! cargo-fuzz target `stream_assemble`: see `weft_fuzz::stream_assemble` for what it asserts.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| weft_fuzz::stream_assemble(data));

//! cargo-fuzz target `provider_stream`: see `weft_fuzz::provider_stream` for what it asserts.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| weft_fuzz::provider_stream(data));

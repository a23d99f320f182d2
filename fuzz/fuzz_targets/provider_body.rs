//! cargo-fuzz target `provider_body`: see `weft_fuzz::provider_body` for what it asserts.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| weft_fuzz::provider_body(data));

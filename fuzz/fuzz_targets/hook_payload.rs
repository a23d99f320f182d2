//! cargo-fuzz target `hook_payload`: see `weft_fuzz::hook_payload` for what it asserts.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| weft_fuzz::hook_payload(data));

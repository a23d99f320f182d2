//! cargo-fuzz target `standard_project`: see `weft_fuzz::standard_project` for what it asserts.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| weft_fuzz::standard_project(data));

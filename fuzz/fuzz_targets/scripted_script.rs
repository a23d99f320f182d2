//! cargo-fuzz target `scripted_script`: see `weft_fuzz::scripted_script` for what it asserts.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| weft_fuzz::scripted_script(data));

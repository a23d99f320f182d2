//! cargo-fuzz target `server_request`: see `weft_fuzz::server_request` for what it asserts.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| weft_fuzz::server_request(data));

//! Strict JSON parsing, RFC 8785 canonicalisation and digests: fixed point and key-order independence.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| delegation_model::fuzzing::fuzz_digest(data));

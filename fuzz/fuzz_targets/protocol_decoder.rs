//! The bounded line decoder fed in input-chosen chunks, checked against a plain split; every line decoded.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| delegation_protocol::fuzzing::fuzz_decoder(data));

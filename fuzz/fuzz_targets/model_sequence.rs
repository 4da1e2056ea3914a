//! Operation sequences over the model's simulated world; every invariant checked after every step.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| delegation_model::fuzzing::fuzz_model_sequence(data));

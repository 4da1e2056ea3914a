//! Operation sequences over the model's simulated world; every invariant checked after every step.
#![no_main]
// Allocation-heavy: a faster allocator than glibc's (fuzz/README.md, "Speed").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
libfuzzer_sys::fuzz_target!(|data: &[u8]| delegation_model::fuzzing::fuzz_model_sequence(data));

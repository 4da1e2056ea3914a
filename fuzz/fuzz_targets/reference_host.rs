//! Operation sequences as the model's scenarios against the in-process reference host, faults and crashes armed; it must agree with the model.
#![no_main]
libfuzzer_sys::fuzz_target!(
    |data: &[u8]| delegation_runner::differential::fuzz_reference_host(data)
);

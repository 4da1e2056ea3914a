//! Scenario files: parsing and validation never panic, errors name the file, a parsed scenario round trips.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| delegation_runner::differential::fuzz_scenario(data));

//! The libFuzzer target bodies of the model: operation sequences over the simulated world, and digest round trips.

use super::driver::Driver;
use super::ops::{Op, decode_ops};
use super::written::{REVERSED_KEYS, written_form};
use crate::digest::{DefinitionError, canonical_json, digest_value, parse_strict};

/// Fuzz target body: decode a sequence, apply it, and panic with the
/// violations if any invariant checker fires.
///
/// The checkers read the whole history and name the step of each violation,
/// so one check after the last operation finds everything a check after every
/// step would, at linear rather than quadratic cost.
pub fn fuzz_model_sequence(data: &[u8]) {
    let mut driver = Driver::new();
    let ops = decode_ops(data);
    // Strict mode is a setting a scenario carries from its start, as the
    // host fuzzer's translation sets it: wherever it stands, it holds from
    // the first operation (switched on after full-access instances exist,
    // the checker rightly finds them running with full access).
    let strict = ops.iter().any(|op| matches!(op, Op::Strict));
    if strict {
        driver.step(&Op::Strict);
    }
    for op in ops.iter().filter(|op| !matches!(op, Op::Strict)) {
        driver.step(op);
    }
    let violations = driver.violations();
    assert!(
        violations.is_empty(),
        "the sequence {ops:?} broke an invariant: {violations:#?}"
    );
}

/// Fuzz target body: strict parsing, canonicalisation and digests agree with themselves.
///
/// For every input the strict parser accepts: the canonical text is a fixed
/// point, and the digest does not depend on the order keys were written in.
pub fn fuzz_digest(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(value) = parse_strict(text) else {
        return;
    };
    let canonical = canonical_json(&value).expect("a strictly parsed value canonicalises");
    match parse_strict(&canonical) {
        Ok(reparsed) => assert_eq!(
            canonical_json(&reparsed).as_ref(),
            Ok(&canonical),
            "canonical text is not a fixed point for input {text:?}"
        ),
        // Known and documented (tests/digest.rs): a double at or beyond 2^53
        // with an integral value is written by JCS as an integer literal,
        // which the strict parser refuses. Any other refusal is a bug.
        Err(DefinitionError::IntegerOutOfRange { .. }) => {}
        Err(e) => panic!("canonical text {canonical:?} of {text:?} does not re-parse: {e}"),
    }
    let digest = digest_value(&value).expect("a canonicalisable value has a digest");
    let reversed = written_form(&value, REVERSED_KEYS);
    let shuffled = parse_strict(&reversed).expect("re-serialised text parses strictly");
    assert_eq!(
        digest_value(&shuffled).as_ref(),
        Ok(&digest),
        "digest depends on key order: {text:?} vs {reversed:?}"
    );
}

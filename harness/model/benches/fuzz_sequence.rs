//! Benchmark: executions per second of the model_sequence fuzz target body, without libFuzzer.
//!
//! libFuzzer's own figure mixes in mutation, coverage bookkeeping and corpus
//! growth; this isolates what the target costs per input. Two input sets:
//! the committed seeds (short, hand-written sequences) and deterministic
//! pseudo-random inputs long enough to decode to `MAX_OPS` operations, which
//! is where a fuzzer's grown corpus ends up.

use std::path::Path;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use delegation_model::fuzzing::{MAX_OPS, Op, decode_ops, encode_ops, fuzz_model_sequence};

fn committed_seeds() -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/model_sequence");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a readable directory entry").path())
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| std::fs::read(p).expect("a readable seed"))
        .collect()
}

/// Xorshift bytes: reproducible without a dependency.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Inputs that start a root (otherwise most operations address nothing) and
/// then run on to the operation cap.
fn long_inputs(count: u64) -> Vec<Vec<u8>> {
    (0..count)
        .map(|seed| {
            let mut bytes = encode_ops(&[Op::Start {
                sandbox: 1,
                policy: (seed % 3) as u8,
                tools: 7,
            }]);
            bytes.extend(noise(seed + 1, 16 * MAX_OPS));
            assert_eq!(decode_ops(&bytes).len(), MAX_OPS, "seed {seed}");
            bytes
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("fuzz_model_sequence");
    for (name, inputs) in [
        ("committed_seeds", committed_seeds()),
        ("max_ops_inputs", long_inputs(32)),
    ] {
        group.throughput(Throughput::Elements(inputs.len() as u64));
        group.bench_function(name, |b| {
            b.iter(|| {
                for input in &inputs {
                    fuzz_model_sequence(input);
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

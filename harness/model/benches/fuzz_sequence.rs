//! Benchmark: executions per second of the model_sequence fuzz target body, without libFuzzer.
//!
//! libFuzzer's own figure mixes in mutation, coverage bookkeeping and corpus
//! growth; this isolates what the target costs per input. Two input sets:
//! the committed seeds (short, hand-written sequences) and deterministic
//! pseudo-random inputs long enough to decode to `MAX_OPS` operations, which
//! is where a fuzzer's grown corpus ends up.

// The allocator of the cargo-fuzz model_sequence target
// (fuzz/fuzz_targets/model_sequence.rs): the model allocates on every step,
// and glibc's malloc and free were about a third of its instructions.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use delegation_model::fuzzing::{
    MAX_OPS, Op, corpus_dir, decode_ops, encode_ops, fuzz_model_sequence, noise,
};

fn committed_seeds() -> Vec<Vec<u8>> {
    let dir = corpus_dir("model_sequence");
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

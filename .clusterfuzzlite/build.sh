#!/bin/bash -eu
# ClusterFuzzLite build: compile every cargo-fuzz target (sanitizer flags come from the base image) and copy it to $OUT.
cd "$SRC/delegation-harness"
cargo fuzz build -O
FUZZ_TARGET_OUTPUT_DIR=fuzz/target/x86_64-unknown-linux-gnu/release
for target in model_sequence digest protocol_decoder scenario_parser reference_host; do
    cp "$FUZZ_TARGET_OUTPUT_DIR/$target" "$OUT/"
    # Seed corpora ship as <target>_seed_corpus.zip, which ClusterFuzzLite picks up by name.
    (cd "fuzz/corpus/$target" && zip -q -r "$OUT/${target}_seed_corpus.zip" .)
done

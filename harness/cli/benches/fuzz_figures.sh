#!/usr/bin/env bash
#! Host-fuzzing figures: operations per second in-process and over stdio, and the time to shrink a long failing sequence.
# Usage: harness/cli/benches/fuzz_figures.sh [release|debug]   (builds first; CARGO_TARGET_DIR is honoured)
# Release by default: a debug build's figures measure its unoptimised code, not the fuzzer.
# Why a script and not criterion: every figure is an end-to-end run of the
# CLI against real observers and a real host, seconds long; the CLI's own
# summary line is the measurement.
set -euo pipefail
profile="${1:-release}"
flag=""; [ "$profile" = release ] && flag="--release"
cargo build $flag -q -p delegation-harness -p delegation-host --bins
target="${CARGO_TARGET_DIR:-target}/$profile"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

echo "== in-process reference host, 30 s"
"$target/delegation-harness" fuzz --seed 11 --cases 100000 --max-ops 48 --time 30 --out "$out/a" | grep -E '^(summary|case|shrunk|finding)'
echo "== reference host over stdio, 30 s"
"$target/delegation-harness" fuzz --host "$target/delegation-reference-host" --seed 11 --cases 100000 --max-ops 48 --time 30 --out "$out/b" | grep -E '^(summary|case|shrunk|finding)'
echo "== shrinking a long failing sequence (mutant followup-after-close, sequences up to 200 operations)"
"$target/delegation-harness" fuzz --defect followup-after-close --seed 3 --cases 100 --max-ops 200 --min-ops 200 --out "$out/c" | grep -E '^(case|shrinking|shrunk|written|summary)'

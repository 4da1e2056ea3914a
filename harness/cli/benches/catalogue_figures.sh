#!/usr/bin/env bash
#! Catalogue figures: the whole scenario catalogue against the reference host, in-process and over stdio, and the focused selftest.
# Usage: harness/cli/benches/catalogue_figures.sh [debug|release]   (builds first; CARGO_TARGET_DIR is honoured)
# Why a script and not criterion: each figure is one end-to-end run of the
# CLI with real observers, seconds to minutes long; wall time is the measure.
set -euo pipefail
cd "$(dirname "$0")/../../.."
profile="${1:-debug}"
flag=""; [ "$profile" = release ] && flag="--release"
cargo build $flag -q -p delegation-harness -p delegation-host --bins
target="${CARGO_TARGET_DIR:-target}/$profile"

timed() {
    local label="$1"; shift
    local start end
    start=$(date +%s.%N)
    "$@" > /dev/null
    end=$(date +%s.%N)
    printf '%-52s %8.1f s\n' "$label" "$(echo "$end - $start" | bc)"
}

scenarios=$(ls scenarios/*/[0-9]*.json | wc -l)
echo "== $scenarios scenarios, $profile build, $(nproc) cores"
timed "catalogue, in-process, --jobs 1" "$target/delegation-harness" run --seed 1 --jobs 1
timed "catalogue, in-process, --jobs 4" "$target/delegation-harness" run --seed 1 --jobs 4
timed "catalogue, over stdio, --jobs 1" "$target/delegation-harness" run --seed 1 --jobs 1 --host "$target/delegation-reference-host"
timed "catalogue, over stdio, --jobs 4" "$target/delegation-harness" run --seed 1 --jobs 4 --host "$target/delegation-reference-host"
timed "selftest --focused, --jobs 4" "$target/delegation-harness" selftest --focused --jobs 4

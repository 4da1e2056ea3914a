#!/usr/bin/env bash
#! Every speed figure of the harness in one run, printed as one table: the catalogue in-process and over stdio (--jobs 1 and 2), the protocol's round trip against a raw pipe, host fuzzing operations/s, model_sequence inputs/s, each beside its goal and whether this run met it.
# Usage: harness/cli/benches/bench.sh [--fuzz-seconds N] [--no-criterion]   (release build; CARGO_TARGET_DIR is honoured)
# --no-criterion leaves out the round trip and model_sequence rows, whose
# benchmarks take minutes to build.
#
# Why one script: the figures move together with the machine's load, so they
# are only comparable when measured in one sitting; the load average before
# and after is printed with them. Wall times are whole CLI runs (seconds
# long, real observers, real hosts); the round trip and the model target's
# rate are criterion's means (`cargo bench`), read from its estimates.
#
# The stdio reference host runs with the same shortened waits as the embedded
# one: no scripted model hold (`--max-model-hold-ms 0`: it answers only after
# all of an action's work) and a 250 ms authorizer timeout
# (DELEGATION_REFERENCE_AUTHORIZER_TIMEOUT_MS), so both columns measure the
# harness and the host, not sleeps.
set -euo pipefail
cd "$(dirname "$0")/../../.."
fuzz_seconds=10
criterion=yes
while [ $# -gt 0 ]; do
    case "$1" in
        --fuzz-seconds) fuzz_seconds="${2:?--fuzz-seconds needs a number of seconds}"; shift 2 ;;
        --no-criterion) criterion=no; shift ;;
        *) echo "bench.sh: unknown argument '$1'; it takes --fuzz-seconds N and --no-criterion" >&2; exit 2 ;;
    esac
done
target="${CARGO_TARGET_DIR:-$PWD/target}"
bin="$target/release"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

echo "building (release) ..." >&2
cargo build --release -q -p delegation-harness -p delegation-host --bins
if [ "$criterion" = yes ]; then
    cargo bench -q --no-run -p delegation-host --bench process_round_trip 2>/dev/null
    cargo bench -q --no-run -p delegation-model --bench fuzz_sequence 2>/dev/null
fi

scenarios=$(ls scenarios/*/[0-9]*.json | wc -l)
load_before="$(uptime | sed 's/.*load average: //')"
rows="$out/rows"
: > "$rows"
# label, figure, detail, and the goal of the speed issue with this run's
# verdict on it ("-" for a row that has none).
row() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4:--}" >> "$rows"; }
# "met" or "missed": whether `figure OP limit` holds (bc's comparison).
verdict() { if [ "$(echo "$1 $2 $3" | bc -l)" = 1 ]; then echo "met"; else echo "missed"; fi; }

export DELEGATION_REFERENCE_AUTHORIZER_TIMEOUT_MS=250
# A catalogue run as the README's main command makes it (the report on the
# terminal), plus a JUnit report to read each scenario's time from. A JSON
# report would be measured too: it makes the run record, normalise and write
# every transcript (11.7 MB), about a fifth of an in-process run's CPU.
catalogue() {
    local label="$1" jobs="$2" goal_s="$3"; shift 3
    local report="$out/catalogue-$jobs-$RANDOM.xml" status times
    echo 0 > "$out/status"
    # bash's `time`: wall, and the CPU of the harness and every host process it waited for.
    times=$( { TIMEFORMAT='%R %U %S'; time "$bin/delegation-harness" run --seed 1 --jobs "$jobs" \
        --report "junit=$report" "$@" > /dev/null 2>&1 || echo $? > "$out/status"; } 2>&1 )
    status=$(cat "$out/status")
    local detail
    detail=$(python3 - "$report" "$status" $times <<'PY'
import pathlib
import sys
import xml.etree.ElementTree as ET
report, status, wall, user, system = sys.argv[1:6]
cases = ET.parse(report).getroot().iter("testcase")
results = []
for case in cases:
    ms = round(float(case.get("time", "0")) * 1000)
    outcome = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "pass")
    results.append((case.get("name"), ms, outcome))
slow = sorted(results, key=lambda r: -r[1])
over = [r for r in results if r[1] > 100]
outcomes = {}
for _, _, outcome in results:
    outcomes[outcome] = outcomes.get(outcome, 0) + 1
median = sorted(ms for _, ms, _ in results)[len(results) // 2]
# The goal allows a scenario over 100 ms only if its file says why it waits
# for real: a host's own timer that no harness clock can advance.
unexplained = [name for name, _, _ in over
               if "waits for real" not in pathlib.Path(f"scenarios/{name}.json").read_text()]
cpu = float(user) + float(system)
print(f"CPU {cpu:.1f} s ({cpu * 1000 / len(results):.1f} ms a scenario); exit {status}; "
      f"{', '.join(f'{n} {o}' for o, n in sorted(outcomes.items()))}; "
      f"median {median} ms, slowest {slow[0][0].split('-')[0]} {slow[0][1]} ms, {len(over)} over 100 ms"
      + (f" (NOT SAYING WHY: {', '.join(unexplained)})" if unexplained else f", each saying why in its file"))
PY
)
    local wall goal=-
    wall=$(echo "$times" | cut -d' ' -f1)
    if [ "$goal_s" != - ]; then
        goal="< $goal_s s: $(verdict "$wall" "<" "$goal_s")"
    fi
    row "$label" "$(printf '%.3f s' "$wall")" "$detail" "$goal"
}

echo "catalogue runs ..." >&2
catalogue "catalogue, in-process, --jobs 1" 1 -
catalogue "catalogue, in-process, --jobs 2" 2 1
stdio=(--host "$bin/delegation-reference-host" --max-model-hold-ms 0)
catalogue "catalogue, over stdio, --jobs 1" 1 - "${stdio[@]}"
catalogue "catalogue, over stdio, --jobs 2" 2 1.5 "${stdio[@]}"

echo "host fuzzing, ${fuzz_seconds} s each ..." >&2
fuzz() {
    local label="$1" goal_ops="$2"; shift 2
    local summary="$out/fuzz-$RANDOM.json" rate goal=-
    "$bin/delegation-harness" fuzz --seed 11 --cases 1000000 --max-ops 48 --time "$fuzz_seconds" \
        --out "$out/findings" --summary "$summary" "$@" > /dev/null
    rate=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(round(d['operations']/d['seconds']))" "$summary")
    if [ "$goal_ops" != - ]; then
        goal=">= $goal_ops ops/s: $(verdict "$rate" ">=" "$goal_ops")"
    fi
    row "$label" "$(python3 -c "import sys; print(f'{int(sys.argv[1]):,} ops/s')" "$rate")" \
        "$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(f\"{d['cases']} cases, {d['operations']} operations in {d['seconds']:.1f} s\")" "$summary")" \
        "$goal"
}
# The goal is in-process host fuzzing, with as many jobs as the machine has
# cores: this machine's two.
fuzz "host fuzzing, in-process, --jobs 1" -
fuzz "host fuzzing, in-process, --jobs 2" 5000 --jobs 2
fuzz "host fuzzing, over stdio, --jobs 1" - --host "$bin/delegation-reference-host"
fuzz "host fuzzing, over stdio, --jobs 2" - --host "$bin/delegation-reference-host" --jobs 2

# Criterion's mean of one benchmark, in nanoseconds per iteration.
mean_ns() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['mean']['point_estimate'])" "$target/criterion/$1/new/estimates.json"; }

if [ "$criterion" = yes ]; then
    echo "criterion: protocol round trip ..." >&2
cargo bench -q -p delegation-host --bench process_round_trip -- --warm-up-time 1 --measurement-time 4 --noplot > /dev/null 2>&1
process=$(mean_ns round_trip/process_host_state_observe)
pipe=$(mean_ns round_trip/raw_pipe_cat)
codec=$(mean_ns round_trip/codec_only)
row "no-op round trip, process host" "$(printf '%.1f us' "$(echo "$process / 1000" | bc -l)")" \
    "$(printf '%.2fx the raw pipe' "$(echo "$process / $pipe" | bc -l)")" \
    "<= 1.5x the pipe: $(verdict "$process / $pipe" "<=" 1.5)"
row "round trip, raw pipe to cat" "$(printf '%.1f us' "$(echo "$pipe / 1000" | bc -l)")" "same run, same request bytes"
row "round trip, codec only" "$(printf '%.2f us' "$(echo "$codec / 1000" | bc -l)")" "encode the request, decode and type an answer"

echo "criterion: model_sequence ..." >&2
cargo bench -q -p delegation-model --bench fuzz_sequence -- --warm-up-time 1 --measurement-time 4 --noplot > /dev/null 2>&1
for name in committed_seeds max_ops_inputs; do
    ns=$(mean_ns "fuzz_model_sequence/$name")
    inputs=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['throughput']['Elements'])" "$target/criterion/fuzz_model_sequence/$name/new/benchmark.json")
    rate=$(echo "$inputs * 1000000000 / $ns" | bc -l)
    goal=-
    if [ "$name" = committed_seeds ]; then
        goal=">= 50,000 inputs/s: $(verdict "$rate" ">=" 50000)"
    fi
    row "model_sequence, $name" "$(python3 -c "import sys; print(f'{float(sys.argv[1]):,.0f} inputs/s')" "$rate")" "plain build, $inputs inputs per iteration" "$goal"
done
fi

load_after="$(uptime | sed 's/.*load average: //')"
echo
echo "== $scenarios scenarios, release build, $(nproc) cores; load average before: $load_before; after: $load_after"
printf "| %-36s | %16s | %-28s | %s |\n" "measure" "figure" "goal: this run" "detail"
printf "|%s|%s|%s|%s|\n" "$(printf -- '-%.0s' {1..38})" "$(printf -- '-%.0s' {1..18})" "$(printf -- '-%.0s' {1..30})" "---"
awk -F'\t' '{ printf "| %-36s | %16s | %-28s | %s |\n", $1, $2, $4, $3 }' "$rows"

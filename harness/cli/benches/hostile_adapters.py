#!/usr/bin/env python3
"""The hostile-adapter table: what the harness does with an adapter that hangs, crashes, floods or lies (verdict, exit code, time, peak memory, leftovers).

Usage: harness/cli/benches/hostile_adapters.py [TARGET_DIR]   (default: target/release;
build first: cargo build --release -p delegation-harness -p delegation-host)

Each row runs three scenarios (zc/001 an admitted delegation, zc/003 a
denied one, tc/007 the canary secrets) against hostile_proxy.py MODE in front
of the reference host, which misbehaves at the first `instance/delegate`.
The first row, a faithful relay, is the control: the proxy alone changes
nothing. Peak memory is the harness process's own high-water mark (VmHWM,
sampled every 20 ms; it only grows, so the last sample is the peak).
Leftovers are processes still carrying this run's marker in their
environment after the harness exited (killed afterwards) and entries left in
the run's private TMPDIR. Prints a Markdown table for the README.
"""
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
import uuid

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PROXY = os.path.join(ROOT, "harness", "cli", "benches", "hostile_proxy.py")
# tc/007 brings its control tc/001 along: four scenarios per row.
SCENARIOS = ["zc/001-*", "zc/003-*", "tc/007-*"]
STEP_TIMEOUT_MS = 5000

MODES = [
    ("relay", "a faithful relay (the control)"),
    ("hang", "stops answering at a delegation"),
    ("silent_start", "never answers `initialize` (unflushed stdout)"),
    ("crash", "exits 3 at a delegation"),
    ("garbage", "a traceback instead of JSON"),
    ("huge_line", "one 60 MB line"),
    ("wrong_id", "the answer under another id"),
    ("duplicate_id", "the answer twice"),
    ("unsolicited", "a request of its own to the harness"),
    ("invalid_utf8", "bytes that are not UTF-8"),
    ("deep_json", "JSON nested 100,000 deep"),
    ("stderr_flood", "400 MiB on stderr"),
    ("lying", "says an admitted delegation was denied"),
    ("stderr_log", "logs requests, canary secrets included, to stderr"),
    ("setsid_child", "a process in its own session (`setsid`)"),
]


def peak_rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def marked_processes(marker):
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if marker.encode() in f.read():
                    with open(f"/proc/{entry}/cmdline", "rb") as c:
                        found.append((int(entry), c.read().replace(b"\0", b" ").decode(errors="replace").strip()))
        except OSError:
            continue
    return found


def verdicts(report_path):
    try:
        with open(report_path) as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        return f"no report ({e})", ""
    counts = {}
    details = []  # (names an invariant?, text) of each scenario that did not pass
    for s in report.get("scenarios", []):
        v = s.get("verdict", "?")
        counts[v] = counts.get(v, 0) + 1
        if v in ("pass", "unsupported"):
            continue
        detail = s.get("message") or s.get("reason") or ""
        failures = s.get("failures") or []
        broken = [f for f in failures if f.get("kind") == "invariant"]
        if broken:
            ids = sorted({f["at"] for f in broken})
            detail = ", ".join(ids) + ": " + broken[0].get("message", "")
        elif failures:
            detail = f"{failures[0].get('at')}: {failures[0].get('message', '')}"
        details.append((bool(broken), f"{s['id'].split('-')[0]} {detail}".replace("\n", " ")))
    # A violated invariant says more than a mismatched expectation.
    details.sort(key=lambda d: not d[0])
    detail = details[0][1] if details else ""
    summary = ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
    return summary, detail[:140]


def run(target, mode):
    marker = f"HOSTILE_RUN_{uuid.uuid4().hex}"
    work = tempfile.mkdtemp(prefix="hostile-")
    tmp = os.path.join(work, "tmp")
    os.mkdir(tmp)
    report = os.path.join(work, "report.json")
    host = f"python3 {shlex.quote(PROXY)} {mode} {shlex.quote(os.path.join(target, 'delegation-reference-host'))}"
    args = [os.path.join(target, "delegation-harness"), "run", "--host", host,
            "--step-timeout-ms", str(STEP_TIMEOUT_MS), "--report", f"json={report}"]
    for s in SCENARIOS:
        args += ["--filter", s]
    env = dict(os.environ, TMPDIR=tmp, NO_COLOR="1", **{marker: "1"})
    started = time.monotonic()
    harness = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    peak = 0
    stderr_chunks = []
    os.set_blocking(harness.stderr.fileno(), False)
    while harness.poll() is None:
        peak = max(peak, peak_rss_kib(harness.pid) or 0)
        chunk = harness.stderr.read()
        if chunk:
            stderr_chunks.append(chunk)
        time.sleep(0.02)
    elapsed = time.monotonic() - started
    rest = harness.stderr.read()
    if rest:
        stderr_chunks.append(rest)
    stderr = b"".join(stderr_chunks).decode(errors="replace")
    left = marked_processes(marker)
    for pid, _ in left:
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    tmp_left = os.listdir(tmp)
    summary, detail = verdicts(report)
    leftovers = []
    if left:
        leftovers.append(f"{len(left)} process(es): " + "; ".join(c[:40] for _, c in left))
    if tmp_left:
        leftovers.append(f"{len(tmp_left)} TMPDIR entries")
    warned = "warning: pid" in stderr
    return {
        "exit": harness.returncode, "time": elapsed, "peak_mib": peak / 1024,
        "verdicts": summary, "detail": detail,
        "leftovers": "; ".join(leftovers) or ("none (escaped process killed, with a warning)" if warned else "none"),
    }


def cell(text):
    return text.replace("|", "\\|").replace("`", "'")


def main():
    target = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target", "release"))
    for binary in ("delegation-harness", "delegation-reference-host"):
        if not os.access(os.path.join(target, binary), os.X_OK):
            sys.exit(f"{os.path.join(target, binary)} is missing: build with "
                     "`cargo build --release -p delegation-harness -p delegation-host` or pass the target directory")
    print(f"{len(SCENARIOS)} scenarios per row ({', '.join(SCENARIOS)}), --step-timeout-ms {STEP_TIMEOUT_MS}, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}\n")
    print("| adapter behaviour | verdicts | exit | time | harness peak memory | leftovers | first non-pass says |")
    print("|---|---|---|---|---|---|---|")
    for mode, behaviour in MODES:
        r = run(target, mode)
        print(f"| {behaviour} | {r['verdicts']} | {r['exit']} | {r['time']:.1f} s | {r['peak_mib']:.0f} MiB "
              f"| {cell(r['leftovers'])} | {cell(r['detail'])} |", flush=True)


if __name__ == "__main__":
    main()

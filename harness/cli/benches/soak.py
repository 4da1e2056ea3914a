#!/usr/bin/env python3
"""Soak: a long fuzz run against the reference host over stdio with memory and descriptors sampled, then runs killed at random points, each leaving a readable report.

Usage: harness/cli/benches/soak.py [--minutes 60] [--kills 20] [--seed 1] [TARGET_DIR]
(default target/release; build first: cargo build --release -p delegation-harness -p delegation-host)

Part 1 runs `delegation-harness fuzz --host <reference host>` for the given
minutes and samples, every 5 s, the harness's resident memory and open
descriptors and the same for its whole process tree (the adapter and what it
started, found by the run marker every adapter inherits). Flat means the
last quarter's peak is within 10% (memory) or 8 descriptors of the first
quarter's, after an eighth of the run left out as warm-up. The correct reference host must yield no finding.

Part 2 starts the whole catalogue over stdio N times and stops each run at a
random moment with SIGINT, SIGTERM, SIGHUP or SIGKILL, then checks that the
JSON report is whole and parses, that it says interrupted unless the run had
already finished, and what was left behind: processes carrying the harness's
marker, and store directories in the run's private TMPDIR (a harness killed
with SIGKILL cannot remove them; its adapters end when their stdin closes).
Exits 1 when a check fails.
"""
import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
MARKER = "DELEGATION_HARNESS_RUN"


def status_kib(pid, field):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def fd_count(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def tree_of(harness_pid):
    """The harness and every live process carrying its run marker."""
    wanted = None
    pids = [harness_pid]
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == harness_pid:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if wanted is None:
            wanted = marker_of(harness_pid)
        if wanted and wanted in env:
            pids.append(int(entry))
    return pids


def marker_of(harness_pid):
    # The marker names the harness's pid (see the process host); read it
    # back from any adapter rather than guessing its format.
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid != harness_pid:
                continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                for var in f.read().split(b"\0"):
                    if var.startswith(MARKER.encode() + b"="):
                        return var
        except (OSError, ValueError, IndexError):
            continue
    return None


def soak(target, minutes, seed):
    out = tempfile.mkdtemp(prefix="soak-")
    args = [os.path.join(target, "delegation-harness"), "fuzz", "--host",
            os.path.join(target, "delegation-reference-host"), "--seed", str(seed),
            "--cases", "100000000", "--time", str(minutes * 60), "--out", out]
    harness = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               env=dict(os.environ, NO_COLOR="1"))
    os.set_blocking(harness.stdout.fileno(), False)
    samples = []  # (seconds, harness rss KiB, harness fds, tree rss KiB, tree fds, processes)
    log = b""
    started = time.monotonic()
    while harness.poll() is None:
        tree = tree_of(harness.pid)
        samples.append((time.monotonic() - started, status_kib(harness.pid, "VmRSS"), fd_count(harness.pid),
                        sum(status_kib(p, "VmRSS") for p in tree), sum(fd_count(p) for p in tree), len(tree)))
        chunk = harness.stdout.read()
        if chunk:
            log += chunk
        time.sleep(5)
    log += harness.stdout.read() or b""
    text = log.decode(errors="replace")
    summary = [l for l in text.splitlines() if l.startswith("summary")]
    return harness.returncode, summary[-1] if summary else text[-500:], samples


def flat(values, tolerance):
    # The first eighth is warm-up (buffers, caches, the first long cases).
    values = values[len(values) // 8:]
    q = max(1, len(values) // 4)
    first, last = max(values[:q]), max(values[-q:])
    return first, last, tolerance(first, last)


def kills(target, count, seed):
    rng = random.Random(seed)
    results = []
    signals = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL]
    for i in range(count):
        work = tempfile.mkdtemp(prefix="soak-kill-")
        tmp = os.path.join(work, "tmp")
        os.mkdir(tmp)
        report = os.path.join(work, "report.json")
        sig = signals[i % len(signals)]
        at = rng.uniform(0.3, 8.0)
        harness = subprocess.Popen(
            [os.path.join(target, "delegation-harness"), "run", "--jobs", "2", "--host",
             os.path.join(target, "delegation-reference-host"), "--report", f"json={report}"],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env=dict(os.environ, TMPDIR=tmp, NO_COLOR="1"))
        time.sleep(at)
        marker = marker_of(harness.pid)
        finished_before = harness.poll() is not None
        if not finished_before:
            harness.send_signal(sig)
        try:
            harness.wait(timeout=30)
        except subprocess.TimeoutExpired:
            harness.kill()
            harness.wait()
        time.sleep(1.0)  # adapters of a SIGKILLed harness end when their stdin closes
        try:
            with open(report) as f:
                parsed = json.load(f)
            readable = True
            ran = len(parsed.get("scenarios", []))
            interrupted = parsed.get("interrupted", False)
        except (OSError, ValueError):
            readable, ran, interrupted = False, 0, None
        left = []
        if marker:
            for entry in os.listdir("/proc"):
                if entry.isdigit():
                    try:
                        with open(f"/proc/{entry}/environ", "rb") as f:
                            if marker in f.read().split(b"\0"):
                                left.append(int(entry))
                    except OSError:
                        pass
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        stores = len(os.listdir(tmp))
        ok = readable and (finished_before or interrupted) and not left and (sig == signal.SIGKILL or stores == 0)
        results.append((signal.Signals(sig).name, at, finished_before, readable, ran, interrupted, len(left), stores, ok))
    return results


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=60)
    p.add_argument("--kills", type=int, default=20)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("target", nargs="?", default=os.path.join(ROOT, "target", "release"))
    a = p.parse_args()
    target = os.path.abspath(a.target)
    print(f"soak: {a.minutes:g} min of fuzz over stdio, then {a.kills} killed runs; {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f} at the start")
    failed = False
    if a.minutes > 0:
        code, summary, samples = soak(target, a.minutes, a.seed)
        print(f"\nfuzz exit {code}: {summary}")
        failed |= code != 0
        if samples:
            mem = flat([s[1] for s in samples], lambda f, l: l <= f * 1.10)
            fds = flat([s[2] for s in samples], lambda f, l: l <= f + 8)
            tmem = flat([s[3] for s in samples], lambda f, l: l <= f * 1.10)
            tfds = flat([s[4] for s in samples], lambda f, l: l <= f + 8)
            print(f"{len(samples)} samples over {samples[-1][0] / 60:.1f} min")
            print("| measure | first quarter peak | last quarter peak | overall peak | flat |")
            print("|---|---|---|---|---|")
            for name, (first, last, ok), col, unit in [
                    ("harness resident memory", mem, 1, "MiB"), ("harness open descriptors", fds, 2, ""),
                    ("process tree resident memory", tmem, 3, "MiB"), ("process tree open descriptors", tfds, 4, "")]:
                scale = 1024 if unit else 1
                peak = max(s[col] for s in samples)
                print(f"| {name} | {first / scale:.0f} {unit} | {last / scale:.0f} {unit} | {peak / scale:.0f} {unit} | {'yes' if ok else 'NO'} |")
                failed |= not ok
            print(f"processes in the tree: median {statistics.median(s[5] for s in samples):.0f}, "
                  f"max {max(s[5] for s in samples)}")
    if a.kills > 0:
        print("\n| signal | after | finished first | report readable | scenarios in it | interrupted | processes left | stores left | ok |")
        print("|---|---|---|---|---|---|---|---|---|")
        for sig, at, done, readable, ran, interrupted, left, stores, ok in kills(target, a.kills, a.seed):
            print(f"| {sig} | {at:.1f} s | {done} | {readable} | {ran} | {interrupted} | {left} | {stores} | {'yes' if ok else 'NO'} |",
                  flush=True)
            failed |= not ok
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

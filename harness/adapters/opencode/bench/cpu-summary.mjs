#!/usr/bin/env node
// Sums up an OPENCODE_ADAPTER_CPU_LOG file (one JSON line per opencode serve start and stop): opencode's own CPU time to be ready and in all, per start.
//
// Usage: OPENCODE_ADAPTER_CPU_LOG=cpu.jsonl delegation-harness run --host opencode ... ; node bench/cpu-summary.mjs cpu.jsonl
// CPU time (user+sys from /proc) barely depends on how loaded the machine
// is, so runs at different loads compare by it, where wall time does not.

import { readFileSync } from 'node:fs';

const path = process.argv[2];
if (!path) {
  process.stderr.write('usage: cpu-summary.mjs CPU_LOG.jsonl\n');
  process.exit(2);
}
const byStart = new Map();
readFileSync(path, 'utf8').split('\n').filter(Boolean).forEach((line, i) => {
  let entry;
  try { entry = JSON.parse(line); } catch { throw new Error(`${path}:${i + 1}: not JSON: ${line.slice(0, 80)}`); }
  // A store's restart starts a second opencode over the same workspace: each ready opens a new start.
  const starts = byStart.get(entry.cwd) || [];
  if (entry.event === 'ready' || starts.length === 0) starts.push({});
  starts[starts.length - 1][entry.event] = entry;
  byStart.set(entry.cwd, starts);
});
const starts = [...byStart.values()].flat();
const ready = starts.filter((s) => s.ready).map((s) => s.ready.cpu_ms);
const total = starts.map((s) => (s.stop || s.kill || s.ready || {}).cpu_ms).filter((x) => x !== undefined);
const stats = (xs) => {
  const sorted = [...xs].sort((a, b) => a - b);
  const sum = xs.reduce((a, b) => a + b, 0);
  return { n: xs.length, sum_s: +(sum / 1000).toFixed(1), mean_ms: Math.round(sum / (xs.length || 1)), median_ms: sorted[Math.floor(sorted.length / 2)] ?? 0 };
};
console.log(JSON.stringify({ stores: byStart.size, starts: starts.length, ready_cpu: stats(ready), total_cpu: stats(total), after_ready_cpu: stats(starts.filter((s) => s.ready && (s.stop || s.kill)).map((s) => (s.stop || s.kill).cpu_ms - s.ready.cpu_ms)) }));

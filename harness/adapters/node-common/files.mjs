// Small file and process helpers every Node adapter needs: its own state as JSON, written whole, and a host's process group ended.

import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

/** The JSON in `path`, or `fallback` when it is missing or not JSON. */
export function readJson(path, fallback) {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    return fallback;
  }
}

/** Writes `text` to `path` whole: a reader sees the old file or the new one, never half. */
export function writeAtomic(path, text) {
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, text);
  renameSync(tmp, path);
}

/** Sends `signal` to a host's whole process group (it was spawned detached), or to the child alone when the group is gone. */
export function killGroup(child, signal = 'SIGTERM') {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    try { child.kill(signal); } catch { /* already gone */ }
  }
}

/**
 * Reads a child's stdout as JSON lines (stream-json, ACP): each parsed
 * message goes to `onMessage`; a line that is not JSON goes to `onGarbage`,
 * so it is kept with the host's stderr rather than lost.
 */
export function readJsonLines(stream, onMessage, onGarbage) {
  let buffer = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk) => {
    buffer += chunk;
    let i;
    while ((i = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, i).trim();
      buffer = buffer.slice(i + 1);
      if (!line) continue;
      let message;
      try { message = JSON.parse(line); } catch { onGarbage(line); continue; }
      onMessage(message);
    }
  });
}

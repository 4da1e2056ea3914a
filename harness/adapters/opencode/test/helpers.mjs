// Test helpers: run adapter.mjs as the harness would (a subprocess on stdio) against the fake opencode.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));
export const ADAPTER = join(HERE, '..', 'adapter.mjs');
export const FAKE = join(HERE, 'fake-opencode.mjs');

export const tempDir = (name) => mkdtempSync(join(tmpdir(), `oc-adapter-${name}-`));

/** Starts the adapter; `request(method, params)` answers the matching response line. */
export function startAdapter({ store, extraEnv = {} } = {}) {
  const env = { ...process.env, OPENCODE_ADAPTER_BIN: `${process.execPath} ${FAKE}`, OPENCODE_ADAPTER_TURN_TIMEOUT_MS: '5000', ...extraEnv };
  const child = spawn(process.execPath, [ADAPTER], { env: { ...env, DELEGATION_STORE_DIR: store }, stdio: ['pipe', 'pipe', 'pipe'] });
  const lines = [];
  const waiters = [];
  let buffer = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk) => {
    buffer += chunk;
    let i;
    while ((i = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, i);
      buffer = buffer.slice(i + 1);
      lines.push(line);
      const message = JSON.parse(line); // every stdout line must be JSON
      for (const w of [...waiters]) if (w.match(message)) { waiters.splice(waiters.indexOf(w), 1); w.resolve(message); }
    }
  });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  let nextId = 1;
  const waitFor = (match) => new Promise((resolve) => waiters.push({ match, resolve }));
  return {
    child, lines, exited,
    get stderr() { return stderr; },
    sendRaw(text) { child.stdin.write(text); },
    waitFor,
    request(method, params) {
      const id = nextId++;
      const p = waitFor((m) => m.id === id);
      const msg = { jsonrpc: '2.0', id, method };
      if (params !== undefined) msg.params = params;
      child.stdin.write(JSON.stringify(msg) + '\n');
      return p;
    },
    async initialize() {
      return this.request('initialize', { protocol_version: '1.0', environment: { model_endpoint: 'http://127.0.0.1:9', mcp_servers: [], store_dir: store, clock: 'harness' } });
    },
    close() { child.stdin.end(); return exited; },
  };
}

export const ROOT = (depth) => ({
  role: 'lead',
  sandbox: { 'workspace-write': { writable_roots: ['/w/repo'], network: false } },
  approval_policy: 'never',
  cwd: '/w/repo',
  delegation_depth: depth,
});

/** Whether a process runs (a zombie left to a PID 1 that does not reap counts as gone). */
export const alive = (pid) => {
  try { process.kill(pid, 0); } catch { return false; }
  try { return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8')); } catch { return false; }
};

#!/usr/bin/env node
// Reproduction: opencode's session fork drops the origin session's permission rules, so a fork of a read-only session writes files.
//
// Usage: node harness/adapters/opencode/repro/fork-authority.mjs [--keep]
//
// Starts the pinned opencode as adapter.mjs does, with a scripted Chat
// Completions endpoint of its own on loopback (no harness, no adapter). A
// root session gets the adapter's read-only rules (edit and bash denied);
// POST /session/{id}/fork forks it. Both sessions are shown as opencode
// holds them (GET /session/{id}: `permission`), then each is prompted to
// `write` a file, and the file is looked for on disk. The origin is the
// control: the same scripted call is refused there.

import { createServer } from 'node:http';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureOpencode, isolatedEnv, opencodeConfig, writeOpencodeFiles, OpencodeServer, seedConfig } from '../lib/opencode.mjs';
import { sessionPermission } from '../lib/mapping.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let seq = 0;
let calls = {};

function lastUserText(messages) {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m.role === 'tool') return null;
    if (m.role === 'user') return typeof m.content === 'string' ? m.content : (m.content || []).map((p) => p.text || '').join('');
  }
  return '';
}

const endpoint = createServer((req, res) => {
  let raw = '';
  req.on('data', (d) => { raw += d; });
  req.on('end', () => {
    if (!(req.method === 'POST' && req.url.endsWith('/chat/completions'))) { res.writeHead(404); res.end(); return; }
    const body = JSON.parse(raw);
    const text = Array.isArray(body.tools) && body.tools.length ? lastUserText(body.messages || []) : null;
    const marker = text && Object.keys(calls).find((k) => text.includes(k));
    const id = `chatcmpl-fork-${++seq}`;
    const chunk = (delta, finish) => `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: 0, model: 'reference-model', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(chunk({ role: 'assistant', content: '' }, null));
    if (marker) {
      res.write(chunk({ tool_calls: [{ index: 0, id: `call_fork_${seq}`, type: 'function', function: { name: 'write', arguments: JSON.stringify(calls[marker]) } }] }, null));
      res.write(chunk({}, 'tool_calls'));
    } else {
      res.write(chunk({ content: 'ok' }, null));
      res.write(chunk({}, 'stop'));
    }
    res.end('data: [DONE]\n\n');
  });
});
await new Promise((r) => endpoint.listen(0, '127.0.0.1', r));

const store = mkdtempSync(join(tmpdir(), 'opencode-fork-authority-'));
const env = isolatedEnv(store);
if (!seedConfig(process.env, env)) process.stderr.write('no config seed: run `node adapter.mjs --install` first\n');
const cwd = writeOpencodeFiles(store, env, opencodeConfig({ modelEndpoint: `http://127.0.0.1:${endpoint.address().port}`, subagentDepth: 1, roles: ['worker'] }));
const server = new OpencodeServer({ ...ensureOpencode(), env, cwd, log: () => {} });
process.on('exit', () => server.killNow());
await server.start({ readyTimeoutMs: 90000 });
const api = async (method, path, body) => {
  const res = await server.call(method, path, body, { timeoutMs: 30000 });
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
};

async function attempt(sessionID, tag) {
  const file = join(cwd, `${tag}.txt`);
  calls = { [tag]: { filePath: file, content: 'written\n' } };
  const before = (await api('GET', `/session/${sessionID}/message`)).length;
  await api('POST', `/session/${sessionID}/prompt_async`, { parts: [{ type: 'text', text: `write it ${tag}` }] });
  const asks = [];
  const deadline = Date.now() + 90000;
  while (Date.now() < deadline) {
    for (const p of (await api('GET', '/permission')) || []) {
      asks.push(p.permission);
      await api('POST', `/permission/${p.id}/reply`, { reply: 'reject' });
    }
    const msgs = await api('GET', `/session/${sessionID}/message`);
    const last = msgs[msgs.length - 1];
    const busy = Object.keys((await api('GET', '/session/status')) || {}).length > 0;
    if (!busy && msgs.length > before + 1 && last.info.role === 'assistant' && last.info.time.completed) break;
    await sleep(200);
  }
  const tools = [];
  for (const m of (await api('GET', `/session/${sessionID}/message`)).slice(before)) {
    for (const p of m.parts || []) if (p.type === 'tool') tools.push(`${p.tool}:${p.state && p.state.status}`);
  }
  return { tools, asks, file_written: existsSync(file) };
}

const origin = await api('POST', '/session', { title: 'fork probe', permission: sessionPermission({ sandbox: 'read-only', approval_policy: 'never', cwd: '/w/repo' }) });
const fork = await api('POST', `/session/${origin.id}/fork`, {});
const shown = async (s) => { const got = await api('GET', `/session/${s.id}`); return { id: got.id, parentID: got.parentID, permission: got.permission ?? null }; };
const report = {
  origin: { ...(await shown(origin)), write: await attempt(origin.id, 'ORIGIN-WRITE') },
  fork: { ...(await shown(fork)), write: await attempt(fork.id, 'FORK-WRITE') },
};
process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
await server.stop({ graceMs: 1000 });
endpoint.close();
if (!process.argv.includes('--keep')) rmSync(store, { recursive: true, force: true });
process.exit(0);

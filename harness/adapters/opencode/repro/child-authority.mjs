#!/usr/bin/env node
// Reproduction for zc/015, zc/017, zc/018: what a child that opencode's `task` tool creates may really do, next to what its parent may do.
//
// Usage: node harness/adapters/opencode/repro/child-authority.mjs [--keep] [--only=TEXT]
//
// --only=TEXT runs only the cases whose name contains TEXT (e.g. `--only=ask`).
//
// Starts the pinned opencode exactly as adapter.mjs does (same opencode.json,
// same per-session permission rules from lib/mapping.mjs), with a scripted
// Chat Completions endpoint of its own on loopback. For each case a fresh
// root session is restricted the way the adapter restricts the zc/015 or
// zc/018 parent; then (1) the parent itself attempts the action, and (2) the
// parent calls `task` and the child attempts the same action. The action is
// observed outside opencode: a canary URL on our own server counts fetches,
// files are looked for on disk, pending permission asks are listed (and
// rejected). Prints one JSON line per attempt, then a summary.

import { createServer } from 'node:http';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import {
  ensureOpencode, isolatedEnv, opencodeConfig, writeOpencodeFiles, OpencodeServer, seedConfig,
} from '../lib/opencode.mjs';
import { sessionPermission } from '../lib/mapping.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const keep = process.argv.includes('--keep');
const only = (process.argv.find((a) => a.startsWith('--only=')) || '').slice('--only='.length);

// ---- the scripted model endpoint (and the canary) ---------------------------------------------

const canaryHits = [];
const requests = [];
let actions = {};
let seq = 0;

function lastText(messages) {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m.role === 'tool') return { tool: true, text: String(m.content) };
    if (m.role === 'user') {
      const text = typeof m.content === 'string' ? m.content : (m.content || []).map((p) => p.text || '').join('');
      return { tool: false, text };
    }
  }
  return { tool: false, text: '' };
}

function reply(body) {
  const tools = Array.isArray(body.tools) ? body.tools.map((t) => t.function && t.function.name) : [];
  if (tools.length === 0) return { text: 'Probe session' }; // title generation
  const last = lastText(body.messages || []);
  requests.push({ tools, marker: (last.text.match(/[A-Z]+-[A-Z]+-[a-z0-9]+/) || [''])[0], tool_result: last.tool });
  if (last.tool) return { text: 'done' };
  for (const [marker, call] of Object.entries(actions)) {
    if (last.text.includes(marker)) return { call };
  }
  return { text: 'ok' };
}

function sse(res, out) {
  const id = `chatcmpl-probe-${++seq}`;
  const chunk = (delta, finish) => `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: 0, model: 'reference-model', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  res.write(chunk({ role: 'assistant', content: '' }, null));
  if (out.call) {
    res.write(chunk({ tool_calls: [{ index: 0, id: `call_probe_${seq}`, type: 'function', function: { name: out.call.name, arguments: JSON.stringify(out.call.arguments) } }] }, null));
    res.write(chunk({}, 'tool_calls'));
  } else {
    res.write(chunk({ content: out.text }, null));
    res.write(chunk({}, 'stop'));
  }
  res.end('data: [DONE]\n\n');
}

const endpoint = createServer((req, res) => {
  let raw = '';
  req.on('data', (d) => { raw += d; });
  req.on('end', () => {
    if (req.url.startsWith('/canary/')) {
      canaryHits.push(req.url);
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('CANARY REACHED');
      return;
    }
    if (req.method === 'POST' && req.url.endsWith('/chat/completions')) {
      sse(res, reply(JSON.parse(raw)));
      return;
    }
    res.writeHead(404);
    res.end();
  });
});
await new Promise((r) => endpoint.listen(0, '127.0.0.1', r));
const base = `http://127.0.0.1:${endpoint.address().port}`;

// ---- opencode, started as the adapter starts it --------------------------------------------------

const store = mkdtempSync(join(tmpdir(), 'opencode-child-authority-'));
const env = isolatedEnv(store);
if (!seedConfig(process.env, env)) process.stderr.write('no config seed: run `node adapter.mjs --install` first (opencode will run npm now)\n');
const cwd = writeOpencodeFiles(store, env, opencodeConfig({ modelEndpoint: base, subagentDepth: 1, roles: ['worker'] }));
const outside = join(dirname(cwd), 'outside-the-workspace.txt');
writeFileSync(outside, 'OUTSIDE SECRET\n');
const bin = ensureOpencode();
const server = new OpencodeServer({ ...bin, env, cwd, log: () => {} });
process.on('exit', () => server.killNow());
await server.start({ readyTimeoutMs: 60000 });
const api = async (method, path, body) => {
  const res = await server.call(method, path, body, { timeoutMs: 20000 });
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
};

/** Sends one prompt and waits until no session is busy; pending permission asks are recorded and rejected. */
async function prompt(sessionID, text) {
  const asks = [];
  await api('POST', `/session/${sessionID}/prompt_async`, { parts: [{ type: 'text', text }] });
  const deadline = Date.now() + 90000;
  let sawBusy = false;
  while (Date.now() < deadline) {
    for (const p of (await api('GET', '/permission')) || []) {
      asks.push({ session: p.sessionID, permission: p.permission, patterns: p.patterns });
      await api('POST', `/permission/${p.id}/reply`, { reply: 'reject' });
    }
    const status = (await api('GET', '/session/status')) || {};
    const busy = Object.values(status).some((s) => s && s.type !== 'idle');
    if (busy) sawBusy = true;
    const msgs = await api('GET', `/session/${sessionID}/message`);
    const last = msgs[msgs.length - 1];
    if (!busy && sawBusy && last && last.info.role === 'assistant' && last.info.time.completed) break;
    await sleep(200);
  }
  return asks;
}

/** The tool parts of a session (name, status, error, output excerpt). */
async function toolParts(sessionID) {
  const out = [];
  for (const m of await api('GET', `/session/${sessionID}/message`)) {
    for (const p of m.parts || []) {
      if (p.type !== 'tool') continue;
      const s = p.state || {};
      out.push({ tool: p.tool, status: s.status, error: s.error ? String(s.error).slice(0, 300) : undefined, output: typeof s.output === 'string' ? s.output.slice(0, 160) : undefined });
    }
  }
  return out;
}

// ---- the cases -------------------------------------------------------------------------------------

const workspaceWriteNoNetwork = { sandbox: { 'workspace-write': { writable_roots: ['/w/repo'], network: false } }, approval_policy: 'never', cwd: '/w/repo', delegation_depth: 1 };
const readOnly = { sandbox: 'read-only', approval_policy: 'never', cwd: '/w/repo', delegation_depth: 1 };
const fullAccess = { sandbox: 'full-access', approval_policy: 'never', cwd: '/w/repo', delegation_depth: 1 };
const fetchCanary = (tag) => ({ name: 'webfetch', arguments: { url: `${base}/canary/${tag}`, format: 'text' } });
const fetched = (tag) => canaryHits.filter((h) => h.endsWith(`/${tag}`)).length;
const writeFile = (tag) => ({ name: 'write', arguments: { filePath: join(cwd, `${tag}.txt`), content: 'written\n' } });
const written = (tag) => (existsSync(join(cwd, `${tag}.txt`)) ? 1 : 0);

// The first two cases are positive controls: with nothing denied, the same
// scripted calls do reach the canary and do write the file, so a 0 below is
// opencode refusing, not the probe failing.
const cases = [
  { name: 'control: network (full-access parent)', parent: fullAccess, action: fetchCanary, effect: fetched },
  { name: 'control: file write (full-access parent)', parent: fullAccess, action: writeFile, effect: written },
  { name: 'network (zc/015 parent: workspace-write, network false)', parent: workspaceWriteNoNetwork, action: fetchCanary, effect: fetched },
  { name: 'file write (read-only parent)', parent: readOnly, action: writeFile, effect: written },
  {
    name: 'shell (read-only parent)', parent: readOnly,
    action: (tag) => ({ name: 'bash', arguments: { command: `touch ${tag}.txt`, description: 'touch a file' } }),
    effect: written,
  },
  // A parent whose rules ask before a file write (as the adapter's rules ask
  // for a tool its approval policy wants a person for): the parent's own
  // write waits for a person (the probe rejects it, so no file); the child's
  // write shows whether opencode asks there too or runs it unasked.
  { name: 'ask: file write (parent asks before edit)', parent: fullAccess, rules: [{ permission: 'edit', pattern: '*', action: 'ask' }], action: writeFile, effect: written },
  {
    name: 'read outside the workspace (zc/018: cwd `..`)', parent: workspaceWriteNoNetwork,
    action: () => ({ name: 'read', arguments: { filePath: outside } }),
    effect: () => 'see tool output',
  },
];

const results = [];
let n = 0;
for (const c of cases.filter((x) => x.name.includes(only))) {
  for (const who of ['parent', 'child']) {
    n += 1;
    const tag = `probe-${who}-${n}`;
    const childMarker = `CHILD-TASK-${n}`;
    const selfMarker = `SELF-ACT-${n}`;
    const delegateMarker = `DELEGATE-NOW-${n}`;
    actions = {
      [childMarker]: c.action(tag),
      [selfMarker]: c.action(tag),
      [delegateMarker]: { name: 'task', arguments: { description: 'probe child', prompt: `child task ${childMarker}`, subagent_type: 'worker' } },
    };
    const permission = c.rules || sessionPermission(c.parent);
    const root = await api('POST', '/session', { title: `probe ${tag}`, permission });
    const asks = await prompt(root.id, who === 'parent' ? `do it yourself ${selfMarker}` : `delegate it ${delegateMarker}`);
    const kids = await api('GET', `/session/${root.id}/children`);
    const child = kids[0];
    const record = {
      case: c.name, who, parent_permission: permission, parent_directory: root.directory,
      child_session: child ? { id: child.id, agent: child.agent, directory: child.directory, permission: child.permission } : null,
      tool_parts: await toolParts(child ? child.id : root.id),
      permission_asks: asks,
      effect: c.effect(tag),
    };
    results.push(record);
    process.stdout.write(`${JSON.stringify(record)}\n`);
  }
}

await server.stop({ graceMs: 1000 });
endpoint.close();
if (!keep) rmSync(store, { recursive: true, force: true });
else process.stderr.write(`store kept: ${store}\n`);
process.stdout.write(`${JSON.stringify({ tools_shown_to_models: [...new Set(requests.map((r) => r.tools.join(',')))] })}\n`);
process.stdout.write(`${JSON.stringify({ summary: results.map((r) => ({ case: r.case, who: r.who, statuses: r.tool_parts.map((t) => `${t.tool}:${t.status}`), same_directory: r.child_session ? r.child_session.directory === r.parent_directory : undefined, effect: r.effect, asks: r.permission_asks.length })) })}\n`);
process.exit(0);

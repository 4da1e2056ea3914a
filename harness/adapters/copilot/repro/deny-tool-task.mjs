#!/usr/bin/env node
// Reproduction for finding 1: a deny rule on Copilot's subagent tool (`--deny-tool task`) does not stop a subagent from being created; only removing the tool (`--excluded-tools task`) does.
//
// Usage: node harness/adapters/copilot/repro/deny-tool-task.mjs [--keep]
//
// Runs the pinned Copilot CLI directly (no harness, no adapter), isolated and
// offline exactly as adapter.mjs runs it (lib/copilot.mjs), against a
// scripted Chat Completions endpoint of its own on loopback. The scripted
// model answers the prompt with a `task` call; a subagent's requests are
// counted at that endpoint by the header Copilot sends on them
// (`x-interaction-type: conversation-subagent`). Five cases, each a fresh
// home:
//   control          no rule: one subagent, its request arrives
//   deny-tool task   the deny rule under test
//   excluded task    the tool removed: no subagent, no subagent request
//   shell            the scripted model calls bash instead: the command
//                    runs (it creates a canary file)
//   deny-tool shell  the same kind of rule on the shell: the control that
//                    deny rules are enforced at all (no canary file)
// Prints one JSON line per case and a verdict; exits 1 if the endpoint's
// counts contradict the finding.

import { createServer } from 'node:http';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureCopilot, isolatedEnv, runCopilot, storePaths } from '../lib/copilot.mjs';

const keep = process.argv.includes('--keep');
const CHILD_PROMPT = 'CHILD_TASK say done';

// ---- the scripted model endpoint ----------------------------------------------------------

let counts = { parent: 0, subagent: 0 };
let mode = 'task';
let seq = 0;

function text(content) {
  if (typeof content === 'string') return content;
  return (content || []).map((p) => p.text || '').join('');
}

function answer(body, req) {
  const subagent = req.headers['x-interaction-type'] === 'conversation-subagent';
  if (subagent) counts.subagent++;
  else counts.parent++;
  const messages = body.messages || [];
  const last = messages[messages.length - 1] || {};
  seq++;
  if (!subagent && last.role === 'user' && text(last.content).includes('GO')) {
    const call = mode === 'task'
      ? { name: 'task', arguments: { name: 'kid', description: 'delegate', prompt: CHILD_PROMPT, agent_type: 'general-purpose', mode: 'sync' } }
      : { name: 'bash', arguments: { command: 'touch canary.txt', description: 'touch', mode: 'sync', initial_wait: 10 } };
    return { tool_calls: [{ index: 0, id: `call_${seq}`, type: 'function', function: { name: call.name, arguments: JSON.stringify(call.arguments) } }] };
  }
  return { content: subagent ? 'child done' : 'parent done' };
}

const server = createServer((req, res) => {
  let raw = '';
  req.on('data', (c) => { raw += c; });
  req.on('end', () => {
    if (req.method !== 'POST') { res.writeHead(404).end('{}'); return; }
    const body = JSON.parse(raw);
    const delta = answer(body, req);
    const chunk = (d, finish) => `data: ${JSON.stringify({ id: `c${seq}`, object: 'chat.completion.chunk', created: 0, model: body.model, choices: [{ index: 0, delta: d, finish_reason: finish }] })}\n\n`;
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(chunk({ role: 'assistant', content: '' }, null));
    res.write(chunk(delta, null));
    res.write(chunk({}, delta.tool_calls ? 'tool_calls' : 'stop'));
    res.end('data: [DONE]\n\n');
  });
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const endpoint = `http://127.0.0.1:${server.address().port}`;

// ---- the cases ------------------------------------------------------------------------------

const bin = ensureCopilot({ log: (level, message) => process.stderr.write(`${level}: ${message}\n`) });
const cases = [
  { name: 'control', mode: 'task', flags: [] },
  { name: 'deny-tool task', mode: 'task', flags: ['--deny-tool=task'] },
  { name: 'excluded task', mode: 'task', flags: ['--excluded-tools=task'] },
  { name: 'shell', mode: 'shell', flags: [] },
  { name: 'deny-tool shell', mode: 'shell', flags: ['--deny-tool=shell'] },
];
const results = {};
for (const c of cases) {
  const store = mkdtempSync(join(tmpdir(), 'copilot-repro-'));
  const env = isolatedEnv(store, endpoint, bin);
  const cwd = join(storePaths(store).fs, 'w');
  mkdirSync(cwd, { recursive: true });
  counts = { parent: 0, subagent: 0 };
  mode = c.mode;
  const run = await runCopilot({
    bin, env, cwd, timeoutMs: 60000,
    args: ['--prompt=GO', '--output-format', 'json', '--allow-all-tools', '--no-ask-user', '--no-auto-update', '--disable-builtin-mcps', ...c.flags],
  });
  const started = run.events.filter((e) => e.type === 'subagent.started').length;
  const completes = run.events.filter((e) => e.type === 'tool.execution_complete').map((e) => e.data.success ? 'ok' : `${e.data.error && e.data.error.code}: ${e.data.error && e.data.error.message}`);
  const line = {
    case: c.name, flags: c.flags, exit: run.code,
    endpoint: { parent_requests: counts.parent, subagent_requests: counts.subagent },
    copilot_events: { subagent_started: started, tool_results: completes },
    ...(c.mode === 'shell' ? { canary_file_created: existsSync(join(cwd, 'canary.txt')) } : {}),
  };
  results[c.name] = line;
  process.stdout.write(JSON.stringify(line) + '\n');
  if (!keep) rmSync(store, { recursive: true, force: true });
}
server.close();

const r = results;
const holds = r.control.endpoint.subagent_requests >= 1
  && r['deny-tool task'].endpoint.subagent_requests >= 1 && r['deny-tool task'].copilot_events.subagent_started === 1
  && r['excluded task'].endpoint.subagent_requests === 0 && r['excluded task'].copilot_events.subagent_started === 0
  && r.shell.canary_file_created === true && r['deny-tool shell'].canary_file_created === false;
process.stdout.write(holds
  ? `finding holds (Copilot ${bin.version}): with --deny-tool task a subagent is still created and makes its model request(s); --excluded-tools task creates none; --deny-tool shell is enforced (no canary file)\n`
  : `finding does not hold as stated (Copilot ${bin.version}): see the lines above\n`);
process.exit(holds ? 0 : 1);

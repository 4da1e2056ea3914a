#!/usr/bin/env node
// A stand-in for `copilot -p --output-format json`: writes the JSON events and session files GitHub Copilot CLI 1.0.102 writes, scripted by the prompt, for the adapter's tests.
//
// The prompt (--prompt=TEXT) decides what the fake "model" does:
//   contains SPAWN:<role>    the main thread calls `task`; a subagent is
//                            started unless `task` is in --excluded-tools
//                            (then Copilot's "Tool 'task' does not exist.")
//   contains CALL:<tool>     the main thread calls <tool>; one in
//                            --excluded-tools does not exist, one whose
//                            permission kind is in --deny-tool is denied,
//                            one neither allowed (--allow-all-tools, or its
//                            kind in --allow-tool) would ask, and -p answers
//                            its own ask with a denial; any other runs
//   contains FAIL            the model request fails (session.error, exit 1)
//   anything else            the model answers "ok"
// Every invocation's argv, cwd and chosen environment are appended to
// $COPILOT_ADAPTER_FAKE_LOG (one JSON line each) when that is set.

import { appendFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';

const argv = process.argv.slice(2);
// Only ever run by the adapter under test (which gives it an isolated
// home); run directly (e.g. by `node --test` on this folder) it does nothing.
if (!process.env.COPILOT_HOME) process.exit(0);
if (argv.includes('--version')) {
  process.stdout.write('GitHub Copilot CLI 1.0.102.\n');
  process.exit(0);
}
const option = (name) => {
  const i = argv.indexOf(name);
  if (i >= 0) return argv[i + 1];
  const joined = argv.find((a) => a.startsWith(`${name}=`));
  return joined ? joined.slice(name.length + 1) : undefined;
};
const all = (name) => argv.filter((a) => a.startsWith(`${name}=`)).map((a) => a.slice(name.length + 1));
const prompt = option('--prompt') ?? option('-p') ?? '';
const cwd = process.cwd();
if (process.env.COPILOT_ADAPTER_FAKE_LOG) {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => /^(HOME|TMPDIR|XDG_|COPILOT_|GH_|GITHUB_)/.test(k)));
  appendFileSync(process.env.COPILOT_ADAPTER_FAKE_LOG, JSON.stringify({ argv, cwd, env, prompt }) + '\n');
}
const session = option('--session-id') || randomUUID();
const excluded = (option('--excluded-tools') || '').split(',').filter(Boolean);
const denied = all('--deny-tool');
const dir = join(process.env.COPILOT_HOME || join(process.env.HOME, '.copilot'), 'session-state', session);
mkdirSync(dir, { recursive: true });
const out = (event) => {
  const line = JSON.stringify({ ...event, id: randomUUID(), timestamp: new Date().toISOString() });
  process.stdout.write(line + '\n');
  appendFileSync(join(dir, 'events.jsonl'), line + '\n');
};
const assistant = (content, toolRequests = [], agentId, parentToolCallId) =>
  out({ type: 'assistant.message', data: { content, toolRequests, ...(parentToolCallId ? { parentToolCallId } : {}) }, ...(agentId ? { agentId } : {}) });
const complete = (toolCallId, fields) => out({ type: 'tool.execution_complete', data: { toolCallId, ...fields } });
const result = (exitCode = 0) => process.stdout.write(JSON.stringify({ type: 'result', sessionId: session, exitCode }) + '\n');

out({ type: 'user.message', data: { content: prompt } });
const spawn = prompt.match(/SPAWN:(\S+)/);
const call = prompt.match(/CALL:(\S+)/);
if (prompt.includes('FAIL')) {
  out({ type: 'session.error', data: { errorType: 'model_call', message: 'Failed to get response from the AI model; retried 5 times (last status 503)' } });
  result(1);
  process.exit(1);
} else if (spawn) {
  const id = 'call_harness_1';
  assistant('', [{ toolCallId: id, name: 'task', arguments: { name: spawn[1], prompt: 'child task', agent_type: spawn[1] } }]);
  if (excluded.includes('task')) {
    complete(id, { success: false, error: { message: "Tool 'task' does not exist.", code: 'failure' } });
  } else {
    const agentId = randomUUID();
    out({ type: 'subagent.started', data: { toolCallId: id, agentName: spawn[1], executionMode: 'sync' }, agentId });
    assistant('child done', [], agentId, id);
    complete(id, { success: true, result: { content: 'child done' } });
    out({ type: 'subagent.completed', data: { toolCallId: id, agentName: spawn[1] }, agentId });
  }
  assistant('parent done');
  result();
} else if (call) {
  const id = 'call_harness_2';
  const tool = call[1];
  assistant('', [{ toolCallId: id, name: tool, arguments: {} }]);
  const kind = tool === 'bash' ? 'shell' : ['create', 'edit'].includes(tool) ? 'write' : tool.split('-')[0];
  if (excluded.includes(tool)) complete(id, { success: false, error: { message: `Tool '${tool}' does not exist.`, code: 'failure' } });
  else if (denied.includes(kind)) complete(id, { success: false, error: { message: `Permission to run this tool was denied due to the following rules: \`${kind}\``, code: 'denied' } });
  else if (!argv.includes('--allow-all-tools') && !argv.includes('--allow-all') && !all('--allow-tool').includes(kind) && tool !== 'view') {
    complete(id, { success: false, error: { message: 'Permission denied because no interactive user response was available. Retry in an interactive session so the user can approve it, or try an alternative that does not require this permission.', code: 'denied' } });
  } else complete(id, { success: true, result: { content: `ran ${tool}` } });
  assistant('done');
  result();
} else {
  assistant('ok');
  result();
}

#!/usr/bin/env node
// A stand-in for `copilot -p --output-format json` and `copilot --acp`: writes the JSON events and session files GitHub Copilot CLI 1.0.102 writes, scripted by the prompt, for the adapter's tests.
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
// With --acp it is Copilot's Agent Client Protocol server instead: each
// `session/prompt` runs the same script, and a call that would ask sends
// `session/request_permission` and waits for the client's answer (allow_once
// runs it, reject_once is Copilot's "The user rejected this tool call.").
// Every invocation's argv, cwd and chosen environment are appended to
// $COPILOT_ADAPTER_FAKE_LOG (one JSON line each) when that is set.

import { appendFileSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
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
const excluded = (option('--excluded-tools') || '').split(',').filter(Boolean);
const denied = all('--deny-tool');
const home = process.env.COPILOT_HOME || join(process.env.HOME, '.copilot');
const acp = argv.includes('--acp');
// ACP: messages to the client, and the answers to Copilot's own requests.
const send = (message) => process.stdout.write(JSON.stringify({ jsonrpc: '2.0', ...message }) + '\n');
const answers = new Map();
let seq = 0;

/** Runs one prompt of session `session`, as the scripted model decides. */
async function runPrompt(session, prompt) {
  const dir = join(home, 'session-state', session);
  mkdirSync(dir, { recursive: true });
  const out = (event) => {
    const line = JSON.stringify({ ...event, id: randomUUID(), timestamp: new Date().toISOString() });
    if (!acp) process.stdout.write(line + '\n');
    appendFileSync(join(dir, 'events.jsonl'), line + '\n');
  };
  const assistant = (content, toolRequests = [], agentId, parentToolCallId) =>
    out({ type: 'assistant.message', data: { content, toolRequests, ...(parentToolCallId ? { parentToolCallId } : {}) }, ...(agentId ? { agentId } : {}) });
  const complete = (toolCallId, fields) => out({ type: 'tool.execution_complete', data: { toolCallId, ...fields } });
  const result = (exitCode = 0) => { if (!acp) process.stdout.write(JSON.stringify({ type: 'result', sessionId: session, exitCode }) + '\n'); };

  out({ type: 'user.message', data: { content: prompt } });
  const spawn = prompt.match(/SPAWN:(\S+)/);
  const call = prompt.match(/CALL:(\S+)/);
  if (prompt.includes('FAIL')) {
    out({ type: 'session.error', data: { errorType: 'model_call', message: 'Failed to get response from the AI model; retried 5 times (last status 503)' } });
    result(1);
    return 1;
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
  } else if (call) {
    const id = `call_harness_${++seq + 1}`;
    const tool = call[1];
    assistant('', [{ toolCallId: id, name: tool, arguments: {} }]);
    const kind = tool === 'bash' ? 'shell' : ['create', 'edit'].includes(tool) ? 'write' : tool.split('-')[0];
    if (excluded.includes(tool)) complete(id, { success: false, error: { message: `Tool '${tool}' does not exist.`, code: 'failure' } });
    else if (denied.includes(kind)) complete(id, { success: false, error: { message: `Permission to run this tool was denied due to the following rules: \`${kind}\``, code: 'denied' } });
    else if (!argv.includes('--allow-all-tools') && !argv.includes('--allow-all') && !all('--allow-tool').includes(kind) && tool !== 'view') {
      if (!acp) {
        complete(id, { success: false, error: { message: 'Permission denied because no interactive user response was available. Retry in an interactive session so the user can approve it, or try an alternative that does not require this permission.', code: 'denied' } });
      } else {
        const requestId = 1000 + seq;
        const answer = new Promise((resolve) => answers.set(requestId, resolve));
        send({ id: requestId, method: 'session/request_permission', params: { sessionId: session, toolCall: { toolCallId: id, title: tool, kind: 'execute', status: 'pending', rawInput: {} },
          options: [{ optionId: 'allow_once', kind: 'allow_once', name: 'Allow once' }, { optionId: 'allow_always', kind: 'allow_always', name: 'Always allow' }, { optionId: 'reject_once', kind: 'reject_once', name: 'Deny' }] } });
        const chosen = await answer;
        if (chosen === 'allow_once') complete(id, { success: true, result: { content: `ran ${tool}` } });
        else complete(id, { success: false, error: { message: 'The user rejected this tool call.', code: 'rejected' } });
      }
    } else complete(id, { success: true, result: { content: `ran ${tool}` } });
    assistant('done');
  } else {
    assistant('ok');
  }
  if (!spawn) { /* the answer was given above */ } else assistant('parent done');
  result();
  return 0;
}

if (!acp) {
  process.exit(await runPrompt(option('--session-id') || randomUUID(), prompt));
}

let buffer = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  buffer += chunk;
  let i;
  while ((i = buffer.indexOf('\n')) >= 0) {
    const message = JSON.parse(buffer.slice(0, i));
    buffer = buffer.slice(i + 1);
    handle(message);
  }
});
process.stdin.on('end', () => process.exit(0));

async function handle(message) {
  if (!message.method) {
    const resolve = answers.get(message.id);
    if (resolve) { answers.delete(message.id); resolve(message.result.outcome.optionId); }
    return;
  }
  const params = message.params || {};
  if (message.method === 'initialize') return send({ id: message.id, result: { protocolVersion: 1, agentCapabilities: { loadSession: true } } });
  if (message.method === 'session/new') {
    const session = randomUUID();
    const dir = join(home, 'session-state', session);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'workspace.yaml'), `id: ${session}\n`);
    return send({ id: message.id, result: { sessionId: session } });
  }
  if (message.method === 'session/load') {
    if (!existsSync(join(home, 'session-state', params.sessionId, 'events.jsonl'))) return send({ id: message.id, error: { code: -32002, message: `Session ${params.sessionId} not found` } });
    return send({ id: message.id, result: {} });
  }
  if (message.method === 'session/prompt') {
    const code = await runPrompt(params.sessionId, params.prompt.map((p) => p.text).join(''));
    return send({ id: message.id, result: { stopReason: code === 0 ? 'end_turn' : 'refusal' } });
  }
  return send({ id: message.id, error: { code: -32601, message: `fake: ${message.method}` } });
}

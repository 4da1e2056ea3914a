#!/usr/bin/env node
// A stand-in for headless `qwen -o stream-json`: writes the chat records, subagent meta files and stream-json events Qwen Code 0.24.4 writes, scripted by the prompt, for the adapter's tests.
//
// The prompt (stdin) decides what the fake "model" does:
//   contains SPAWN:<role>    the main thread calls `agent`; a subagent is
//                            started (its meta file under subagents/<session>/)
//                            unless `agent` is in --exclude-tools (Qwen Code's
//                            "not found in registry" error) or not in
//                            --allowed-tools (declined: nobody to ask)
//   contains CALL:<tool>     the main thread calls <tool>; an excluded tool is
//                            not found, an allowed one runs, any other is
//                            declined (headless: nobody to ask)
//   contains FAIL            the API fails (an error result)
//   contains HANG            never ends, and ignores SIGTERM (as the issue saw Qwen Code 0.15.10 do)
//   anything else            the model answers "ok"
// With `--input-format stream-json` it speaks Qwen Code's control protocol
// instead: an `initialize` control request first (its `agents` are the only
// subagent types, as in Qwen Code's SDK mode), then the prompt as a user
// message; a call that would be declined headless is asked as a
// `can_use_tool` control request and runs or is refused by the answer; the
// process ends at the end of its input.
// Every invocation's argv, cwd and chosen environment are appended to
// $QWEN_CODE_ADAPTER_FAKE_LOG (one JSON line each) when that is set.

import { appendFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const argv = process.argv.slice(2);
const option = (name) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
/** The values of an array option (`--exclude-tools a b`): every word up to the next option. */
const values = (name) => {
  const out = [];
  argv.forEach((word, i) => {
    if (word !== name) return;
    for (let j = i + 1; j < argv.length && !argv[j].startsWith('--'); j++) out.push(argv[j]);
  });
  return out;
};
if (argv.includes('--version')) {
  process.stdout.write('0.24.4\n');
  process.exit(0);
}
const streamInput = option('--input-format') === 'stream-json';
/** Stdin's stream-json messages, one at a time (the control protocol). */
const inbox = [];
let wakeInbox = () => {};
let inputEnded = false;
const nextMessage = async () => {
  while (inbox.length === 0) {
    if (inputEnded) return null;
    await new Promise((resolve) => { wakeInbox = resolve; });
  }
  return inbox.shift();
};
if (streamInput) {
  let buffer = '';
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', (chunk) => {
    buffer += chunk;
    let i;
    while ((i = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, i).trim();
      buffer = buffer.slice(i + 1);
      if (line) inbox.push(JSON.parse(line));
      wakeInbox();
    }
  });
  process.stdin.on('end', () => { inputEnded = true; wakeInbox(); });
}
let sessionAgents = null;
let prompt;
if (streamInput) {
  const init = await nextMessage();
  sessionAgents = (init && init.request && init.request.agents) || [];
  process.stdout.write(JSON.stringify({ type: 'control_response', response: { subtype: 'success', request_id: init.request_id, response: { subtype: 'initialize' } } }) + '\n');
  const user = await nextMessage();
  prompt = String(user.message.content);
} else {
  prompt = readFileSync(0, 'utf8');
}
const cwd = process.cwd();
if (process.env.QWEN_CODE_ADAPTER_FAKE_LOG) {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => /^(HOME|TMPDIR|XDG_|OPENAI_|QWEN_|DASHSCOPE_)/.test(k) && k !== 'QWEN_CODE_ADAPTER_FAKE_LOG'));
  appendFileSync(process.env.QWEN_CODE_ADAPTER_FAKE_LOG, JSON.stringify({ argv, cwd, env, prompt, pid: process.pid }) + '\n');
}

const resume = option('--resume');
const session = resume || option('--session-id');
const project = join(process.env.HOME, '.qwen', 'projects', cwd.replace(/[^a-zA-Z0-9]/g, '-'));
const chat = join(project, 'chats', `${session}.jsonl`);
if (resume && !existsSync(chat)) {
  process.stderr.write(`No saved session found with ID ${resume}.\n`);
  process.exit(1);
}
mkdirSync(join(project, 'chats'), { recursive: true });
const excluded = values('--exclude-tools');
const allowed = values('--allowed-tools');
const yolo = option('--approval-mode') === 'yolo';
const out = (event) => process.stdout.write(JSON.stringify({ ...event, session_id: session }) + '\n');
const record = (entry) => appendFileSync(chat, JSON.stringify({ ...entry, sessionId: session }) + '\n');
const result = (fields) => out({ type: 'result', subtype: 'success', is_error: false, permission_denials: [], ...fields });
const assistant = (content, parent = null) => {
  out({ type: 'assistant', message: { role: 'assistant', content }, parent_tool_use_id: parent });
  if (!parent) record({ type: 'assistant', message: { role: 'model', parts: [] } });
};
const toolResult = (id, content, isError = false) => out({ type: 'user', parent_tool_use_id: null, message: { role: 'user', content: [{ type: 'tool_result', tool_use_id: id, is_error: isError, content }] } });
const declined = (tool) => `Qwen Code requires permission to use "${tool}", but that permission was declined (non-interactive mode cannot prompt for confirmation).`;
const notFound = (tool) => `Tool "${tool}" not found in registry. Tools must use the exact names that are registered.`;

out({ type: 'system', subtype: 'init', cwd, tools: ['agent', 'read_file', 'edit'].filter((t) => !excluded.includes(t)), permission_mode: option('--approval-mode') });
record({ type: 'user', message: { role: 'user', parts: [{ text: prompt }] } });

/** Headless, a call that asks is declined; over the control protocol a person answers it: true to run. */
let asks = 0;
const ask = async (tool, id) => {
  if (!streamInput) return false;
  const requestId = `perm-${++asks}`;
  out({ type: 'control_request', request_id: requestId, request: { subtype: 'can_use_tool', tool_name: tool, tool_use_id: id, input: {} } });
  for (;;) {
    const message = await nextMessage();
    if (!message) process.exit(1);
    if (message.type === 'control_response' && message.response.request_id === requestId) return message.response.response.behavior === 'allow';
  }
};
const finish = async () => {
  // Over the control protocol the process ends with its input.
  if (streamInput) while (await nextMessage());
};
const knownAgent = (role) => !sessionAgents || sessionAgents.some((a) => a.name === role);

if (prompt.includes('HANG')) {
  process.on('SIGTERM', () => {});
  setInterval(() => {}, 1000);
} else if (prompt.includes('FAIL')) {
  result({ is_error: true, subtype: 'error_during_execution', error: { type: 'api_error', message: '[API Error: 529 overloaded]' } });
  process.exit(1);
} else {
  const spawn = prompt.match(/SPAWN:(\S+)/);
  const call = prompt.match(/CALL:(\S+)/);
  if (spawn) {
    const id = 'call_harness_1';
    assistant([{ type: 'tool_use', id, name: 'agent', input: { description: 'd', prompt: 'child task', subagent_type: spawn[1], run_in_background: false } }]);
    if (excluded.includes('agent')) toolResult(id, notFound('agent'), true);
    else if (!knownAgent(spawn[1])) toolResult(id, `Subagent "${spawn[1]}" not found.`, true);
    else if (!allowed.includes('agent') && !yolo) toolResult(id, declined('agent'), true);
    else {
      const agentId = `${spawn[1]}-${id}`;
      const dir = join(project, 'subagents', session);
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, `agent-${agentId}.meta.json`), JSON.stringify({ agentId, agentType: spawn[1], parentSessionId: session, toolUseId: id, parentAgentId: null, status: 'completed', depth: 0 }));
      out({ type: 'user', parent_tool_use_id: id, message: { role: 'user', content: [{ type: 'text', text: 'child task' }] } });
      assistant([{ type: 'text', text: 'child done' }], id);
      toolResult(id, 'child done');
    }
    assistant([{ type: 'text', text: 'parent done' }]);
    result({ result: 'parent done' });
  } else if (call) {
    const id = 'call_harness_2';
    assistant([{ type: 'tool_use', id, name: call[1], input: {} }]);
    if (excluded.includes(call[1])) toolResult(id, notFound(call[1]), true);
    else if (allowed.includes(call[1]) || yolo) toolResult(id, `ran ${call[1]}`);
    else if (!streamInput) toolResult(id, declined(call[1]), true);
    else if (await ask(call[1], id)) toolResult(id, `ran ${call[1]}`);
    else toolResult(id, 'denied by the person', true);
    assistant([{ type: 'text', text: 'done' }]);
    result({ result: 'done' });
  } else {
    assistant([{ type: 'text', text: 'ok' }]);
    result({ result: 'ok' });
  }
}
await finish();

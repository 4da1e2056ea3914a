#!/usr/bin/env node
// A stand-in for `claude -p --output-format stream-json`: writes the session files and stream-json events Claude Code 2.1.332 writes, scripted by the prompt, for the adapter's tests.
//
// The prompt (stdin) decides what the fake "model" does:
//   /cost                    a local command: the session file, no model answer
//   contains SPAWN:<role>    the main thread calls Agent; a subagent is started
//                            unless Agent is in --disallowedTools (then Claude
//                            Code's "No such tool available" error)
//   contains CALL:<tool>     the main thread calls <tool>; a tool in
//                            --disallowedTools is refused, one in
//                            --allowedTools runs, any other asks: a
//                            can_use_tool control request with
//                            --permission-prompt-tool stdio (the answer
//                            decides), else a permission denial
//   contains FAIL            the API fails (is_error result with status 529)
//   anything else            the model answers "ok"
// Every invocation's argv, cwd and chosen environment are appended to
// $CLAUDE_CODE_ADAPTER_FAKE_LOG (one JSON line each) when that is set.

import { appendFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';

const argv = process.argv.slice(2);
const option = (name) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
if (argv.includes('--version')) {
  process.stdout.write('2.1.332 (Claude Code)\n');
  process.exit(0);
}
// stream-json input: one user message per line, and control responses; the
// process ends when its input does. Text input: the whole of stdin.
const streamInput = option('--input-format') === 'stream-json';
const lines = [];
let lineWaiter = null;
if (streamInput) {
  let buffer = '';
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', (chunk) => {
    buffer += chunk;
    let i;
    while ((i = buffer.indexOf('\n')) >= 0) {
      lines.push(JSON.parse(buffer.slice(0, i)));
      buffer = buffer.slice(i + 1);
    }
    if (lineWaiter) lineWaiter();
  });
  process.stdin.on('end', () => process.exit(0));
}
const nextLine = async () => {
  while (!lines.length) await new Promise((resolve) => { lineWaiter = resolve; });
  return lines.shift();
};
const prompt = streamInput ? (await nextLine()).message.content : readFileSync(0, 'utf8');
const cwd = process.cwd();
if (process.env.CLAUDE_CODE_ADAPTER_FAKE_LOG) {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => /^(HOME|TMPDIR|XDG_|ANTHROPIC_|CLAUDE_CODE_|IS_SANDBOX|DISABLE_)/.test(k)));
  appendFileSync(process.env.CLAUDE_CODE_ADAPTER_FAKE_LOG, JSON.stringify({ argv, cwd, env, prompt }) + '\n');
}

const resume = option('--resume');
const forked = argv.includes('--fork-session');
const session = forked ? option('--session-id') : resume || option('--session-id');
const projects = join(process.env.HOME, '.claude', 'projects', cwd.replace(/[^a-zA-Z0-9]/g, '-'));
const sessionFile = join(projects, `${session}.jsonl`);
if (resume && !existsSync(join(projects, `${resume}.jsonl`))) {
  process.stderr.write(`No conversation found with session ID: ${resume}\n`);
  process.exit(1);
}
mkdirSync(projects, { recursive: true });
// --fork-session: the new session starts with the origin's history.
if (forked) writeFileSync(sessionFile, readFileSync(join(projects, `${resume}.jsonl`)));
const disallowed = (option('--disallowedTools') || '').split(',').filter(Boolean);
const allowed = (option('--allowedTools') || '').split(',').filter(Boolean);
const promptTool = option('--permission-prompt-tool') === 'stdio';
const denials = [];
const out = (event) => process.stdout.write(JSON.stringify({ ...event, session_id: session }) + '\n');
const record = (entry) => appendFileSync(sessionFile, JSON.stringify({ ...entry, sessionId: session }) + '\n');
const result = (fields) => out({ type: 'result', subtype: 'success', is_error: false, permission_denials: denials, ...fields });
/** Ends like Claude Code: text input exits now, stream-json input once stdin closes. */
const finish = (code = 0) => { if (!streamInput) process.exit(code); };

out({ type: 'system', subtype: 'init', cwd, tools: ['Task', 'Bash', 'Read'].filter((t) => !disallowed.includes(t === 'Task' ? 'Agent' : t)), permissionMode: option('--permission-mode') });
record({ type: 'user', message: { role: 'user', content: prompt } });
if (prompt.startsWith('/cost')) {
  result({ result: '', num_turns: 0 });
  finish();
}
const assistant = (content, parent = null) => {
  out({ type: 'assistant', message: { role: 'assistant', content }, parent_tool_use_id: parent });
  if (!parent) record({ type: 'assistant', isSidechain: false, message: { role: 'assistant', content } });
};
const toolResult = (id, content, isError = false) => out({ type: 'user', message: { role: 'user', content: [{ type: 'tool_result', tool_use_id: id, content, ...(isError ? { is_error: true } : {}) }] }, parent_tool_use_id: null });

if (prompt.includes('FAIL')) {
  result({ subtype: 'success', is_error: true, api_error_status: 529, result: 'API Error: 529 overloaded' });
  finish(1);
}
const spawn = prompt.match(/SPAWN:(\S+)/);
const call = prompt.match(/CALL:(\S+)/);
if (prompt.startsWith('/cost') || prompt.includes('FAIL')) {
  // answered above
} else if (spawn) {
  const id = 'toolu_fake_1';
  assistant([{ type: 'tool_use', id, name: 'Agent', input: { description: 'd', prompt: 'child task', subagent_type: spawn[1] } }]);
  if (disallowed.includes('Agent')) {
    toolResult(id, '<tool_use_error>Error: No such tool available: Agent. Agent is disabled for this session, in subagents as well as here.</tool_use_error>', true);
  } else {
    const agent = `a${randomBytes(8).toString('hex')}`;
    out({ type: 'system', subtype: 'task_started', task_id: agent, tool_use_id: id, subagent_type: spawn[1], spawn_depth: 1 });
    const dir = join(projects, session, 'subagents');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, `agent-${agent}.jsonl`), JSON.stringify({ type: 'user', isSidechain: true, message: { role: 'user', content: 'child task' } }) + '\n');
    writeFileSync(join(dir, `agent-${agent}.meta.json`), JSON.stringify({ agentType: spawn[1], toolUseId: id, spawnDepth: 1, finished: true }));
    assistant([{ type: 'text', text: 'child done' }], id);
    toolResult(id, [{ type: 'text', text: `child done\nagentId: ${agent}` }]);
  }
  assistant([{ type: 'text', text: 'parent done' }]);
  result({ result: 'parent done' });
} else if (call) {
  const id = 'toolu_fake_2';
  assistant([{ type: 'tool_use', id, name: call[1], input: {} }]);
  if (disallowed.includes(call[1])) toolResult(id, `<tool_use_error>Error: No such tool available: ${call[1]}</tool_use_error>`, true);
  else if (allowed.includes(call[1])) toolResult(id, `ran ${call[1]}`);
  else if (promptTool && streamInput) {
    out({ type: 'control_request', request_id: 'req-1', request: { subtype: 'can_use_tool', tool_name: call[1], input: {}, tool_use_id: id } });
    const answer = await nextLine();
    if (answer.response.response.behavior === 'allow') toolResult(id, `ran ${call[1]}`);
    else toolResult(id, answer.response.response.message, true);
  } else {
    denials.push({ tool_name: call[1], tool_use_id: id, tool_input: {} });
    toolResult(id, `Claude requested permissions to use ${call[1]}, but you haven't granted it yet.`, true);
  }
  assistant([{ type: 'text', text: 'done' }]);
  result({ result: 'done' });
} else {
  assistant([{ type: 'text', text: 'ok' }]);
  result({ result: 'ok' });
}
finish();

#!/usr/bin/env node
// A stand-in for `gemini -p ... -o stream-json`: writes the session files and stream-json events Gemini CLI 0.61.0 writes, scripted by the prompt, for the adapter's tests.
//
// The prompt (`--prompt=TEXT`) decides what the fake "model" does:
//   contains SPAWN:<agent>   the main agent calls invoke_agent (call id
//                            `harness_spawn_1`); a subagent is recorded unless
//                            a policy rule denies invoke_agent (then Gemini
//                            CLI's "Tool ... not found" error, as 0.61.0 says it)
//   contains CALL:<tool>     the main agent calls <tool>; a tool a policy
//                            rule denies is refused, the tool ASKS is refused
//                            as one that would ask a person, any other runs
//   contains FAIL            the API fails (an error result)
//   contains HANG            the run never ends (until killed)
//   anything else            the model answers "ok"
// Every invocation's argv, cwd and chosen environment are appended to
// $GEMINI_CLI_ADAPTER_FAKE_LOG (one JSON line each) when that is set; a
// marker file is written at $HOME/.gemini/fake-touched so a test can check
// where the fake's home was.

import { appendFileSync, mkdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';

const argv = process.argv.slice(2);
const option = (name) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
if (argv.includes('--version')) {
  process.stdout.write('0.61.0\n');
  process.exit(0);
}
if (argv.includes('--acp')) {
  await import('./fake-gemini-acp.mjs');
} else {
const promptArg = argv.find((a) => a.startsWith('--prompt='));
if (!promptArg || !(argv.includes('--session-id') || argv.includes('--resume'))) {
  // Not run by the adapter (e.g. picked up as a test file): touch nothing.
  process.stderr.write('fake-gemini: run by the adapter only (--prompt=TEXT and --session-id or --resume)\n');
  process.exit(2);
}
const prompt = promptArg.slice('--prompt='.length);
const cwd = process.cwd();
if (process.env.GEMINI_CLI_ADAPTER_FAKE_LOG) {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => /^(HOME|TMPDIR|XDG_|GEMINI_|GOOGLE_)/.test(k)));
  appendFileSync(process.env.GEMINI_CLI_ADAPTER_FAKE_LOG, JSON.stringify({ pid: process.pid, argv, cwd, env, prompt }) + '\n');
}
const home = process.env.HOME;
const gemini = join(home, '.gemini');
mkdirSync(gemini, { recursive: true });
writeFileSync(join(gemini, 'fake-touched'), 'yes\n');

const policy = option('--policy') ? readFileSync(option('--policy'), 'utf8') : '';
const denies = (tool) => new RegExp(`toolName = "${tool.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}"\\ndecision = "deny"`).test(policy);

const sessionId = option('--session-id') || option('--resume');
const chats = join(gemini, 'tmp', 'ws', 'chats');
mkdirSync(chats, { recursive: true });
const file = join(chats, `session-${sessionId.slice(0, 8)}.jsonl`);
if (option('--resume') && !existsSync(file)) {
  process.stderr.write(`Error resuming session: no session ${sessionId}\n`);
  process.exit(1);
}
if (!existsSync(file)) writeFileSync(file, JSON.stringify({ sessionId, kind: 'main' }) + '\n');
const record = (message) => appendFileSync(file, JSON.stringify({ id: randomUUID(), timestamp: new Date().toISOString(), ...message }) + '\n');
const emit = (event) => process.stdout.write(JSON.stringify({ timestamp: new Date().toISOString(), ...event }) + '\n');

emit({ type: 'init', session_id: sessionId, model: option('-m') });
emit({ type: 'message', role: 'user', content: prompt });
record({ type: 'user', content: [{ text: prompt }] });

if (prompt.includes('HANG')) {
  setInterval(() => {}, 1000);
} else if (prompt.includes('FAIL')) {
  emit({ type: 'error', severity: 'error', message: '[API Error: 503 Service Unavailable]' });
  emit({ type: 'result', status: 'error', error: { type: 'Error', message: '[API Error: 503 Service Unavailable]' } });
  process.exit(1);
} else {
  const spawnMatch = prompt.match(/SPAWN:(\S+)/);
  const callMatch = prompt.match(/CALL:(\S+)/);
  if (spawnMatch) {
    const toolId = 'invoke_agent__harness_spawn_1';
    emit({ type: 'tool_use', tool_name: 'invoke_agent', tool_id: toolId, parameters: { agent_name: spawnMatch[1], prompt: 'child task' } });
    if (denies('invoke_agent')) {
      emit({ type: 'tool_result', tool_id: toolId, status: 'error', output: 'Tool "invoke_agent" not found. Did you mean one of: "read_file"?', error: { type: 'tool_not_registered', message: 'Tool "invoke_agent" not found. Did you mean one of: "read_file"?' } });
      record({ type: 'gemini', content: '', toolCalls: [{ id: toolId, name: 'invoke_agent', status: 'error' }] });
    } else {
      const agentId = randomUUID();
      emit({ type: 'tool_result', tool_id: toolId, status: 'success' });
      record({ type: 'gemini', content: '', toolCalls: [{ id: toolId, name: 'invoke_agent', args: { agent_name: spawnMatch[1] }, status: 'success', agentId, resultDisplay: { state: 'completed', terminateReason: 'GOAL' } }] });
    }
  } else if (callMatch) {
    const toolId = `${callMatch[1]}__harness_call_1`;
    emit({ type: 'tool_use', tool_name: callMatch[1], tool_id: toolId, parameters: {} });
    if (callMatch[1] === 'ASKS') {
      const text = `Tool execution for "ASKS" requires user confirmation, which is not supported in non-interactive mode.`;
      emit({ type: 'tool_result', tool_id: toolId, status: 'error', output: text, error: { type: 'unhandled_exception', message: text } });
    } else if (denies(callMatch[1])) {
      emit({ type: 'tool_result', tool_id: toolId, status: 'error', output: `Tool execution denied by policy.`, error: { type: 'policy_violation', message: 'Tool execution denied by policy.' } });
    } else {
      emit({ type: 'tool_result', tool_id: toolId, status: 'success', output: 'tool output' });
    }
    record({ type: 'gemini', content: '', toolCalls: [{ id: toolId, name: callMatch[1] }] });
  }
  emit({ type: 'message', role: 'assistant', content: 'ok', delta: true });
  record({ type: 'gemini', content: 'ok' });
  emit({ type: 'result', status: 'success', stats: {} });
}
}

// A stand-in for `gemini --acp` (the Agent Client Protocol on stdio), loaded by fake-gemini.mjs: the messages Gemini CLI 0.61.0 sends for a prompt, scripted by the prompt, for the adapter's tests.
//
// The prompt decides what the fake "model" does:
//   contains CALL:ASKS       the main agent calls ASKS, which asks the client
//                            (`session/request_permission`); allowed, it runs
//                            (`tool_call_update` completed), rejected, nothing
//   contains CALL:<tool>     the main agent calls <tool>, which runs unasked
//   contains FAIL            the prompt fails (a JSON-RPC error)
//   anything else            the model answers "ok"
// Sessions are session files in the store, as fake-gemini.mjs writes them.

import { appendFileSync, mkdirSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';

const chats = join(process.env.HOME, '.gemini', 'tmp', 'ws', 'chats');
mkdirSync(chats, { recursive: true });
if (process.env.GEMINI_CLI_ADAPTER_FAKE_LOG) {
  appendFileSync(process.env.GEMINI_CLI_ADAPTER_FAKE_LOG, JSON.stringify({ pid: process.pid, argv: process.argv.slice(2), cwd: process.cwd(), acp: true }) + '\n');
}
const fileOf = (sessionId) => join(chats, `session-${sessionId.slice(0, 8)}.jsonl`);
const record = (sessionId, message) => appendFileSync(fileOf(sessionId), JSON.stringify({ id: randomUUID(), timestamp: new Date().toISOString(), ...message }) + '\n');
const send = (message) => process.stdout.write(JSON.stringify({ jsonrpc: '2.0', ...message }) + '\n');
const update = (sessionId, value) => send({ method: 'session/update', params: { sessionId, update: value } });
const waiting = new Map();
let nextId = 100;
const ask = (method, params) => new Promise((resolve) => {
  const id = nextId++;
  waiting.set(id, resolve);
  send({ id, method, params });
});

async function prompt(sessionId, text) {
  record(sessionId, { type: 'user', content: [{ text }] });
  if (text.includes('FAIL')) throw new Error('[API Error: 503 Service Unavailable]');
  const call = text.match(/CALL:(\S+)/);
  if (call) {
    const toolCallId = 'harness_call_1';
    if (call[1] === 'ASKS') {
      const answer = await ask('session/request_permission', {
        sessionId,
        options: [
          { optionId: 'proceed_always_server', name: 'Allow all server tools for this session', kind: 'allow_always' },
          { optionId: 'proceed_once', name: 'Allow', kind: 'allow_once' },
          { optionId: 'cancel', name: 'Reject', kind: 'reject_once' },
        ],
        toolCall: { toolCallId, status: 'pending', title: 'ASKS (harness MCP Server)', content: [{ type: 'content', content: { type: 'text', text: '{}' } }], kind: 'other' },
      });
      if (answer.outcome.optionId === 'proceed_once') {
        update(sessionId, { sessionUpdate: 'tool_call_update', toolCallId, status: 'completed', title: 'ASKS', content: [{ type: 'content', content: { type: 'text', text: 'tool output' } }] });
        record(sessionId, { type: 'gemini', content: '', toolCalls: [{ id: toolCallId, name: 'ASKS', status: 'success' }] });
      }
    } else {
      update(sessionId, { sessionUpdate: 'tool_call', toolCallId, status: 'in_progress', title: call[1], content: [] });
      update(sessionId, { sessionUpdate: 'tool_call_update', toolCallId, status: 'completed', title: call[1], content: [{ type: 'content', content: { type: 'text', text: 'tool output' } }] });
      record(sessionId, { type: 'gemini', content: '', toolCalls: [{ id: toolCallId, name: call[1], status: 'success' }] });
    }
  }
  update(sessionId, { sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: 'ok' } });
  record(sessionId, { type: 'gemini', content: 'ok' });
  return { stopReason: 'end_turn' };
}

const handlers = {
  initialize: async () => ({ protocolVersion: 1, agentCapabilities: { loadSession: true } }),
  'session/new': async () => {
    const sessionId = randomUUID();
    writeFileSync(fileOf(sessionId), JSON.stringify({ sessionId, kind: 'main' }) + '\n');
    return { sessionId };
  },
  'session/load': async ({ sessionId }) => {
    if (!existsSync(fileOf(sessionId))) throw new Error(`no session ${sessionId}`);
    return {};
  },
  'session/prompt': async ({ sessionId, prompt: parts }) => prompt(sessionId, parts.map((p) => p.text).join('')),
};

createInterface({ input: process.stdin }).on('line', (line) => {
  if (!line.trim()) return;
  const message = JSON.parse(line);
  if (message.method === undefined) {
    const resolve = waiting.get(message.id);
    waiting.delete(message.id);
    if (resolve) resolve(message.result);
    return;
  }
  const handler = handlers[message.method];
  if (!handler) return send({ id: message.id, error: { code: -32601, message: `${message.method} not found` } });
  handler(message.params || {}).then(
    (result) => send({ id: message.id, result }),
    (error) => send({ id: message.id, error: { code: -32603, message: error.message } }),
  );
});

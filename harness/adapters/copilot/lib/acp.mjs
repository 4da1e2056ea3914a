// GitHub Copilot CLI as an Agent Client Protocol server (`copilot --acp`): one long-lived process per root whose policy can ask a person, its session, its prompts and the permission requests it sends its client.
//
// ACP is JSON-RPC 2.0 over newline-delimited stdio. The client calls
// `initialize`, `session/new` (Copilot assigns the session id) or
// `session/load` (a session that has had a prompt), and `session/prompt`,
// which answers `{stopReason}` when the turn ends. Meanwhile Copilot sends
// `session/update` notifications and, when a tool call needs a person's
// permission, the request `session/request_permission` with options
// (`allow_once`, `allow_always`, `reject_once`), which the client answers
// with `{outcome: {outcome: "selected", optionId}}`. What the turn did is
// read afterwards from Copilot's own store (the session's events.jsonl), as
// for a `copilot -p` run.

import { spawn } from 'node:child_process';
import { killGroup } from './copilot.mjs';
import { readJsonLines } from '../../node-common/files.mjs';

const ACP_PROTOCOL_VERSION = 1;

export class AcpProcess {
  /** Starts `copilot --acp` with the root's options (its permission rules, tool filters and MCP servers). */
  constructor({ bin, args, env, cwd, onSpawn = () => {} }) {
    this.stderr = '';
    this.exited = false;
    this.nextId = 1;
    this.calls = new Map();
    this.waiters = [];
    // Copilot's permission request waiting for an answer: {id, params}.
    this.pending = null;
    // The outcome of the prompt in flight: {result} or {error}.
    this.promptDone = null;
    this.child = spawn(bin.command, [...bin.args, '--acp', ...args], { env, cwd, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    onSpawn(this.child);
    readJsonLines(this.child.stdout, (message) => this.onMessage(message), (line) => { this.stderr += `[stdout, not JSON] ${line}
`; });
    this.child.stderr.on('data', (d) => { this.stderr = (this.stderr + d).slice(-20000); });
    this.child.stdin.on('error', () => {});
    this.child.on('error', (e) => { this.stderr += `spawn failed: ${e.message}\n`; });
    this.child.on('close', (code, signal) => {
      this.exited = true;
      this.code = code;
      this.signal = signal;
      for (const [, call] of this.calls) call.reject(new Error(`copilot --acp exited (${code ?? signal}): ${this.stderr.slice(-500)}`));
      this.calls.clear();
      this.wake();
    });
  }

  onMessage(message) {
    if (message.method === 'session/request_permission' && message.id !== undefined) {
      this.pending = { id: message.id, params: message.params || {} };
      this.wake();
      return;
    }
    if (message.method && message.id !== undefined) {
      // Anything else Copilot asks its client (files, terminals) is not offered: the initialize declared no such capability.
      this.write({ jsonrpc: '2.0', id: message.id, error: { code: -32601, message: `not offered by the delegation-harness adapter: ${message.method}` } });
      return;
    }
    if (message.method) return; // session/update notifications: the store says the same, durably
    const call = this.calls.get(message.id);
    if (!call) return;
    this.calls.delete(message.id);
    if (message.error) call.reject(Object.assign(new Error(message.error.message || JSON.stringify(message.error)), { acp: message.error }));
    else call.resolve(message.result);
  }

  write(message) {
    if (!this.child.stdin.writableEnded) this.child.stdin.write(JSON.stringify(message) + '\n');
  }

  wake() {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  call(method, params) {
    const id = this.nextId++;
    const answer = new Promise((resolve, reject) => this.calls.set(id, { resolve, reject }));
    this.write({ jsonrpc: '2.0', id, method, params });
    return answer;
  }

  /** `initialize` (no file system or terminal offered to Copilot), then a new session or the stored one: resolves its session id. */
  async open({ cwd, sessionId }) {
    await this.call('initialize', { protocolVersion: ACP_PROTOCOL_VERSION, clientCapabilities: {} });
    if (sessionId) {
      await this.call('session/load', { sessionId, cwd, mcpServers: [] });
      return sessionId;
    }
    const created = await this.call('session/new', { cwd, mcpServers: [] });
    if (!created || typeof created.sessionId !== 'string') throw new Error(`session/new answered no session id: ${JSON.stringify(created)}`);
    return created.sessionId;
  }

  /** Sends a prompt; its end (or a permission request before it) is awaited with settle(). */
  prompt(sessionId, text) {
    this.promptDone = null;
    this.call('session/prompt', { sessionId, prompt: [{ type: 'text', text }] })
      .then((result) => { this.promptDone = { result }; this.wake(); })
      .catch((error) => { this.promptDone = { error }; this.wake(); });
  }

  /** Answers the pending permission request with the option of kind `allow_once` or `reject_once`. */
  answer(allow) {
    const pending = this.pending;
    if (!pending) throw new Error('no permission request is pending');
    this.pending = null;
    const kind = allow ? 'allow_once' : 'reject_once';
    const option = (pending.params.options || []).find((o) => o.kind === kind);
    if (!option) throw new Error(`Copilot's permission request offers no ${kind} option: ${JSON.stringify(pending.params.options)}`);
    this.write({ jsonrpc: '2.0', id: pending.id, result: { outcome: { outcome: 'selected', optionId: option.optionId } } });
  }

  /** Waits for a permission request, the prompt's end or the process's: `{pending}`, `{done}`, `{exited}` or `{timedOut}`. */
  async settle(timeoutMs) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (this.pending) return { pending: this.pending };
      if (this.promptDone) return { done: this.promptDone };
      if (this.exited) return { exited: true };
      const left = deadline - Date.now();
      if (left <= 0) return { timedOut: true };
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => { clearTimeout(timer); resolve(); });
      });
    }
  }

  stop() { killGroup(this.child, 'SIGKILL'); }
}

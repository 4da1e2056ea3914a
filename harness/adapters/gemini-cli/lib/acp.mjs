// One Gemini CLI turn in ACP mode (`gemini --acp`, the Agent Client Protocol on stdio): the path on which Gemini CLI asks its client, a person's interface, before a tool runs.
//
// `gemini -p` asks no one: a tool that would ask is left out of the model's
// list. In ACP mode Gemini CLI sends `session/request_permission` for such a
// call and waits for the client's answer; this module is that client, for
// one prompt: it starts `gemini --acp`, creates or loads the session, sends
// the prompt, and settles when the prompt ends or when Gemini CLI asks.

import { spawn } from 'node:child_process';
import { killGroup } from './gemini.mjs';
import { readJsonLines } from '../../node-common/files.mjs';

/** The ACP protocol version this client speaks (Gemini CLI 0.61.0 answers 1). */
export const ACP_PROTOCOL_VERSION = 1;

/**
 * The option of a `session/request_permission` that a person's allow or deny
 * of this one call is: `allow_once` or `reject_once` (never the "always"
 * options, which would widen the answer beyond the call).
 */
export function optionFor(options, allow) {
  const kind = allow ? 'allow_once' : 'reject_once';
  const option = (options || []).find((o) => o && o.kind === kind);
  return option ? option.optionId : null;
}

export class AcpRun {
  /** Starts `gemini --acp` with `args` (model, policy, approval mode) in `cwd`. */
  constructor({ bin, args, env, cwd, onSpawn = () => {} }) {
    this.child = spawn(bin.command, [...bin.args, '--acp', ...args], { env, cwd, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    onSpawn(this.child);
    this.cwd = cwd;
    this.stderr = '';
    this.nextId = 1;
    this.waiting = new Map();
    /** `session/update` notifications of the prompt, in order (the history a load replays is dropped). */
    this.updates = [];
    this.recording = false;
    /** The permission request Gemini CLI waits on: `{rpcId, params}`. */
    this.pending = null;
    this.done = null;
    this.exited = false;
    this.wake = () => {};
    readJsonLines(this.child.stdout, (message) => this.receive(message), (line) => { this.stderr += `[stdout, not JSON] ${line}
`; });
    this.child.stderr.on('data', (d) => { this.stderr = (this.stderr + d).slice(-20000); });
    this.child.on('error', (e) => { this.stderr += `spawn failed: ${e.message}\n`; });
    this.child.on('close', (code, signal) => {
      this.exited = true;
      this.code = code;
      this.signal = signal;
      for (const { reject } of this.waiting.values()) reject(new Error(`gemini --acp exited (${code ?? signal}): ${this.stderr.slice(-500)}`));
      this.waiting.clear();
      this.wake();
    });
  }

  receive(message) {
    if (message.id !== undefined && message.method === undefined) {
      const waiter = this.waiting.get(message.id);
      if (!waiter) return;
      this.waiting.delete(message.id);
      if (message.error) waiter.reject(Object.assign(new Error(message.error.message || JSON.stringify(message.error)), { rpc: message.error }));
      else waiter.resolve(message.result);
      return;
    }
    if (message.method === 'session/update') {
      if (this.recording && message.params) this.updates.push(message.params.update || {});
      return;
    }
    if (message.method === 'session/request_permission' && message.id !== undefined) {
      this.pending = { rpcId: message.id, params: message.params || {} };
      this.wake();
      return;
    }
    // Anything else Gemini CLI asks of a client (file access, terminals) this
    // client declared it cannot do.
    if (message.id !== undefined) {
      this.send({ jsonrpc: '2.0', id: message.id, error: { code: -32601, message: `${message.method}: not offered by this client` } });
    }
  }

  send(message) {
    if (!this.exited) this.child.stdin.write(`${JSON.stringify(message)}\n`);
  }

  request(method, params) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.send({ jsonrpc: '2.0', id, method, params });
    });
  }

  /**
   * Opens the session (a new one when `sessionId` is null, else Gemini CLI's
   * stored one) and sends the prompt. Answers the session id. The prompt's
   * end is awaited by `settle`.
   */
  async start(sessionId, text) {
    await this.request('initialize', {
      protocolVersion: ACP_PROTOCOL_VERSION,
      clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
    });
    let id = sessionId;
    if (id) await this.request('session/load', { sessionId: id, cwd: this.cwd, mcpServers: [] });
    else id = (await this.request('session/new', { cwd: this.cwd, mcpServers: [] })).sessionId;
    this.sessionId = id;
    this.recording = true;
    this.request('session/prompt', { sessionId: id, prompt: [{ type: 'text', text }] })
      .then((result) => { this.done = { result }; this.wake(); })
      .catch((error) => { this.done = { error }; this.wake(); });
    return id;
  }

  /** Resolves `{pending}` when Gemini CLI asks, `{done}` when the prompt ended, `{timedOut}` after `timeoutMs` (then the run is killed). */
  settle(timeoutMs) {
    return new Promise((resolve) => {
      const check = () => {
        if (this.pending) return finish({ pending: this.pending });
        if (this.done) return finish({ done: this.done });
        if (this.exited) return finish({ done: { error: new Error(`gemini --acp exited (${this.code ?? this.signal}) before the prompt ended`) } });
        return false;
      };
      const timer = setTimeout(() => { this.stop(); finish({ timedOut: true }); }, timeoutMs);
      const finish = (value) => { clearTimeout(timer); this.wake = () => {}; resolve(value); return true; };
      this.wake = check;
      check();
    });
  }

  /** Answers the pending permission request with the option for allow or deny; `false` when Gemini CLI offered none for it. */
  answer(allow) {
    const { rpcId, params } = this.pending;
    const optionId = optionFor(params.options, allow);
    if (!optionId) return false;
    this.pending = null;
    this.send({ jsonrpc: '2.0', id: rpcId, result: { outcome: { outcome: 'selected', optionId } } });
    return true;
  }

  /**
   * Ends the process after its prompt: stdin closed (Gemini CLI exits on
   * EOF), SIGKILL to its group if it has not exited within `graceMs`.
   */
  finish(graceMs = 3000) {
    if (this.exited) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => { this.stop(); resolve(); }, graceMs);
      this.child.once('close', () => { clearTimeout(timer); resolve(); });
      this.child.stdin.end();
    });
  }

  /** Ends the session's process at once (a timeout, or the adapter stopping). */
  stop() {
    if (!this.exited) killGroup(this.child, 'SIGKILL');
  }
}

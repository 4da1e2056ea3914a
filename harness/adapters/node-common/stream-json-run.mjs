// One host run driven over the stream-json control protocol that Claude Code (`-p --input-format stream-json --permission-prompt-tool stdio`) and Qwen Code (`--input-format stream-json`) share, kept alive across a person's approval.
//
// The run settles when it ends (a `result` event) or when the host asks
// permission (a `can_use_tool` control request), and `answer` continues it
// with the person's decision. A host's own differences (a handshake after
// spawning, the shape of a user message) are the subclass's `started`,
// `onControlResponse` and `userMessage`.

import { spawn } from 'node:child_process';
import { killGroup, readJsonLines } from './files.mjs';

export class StreamJsonRun {
  constructor({ bin, args, env, cwd, onSpawn = () => {} }) {
    this.events = [];
    this.stderr = '';
    this.waiters = [];
    this.exited = false;
    this.pending = null;
    this.child = spawn(bin.command, [...bin.args, ...args, '--input-format', 'stream-json'], { env, cwd, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    onSpawn(this.child);
    readJsonLines(this.child.stdout, (message) => this.onEvent(message), (line) => { this.stderr += `[stdout, not JSON] ${line}
`; });
    this.child.stderr.on('data', (d) => { this.stderr = (this.stderr + d).slice(-20000); });
    this.child.stdin.on('error', () => {});
    this.child.on('error', (e) => { this.stderr += `spawn failed: ${e.message}\n`; });
    this.child.on('close', (code, signal) => {
      this.exited = true;
      this.code = code;
      this.signal = signal;
      this.wake();
    });
  }

  /** A control response to a request of the adapter's own (a subclass's handshake); kept with the events otherwise. */
  onControlResponse(event) {
    this.events.push(event);
  }

  /** The stream-json user message that carries a turn's prompt. */
  userMessage(text) {
    return { type: 'user', message: { role: 'user', content: text } };
  }

  onEvent(event) {
    if (event.type === 'control_response') {
      this.onControlResponse(event);
      return;
    }
    if (event.type === 'control_request' && event.request && event.request.subtype === 'can_use_tool') {
      this.pending = event;
      this.wake();
      return;
    }
    if (event.type === 'control_request') {
      // Anything else the host asks its controller (hooks, SDK MCP messages) is not configured here.
      this.write({ type: 'control_response', response: { subtype: 'error', request_id: event.request_id, error: `not supported by the delegation-harness adapter: ${event.request && event.request.subtype}` } });
      return;
    }
    this.events.push(event);
    if (event.type === 'result') {
      this.result = event;
      // The turn is over: end of input ends the process.
      this.child.stdin.end();
      this.wake();
    }
  }

  write(message) {
    if (!this.child.stdin.writableEnded) this.child.stdin.write(JSON.stringify(message) + '\n');
  }

  wake() {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  /** Sends the turn's prompt as one stream-json user message. */
  prompt(text) {
    this.write(this.userMessage(text));
  }

  /** Waits for a permission request or the end of the run (and its process): `{pending}`, `{done}` or `{timedOut}`. */
  async settle(timeoutMs) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (this.pending) return { pending: this.pending };
      if (this.exited) return { done: true };
      const left = deadline - Date.now();
      if (left <= 0) {
        killGroup(this.child, 'SIGKILL');
        return { timedOut: true };
      }
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => { clearTimeout(timer); resolve(); });
      });
    }
  }

  /** A person's answer to the pending permission request: allow runs the call as asked, deny refuses it. */
  answer(allow, message) {
    const request = this.pending;
    this.pending = null;
    const response = allow
      ? { behavior: 'allow', updatedInput: request.request.input }
      : { behavior: 'deny', message: message || 'denied by the person' };
    this.write({ type: 'control_response', response: { subtype: 'success', request_id: request.request_id, response } });
  }

  stop() { killGroup(this.child, 'SIGKILL'); }
}

/**
 * Marks every pending question `gone`, for an adapter just started: a
 * question asked in a stream-json run lived in a process that is gone, and
 * neither host keeps a pending question in its store, so nothing is left to
 * answer. Returns whether any was pending (the state then needs saving).
 */
export function forgetPendingQuestions(approvals) {
  let lost = false;
  for (const approval of approvals) {
    if (approval.state !== 'pending') continue;
    approval.state = 'gone';
    lost = true;
  }
  return lost;
}

/**
 * What became of a call a person answered, from the host's own tool result
 * for it: executed with its text, or refused (a person's deny, or the call
 * failing after an allow). Without a tool result the outcome and reason are
 * the adapter's reading, and say so (`inferred`).
 */
export function answeredReport(approval, digest) {
  const result = digest.results.get(approval.tool_use_id);
  const toolCall = !result || result.isError
    ? { tool: approval.tool, outcome: 'denied', reason: 'policy_denied', approval: approval.id }
    : { tool: approval.tool, outcome: 'executed', approval: approval.id, result: result.text };
  return {
    outcome: toolCall.outcome === 'denied' ? 'denied' : 'ok', instance: approval.instance, tool_call: toolCall,
    ...(toolCall.outcome === 'denied' ? { reason: toolCall.reason } : {}),
    ...(!result ? { inferred: ['tool_call', 'reason'] } : result.isError && approval.decision === 'allow' ? { inferred: ['reason'] } : {}),
  };
}

/**
 * Whether the question behind an approval is gone: it lives only in the
 * stream-json run that asked it (`live`: runs by root), so once that run has
 * ended (a restart, a crash) there is nothing to answer.
 */
export function questionGone(approval, live) {
  if (approval.state === 'gone') return true;
  if (approval.state !== 'pending') return false;
  const run = live.get(approval.root);
  return !(run && !run.exited && run.pending && run.pending.request_id === approval.request_id);
}

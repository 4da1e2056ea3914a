// From Gemini CLI's stream-json events of one `gemini -p` run (and the subagents its session store records) to the protocol's turn report: pure functions, tested without Gemini CLI.

import { DELEGATION_TOOL, callIdOf } from './gemini.mjs';

/** The MCP tool classes a read-only sandbox refuses (the protocol's eligibility table: read_only_context). */
export const READ_ONLY_REFUSED = ['file-write', 'shell', 'generic'];

/** The sandbox's kind: `read-only`, `workspace-write`, `full-access` or `external`. */
const sandboxKind = (sandbox) => (typeof sandbox === 'string' ? sandbox : Object.keys(sandbox || {})[0] || 'read-only');

/**
 * The protocol's eligibility of a sealed tool of class `toolClass` under a
 * ceiling (PROTOCOL.md, "Eligibility of a tool call"): `runs` (nobody
 * asked), `ask` (a person decides), or the reason it is refused,
 * `read_only_context` or `policy_denied`. The adapter's policy file carries
 * it: an allow rule, Gemini CLI's default (which asks), or a deny rule.
 */
export function eligibility(toolClass, ceiling) {
  const sandbox = sandboxKind(ceiling.sandbox);
  const policy = ceiling.approval_policy;
  if (toolClass === 'read') return 'runs';
  if (sandbox === 'read-only' && READ_ONLY_REFUSED.includes(toolClass)) return 'read_only_context';
  const network = sandbox === 'full-access' || sandbox === 'external'
    || Boolean(ceiling.sandbox && ceiling.sandbox['workspace-write'] && ceiling.sandbox['workspace-write'].network);
  if (toolClass === 'network' && !network) return 'policy_denied';
  if (policy === 'never') return 'policy_denied';
  if (toolClass === 'file-write' && policy === 'on-request') return 'runs';
  return 'ask';
}

/**
 * Gemini CLI's own words for refusing a tool call, each with the protocol
 * reason it states. A refusal not matched here still denies the call, but its
 * reason is the adapter's reading and is marked inferred.
 */
const REFUSALS = [
  // A tool that would ask a person, in a headless run: nobody can answer, so
  // Gemini CLI refuses it. With approval policy `never` that is the denial
  // the policy means; otherwise the run could not ask (`asks`).
  { pattern: /requires user confirmation, which is not supported in non-interactive mode/i, reason: 'policy_denied', asks: true },
  // A policy rule with decision "deny" on a tool Gemini CLI still knows.
  { pattern: /denied by policy|policy (engine|rule)/i, reason: 'policy_denied' },
  // A call of a tool the request did not offer (a deny rule removes a tool
  // from the model's list; so does an MCP server that stopped serving it):
  // Gemini CLI's "not found in registry" refusal, under its own name (an
  // expectations file maps it, e.g. onto tool_drift).
  { pattern: /not found in registry|not found|is not available/i, reason: 'no_such_tool' },
];

/**
 * The reason of a refused call. A tool Gemini CLI does not know because the
 * adapter's own policy removed it is `policy_denied`, but that is the
 * adapter's knowledge of why (Gemini CLI says only "not found"): inferred.
 */
function refusal(result, tool, policyDenied, wouldAsk = new Set(), readOnlyDenied = new Set()) {
  const text = String((result && ((result.error && (result.error.message || result.error)) || result.output)) || '');
  for (const { pattern, reason, asks } of REFUSALS) {
    if (!pattern.test(text)) continue;
    if (asks) return { reason, asks, detail: `Gemini CLI: ${text.slice(0, 300)}` };
    if (reason === 'no_such_tool' && wouldAsk.has(tool)) {
      // Gemini CLI leaves a tool that would ask out of a headless run's list.
      return { reason: 'policy_denied', asks: true, detail: `Gemini CLI offers no tool that would ask a person in a headless run (${tool} has no allow rule): ${text.slice(0, 300)}` };
    }
    if (reason === 'no_such_tool' && readOnlyDenied.has(tool)) {
      return { reason: 'read_only_context', detail: `the adapter's policy denies ${tool} in a read-only sandbox, so Gemini CLI did not register it: ${text.slice(0, 300)}`, inferred: true };
    }
    if (reason === 'no_such_tool' && policyDenied.has(tool)) {
      return { reason: 'policy_denied', detail: `the adapter's policy denies ${tool}, so Gemini CLI did not register it: ${text.slice(0, 300)}`, inferred: true };
    }
    return { reason, detail: `Gemini CLI: ${text.slice(0, 300)}` };
  }
  return { reason: 'policy_denied', detail: `Gemini CLI refused the call without a known reason: ${text.slice(0, 300)}`, inferred: true };
}

/** The events of one run, by kind: the main agent's tool calls in order, their results by id, its final text, the result event. */
export function digestEvents(events) {
  const calls = [];
  const results = new Map();
  let text = '';
  let result = null;
  for (const event of events) {
    if (event.type === 'tool_use') calls.push(event);
    else if (event.type === 'tool_result') results.set(event.tool_id, event);
    else if (event.type === 'message' && event.role === 'assistant') text += event.content || '';
    else if (event.type === 'result') result = event;
  }
  return { calls, results, text, result };
}

/**
 * The turn report: the main agent's first tool call decides the reply kind
 * (the scripted model answers the turn's input with it), else the final
 * message; a run whose result is an error is `model_failed`. `subagents` are
 * the ones Gemini CLI's session store records for this session: a spawn is
 * `ok` only when the store holds a subagent for the call. `policyDenied`
 * names the tools the adapter's policy file denied for this run, `wouldAsk`
 * the sealed ones it left to Gemini CLI's default (which asks). Answers
 * `{turn, tool_call?, detail?, inferred}` for the ActionResult.
 */
export function turnReport(events, { subagents = [], nameBack = (n) => n, childEffective = () => undefined, stderr = '', policyDenied = new Set(), wouldAsk = new Set(), readOnlyDenied = new Set() } = {}) {
  const digest = digestEvents(events);
  const first = digest.calls[0];
  if (!first) {
    const result = digest.result;
    if (!result || result.status !== 'success') {
      const error = result && result.error ? JSON.stringify(result.error).slice(0, 300) : stderr.slice(-300);
      return { turn: { reply: 'model_failed', detail: `Gemini CLI: ${error}` }, inferred: [] };
    }
    return { turn: { reply: 'message', text: digest.text }, inferred: [] };
  }
  const result = digest.results.get(first.tool_id);
  if (first.tool_name === DELEGATION_TOOL) {
    const callId = callIdOf(first.tool_id);
    const child = subagents.find((s) => s.callId === callId);
    if (child && result && result.status === 'success') {
      const effective = childEffective(child);
      return {
        turn: { reply: 'spawn', spawn: { outcome: 'ok', instance: callId, ...(effective ? { effective, inferred: ['effective'] } : {}) } },
        inferred: [],
      };
    }
    const refused = result && result.status !== 'success'
      ? refusal(result, first.tool_name, policyDenied, wouldAsk, readOnlyDenied)
      : { reason: 'policy_denied', detail: 'Gemini CLI recorded no subagent for the invoke_agent call and said nothing about it', inferred: true };
    return {
      turn: { reply: 'spawn', spawn: { outcome: 'denied', reason: refused.reason, detail: refused.detail, ...(refused.inferred ? { inferred: ['reason'] } : {}) } },
      inferred: [],
    };
  }
  const tool = nameBack(first.tool_name);
  if (result && result.status === 'success') {
    return {
      turn: { reply: 'tool_call', tool },
      tool_call: { tool, outcome: 'executed', ...(typeof result.output === 'string' ? { result: result.output } : {}) },
      inferred: [],
    };
  }
  const refused = result ? refusal(result, first.tool_name, policyDenied, wouldAsk, readOnlyDenied) : { reason: 'policy_denied', detail: 'Gemini CLI reported no result for the call', inferred: true };
  return {
    turn: { reply: 'tool_call', tool },
    tool_call: { tool, outcome: 'denied', reason: refused.reason },
    detail: refused.detail,
    ...(refused.asks ? { asks: true } : {}),
    inferred: refused.inferred ? ['tool_call'] : [],
  };
}

/**
 * The tool an ACP tool call's title names: Gemini CLI titles an MCP tool's
 * call `<tool> (<server> MCP Server)` (a shell-like call by its `command`
 * argument instead); anything else as it stands.
 */
export function toolOfTitle(title) {
  const match = /^(.*) \((.+) MCP Server\)$/.exec(String(title || ''));
  return match ? match[1] : String(title || '');
}

/** The arguments of an ACP tool call, when its content is their JSON (Gemini CLI's explanation of an MCP call); else `{}`. */
export function argumentsOf(toolCall) {
  try {
    const value = JSON.parse(contentText(toolCall && toolCall.content));
    return value && typeof value === 'object' ? value : {};
  } catch {
    return {};
  }
}

/** The text of an ACP tool call's content blocks. */
const contentText = (content) => (Array.isArray(content) ? content : [])
  .map((c) => (c && c.content && typeof c.content.text === 'string' ? c.content.text : c && typeof c.text === 'string' ? c.text : ''))
  .join('');

/**
 * The calls of one ACP prompt, by Gemini CLI's `session/update`
 * notifications: `{id, title, status, text}` in the order Gemini CLI started
 * them (`tool_call`, or a `tool_call_update` of a call it asked about first).
 */
export function acpCalls(updates) {
  const calls = new Map();
  for (const update of updates) {
    if (update.sessionUpdate !== 'tool_call' && update.sessionUpdate !== 'tool_call_update') continue;
    const call = calls.get(update.toolCallId) || { id: update.toolCallId };
    if (update.title) call.title = update.title;
    if (update.status) call.status = update.status;
    if (update.content) call.text = contentText(update.content);
    calls.set(update.toolCallId, call);
  }
  return [...calls.values()];
}

/**
 * The report of a turn run in ACP mode, or of the call a person just
 * answered (`answered`: the adapter's approval record). The first call
 * Gemini CLI started decides the reply kind: an `invoke_agent` call with a
 * subagent in Gemini CLI's store is a spawn; any other is a tool call,
 * executed when Gemini CLI reports it `completed`. A call a person denied
 * leaves no ACP update (Gemini CLI answers the model "canceled by the
 * user"): denied, `policy_denied`, the reason the adapter's reading. A
 * prompt that failed is `model_failed`.
 */
export function acpTurnReport(updates, { done = {}, answered = null, messages = [], subagents = [], nameBack = (n) => n, childEffective = () => undefined, stderr = '' } = {}) {
  const calls = acpCalls(updates);
  const storedName = new Map();
  for (const message of messages) for (const call of message.toolCalls || []) storedName.set(call.id, call.name);
  const nameOf = (call) => nameBack(storedName.get(call.id) || toolOfTitle(call.title) || 'unknown');
  const toolCall = (call, tool) => {
    if (call && call.status === 'completed') return { tool_call: { tool, outcome: 'executed', ...(call.text ? { result: call.text } : {}) }, inferred: [] };
    if (call && call.status === 'failed') {
      return { tool_call: { tool, outcome: 'denied', reason: 'policy_denied' }, detail: `Gemini CLI: ${String(call.text || '').slice(0, 300)}`, inferred: ['reason'] };
    }
    return { tool_call: { tool, outcome: 'denied', reason: 'policy_denied' }, detail: 'Gemini CLI reported no result for the call (a denied permission request leaves none)', inferred: ['reason'] };
  };
  if (answered) {
    const call = calls.find((c) => c.id === answered.tool_call_id);
    return toolCall(call, answered.tool);
  }
  if (done.error) {
    return { turn: { reply: 'model_failed', detail: `Gemini CLI: ${String(done.error.message || done.error).slice(0, 300)} ${stderr.slice(-200)}`.trim() }, inferred: [] };
  }
  const first = calls[0];
  if (!first) {
    const text = updates.filter((u) => u.sessionUpdate === 'agent_message_chunk' && u.content && u.content.type === 'text').map((u) => u.content.text).join('');
    return { turn: { reply: 'message', text }, inferred: [] };
  }
  const child = subagents.find((s) => s.callId === callIdOf(first.id) || s.callId === first.id);
  if (child || storedName.get(first.id) === DELEGATION_TOOL) {
    if (child && first.status === 'completed') {
      const effective = childEffective(child);
      return { turn: { reply: 'spawn', spawn: { outcome: 'ok', instance: child.callId, ...(effective ? { effective, inferred: ['effective'] } : {}) } }, inferred: [] };
    }
    return { turn: { reply: 'spawn', spawn: { outcome: 'denied', reason: 'policy_denied', detail: `Gemini CLI: ${String(first.text || '').slice(0, 300)}`, inferred: ['reason'] } }, inferred: [] };
  }
  const tool = nameOf(first);
  const report = toolCall(first, tool);
  return { turn: { reply: 'tool_call', tool }, ...report };
}

// From Gemini CLI's stream-json events of one `gemini -p` run (and the subagents its session store records) to the protocol's turn report: pure functions, tested without Gemini CLI.

import { DELEGATION_TOOL, callIdOf } from './gemini.mjs';

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
function refusal(result, tool, policyDenied, wouldAsk = new Set()) {
  const text = String((result && ((result.error && (result.error.message || result.error)) || result.output)) || '');
  for (const { pattern, reason, asks } of REFUSALS) {
    if (!pattern.test(text)) continue;
    if (asks) return { reason, asks, detail: `Gemini CLI: ${text.slice(0, 300)}` };
    if (reason === 'no_such_tool' && wouldAsk.has(tool)) {
      // Gemini CLI leaves a tool that would ask out of a headless run's list.
      return { reason: 'policy_denied', asks: true, detail: `Gemini CLI offers no tool that would ask a person in a headless run (${tool} has no allow rule): ${text.slice(0, 300)}` };
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
export function turnReport(events, { subagents = [], nameBack = (n) => n, childEffective = () => undefined, stderr = '', policyDenied = new Set(), wouldAsk = new Set() } = {}) {
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
      ? refusal(result, first.tool_name, policyDenied, wouldAsk)
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
  const refused = result ? refusal(result, first.tool_name, policyDenied, wouldAsk) : { reason: 'policy_denied', detail: 'Gemini CLI reported no result for the call', inferred: true };
  return {
    turn: { reply: 'tool_call', tool },
    tool_call: { tool, outcome: 'denied', reason: refused.reason },
    detail: refused.detail,
    ...(refused.asks ? { asks: true } : {}),
    inferred: refused.inferred ? ['tool_call'] : [],
  };
}

// From Qwen Code's stream-json events of one headless run, and the subagent records in its store, to the protocol's turn report, children and refusals: pure functions, tested without Qwen Code.

/** Qwen Code's delegation tool. */
export const DELEGATION_TOOL = 'agent';

/**
 * Qwen Code's own words for refusing a tool call, each with the protocol
 * reason it states. A refusal not matched here still denies the call, but its
 * reason is the adapter's reading and is marked inferred.
 */
const REFUSALS = [
  // A tool that asks, with nobody to ask (headless): Qwen Code declines it.
  { pattern: /requires permission to use .* declined/i, reason: 'policy_denied' },
  // A deny rule on the call.
  { pattern: /denied by (a )?(permission|policy)|is denied|blocked by/i, reason: 'policy_denied' },
  // The subagent nesting limit (--max-subagent-depth).
  { pattern: /nesting depth|maximum (sub-?agent )?depth|depth limit/i, reason: 'policy_denied' },
  // A call of a tool the request did not offer (excluded or never registered):
  // Qwen Code's "not found" refusal, under its own name (an expectations file
  // maps it, e.g. onto tool_drift for a tool its MCP server stopped serving).
  { pattern: /not found in registry|Tool "[^"]*" not found|tool .* (is )?not (found|available)/i, reason: 'no_such_tool' },
];

function textOf(content) {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((b) => (b && typeof b.text === 'string' ? b.text : '')).filter(Boolean).join('\n');
  return '';
}

/** Everything one run's events say, indexed: the main thread's calls, tool results, the result. */
export function digestEvents(events) {
  const mainCalls = [];
  const results = new Map();
  let result = null;
  let lastText = '';
  for (const event of events) {
    if (!event || typeof event !== 'object') continue;
    if (event.type === 'assistant' && event.message && Array.isArray(event.message.content)) {
      for (const block of event.message.content) {
        if (block.type === 'tool_use' && !event.parent_tool_use_id) mainCalls.push(block);
        if (block.type === 'text' && !event.parent_tool_use_id) lastText = block.text;
      }
    }
    if (event.type === 'user' && event.message && Array.isArray(event.message.content)) {
      for (const block of event.message.content) {
        if (block.type === 'tool_result') results.set(block.tool_use_id, { isError: block.is_error === true, text: textOf(block.content) });
      }
    }
    if (event.type === 'result') result = event;
  }
  return { mainCalls, results, result, lastText };
}

/** Qwen Code's words when a call asks and, headless, nobody can be asked. */
const DECLINED_UNASKED = /declined \(non-interactive mode cannot prompt/i;

/** The main thread's first call Qwen Code would have asked a person about and declined headless, if any (its tool name). */
export function askedAndDeclined(digest) {
  for (const call of digest.mainCalls) {
    const result = digest.results.get(call.id);
    if (result && result.isError && DECLINED_UNASKED.test(result.text)) return call.name;
  }
  return null;
}

/** Qwen Code's refusal of call `id`, if it refused it: `{reason, detail, inferred}`. */
export function refusalOf(digest, id, toolName) {
  const denials = (digest.result && digest.result.permission_denials) || [];
  const denial = denials.find((d) => d.tool_use_id === id);
  const result = digest.results.get(id);
  if (!result || !result.isError) {
    if (denial) return { reason: 'policy_denied', detail: `Qwen Code's permission_denials: ${denial.tool_name}`, inferred: false };
    return null;
  }
  for (const { pattern, reason } of REFUSALS) {
    if (pattern.test(result.text)) return { reason, detail: result.text.slice(0, 300), inferred: false };
  }
  return { reason: 'policy_denied', detail: `${toolName} failed: ${result.text.slice(0, 300)}`, inferred: true };
}

/**
 * The subagents of main session `session` in Qwen Code's store, with their
 * parents: a top-level subagent's parent is the session (the root instance),
 * a nested one's its `parentAgentId`. All of it is Qwen Code's own record.
 */
export function childrenOf(agents, session) {
  const out = [];
  for (const [agentId, { session: owner, meta }] of agents) {
    if (owner !== session) continue;
    out.push({ id: agentId, parent: meta.parentAgentId || session, role: meta.agentType, toolUseId: meta.toolUseId, depth: meta.depth });
  }
  return out;
}

/**
 * The turn report: the main thread's first tool call decides the reply kind
 * (the scripted model answers the turn's input with it), else the final
 * message; a failed run is `model_failed`. `agentFor(toolUseId)` is the
 * subagent Qwen Code's store records for an `agent` call; `nameBack(name)`
 * turns Qwen Code's name for an MCP tool into the harness's.
 */
export function turnReport(digest, { agentFor = () => undefined, nameBack = (n) => n, childEffective = () => undefined, removedForReadOnly = () => false } = {}) {
  const first = digest.mainCalls[0];
  const result = digest.result;
  if (!first) {
    if (!result || result.is_error) {
      const detail = result ? `${result.subtype}: ${String(result.result || (result.error && result.error.message) || '').slice(0, 300)}` : 'qwen ended without a result event';
      return { turn: { reply: 'model_failed', detail }, inferred: [] };
    }
    return { turn: { reply: 'message', text: String(result.result ?? digest.lastText) }, inferred: [] };
  }
  if (first.name === DELEGATION_TOOL) {
    const child = agentFor(first.id);
    if (child) {
      const effective = childEffective(child);
      return {
        turn: { reply: 'spawn', spawn: { outcome: 'ok', instance: child.agentId, ...(effective ? { effective, inferred: ['effective'] } : {}) } },
        inferred: [],
      };
    }
    let refusal = refusalOf(digest, first.id, first.name) || {
      reason: 'policy_denied', detail: 'Qwen Code started no subagent for the agent call and said nothing about it', inferred: true,
    };
    // Qwen Code says only that `agent` is not registered; that it was
    // withheld by policy (delegation depth 0 excludes it) is the adapter's
    // reading, so the reason is marked inferred.
    if (refusal.reason === 'no_such_tool') refusal = { reason: 'policy_denied', detail: `${refusal.detail} (the adapter excludes agent at delegation depth 0)`, inferred: true };
    return {
      turn: { reply: 'spawn', spawn: { outcome: 'denied', reason: refusal.reason, detail: refusal.detail, ...(refusal.inferred ? { inferred: ['reason'] } : {}) } },
      inferred: [],
    };
  }
  const tool = nameBack(first.name);
  let refusal = refusalOf(digest, first.id, first.name);
  if (refusal && ['no_such_tool', 'policy_denied'].includes(refusal.reason) && removedForReadOnly(first.name)) {
    // Qwen Code says the tool is not registered, or refuses it by the deny
    // rule the adapter wrote for the read-only sandbox; that the refusal is
    // the read-only sandbox's is the adapter's reading.
    refusal = { reason: 'read_only_context', detail: `${refusal.detail} (removed from a read-only instance's tools by the adapter's mapping)`, inferred: true };
  }
  const toolCall = refusal
    ? { tool, outcome: 'denied', reason: refusal.reason }
    : { tool, outcome: 'executed', ...(digest.results.has(first.id) ? { result: digest.results.get(first.id).text } : {}) };
  return {
    turn: { reply: 'tool_call', tool },
    tool_call: toolCall,
    detail: refusal ? refusal.detail : undefined,
    inferred: refusal && refusal.inferred ? ['tool_call'] : [],
  };
}

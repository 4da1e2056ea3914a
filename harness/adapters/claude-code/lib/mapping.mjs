// From Claude Code's stream-json events of one `claude -p` run to the protocol's turn report, children and refusals: pure functions, tested without Claude Code.

/** Claude Code's delegation tool: `Agent` to the model, `Task` in stream-json's tool list and in permission denials. */
export const DELEGATION_TOOLS = new Set(['Agent', 'Task']);
/** Claude Code's tool for giving an existing subagent more input (`to`: its agent id). */
export const SEND_MESSAGE_TOOL = 'SendMessage';

/**
 * Claude Code's own words for refusing a tool call, each with the protocol
 * reason it states. A refusal not matched here still denies the call, but its
 * reason is the adapter's reading and is marked inferred.
 */
const REFUSALS = [
  // A deny rule or --disallowedTools removed the tool ("Agent is disabled for this session").
  { pattern: /is disabled for this session/i, reason: 'policy_denied' },
  // CLAUDE_CODE_MAX_SUBAGENT_SPAWN_DEPTH reached.
  { pattern: /Subagent nesting limit reached/i, reason: 'policy_denied' },
  // A call of a tool the request did not offer: Claude Code's "unknown tool"
  // refusal, under its own name (an expectations file maps it, e.g. onto
  // tool_drift for a tool its MCP server stopped serving).
  { pattern: /No such tool available|is not among the tools available/i, reason: 'no_such_tool' },
  // A permission rule (ask without a person to ask, or deny) refused the call.
  { pattern: /permission|denied|not allowed|haven't granted/i, reason: 'policy_denied' },
];

function textOf(content) {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((b) => (b && typeof b.text === 'string' ? b.text : '')).filter(Boolean).join('\n');
  return '';
}

/** Everything one run's events say, indexed: the main thread's calls, tool results, subagents started, the result. */
export function digestEvents(events) {
  const mainCalls = [];
  const results = new Map();
  const started = new Map();
  // tool_use id -> the tool_use id of the Agent call that created the subagent making it (absent: the main thread).
  const callOwner = new Map();
  let result = null;
  let init = null;
  let lastText = '';
  for (const event of events) {
    if (!event || typeof event !== 'object') continue;
    if (event.type === 'system' && event.subtype === 'init') init = event;
    if (event.type === 'system' && event.subtype === 'task_started' && event.tool_use_id) {
      started.set(event.tool_use_id, { agentId: event.task_id, subagentType: event.subagent_type, depth: event.spawn_depth });
    }
    if (event.type === 'assistant' && event.message && Array.isArray(event.message.content)) {
      for (const block of event.message.content) {
        if (block.type === 'tool_use') {
          if (event.parent_tool_use_id) callOwner.set(block.id, event.parent_tool_use_id);
          else mainCalls.push(block);
        }
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
  return { mainCalls, results, started, callOwner, result, init, lastText };
}

/** Claude Code's refusal of call `id`, if it refused it: `{reason, detail, inferred}`. */
export function refusalOf(digest, id, toolName) {
  const denials = (digest.result && digest.result.permission_denials) || [];
  const denial = denials.find((d) => d.tool_use_id === id);
  if (denial) return { reason: 'policy_denied', detail: `Claude Code's permission_denials: ${denial.tool_name}`, inferred: false };
  const result = digest.results.get(id);
  if (!result || !result.isError) return null;
  for (const { pattern, reason } of REFUSALS) {
    if (pattern.test(result.text)) return { reason, detail: result.text.slice(0, 300), inferred: false };
  }
  return { reason: 'policy_denied', detail: `${toolName} failed: ${result.text.slice(0, 300)}`, inferred: true };
}

/**
 * The subagents this run created, with their parents: the main thread's
 * calls' children have `rootId`, a subagent's calls' children the subagent
 * that made the call (both from the events' `parent_tool_use_id`).
 */
export function childrenOf(digest, rootId) {
  const out = [];
  for (const [toolUseId, child] of digest.started) {
    const owner = digest.callOwner.get(toolUseId);
    const ownerAgent = owner && owner !== toolUseId ? (digest.started.get(owner) || {}).agentId : undefined;
    const parent = ownerAgent || rootId;
    out.push({ id: child.agentId, parent, role: child.subagentType, toolUseId, depth: child.depth });
  }
  return out;
}

/**
 * The turn report: the main thread's first tool call decides the reply kind
 * (the scripted model answers the turn's input with it), else the final
 * message; a failed run with an API error status is `model_failed`.
 * `nameBack(name)` turns Claude Code's name for an MCP tool into the
 * harness's. Answers `{turn, tool_call?, inferred}` for the ActionResult.
 */
export function turnReport(digest, { nameBack = (n) => n, childEffective = () => undefined, removedForReadOnly = () => false } = {}) {
  const first = digest.mainCalls[0];
  const result = digest.result;
  if (!first) {
    if (!result || result.is_error) {
      const status = result && result.api_error_status;
      const detail = result ? `${result.subtype}${status ? ` (API status ${status})` : ''}: ${String(result.result || '').slice(0, 300)}` : 'claude ended without a result event';
      return { turn: { reply: 'model_failed', detail }, inferred: [] };
    }
    return { turn: { reply: 'message', text: String(result.result ?? digest.lastText) }, inferred: [] };
  }
  if (DELEGATION_TOOLS.has(first.name)) {
    const child = digest.started.get(first.id);
    if (child) {
      const effective = childEffective(child);
      return {
        turn: { reply: 'spawn', spawn: { outcome: 'ok', instance: child.agentId, ...(effective ? { effective, inferred: ['effective'] } : {}) } },
        inferred: [],
      };
    }
    const refusal = refusalOf(digest, first.id, first.name) || {
      reason: 'policy_denied', detail: 'Claude Code started no subagent for the Agent call and said nothing about it', inferred: true,
    };
    return {
      turn: { reply: 'spawn', spawn: { outcome: 'denied', reason: refusal.reason, detail: refusal.detail, ...(refusal.inferred ? { inferred: ['reason'] } : {}) } },
      inferred: [],
    };
  }
  if (first.name === SEND_MESSAGE_TOOL) {
    // The parent's model giving a subagent input by its agent id (the instance id).
    const target = String((first.input && first.input.to) || '');
    const refusal = refusalOf(digest, first.id, first.name);
    const lifecycle = refusal
      ? { outcome: 'denied', reason: refusal.reason, detail: refusal.detail, ...(refusal.inferred ? { inferred: ['reason'] } : {}) }
      : { outcome: 'ok', instance: target };
    return { turn: { reply: 'lifecycle', op: 'send_input', target, lifecycle }, inferred: [] };
  }
  const tool = nameBack(first.name);
  let refusal = refusalOf(digest, first.id, first.name);
  if (refusal && refusal.reason === 'no_such_tool' && removedForReadOnly(first.name)) {
    // Claude Code says the tool does not exist; that the adapter removed it for the read-only sandbox is the adapter's reading.
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

// From GitHub Copilot CLI's JSON events (one `copilot -p` run's stdout, or a session's events.jsonl) to the protocol's turn report, children and refusals: pure functions, tested without Copilot.

/** Copilot's delegation tool. */
export const TASK_TOOL = 'task';

/**
 * Copilot's own words for refusing a tool call, each with the protocol
 * reason it states. A failure not matched here is reported as a refusal
 * whose reason is the adapter's reading, marked inferred.
 */
const REFUSALS = [
  // A permission rule (--deny-tool) refused the call: error code `denied`.
  { code: 'denied', reason: 'policy_denied' },
  // A call of a tool the model was not offered (--excluded-tools, or an MCP
  // tool its server stopped serving): Copilot's "Tool 'X' does not exist.",
  // under its own name (an expectations file maps it, e.g. onto tool_drift).
  { pattern: /^Tool '.*' does not exist/i, reason: 'no_such_tool' },
  // Copilot's own check of the MCP tool definitions a session cached when it
  // listed them (a resumed session keeps them): a call of a tool whose live
  // definition differs is refused, "MCP tool catalog changed before tool 'X'
  // could be invoked: Cached MCP tool 'Y' changed before it could be
  // invoked", under its own name (an expectations file maps it onto tool_drift).
  { pattern: /MCP tool catalog changed before tool|Cached MCP tool .* changed before it could be invoked/i, reason: 'mcp_tool_changed' },
  // A person rejected the call when Copilot asked (ACP's reject_once): "The user rejected this tool call."
  { code: 'rejected', reason: 'policy_denied' },
  // Copilot's own nesting limit (`subagents.maxDepth`) refused a `task` call.
  { pattern: /Maximum sub-agent depth of \d+ reached/i, reason: 'policy_denied' },
];

/** Copilot's words when it would have asked a person and `-p` had no one to ask. */
const NOBODY_TO_ASK = /no interactive user response was available/i;

/** The first call Copilot refused because nobody could answer its permission request (`tool: message`), if any. */
export function askedNobody(digest) {
  for (const [id, result] of digest.results) {
    const message = String((result.error && result.error.message) || '');
    if (!result.success && NOBODY_TO_ASK.test(message)) return `${digest.toolNames.get(id) || id}: ${message.slice(0, 200)}`;
  }
  return null;
}

/** Everything one run's events say, indexed: the main thread's calls, tool results, subagents started and ended, the result. */
export function digestEvents(events) {
  const mainCalls = [];
  const results = new Map();
  const started = new Map();
  const ended = new Map();
  // toolCallId -> the toolCallId of the task call whose subagent made it (absent: the main thread).
  const callOwner = new Map();
  const toolNames = new Map();
  const toolArguments = new Map();
  let result = null;
  let lastText = '';
  let lastError = null;
  for (const event of events) {
    if (!event || typeof event !== 'object') continue;
    const data = event.data || {};
    if (event.type === 'assistant.message') {
      for (const request of data.toolRequests || []) {
        toolNames.set(request.toolCallId, request.name);
        toolArguments.set(request.toolCallId, request.arguments);
        if (data.parentToolCallId) callOwner.set(request.toolCallId, data.parentToolCallId);
        else mainCalls.push(request);
      }
      if (!data.parentToolCallId && typeof data.content === 'string' && data.content) lastText = data.content;
    }
    if (event.type === 'tool.execution_complete' && data.toolCallId) {
      results.set(data.toolCallId, {
        success: data.success === true,
        text: data.result ? String(data.result.content ?? '') : '',
        error: data.error || null,
      });
    }
    if (event.type === 'subagent.started' && data.toolCallId) {
      started.set(data.toolCallId, { agentId: event.agentId, agentName: data.agentName, toolCallId: data.toolCallId });
    }
    if ((event.type === 'subagent.completed' || event.type === 'subagent.failed') && data.toolCallId) {
      ended.set(data.toolCallId, event.type === 'subagent.completed' ? 'completed' : 'failed');
    }
    if (event.type === 'session.error' || event.type === 'model.call_failure') lastError = event;
    if (event.type === 'result') result = event;
  }
  return { mainCalls, results, started, ended, callOwner, toolNames, toolArguments, result, lastText, lastError };
}

/** Copilot's refusal of call `id`, if it refused it: `{reason, detail, inferred}`. */
export function refusalOf(digest, id, toolName) {
  const result = digest.results.get(id);
  if (!result || result.success) return null;
  const message = String((result.error && result.error.message) || result.text || '');
  const code = result.error && result.error.code;
  for (const refusal of REFUSALS) {
    if ((refusal.code && refusal.code === code) || (refusal.pattern && refusal.pattern.test(message))) {
      return { reason: refusal.reason, detail: `Copilot: ${message.slice(0, 300)}`, inferred: false };
    }
  }
  return { reason: 'policy_denied', detail: `${toolName} failed: ${message.slice(0, 300)}`, inferred: true };
}

/**
 * The subagents this run created, with their parents. A subagent's instance
 * id is the id of the `task` call that started it (Copilot's `toolCallId`,
 * which is also what the harness's endpoint credits its requests to); its
 * parent is the subagent whose turn made that call (`parentToolCallId`),
 * else the root.
 */
export function childrenOf(digest, rootId) {
  const out = [];
  for (const [toolCallId, child] of digest.started) {
    const parent = digest.callOwner.get(toolCallId) || rootId;
    out.push({ id: toolCallId, parent, role: child.agentName, agentId: child.agentId, state: digest.ended.get(toolCallId) || 'running' });
  }
  return out;
}

/**
 * The turn report: the main thread's first tool call decides the reply kind
 * (the scripted model answers the turn's input with it), else the final
 * message; a run that ended in a model error is `model_failed`.
 * `nameBack(name)` turns Copilot's name for an MCP tool into the harness's;
 * `taskRemoved` says the adapter excluded `task` (delegation depth 0), which
 * makes Copilot's "does not exist" a policy refusal by the adapter's reading.
 */
export function turnReport(digest, { nameBack = (n) => n, childEffective = () => undefined, taskRemoved = false, denyRuleReason = () => null } = {}) {
  const first = digest.mainCalls[0];
  if (!first) {
    const failed = !digest.result || (digest.result.exitCode ?? 0) !== 0 || (digest.lastError && !digest.lastText);
    if (failed) {
      const error = digest.lastError && digest.lastError.data;
      const detail = error ? String(error.message || error.errorType || JSON.stringify(error)).slice(0, 300) : 'copilot ended without a result event';
      return { turn: { reply: 'model_failed', detail }, inferred: [] };
    }
    return { turn: { reply: 'message', text: digest.lastText }, inferred: [] };
  }
  if (first.name === TASK_TOOL) {
    if (digest.started.has(first.toolCallId)) {
      const effective = childEffective(first.toolCallId);
      return {
        turn: { reply: 'spawn', spawn: { outcome: 'ok', instance: first.toolCallId, ...(effective ? { effective, inferred: ['effective'] } : {}) } },
        inferred: [],
      };
    }
    let refusal = refusalOf(digest, first.toolCallId, first.name) || {
      reason: 'policy_denied', detail: 'Copilot started no subagent for the task call and said nothing about it', inferred: true,
    };
    if (taskRemoved && refusal.reason === 'no_such_tool') {
      // Copilot's words say only that the tool is not there; that it is not
      // there because of the delegation depth is the adapter's own doing.
      refusal = { reason: 'policy_denied', detail: `${refusal.detail} (the adapter excluded task: delegation depth 0)`, inferred: true };
    }
    return {
      turn: { reply: 'spawn', spawn: { outcome: 'denied', reason: refusal.reason, detail: refusal.detail, ...(refusal.inferred ? { inferred: ['reason'] } : {}) } },
      inferred: [],
    };
  }
  const tool = nameBack(first.name);
  let refusal = refusalOf(digest, first.toolCallId, first.name);
  const ruleReason = refusal && refusal.reason === 'policy_denied' && !refusal.inferred ? denyRuleReason(first.name) : null;
  if (ruleReason && ruleReason !== 'policy_denied') {
    // Copilot's words name the deny rule; why the adapter set that rule (a
    // read-only sandbox) is the adapter's reading.
    refusal = { ...refusal, reason: ruleReason, inferred: true };
  }
  const result = digest.results.get(first.toolCallId);
  const toolCall = refusal
    ? { tool, outcome: 'denied', reason: refusal.reason }
    : { tool, outcome: 'executed', ...(result ? { result: result.text } : {}) };
  return {
    turn: { reply: 'tool_call', tool },
    tool_call: toolCall,
    detail: refusal ? refusal.detail : undefined,
    inferred: refusal && refusal.inferred ? ['tool_call'] : [],
  };
}

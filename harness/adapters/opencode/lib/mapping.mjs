// Pure mappings between host protocol v1 and opencode: permissions from an authority, turn reports from messages, observations from sessions.


/** What an approval policy says of one action class: the model's verdicts, as opencode permission actions. */
export function policyAction(policy, cls) {
  if (policy && typeof policy === 'object' && policy.granular) {
    if ((policy.granular.deny || []).includes(cls)) return 'deny';
    if ((policy.granular.ask || []).includes(cls)) return 'ask';
    return 'allow';
  }
  if (policy === 'never') return cls === 'read' ? 'allow' : 'deny';
  if (policy === 'untrusted') return cls === 'read' ? 'allow' : 'ask';
  if (policy === 'on-request') return cls === 'read' || cls === 'file-write' ? 'allow' : 'ask';
  return 'ask';
}

/** The MCP tool classes a read-only sandbox refuses (PROTOCOL.md, the eligibility table). */
export const READ_ONLY_REFUSES = new Set(['shell', 'file-write', 'generic']);

/**
 * opencode permission rules for a root session, from the authority the
 * harness starts it with. `tools` are the sealed tools' catalogue entries
 * (`{opencode, class}`), `served` every tool the MCP servers serve now: a
 * session sees only its sealed tools (every other served tool is denied,
 * which hides it from the model), each with the action its approval policy
 * gives its class. The unsealed ones are denied one by one rather than with
 * a `<server>_*` rule because opencode copies only a parent session's deny
 * rules into a child: a blanket deny would hide the sealed tools from every
 * child too.
 */
export function sessionPermission(start, { tools = [], served = [] } = {}) {
  const rules = [];
  const rule = (permission, action) => rules.push({ permission, pattern: '*', action });
  if ((start.delegation_depth ?? 2) === 0) rule('task', 'deny');
  const sandbox = start.sandbox;
  const network = sandbox === 'full-access' || (sandbox && sandbox['workspace-write'] && sandbox['workspace-write'].network === true);
  if (sandbox === 'read-only') {
    rule('edit', 'deny');
    rule('bash', 'deny');
  }
  if (!network) {
    rule('webfetch', 'deny');
    rule('websearch', 'deny');
  }
  const sealed = new Set(tools.map((t) => t.opencode));
  for (const tool of served) if (!sealed.has(tool.opencode)) rule(tool.opencode, 'deny');
  for (const tool of tools) {
    const cls = tool.class || 'mcp';
    let action = policyAction(start.approval_policy, cls);
    if (sandbox === 'read-only' && READ_ONLY_REFUSES.has(cls)) action = 'deny';
    if (cls === 'network' && !network) action = 'deny';
    rule(tool.opencode, action);
  }
  return rules;
}

/** opencode's rule evaluation: the last rule whose permission and pattern match wins (default `ask`). */
export function evaluate(rules, permission, pattern = '*') {
  const glob = (g, text) => new RegExp(`^${g.split('*').map((x) => x.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*')}$`).test(text);
  const hit = [...(rules || [])].reverse().find((r) => glob(r.permission, permission) && glob(r.pattern, pattern));
  return hit ? hit.action : 'ask';
}

/**
 * What an opencode session may do, on the axes its permission rules
 * decide, starting from `base` (the start request, or the parent's ceiling
 * for a child): edit and bash denied make it read-only, and a read-only base
 * whose session denies neither is full-access (opencode has no sandbox);
 * webfetch denied or not decides the network; the MCP tools are exactly
 * those the rules do not deny; task denied takes delegation. Both ways: a
 * session that lost its origin's rules (a fork) shows it.
 */
export function applyPermission(base, rules, catalogue) {
  const out = { ...base };
  const readOnly = evaluate(rules, 'edit') === 'deny' && evaluate(rules, 'bash') === 'deny';
  if (readOnly) out.sandbox = 'read-only';
  else if (base.sandbox === 'read-only') out.sandbox = 'full-access';
  const ws = out.sandbox && out.sandbox['workspace-write'];
  if (ws) out.sandbox = { 'workspace-write': { ...ws, network: evaluate(rules, 'webfetch') !== 'deny' } };
  if (catalogue && catalogue.size) {
    out.tools = {};
    for (const entry of catalogue.values()) if (evaluate(rules, entry.opencode) !== 'deny') out.tools[entry.name] = entry.digest;
  }
  if (evaluate(rules, 'task') === 'deny') out.delegation_depth = 0;
  return out;
}

/** Why a `task` call that created no child was refused, in the protocol's deny vocabulary. */
export function denyReasonFor(errorText) {
  const text = String(errorText || '');
  if (/depth limit/i.test(text)) return 'ceiling_exceeded';
  return 'policy_denied';
}

function textOf(message) {
  return (message.parts || [])
    .filter((p) => p.type === 'text' && !p.synthetic)
    .map((p) => p.text || '')
    .join('');
}

function errorText(error) {
  if (!error) return '';
  if (typeof error === 'string') return error;
  return (error.data && error.data.message) || error.message || error.name || JSON.stringify(error);
}

/** The harness's name for an opencode tool id (an MCP tool's own name), or the id itself. */
export function harnessToolName(id, catalogue) {
  for (const entry of (catalogue ? catalogue.values() : [])) if (entry.opencode === id) return entry.name;
  return id;
}

/** A pending opencode permission request as the protocol's tool call report. */
export function pendingToolCall(permission, catalogue) {
  const tool = harnessToolName(permission.permission, catalogue);
  return { tool, outcome: 'pending_approval', approval: permission.id };
}

/** A finished (or failed) opencode tool part as the protocol's tool call report. */
export function toolCallReport(part, catalogue) {
  const state = part.state || {};
  // opencode routes a call to a tool the session may not see to `invalid`: refused, whatever that tool's own status.
  if (part.tool === 'invalid') {
    const asked = (state.input && state.input.tool) || 'invalid';
    return { tool: harnessToolName(asked, catalogue), outcome: 'denied', reason: 'policy_denied' };
  }
  const report = { tool: harnessToolName(part.tool, catalogue), outcome: state.status === 'completed' ? 'executed' : 'denied' };
  if (report.outcome === 'executed' && typeof state.output === 'string') report.result = state.output;
  if (report.outcome === 'denied') report.reason = 'policy_denied';
  return report;
}

/**
 * The result of one `instance/turn`, from the messages opencode added to the
 * session during the turn and the child sessions that appeared.
 *
 * The report follows the model's FIRST answer in the turn (what the
 * harness scripted): a `task` call is a spawn, another tool call is a
 * tool_call, text is a message. opencode then continues the turn on its own
 * (a follow-up model request with the tool's result); the report says so in
 * `detail`. `pending` is an opencode permission request the turn stopped at.
 */
export function turnResult({ instance, newMessages, newChildren, failure, pending, catalogue }) {
  const assistants = newMessages.filter((m) => m.info && m.info.role === 'assistant');
  const base = { outcome: 'ok', instance };
  if (failure) return { ...base, turn: { reply: 'model_failed', detail: failure } };
  if (pending && pending.permission !== 'task') {
    const tool_call = pendingToolCall(pending, catalogue);
    return { ...base, detail: `opencode asks permission ${pending.id} (${pending.permission})`, turn: { reply: 'tool_call', tool: tool_call.tool }, tool_call };
  }
  const first = assistants[0];
  if (!first) return { ...base, turn: { reply: 'model_failed', detail: 'opencode added no assistant message in this turn' } };
  const tools = (first.parts || []).filter((p) => p.type === 'tool');
  if (tools.length === 0 && first.info.error) {
    return { ...base, turn: { reply: 'model_failed', detail: errorText(first.info.error) } };
  }
  const follow = assistants.length > 1 ? ` (opencode made ${assistants.length - 1} follow-up model request(s) in the same turn)` : '';
  const task = tools.find(asksForTask);
  const continued = task && task.state && task.state.input && task.state.input.task_id;
  if (continued) return continuedTask({ base, task, target: continued, follow });
  if (task) {
    const state = task.state || {};
    const claimed = state.metadata && state.metadata.sessionId;
    const child = newChildren.find((c) => c.id === claimed) || newChildren[0];
    if (child) {
      return { ...base, detail: `task created child session ${child.id}${follow}`, turn: { reply: 'spawn', spawn: { outcome: 'ok', instance: child.id } } };
    }
    const stated = errorText(state.error) || (task.tool === 'invalid' && state.output);
    const why = stated || `task call ended ${state.status || 'without a status'} and no child session appeared`;
    const result = {
      ...base,
      detail: `task refused by opencode${follow}`,
      turn: { reply: 'spawn', spawn: { outcome: 'denied', reason: denyReasonFor(why), detail: why } },
    };
    // Without opencode's own words the reason is the adapter's reading of "no child".
    if (!stated) result.inferred = ['spawn'];
    return result;
  }
  if (tools.length > 0) {
    const call = tools[0];
    const report = toolCallReport(call, catalogue);
    const result = { ...base, detail: `tool ${call.tool} ${(call.state && call.state.status) || ''}${follow}`.trim(), turn: { reply: 'tool_call', tool: report.tool }, tool_call: report };
    // opencode says only that the tool was unavailable (not offered to this
    // session: denied by its rules, or no longer served); the deny reason is
    // the adapter's reading, and the protocol can mark only the whole report.
    if (call.tool === 'invalid') result.inferred = ['tool_call'];
    return result;
  }
  const last = assistants[assistants.length - 1];
  return { ...base, turn: { reply: 'message', text: textOf(last) } };
}

/**
 * A `task` call naming an existing child (`task_id`): opencode's one way for
 * a model to give a child input, which the protocol calls a lifecycle
 * `send_input` (a `resume` with a message is the same opencode call, so the
 * op is the adapter's name for it: the report is marked inferred). The
 * nested result names the session opencode ran the prompt in
 * (`metadata.sessionId`), which is not always the one asked for.
 */
function continuedTask({ base, task, target, follow }) {
  const state = task.state || {};
  const ran = state.metadata && state.metadata.sessionId;
  const stated = errorText(state.error) || (task.tool === 'invalid' && state.output);
  const lifecycle = task.tool === 'task' && state.status === 'completed'
    ? { outcome: 'ok', instance: ran || target, ...(ran && ran !== target ? { detail: `opencode ran the prompt in session ${ran}, not ${target}` } : {}) }
    : { outcome: 'denied', reason: denyReasonFor(stated || ''), detail: stated || `task call ended ${state.status || 'without a status'}` };
  return {
    ...base,
    detail: `task continued ${target}${follow}`,
    turn: { reply: 'lifecycle', op: 'send_input', target, lifecycle },
    inferred: ['turn'],
  };
}

/**
 * Whether a tool part is the model asking for opencode's `task` tool. When a
 * session's permission denies `task`, opencode hides the tool from the model
 * and routes a call to it to its `invalid` tool ("Model tried to call
 * unavailable tool 'task'"): still a delegation the model asked for.
 */
export function asksForTask(part) {
  if (part.tool === 'task') return true;
  if (part.tool !== 'invalid') return false;
  const state = part.state || {};
  const input = state.input || {};
  return input.tool === 'task' || /unavailable tool 'task'/.test(`${state.output || ''} ${errorText(state.error)} ${input.error || ''}`);
}

/**
 * The lifecycle state of a live opencode session, from GET /session/status
 * and its messages: busy (or retrying) is running; idle after a model
 * answer is a completed turn; idle with no model answer yet is a session
 * started and waiting for its first turn, which the protocol calls running
 * (opencode has no state of its own for it: nothing has completed).
 */
export function liveState(status, messages) {
  if (status && (status.type === 'busy' || status.type === 'retry')) return 'running';
  return answeredCount(messages) > 0 ? 'completed' : 'running';
}

/** How many model answers (assistant messages) a session holds. */
export function answeredCount(messages) {
  return (messages || []).filter((m) => m.info && m.info.role === 'assistant').length;
}

/** A child's ceiling: its parent's, one level of delegation less. */
export function childCeiling(parentCeiling) {
  return { ...parentCeiling, delegation_depth: Math.max(0, (parentCeiling.delegation_depth ?? 0) - 1) };
}

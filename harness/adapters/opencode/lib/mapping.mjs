// Pure mappings between host protocol v1 and opencode: permissions from an authority, turn reports from messages, observations from sessions.

/** opencode permission rules for a root session, from the authority the harness starts it with. */
export function sessionPermission(start) {
  const rules = [];
  const deny = (permission) => rules.push({ permission, pattern: '*', action: 'deny' });
  if ((start.delegation_depth ?? 2) === 0) deny('task');
  const sandbox = start.sandbox;
  const network = sandbox === 'full-access' || (sandbox && sandbox['workspace-write'] && sandbox['workspace-write'].network === true);
  if (sandbox === 'read-only') {
    deny('edit');
    deny('bash');
  }
  if (!network) {
    deny('webfetch');
    deny('websearch');
  }
  return rules;
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

/**
 * The result of one `instance/turn`, from the messages opencode added to the
 * session during the turn and the child sessions that appeared.
 *
 * The report follows the model's FIRST answer in the turn (what the
 * harness scripted): a `task` call is a spawn, another tool call is a
 * tool_call, text is a message. opencode then continues the turn on its own
 * (a follow-up model request with the tool's result); the report says so in
 * `detail`.
 */
export function turnResult({ instance, newMessages, newChildren, failure }) {
  const assistants = newMessages.filter((m) => m.info && m.info.role === 'assistant');
  const base = { outcome: 'ok', instance };
  if (failure) return { ...base, turn: { reply: 'model_failed', detail: failure } };
  const first = assistants[0];
  if (!first) return { ...base, turn: { reply: 'model_failed', detail: 'opencode added no assistant message in this turn' } };
  const tools = (first.parts || []).filter((p) => p.type === 'tool');
  if (tools.length === 0 && first.info.error) {
    return { ...base, turn: { reply: 'model_failed', detail: errorText(first.info.error) } };
  }
  const follow = assistants.length > 1 ? ` (opencode made ${assistants.length - 1} follow-up model request(s) in the same turn)` : '';
  const task = tools.find(asksForTask);
  if (task) {
    const state = task.state || {};
    const claimed = state.metadata && state.metadata.sessionId;
    const child = newChildren.find((c) => c.id === claimed) || newChildren[0];
    if (child) {
      return { ...base, detail: `task created child session ${child.id}${follow}`, turn: { reply: 'spawn', spawn: { outcome: 'ok', instance: child.id } } };
    }
    const why = errorText(state.error) || (task.tool === 'invalid' && state.output) || `task call ended ${state.status || 'without a status'} and no child session appeared`;
    return {
      ...base,
      detail: `task refused by opencode${follow}`,
      turn: { reply: 'spawn', spawn: { outcome: 'denied', reason: denyReasonFor(why), detail: why } },
    };
  }
  if (tools.length > 0) {
    const call = tools[0];
    const state = call.state || {};
    const report = { tool: call.tool, outcome: state.status === 'completed' ? 'executed' : 'denied' };
    if (report.outcome === 'executed' && typeof state.output === 'string') report.result = state.output;
    if (report.outcome === 'denied') report.reason = 'policy_denied';
    return { ...base, detail: `tool ${call.tool} ${state.status || ''}${follow}`.trim(), turn: { reply: 'tool_call', tool: call.tool }, tool_call: report };
  }
  const last = assistants[assistants.length - 1];
  return { ...base, turn: { reply: 'message', text: textOf(last) } };
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

/** The lifecycle state of a live opencode session, from GET /session/status. */
export function liveState(status) {
  return status && (status.type === 'busy' || status.type === 'retry') ? 'running' : 'completed';
}

/** A child's ceiling: its parent's, one level of delegation less. */
export function childCeiling(parentCeiling) {
  return { ...parentCeiling, delegation_depth: Math.max(0, (parentCeiling.delegation_depth ?? 0) - 1) };
}

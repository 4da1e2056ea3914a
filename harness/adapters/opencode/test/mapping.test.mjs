// Tests of the pure opencode <-> protocol mappings: permissions from an authority, turn reports from opencode messages.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sessionPermission, turnResult, childCeiling, liveState } from '../lib/mapping.mjs';
import { rolePermission } from '../lib/opencode.mjs';
import { ROOT } from './helpers.mjs';

const asst = (parts, extra = {}) => ({ info: { role: 'assistant', time: { completed: 1 }, ...extra }, parts });

test('delegation depth 0 denies task on the session; no network denies web tools', () => {
  const rules = sessionPermission(ROOT(0));
  assert.ok(rules.some((r) => r.permission === 'task' && r.action === 'deny'));
  assert.ok(rules.some((r) => r.permission === 'webfetch' && r.action === 'deny'));
  assert.ok(!sessionPermission(ROOT(1)).some((r) => r.permission === 'task'));
  assert.ok(sessionPermission({ ...ROOT(1), sandbox: 'read-only' }).some((r) => r.permission === 'edit'));
});

test('a task call with a new child is a spawn ok naming the child', () => {
  const r = turnResult({
    instance: 'ses_1',
    newMessages: [asst([{ type: 'tool', tool: 'task', state: { status: 'completed', metadata: { sessionId: 'ses_2' } } }]), asst([{ type: 'text', text: 'ok' }])],
    newChildren: [{ id: 'ses_2' }],
  });
  assert.deepEqual(r.turn, { reply: 'spawn', spawn: { outcome: 'ok', instance: 'ses_2' } });
});

test('task hidden by a deny rule (opencode routes it to `invalid`) is a denied spawn, policy_denied', () => {
  const r = turnResult({
    instance: 'ses_1',
    newMessages: [asst([{ type: 'tool', tool: 'invalid', state: { status: 'completed', input: { tool: 'task' }, output: "Model tried to call unavailable tool 'task'." } }])],
    newChildren: [],
  });
  assert.equal(r.turn.reply, 'spawn');
  assert.equal(r.turn.spawn.outcome, 'denied');
  assert.equal(r.turn.spawn.reason, 'policy_denied');
});

test("opencode's depth limit is ceiling_exceeded", () => {
  const r = turnResult({
    instance: 'ses_1',
    newMessages: [asst([{ type: 'tool', tool: 'task', state: { status: 'error', error: 'Subagent depth limit reached (1).' } }])],
    newChildren: [],
  });
  assert.equal(r.turn.spawn.reason, 'ceiling_exceeded');
});

test('text is a message; an error or a failure is model_failed', () => {
  assert.deepEqual(turnResult({ instance: 'a', newMessages: [asst([{ type: 'text', text: 'hi' }])], newChildren: [] }).turn, { reply: 'message', text: 'hi' });
  assert.equal(turnResult({ instance: 'a', newMessages: [asst([], { error: { name: 'APIError', data: { message: '503' } } })], newChildren: [] }).turn.reply, 'model_failed');
  assert.equal(turnResult({ instance: 'a', newMessages: [], newChildren: [], failure: 'retrying' }).turn.reply, 'model_failed');
});

test('a child ceiling has one level of delegation less; busy is running, idle after an answer completed, idle before any answer running', () => {
  assert.equal(childCeiling({ delegation_depth: 1 }).delegation_depth, 0);
  assert.equal(childCeiling({ delegation_depth: 0 }).delegation_depth, 0);
  const answered = [{ info: { role: 'user' } }, { info: { role: 'assistant' } }];
  assert.equal(liveState({ type: 'busy' }, answered), 'running');
  assert.equal(liveState(undefined, answered), 'completed');
  assert.equal(liveState({ type: 'idle' }, answered), 'completed');
  assert.equal(liveState(undefined, []), 'running');
  assert.equal(liveState(undefined, [{ info: { role: 'user' } }]), 'running');
});

test('approval policies give each action class the model\'s verdict as an opencode action', async () => {
  const { policyAction } = await import('../lib/mapping.mjs');
  assert.deepEqual(['read', 'file-write', 'mcp'].map((c) => policyAction('on-request', c)), ['allow', 'allow', 'ask']);
  assert.deepEqual(['read', 'mcp'].map((c) => policyAction('never', c)), ['allow', 'deny']);
  assert.deepEqual(['read', 'file-write'].map((c) => policyAction('untrusted', c)), ['allow', 'ask']);
  assert.deepEqual(['mcp', 'shell', 'read'].map((c) => policyAction({ granular: { ask: ['mcp'], deny: ['shell'] } }, c)), ['ask', 'deny', 'allow']);
});

test('a ceiling follows what the session\'s own opencode rules decide, narrower or wider (last matching rule wins)', async () => {
  const { applyPermission: narrowByPermission, evaluate } = await import('../lib/mapping.mjs');
  const catalogue = new Map([['notes.read', { name: 'notes.read', opencode: 'tools_notes_read', digest: 'sha256:a' }], ['probe', { name: 'probe', opencode: 'tools_probe', digest: 'sha256:b' }]]);
  const rules = [{ permission: 'tools_*', pattern: '*', action: 'deny' }, { permission: 'tools_notes_read', pattern: '*', action: 'allow' }];
  assert.equal(evaluate(rules, 'tools_notes_read'), 'allow');
  assert.equal(evaluate(rules, 'tools_probe'), 'deny');
  assert.equal(evaluate(rules, 'read'), 'ask');
  const ceiling = { sandbox: { 'workspace-write': { writable_roots: ['/w'], network: true } }, tools: { 'notes.read': 'sha256:a', probe: 'sha256:b' }, delegation_depth: 1 };
  const narrowed = narrowByPermission(ceiling, [...rules, { permission: 'webfetch', pattern: '*', action: 'deny' }, { permission: 'task', pattern: '*', action: 'deny' }], catalogue);
  assert.deepEqual(narrowed, { sandbox: { 'workspace-write': { writable_roots: ['/w'], network: false } }, tools: { 'notes.read': 'sha256:a' }, delegation_depth: 0 });
  const readOnly = narrowByPermission(ceiling, [{ permission: 'edit', pattern: '*', action: 'deny' }, { permission: 'bash', pattern: '*', action: 'deny' }], catalogue);
  assert.equal(readOnly.sandbox, 'read-only');
  // A session without its origin's rules (opencode's fork copies none) is as wide as opencode lets it be.
  const lost = narrowByPermission({ sandbox: 'read-only', tools: { 'notes.read': 'sha256:a' }, delegation_depth: 0 }, [], new Map([['notes.read', { name: 'notes.read', opencode: 'tools_notes_read', digest: 'sha256:a' }], ['probe', { name: 'probe', opencode: 'tools_probe', digest: 'sha256:b' }]]));
  assert.deepEqual(lost, { sandbox: 'full-access', tools: { 'notes.read': 'sha256:a', probe: 'sha256:b' }, delegation_depth: 0 });
});

test('digests are SHA-256 over RFC 8785 JSON; opencode names MCP tools <server>_<tool> with its sanitisation', async () => {
  const { canonicalJson, digestOf, opencodeToolName } = await import('../lib/mcp.mjs');
  assert.equal(canonicalJson({ b: [1, 'x', null], a: { d: true, c: 1.5 } }), '{"a":{"c":1.5,"d":true},"b":[1,"x",null]}');
  assert.equal(digestOf({}), 'sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a');
  assert.equal(opencodeToolName('tools', 'notes.read'), 'tools_notes_read');
  assert.equal(opencodeToolName('my server', 'a-b/c'), 'my_server_a-b_c');
});

test('a task call that leaves no child and no word from opencode is a denied spawn whose reason is marked inferred', () => {
  const r = turnResult({ instance: 'ses_1', newChildren: [], newMessages: [{ info: { role: 'assistant' }, parts: [{ type: 'tool', tool: 'task', state: { status: 'completed' } }] }] });
  assert.deepEqual([r.turn.spawn.outcome, r.turn.spawn.reason, r.inferred], ['denied', 'policy_denied', ['spawn']]);
  const worded = turnResult({ instance: 'ses_1', newChildren: [], newMessages: [{ info: { role: 'assistant' }, parts: [{ type: 'tool', tool: 'task', state: { status: 'error', error: 'Subagent depth limit reached (1).' } }] }] });
  assert.deepEqual([worded.turn.spawn.reason, worded.inferred], ['ceiling_exceeded', undefined]);
});

test('a call opencode routed to `invalid` (a tool the session was not offered) is refused, its report marked inferred; a tool that ran is read as it is', () => {
  const catalogue = new Map([['notes.read', { name: 'notes.read', opencode: 'harness_notes_read' }]]);
  const invalid = { type: 'tool', tool: 'invalid', state: { status: 'completed', input: { tool: 'notes.read', error: 'x' } } };
  const refused = turnResult({ instance: 'ses_1', newChildren: [], newMessages: [{ info: { role: 'assistant' }, parts: [invalid] }], catalogue });
  assert.deepEqual([refused.tool_call, refused.inferred], [{ tool: 'notes.read', outcome: 'denied', reason: 'policy_denied' }, ['tool_call']]);
  // Control: the same tool under opencode's name ran; nothing in the report is the adapter's.
  const ran = { type: 'tool', tool: 'harness_notes_read', state: { status: 'completed', input: {}, output: 'text' } };
  const executed = turnResult({ instance: 'ses_1', newChildren: [], newMessages: [{ info: { role: 'assistant' }, parts: [ran] }], catalogue });
  assert.deepEqual([executed.tool_call, executed.inferred], [{ tool: 'notes.read', outcome: 'executed', result: 'text' }, undefined]);
});

test('a task call naming an existing child is a lifecycle send_input (marked inferred: opencode has one call for send_input and resume); a new spawn stays a spawn', () => {
  const call = (state) => ({ info: { role: 'assistant' }, parts: [{ type: 'tool', tool: 'task', state }] });
  const ok = turnResult({ instance: 'ses_1', newChildren: [], newMessages: [call({ status: 'completed', input: { task_id: 'ses_2' }, metadata: { sessionId: 'ses_2' } })] });
  assert.deepEqual([ok.turn, ok.inferred], [{ reply: 'lifecycle', op: 'send_input', target: 'ses_2', lifecycle: { outcome: 'ok', instance: 'ses_2' } }, ['turn']]);
  // opencode ran the prompt elsewhere: the report names where.
  const elsewhere = turnResult({ instance: 'ses_1', newChildren: [{ id: 'ses_3' }], newMessages: [call({ status: 'completed', input: { task_id: 'ses_2' }, metadata: { sessionId: 'ses_3' } })] });
  assert.equal(elsewhere.turn.lifecycle.instance, 'ses_3');
  const refused = turnResult({ instance: 'ses_1', newChildren: [], newMessages: [call({ status: 'error', input: { task_id: 'ses_2' }, error: 'Subagent depth limit reached (1).' })] });
  assert.deepEqual([refused.turn.lifecycle.outcome, refused.turn.lifecycle.reason], ['denied', 'ceiling_exceeded']);
  // Control: without task_id the same call is a spawn.
  const spawn = turnResult({ instance: 'ses_1', newChildren: [{ id: 'ses_2' }], newMessages: [call({ status: 'completed', input: {}, metadata: { sessionId: 'ses_2' } })] });
  assert.deepEqual([spawn.turn.reply, spawn.turn.spawn.instance, spawn.inferred], ['spawn', 'ses_2', undefined]);
});

test('a role default denies the MCP tools its sandbox refuses, by opencode\'s name, and nothing else', () => {
  const served = [
    { opencode: 'harness_probe_read', class: 'read' },
    { opencode: 'harness_probe_write', class: 'file-write' },
    { opencode: 'harness_probe_shell', class: 'shell' },
    { opencode: 'harness_probe_fetch', class: 'network' },
    { opencode: 'harness_probe_note', class: 'mcp' },
  ];
  assert.deepEqual(rolePermission({ sandbox: 'read-only' }, served), {
    task: 'allow', edit: 'deny', bash: 'deny', webfetch: 'deny', websearch: 'deny',
    harness_probe_write: 'deny', harness_probe_shell: 'deny', harness_probe_fetch: 'deny',
  });
  const offline = rolePermission({ sandbox: { 'workspace-write': { writable_roots: ['/w/repo'], network: false } } }, served);
  assert.deepEqual(offline, { task: 'allow', webfetch: 'deny', websearch: 'deny', harness_probe_fetch: 'deny' });
  assert.deepEqual(rolePermission({ sandbox: 'full-access' }, served), { task: 'allow' });
  assert.deepEqual(rolePermission({}, served), { task: 'allow' }, 'a role without defaults narrows nothing');
});

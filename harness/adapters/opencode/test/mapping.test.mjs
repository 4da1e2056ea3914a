// Tests of the pure opencode <-> protocol mappings: permissions from an authority, turn reports from opencode messages.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sessionPermission, turnResult, childCeiling, liveState } from '../lib/mapping.mjs';
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

test('a child ceiling has one level of delegation less; busy is running', () => {
  assert.equal(childCeiling({ delegation_depth: 1 }).delegation_depth, 0);
  assert.equal(childCeiling({ delegation_depth: 0 }).delegation_depth, 0);
  assert.equal(liveState({ type: 'busy' }), 'running');
  assert.equal(liveState(undefined), 'completed');
});

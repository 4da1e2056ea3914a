// End-to-end tests of adapter.mjs as a subprocess against the fake opencode: method mapping, unsupported methods, restart, shutdown.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startAdapter, tempDir, ROOT, alive } from './helpers.mjs';

test('initialize declares only what opencode has; unknown methods are -32601; nothing before initialize', async () => {
  const store = tempDir('init');
  const a = startAdapter({ store });
  const early = await a.request('state/observe');
  assert.equal(early.error.code, -32003);
  const init = await a.initialize();
  assert.deepEqual(init.result.capabilities, ['nested-delegation', 'restart', 'mcp', 'fork', 'wait', 'model-lifecycle-tools']);
  assert.equal(init.result.protocol_version, '1.0');
  for (const method of ['receipt/prepare', 'instance/delegate', 'clock/set', 'fault/arm', 'approval/auto', 'event/deliver', 'grant/revoke', 'instance/fail', 'instance/tool_call']) {
    const r = await a.request(method, {});
    assert.equal(r.error.code, -32601, method);
  }
  assert.equal((await a.request('host/configure', { authorizer_required: true })).error.code, -32001);
  // Options opencode cannot honour are refused, never accepted and ignored.
  assert.equal((await a.request('host/configure', { strict_mode: true })).error.code, -32001);
  assert.equal((await a.request('host/configure', { auto_approve: true })).error.code, -32001);
  assert.equal((await a.request('host/configure', { strict_mode: false, auto_approve: false })).result.outcome, 'ok');
  assert.deepEqual(await a.close(), { code: 0, signal: null });
});

test('a spawn within the ceiling names the child; observe shows it under its parent', async () => {
  const store = tempDir('spawn');
  const a = startAdapter({ store });
  await a.initialize();
  assert.equal((await a.request('host/configure', {})).result.outcome, 'ok');
  const start = await a.request('instance/start', ROOT(1));
  assert.equal(start.result.outcome, 'ok');
  const root = start.result.instance;
  assert.equal(start.result.effective.delegation_depth, 1);
  const turn = await a.request('instance/turn', { instance: root, input: 'SPAWN now' });
  assert.equal(turn.result.turn.reply, 'spawn');
  assert.equal(turn.result.turn.spawn.outcome, 'ok');
  const child = turn.result.turn.spawn.instance;
  const obs = (await a.request('state/observe')).result.observed;
  assert.equal(obs.instances.length, 2);
  const c = obs.instances.find((i) => i.id === child);
  assert.equal(c.parent, root);
  assert.equal(c.state, 'completed');
  assert.equal(c.role, 'worker');
  assert.equal(c.ceiling.delegation_depth, 0);
  const config = JSON.parse(readFileSync(join(store, 'opencode', 'workspace', 'opencode.json'), 'utf8'));
  assert.equal(config.provider.harness.options.baseURL, 'http://127.0.0.1:9/v1');
  assert.equal(config.subagent_depth, 1);
  await a.close();
});

test('a spawn from a root with delegation depth 0 is denied and leaves no child', async () => {
  const store = tempDir('deny');
  const a = startAdapter({ store });
  await a.initialize();
  const root = (await a.request('instance/start', ROOT(0))).result.instance;
  const turn = await a.request('instance/turn', { instance: root, input: 'SPAWN now' });
  assert.deepEqual([turn.result.outcome, turn.result.turn.spawn.outcome, turn.result.turn.spawn.reason], ['ok', 'denied', 'policy_denied']);
  assert.equal((await a.request('state/observe')).result.observed.instances.length, 1);
  const deep = await a.request('instance/turn', { instance: root, input: 'DEEP' });
  assert.equal(deep.result.turn.spawn.reason, 'ceiling_exceeded');
  await a.close();
});

test('message turns, model failure, close, terminal and unknown instances', async () => {
  const store = tempDir('life');
  const a = startAdapter({ store });
  await a.initialize();
  const root = (await a.request('instance/start', ROOT(1))).result.instance;
  assert.deepEqual((await a.request('instance/turn', { instance: root, input: 'hello' })).result.turn, { reply: 'message', text: 'echo: hello' });
  assert.equal((await a.request('instance/turn', { instance: root, input: 'FAIL' })).result.turn.reply, 'model_failed');
  assert.equal((await a.request('instance/close', { instance: root })).result.outcome, 'ok');
  // opencode deletes the session: it answers for it as for one that never existed, and so does the adapter.
  const again = await a.request('instance/turn', { instance: root, input: 'hello' });
  assert.deepEqual([again.result.outcome, again.result.reason, again.result.inferred], ['denied', 'instance_unknown', undefined]);
  assert.equal((await a.request('instance/close', { instance: root })).result.reason, 'instance_unknown');
  assert.equal((await a.request('instance/turn', { instance: 'ses_nope', input: 'x' })).result.reason, 'instance_unknown');
  const obs = (await a.request('state/observe')).result.observed;
  assert.deepEqual(obs.instances, []);
  assert.equal(obs.inferred, undefined);
  await a.close();
});

test('restart on the same store: sessions and children come back, deleted ones stay gone', async () => {
  const store = tempDir('restart');
  const a = startAdapter({ store });
  await a.initialize();
  const root = (await a.request('instance/start', ROOT(1))).result.instance;
  const other = (await a.request('instance/start', ROOT(1))).result.instance;
  await a.request('instance/turn', { instance: root, input: 'SPAWN' });
  await a.request('instance/cancel', { instance: other });
  await a.close();
  const b = startAdapter({ store });
  await b.initialize();
  await b.request('host/configure', {});
  const obs = (await b.request('state/observe')).result.observed;
  const states = Object.fromEntries(obs.instances.map((i) => [i.id, i.state]));
  assert.equal(obs.instances.length, 2);
  assert.equal(states[root], 'completed');
  assert.equal(states[other], undefined);
  assert.ok(obs.instances.every((i) => i.inferred.includes('ceiling')));
  await b.close();
});

test('end of stdin stops opencode, with SIGKILL when it ignores SIGTERM', async () => {
  const store = tempDir('stop');
  const pidFile = join(store, 'fake.pid');
  const a = startAdapter({ store, extraEnv: { FAKE_IGNORE_SIGTERM: '1', FAKE_PID_FILE: pidFile } });
  await a.initialize();
  await a.request('host/configure', {});
  const pid = Number(readFileSync(pidFile, 'utf8'));
  assert.ok(alive(pid));
  const t0 = Date.now();
  assert.deepEqual(await a.close(), { code: 0, signal: null });
  assert.ok(Date.now() - t0 < 2000, 'stopped within the harness grace period');
  await new Promise((r) => setTimeout(r, 100));
  assert.ok(!alive(pid), 'fake opencode is gone');
});

test('SIGTERM to the adapter kills opencode at once', async () => {
  const store = tempDir('sigterm');
  const pidFile = join(store, 'fake.pid');
  const a = startAdapter({ store, extraEnv: { FAKE_IGNORE_SIGTERM: '1', FAKE_PID_FILE: pidFile } });
  await a.initialize();
  await a.request('host/configure', {});
  const pid = Number(readFileSync(pidFile, 'utf8'));
  a.child.kill('SIGTERM');
  await a.exited;
  await new Promise((r) => setTimeout(r, 100));
  assert.ok(!alive(pid));
});

test('a turn opencode starts late (loaded machine) is waited for, not reported as a model failure', async () => {
  const store = tempDir('slow');
  const a = startAdapter({ store, extraEnv: { OPENCODE_ADAPTER_TURN_TIMEOUT_MS: '15000', FAKE_SLOW_START_MS: '6000' } });
  try {
    await a.initialize();
    const root = (await a.request('instance/start', ROOT(1))).result.instance;
    const t0 = Date.now();
    const turn = await a.request('instance/turn', { instance: root, input: 'SLOWSTART hello' });
    assert.deepEqual(turn.result.turn, { reply: 'message', text: 'echo: SLOWSTART hello' });
    assert.ok(Date.now() - t0 >= 6000);
    // A prompt opencode ran (busy) and left without any answer is still reported, without waiting for the deadline.
    const t1 = Date.now();
    const none = await a.request('instance/turn', { instance: root, input: 'NOANSWER' });
    assert.equal(none.result.turn.reply, 'model_failed');
    assert.ok(Date.now() - t1 < 10000);
  } finally {
    a.child.kill('SIGTERM');
  }
});

test('an opencode that exits before it listens (its port taken) is started again on another port, at most three times in all', async () => {
  const { writeFileSync } = await import('node:fs');
  const { join } = await import('node:path');
  for (const [failures, configured] of [[2, true], [3, false]]) {
    const store = tempDir(`failstart${failures}`);
    const counter = join(store, 'fail-starts');
    writeFileSync(counter, String(failures));
    const a = startAdapter({ store, extraEnv: { FAKE_FAIL_STARTS: counter } });
    await a.initialize();
    const r = await a.request('host/configure', {});
    if (configured) {
      assert.equal(r.result.outcome, 'ok');
      assert.match(a.stderr, /starting it again on another port \(attempt 3 of 3\)/);
    } else {
      // Control: a start that keeps failing is still an error, not hidden.
      assert.match(r.error.message, /exited before it was ready/);
    }
    await a.close();
  }
});

test('a waiting turn looks again when opencode reports a change, not every 100 ms; without an event stream it polls and still finishes', async () => {
  const { readFileSync: read, existsSync } = await import('node:fs');
  const { join } = await import('node:path');
  const seen = {};
  for (const events of [true, false]) {
    const store = tempDir(`events-${events}`);
    // No fallback look within the test: with events, only opencode's events can end the wait.
    const a = startAdapter({ store, extraEnv: { OPENCODE_ADAPTER_POLL_FALLBACK_MS: '60000', ...(events ? {} : { FAKE_NO_EVENTS: '1' }) } });
    const pollFile = join(store, 'opencode', 'workspace', 'fake-status-polls.txt');
    const polls = () => (existsSync(pollFile) ? read(pollFile, 'utf8').split('\n').filter(Boolean).length : 0);
    try {
      await a.initialize();
      const root = (await a.request('instance/start', ROOT(1))).result.instance;
      const before = polls();
      const t0 = Date.now();
      const turn = await a.request('instance/turn', { instance: root, input: 'SLOWTURN hello' });
      assert.deepEqual(turn.result.turn, { reply: 'message', text: 'echo: SLOWTURN hello' });
      assert.ok(Date.now() - t0 < 30000, 'the turn ended on opencode\'s event, not on the 60 s fallback');
      seen[events] = polls() - before;
    } finally {
      a.child.kill('SIGTERM');
    }
  }
  // A 3 s turn: with events, the first look and one per event (busy, the answer stored).
  assert.ok(seen.true <= 4, `${seen.true} status polls with the event stream open`);
  // Control: the same turn without an event stream is polled every 100 ms.
  assert.ok(seen.false >= 2 * seen.true + 2, `${seen.false} status polls without an event stream, ${seen.true} with`);
});

// The adapter end to end over stdio, as the harness runs it, against the fake qwen (no Qwen Code needed): node --test harness/adapters/qwen-code/test/*.test.mjs

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, readFileSync, readdirSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { digestEvents, turnReport, childrenOf } from '../lib/mapping.mjs';
import { qwenToolName } from '../lib/mcp.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const ADAPTER = join(HERE, '..', 'adapter.mjs');
const FAKE = join(HERE, 'fake-qwen.mjs');

function startAdapter(store, log, extraEnv = {}) {
  const env = {
    PATH: process.env.PATH,
    QWEN_CODE_ADAPTER_BIN: `${process.execPath} ${FAKE}`,
    QWEN_CODE_ADAPTER_FAKE_LOG: log,
    // Leaked into the adapter's own environment: must not reach qwen.
    OPENAI_API_KEY: 'a-real-key',
    OPENAI_BASE_URL: 'https://api.openai.com/v1',
    DASHSCOPE_API_KEY: 'another-real-key',
    ...extraEnv,
  };
  const child = spawn(process.execPath, [ADAPTER], { env, stdio: ['pipe', 'pipe', 'pipe'] });
  const waiters = new Map();
  let buffer = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk) => {
    buffer += chunk;
    let i;
    while ((i = buffer.indexOf('\n')) >= 0) {
      const message = JSON.parse(buffer.slice(0, i)); // every stdout line must be JSON
      buffer = buffer.slice(i + 1);
      if (waiters.has(message.id)) waiters.get(message.id)(message);
    }
  });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  let next = 1;
  const exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    child,
    get stderr() { return stderr; },
    request(method, params) {
      const id = next++;
      const answer = new Promise((resolve) => waiters.set(id, resolve));
      child.stdin.write(JSON.stringify({ jsonrpc: '2.0', id, method, ...(params ? { params } : {}) }) + '\n');
      return answer;
    },
    async initialize() {
      return this.request('initialize', { protocol_version: '1.0', environment: { model_endpoint: 'http://127.0.0.1:9', mcp_servers: [], store_dir: store, clock: 'harness' } });
    },
    close() { child.stdin.end(); return exited; },
  };
}

const root = (depth, extra = {}) => ({
  role: 'lead', sandbox: { 'workspace-write': { writable_roots: ['/w/repo'], network: false } },
  approval_policy: 'never', cwd: '/w/repo', delegation_depth: depth, tools: [], ...extra,
});

const invocations = (log) => (existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n').map((l) => JSON.parse(l)) : []);

function files(dir) {
  const out = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...files(path));
    else out.push(path);
  }
  return out;
}

/** Whether a process still runs (a zombie, killed but not yet reaped, does not). */
const alive = (pid) => {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
};

test('a root is the adapter\'s record until its first turn; an allowed spawn is the subagent Qwen Code\'s store records', async () => {
  const store = mkdtempSync(join(tmpdir(), 'qwen-adapter-'));
  const log = join(store, 'fake.log');
  const adapter = startAdapter(store, log);
  const init = await adapter.initialize();
  assert.deepEqual(init.result.capabilities, ['nested-delegation', 'restart', 'mcp']);
  assert.equal((await adapter.request('host/configure', {})).result.outcome, 'ok');
  const started = (await adapter.request('instance/start', root(1))).result;
  assert.equal(started.outcome, 'ok');
  assert.deepEqual(started.inferred, ['effective']);
  assert.equal(invocations(log).length, 0, 'no qwen run (and so no model request) at start');
  const before = (await adapter.request('state/observe')).result.observed.instances;
  assert.deepEqual(before.map((i) => [i.state, i.inferred]), [['running', ['ceiling', 'state']]]);

  const turn = (await adapter.request('instance/turn', { instance: started.instance, input: 'SPAWN:worker' })).result;
  assert.equal(turn.turn.reply, 'spawn');
  assert.deepEqual(turn.turn.spawn.outcome, 'ok');
  assert.equal(turn.turn.spawn.instance, 'worker-call_harness_1', 'Qwen Code\'s agentId');
  const [run] = invocations(log);
  assert.deepEqual(run.argv.slice(run.argv.indexOf('--session-id'), run.argv.indexOf('--session-id') + 2), ['--session-id', started.instance]);
  assert.ok(run.argv.includes('--allowed-tools') && run.argv[run.argv.indexOf('--allowed-tools') + 1] === 'agent');
  assert.equal(run.argv[run.argv.indexOf('--max-subagent-depth') + 1], '1');
  assert.equal(run.argv[run.argv.indexOf('--approval-mode') + 1], 'default');

  // A later turn resumes the session Qwen Code stored.
  await adapter.request('instance/turn', { instance: started.instance, input: 'hello' });
  const second = invocations(log)[1];
  assert.equal(second.argv[second.argv.indexOf('--resume') + 1], started.instance);
  assert.equal(await adapter.close(), 0);

  // After a restart the instances come back from the adapter's record and Qwen Code's store.
  const again = startAdapter(store, log);
  await again.initialize();
  const after = (await again.request('state/observe')).result.observed.instances;
  assert.deepEqual(after.map((i) => [i.id, i.state, i.parent]).sort(), [
    [started.instance, 'completed', undefined],
    ['worker-call_harness_1', 'completed', started.instance],
  ].sort());
  // The worker role is a Qwen Code subagent definition that keeps its parent's approval mode.
  const agent = readFileSync(join(store, 'qwen-code/home/.qwen/agents/worker.md'), 'utf8');
  assert.match(agent, /^name: worker$/m);
  assert.match(agent, /^approvalMode: default$/m);
  await again.close();
});

test('depth 0 removes the agent tool: the spawn is denied with Qwen Code\'s refusal, its policy reason marked inferred', async () => {
  const store = mkdtempSync(join(tmpdir(), 'qwen-adapter-'));
  const log = join(store, 'fake.log');
  const adapter = startAdapter(store, log);
  await adapter.initialize();
  const { instance } = (await adapter.request('instance/start', root(0))).result;
  const turn = (await adapter.request('instance/turn', { instance, input: 'SPAWN:worker' })).result;
  assert.equal(turn.turn.spawn.outcome, 'denied');
  assert.equal(turn.turn.spawn.reason, 'policy_denied');
  assert.match(turn.turn.spawn.detail, /not found in registry/);
  assert.deepEqual(turn.turn.spawn.inferred, ['reason'], 'Qwen Code says "not found", not why: the policy is the adapter\'s reading');
  const [run] = invocations(log);
  assert.equal(run.argv[run.argv.indexOf('--exclude-tools') + 1], 'agent');
  assert.ok(!run.argv.includes('--max-subagent-depth'));
  const observed = (await adapter.request('state/observe')).result.observed.instances;
  assert.equal(observed.length, 1, 'no child');
  await adapter.close();
});

test('qwen runs isolated in the store: its home, XDG folders, temporary files and API settings are the store\'s and the harness\'s', async () => {
  // The caller's own HOME and TMPDIR are folders beside the store: nothing may be written there.
  const sandbox = mkdtempSync(join(tmpdir(), 'qwen-adapter-'));
  const store = join(sandbox, 'store');
  const callerHome = join(sandbox, 'home');
  const callerTmp = join(sandbox, 'tmp');
  for (const dir of [store, callerHome, callerTmp]) mkdirSync(dir);
  const log = join(store, 'fake.log');
  const adapter = startAdapter(store, log, { HOME: callerHome, TMPDIR: callerTmp, XDG_CACHE_HOME: join(callerHome, '.cache') });
  await adapter.initialize();
  const { instance } = (await adapter.request('instance/start', root(1))).result;
  await adapter.request('instance/turn', { instance, input: 'SPAWN:worker' });
  await adapter.close();
  const [run] = invocations(log);
  const base = join(store, 'qwen-code');
  assert.equal(run.env.HOME, join(base, 'home'));
  assert.equal(run.env.TMPDIR, join(base, 'tmp'));
  for (const key of ['XDG_CONFIG_HOME', 'XDG_DATA_HOME', 'XDG_STATE_HOME', 'XDG_CACHE_HOME']) assert.ok(run.env[key].startsWith(base), key);
  assert.equal(run.env.OPENAI_BASE_URL, 'http://127.0.0.1:9/v1');
  assert.equal(run.env.OPENAI_API_KEY, 'delegation-harness', 'the caller\'s key never reaches qwen');
  assert.equal(run.env.DASHSCOPE_API_KEY, undefined);
  assert.equal(run.cwd, join(base, 'fs/w/repo'));
  const settings = JSON.parse(readFileSync(join(base, 'home/.qwen/settings.json'), 'utf8'));
  assert.equal(settings.memory.enableManagedAutoMemory, false);
  assert.equal(settings.privacy.usageStatisticsEnabled, false);
  assert.equal(settings.model.generationConfig.customHeaders['x-delegation-instance'], '${session_id}');
  assert.deepEqual(files(sandbox).filter((p) => !p.startsWith(store + '/')), [], 'written outside the store');
  assert.ok(files(base).some((p) => p.endsWith('.meta.json')), 'positive control: the run wrote its store');
});

test('a scripted API failure is model_failed, a declined call is denied, and methods Qwen Code lacks are unsupported', async () => {
  const store = mkdtempSync(join(tmpdir(), 'qwen-adapter-'));
  const adapter = startAdapter(store, join(store, 'fake.log'));
  await adapter.initialize();
  const { instance } = (await adapter.request('instance/start', root(1))).result;
  const failed = (await adapter.request('instance/turn', { instance, input: 'FAIL' })).result;
  assert.equal(failed.turn.reply, 'model_failed');
  assert.match(failed.turn.detail, /529/);
  const declined = (await adapter.request('instance/turn', { instance, input: 'CALL:edit' })).result;
  assert.deepEqual(declined.tool_call, { tool: 'edit', outcome: 'denied', reason: 'policy_denied' });
  for (const method of ['instance/delegate', 'instance/close', 'instance/fork', 'instance/tool_call']) {
    assert.equal((await adapter.request(method, { instance })).error.code, -32601, method);
  }
  // A spawn within the ceiling runs unasked under on-request too: the roles reach Qwen Code in the control protocol's initialize.
  const asking = (await adapter.request('instance/start', root(1, { approval_policy: 'on-request' }))).result;
  const spawned = (await adapter.request('instance/turn', { instance: asking.instance, input: 'SPAWN:worker' })).result;
  assert.equal(spawned.turn.spawn.outcome, 'ok');
  const granular = await adapter.request('instance/start', root(1, { approval_policy: { granular: {} } }));
  assert.equal(granular.error.code, -32001);
  await adapter.close();
});

test('under on-request a call that asks waits for a person over the control protocol: allow runs it, deny refuses it, each answer once', async () => {
  const store = mkdtempSync(join(tmpdir(), 'qwen-adapter-'));
  const log = join(store, 'fake.log');
  const adapter = startAdapter(store, log);
  await adapter.initialize();
  const { instance } = (await adapter.request('instance/start', root(1, { approval_policy: 'on-request' }))).result;
  const asked = (await adapter.request('instance/turn', { instance, input: 'CALL:edit' })).result;
  assert.deepEqual(asked.tool_call, { tool: 'edit', outcome: 'pending_approval', approval: 'a-1' });
  assert.ok(invocations(log)[0].argv.includes('stream-json'), 'the run that asks reads stream-json input');
  const pending = (await adapter.request('state/observe')).result.observed;
  assert.deepEqual(pending.approvals.map((a) => [a.id, a.state]), [['a-1', 'pending']]);
  assert.deepEqual(pending.inferred, ['approvals']);
  // Another turn while the question waits is refused, not started beside it.
  assert.equal((await adapter.request('instance/turn', { instance, input: 'CALL:edit' })).result.outcome, 'denied');
  const allowed = (await adapter.request('approval/answer', { request: 'a-1', decision: 'allow' })).result;
  assert.deepEqual(allowed.tool_call, { tool: 'edit', outcome: 'executed', approval: 'a-1', result: 'ran edit' });
  const again = (await adapter.request('approval/answer', { request: 'a-1', decision: 'deny' })).result;
  assert.equal(again.reason, 'event_replayed');
  (await adapter.request('instance/turn', { instance, input: 'CALL:edit' }));
  const refused = (await adapter.request('approval/answer', { request: 'a-2', decision: 'deny' })).result;
  assert.equal(refused.outcome, 'denied');
  assert.deepEqual(refused.tool_call, { tool: 'edit', outcome: 'denied', reason: 'policy_denied', approval: 'a-2' });
  const settled = (await adapter.request('state/observe')).result.observed.approvals;
  assert.deepEqual(settled.map((a) => [a.id, a.state, a.decision]), [['a-1', 'dispatched', 'allow'], ['a-2', 'decided', 'deny']]);
  // Control: under never nobody is asked: headless, Qwen Code declines the call itself.
  const never = (await adapter.request('instance/start', root(1))).result;
  const declined = (await adapter.request('instance/turn', { instance: never.instance, input: 'CALL:edit' })).result;
  assert.deepEqual(declined.tool_call, { tool: 'edit', outcome: 'denied', reason: 'policy_denied' });
  assert.equal((await adapter.request('state/observe')).result.observed.approvals.length, 2);
  // A question whose process is gone (the adapter restarted) is no longer listed and cannot be answered.
  (await adapter.request('instance/turn', { instance, input: 'CALL:edit' }));
  assert.deepEqual((await adapter.request('state/observe')).result.observed.approvals.map((a) => [a.id, a.state]).at(-1), ['a-3', 'pending']);
  await adapter.close();
  const restarted = startAdapter(store, log);
  await restarted.initialize();
  const after = (await restarted.request('state/observe')).result.observed;
  assert.deepEqual(after.approvals.map((a) => a.id), ['a-1', 'a-2'], 'the gone question is dropped, the answered ones stay');
  assert.deepEqual(after.inferred, ['approvals']);
  const runsBefore = invocations(log).length;
  const lost = (await restarted.request('approval/answer', { request: 'a-3', decision: 'allow' })).result;
  assert.equal(lost.outcome, 'denied');
  assert.equal(lost.reason, 'instance_unknown');
  assert.deepEqual(lost.inferred, ['reason']);
  assert.match(lost.detail, /ended with the qwen process/);
  assert.equal(invocations(log).length, runsBefore, 'nothing is started for a gone question');
  await restarted.close();
});

test('roles become Qwen Code agents: a read-only role loses the writing tools, a role whose tools nobody serves is refused', async () => {
  const store = mkdtempSync(join(tmpdir(), 'qwen-adapter-'));
  const adapter = startAdapter(store, join(store, 'fake.log'));
  await adapter.initialize();
  assert.equal((await adapter.request('host/configure', { roles: { reviewer: { sandbox: 'read-only' } } })).result.outcome, 'ok');
  const reviewer = readFileSync(join(store, 'qwen-code', 'home', '.qwen', 'agents', 'reviewer.md'), 'utf8');
  assert.match(reviewer, /disallowedTools:\n  - run_shell_command\n  - edit\n  - write_file\n  - notebook_edit/);
  assert.doesNotMatch(reviewer, /^tools:/m);
  // No MCP server serves the role's tools: an empty list would mean every tool, so the role is refused.
  const unserved = await adapter.request('host/configure', { roles: { scout: { tools: ['read_notes'] } } });
  assert.equal(unserved.error.code, -32001);
  await adapter.close();
});

test('a hung turn is killed with its whole process group, even a qwen that ignores SIGTERM', async () => {
  const store = mkdtempSync(join(tmpdir(), 'qwen-adapter-'));
  const log = join(store, 'fake.log');
  const adapter = startAdapter(store, log, { QWEN_CODE_ADAPTER_TURN_TIMEOUT_MS: '1500' });
  await adapter.initialize();
  const { instance } = (await adapter.request('instance/start', root(1))).result;
  const hung = await adapter.request('instance/turn', { instance, input: 'HANG' });
  assert.equal(hung.error.code, -32002);
  assert.match(hung.error.message, /did not finish/);
  const [run] = invocations(log);
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(alive(run.pid), false, 'the hung qwen is gone');
  await adapter.close();
});

test('an adapter stopped with SIGTERM during a turn kills the running qwen', async () => {
  const store = mkdtempSync(join(tmpdir(), 'qwen-adapter-'));
  const log = join(store, 'fake.log');
  const adapter = startAdapter(store, log);
  await adapter.initialize();
  const { instance } = (await adapter.request('instance/start', root(1))).result;
  adapter.request('instance/turn', { instance, input: 'HANG' });
  for (let i = 0; i < 100 && invocations(log).length === 0; i++) await new Promise((r) => setTimeout(r, 50));
  const [run] = invocations(log);
  assert.ok(alive(run.pid));
  adapter.child.kill('SIGTERM');
  await new Promise((r) => adapter.child.once('exit', r));
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(alive(run.pid), false, 'qwen was killed with the adapter');
});

test('Qwen Code\'s MCP tool names: as is when provider-safe, else sanitised with its hash (as 0.24.4 offered them)', () => {
  assert.equal(qwenToolName('harness', 'notes_read'), 'mcp__harness__notes_read');
  assert.equal(qwenToolName('harness', 'notes.read'), 'mcp__harness__notes_read_1k3gxzc');
  assert.equal(qwenToolName('harness', 'x'.repeat(80)), `mcp__harness__${'x'.repeat(41)}_1wuf6e5`);
});

test('stream-json mapping: a nested subagent\'s parent, a refusal Qwen Code gave no reason for, an MCP tool named back', () => {
  const agents = new Map([
    ['worker-call_1', { session: 's', meta: { agentId: 'worker-call_1', agentType: 'worker', toolUseId: 'call_1', parentAgentId: null, depth: 0 } }],
    ['worker-call_2', { session: 's', meta: { agentId: 'worker-call_2', agentType: 'worker', toolUseId: 'call_2', parentAgentId: 'worker-call_1', depth: 1 } }],
    ['worker-call_3', { session: 'other', meta: { agentId: 'worker-call_3', agentType: 'worker', toolUseId: 'call_3', parentAgentId: null, depth: 0 } }],
  ]);
  assert.deepEqual(childrenOf(agents, 's').map((c) => [c.id, c.parent]), [['worker-call_1', 's'], ['worker-call_2', 'worker-call_1']]);
  const refused = digestEvents([
    { type: 'assistant', parent_tool_use_id: null, message: { content: [{ type: 'tool_use', id: 'c9', name: 'agent', input: {} }] } },
    { type: 'user', parent_tool_use_id: null, message: { content: [{ type: 'tool_result', tool_use_id: 'c9', is_error: true, content: 'something odd' }] } },
    { type: 'result', is_error: false, result: 'x' },
  ]);
  const report = turnReport(refused, {});
  assert.equal(report.turn.spawn.outcome, 'denied');
  assert.deepEqual(report.turn.spawn.inferred, ['reason']);
  const mcp = digestEvents([
    { type: 'assistant', parent_tool_use_id: null, message: { content: [{ type: 'tool_use', id: 'c1', name: 'mcp__harness__notes_read', input: {} }] } },
    { type: 'user', parent_tool_use_id: null, message: { content: [{ type: 'tool_result', tool_use_id: 'c1', is_error: false, content: [{ type: 'text', text: 'notes' }] }] } },
    { type: 'result', is_error: false, result: 'x' },
  ]);
  const ran = turnReport(mcp, { nameBack: (n) => (n === 'mcp__harness__notes_read' ? 'notes.read' : n) });
  assert.deepEqual(ran.tool_call, { tool: 'notes.read', outcome: 'executed', result: 'notes' });
  // A deny-rule refusal of a tool the read-only mapping removed is read_only_context, the adapter's reading (inferred);
  // the same refusal outside read-only stays Qwen Code's policy_denied.
  const ruled = digestEvents([
    { type: 'assistant', parent_tool_use_id: null, message: { content: [{ type: 'tool_use', id: 'c2', name: 'write_file', input: {} }] } },
    { type: 'user', parent_tool_use_id: null, message: { content: [{ type: 'tool_result', tool_use_id: 'c2', is_error: true, content: 'Qwen Code requires permission to use "write_file", but that permission was declined. Matching deny rule: "edit".' }] } },
    { type: 'result', is_error: false, result: 'x' },
  ]);
  const readOnly = turnReport(ruled, { removedForReadOnly: (n) => n === 'write_file' });
  assert.deepEqual(readOnly.tool_call, { tool: 'write_file', outcome: 'denied', reason: 'read_only_context' });
  assert.deepEqual(readOnly.inferred, ['tool_call']);
  assert.deepEqual(turnReport(ruled, {}).tool_call, { tool: 'write_file', outcome: 'denied', reason: 'policy_denied' });
});

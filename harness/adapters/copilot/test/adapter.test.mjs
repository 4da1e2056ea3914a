// The adapter end to end over stdio, as the harness runs it, against the fake copilot (no Copilot CLI needed): node --test harness/adapters/copilot/test/*.test.mjs

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync as makeTemp, readFileSync, readdirSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { digestEvents, turnReport, childrenOf } from '../lib/mapping.mjs';
import { copilotToolName } from '../lib/mcp.mjs';
import { isolatedEnv } from '../lib/copilot.mjs';
import { eligibility, asksPerson } from '../adapter.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
// Every store and fake-copilot log a test makes, removed when the tests end.
const made = [];
const mkdtempSync = (prefix) => {
  const dir = makeTemp(prefix);
  made.push(dir, `${dir}.log`);
  return dir;
};
after(() => { for (const path of made) rmSync(path, { recursive: true, force: true }); });
const ADAPTER = join(HERE, '..', 'adapter.mjs');
const FAKE = join(HERE, 'fake-copilot.mjs');

function startAdapter(store, log, extraEnv = {}) {
  const env = {
    PATH: process.env.PATH,
    COPILOT_ADAPTER_BIN: `${process.execPath} ${FAKE}`,
    COPILOT_ADAPTER_FAKE_LOG: log,
    // Leaked into the adapter's own environment: must not reach copilot.
    GITHUB_TOKEN: 'a-real-token',
    COPILOT_PROVIDER_BASE_URL: 'https://api.example.com',
    COPILOT_ALLOW_ALL: 'true',
    DELEGATION_STORE_DIR: store,
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
    get stderr() { return stderr; },
    request(method, params) {
      const id = next++;
      const answer = new Promise((resolve) => waiters.set(id, resolve));
      child.stdin.write(JSON.stringify({ jsonrpc: '2.0', id, method, ...(params ? { params } : {}) }) + '\n');
      return answer;
    },
    async initialize(mcp = []) {
      return this.request('initialize', { protocol_version: '1.0', environment: { model_endpoint: 'http://127.0.0.1:9', mcp_servers: mcp, store_dir: store, clock: 'harness' } });
    },
    close() { child.stdin.end(); return exited; },
  };
}

const root = (depth, sandbox = { 'workspace-write': { writable_roots: ['/w/repo'], network: false } }) => ({
  role: 'lead', sandbox, approval_policy: 'never', cwd: '/w/repo', delegation_depth: depth, tools: [],
});

const invocations = (log) => (existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n').map((l) => JSON.parse(l)) : []);
const arg = (run, name) => {
  const joined = run.argv.find((a) => a.startsWith(`${name}=`));
  if (joined) return joined.slice(name.length + 1);
  const i = run.argv.indexOf(name);
  return i >= 0 ? run.argv[i + 1] : undefined;
};

function files(dir) {
  const out = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...files(path));
    else out.push(path);
  }
  return out;
}

test('Copilot runs without its persisted MCP tool cache unless COPILOT_ADAPTER_MCP_TOOL_CACHE=on, and no caller COPILOT_* reaches it', () => {
  const store = makeTemp(join(tmpdir(), 'copilot-env-'));
  try {
    const off = isolatedEnv(store, 'http://127.0.0.1:9/', null, { PATH: '/bin', COPILOT_MCP_TOOL_CACHE: 'true', GITHUB_TOKEN: 'x' });
    assert.equal(off.COPILOT_MCP_TOOL_CACHE, 'false');
    assert.equal(off.GITHUB_TOKEN, undefined);
    const on = isolatedEnv(store, 'http://127.0.0.1:9/', null, { PATH: '/bin', COPILOT_ADAPTER_MCP_TOOL_CACHE: 'on', COPILOT_MCP_TOOL_CACHE: 'true' });
    assert.equal(on.COPILOT_MCP_TOOL_CACHE, undefined);
  } finally {
    rmSync(store, { recursive: true, force: true });
  }
});

test('a root is a Copilot session under the instance id; an allowed spawn is its subagent, named by the task call that started it', async () => {
  const store = mkdtempSync(join(tmpdir(), 'copilot-adapter-'));
  const log = `${store}.log`;
  const adapter = startAdapter(store, log);
  const init = await adapter.initialize();
  assert.deepEqual(init.result.capabilities, ['nested-delegation', 'restart', 'mcp']);
  assert.equal(init.result.host.name, 'copilot');
  assert.equal((await adapter.request('host/configure', { roles: {} })).result.outcome, 'ok');
  const started = (await adapter.request('instance/start', root(1))).result;
  assert.equal(started.outcome, 'ok');
  assert.deepEqual(started.inferred, ['effective']);
  assert.equal(invocations(log).length, 0, 'a start makes no run and no model request');
  let observed = (await adapter.request('state/observe')).result.observed;
  assert.equal(observed.instances[0].state, 'running');
  assert.ok(observed.instances[0].inferred.includes('state'), 'no session in Copilot\'s store yet: the state is the adapter\'s');

  const turn = (await adapter.request('instance/turn', { instance: started.instance, input: 'go SPAWN:worker' })).result;
  assert.equal(turn.turn.reply, 'spawn');
  assert.equal(turn.turn.spawn.outcome, 'ok');
  const child = turn.turn.spawn.instance;
  assert.equal(child, 'call_harness_1', 'the child is the task call Copilot recorded as its toolCallId');
  const [run] = invocations(log);
  assert.equal(arg(run, '--session-id'), started.instance);
  assert.equal(arg(run, '--prompt'), 'go SPAWN:worker');
  assert.equal(arg(run, '--excluded-tools'), undefined, 'depth 1 keeps the task tool');
  const settings = JSON.parse(readFileSync(join(store, 'copilot', 'home', '.copilot', 'settings.json'), 'utf8'));
  assert.deepEqual(settings, { subagents: { maxDepth: 1 } }, 'the depth is Copilot\'s own nesting limit');
  assert.ok(run.argv.includes('--allow-all-tools'));
  observed = (await adapter.request('state/observe')).result.observed;
  const byId = Object.fromEntries(observed.instances.map((i) => [i.id, i]));
  assert.equal(byId[started.instance].state, 'completed');
  assert.ok(!byId[started.instance].inferred.includes('state'));
  assert.equal(byId[child].parent, started.instance);
  assert.equal(byId[child].state, 'completed');
  assert.ok(!byId[child].inferred.includes('state'), 'read from subagent.completed in Copilot\'s store');
  assert.equal(byId[child].ceiling.delegation_depth, 0);
  await adapter.close();

  // A restart finds the same instances in the same store.
  const again = startAdapter(store, log);
  await again.initialize();
  await again.request('host/configure', { roles: {} });
  const after = (await again.request('state/observe')).result.observed;
  assert.deepEqual(after.instances.map((i) => i.id).sort(), [started.instance, child].sort());
  await again.close();
});

test('depth 0 excludes the task tool; the refusal is Copilot\'s "does not exist", whose policy reason is the adapter\'s reading', async () => {
  const store = mkdtempSync(join(tmpdir(), 'copilot-adapter-'));
  const log = `${store}.log`;
  const adapter = startAdapter(store, log);
  await adapter.initialize();
  await adapter.request('host/configure', { roles: {} });
  const started = (await adapter.request('instance/start', root(0))).result;
  const turn = (await adapter.request('instance/turn', { instance: started.instance, input: 'go SPAWN:worker' })).result;
  assert.equal(turn.turn.spawn.outcome, 'denied');
  assert.equal(turn.turn.spawn.reason, 'policy_denied');
  assert.deepEqual(turn.turn.spawn.inferred, ['reason']);
  assert.match(turn.turn.spawn.detail, /does not exist/);
  assert.equal(arg(invocations(log)[0], '--excluded-tools'), 'task');
  const observed = (await adapter.request('state/observe')).result.observed;
  assert.equal(observed.instances.length, 1);
  await adapter.close();
});

test('COPILOT_ADAPTER_DEPTH0=deny expresses depth 0 as the deny rule `task` instead (for reproducing finding 1), and the fake, like Copilot, starts the child anyway', async () => {
  const store = mkdtempSync(join(tmpdir(), 'copilot-adapter-'));
  const log = `${store}.log`;
  const adapter = startAdapter(store, log, { COPILOT_ADAPTER_DEPTH0: 'deny' });
  await adapter.initialize();
  await adapter.request('host/configure', { roles: {} });
  const started = (await adapter.request('instance/start', root(0))).result;
  const turn = (await adapter.request('instance/turn', { instance: started.instance, input: 'go SPAWN:worker' })).result;
  const [run] = invocations(log);
  assert.ok(run.argv.includes('--deny-tool=task'));
  assert.equal(arg(run, '--excluded-tools'), undefined);
  // The adapter reports what Copilot's events say: a subagent started.
  assert.equal(turn.turn.spawn.outcome, 'ok');
  await adapter.close();
});

test('copilot runs isolated in the store, offline, against the harness\'s endpoint; the caller\'s tokens and Copilot settings do not reach it', async () => {
  const store = mkdtempSync(join(tmpdir(), 'copilot-adapter-'));
  const log = `${store}.log`;
  const adapter = startAdapter(store, log);
  await adapter.initialize();
  await adapter.request('host/configure', { roles: { worker: { sandbox: 'read-only' } } });
  const started = (await adapter.request('instance/start', root(1, 'read-only'))).result;
  await adapter.request('instance/turn', { instance: started.instance, input: 'hello' });
  await adapter.close();
  for (const run of invocations(log)) {
    for (const key of ['HOME', 'TMPDIR', 'XDG_CONFIG_HOME', 'XDG_CACHE_HOME', 'XDG_DATA_HOME', 'XDG_STATE_HOME', 'COPILOT_HOME']) {
      assert.ok(run.env[key].startsWith(store), `${key}=${run.env[key]} is outside the store`);
    }
    assert.ok(run.cwd.startsWith(store));
    assert.equal(run.env.COPILOT_PROVIDER_BASE_URL, 'http://127.0.0.1:9/v1');
    assert.equal(run.env.COPILOT_PROVIDER_API_KEY, 'delegation-harness');
    assert.equal(run.env.COPILOT_OFFLINE, 'true');
    assert.equal(run.env.COPILOT_AUTO_UPDATE, 'false');
    assert.equal(run.env.GITHUB_TOKEN, undefined);
    assert.equal(run.env.COPILOT_ALLOW_ALL, undefined);
    assert.ok(arg(run, '--log-dir').startsWith(store));
    // read-only: Copilot's permission kinds for writing files and running commands are denied.
    assert.ok(run.argv.includes('--deny-tool=shell'));
    assert.ok(run.argv.includes('--deny-tool=write'));
  }
  const agent = readFileSync(join(store, 'copilot', 'home', '.copilot', 'agents', 'worker.agent.md'), 'utf8');
  assert.match(agent, /tools: \["view","grep","glob","task","read_agent","list_agents"\]/);
  assert.ok(files(store).every((f) => f.startsWith(store)));
});

test('a denied or missing tool is Copilot\'s refusal; a model failure is model_failed; methods Copilot lacks are unsupported', async () => {
  const store = mkdtempSync(join(tmpdir(), 'copilot-adapter-'));
  const adapter = startAdapter(store, `${store}.log`);
  await adapter.initialize();
  await adapter.request('host/configure', { roles: {} });
  const started = (await adapter.request('instance/start', root(1, 'read-only'))).result;
  const shell = (await adapter.request('instance/turn', { instance: started.instance, input: 'CALL:bash' })).result;
  assert.deepEqual(shell.tool_call, { tool: 'bash', outcome: 'denied', reason: 'policy_denied' });
  assert.equal(shell.inferred, undefined, 'Copilot said it was a permission rule');
  const view = (await adapter.request('instance/turn', { instance: started.instance, input: 'CALL:view' })).result;
  assert.deepEqual(view.tool_call, { tool: 'view', outcome: 'executed', result: 'ran view' });
  const failed = (await adapter.request('instance/turn', { instance: started.instance, input: 'FAIL' })).result;
  assert.equal(failed.turn.reply, 'model_failed');
  assert.match(failed.turn.detail, /503/);
  for (const method of ['instance/delegate', 'receipt/prepare', 'instance/close', 'instance/fork', 'fault/arm']) {
    assert.equal((await adapter.request(method, {})).error.code, -32601, method);
  }
  assert.equal((await adapter.request('approval/answer', {})).error.code, -32602, 'answered now, with its parameters checked');
  assert.equal((await adapter.request('host/configure', { auto_approve: true })).error.code, -32001);
  assert.equal((await adapter.request('instance/start', { ...root(1), approval_policy: { granular: { ask: [], deny: ['delegation'] } } })).error.code, -32001, 'Copilot cannot refuse delegation by a rule');
  await adapter.close();
});

test('event mapping: a grandchild\'s parent is the subagent whose turn called task; an unexplained refusal is inferred; MCP names map back', () => {
  const digest = digestEvents([
    { type: 'assistant.message', data: { content: '', toolRequests: [{ toolCallId: 'c1', name: 'task', arguments: {} }] } },
    { type: 'subagent.started', data: { toolCallId: 'c1', agentName: 'worker' }, agentId: 'a1' },
    { type: 'assistant.message', data: { content: '', parentToolCallId: 'c1', toolRequests: [{ toolCallId: 'c2', name: 'task', arguments: {} }] }, agentId: 'a1' },
    { type: 'subagent.started', data: { toolCallId: 'c2', agentName: 'worker' }, agentId: 'a2' },
    { type: 'subagent.completed', data: { toolCallId: 'c2' }, agentId: 'a2' },
    { type: 'result', exitCode: 0 },
  ]);
  assert.deepEqual(childrenOf(digest, 'root').map((c) => [c.id, c.parent, c.state]), [['c1', 'root', 'running'], ['c2', 'c1', 'completed']]);
  assert.equal(turnReport(digest).turn.spawn.instance, 'c1');

  const unexplained = digestEvents([
    { type: 'assistant.message', data: { content: '', toolRequests: [{ toolCallId: 'c3', name: 'task', arguments: {} }] } },
    { type: 'tool.execution_complete', data: { toolCallId: 'c3', success: false, error: { message: 'something else', code: 'failure' } } },
    { type: 'result', exitCode: 0 },
  ]);
  assert.deepEqual(turnReport(unexplained).turn.spawn.inferred, ['reason']);

  const removed = digestEvents([
    { type: 'assistant.message', data: { content: '', toolRequests: [{ toolCallId: 'c4', name: 'harness-notes-read', arguments: {} }] } },
    { type: 'tool.execution_complete', data: { toolCallId: 'c4', success: false, error: { message: "Tool 'harness-notes-read' does not exist.", code: 'failure' } } },
    { type: 'result', exitCode: 0 },
  ]);
  const report = turnReport(removed, { nameBack: (n) => (n === copilotToolName('harness', 'notes.read') ? 'notes.read' : n) });
  assert.deepEqual(report.tool_call, { tool: 'notes.read', outcome: 'denied', reason: 'no_such_tool' });
  assert.deepEqual(report.inferred, []);

  // As Copilot 1.0.102 words it when a resumed session's cached definition no longer matches (rs/164).
  const changed = digestEvents([
    { type: 'assistant.message', data: { content: '', toolRequests: [{ toolCallId: 'c5', name: 'harness-notes-read', arguments: {} }] } },
    { type: 'tool.execution_complete', data: { toolCallId: 'c5', success: false, error: { message: 'MCP tool catalog changed before tool "harness-notes-read" could be invoked: Cached MCP tool "notes.read" changed before it could be invoked', code: 'failure' } } },
    { type: 'result', exitCode: 0 },
  ]);
  const drift = turnReport(changed, { nameBack: (n) => (n === copilotToolName('harness', 'notes.read') ? 'notes.read' : n) });
  assert.deepEqual(drift.tool_call, { tool: 'notes.read', outcome: 'denied', reason: 'mcp_tool_changed' });
  assert.deepEqual(drift.inferred, []);
});

test('on-request: the root is Copilot\'s ACP session; writes run unasked, a call Copilot asks about waits for a person\'s answer, and a second answer is refused', async () => {
  const store = mkdtempSync(join(tmpdir(), 'copilot-adapter-'));
  const log = `${store}.log`;
  const adapter = startAdapter(store, log);
  await adapter.initialize();
  await adapter.request('host/configure', { roles: {} });
  const started = (await adapter.request('instance/start', { ...root(1), approval_policy: 'on-request' })).result;
  assert.equal(started.outcome, 'ok');
  const [acp] = invocations(log);
  assert.ok(acp.argv.includes('--acp'), 'a root that can ask a person runs as Copilot\'s ACP server');
  assert.ok(!acp.argv.includes('--output-format'));
  assert.ok(!acp.argv.includes('--allow-all-tools'));
  assert.ok(acp.argv.includes('--allow-tool=write'));
  assert.ok(existsSync(join(store, 'copilot', 'home', '.copilot', 'session-state', started.instance)), 'the instance id is the session ACP made');
  let observed = (await adapter.request('state/observe')).result.observed;
  assert.deepEqual(observed.instances[0].inferred, ['ceiling'], 'the session is in Copilot\'s store from the start');

  const write = (await adapter.request('instance/turn', { instance: started.instance, input: 'CALL:create' })).result;
  assert.deepEqual(write.tool_call, { tool: 'create', outcome: 'executed', result: 'ran create' });
  const shell = (await adapter.request('instance/turn', { instance: started.instance, input: 'CALL:bash' })).result;
  assert.equal(shell.tool_call.outcome, 'pending_approval');
  observed = (await adapter.request('state/observe')).result.observed;
  assert.equal(observed.approvals.length, 1);
  assert.equal(observed.approvals[0].state, 'pending');
  assert.deepEqual(observed.inferred, ['approvals'], 'Copilot keeps no approval records');
  assert.equal(observed.instances[0].state, 'running', 'waiting for the answer');
  const allowed = (await adapter.request('approval/answer', { request: shell.tool_call.approval, decision: 'allow' })).result;
  assert.deepEqual(allowed.tool_call, { tool: 'bash', outcome: 'executed', approval: shell.tool_call.approval, result: 'ran bash' });
  const again = (await adapter.request('approval/answer', { request: shell.tool_call.approval, decision: 'deny' })).result;
  assert.equal(again.reason, 'event_replayed');

  const second = (await adapter.request('instance/turn', { instance: started.instance, input: 'CALL:bash' })).result;
  const rejected = (await adapter.request('approval/answer', { request: second.tool_call.approval, decision: 'deny' })).result;
  assert.equal(rejected.outcome, 'denied');
  assert.deepEqual(rejected.tool_call, { tool: 'bash', outcome: 'denied', reason: 'policy_denied', approval: second.tool_call.approval });
  assert.equal(rejected.inferred, undefined, 'Copilot recorded the person\'s rejection');
  const third = (await adapter.request('instance/turn', { instance: started.instance, input: 'CALL:bash' })).result;
  await adapter.close();

  // After a restart Copilot's permission request is gone with its process; the session is loaded again.
  const restarted = startAdapter(store, log);
  await restarted.initialize();
  const lost = (await restarted.request('state/observe')).result.observed.approvals.map((a) => a.id);
  assert.ok(!lost.includes(third.tool_call.approval), 'Copilot holds no request of a process that ended');
  assert.ok(lost.includes(second.tool_call.approval), 'a decided request stays in the record');
  const gone = (await restarted.request('approval/answer', { request: third.tool_call.approval, decision: 'allow' })).result;
  assert.equal(gone.outcome, 'denied');
  assert.match(gone.detail, /ended with the copilot --acp process/);
  const later = (await restarted.request('instance/turn', { instance: started.instance, input: 'CALL:create' })).result;
  assert.equal(later.tool_call.outcome, 'executed');
  // A session ACP made that never had a prompt: Copilot cannot load it in a new process.
  const unprompted = (await restarted.request('instance/start', { ...root(1), approval_policy: 'untrusted' })).result;
  await restarted.close();
  const secondRestart = startAdapter(store, log);
  await secondRestart.initialize();
  const lostRoot = (await secondRestart.request('instance/turn', { instance: unprompted.instance, input: 'hello' })).result;
  assert.equal(lostRoot.outcome, 'denied');
  assert.equal(lostRoot.reason, 'instance_unknown');
  assert.match(lostRoot.detail, /^Copilot: .*not found/);
  assert.equal(lostRoot.inferred, undefined, 'Copilot\'s own words');
  await secondRestart.close();
});

test('a sealed MCP tool gets an allow rule where the eligibility table runs it, a deny rule where it refuses it, nothing where it asks', () => {
  const ww = { 'workspace-write': { writable_roots: ['/w/repo'], network: false } };
  assert.equal(eligibility('read', { sandbox: 'read-only', approval_policy: 'never' }), 'runs');
  assert.equal(eligibility('file-write', { sandbox: ww, approval_policy: 'on-request' }), 'runs');
  assert.equal(eligibility('file-write', { sandbox: ww, approval_policy: 'untrusted' }), 'ask');
  assert.equal(eligibility('file-write', { sandbox: 'read-only', approval_policy: 'on-request' }), 'read_only_context');
  assert.equal(eligibility('shell', { sandbox: 'read-only', approval_policy: 'untrusted' }), 'read_only_context');
  assert.equal(eligibility('generic', { sandbox: ww, approval_policy: 'on-request' }), 'ask');
  assert.equal(eligibility('mcp', { sandbox: 'full-access', approval_policy: 'never' }), 'policy_denied');
  assert.equal(eligibility('mcp', { sandbox: 'read-only', approval_policy: 'on-request' }), 'ask');
  assert.equal(eligibility('network', { sandbox: ww, approval_policy: 'on-request' }), 'policy_denied');
  assert.equal(eligibility('network', { sandbox: 'full-access', approval_policy: 'on-request' }), 'ask');
  // A granular policy: classes in deny are refused, in ask asked, the rest run.
  const granular = { granular: { ask: ['shell'], deny: ['mcp'] } };
  assert.equal(eligibility('mcp', { sandbox: ww, approval_policy: granular }), 'policy_denied');
  assert.equal(eligibility('shell', { sandbox: ww, approval_policy: granular }), 'ask');
  assert.equal(eligibility('generic', { sandbox: ww, approval_policy: granular }), 'runs');
  assert.equal(asksPerson({ approval_policy: granular }), true);
  assert.equal(asksPerson({ approval_policy: { granular: { ask: [], deny: [] } } }), false, 'nothing to ask: copilot -p');
  assert.equal(asksPerson({ approval_policy: 'never' }), false);
});

test('a call Copilot refused by a deny rule the adapter set for a read-only sandbox reports read_only_context, as the adapter\'s reading', () => {
  const denied = digestEvents([
    { type: 'assistant.message', data: { content: '', toolRequests: [{ toolCallId: 'c5', name: 'harness-write_file', arguments: {} }] } },
    { type: 'tool.execution_complete', data: { toolCallId: 'c5', success: false, error: { message: 'denied due to the following rules: `harness(write_file)`', code: 'denied' } } },
    { type: 'result', exitCode: 0 },
  ]);
  const nameBack = (n) => (n === 'harness-write_file' ? 'write_file' : n);
  const readOnly = turnReport(denied, { nameBack, denyRuleReason: () => 'read_only_context' });
  assert.deepEqual(readOnly.tool_call, { tool: 'write_file', outcome: 'denied', reason: 'read_only_context' });
  assert.deepEqual(readOnly.inferred, ['tool_call']);
  // Control: a deny rule for the policy keeps Copilot's own reason, not inferred.
  const policy = turnReport(denied, { nameBack, denyRuleReason: () => 'policy_denied' });
  assert.deepEqual(policy.tool_call, { tool: 'write_file', outcome: 'denied', reason: 'policy_denied' });
  assert.deepEqual(policy.inferred, []);
});

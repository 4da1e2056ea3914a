// The adapter end to end over stdio, as the harness runs it, against the fake claude (no Claude Code needed): node --test harness/adapters/claude-code/test/

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { digestEvents, turnReport, childrenOf } from '../lib/mapping.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const ADAPTER = join(HERE, '..', 'adapter.mjs');
const FAKE = join(HERE, 'fake-claude.mjs');

function startAdapter(store, log) {
  const env = {
    PATH: process.env.PATH,
    CLAUDE_CODE_ADAPTER_BIN: `${process.execPath} ${FAKE}`,
    CLAUDE_CODE_ADAPTER_FAKE_LOG: log,
    // Leaked into the adapter's own environment: must not reach claude.
    ANTHROPIC_API_KEY: 'a-real-key',
    ANTHROPIC_BASE_URL: 'https://api.anthropic.com',
    DELEGATION_STORE_DIR: store,
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

const root = (depth) => ({
  role: 'lead', sandbox: { 'workspace-write': { writable_roots: ['/w/repo'], network: false } },
  approval_policy: 'never', cwd: '/w/repo', delegation_depth: depth, tools: [],
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

test('a root is a Claude Code session made at start without a prompt to the model; an allowed spawn is its subagent', async () => {
  const store = mkdtempSync(join(tmpdir(), 'cc-adapter-'));
  const log = join(store, '..', `${store.split('/').pop()}.log`);
  const adapter = startAdapter(store, log);
  const init = await adapter.initialize();
  assert.deepEqual(init.result.capabilities, ['nested-delegation', 'restart', 'mcp', 'fork', 'model-lifecycle-tools']);
  assert.equal((await adapter.request('host/configure', { roles: {} })).result.outcome, 'ok');
  const started = (await adapter.request('instance/start', root(1))).result;
  assert.equal(started.outcome, 'ok');
  assert.deepEqual(started.inferred, ['effective']);
  const [startRun] = invocations(log);
  assert.equal(startRun.prompt, '/cost');
  assert.equal(startRun.argv[startRun.argv.indexOf('--session-id') + 1], started.instance);
  let observed = (await adapter.request('state/observe')).result.observed;
  assert.equal(observed.instances[0].state, 'running');
  assert.ok(!observed.instances[0].inferred.includes('state'), 'the state is read from the stored session');

  const turn = (await adapter.request('instance/turn', { instance: started.instance, input: 'go SPAWN:worker' })).result;
  assert.equal(turn.turn.reply, 'spawn');
  assert.equal(turn.turn.spawn.outcome, 'ok');
  const child = turn.turn.spawn.instance;
  const turnRun = invocations(log)[1];
  assert.equal(turnRun.argv[turnRun.argv.indexOf('--resume') + 1], started.instance);
  assert.equal(turnRun.env.CLAUDE_CODE_MAX_SUBAGENT_SPAWN_DEPTH, '1');
  assert.ok(!turnRun.argv.join(' ').includes('Agent'), 'depth 1 keeps the Agent tool');
  observed = (await adapter.request('state/observe')).result.observed;
  const byId = Object.fromEntries(observed.instances.map((i) => [i.id, i]));
  assert.equal(byId[started.instance].state, 'completed');
  assert.equal(byId[child].parent, started.instance);
  assert.equal(byId[child].state, 'completed');
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

test('depth 0 removes the Agent tool and the spawn is denied with Claude Code\'s own refusal', async () => {
  const store = mkdtempSync(join(tmpdir(), 'cc-adapter-'));
  const log = `${store}.log`;
  const adapter = startAdapter(store, log);
  await adapter.initialize();
  await adapter.request('host/configure', { roles: {} });
  const started = (await adapter.request('instance/start', root(0))).result;
  const turn = (await adapter.request('instance/turn', { instance: started.instance, input: 'go SPAWN:worker' })).result;
  assert.deepEqual(turn.turn.spawn.outcome, 'denied');
  assert.equal(turn.turn.spawn.reason, 'policy_denied');
  assert.equal(turn.turn.spawn.inferred, undefined, 'Claude Code said why');
  const run = invocations(log)[1];
  assert.equal(run.argv[run.argv.indexOf('--disallowedTools') + 1], 'Agent');
  const observed = (await adapter.request('state/observe')).result.observed;
  assert.equal(observed.instances.length, 1);
  await adapter.close();
});

test('claude runs isolated in the store: its home, XDG folders, temporary files and API settings are the store\'s and the harness\'s', async () => {
  const store = mkdtempSync(join(tmpdir(), 'cc-adapter-'));
  const log = `${store}.log`;
  const adapter = startAdapter(store, log);
  await adapter.initialize();
  await adapter.request('host/configure', { roles: { worker: { sandbox: 'read-only' } } });
  const started = (await adapter.request('instance/start', root(1))).result;
  await adapter.request('instance/turn', { instance: started.instance, input: 'hello' });
  await adapter.close();
  for (const run of invocations(log)) {
    for (const key of ['HOME', 'TMPDIR', 'XDG_CONFIG_HOME', 'XDG_CACHE_HOME', 'XDG_DATA_HOME', 'XDG_STATE_HOME']) {
      assert.ok(run.env[key].startsWith(store), `${key}=${run.env[key]} is outside the store`);
    }
    assert.ok(run.cwd.startsWith(store));
    assert.equal(run.env.ANTHROPIC_BASE_URL, 'http://127.0.0.1:9');
    assert.equal(run.env.ANTHROPIC_API_KEY, 'delegation-harness');
    assert.equal(run.env.CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC, '1');
  }
  const agent = readFileSync(join(store, 'claude-code', 'home', '.claude', 'agents', 'worker.md'), 'utf8');
  assert.match(agent, /disallowedTools: Bash, Edit, Write, NotebookEdit/);
  assert.ok(files(store).every((f) => f.startsWith(store)));
});

test('a scripted API failure is model_failed, and methods Claude Code lacks are unsupported', async () => {
  const store = mkdtempSync(join(tmpdir(), 'cc-adapter-'));
  const adapter = startAdapter(store, `${store}.log`);
  await adapter.initialize();
  await adapter.request('host/configure', { roles: {} });
  const started = (await adapter.request('instance/start', root(1))).result;
  const failed = (await adapter.request('instance/turn', { instance: started.instance, input: 'FAIL' })).result;
  assert.equal(failed.turn.reply, 'model_failed');
  assert.match(failed.turn.detail, /529/);
  for (const method of ['instance/delegate', 'receipt/prepare', 'instance/close', 'instance/cancel', 'instance/resume', 'fault/arm']) {
    assert.equal((await adapter.request(method, {})).error.code, -32601, method);
  }
  assert.equal((await adapter.request('host/configure', { auto_approve: true })).error.code, -32001);
  assert.equal((await adapter.request('instance/start', { ...root(1), approval_policy: { granular: { ask: ['shell'], deny: [] } } })).error.code, -32001);
  await adapter.close();
});

test('stream-json mapping: a refused tool call, a grandchild\'s parent, and a refusal Claude Code gave no reason for', () => {
  const events = [
    { type: 'assistant', parent_tool_use_id: null, message: { content: [{ type: 'tool_use', id: 't1', name: 'Agent', input: {} }] } },
    { type: 'system', subtype: 'task_started', task_id: 'child', tool_use_id: 't1', subagent_type: 'worker', spawn_depth: 1 },
    { type: 'assistant', parent_tool_use_id: 't1', message: { content: [{ type: 'tool_use', id: 't2', name: 'Agent', input: {} }] } },
    { type: 'system', subtype: 'task_started', task_id: 'grandchild', tool_use_id: 't2', subagent_type: 'worker', spawn_depth: 2 },
    { type: 'result', is_error: false, result: 'ok', permission_denials: [] },
  ];
  const digest = digestEvents(events);
  assert.deepEqual(childrenOf(digest, 'root').map((c) => [c.id, c.parent]), [['child', 'root'], ['grandchild', 'child']]);
  assert.equal(turnReport(digest).turn.spawn.instance, 'child');

  const denied = digestEvents([
    { type: 'assistant', parent_tool_use_id: null, message: { content: [{ type: 'tool_use', id: 't3', name: 'mcp__harness__notes_write', input: {} }] } },
    { type: 'user', message: { content: [{ type: 'tool_result', tool_use_id: 't3', is_error: true, content: 'Claude requested permissions to use mcp__harness__notes_write, but you haven\'t granted it yet.' }] } },
    { type: 'result', is_error: false, result: 'ok', permission_denials: [{ tool_name: 'mcp__harness__notes_write', tool_use_id: 't3' }] },
  ]);
  const report = turnReport(denied, { nameBack: (n) => (n === 'mcp__harness__notes_write' ? 'notes.write' : n) });
  assert.deepEqual(report.tool_call, { tool: 'notes.write', outcome: 'denied', reason: 'policy_denied' });
  assert.deepEqual(report.inferred, []);

  const unexplained = digestEvents([
    { type: 'assistant', parent_tool_use_id: null, message: { content: [{ type: 'tool_use', id: 't4', name: 'Agent', input: {} }] } },
    { type: 'result', is_error: false, result: 'ok', permission_denials: [] },
  ]);
  assert.deepEqual(turnReport(unexplained).turn.spawn.inferred, ['reason']);
});

test('on-request: a call Claude Code asks permission for is a pending approval, answered over its control protocol', async () => {
  const store = mkdtempSync(join(tmpdir(), 'cc-adapter-'));
  const log = `${store}.log`;
  const adapter = startAdapter(store, log);
  await adapter.initialize();
  await adapter.request('host/configure', { roles: {} });
  const started = (await adapter.request('instance/start', { ...root(1), approval_policy: 'on-request' })).result;
  const asked = (await adapter.request('instance/turn', { instance: started.instance, input: 'CALL:Bash' })).result;
  assert.deepEqual(asked.tool_call, { tool: 'Bash', outcome: 'pending_approval', approval: 'a-1' });
  const run = invocations(log)[1];
  assert.equal(run.argv[run.argv.indexOf('--permission-prompt-tool') + 1], 'stdio');
  let observed = (await adapter.request('state/observe')).result.observed;
  assert.equal(observed.approvals[0].state, 'pending');
  assert.deepEqual(observed.inferred, ['approvals']);
  const allowed = (await adapter.request('approval/answer', { request: 'a-1', decision: 'allow' })).result;
  assert.deepEqual(allowed.tool_call, { tool: 'Bash', outcome: 'executed', approval: 'a-1', result: 'ran Bash' });
  const again = (await adapter.request('approval/answer', { request: 'a-1', decision: 'allow' })).result;
  assert.equal(again.reason, 'event_replayed');

  // The positive control's twin: the person denies, and Claude Code's tool result says the call did not run.
  await adapter.request('instance/turn', { instance: started.instance, input: 'CALL:Write' });
  const refused = (await adapter.request('approval/answer', { request: 'a-2', decision: 'deny' })).result;
  assert.equal(refused.tool_call.outcome, 'denied');
  assert.equal(refused.outcome, 'denied', 'a refused answer is a refusal, as the protocol reports a person\'s deny');
  assert.equal(refused.reason, 'policy_denied');
  assert.equal(refused.inferred, undefined, 'the person denied and Claude Code\'s tool result says the call did not run');
  observed = (await adapter.request('state/observe')).result.observed;
  assert.deepEqual(observed.approvals.map((a) => [a.state, a.decision]), [['dispatched', 'allow'], ['decided', 'deny']]);
  await adapter.close();
});

test('a permission request pending at a restart is gone with its claude process: not listed, and an answer to it runs nothing', async () => {
  const store = mkdtempSync(join(tmpdir(), 'cc-adapter-'));
  const log = `${store}.log`;
  let adapter = startAdapter(store, log);
  await adapter.initialize();
  await adapter.request('host/configure', { roles: {} });
  const started = (await adapter.request('instance/start', { ...root(1), approval_policy: 'on-request' })).result;
  const asked = (await adapter.request('instance/turn', { instance: started.instance, input: 'CALL:Bash' })).result;
  assert.equal(asked.tool_call.outcome, 'pending_approval');
  let observed = (await adapter.request('state/observe')).result.observed;
  assert.deepEqual(observed.approvals.map((a) => a.state), ['pending'], 'listed while its claude run waits');
  await adapter.close();

  adapter = startAdapter(store, log);
  await adapter.initialize();
  await adapter.request('host/configure', { roles: {} });
  observed = (await adapter.request('state/observe')).result.observed;
  assert.deepEqual(observed.approvals, [], 'Claude Code holds the request nowhere after its process ended');
  assert.deepEqual(observed.inferred, ['approvals'], 'the list, and what was dropped from it, is the adapter\'s bookkeeping');
  const runsBefore = invocations(log).length;
  const answer = (await adapter.request('approval/answer', { request: 'a-1', decision: 'allow' }));
  assert.equal(answer.error, undefined, 'a gone request is an answer the harness can judge, not a host failure');
  assert.equal(answer.result.outcome, 'denied');
  assert.equal(answer.result.reason, 'instance_unknown');
  assert.deepEqual(answer.result.inferred, ['reason']);
  assert.equal(invocations(log).length, runsBefore, 'no claude is started for the answer: nothing runs');
  // The control: an unknown id is refused the same way, and a later turn still works.
  assert.equal((await adapter.request('approval/answer', { request: 'a-9', decision: 'allow' })).result.reason, 'instance_unknown');
  const later = (await adapter.request('instance/turn', { instance: started.instance, input: 'hello' })).result;
  assert.equal(later.turn.reply, 'message');
  await adapter.close();
});

test('never: nobody is asked, so a call Claude Code would ask for is denied from its permission_denials', async () => {
  const store = mkdtempSync(join(tmpdir(), 'cc-adapter-'));
  const log = `${store}.log`;
  const adapter = startAdapter(store, log);
  await adapter.initialize();
  await adapter.request('host/configure', { roles: {} });
  const started = (await adapter.request('instance/start', root(1))).result;
  const turn = (await adapter.request('instance/turn', { instance: started.instance, input: 'CALL:Bash' })).result;
  assert.deepEqual(turn.tool_call, { tool: 'Bash', outcome: 'denied', reason: 'policy_denied' });
  assert.ok(!invocations(log)[1].argv.includes('--permission-prompt-tool'));
  await adapter.close();
});

test('fork is Claude Code\'s --fork-session of a main session, made without a model prompt; a subagent cannot be forked', async () => {
  const store = mkdtempSync(join(tmpdir(), 'cc-adapter-'));
  const log = `${store}.log`;
  const adapter = startAdapter(store, log);
  await adapter.initialize();
  await adapter.request('host/configure', { roles: {} });
  const started = (await adapter.request('instance/start', root(1))).result;
  const turn = (await adapter.request('instance/turn', { instance: started.instance, input: 'SPAWN:worker' })).result;
  const fork = (await adapter.request('instance/fork', { instance: started.instance })).result;
  assert.equal(fork.outcome, 'ok');
  assert.notEqual(fork.instance, started.instance);
  const run = invocations(log)[2];
  assert.equal(run.prompt, '/cost');
  assert.equal(run.argv[run.argv.indexOf('--resume') + 1], started.instance);
  assert.ok(run.argv.includes('--fork-session'));
  assert.equal(run.argv[run.argv.indexOf('--session-id') + 1], fork.instance);
  const observed = (await adapter.request('state/observe')).result.observed;
  assert.equal(observed.instances.length, 3);
  assert.equal((await adapter.request('instance/fork', { instance: turn.turn.spawn.instance })).error.code, -32001);
  await adapter.close();
});

test('a SendMessage call of the parent\'s model is send_input on the subagent it names, refused when Claude Code refuses it', () => {
  const sent = digestEvents([
    { type: 'assistant', parent_tool_use_id: null, message: { content: [{ type: 'tool_use', id: 't5', name: 'SendMessage', input: { to: 'a1b2', message: 'more' } }] } },
    { type: 'user', message: { content: [{ type: 'tool_result', tool_use_id: 't5', content: 'delivered' }] } },
    { type: 'result', is_error: false, result: 'ok', permission_denials: [] },
  ]);
  assert.deepEqual(turnReport(sent).turn, { reply: 'lifecycle', op: 'send_input', target: 'a1b2', lifecycle: { outcome: 'ok', instance: 'a1b2' } });
  const refused = digestEvents([
    { type: 'assistant', parent_tool_use_id: null, message: { content: [{ type: 'tool_use', id: 't6', name: 'SendMessage', input: { to: 'nobody', message: 'more' } }] } },
    { type: 'user', message: { content: [{ type: 'tool_result', tool_use_id: 't6', is_error: true, content: 'No agent named nobody' }] } },
    { type: 'result', is_error: false, result: 'ok', permission_denials: [] },
  ]);
  const lifecycle = turnReport(refused).turn.lifecycle;
  assert.equal(lifecycle.outcome, 'denied');
  assert.deepEqual(lifecycle.inferred, ['reason'], 'Claude Code named no reason the adapter can read');
});

test('a sealed tool runs unasked exactly where the eligibility table runs it: reads always, file writes under on-request outside read-only', async () => {
  const { runsUnasked } = await import('../adapter.mjs');
  const ww = { 'workspace-write': { writable_roots: ['/w/repo'], network: false } };
  for (const policy of ['never', 'on-request', 'untrusted']) {
    assert.equal(runsUnasked('read', { sandbox: ww, approval_policy: policy }), true, policy);
    for (const cls of ['mcp', 'shell', 'network', 'generic', 'delegation']) {
      assert.equal(runsUnasked(cls, { sandbox: ww, approval_policy: policy }), false, `${cls} under ${policy}`);
    }
  }
  assert.equal(runsUnasked('file-write', { sandbox: ww, approval_policy: 'on-request' }), true);
  assert.equal(runsUnasked('file-write', { sandbox: 'read-only', approval_policy: 'on-request' }), false);
  assert.equal(runsUnasked('file-write', { sandbox: ww, approval_policy: 'never' }), false);
  assert.equal(runsUnasked('file-write', { sandbox: ww, approval_policy: 'untrusted' }), false);
});

test('a read-only instance\'s writing MCP tool is removed, and Claude Code\'s "No such tool available" for it reads as read_only_context, inferred', () => {
  const digest = digestEvents([
    { type: 'assistant', parent_tool_use_id: null, message: { content: [{ type: 'tool_use', id: 't7', name: 'mcp__harness__run_shell', input: {} }] } },
    { type: 'user', message: { content: [{ type: 'tool_result', tool_use_id: 't7', is_error: true, content: '<tool_use_error>Error: No such tool available: mcp__harness__run_shell</tool_use_error>' }] } },
    { type: 'result', is_error: false, result: 'ok', permission_denials: [] },
  ]);
  const nameBack = (n) => n.replace('mcp__harness__', '');
  const removed = turnReport(digest, { nameBack, removedForReadOnly: (n) => n === 'mcp__harness__run_shell' });
  assert.deepEqual(removed.tool_call, { tool: 'run_shell', outcome: 'denied', reason: 'read_only_context' });
  assert.deepEqual(removed.inferred, ['tool_call']);
  // Not removed by the mapping: Claude Code's own reason stands, not inferred.
  const unknown = turnReport(digest, { nameBack });
  assert.deepEqual(unknown.tool_call, { tool: 'run_shell', outcome: 'denied', reason: 'no_such_tool' });
  assert.deepEqual(unknown.inferred, []);
});

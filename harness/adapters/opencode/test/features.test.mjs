// End-to-end tests of the adapter's MCP, approval, fork, configuration and isolation mappings, against the fake opencode and a fake MCP server.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { startAdapter, tempDir, ROOT } from './helpers.mjs';
import { startFakeMcp } from './fake-mcp.mjs';
import { digestOf } from '../lib/mcp.mjs';

const NOTES = { name: 'notes.read', description: 'Reads a note.', inputSchema: { type: 'object' }, annotations: { 'x-delegation-class': 'read' } };
const PROBE = { name: 'probe_note', description: 'Appends a note.', inputSchema: { type: 'object' }, annotations: { 'x-delegation-class': 'mcp' } };
const OTHER = { name: 'other_tool', description: 'Not sealed.', inputSchema: { type: 'object' } };

const workspace = (store) => join(store, 'opencode', 'workspace');
const fakeDb = (store) => JSON.parse(readFileSync(join(workspace(store), 'fake-db.json'), 'utf8'));

async function withMcp(name, body) {
  const mcp = await startFakeMcp([NOTES, PROBE, OTHER]);
  const store = tempDir(name);
  const a = startAdapter({ store });
  try {
    const init = await a.request('initialize', { protocol_version: '1.0', environment: { model_endpoint: 'http://127.0.0.1:9', mcp_servers: [{ name: 'tools', url: mcp.url }], store_dir: store, clock: 'harness' } });
    assert.ok(init.result.capabilities.includes('mcp'));
    await body({ a, store, mcp });
  } finally {
    await a.close();
    await mcp.close();
  }
}

test('sealed MCP tools: opencode remote servers, digests of the served definitions, and session rules that show exactly the sealed ones', async () => {
  await withMcp('mcp', async ({ a, store }) => {
    const start = await a.request('instance/start', { ...ROOT(1), approval_policy: 'on-request', tools: ['notes.read', 'probe_note'] });
    assert.equal(start.result.outcome, 'ok');
    assert.deepEqual(start.result.effective.tools, { 'notes.read': digestOf(NOTES), probe_note: digestOf(PROBE) });
    assert.deepEqual(start.result.inferred, ['effective']);
    const config = JSON.parse(readFileSync(join(workspace(store), 'opencode.json'), 'utf8'));
    assert.equal(config.mcp.tools.type, 'remote');
    const rules = fakeDb(store).sessions[start.result.instance].permission;
    const ruleFor = (p) => rules.filter((r) => r.permission === p).map((r) => r.action);
    assert.deepEqual(ruleFor('tools_*'), [], 'no blanket deny: opencode would copy it into every child and hide the sealed tools there');
    assert.deepEqual(ruleFor('tools_notes_read'), ['allow'], 'a read tool runs unasked under on-request');
    assert.deepEqual(ruleFor('tools_probe_note'), ['ask'], 'an mcp-class tool asks under on-request');
    assert.deepEqual(ruleFor('tools_other_tool'), ['deny'], 'a served tool the root did not seal is hidden');
    const unknown = await a.request('instance/start', { ...ROOT(1), tools: ['nope'] });
    assert.deepEqual([unknown.result.outcome, unknown.result.reason], ['denied', 'projection_missing']);
  });
});

test('a model call of a tool opencode does not offer is refused with the report marked inferred; under opencode\'s name it runs', async () => {
  await withMcp('mcpname', async ({ a }) => {
    const root = (await a.request('instance/start', { ...ROOT(1), tools: ['notes.read'] })).result.instance;
    const turn = await a.request('instance/turn', { instance: root, input: 'CALL notes.read' });
    assert.deepEqual([turn.result.tool_call.outcome, turn.result.inferred], ['denied', ['tool_call']]);
    const ok = await a.request('instance/turn', { instance: root, input: 'CALL tools_notes_read' });
    assert.deepEqual([ok.result.tool_call, ok.result.inferred], [{ tool: 'notes.read', outcome: 'executed', result: 'ran tools_notes_read' }, undefined]);
  });
});

test('a permission request is a pending approval; allow is opencode once, deny reject, a second answer is refused, allow-exact unsupported', async () => {
  await withMcp('approve', async ({ a }) => {
    const root = (await a.request('instance/start', { ...ROOT(1), approval_policy: 'on-request', tools: ['probe_note'] })).result.instance;
    // Before any request existed, opencode's empty list is its own word.
    const fresh = (await a.request('state/observe')).result.observed;
    assert.deepEqual([fresh.approvals, fresh.inferred], [[], undefined]);
    const turn = await a.request('instance/turn', { instance: root, input: 'CALL tools_probe_note' });
    assert.equal(turn.result.tool_call.outcome, 'pending_approval');
    assert.equal(turn.result.tool_call.tool, 'probe_note');
    const request = turn.result.tool_call.approval;
    const obs = (await a.request('state/observe')).result.observed;
    assert.deepEqual(obs.approvals.map((p) => [p.id, p.instance, p.state, p.tool, p.tool_digest]), [[request, root, 'pending', 'probe_note', digestOf(PROBE)]]);
    assert.ok(obs.inferred.includes('approvals'));
    assert.equal((await a.request('approval/answer', { request, decision: 'allow-exact' })).error.code, -32001);
    const allowed = await a.request('approval/answer', { request, decision: 'allow' });
    assert.deepEqual([allowed.result.outcome, allowed.result.tool_call.outcome, allowed.result.tool_call.approval], ['ok', 'executed', request]);
    const again = await a.request('approval/answer', { request, decision: 'deny' });
    assert.deepEqual([again.result.outcome, again.result.reason, again.result.inferred], ['denied', 'event_replayed', ['reason']]);
    const second = await a.request('instance/turn', { instance: root, input: 'CALL tools_probe_note' });
    const refused = await a.request('approval/answer', { request: second.result.tool_call.approval, decision: 'deny' });
    assert.deepEqual([refused.result.outcome, refused.result.reason, refused.result.tool_call.outcome], ['denied', 'policy_denied', 'denied']);
    // opencode shows nothing of an answered request: the empty set is not its record of the decisions.
    const after = (await a.request('state/observe')).result.observed;
    assert.deepEqual([after.approvals, after.inferred], [[], ['approvals']]);
  });
});

test('fork is opencode\'s fork: a new instance whose ceiling is read from its own rules (none: wider than its origin); a deleted origin is unknown to opencode', async () => {
  const store = tempDir('fork');
  const a = startAdapter({ store });
  await a.initialize();
  const root = (await a.request('instance/start', { ...ROOT(1), sandbox: 'read-only' })).result.instance;
  const fork = await a.request('instance/fork', { instance: root });
  assert.equal(fork.result.outcome, 'ok');
  assert.notEqual(fork.result.instance, root);
  assert.equal(fork.result.effective.sandbox, 'full-access', 'opencode copies no permission rules into a fork');
  assert.deepEqual(fork.result.inferred, ['effective']);
  const obs = (await a.request('state/observe')).result.observed;
  assert.deepEqual(obs.instances.map((i) => i.id).sort(), [root, fork.result.instance].sort());
  await a.request('instance/close', { instance: root });
  const late = await a.request('instance/fork', { instance: root });
  assert.deepEqual([late.result.reason, late.result.inferred], ['instance_unknown', undefined]);
  const after = (await a.request('state/observe')).result.observed;
  assert.deepEqual(after.instances.map((i) => i.id), [fork.result.instance], 'the deleted origin is not listed; its fork lives on');
  await a.close();
});

test('a deeper root reloads opencode\'s configuration by disposing its instance, without a second opencode start', async () => {
  const store = tempDir('depth');
  const a = startAdapter({ store });
  await a.initialize();
  await a.request('host/configure', { roles: { reviewer: { sandbox: 'read-only' } } });
  const config = () => JSON.parse(readFileSync(join(workspace(store), 'opencode.json'), 'utf8'));
  assert.equal(config().subagent_depth, 1);
  assert.deepEqual(config().agent.reviewer.permission, { task: 'allow', edit: 'deny', bash: 'deny', webfetch: 'deny', websearch: 'deny' });
  const start = await a.request('instance/start', ROOT(3));
  assert.equal(start.result.effective.delegation_depth, 3);
  assert.equal(config().subagent_depth, 3);
  const lines = (f) => (existsSync(join(workspace(store), f)) ? readFileSync(join(workspace(store), f), 'utf8').trim().split('\n').length : 0);
  assert.equal(lines('fake-starts.txt'), 1);
  assert.equal(lines('fake-disposals.txt'), 1);
  await a.close();
});

test('opencode runs with HOME, every XDG_*_HOME and TMPDIR inside the store', async () => {
  const store = tempDir('iso');
  const envFile = join(store, 'env.json');
  const a = startAdapter({ store, extraEnv: { FAKE_ENV_FILE: envFile, OPENCODE_SOMETHING: 'leak' } });
  await a.initialize();
  await a.request('host/configure', {});
  const env = JSON.parse(readFileSync(envFile, 'utf8'));
  for (const key of ['HOME', 'XDG_CONFIG_HOME', 'XDG_DATA_HOME', 'XDG_STATE_HOME', 'XDG_CACHE_HOME', 'XDG_RUNTIME_DIR', 'TMPDIR', 'TMP', 'TEMP']) {
    assert.ok(env[key] && env[key].startsWith(`${store}/`), `${key}=${env[key]}`);
  }
  assert.equal(env.OPENCODE_SOMETHING, undefined);
  await a.close();
});

test('wait wakes on opencode\'s own idle signal; a deleted or unknown instance is refused as opencode refuses it', async () => {
  const store = tempDir('wait');
  const a = startAdapter({ store });
  await a.initialize();
  const root = (await a.request('instance/start', ROOT(1))).result.instance;
  await a.request('instance/turn', { instance: root, input: 'hello' });
  const woke = await a.request('instance/wait', { instance: root, deadline: 60000 });
  assert.deepEqual([woke.result.outcome, woke.result.woke, woke.result.inferred], ['ok', 'event', undefined]);
  await a.request('instance/cancel', { instance: root });
  const late = await a.request('instance/wait', { instance: root, deadline: 60000 });
  assert.deepEqual([late.result.outcome, late.result.reason], ['denied', 'instance_unknown']);
  assert.equal((await a.request('instance/wait', { instance: 'ses_nope', deadline: 1 })).result.reason, 'instance_unknown');
  await a.close();
});

test('resume answers the ceiling opencode\'s rules give the session and leaves it as it is; a deleted one is unknown to opencode', async () => {
  const store = tempDir('resume');
  const a = startAdapter({ store });
  await a.initialize();
  const root = (await a.request('instance/start', { ...ROOT(1), sandbox: 'read-only' })).result.instance;
  const turn = await a.request('instance/turn', { instance: root, input: 'SPAWN' });
  const child = turn.result.turn.spawn.instance;
  const childEntry = async () => (await a.request('state/observe')).result.observed.instances.find((i) => i.id === child);
  // Control: idle after its answer, the child is completed, as opencode shows it.
  assert.deepEqual([(await childEntry()).state, (await childEntry()).inferred], ['completed', ['ceiling']]);
  const resumed = await a.request('instance/resume', { instance: child });
  assert.deepEqual([resumed.result.outcome, resumed.result.effective.sandbox, resumed.result.effective.delegation_depth, resumed.result.inferred], ['ok', 'read-only', 0, ['effective']]);
  // Resumed, it looks the same in opencode: running is the adapter's word, marked.
  assert.deepEqual([(await childEntry()).state, (await childEntry()).inferred], ['running', ['ceiling', 'state']]);
  await a.request('instance/turn', { instance: child, input: 'hello' });
  assert.deepEqual([(await childEntry()).state, (await childEntry()).inferred], ['completed', ['ceiling']]);
  await a.request('instance/close', { instance: child });
  assert.equal((await a.request('instance/resume', { instance: child })).result.reason, 'instance_unknown');
  assert.equal((await a.request('instance/resume', { instance: 'ses_nope' })).result.reason, 'instance_unknown');
  await a.close();
});

test('a later turn of a child names the agent opencode created it with (its role); a root\'s names none', async () => {
  const store = tempDir('agent');
  const a = startAdapter({ store });
  await a.initialize();
  const root = (await a.request('instance/start', ROOT(1))).result.instance;
  const child = (await a.request('instance/turn', { instance: root, input: 'SPAWN' })).result.turn.spawn.instance;
  assert.equal((await a.request('instance/turn', { instance: child, input: 'hello' })).result.outcome, 'ok');
  const prompts = readFileSync(join(workspace(store), 'fake-prompts.txt'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  assert.deepEqual(prompts, [{ session: root, agent: null }, { session: child, agent: 'worker' }]);
  await a.close();
});

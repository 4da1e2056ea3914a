// The adapter end to end over stdio, as the harness runs it, against the fake gemini (no Gemini CLI needed): node --test harness/adapters/gemini-cli/test/

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { turnReport, acpTurnReport, eligibility, toolOfTitle, argumentsOf } from '../lib/mapping.mjs';
import { optionFor } from '../lib/acp.mjs';
import { geminiToolName } from '../lib/mcp.mjs';
import { keepEvent, startRelay } from '../lib/mcp-relay.mjs';
import http from 'node:http';

const HERE = dirname(fileURLToPath(import.meta.url));
const ADAPTER = join(HERE, '..', 'adapter.mjs');
const FAKE = join(HERE, 'fake-gemini.mjs');

function startAdapter(store, log, extraEnv = {}) {
  const env = {
    PATH: process.env.PATH,
    GEMINI_CLI_ADAPTER_BIN: `${process.execPath} ${FAKE}`,
    GEMINI_CLI_ADAPTER_FAKE_LOG: log,
    // Leaked into the adapter's own environment: must not reach gemini.
    GEMINI_API_KEY: 'a-real-key',
    GOOGLE_API_KEY: 'another-real-key',
    GOOGLE_GEMINI_BASE_URL: 'https://generativelanguage.googleapis.com',
    DELEGATION_STORE_DIR: store,
    ...extraEnv,
  };
  const child = spawn(process.execPath, [ADAPTER], { env, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
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
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
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
    exited,
  };
}

const root = (depth, sandbox = { 'workspace-write': { writable_roots: ['/w/repo'], network: false } }) => ({
  role: 'lead', sandbox, approval_policy: 'never', cwd: '/w/repo', delegation_depth: depth, tools: [],
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

const made = [];
after(() => { for (const path of made) rmSync(path, { recursive: true, force: true }); });

function fresh() {
  const store = mkdtempSync(join(tmpdir(), 'gemini-adapter-'));
  made.push(store, `${store}.log`);
  return { store, log: `${store}.log` };
}

test('an allowed spawn is the subagent Gemini CLI records, under the model\'s call id, and survives a restart', async () => {
  const { store, log } = fresh();
  let adapter = startAdapter(store, log);
  const init = await adapter.initialize();
  assert.deepEqual(init.result.capabilities, ['restart', 'mcp'], 'no nested-delegation: Gemini CLI subagents cannot delegate');
  assert.equal(init.result.host.name, 'gemini-cli');
  assert.equal((await adapter.request('host/configure', {})).result.outcome, 'ok');
  const started = (await adapter.request('instance/start', root(1))).result;
  assert.equal(started.outcome, 'ok');
  assert.deepEqual(started.inferred, ['effective']);
  assert.equal(invocations(log).length, 0, 'a start runs no gemini (a session begins with a model request)');
  const turn = (await adapter.request('instance/turn', { instance: started.instance, input: 'plan, then SPAWN:worker' })).result;
  assert.equal(turn.turn.reply, 'spawn');
  assert.deepEqual({ outcome: turn.turn.spawn.outcome, instance: turn.turn.spawn.instance }, { outcome: 'ok', instance: 'harness_spawn_1' });
  const [run] = invocations(log);
  assert.ok(run.argv.includes('--session-id') && run.argv.includes(started.instance));
  assert.deepEqual(run.argv.slice(0, 2), ['-m', 'gemini-2.5-pro'], 'a pinned model: no router call');
  assert.equal(run.env.GEMINI_CLI_CUSTOM_HEADERS, `x-delegation-instance:${started.instance}`);
  assert.equal(run.env.GOOGLE_GEMINI_BASE_URL, 'http://127.0.0.1:9');
  assert.equal(run.env.GEMINI_API_KEY, 'delegation-harness', 'the caller\'s key never reaches gemini');
  assert.equal(run.env.GOOGLE_API_KEY, undefined);
  assert.ok(run.env.HOME.startsWith(store) && run.cwd.startsWith(store), 'home and workspace inside the store');
  const settings = JSON.parse(readFileSync(join(store, 'gemini-cli/home/.gemini/settings.json'), 'utf8'));
  assert.equal(settings.security.auth.selectedType, 'gemini-api-key');
  assert.equal(settings.privacy.usageStatisticsEnabled, false);
  assert.ok(existsSync(join(store, 'gemini-cli/home/.gemini/agents/worker.md')));
  assert.equal(await adapter.close().then((r) => r.code), 0);

  // A new adapter on the same store: both instances come back from Gemini CLI's store.
  adapter = startAdapter(store, log);
  await adapter.initialize();
  const observed = (await adapter.request('state/observe')).result.observed;
  const byId = Object.fromEntries(observed.instances.map((i) => [i.id, i]));
  assert.equal(observed.instances.length, 2);
  assert.equal(byId[started.instance].state, 'completed');
  assert.equal(byId.harness_spawn_1.parent, started.instance);
  assert.equal(byId.harness_spawn_1.state, 'completed');
  assert.deepEqual(byId.harness_spawn_1.inferred, ['ceiling']);
  const again = (await adapter.request('instance/turn', { instance: started.instance, input: 'hello' })).result;
  assert.deepEqual(again.turn, { reply: 'message', text: 'ok' });
  assert.ok(invocations(log)[1].argv.includes('--resume'), 'a later turn resumes the session');
  await adapter.close();
});

test('depth 0 denies invoke_agent by policy: the spawn is refused, nothing is recorded (control: depth 1 above)', async () => {
  const { store, log } = fresh();
  const adapter = startAdapter(store, log);
  await adapter.initialize();
  const started = (await adapter.request('instance/start', root(0))).result;
  const turn = (await adapter.request('instance/turn', { instance: started.instance, input: 'SPAWN:worker' })).result;
  assert.equal(turn.turn.spawn.outcome, 'denied');
  assert.equal(turn.turn.spawn.reason, 'policy_denied');
  assert.deepEqual(turn.turn.spawn.inferred, ['reason'], 'Gemini CLI says only "not found": why is the adapter\'s knowledge');
  const policy = readFileSync(invocations(log)[0].argv[invocations(log)[0].argv.indexOf('--policy') + 1], 'utf8');
  assert.match(policy, /toolName = "invoke_agent"\ndecision = "deny"/);
  const observed = (await adapter.request('state/observe')).result.observed;
  assert.equal(observed.instances.length, 1);
  await adapter.close();
});

test('a read-only root denies the writing tools; full access runs in yolo mode', async () => {
  const { store, log } = fresh();
  const adapter = startAdapter(store, log);
  await adapter.initialize();
  const ro = (await adapter.request('instance/start', root(1, 'read-only'))).result;
  const refused = (await adapter.request('instance/turn', { instance: ro.instance, input: 'CALL:write_file' })).result;
  assert.deepEqual(refused.tool_call, { tool: 'write_file', outcome: 'denied', reason: 'policy_denied' });
  const fa = (await adapter.request('instance/start', root(1, 'full-access'))).result;
  const ran = (await adapter.request('instance/turn', { instance: fa.instance, input: 'CALL:write_file' })).result;
  assert.deepEqual(ran.tool_call, { tool: 'write_file', outcome: 'executed', result: 'tool output' });
  const [first, second] = invocations(log);
  assert.equal(first.argv[first.argv.indexOf('--approval-mode') + 1], 'default');
  assert.equal(second.argv[second.argv.indexOf('--approval-mode') + 1], 'yolo');
  await adapter.close();
});

test('options Gemini CLI cannot express are refused (-32001), unknown methods are -32601, a failed model is model_failed', async () => {
  const { store, log } = fresh();
  const adapter = startAdapter(store, log);
  await adapter.initialize();
  assert.equal((await adapter.request('host/configure', { strict_mode: true })).error.code, -32001);
  assert.equal((await adapter.request('instance/start', { ...root(1), approval_policy: { granular: {} } })).error.code, -32001);
  assert.equal((await adapter.request('instance/delegate', {})).error.code, -32601);
  assert.equal((await adapter.request('instance/tool_call', {})).error.code, -32601);
  const started = (await adapter.request('instance/start', root(1))).result;
  const failed = (await adapter.request('instance/turn', { instance: started.instance, input: 'FAIL' })).result;
  assert.equal(failed.turn.reply, 'model_failed');
  const unknown = (await adapter.request('instance/turn', { instance: 'nobody', input: 'x' })).result;
  assert.equal(unknown.reason, 'instance_unknown');
  await adapter.close();
});

test('a hung run is killed at the turn deadline, and SIGTERM stops the adapter with its gemini', async () => {
  const { store, log } = fresh();
  const adapter = startAdapter(store, log, { GEMINI_CLI_ADAPTER_TURN_TIMEOUT_MS: '1500' });
  await adapter.initialize();
  const started = (await adapter.request('instance/start', root(1))).result;
  const t0 = Date.now();
  const hung = await adapter.request('instance/turn', { instance: started.instance, input: 'HANG' });
  assert.equal(hung.error.code, -32002);
  assert.ok(Date.now() - t0 < 10000);
  const pending = adapter.request('instance/turn', { instance: started.instance, input: 'HANG again' });
  await new Promise((r) => setTimeout(r, 500));
  process.kill(adapter.child.pid, 'SIGTERM');
  const { code } = await adapter.exited;
  assert.equal(code, 0);
  void pending;
  // No fake is left: every gemini the adapter started is gone.
  const alive = (pid) => {
    try { return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8')); } catch { return false; }
  };
  const pids = invocations(log).map((i) => i.pid);
  assert.equal(pids.length, 2);
  for (let i = 0; i < 30 && pids.some(alive); i++) await new Promise((r) => setTimeout(r, 100));
  assert.deepEqual(pids.filter(alive), [], 'every gemini the adapter started is gone within 3 s');
});

test('nothing is written outside the store: the fake\'s home is the store\'s', async () => {
  const { store, log } = fresh();
  const adapter = startAdapter(store, log);
  await adapter.initialize();
  const started = (await adapter.request('instance/start', root(1))).result;
  await adapter.request('instance/turn', { instance: started.instance, input: 'hello' });
  await adapter.close();
  const written = files(store).filter((f) => f.endsWith('fake-touched'));
  assert.deepEqual(written, [join(store, 'gemini-cli/home/.gemini/fake-touched')]);
});

test('turn reports: Gemini CLI\'s refusals, MCP names mapped back, and a spawn without a recorded subagent is not ok', () => {
  const events = (name, result) => [
    { type: 'tool_use', tool_name: name, tool_id: `${name}__c1`, parameters: {} },
    { type: 'tool_result', tool_id: `${name}__c1`, ...result },
    { type: 'result', status: 'success' },
  ];
  const mcp = turnReport(events('mcp_harness_notes.read', { status: 'success', output: 'notes' }), { nameBack: (n) => (n === 'mcp_harness_notes.read' ? 'notes.read' : n) });
  assert.deepEqual(mcp.tool_call, { tool: 'notes.read', outcome: 'executed', result: 'notes' });
  const policy = turnReport(events('run_shell_command', { status: 'error', error: { message: 'Tool execution denied by policy.' } }));
  assert.equal(policy.tool_call.reason, 'policy_denied');
  assert.deepEqual(policy.inferred, []);
  const unexplained = turnReport(events('run_shell_command', { status: 'error', error: { message: 'something else' } }));
  assert.deepEqual(unexplained.inferred, ['tool_call']);
  const removed = events('mcp_harness_notes.read', { status: 'error', error: { type: 'tool_not_registered', message: 'Tool "mcp_harness_notes.read" not found.' } });
  assert.equal(turnReport(removed).tool_call.reason, 'no_such_tool', 'a tool its server stopped serving: Gemini CLI\'s reason');
  const withheld = turnReport(removed, { policyDenied: new Set(['mcp_harness_notes.read']) });
  assert.deepEqual([withheld.tool_call.reason, withheld.inferred], ['policy_denied', ['tool_call']]);
  const asks = turnReport(removed, { wouldAsk: new Set(['mcp_harness_notes.read']) });
  assert.deepEqual([asks.tool_call.reason, asks.asks], ['policy_denied', true], 'left out because it would ask: not drift');
  const orphan = turnReport(events('invoke_agent', { status: 'success' }), { subagents: [] });
  assert.equal(orphan.turn.spawn.outcome, 'denied');
  assert.deepEqual(orphan.turn.spawn.inferred, ['reason']);
  const spawned = turnReport(events('invoke_agent', { status: 'success' }), { subagents: [{ callId: 'c1' }] });
  assert.deepEqual(spawned.turn.spawn, { outcome: 'ok', instance: 'c1' });
  assert.equal(geminiToolName('harness', 'notes.read'), 'mcp_harness_notes.read');
  assert.equal(geminiToolName('my server', 'a/b'), 'mcp_my_server_a_b');
});

test('a call Gemini CLI would ask about: denied under never, unsupported (-32001) under on-request', async () => {
  const { store, log } = fresh();
  const adapter = startAdapter(store, log);
  await adapter.initialize();
  const never = (await adapter.request('instance/start', root(1))).result;
  const refused = (await adapter.request('instance/turn', { instance: never.instance, input: 'CALL:ASKS' })).result;
  assert.deepEqual(refused.tool_call, { tool: 'ASKS', outcome: 'denied', reason: 'policy_denied' });
  const asking = (await adapter.request('instance/start', { ...root(1), approval_policy: 'on-request' })).result;
  const answer = await adapter.request('instance/turn', { instance: asking.instance, input: 'CALL:ASKS' });
  assert.equal(answer.error.code, -32001);
  assert.match(answer.error.message, /cannot ask/);
  // Control: a call that asks nothing runs under on-request.
  const ran = (await adapter.request('instance/turn', { instance: asking.instance, input: 'CALL:read_file' })).result;
  assert.equal(ran.tool_call.outcome, 'executed');
  await adapter.close();
});

test('the MCP relay passes requests and answers unchanged, without SSE events that carry no data', async () => {
  const seen = [];
  const upstream = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      seen.push({ method: req.method, url: req.url, session: req.headers['mcp-session-id'], body });
      res.writeHead(200, { 'content-type': 'text/event-stream', 'mcp-session-id': 's-1' });
      // rmcp's priming event, then the answer.
      res.end('id: 0\nretry: 3000\ndata:\n\nid: 1\ndata: {"jsonrpc":"2.0","id":1,"result":{}}\n\n');
    });
  });
  await new Promise((r) => upstream.listen(0, '127.0.0.1', r));
  const relay = await startRelay(`http://127.0.0.1:${upstream.address().port}/mcp`);
  try {
    assert.match(relay.url, /^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    const answer = await fetch(relay.url, { method: 'POST', headers: { 'mcp-session-id': 's-1', 'content-type': 'application/json' }, body: '{"jsonrpc":"2.0","id":1,"method":"tools/list"}' });
    assert.equal(answer.headers.get('mcp-session-id'), 's-1');
    assert.equal(await answer.text(), 'id: 1\ndata: {"jsonrpc":"2.0","id":1,"result":{}}\n\n');
    assert.deepEqual(seen, [{ method: 'POST', url: '/mcp', session: 's-1', body: '{"jsonrpc":"2.0","id":1,"method":"tools/list"}' }]);
  } finally {
    relay.close();
    upstream.close();
  }
  assert.equal(keepEvent('id: 0\ndata:'), false);
  assert.equal(keepEvent(': keep-alive'), true, 'comments pass');
  assert.equal(keepEvent('data: {}'), true);
});

/** A streamable-HTTP MCP server answering with JSON: `initialize` and `tools/list` of `tools`. */
async function toolServer(tools) {
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      const message = body ? JSON.parse(body) : {};
      if (message.id === undefined) { res.writeHead(202); res.end(); return; }
      const result = message.method === 'tools/list' ? { tools } : { protocolVersion: '2025-03-26', capabilities: { tools: {} }, serverInfo: { name: 'test', version: '1' } };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: message.id, result }));
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${server.address().port}/mcp`, close: () => server.close() };
}

const tool = (name, cls) => ({ name, description: name, inputSchema: { type: 'object', properties: {} }, annotations: { 'x-delegation-class': cls } });

test('eligibility: the protocol\'s table, which the policy file carries', () => {
  const ws = { 'workspace-write': { writable_roots: ['/w'], network: false } };
  assert.equal(eligibility('read', { sandbox: 'read-only', approval_policy: 'never' }), 'runs');
  assert.equal(eligibility('mcp', { sandbox: ws, approval_policy: 'never' }), 'policy_denied');
  assert.equal(eligibility('mcp', { sandbox: ws, approval_policy: 'on-request' }), 'ask');
  assert.equal(eligibility('mcp', { sandbox: 'read-only', approval_policy: 'on-request' }), 'ask');
  assert.equal(eligibility('shell', { sandbox: 'read-only', approval_policy: 'on-request' }), 'read_only_context');
  assert.equal(eligibility('file-write', { sandbox: ws, approval_policy: 'on-request' }), 'runs');
  assert.equal(eligibility('file-write', { sandbox: ws, approval_policy: 'untrusted' }), 'ask');
  assert.equal(eligibility('network', { sandbox: ws, approval_policy: 'on-request' }), 'policy_denied');
  assert.equal(eligibility('network', { sandbox: 'full-access', approval_policy: 'on-request' }), 'ask');
  assert.equal(optionFor([{ optionId: 'a', kind: 'allow_always' }, { optionId: 'o', kind: 'allow_once' }, { optionId: 'c', kind: 'reject_once' }], true), 'o');
  assert.equal(optionFor([{ optionId: 'a', kind: 'allow_always' }], true), null, 'never an answer wider than the call');
});

test('ACP reports: a completed call runs, a denied one left no update, a failed prompt is model_failed', () => {
  const ran = acpTurnReport([{ sessionUpdate: 'tool_call', toolCallId: 'c1', title: 'notes.read', status: 'in_progress' }, { sessionUpdate: 'tool_call_update', toolCallId: 'c1', status: 'completed', content: [{ type: 'content', content: { type: 'text', text: 'out' } }] }]);
  assert.deepEqual(ran.turn, { reply: 'tool_call', tool: 'notes.read' });
  assert.deepEqual(ran.tool_call, { tool: 'notes.read', outcome: 'executed', result: 'out' });
  const refused = acpTurnReport([], { answered: { tool_call_id: 'c1', tool: 'notes.read' } });
  assert.deepEqual(refused.tool_call, { tool: 'notes.read', outcome: 'denied', reason: 'policy_denied' });
  assert.deepEqual(refused.inferred, ['reason']);
  assert.equal(acpTurnReport([], { done: { error: new Error('503') } }).turn.reply, 'model_failed');
  assert.equal(toolOfTitle('probe_note (harness MCP Server)'), 'probe_note');
  assert.equal(toolOfTitle('notes.read'), 'notes.read');
  assert.deepEqual(argumentsOf({ content: [{ type: 'content', content: { type: 'text', text: '{"text":"x"}' } }] }), { text: 'x' });
  assert.deepEqual(argumentsOf({ content: [] }), {});
  assert.deepEqual(acpTurnReport([{ sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: 'hi' } }]).turn, { reply: 'message', text: 'hi' });
});

test('a call a person must allow goes through ACP: pending, then allowed once (or denied), never answered twice', async () => {
  const server = await toolServer([tool('ASKS', 'mcp'), tool('read_file', 'read')]);
  const { store, log } = fresh();
  // The later ACP turn below loads the session, which the adapter drives only when asked to (README finding 14).
  const adapter = startAdapter(store, log, { GEMINI_CLI_ADAPTER_ACP_LOAD: '1' });
  try {
    await adapter.request('initialize', { protocol_version: '1.0', environment: { model_endpoint: 'http://127.0.0.1:9', mcp_servers: [{ name: 'harness', url: server.url }], store_dir: store, clock: 'harness' } });
    const start = (await adapter.request('instance/start', { ...root(1), approval_policy: 'on-request', tools: ['ASKS', 'read_file'] })).result;
    const asked = (await adapter.request('instance/turn', { instance: start.instance, input: 'CALL:ASKS' })).result;
    assert.deepEqual(asked.tool_call, { tool: 'ASKS', outcome: 'pending_approval', approval: 'a-1' });
    assert.ok(invocations(log).some((i) => i.acp && i.argv.includes('--policy')), 'gemini --acp ran with the policy file');
    const busy = (await adapter.request('instance/turn', { instance: start.instance, input: 'CALL:read_file' })).result;
    assert.equal(busy.outcome, 'denied', 'a root waiting for a person takes no other turn');
    const allowed = (await adapter.request('approval/answer', { request: 'a-1', decision: 'allow' })).result;
    assert.deepEqual(allowed.tool_call, { tool: 'ASKS', outcome: 'executed', result: 'tool output', approval: 'a-1' });
    const again = (await adapter.request('approval/answer', { request: 'a-1', decision: 'deny' })).result;
    assert.equal(again.reason, 'event_replayed');
    await adapter.request('instance/turn', { instance: start.instance, input: 'CALL:ASKS' });
    const refused = (await adapter.request('approval/answer', { request: 'a-2', decision: 'deny' })).result;
    assert.equal(refused.outcome, 'denied');
    assert.equal(refused.tool_call.reason, 'policy_denied');
    const observed = (await adapter.request('state/observe', {})).result.observed;
    assert.deepEqual(observed.approvals.map((a) => [a.id, a.state, a.decision]), [['a-1', 'dispatched', 'allow'], ['a-2', 'decided', 'deny']]);
    assert.deepEqual(observed.inferred, ['approvals']);
    assert.equal(observed.instances[0].state, 'completed', 'the session Gemini CLI chose is the instance\'s');
  } finally {
    await adapter.close();
    server.close();
  }
});

test('a later turn of an ACP root is refused (-32001) and starts no gemini, unless GEMINI_CLI_ADAPTER_ACP_LOAD=1 (finding 14)', async () => {
  const server = await toolServer([tool('ASKS', 'mcp')]);
  const { store, log } = fresh();
  const adapter = startAdapter(store, log);
  try {
    await adapter.request('initialize', { protocol_version: '1.0', environment: { model_endpoint: 'http://127.0.0.1:9', mcp_servers: [{ name: 'harness', url: server.url }], store_dir: store, clock: 'harness' } });
    const start = (await adapter.request('instance/start', { ...root(1), approval_policy: 'on-request', tools: ['ASKS'] })).result;
    const first = (await adapter.request('instance/turn', { instance: start.instance, input: 'nothing to call' })).result;
    assert.equal(first.outcome, 'ok', 'the first ACP turn opens a new session and runs');
    const runs = invocations(log).length;
    const later = await adapter.request('instance/turn', { instance: start.instance, input: 'nothing to call' });
    assert.equal(later.error.code, -32001);
    assert.match(later.error.message, /session\/load/);
    assert.equal(invocations(log).length, runs, 'no gemini was started for the refused turn');
  } finally {
    await adapter.close();
  }
  // The control: with the variable set, the same later turn loads the session and runs.
  const again = fresh();
  const driven = startAdapter(again.store, again.log, { GEMINI_CLI_ADAPTER_ACP_LOAD: '1' });
  try {
    await driven.request('initialize', { protocol_version: '1.0', environment: { model_endpoint: 'http://127.0.0.1:9', mcp_servers: [{ name: 'harness', url: server.url }], store_dir: again.store, clock: 'harness' } });
    const start = (await driven.request('instance/start', { ...root(1), approval_policy: 'on-request', tools: ['ASKS'] })).result;
    await driven.request('instance/turn', { instance: start.instance, input: 'nothing to call' });
    const later = (await driven.request('instance/turn', { instance: start.instance, input: 'nothing to call' })).result;
    assert.equal(later.outcome, 'ok');
    assert.equal(invocations(again.log).filter((i) => i.acp).length, 2, 'both turns ran gemini --acp');
  } finally {
    await driven.close();
    server.close();
  }
});

test('a role whose default names tools is an agent definition listing Gemini CLI\'s names of them; unserved tools are refused', async () => {
  const server = await toolServer([tool('read_notes', 'read'), tool('write_notes', 'file-write')]);
  const { store, log } = fresh();
  const adapter = startAdapter(store, log);
  try {
    await adapter.request('initialize', { protocol_version: '1.0', environment: { model_endpoint: 'http://127.0.0.1:9', mcp_servers: [{ name: 'harness', url: server.url }], store_dir: store, clock: 'harness' } });
    assert.equal((await adapter.request('host/configure', { roles: { scout: { tools: ['read_notes'] } } })).result.outcome, 'ok');
    const agent = readFileSync(join(store, 'gemini-cli', 'home', '.gemini', 'agents', 'scout.md'), 'utf8');
    assert.match(agent, /tools:\n {2}- mcp_harness_read_notes\n---/);
    const refused = await adapter.request('host/configure', { roles: { ghost: { tools: ['nothing_served'] } } });
    assert.equal(refused.error.code, -32001);
  } finally {
    await adapter.close();
    server.close();
  }
});

test('a session resumed into a second file is read whole: its subagents from every file of its id', async () => {
  const { readStore } = await import('../lib/gemini.mjs');
  const { mkdirSync, writeFileSync } = await import('node:fs');
  const dir = mkdtempSync(join(tmpdir(), 'gemini-store-'));
  const chats = join(dir, 'tmp', 'repo', 'chats');
  mkdirSync(chats, { recursive: true });
  const header = (startTime) => ({ sessionId: 's-1', startTime, kind: 'main' });
  const spawnCall = (n) => ({
    id: `m-${n}`, type: 'gemini', content: '',
    toolCalls: [{ id: `invoke_agent__harness_spawn_${n}`, name: 'invoke_agent', agentId: `agent-${n}`, status: 'success', args: { agent_name: 'worker' } }],
  });
  // As Gemini CLI 0.61.0 writes it: the resumed file goes on growing, and a
  // later file under the same id holds only the start-up context.
  // The resumed history, written again, no longer carries the first call.
  const rewritten = { $set: { messages: [{ ...spawnCall(0), toolCalls: undefined }] } };
  writeFileSync(join(chats, 'session-2026-12-02T14-09-s1.jsonl'), [header('2026-12-02T14:09:00Z'), spawnCall(0), { $set: { sessionId: 's-1' } }, rewritten, spawnCall(3)]
    .map((e) => JSON.stringify(e)).join('\n'));
  writeFileSync(join(chats, 'session-2026-12-02T14-10-s1.jsonl'), [header('2026-12-02T14:10:00Z'), { $set: { messages: [{ id: 'ctx', type: 'user', content: [{ text: '<session_context>' }] }] } }]
    .map((e) => JSON.stringify(e)).join('\n'));
  const session = readStore(dir).get('s-1');
  assert.ok(session.answered);
  assert.deepEqual(session.subagents.map((s) => s.callId), ['harness_spawn_0', 'harness_spawn_3']);
  assert.equal(session.path, join(chats, 'session-2026-12-02T14-09-s1.jsonl'));
  rmSync(dir, { recursive: true, force: true });
});

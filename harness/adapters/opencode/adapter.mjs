#!/usr/bin/env node
// delegation-harness adapter for opencode: speaks host protocol v1 on stdio and drives `opencode serve` over its HTTP API.
//
// Usage: node adapter.mjs            (the harness runs it: --host 'node harness/adapters/opencode/adapter.mjs')
//        node adapter.mjs --install  (install the pinned opencode into the cache and exit)
// See README.md beside this file for what maps to what.

import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { CODES, RpcError, serve, logNotification } from './lib/rpc.mjs';
import {
  ensureOpencode, isolatedEnv, opencodeConfig, writeOpencodeFiles, OpencodeServer,
  readJson, writeAtomic, PROVIDER_ID, MODEL_ID, seedConfig, saveSeed, seedInstalled,
} from './lib/opencode.mjs';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { sessionPermission, turnResult, liveState, childCeiling } from './lib/mapping.mjs';

const PROTOCOL_VERSION = '1.0';
/** The subagent role every run knows besides `host/configure`'s roles: the harness's conventional child role. */
const DEFAULT_ROLES = ['worker'];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const denied = (reason, detail) => ({ outcome: 'denied', reason, ...(detail ? { detail } : {}) });
const needString = (params, key) => {
  if (!params || typeof params[key] !== 'string') throw new RpcError(CODES.INVALID_PARAMS, `params.${key} must be a string`);
  return params[key];
};

export class Adapter {
  constructor({ env = process.env, notify = () => {}, turnTimeoutMs, serverGraceMs } = {}) {
    this.env = env;
    this.notify = notify;
    this.turnTimeoutMs = turnTimeoutMs ?? Number(env.OPENCODE_ADAPTER_TURN_TIMEOUT_MS || 25000);
    this.serverGraceMs = serverGraceMs ?? 1000;
    // opencode serve needs 6-9 s to answer on this 2-core machine when idle and
    // more than 20 s under load; the harness's own step deadline
    // (--step-timeout-ms) is the real bound, so this one only catches a hang.
    this.readyTimeoutMs = Number(env.OPENCODE_ADAPTER_READY_TIMEOUT_MS || 90000);
    this.initialized = false;
    this.server = null;
    this.serverConfigKey = null;
  }

  log(level, message) {
    process.stderr.write(`[adapter] ${level}: ${message}\n`);
    this.notify(level, message);
  }

  // ---- durable adapter state (what opencode itself does not keep) --------------------------

  get statePath() { return join(this.storeDir, 'opencode-adapter', 'state.json'); }

  loadState() {
    this.state = readJson(this.statePath, { instances: {}, tombstones: {}, configuration: {} });
  }

  saveState() { writeAtomic(this.statePath, JSON.stringify(this.state, null, 2) + '\n'); }

  /** opencode's subagent_depth: the deepest delegation any root asked for (at least 1, opencode's default). */
  subagentDepth() {
    const depths = Object.values(this.state.instances).filter((i) => !i.parent).map((i) => i.requested_depth ?? 2);
    return Math.max(1, ...depths);
  }

  roles() {
    return [...new Set([...DEFAULT_ROLES, ...Object.keys(this.state.configuration.roles || {})])].sort();
  }

  /** Starts opencode, or restarts it when the configuration it must run with changed. */
  async ensureServer() {
    const config = opencodeConfig({ modelEndpoint: this.modelEndpoint, subagentDepth: this.subagentDepth(), roles: this.roles() });
    const key = JSON.stringify(config);
    if (this.server && this.serverConfigKey === key) return this.server;
    if (this.server) {
      this.log('info', 'opencode configuration changed: restarting opencode serve');
      await this.server.stop({ graceMs: this.serverGraceMs });
      this.server = null;
    }
    const bin = ensureOpencode({ env: this.env, log: (l, m) => this.log(l, m) });
    const env = isolatedEnv(this.storeDir, this.env);
    const seeded = this.env.OPENCODE_ADAPTER_BIN ? true : seedConfig(this.env, env);
    if (!seeded) this.log('warn', 'no config seed: opencode installs @opencode-ai/plugin with npm now (slow); run `node adapter.mjs --install` once');
    const cwd = writeOpencodeFiles(this.storeDir, env, config);
    const server = new OpencodeServer({ ...bin, env, cwd, log: (l, m) => this.log(l, m) });
    await server.start({ readyTimeoutMs: seeded ? this.readyTimeoutMs : Math.max(this.readyTimeoutMs, 120000) });
    if (!seeded && seedInstalled(env)) saveSeed(this.env, env);
    this.server = server;
    this.serverConfigKey = key;
    this.log('info', `opencode ${bin.version} serving ${cwd} at ${server.url} (subagent_depth ${config.subagent_depth})`);
    return server;
  }

  async shutdown() {
    if (this.server) await this.server.stop({ graceMs: this.serverGraceMs });
    this.server = null;
  }

  async api(method, path, body, options) {
    const server = await this.ensureServer();
    const res = await server.call(method, path, body, options);
    return res;
  }

  async apiOk(method, path, body, options) {
    const res = await this.api(method, path, body, options);
    if (res.status < 200 || res.status >= 300) {
      throw new RpcError(CODES.HOST_FAILURE, `opencode ${method} ${path} answered ${res.status}: ${JSON.stringify(res.body).slice(0, 500)}`);
    }
    return res.body;
  }

  // ---- sessions ----------------------------------------------------------------------------

  /** Every session opencode has, children included (walked from each listed session). */
  async allSessions() {
    const listed = await this.apiOk('GET', '/session');
    const byId = new Map();
    const queue = Array.isArray(listed) ? [...listed] : [];
    while (queue.length) {
      const s = queue.shift();
      if (!s || byId.has(s.id)) continue;
      byId.set(s.id, s);
      const kids = await this.apiOk('GET', `/session/${encodeURIComponent(s.id)}/children`);
      if (Array.isArray(kids)) queue.push(...kids);
    }
    return byId;
  }

  async session(id) {
    const res = await this.api('GET', `/session/${encodeURIComponent(id)}`);
    return res.status === 200 ? res.body : null;
  }

  /** The ceiling the adapter configured for a session: recorded at start, or derived from its parent. */
  ceilingOf(id, sessions) {
    const known = this.state.instances[id];
    if (known && known.ceiling) return this.enforced(known);
    const parent = sessions.get(id)?.parentID;
    if (parent) return childCeiling(this.ceilingOf(parent, sessions));
    return null;
  }

  /** A root's recorded ceiling, with the delegation depth opencode really enforces now. */
  enforced(instance) {
    if (instance.parent) return instance.ceiling;
    const depth = (instance.requested_depth ?? 2) === 0 ? 0 : this.subagentDepth();
    return { ...instance.ceiling, delegation_depth: depth };
  }

  /** Records sessions that appeared below known ones (children the model spawned). */
  registerNew(sessions) {
    let changed = false;
    const visit = (id) => {
      if (this.state.instances[id] || this.state.tombstones[id]) return;
      const s = sessions.get(id);
      if (!s || !s.parentID) return;
      visit(s.parentID);
      const parentCeiling = this.ceilingOf(s.parentID, sessions);
      if (!parentCeiling) return;
      this.state.instances[id] = {
        parent: s.parentID,
        role: s.agent || (s.title && (s.title.match(/\(@([^ )]+) subagent\)/) || [])[1]) || 'subagent',
        model: MODEL_ID,
        requested: {},
        ceiling: childCeiling(parentCeiling),
      };
      changed = true;
    };
    for (const id of sessions.keys()) visit(id);
    if (changed) this.saveState();
  }

  // ---- methods -----------------------------------------------------------------------------

  async handle(method, params) {
    if (method === 'initialize') return this.initialize(params);
    if (!this.initialized) throw new RpcError(CODES.NOT_INITIALIZED, `${method} before initialize`);
    switch (method) {
      case 'host/configure': return this.configure(params);
      case 'instance/start': return this.start(params);
      case 'instance/turn': return this.turn(params);
      case 'instance/close': return this.terminate(params, 'closed');
      case 'instance/cancel': return this.terminate(params, 'cancelled');
      case 'state/observe': return this.observe();
      default:
        throw new RpcError(CODES.METHOD_NOT_FOUND, `${method}: opencode has no equivalent this adapter can drive honestly (see README.md)`);
    }
  }

  async initialize(params) {
    const environment = params && params.environment;
    if (!environment || typeof environment.store_dir !== 'string' || typeof environment.model_endpoint !== 'string') {
      throw new RpcError(CODES.INVALID_PARAMS, 'initialize needs environment.store_dir and environment.model_endpoint');
    }
    const version = String(params.protocol_version || '');
    if (!/^1(\.|$)/.test(version)) throw new RpcError(CODES.UNSUPPORTED_VERSION, `protocol ${version} is not 1.x`);
    this.storeDir = environment.store_dir;
    this.modelEndpoint = environment.model_endpoint;
    this.loadState();
    const bin = ensureOpencode({ env: this.env, log: (l, m) => this.log(l, m) });
    this.initialized = true;
    return {
      host: { name: 'opencode', version: bin.version },
      protocol_version: PROTOCOL_VERSION,
      // nested-delegation: children call `task` too (bounded by subagent_depth);
      // restart: sessions live in opencode's SQLite database under store_dir.
      capabilities: ['nested-delegation', 'restart'],
    };
  }

  async configure(params) {
    const config = params || {};
    if (config.authorizer_required) {
      throw new RpcError(CODES.UNSUPPORTED_OPTION, 'opencode cannot consult an external authorizer before creating a child');
    }
    this.state.configuration = config;
    this.saveState();
    await this.ensureServer();
    return { outcome: 'ok' };
  }

  async start(params) {
    const role = needString(params, 'role');
    needString(params, 'cwd');
    if (params.tools && params.tools.length > 0) {
      throw new RpcError(CODES.UNSUPPORTED_OPTION, 'sealed MCP tools are not supported by this adapter (no `mcp` capability)');
    }
    if ((params.provider ?? 'harness') !== 'harness') throw new RpcError(CODES.UNSUPPORTED_OPTION, `provider ${params.provider}: only the harness's model endpoint is configured`);
    if ((params.model ?? MODEL_ID) !== MODEL_ID) throw new RpcError(CODES.UNSUPPORTED_OPTION, `model ${params.model}: only ${MODEL_ID} is configured`);
    const sandbox = params.sandbox;
    if (sandbox && typeof sandbox === 'object' && sandbox.external) {
      throw new RpcError(CODES.UNSUPPORTED_OPTION, 'opencode has no external sandboxes');
    }
    const depth = params.delegation_depth ?? 2;
    const ceiling = {
      sandbox,
      approval_policy: params.approval_policy,
      tools: {},
      cwd: params.cwd,
      provider: 'harness',
      delegation_depth: depth,
    };
    const permission = sessionPermission(params);
    // Record the root first so subagent_depth covers it (a restart of opencode serve when it grows).
    const pending = { role, model: MODEL_ID, ceiling, requested_depth: depth };
    const previousDepth = this.subagentDepth();
    this.state.instances.__pending__ = pending;
    let session;
    try {
      if (this.subagentDepth() !== previousDepth) this.log('info', `subagent_depth ${previousDepth} -> ${this.subagentDepth()}`);
      session = await this.apiOk('POST', '/session', { title: `harness ${role}`, permission });
    } finally {
      delete this.state.instances.__pending__;
    }
    this.state.instances[session.id] = pending;
    this.saveState();
    return { outcome: 'ok', instance: session.id, effective: this.enforced(pending), detail: `opencode session ${session.id}; permission ${JSON.stringify(permission)}` };
  }

  async messages(id) {
    const list = await this.apiOk('GET', `/session/${encodeURIComponent(id)}/message`);
    return Array.isArray(list) ? list : [];
  }

  async children(id) {
    const list = await this.apiOk('GET', `/session/${encodeURIComponent(id)}/children`);
    return Array.isArray(list) ? list : [];
  }

  async descendants(id) {
    const out = [];
    const queue = [id];
    while (queue.length) {
      const kids = await this.children(queue.shift());
      for (const k of kids) { out.push(k); queue.push(k.id); }
    }
    return out;
  }

  async turn(params) {
    const id = needString(params, 'instance');
    const input = needString(params, 'input');
    if (this.state.tombstones[id]) return denied('instance_terminal', `instance ${id} is ${this.state.tombstones[id]}`);
    if (!(await this.session(id))) return denied('instance_unknown', `opencode has no session ${id}`);
    const before = await this.messages(id);
    const knownChildren = new Set((await this.descendants(id)).map((c) => c.id));
    const res = await this.api('POST', `/session/${encodeURIComponent(id)}/prompt_async`, { parts: [{ type: 'text', text: input }] });
    if (res.status === 404) return denied('instance_unknown', `opencode has no session ${id}`);
    if (res.status < 200 || res.status >= 300) throw new RpcError(CODES.HOST_FAILURE, `prompt_async answered ${res.status}: ${JSON.stringify(res.body).slice(0, 300)}`);

    const failure = await this.waitIdle(id, before.length);
    const after = await this.messages(id);
    const newMessages = after.slice(before.length);
    const all = await this.descendants(id);
    const newChildren = all.filter((c) => !knownChildren.has(c.id));
    const sessions = await this.allSessions();
    this.registerNew(sessions);
    return turnResult({ instance: id, newMessages, newChildren, failure });
  }

  /**
   * Waits until no session is busy and the instance's last message is a
   * finished assistant message. A session in `retry` means the model
   * endpoint failed: the turn is aborted and reported as model_failed.
   * Answers a failure text, or null.
   *
   * opencode stores the prompt at once but may turn the session busy only
   * seconds later on a loaded machine, so "not busy and no answer yet" means
   * "not started yet" until the session was seen busy; only a session that
   * ran (was busy) and went idle without an answer is a failure. One that
   * never starts runs into the turn deadline (-32002).
   */
  async waitIdle(id, countBefore) {
    const deadline = Date.now() + this.turnTimeoutMs;
    let ran = false;
    while (Date.now() < deadline) {
      const status = (await this.apiOk('GET', '/session/status')) || {};
      const entries = Object.entries(status);
      const retrying = entries.find(([, s]) => s && s.type === 'retry');
      if (retrying) {
        const [sid, s] = retrying;
        this.log('warn', `session ${sid} is retrying the model (${s.message}); aborting the turn`);
        await this.api('POST', `/session/${encodeURIComponent(id)}/abort`);
        if (sid !== id) await this.api('POST', `/session/${encodeURIComponent(sid)}/abort`);
        await this.settle();
        return `model request failed: ${s.message}`;
      }
      const busy = entries.some(([, s]) => s && s.type === 'busy');
      if (busy) ran = true;
      if (!busy) {
        const list = await this.messages(id);
        const last = list[list.length - 1];
        const done = list.length > countBefore && last && last.info.role === 'assistant' && last.info.time && last.info.time.completed;
        if (done) return null;
        if (ran && list.length > countBefore && last && last.info.role === 'user') {
          return 'opencode ran the prompt and went idle without answering it';
        }
      }
      await sleep(100);
    }
    await this.api('POST', `/session/${encodeURIComponent(id)}/abort`);
    throw new RpcError(CODES.HOST_FAILURE, `turn on ${id} did not finish within ${this.turnTimeoutMs} ms; aborted`);
  }

  async settle(ms = 3000) {
    const deadline = Date.now() + ms;
    while (Date.now() < deadline) {
      const status = (await this.apiOk('GET', '/session/status')) || {};
      if (!Object.values(status).some((s) => s && (s.type === 'busy' || s.type === 'retry'))) return;
      await sleep(100);
    }
  }

  /** close and cancel: opencode's only terminal operation is deleting the session (abort first). */
  async terminate(params, state) {
    const id = needString(params, 'instance');
    if (this.state.tombstones[id]) return denied('instance_terminal', `instance ${id} is already ${this.state.tombstones[id]}`);
    if (!(await this.session(id))) return denied('instance_unknown', `opencode has no session ${id}`);
    const gone = [id, ...(await this.descendants(id)).map((c) => c.id)];
    await this.api('POST', `/session/${encodeURIComponent(id)}/abort`);
    await this.apiOk('DELETE', `/session/${encodeURIComponent(id)}`);
    const sessions = new Map(gone.map((g) => [g, { id: g }]));
    for (const g of gone) {
      if (!this.state.instances[g]) continue;
      this.state.instances[g].ceiling = this.ceilingOf(g, sessions) || this.state.instances[g].ceiling;
      this.state.tombstones[g] = g === id ? state : 'closed';
    }
    this.saveState();
    return { outcome: 'ok', instance: id, detail: `opencode session deleted${gone.length > 1 ? ` with ${gone.length - 1} descendant(s)` : ''}` };
  }

  async observe() {
    const sessions = await this.allSessions();
    this.registerNew(sessions);
    const status = (await this.apiOk('GET', '/session/status')) || {};
    const instances = [];
    for (const [id, s] of sessions) {
      const known = this.state.instances[id];
      const ceiling = this.ceilingOf(id, sessions);
      const entry = {
        id,
        state: liveState(status[id]),
        role: known ? known.role : (s.agent || 'unknown'),
        model: known ? known.model : MODEL_ID,
        ceiling: ceiling || { sandbox: 'full-access', approval_policy: 'never', tools: {}, cwd: '/', provider: PROVIDER_ID, delegation_depth: this.subagentDepth() },
      };
      if (s.parentID) entry.parent = s.parentID;
      if (known && known.requested) entry.requested = known.requested;
      instances.push(entry);
    }
    for (const [id, state] of Object.entries(this.state.tombstones)) {
      if (sessions.has(id)) continue;
      const known = this.state.instances[id];
      if (!known) continue;
      const entry = { id, state, role: known.role, model: known.model, ceiling: this.enforced(known) };
      if (known.parent) entry.parent = known.parent;
      if (known.requested) entry.requested = known.requested;
      instances.push(entry);
    }
    return { outcome: 'ok', observed: { now: 0, auto_approve: false, instances } };
  }
}

/**
 * `--install`: installs the pinned opencode, then starts it once in a scratch
 * store until it has installed its config dependencies, and keeps those as
 * the seed every store is given (no network during runs).
 */
export async function install({ env = process.env } = {}) {
  const say = (m) => process.stderr.write(`${m}\n`);
  const bin = ensureOpencode({ env, log: (l, m) => say(`${l}: ${m}`) });
  say(`opencode ${bin.version}: ${bin.command}`);
  const scratch = mkdtempSync(join(tmpdir(), 'opencode-adapter-seed-'));
  try {
    const isolated = isolatedEnv(scratch, env);
    if (seedConfig(env, isolated)) { say('config seed already present'); return; }
    const cwd = writeOpencodeFiles(scratch, isolated, opencodeConfig({ modelEndpoint: 'http://127.0.0.1:9', subagentDepth: 1, roles: DEFAULT_ROLES }));
    const server = new OpencodeServer({ ...bin, env: isolated, cwd, log: () => {} });
    await server.start({ readyTimeoutMs: 300000 });
    const deadline = Date.now() + 300000;
    while (!seedInstalled(isolated) && Date.now() < deadline) await sleep(500);
    await server.stop();
    if (!saveSeed(env, isolated)) throw new Error('opencode did not install @opencode-ai/plugin into its config folder');
    say('config seed saved');
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** Runs the adapter on stdin/stdout until stdin ends, then stops opencode. */
export async function main({ input = process.stdin, output = process.stdout, env = process.env } = {}) {
  const adapter = new Adapter({ env, notify: (level, message) => output.write(logNotification(level, message)) });
  const onSignal = (signal) => {
    adapter.server && adapter.server.killNow();
    process.exit(signal === 'SIGTERM' ? 143 : 130);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  process.on('exit', () => adapter.server && adapter.server.killNow());
  await serve({ input, output, handle: (m, p) => adapter.handle(m, p), log: (l, m) => adapter.log(l, m) });
  await adapter.shutdown();
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  if (process.argv.includes('--install')) {
    install().then(() => process.exit(0), (e) => {
      process.stderr.write(`install failed: ${e.stack || e}\n`);
      process.exit(1);
    });
  } else {
    main().then(() => process.exit(0), (e) => {
      process.stderr.write(`[adapter] fatal: ${e.stack || e}\n`);
      process.exit(1);
    });
  }
}

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
import {
  sessionPermission, turnResult, liveState, answeredCount, childCeiling, applyPermission,
  toolCallReport, pendingToolCall,
} from './lib/mapping.mjs';
import { toolCatalogue, digestOf } from './lib/mcp.mjs';

const PROTOCOL_VERSION = '1.0';
/** The subagent role every run knows besides `host/configure`'s roles: the harness's conventional child role. */
const DEFAULT_ROLES = ['worker'];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const denied = (reason, detail, inferred) => ({ outcome: 'denied', reason, ...(detail ? { detail } : {}), ...(inferred ? { inferred } : {}) });
const needString = (params, key) => {
  if (!params || typeof params[key] !== 'string') throw new RpcError(CODES.INVALID_PARAMS, `params.${key} must be a string`);
  return params[key];
};
const unsupported = (message) => new RpcError(CODES.UNSUPPORTED_OPTION, message);

export class Adapter {
  constructor({ env = process.env, notify = () => {}, turnTimeoutMs, serverGraceMs } = {}) {
    this.env = env;
    this.notify = notify;
    this.turnTimeoutMs = turnTimeoutMs ?? Number(env.OPENCODE_ADAPTER_TURN_TIMEOUT_MS || 120000);
    this.serverGraceMs = serverGraceMs ?? 1000;
    // How long a waiting turn goes without looking when opencode's event
    // stream is open but silent: a lost event costs at most this much.
    this.pollFallbackMs = Number(env.OPENCODE_ADAPTER_POLL_FALLBACK_MS || 3000);
    // opencode serve needs 6-9 s to answer on this 2-core machine when idle and
    // 25-30 s at load 11-14; the harness's own step deadline
    // (--step-timeout-ms) is the real bound, so this one only catches a hang.
    this.readyTimeoutMs = Number(env.OPENCODE_ADAPTER_READY_TIMEOUT_MS || 90000);
    this.initialized = false;
    this.server = null;
    this.serverConfigKey = null;
    this.mcpServers = [];
    this.catalogue = new Map();
  }

  log(level, message) {
    process.stderr.write(`[adapter] ${level}: ${message}\n`);
    this.notify(level, message);
  }

  // ---- durable adapter state (what opencode itself does not keep) --------------------------

  get statePath() { return join(this.storeDir, 'opencode-adapter', 'state.json'); }

  loadState() {
    this.state = readJson(this.statePath, { instances: {}, configuration: {} });
    // Stores written before tombstones were dropped (see `terminate`) still carry them; they are not read.
    delete this.state.tombstones;
  }

  saveState() { writeAtomic(this.statePath, JSON.stringify(this.state, null, 2) + '\n'); }

  /** opencode's subagent_depth: the deepest delegation any root asked for (at least 1, opencode's default). */
  subagentDepth() {
    const depths = Object.values(this.state.instances).filter((i) => !i.parent).map((i) => i.requested_depth ?? 2);
    return Math.max(1, ...depths);
  }

  /** Role name -> role default authority: the harness's `worker` plus `host/configure`'s roles. */
  roles() {
    const configured = this.state.configuration.roles || {};
    const out = {};
    for (const name of [...new Set([...DEFAULT_ROLES, ...Object.keys(configured)])].sort()) out[name] = configured[name] || {};
    return out;
  }

  config() {
    return opencodeConfig({
      modelEndpoint: this.modelEndpoint, subagentDepth: this.subagentDepth(), roles: this.roles(), mcpServers: this.mcpServers,
      served: [...this.catalogue.values()],
    });
  }

  /**
   * Starts opencode, or makes it take a changed configuration. A change
   * (subagent_depth grows when a deeper root starts) is written to
   * opencode.json and taken in by disposing opencode's instance, which it
   * rebuilds from the files on the next request: 2-5 s, where a new
   * `opencode serve` costs 25-30 s under load.
   */
  async ensureServer() {
    const config = this.config();
    const key = JSON.stringify(config);
    if (this.server && this.serverConfigKey === key) return this.server;
    const env = isolatedEnv(this.storeDir, this.env);
    if (this.server) {
      writeOpencodeFiles(this.storeDir, env, config);
      // The event stream belongs to the instance being disposed; the next wait opens it again.
      this.server.closeEvents();
      const res = await this.server.call('POST', '/instance/dispose', undefined, { timeoutMs: 30000 }).catch((e) => ({ status: 0, body: String(e) }));
      if (res.status >= 200 && res.status < 300) {
        this.serverConfigKey = key;
        this.log('info', `opencode configuration changed: instance disposed, reloads opencode.json (subagent_depth ${config.subagent_depth})`);
        return this.server;
      }
      this.log('warn', `instance/dispose answered ${res.status}: restarting opencode serve`);
      await this.server.stop({ graceMs: this.serverGraceMs });
      this.server = null;
    }
    const bin = ensureOpencode({ env: this.env, log: (l, m) => this.log(l, m) });
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
    return server.call(method, path, body, options);
  }

  async apiOk(method, path, body, options) {
    const res = await this.api(method, path, body, options);
    if (res.status < 200 || res.status >= 300) {
      throw new RpcError(CODES.HOST_FAILURE, `opencode ${method} ${path} answered ${res.status}: ${JSON.stringify(res.body).slice(0, 500)}`);
    }
    return res.body;
  }

  /** The tools the harness's MCP servers serve now, with opencode's names for them. */
  async refreshCatalogue() {
    if (this.mcpServers.length === 0) return this.catalogue;
    try {
      this.catalogue = await toolCatalogue(this.mcpServers);
    } catch (e) {
      throw new RpcError(CODES.HOST_FAILURE, `could not list the harness's MCP tools: ${e.message}`);
    }
    return this.catalogue;
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

  /**
   * An instance's ceiling. A root's is what it was started with (opencode
   * holds only its permission rules, not sandbox roots, cwd or approval
   * policy). A child's starts from its parent's with one level of delegation
   * less, a fork's from its origin's; then every axis opencode's own rules
   * decide (its agent's and its session's, `applyPermission`) is read from
   * them. Reported as inferred either way: part of it is the adapter's record.
   */
  ceilingOf(id, sessions) {
    const known = this.state.instances[id];
    if (known && known.ceiling && !known.parent && !known.forkOf) return this.enforced(known);
    const session = sessions.get(id);
    const origin = known && known.forkOf;
    const parent = (session && session.parentID) || (known && known.parent);
    let base = null;
    if (origin) base = this.ceilingOf(origin, sessions);
    else if (parent) {
      const up = this.ceilingOf(parent, sessions);
      base = up && childCeiling(up);
    }
    if (!base) return known && known.ceiling ? known.ceiling : null;
    if (!session) return (known && known.ceiling) || base;
    const role = (known && known.role) || session.agent;
    return applyPermission(base, [...this.agentRules(role), ...(session.permission || [])], this.catalogue);
  }

  /** The permission rules opencode.json gives an agent (a configured role), as a ruleset. */
  agentRules(role) {
    const agent = role && this.config().agent[role];
    if (!agent || !agent.permission) return [];
    return Object.entries(agent.permission).map(([permission, action]) => ({ permission, pattern: '*', action }));
  }

  /** A root's recorded ceiling, with the delegation depth opencode really enforces now. */
  enforced(instance) {
    const depth = (instance.requested_depth ?? 2) === 0 ? 0 : this.subagentDepth();
    return { ...instance.ceiling, delegation_depth: depth };
  }

  /** Records sessions that appeared below known ones (children the model spawned). */
  registerNew(sessions) {
    let changed = false;
    const visit = (id) => {
      if (this.state.instances[id]) return;
      const s = sessions.get(id);
      if (!s || !s.parentID) return;
      visit(s.parentID);
      if (!this.state.instances[s.parentID]) return;
      this.state.instances[id] = {
        parent: s.parentID,
        role: s.agent || (s.title && (s.title.match(/\(@([^ )]+) subagent\)/) || [])[1]) || 'subagent',
        model: MODEL_ID,
      };
      this.state.instances[id].ceiling = this.ceilingOf(id, sessions);
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
      case 'instance/fork': return this.fork(params);
      case 'approval/answer': return this.answer(params);
      case 'instance/wait': return this.wait(params);
      case 'instance/resume': return this.resume(params);
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
    this.mcpServers = Array.isArray(environment.mcp_servers) ? environment.mcp_servers.filter((s) => s && s.name && s.url) : [];
    this.loadState();
    const bin = ensureOpencode({ env: this.env, log: (l, m) => this.log(l, m) });
    // The served tools name the role rules in opencode.json and the tools of
    // every ceiling; after a restart the harness observes before it sends
    // `host/configure`, so they are listed now, not only at configure.
    await this.refreshCatalogue().catch((e) => this.log('warn', `${e.message}; the tools are listed again at host/configure`));
    this.initialized = true;
    return {
      host: { name: 'opencode', version: bin.version },
      protocol_version: PROTOCOL_VERSION,
      // nested-delegation: children call `task` too (bounded by subagent_depth);
      // restart: sessions live in opencode's SQLite database under store_dir;
      // mcp: the harness's servers are opencode remote MCP servers;
      // fork: opencode's own POST /session/{id}/fork;
      // wait: opencode's POST /api/session/{id}/wait (blocks until the session is idle);
      // model-lifecycle-tools: the model gives a child input with `task` and its `task_id`.
      capabilities: ['nested-delegation', 'restart', 'mcp', 'fork', 'wait', 'model-lifecycle-tools'],
    };
  }

  async configure(params) {
    const config = params || {};
    if (config.authorizer_required) throw unsupported('opencode cannot consult an external authorizer before creating a child');
    // Refused rather than accepted and ignored: opencode has neither.
    if (config.strict_mode) throw unsupported('strict_mode: opencode has no sandbox, so it cannot refuse an unsandboxed (full-access) child');
    if (config.auto_approve) throw unsupported('auto_approve: opencode has no persistence-gated automatic approval (its `allow` rules run a tool unasked, with no decision committed first)');
    for (const [name, role] of Object.entries(config.roles || {})) {
      if (role && (role.tools || (role.provider && role.provider !== PROVIDER_ID) || (role.sandbox && role.sandbox.external))) {
        throw unsupported(`role ${name}: only sandbox, network and delegation depth defaults become opencode agent rules`);
      }
    }
    this.state.configuration = config;
    this.saveState();
    // After a restart the tools must be known again to name calls back (a
    // call by MCP name after a restart was reported refused, not unsupported).
    if (this.mcpServers.length) await this.refreshCatalogue();
    await this.ensureServer();
    return { outcome: 'ok' };
  }

  async start(params) {
    const role = needString(params, 'role');
    needString(params, 'cwd');
    if ((params.provider ?? 'harness') !== 'harness') throw unsupported(`provider ${params.provider}: only the harness's model endpoint is configured`);
    if ((params.model ?? MODEL_ID) !== MODEL_ID) throw unsupported(`model ${params.model}: only ${MODEL_ID} is configured`);
    const sandbox = params.sandbox;
    if (sandbox && typeof sandbox === 'object' && sandbox.external) throw unsupported('opencode has no external sandboxes');
    const names = params.tools || [];
    if (names.length && this.mcpServers.length === 0) throw unsupported('tools to seal but no MCP servers in the environment');
    const catalogue = names.length ? await this.refreshCatalogue() : this.catalogue;
    const sealed = [];
    for (const name of names) {
      const entry = catalogue.get(name);
      if (!entry) return denied('projection_missing', `no MCP server serves exactly one tool named ${name}`);
      sealed.push(entry);
    }
    const depth = params.delegation_depth ?? 2;
    const ceiling = {
      sandbox,
      approval_policy: params.approval_policy,
      tools: Object.fromEntries(sealed.map((t) => [t.name, t.digest])),
      cwd: params.cwd,
      provider: 'harness',
      delegation_depth: depth,
    };
    const permission = sessionPermission(params, { tools: sealed, served: [...catalogue.values()] });
    // Record the root first so subagent_depth covers it.
    const pending = { role, model: MODEL_ID, ceiling, requested_depth: depth };
    this.state.instances.__pending__ = pending;
    let session;
    try {
      session = await this.apiOk('POST', '/session', { title: `harness ${role}`, permission });
    } finally {
      delete this.state.instances.__pending__;
    }
    this.state.instances[session.id] = pending;
    this.saveState();
    return {
      outcome: 'ok', instance: session.id, effective: this.enforced(pending),
      // opencode holds the session's permission rules only; sandbox roots,
      // cwd, approval policy and tool digests are the adapter's record.
      inferred: ['effective'],
      detail: `opencode session ${session.id}; permission ${JSON.stringify(session.permission || permission)}`,
    };
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

  /**
   * The refusal for an instance opencode does not have: `instance_unknown`,
   * opencode's own 404 for the session. A closed or cancelled instance is one
   * opencode deleted, and opencode answers for it exactly as for one that
   * never existed: the adapter does not dress that up as `instance_terminal`
   * from a record of its own.
   */
  async refusal(id) {
    if (!(await this.session(id))) return denied('instance_unknown', `opencode has no session ${id}`);
    return null;
  }

  async turn(params) {
    const id = needString(params, 'instance');
    const input = needString(params, 'input');
    const session = await this.session(id);
    if (!session) return denied('instance_unknown', `opencode has no session ${id}`);
    const before = await this.messages(id);
    const knownChildren = new Set((await this.descendants(id)).map((c) => c.id));
    // opencode takes the agent per prompt (its default agent when none is
    // named), so a later turn of a child names the agent (the role) its
    // `task` call created it with; without it a `reviewer` child's next
    // turn ran under the default agent's rules, not its role's.
    const agent = session.parentID && session.agent ? { agent: session.agent } : {};
    const res = await this.api('POST', `/session/${encodeURIComponent(id)}/prompt_async`, { ...agent, parts: [{ type: 'text', text: input }] });
    if (res.status === 404) return denied('instance_unknown', `opencode has no session ${id}`);
    if (res.status < 200 || res.status >= 300) throw new RpcError(CODES.HOST_FAILURE, `prompt_async answered ${res.status}: ${JSON.stringify(res.body).slice(0, 300)}`);
    return this.report(id, before.length, knownChildren);
  }

  /** Waits for the turn on `id` to settle (idle, failed or asking permission) and reports it. */
  async report(id, countBefore, knownChildren) {
    const { failure, pending } = await this.waitIdle(id, countBefore);
    const after = await this.messages(id);
    const newMessages = after.slice(countBefore);
    const all = await this.descendants(id);
    const newChildren = all.filter((c) => !knownChildren.has(c.id));
    const sessions = await this.allSessions();
    this.registerNew(sessions);
    return turnResult({ instance: id, newMessages, newChildren, failure, pending, catalogue: this.catalogue });
  }

  /** opencode's pending permission requests for a session or its descendants. */
  async pendingFor(id) {
    const list = await this.apiOk('GET', '/permission');
    if (!Array.isArray(list) || list.length === 0) return [];
    const family = new Set([id, ...(await this.descendants(id)).map((c) => c.id)]);
    return list.filter((p) => family.has(p.sessionID));
  }

  /**
   * Waits until no session is busy and the instance's last message is a
   * finished assistant message, or opencode asks permission for the
   * instance (or a descendant): that is where a turn stops for a person. A
   * session in `retry` means the model endpoint failed: the turn is aborted
   * and reported as model_failed. Answers `{failure, pending}`.
   *
   * opencode stores the prompt at once but may turn the session busy only
   * seconds later on a loaded machine, so "not busy and no answer yet" means
   * "not started yet" until the session was seen busy; only a session that
   * ran (was busy) and went idle without an answer is a failure. One that
   * never starts runs into the turn deadline (-32002).
   */
  async waitIdle(id, countBefore, { afterAnswer = false } = {}) {
    const deadline = Date.now() + this.turnTimeoutMs;
    let ran = false;
    while (Date.now() < deadline) {
      const server = await this.ensureServer();
      server.watchEvents();
      const seq = server.eventSeq;
      try {
        const settled = await this.pollTurn(id, countBefore, ran, afterAnswer);
        if (settled.ran) ran = true;
        if (settled.result) return settled.result;
      } catch (e) {
        // At load 15+ opencode can leave one poll unanswered for seconds while
        // the turn goes on: only the turn deadline ends the wait.
        if (!(e && (e.name === 'TimeoutError' || e.name === 'AbortError'))) throw e;
        this.log('warn', `opencode did not answer a poll in time (${e.message}); polling on`);
      }
      // Look again when opencode reports a change (or after 3 s without one),
      // not every 100 ms: each look costs opencode CPU the turn needs.
      await server.waitForChange(seq, { fallbackMs: this.pollFallbackMs });
    }
    await this.api('POST', `/session/${encodeURIComponent(id)}/abort`).catch(() => {});
    throw new RpcError(CODES.HOST_FAILURE, `turn on ${id} did not finish within ${this.turnTimeoutMs} ms; aborted`);
  }

  /** One look at a running turn: `{ran, result}` where `result` is set once it settled. */
  async pollTurn(id, countBefore, ranBefore, afterAnswer = false) {
    let ran = ranBefore;
    const status = (await this.apiOk('GET', '/session/status')) || {};
    const entries = Object.entries(status);
    const retrying = entries.find(([, s]) => s && s.type === 'retry');
    if (retrying) {
      const [sid, s] = retrying;
      this.log('warn', `session ${sid} is retrying the model (${s.message}); aborting the turn`);
      await this.api('POST', `/session/${encodeURIComponent(id)}/abort`);
      if (sid !== id) await this.api('POST', `/session/${encodeURIComponent(sid)}/abort`);
      await this.settle();
      return { ran, result: { failure: `model request failed: ${s.message}` } };
    }
    const busy = entries.some(([, s]) => s && s.type === 'busy');
    if (busy) {
      ran = true;
      const asks = await this.pendingFor(id);
      if (asks.length) return { ran, result: { pending: asks[0] } };
    } else {
      const list = await this.messages(id);
      const last = list[list.length - 1];
      const done = list.length > countBefore && last && last.info.role === 'assistant' && last.info.time && last.info.time.completed;
      if (done) return { ran, result: {} };
      // After a person's answer nothing is left to start: the turn was
      // running (busy, waiting on the request) when it was answered, so no
      // busy session means it ended. A denied call ends opencode's loop
      // without another model request (`continue_loop_on_deny` is off by
      // default, read in the 1.18.33 binary), so no new message comes.
      if (afterAnswer) return { ran, result: {} };
      if (ran && list.length > countBefore && last && last.info.role === 'user') {
        return { ran, result: { failure: 'opencode ran the prompt and went idle without answering it' } };
      }
    }
    return { ran };
  }

  async settle(ms = 3000) {
    const deadline = Date.now() + ms;
    while (Date.now() < deadline) {
      const status = (await this.apiOk('GET', '/session/status')) || {};
      if (!Object.values(status).some((s) => s && (s.type === 'busy' || s.type === 'retry'))) return;
      await sleep(100);
    }
  }

  /**
   * A person's answer to an opencode permission request: `allow` is
   * opencode's `once`, `deny` its `reject`. `allow-exact` has no opencode
   * equivalent: `always` approves the request's `always` patterns (`*` for an
   * MCP tool: every later call, any arguments) for the rest of the session.
   */
  async answer(params) {
    const request = needString(params, 'request');
    const decision = needString(params, 'decision');
    const reply = { allow: 'once', deny: 'reject' }[decision];
    if (!reply) throw unsupported(`decision ${decision}: opencode's replies are once, always (every later matching call of the session) and reject; none is one exact call`);
    const list = await this.apiOk('GET', '/permission');
    const permission = Array.isArray(list) && list.find((p) => p.id === request);
    if (!permission) {
      // opencode forgets a permission request once it is answered.
      return denied('event_replayed', `opencode has no pending permission request ${request}`, ['reason']);
    }
    // From now on opencode's list of pending requests lacks one the store
    // had: recorded before the reply, so a restart cannot lose it.
    if (!this.state.approvalsAnswered) {
      this.state.approvalsAnswered = true;
      this.saveState();
    }
    const root = this.rootOf(permission.sessionID);
    const before = await this.messages(root);
    const knownChildren = new Set((await this.descendants(root)).map((c) => c.id));
    const res = await this.api('POST', `/permission/${encodeURIComponent(request)}/reply`, { reply });
    if (res.status === 404) return denied('event_replayed', `opencode no longer has permission request ${request}`, ['reason']);
    if (res.status < 200 || res.status >= 300) throw new RpcError(CODES.HOST_FAILURE, `permission reply answered ${res.status}`);
    const { failure, pending } = await this.waitIdle(root, before.length, { afterAnswer: true });
    if (pending) return { outcome: 'ok', instance: permission.sessionID, tool_call: pendingToolCall(pending, this.catalogue) };
    const part = await this.toolPart(permission);
    const sessions = await this.allSessions();
    this.registerNew(sessions);
    void knownChildren;
    const result = { outcome: 'ok', instance: permission.sessionID };
    if (part) {
      result.tool_call = { ...toolCallReport(part, this.catalogue), approval: request };
      // A refused call is a refused answer (PROTOCOL.md: `deny` is answered
      // `policy_denied`); opencode's own tool part says the person rejected it.
      if (result.tool_call.outcome === 'denied') Object.assign(result, { outcome: 'denied', reason: result.tool_call.reason });
    } else if (failure) result.detail = failure;
    return result;
  }

  /** The root of a known instance's tree (where a turn, and its waiting, runs). */
  rootOf(id) {
    let cur = id;
    for (let i = 0; i < 64 && this.state.instances[cur] && this.state.instances[cur].parent; i++) cur = this.state.instances[cur].parent;
    return cur;
  }

  /** The tool part a permission request was asked for. */
  async toolPart(permission) {
    if (!permission.tool) return null;
    for (const message of await this.messages(permission.sessionID)) {
      for (const part of message.parts || []) {
        if (part.type === 'tool' && part.callID === permission.tool.callID) return part;
      }
    }
    return null;
  }

  /**
   * Blocks until the instance is idle (completed) or terminal. opencode's own
   * wait endpoint blocks on its session loop, so nothing is polled and no
   * model request is made while nothing happens. A deadline on the harness's
   * clock cannot pass here: without `clock` the harness never moves it.
   */
  async wait(params) {
    const id = needString(params, 'instance');
    if (!(await this.session(id))) return denied('instance_unknown', `opencode has no session ${id}`);
    const res = await this.api('POST', `/api/session/${encodeURIComponent(id)}/wait`, undefined, { timeoutMs: this.turnTimeoutMs });
    if (res.status === 404) return denied('instance_unknown', `opencode has no session ${id}`);
    if (res.status < 200 || res.status >= 300) throw new RpcError(CODES.HOST_FAILURE, `session wait answered ${res.status}: ${JSON.stringify(res.body).slice(0, 300)}`);
    return { outcome: 'ok', instance: id, woke: 'event', detail: 'opencode reports the session idle' };
  }

  /**
   * opencode has no resume call: an idle session takes the next prompt as it
   * is, under the rules it holds. So resume checks that opencode still has
   * the session and answers the ceiling those rules give (inferred, as in
   * `state/observe`), without touching it.
   */
  async resume(params) {
    const id = needString(params, 'instance');
    const refused = await this.refusal(id);
    if (refused) return refused;
    const sessions = await this.allSessions();
    this.registerNew(sessions);
    // opencode's idle session looks the same resumed or not; until its next
    // model answer the adapter calls it running, from its own record of the
    // resume, and says so (see observe).
    this.state.resumed = { ...(this.state.resumed || {}), [id]: answeredCount(await this.messages(id)) };
    this.saveState();
    return { outcome: 'ok', instance: id, effective: this.ceilingOf(id, sessions), inferred: ['effective'], detail: 'opencode sessions take a follow-up prompt as they are; nothing to restore' };
  }

  /** opencode's fork: a new session with the messages so far. Its ceiling is the origin's, narrowed by its own rules. */
  async fork(params) {
    const id = needString(params, 'instance');
    const refused = await this.refusal(id);
    if (refused) return refused;
    const res = await this.api('POST', `/session/${encodeURIComponent(id)}/fork`, {});
    if (res.status === 404) return denied('instance_unknown', `opencode has no session ${id}`);
    if (res.status < 200 || res.status >= 300) throw new RpcError(CODES.HOST_FAILURE, `fork answered ${res.status}: ${JSON.stringify(res.body).slice(0, 300)}`);
    const session = res.body;
    const origin = this.state.instances[id] || {};
    const sessions = await this.allSessions();
    this.state.instances[session.id] = { forkOf: id, role: origin.role || session.agent || 'unknown', model: MODEL_ID };
    if (session.parentID) this.state.instances[session.id].parent = session.parentID;
    const ceiling = this.ceilingOf(session.id, sessions);
    this.state.instances[session.id].ceiling = ceiling;
    this.saveState();
    return { outcome: 'ok', instance: session.id, effective: ceiling, inferred: ['effective'], detail: `opencode forked ${id} as ${session.id}; permission ${JSON.stringify(session.permission || [])}` };
  }

  /**
   * close and cancel: opencode's only operation after which a session takes
   * no more prompts is deleting it (abort first); opencode deletes its
   * children with it. Nothing of it is left in opencode to observe, and the
   * adapter keeps no tombstone to stand in for one: a deleted instance is
   * reported as opencode reports it (absent, and `instance_unknown` if
   * addressed). `state` says which of the two was asked, for people.
   */
  async terminate(params, state) {
    const id = needString(params, 'instance');
    const refused = await this.refusal(id);
    if (refused) return refused;
    const gone = (await this.descendants(id)).length;
    await this.api('POST', `/session/${encodeURIComponent(id)}/abort`);
    await this.apiOk('DELETE', `/session/${encodeURIComponent(id)}`);
    return { outcome: 'ok', instance: id, detail: `${state}: opencode session deleted${gone ? ` with ${gone} descendant(s)` : ''}` };
  }

  async observe() {
    const sessions = await this.allSessions();
    this.registerNew(sessions);
    const status = (await this.apiOk('GET', '/session/status')) || {};
    const instances = [];
    for (const [id, s] of sessions) {
      const known = this.state.instances[id];
      const ceiling = this.ceilingOf(id, sessions);
      const messages = await this.messages(id);
      const resumedAt = (this.state.resumed || {})[id];
      const resumedIdle = resumedAt !== undefined && answeredCount(messages) === resumedAt && liveState(status[id], messages) === 'completed';
      const entry = {
        id,
        state: resumedIdle ? 'running' : liveState(status[id], messages),
        role: known ? known.role : (s.agent || 'unknown'),
        model: known ? known.model : MODEL_ID,
        ceiling: ceiling || { sandbox: 'full-access', approval_policy: 'never', tools: {}, cwd: '/', provider: PROVIDER_ID, delegation_depth: this.subagentDepth() },
        inferred: resumedIdle ? ['ceiling', 'state'] : ['ceiling'],
      };
      if (s.parentID) entry.parent = s.parentID;
      instances.push(entry);
    }
    const approvals = [];
    const asks = await this.apiOk('GET', '/permission');
    for (const p of Array.isArray(asks) ? asks : []) {
      const part = await this.toolPart(p);
      const tool = pendingToolCall(p, this.catalogue).tool;
      const entry = this.catalogue.get(tool);
      approvals.push({
        id: p.id, instance: p.sessionID, class: (entry && entry.class) || (p.permission === 'task' ? 'delegation' : 'generic'), tool,
        tool_digest: entry ? entry.digest : digestOf({ name: p.permission }),
        arguments_digest: digestOf((part && part.state && part.state.input) || {}),
        state: 'pending',
      });
    }
    // GET /permission lists pending requests only: their digests are the
    // adapter's, and once a request was answered opencode shows nothing of
    // it (no decision, no dispatch), so the set is then incomplete. Before
    // any request existed, an empty list is opencode's own statement.
    const inferred = approvals.length || this.state.approvalsAnswered ? ['approvals'] : [];
    return { outcome: 'ok', observed: { now: 0, auto_approve: false, instances, approvals, ...(inferred.length ? { inferred } : {}) } };
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

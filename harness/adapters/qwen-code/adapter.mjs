#!/usr/bin/env node
// delegation-harness adapter for Qwen Code: speaks host protocol v1 on stdio and runs each turn as a headless `qwen` run with stream-json output.
//
// Usage: node adapter.mjs            (the harness runs it: --host qwen-code)
//        node adapter.mjs --install  (install the pinned Qwen Code into the cache and exit)
// See README.md beside this file for what maps to what.

import { randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { CODES, RpcError, serve, logNotification } from '../node-common/rpc.mjs';
import {
  ensureQwen, isolatedEnv, storePaths, writeSettings, runQwen, killGroup, readStore, readJson, writeAtomic, sessionAnswered, LiveRun,
} from './lib/qwen.mjs';
import { answeredReport, forgetPendingQuestions, questionGone } from '../node-common/stream-json-run.mjs';
import { digestEvents, childrenOf, turnReport, askedAndDeclined, DELEGATION_TOOL } from './lib/mapping.mjs';
import { toolCatalogue, digestOf } from './lib/mcp.mjs';

const PROTOCOL_VERSION = '1.0';
const MODEL_ID = 'reference-model';
/** The harness's conventional child role, defined even when `host/configure` names no roles. */
const DEFAULT_ROLES = ['worker'];
/** Qwen Code's built-in tools that write files or run commands: what a read-only instance may not hold. */
const WRITING_TOOLS = ['run_shell_command', 'edit', 'write_file', 'notebook_edit'];
/** The MCP tool classes a read-only sandbox refuses (the protocol's eligibility table: read_only_context). */
const READ_ONLY_REFUSED = ['file-write', 'shell', 'generic'];

const denied = (reason, detail, inferred) => ({ outcome: 'denied', reason, ...(detail ? { detail } : {}), ...(inferred ? { inferred } : {}) });
const needString = (params, key) => {
  if (!params || typeof params[key] !== 'string') throw new RpcError(CODES.INVALID_PARAMS, `params.${key} must be a string`);
  return params[key];
};
const unsupported = (message) => new RpcError(CODES.UNSUPPORTED_OPTION, message);

/**
 * Whether the protocol's eligibility table runs a sealed tool of this class
 * without asking anyone: reads always, sandboxed file writes under
 * `on-request`. Everything else is asked (or, under `never`, refused).
 */
export function runsUnasked(toolClass, ceiling) {
  if (toolClass === 'read') return true;
  return toolClass === 'file-write' && ceiling.approval_policy === 'on-request' && ceiling.sandbox !== 'read-only';
}

export class Adapter {
  constructor({ env = process.env, notify = () => {} } = {}) {
    this.env = env;
    this.notify = notify;
    // Below the step deadline the README asks for (--step-timeout-ms 120000),
    // so a hung run is reported and killed, not timed out: a start of Qwen
    // Code costs 3 to 12 s of a loaded machine, and a turn with a subagent
    // and an MCP server several starts' worth.
    this.turnTimeoutMs = Number(env.QWEN_CODE_ADAPTER_TURN_TIMEOUT_MS || 100000);
    this.initialized = false;
    this.running = new Set();
    // Root instance id -> the LiveRun waiting on a person's approval.
    this.live = new Map();
    this.mcpServers = [];
    this.catalogue = new Map();
  }

  log(level, message) {
    process.stderr.write(`[adapter] ${level}: ${message}\n`);
    this.notify(level, message);
  }

  // ---- durable adapter state (what Qwen Code's own store does not say) ---------------------

  loadState() {
    this.state = readJson(this.paths.state, { instances: {}, configuration: {} });
    this.state.approvals = this.state.approvals || [];
    // A fresh adapter holds no `qwen` run: a question that was pending lived in
    // a process that is gone (Qwen Code keeps no pending question in its store,
    // and its session recovery answers the interrupted call with a synthesised
    // failure rather than asking again), so nothing is left to answer.
    if (forgetPendingQuestions(this.state.approvals)) this.saveState();
  }

  saveState() { writeAtomic(this.paths.state, JSON.stringify(this.state, null, 2) + '\n'); }

  /** A harness path (`/w/repo`) inside the store, where Qwen Code really runs. */
  hostPath(path) {
    const local = join(this.paths.fs, path);
    mkdirSync(local, { recursive: true });
    return local;
  }

  /** The root an instance belongs to: Qwen Code runs one process per main session. */
  rootOf(id) {
    let current = id;
    for (let i = 0; i < 100 && this.state.instances[current] && this.state.instances[current].parent; i++) {
      current = this.state.instances[current].parent;
    }
    return current;
  }

  // ---- methods -----------------------------------------------------------------------------

  async handle(method, params) {
    if (method === 'initialize') return this.initialize(params);
    if (!this.initialized) throw new RpcError(CODES.NOT_INITIALIZED, `${method} before initialize`);
    switch (method) {
      case 'host/configure': return this.configure(params);
      case 'instance/start': return this.start(params);
      case 'instance/turn': return this.turn(params);
      case 'approval/answer': return this.answer(params);
      case 'state/observe': return this.observe();
      default:
        throw new RpcError(CODES.METHOD_NOT_FOUND, `${method}: Qwen Code has no equivalent this adapter can drive honestly (see README.md)`);
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
    this.paths = storePaths(this.storeDir);
    this.modelEndpoint = environment.model_endpoint;
    this.mcpServers = Array.isArray(environment.mcp_servers) ? environment.mcp_servers.filter((s) => s && s.name && s.url) : [];
    this.loadState();
    this.bin = ensureQwen({ env: this.env, log: (l, m) => this.log(l, m) });
    this.qwenEnv = isolatedEnv(this.storeDir, this.modelEndpoint, this.env);
    writeSettings(this.paths.home);
    this.initialized = true;
    return {
      host: { name: 'qwen-code', version: this.bin.version },
      protocol_version: PROTOCOL_VERSION,
      // nested-delegation: subagents are offered `agent` too, bounded by --max-subagent-depth;
      // restart: sessions and subagent records are Qwen Code's files under store_dir;
      // mcp: the harness's servers are Qwen Code MCP servers (--mcp-config, httpUrl).
      capabilities: ['nested-delegation', 'restart', 'mcp'],
    };
  }

  async configure(params) {
    const config = params || {};
    // Refused rather than accepted and ignored: Qwen Code has none of these.
    if (config.authorizer_required) throw unsupported('Qwen Code cannot consult an external authorizer before starting a subagent');
    if (config.strict_mode) throw unsupported('strict_mode: Qwen Code has no sandbox policy by which to refuse an unsandboxed subagent');
    if (config.auto_approve) throw unsupported('auto_approve: Qwen Code has no persistence-gated automatic approval');
    for (const [name, role] of Object.entries(config.roles || {})) {
      if (role && ((role.provider && role.provider !== 'harness') || (role.sandbox && role.sandbox.external))) {
        throw unsupported(`role ${name}: only a role's sandbox and tools become a Qwen Code agent definition`);
      }
    }
    if (this.mcpServers.length) await this.refreshCatalogue();
    for (const [name, role] of Object.entries(config.roles || {})) {
      // An empty `tools:` list would mean every tool to Qwen Code: refused rather than widened.
      if (role && Array.isArray(role.tools) && !role.tools.some((t) => this.catalogue.has(t))) {
        throw unsupported(`role ${name}: none of its tools (${role.tools.join(', ')}) is served, and an agent definition without tools gets every tool`);
      }
    }
    this.state.configuration = config;
    this.saveState();
    this.writeAgents();
    return { outcome: 'ok' };
  }

  /**
   * Each role is a subagent definition (`~/.qwen/agents/ROLE.md` in the
   * isolated home). `approvalMode: default` keeps a subagent of a `default`
   * session in that mode: without it Qwen Code gives such a subagent
   * `auto-edit` (its documented default for a subagent of a `default`
   * session); a permissive parent (yolo) still wins.
   * Read-only roles lose the writing tools.
   */
  writeAgents() {
    const dir = join(this.paths.home, '.qwen', 'agents');
    mkdirSync(dir, { recursive: true });
    for (const agent of this.agentDefinitions()) {
      const lines = ['---', `name: ${agent.name}`, `description: ${agent.description}`, 'model: inherit', `approvalMode: ${agent.approvalMode}`];
      if (agent.tools) lines.push('tools:', ...agent.tools.map((t) => `  - ${t}`));
      if (agent.disallowedTools) lines.push('disallowedTools:', ...agent.disallowedTools.map((t) => `  - ${t}`));
      lines.push('---', agent.systemPrompt, '');
      writeFileSync(join(dir, `${agent.name}.md`), lines.join('\n'));
    }
  }

  /**
   * The roles as Qwen Code subagent definitions, the same for the agent files
   * (headless runs) and the `initialize` control request (runs that may ask a
   * person, where Qwen Code lists only the agents it is given there). A role
   * that names tools gets Qwen Code's names for them as its `tools:` list; a
   * read-only role loses the writing built-ins and the MCP tools of the
   * classes a read-only sandbox refuses.
   */
  agentDefinitions() {
    const configured = this.state.configuration.roles || {};
    const out = [];
    for (const name of new Set([...DEFAULT_ROLES, ...Object.keys(configured)])) {
      const role = configured[name] || {};
      const agent = {
        name, description: `The delegation-harness role ${name}`, approvalMode: 'default',
        systemPrompt: `You are the ${name} subagent. Do the task you are given.`,
      };
      if (Array.isArray(role.tools)) agent.tools = role.tools.filter((t) => this.catalogue.has(t)).map((t) => this.catalogue.get(t).qwen);
      if (role.sandbox === 'read-only') {
        const refused = [...this.catalogue.values()].filter((t) => READ_ONLY_REFUSED.includes(t.class)).map((t) => t.qwen);
        agent.disallowedTools = [...WRITING_TOOLS, ...refused];
      }
      out.push(agent);
    }
    return out;
  }

  async refreshCatalogue() {
    try {
      this.catalogue = await toolCatalogue(this.mcpServers);
    } catch (e) {
      throw new RpcError(CODES.HOST_FAILURE, `could not list the harness's MCP tools: ${e.message}`);
    }
    return this.catalogue;
  }

  async start(params) {
    const role = needString(params, 'role');
    const cwd = needString(params, 'cwd');
    if ((params.provider ?? 'harness') !== 'harness') throw unsupported(`provider ${params.provider}: only the harness's model endpoint is configured`);
    if ((params.model ?? MODEL_ID) !== MODEL_ID) throw unsupported(`model ${params.model}: only ${MODEL_ID} is configured`);
    const sandbox = params.sandbox ?? 'read-only';
    if (sandbox && typeof sandbox === 'object' && sandbox.external) throw unsupported('Qwen Code has no external sandboxes');
    const policy = params.approval_policy ?? 'never';
    if (!['never', 'on-request', 'untrusted'].includes(policy)) {
      throw unsupported(`approval policy ${JSON.stringify(policy)}: Qwen Code's permission rules are per tool, not per action class`);
    }
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
      sandbox, approval_policy: policy,
      tools: Object.fromEntries(sealed.map((t) => [t.name, t.digest])),
      cwd, provider: 'harness', delegation_depth: depth,
    };
    // Qwen Code takes the session id it is given (--session-id) and sends it
    // on every request (the `${session_id}` header): the instance id is that
    // id. Qwen Code stores a session only at its first prompt to the model,
    // so until the first turn the instance is the adapter's record alone
    // (observed `running`, marked inferred).
    const id = randomUUID();
    this.state.instances[id] = { role, model: MODEL_ID, ceiling, sealed: sealed.map((t) => t.name), cwd };
    this.saveState();
    return {
      outcome: 'ok', instance: id, effective: ceiling,
      // Qwen Code holds permission rules and an approval mode, not an authority: the ceiling is the adapter's record.
      inferred: ['effective'],
    };
  }

  /** The `qwen` options that carry a root's ceiling: approval mode, tool exclusions and allowances, MCP servers, subagent depth. */
  rootOptions(root) {
    const ceiling = root.ceiling;
    const readOnly = ceiling.sandbox === 'read-only';
    const args = ['--output-format', 'stream-json', '--auth-type', 'openai', '--model', MODEL_ID, '--chat-recording'];
    const exclude = [];
    const allow = [];
    // full-access: every tool approved (yolo); otherwise Qwen Code's default
    // mode, where anything not allowed by a rule asks, and headless nobody is
    // asked: declined (approval policy `never`; under `on-request` and
    // `untrusted` such a turn is unsupported, see turn).
    args.push('--approval-mode', ceiling.sandbox === 'full-access' ? 'yolo' : 'default');
    if (readOnly) exclude.push(...WRITING_TOOLS);
    if (ceiling.sandbox && ceiling.sandbox['workspace-write']) {
      for (const r of ceiling.sandbox['workspace-write'].writable_roots || []) args.push('--add-dir', this.hostPath(r));
    }
    // Depth 0: the delegation tool is removed. Otherwise delegating is within
    // the ceiling, so `agent` runs without asking, and Qwen Code's own limit
    // bounds nesting (1: subagents are not offered `agent`).
    if (ceiling.delegation_depth === 0) exclude.push(DELEGATION_TOOL);
    else {
      allow.push(DELEGATION_TOOL);
      args.push('--max-subagent-depth', String(Math.min(ceiling.delegation_depth, 100)));
    }
    if (this.mcpServers.length) {
      // A tool served but not sealed is excluded at its server (Qwen Code's
      // deny rules do not remove MCP tools), and so is a sealed tool of a
      // class a read-only sandbox refuses (as the writing built-ins are).
      const sealed = new Set(root.sealed || []);
      const removed = (t) => !sealed.has(t.name) || (readOnly && READ_ONLY_REFUSED.includes(t.class));
      const servers = {};
      for (const s of this.mcpServers) {
        const excluded = [...this.catalogue.values()].filter((t) => t.server === s.name && removed(t)).map((t) => t.name);
        servers[s.name] = { httpUrl: s.url, ...(excluded.length ? { excludeTools: excluded } : {}) };
      }
      // A sealed tool the policy runs unasked gets an allow rule; every other
      // sealed tool asks: a person over the control protocol under
      // `on-request` and `untrusted`, nobody under `never`, where Qwen Code
      // declines it itself.
      for (const entry of this.catalogue.values()) {
        if (!removed(entry) && runsUnasked(entry.class, ceiling)) allow.push(entry.qwen);
      }
      writeAtomic(this.paths.mcp, JSON.stringify({ mcpServers: servers }, null, 2) + '\n');
      args.push('--mcp-config', this.paths.mcp);
    }
    if (exclude.length) args.push('--exclude-tools', ...exclude);
    if (allow.length) args.push('--allowed-tools', ...allow);
    return args;
  }

  async turn(params) {
    const id = needString(params, 'instance');
    const input = needString(params, 'input');
    const instance = this.state.instances[id];
    if (!instance) return denied('instance_unknown', `no instance ${id}`, ['reason']);
    if (instance.parent) {
      throw unsupported('a turn on a subagent: Qwen Code continues a subagent only through its parent, not from outside');
    }
    const cwd = this.hostPath(instance.cwd);
    const { sessions } = readStore(this.paths.home, cwd);
    if (this.live.has(id)) return denied('policy_denied', `instance ${id} is waiting for a person's answer to Qwen Code's permission request`, ['reason']);
    const args = this.rootOptions(instance);
    // The first turn creates the session under the instance id; every later turn resumes it.
    args.push(sessions.has(id) ? '--resume' : '--session-id', id);
    if (instance.ceiling.approval_policy !== 'never') {
      // A person may be asked: Qwen Code's control protocol relays each question.
      const run = new LiveRun({
        bin: this.bin, args, env: this.qwenEnv, cwd, agents: this.agentDefinitions(), onSpawn: (child) => this.running.add(child),
      });
      run.prompt(input);
      return this.settle(id, run);
    }
    const run = await this.run(args, cwd, input);
    if (run.timedOut) {
      throw new RpcError(CODES.HOST_FAILURE, `qwen did not finish the turn within ${this.turnTimeoutMs} ms; killed its process group. stderr: ${run.stderr.slice(-500)}`);
    }
    const digest = digestEvents(run.events);
    if (!digest.result && run.code !== 0) {
      throw new RpcError(CODES.HOST_FAILURE, `qwen exited ${run.code ?? run.signal} without a result: ${run.stderr.slice(-800)}`);
    }
    return this.report(id, digest);
  }

  /** The turn report of root `id` from a finished run's events and Qwen Code's store. */
  report(id, digest) {
    // Under `on-request` or `untrusted` a call Qwen Code asks about is a
    // person's to answer, and the control protocol relays it; should Qwen
    // Code still decline one itself because it "cannot prompt", reporting
    // that as a person's deny (or a policy denial) would be a verdict nobody
    // gave, so the step is unsupported.
    const instance = this.state.instances[id];
    const asked = instance.ceiling.approval_policy !== 'never' && askedAndDeclined(digest);
    if (asked) {
      throw unsupported(`Qwen Code declined ${this.nameBack(asked)} as a question it could not ask, under an approval policy where a person answers it`);
    }
    const { agents } = readStore(this.paths.home, this.hostPath(instance.cwd));
    this.registerChildren(id, agents);
    const byToolUse = new Map([...agents.values()].filter((a) => a.session === id).map((a) => [a.meta.toolUseId, a.meta]));
    const readOnly = instance.ceiling.sandbox === 'read-only';
    const report = turnReport(digest, {
      agentFor: (toolUseId) => byToolUse.get(toolUseId),
      nameBack: (name) => this.nameBack(name),
      childEffective: (child) => (this.state.instances[child.agentId] || {}).ceiling,
      // A tool this root's read-only mapping removed (a writing built-in, or
      // an MCP tool of a refused class, also when the model names it as the
      // harness does and so reaches Qwen Code's built-in of that name): Qwen
      // Code says only "not found in registry" or names the deny rule.
      removedForReadOnly: (name) => readOnly && (WRITING_TOOLS.includes(name)
        || [...this.catalogue.values()].some((t) => (t.qwen === name || t.name === name) && READ_ONLY_REFUSED.includes(t.class))),
    });
    return {
      outcome: 'ok', instance: id, turn: report.turn,
      ...(report.tool_call ? { tool_call: report.tool_call } : {}),
      ...(report.detail ? { detail: report.detail } : {}),
      ...(report.inferred.length ? { inferred: report.inferred } : {}),
    };
  }

  /** Waits for the live run of root `id` to end or to ask a person, and reports either. */
  async settle(id, run, answered) {
    const settled = await run.settle(this.turnTimeoutMs);
    if (settled.timedOut) {
      this.live.delete(id);
      throw new RpcError(CODES.HOST_FAILURE, `qwen did not finish the turn within ${this.turnTimeoutMs} ms; killed its process group. stderr: ${run.stderr.slice(-500)}`);
    }
    if (run.initError) {
      this.live.delete(id);
      run.stop();
      throw new RpcError(CODES.HOST_FAILURE, `qwen refused the control protocol's initialize: ${run.initError}`);
    }
    const digest = digestEvents(run.events);
    if (settled.pending) {
      this.live.set(id, run);
      const { agents } = readStore(this.paths.home, this.hostPath(this.state.instances[id].cwd));
      this.registerChildren(id, agents);
      const approval = this.recordApproval(id, settled.pending);
      const toolCall = { tool: approval.tool, outcome: 'pending_approval', approval: approval.id };
      if (answered) return { outcome: 'ok', instance: approval.instance, tool_call: toolCall };
      return { outcome: 'ok', instance: id, turn: { reply: 'tool_call', tool: approval.tool }, tool_call: toolCall };
    }
    this.live.delete(id);
    if (!digest.result && run.code !== 0) {
      throw new RpcError(CODES.HOST_FAILURE, `qwen exited ${run.code ?? run.signal} without a result: ${run.stderr.slice(-800)}`);
    }
    if (answered) return this.answeredReport(answered, digest);
    return this.report(id, digest);
  }

  /**
   * A pending approval for Qwen Code's `can_use_tool` request. Qwen Code
   * keeps no approval records: the id, state and decision are the adapter's
   * bookkeeping (reported as inferred), the tool and arguments Qwen Code's.
   */
  recordApproval(root, pending) {
    const request = pending.request;
    const tool = this.nameBack(request.tool_name);
    const entry = [...this.catalogue.values()].find((t) => t.name === tool);
    const approval = {
      id: `a-${this.state.approvals.length + 1}`, instance: root, root, class: entry ? entry.class : 'generic', tool,
      tool_digest: entry ? entry.digest : 'sha256:unknown', arguments_digest: digestOf(request.input || {}),
      state: 'pending', request_id: pending.request_id, tool_use_id: request.tool_use_id,
    };
    this.state.approvals.push(approval);
    this.saveState();
    return approval;
  }

  /** What became of the call a person answered, from Qwen Code's tool result for it. */
  answeredReport(approval, digest) {
    return answeredReport(approval, digest);
  }

  /**
   * Whether Qwen Code's `can_use_tool` question behind an approval is gone: it
   * lives only in the `qwen` run that asked it, so once that run has ended
   * (a restart, a crash) there is nothing to answer.
   */
  requestGone(approval) {
    return questionGone(approval, this.live);
  }

  /** A person's answer: allow or deny Qwen Code's pending permission request. */
  async answer(params) {
    const requestId = needString(params, 'request');
    const decision = needString(params, 'decision');
    if (!['allow', 'deny'].includes(decision)) {
      throw unsupported(`decision ${decision}: Qwen Code's answers are allow and deny (and permission rules wider than one exact call)`);
    }
    const approval = this.state.approvals.find((a) => a.id === requestId);
    if (!approval) return denied('instance_unknown', `no approval request ${requestId}`, ['reason']);
    const run = this.live.get(approval.root);
    if (this.requestGone(approval)) {
      // Not listed by state/observe any more: the host holds no such question.
      return denied('instance_unknown', `Qwen Code's permission request behind ${requestId} ended with the qwen process that asked it (a restart); Qwen Code keeps no pending question in its store, so nothing is left to answer and nothing runs`, ['reason']);
    }
    if (approval.state !== 'pending') return denied('event_replayed', `approval request ${requestId} was already answered`, ['reason']);
    // A person's deny is decided and never dispatched; an allow goes out to Qwen Code.
    approval.state = decision === 'allow' ? 'dispatched' : 'decided';
    approval.decision = decision;
    approval.decided_by = 'person';
    this.saveState();
    run.answer(decision === 'allow');
    return this.settle(approval.root, run, approval);
  }

  /** Records the subagents Qwen Code's store holds for a session that the adapter has not seen yet. */
  registerChildren(id, agents) {
    const root = this.state.instances[id];
    // Parents before children: a nested subagent's ceiling is its parent's with one level less.
    const children = childrenOf(agents, id).sort((a, b) => (a.depth ?? 0) - (b.depth ?? 0));
    for (const child of children) {
      if (this.state.instances[child.id]) continue;
      const parentCeiling = (this.state.instances[child.parent] || {}).ceiling || root.ceiling;
      this.state.instances[child.id] = { parent: child.parent, role: child.role, model: MODEL_ID, ceiling: this.childCeiling(parentCeiling, child.role) };
    }
    this.saveState();
  }

  /** One `qwen` run in the instance's working directory, killed with the adapter if it is still running. */
  async run(args, cwd, input) {
    const run = await runQwen({
      bin: this.bin, args, env: this.qwenEnv, cwd, input, timeoutMs: this.turnTimeoutMs,
      onSpawn: (child) => this.running.add(child),
    });
    for (const child of this.running) if (child.exitCode !== null || child.signalCode !== null) this.running.delete(child);
    return run;
  }

  /** A subagent's ceiling as the adapter configured it: its parent's, one level of delegation less, narrowed by a read-only role. */
  childCeiling(parent, roleName) {
    const role = (this.state.configuration.roles || {})[roleName] || {};
    const ceiling = { ...parent, delegation_depth: Math.max(0, (parent.delegation_depth ?? 1) - 1) };
    if (role.sandbox === 'read-only') ceiling.sandbox = 'read-only';
    if (Array.isArray(role.tools)) {
      ceiling.tools = Object.fromEntries(Object.entries(parent.tools || {}).filter(([name]) => role.tools.includes(name)));
    }
    return ceiling;
  }

  /** The harness's name for a tool Qwen Code called by its own (`mcp__server__tool`). */
  nameBack(name) {
    for (const entry of this.catalogue.values()) if (entry.qwen === name) return entry.name;
    return name;
  }

  observe() {
    const instances = [];
    const byCwd = new Map();
    const store = (cwd) => {
      if (!byCwd.has(cwd)) byCwd.set(cwd, readStore(this.paths.home, this.hostPath(cwd)));
      return byCwd.get(cwd);
    };
    for (const [id, known] of Object.entries(this.state.instances)) {
      const root = this.state.instances[this.rootOf(id)];
      const { sessions, agents } = store((root && root.cwd) || known.cwd || '/');
      const inferred = ['ceiling'];
      let state;
      if (known.parent) {
        const agent = agents.get(id);
        if (agent) state = agent.meta.status === 'running' ? 'running' : 'completed';
        else { state = 'completed'; inferred.push('state'); }
      } else if (sessions.has(id)) {
        // A headless run ends with its turn before the adapter answers, so a
        // stored session is idle: completed once the model answered in it.
        state = sessionAnswered(sessions.get(id).path) ? 'completed' : 'running';
      } else {
        // Not in Qwen Code's store yet: started, waiting for its first turn.
        state = 'running';
        inferred.push('state');
      }
      instances.push({
        id, state, role: known.role, model: known.model || MODEL_ID, ceiling: known.ceiling,
        ...(known.parent ? { parent: known.parent } : {}), inferred,
      });
    }
    // A question that ended with its `qwen` process is gone: Qwen Code holds it nowhere.
    const approvals = this.state.approvals.filter((a) => !this.requestGone(a)).map((a) => ({
      id: a.id, instance: a.instance, class: a.class, tool: a.tool, tool_digest: a.tool_digest,
      arguments_digest: a.arguments_digest, state: a.state,
      ...(a.decision ? { decision: a.decision, decided_by: a.decided_by } : {}),
    }));
    return {
      outcome: 'ok',
      observed: {
        now: 0, auto_approve: false, instances, approvals,
        // Qwen Code keeps no approval records: they are the adapter's bookkeeping,
        // and so is a list a gone question was dropped from.
        ...(this.state.approvals.length ? { inferred: ['approvals'] } : {}),
      },
    };
  }

  /** Ends every running `qwen` (stdin closed or SIGTERM: the harness is restarting us): SIGKILL to each group, which does not rely on Qwen Code honouring SIGTERM (0.15.10 did not). */
  shutdown() {
    for (const run of this.live.values()) run.stop();
    this.live.clear();
    for (const child of this.running) killGroup(child, 'SIGKILL');
    this.running.clear();
  }
}

async function main() {
  if (process.argv.includes('--install')) {
    const bin = ensureQwen({ env: process.env, log: (level, message) => process.stderr.write(`${level}: ${message}\n`) });
    process.stderr.write(`qwen-code ${bin.version} at ${bin.args[0] || bin.command}\n`);
    return;
  }
  const adapter = new Adapter({ notify: (level, message) => process.stdout.write(logNotification(level, message)) });
  const stop = () => { adapter.shutdown(); process.exit(0); };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  await serve({ input: process.stdin, output: process.stdout, handle: (m, p) => adapter.handle(m, p), log: (l, m) => adapter.log(l, m) });
  adapter.shutdown();
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((e) => {
    process.stderr.write(`adapter failed: ${e.stack || e}\n`);
    process.exit(1);
  });
}

#!/usr/bin/env node
// delegation-harness adapter for Claude Code: speaks host protocol v1 on stdio and runs each turn as `claude -p` with stream-json output.
//
// Usage: node adapter.mjs            (the harness runs it: --host claude-code)
//        node adapter.mjs --install  (install the pinned Claude Code into the cache and exit)
// See README.md beside this file for what maps to what.

import { randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { CODES, RpcError, serve, logNotification } from './lib/rpc.mjs';
import {
  ensureClaude, isolatedEnv, storePaths, runClaude, killGroup, readStore, readJson, writeAtomic, sessionAnswered, LiveRun,
} from './lib/claude.mjs';
import { answeredReport, forgetPendingQuestions, questionGone } from '../node-common/stream-json-run.mjs';
import { digestEvents, childrenOf, turnReport } from './lib/mapping.mjs';
import { toolCatalogue, digestOf } from './lib/mcp.mjs';

const PROTOCOL_VERSION = '1.0';
const MODEL_ID = 'reference-model';
/** The harness's conventional child role, defined even when `host/configure` names no roles. */
const DEFAULT_ROLES = ['worker'];
/** Claude Code's built-in tools that write files or run commands: what a read-only instance may not hold. */
const WRITING_TOOLS = ['Bash', 'Edit', 'Write', 'NotebookEdit'];
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
    // Below the harness's default 30 s step deadline, so a hung run is reported, not timed out.
    this.turnTimeoutMs = Number(env.CLAUDE_CODE_ADAPTER_TURN_TIMEOUT_MS || 25000);
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

  // ---- durable adapter state (what Claude Code's own store does not say) -------------------

  loadState() {
    this.state = readJson(this.paths.state, { instances: {}, configuration: {} });
    this.state.approvals = this.state.approvals || [];
    // A fresh adapter holds no `claude` run: a permission request that was
    // pending lived in a process that is gone (Claude Code keeps no permission
    // requests in its store), so nothing is left to answer.
    if (forgetPendingQuestions(this.state.approvals)) this.saveState();
  }

  saveState() { writeAtomic(this.paths.state, JSON.stringify(this.state, null, 2) + '\n'); }

  /** A harness path (`/w/repo`) inside the store, where Claude Code really runs. */
  hostPath(path) {
    const local = join(this.paths.fs, path);
    mkdirSync(local, { recursive: true });
    return local;
  }

  /** The root an instance belongs to: Claude Code runs one process per main session. */
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
      case 'instance/fork': return this.fork(params);
      case 'state/observe': return this.observe();
      default:
        throw new RpcError(CODES.METHOD_NOT_FOUND, `${method}: Claude Code has no equivalent this adapter can drive honestly (see README.md)`);
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
    this.bin = ensureClaude({ env: this.env, log: (l, m) => this.log(l, m) });
    this.claudeEnv = isolatedEnv(this.storeDir, this.modelEndpoint, this.env);
    this.initialized = true;
    return {
      host: { name: 'claude-code', version: this.bin.version },
      protocol_version: PROTOCOL_VERSION,
      // nested-delegation: subagents call Agent too, bounded by CLAUDE_CODE_MAX_SUBAGENT_SPAWN_DEPTH;
      // restart: sessions and subagent transcripts are Claude Code's files under store_dir;
      // mcp: the harness's servers are Claude Code streamable-HTTP MCP servers (--mcp-config);
      // fork: Claude Code's own --resume ID --fork-session (a new session with the history).
      // model-lifecycle-tools: the parent's model continues a subagent with SendMessage {to: agent id}.
      capabilities: ['nested-delegation', 'restart', 'mcp', 'fork', 'model-lifecycle-tools'],
    };
  }

  async configure(params) {
    const config = params || {};
    // Refused rather than accepted and ignored: Claude Code has none of these.
    if (config.authorizer_required) throw unsupported('Claude Code cannot consult an external authorizer before starting a subagent');
    if (config.strict_mode) throw unsupported('strict_mode: Claude Code has no sandbox policy by which to refuse an unsandboxed subagent');
    if (config.auto_approve) throw unsupported('auto_approve: Claude Code has no persistence-gated automatic approval');
    for (const [name, role] of Object.entries(config.roles || {})) {
      if (role && ((role.provider && role.provider !== 'harness') || (role.sandbox && role.sandbox.external))) {
        throw unsupported(`role ${name}: only a role's sandbox and tools become a Claude Code agent definition`);
      }
      if (role && role.tools && role.tools.length && !this.mcpServers.length) {
        throw unsupported(`role ${name} names tools but the environment has no MCP servers`);
      }
    }
    this.state.configuration = config;
    this.saveState();
    if (this.mcpServers.length) await this.refreshCatalogue();
    this.writeAgents();
    return { outcome: 'ok' };
  }

  /**
   * Each role is a custom agent (`~/.claude/agents/ROLE.md` in the isolated
   * home): read-only roles lose the writing tools, and a role whose default
   * names tools gets Claude Code's own tool list (`tools:`), with those MCP
   * tools under Claude Code's names. Whether a spawn of such an agent is
   * held to the parent's tools is Claude Code's to decide, and the harness
   * observes it (zc/047, zc/048).
   */
  writeAgents() {
    const configured = this.state.configuration.roles || {};
    const dir = join(this.paths.home, '.claude', 'agents');
    mkdirSync(dir, { recursive: true });
    for (const name of new Set([...DEFAULT_ROLES, ...Object.keys(configured)])) {
      const role = configured[name] || {};
      const lines = ['---', `name: ${name}`, `description: The delegation-harness role ${name}`, 'model: inherit'];
      if (role.sandbox === 'read-only') {
        // The eligibility table refuses these classes in a read-only sandbox: the MCP tools of them go too.
        const writingMcp = [...this.catalogue.values()].filter((t) => READ_ONLY_REFUSED.includes(t.class)).map((t) => t.claude);
        lines.push(`disallowedTools: ${[...WRITING_TOOLS, ...writingMcp].join(', ')}`);
      }
      if (Array.isArray(role.tools)) {
        const names = role.tools.map((tool) => (this.catalogue.get(tool) || {}).claude).filter(Boolean);
        // An empty list would read as "every tool" to Claude Code.
        if (!names.length) throw unsupported(`role ${name}: none of its tools is served, and Claude Code cannot define an agent with no tools`);
        lines.push(`tools: ${names.join(', ')}`);
      }
      lines.push('---', `You are the ${name} subagent. Do the task you are given.`, '');
      writeFileSync(join(dir, `${name}.md`), lines.join('\n'));
    }
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
    if (sandbox && typeof sandbox === 'object' && sandbox.external) throw unsupported('Claude Code has no external sandboxes');
    const policy = params.approval_policy ?? 'never';
    if (!['never', 'on-request', 'untrusted'].includes(policy)) {
      throw unsupported(`approval policy ${JSON.stringify(policy)}: Claude Code's permission rules are per tool, not per action class`);
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
    // Claude Code takes the session id it is given (--session-id) and sends it
    // on every request (x-claude-code-session-id): the instance id is that id.
    const id = randomUUID();
    const instance = { role, model: MODEL_ID, ceiling, sealed: sealed.map((t) => t.name), cwd };
    // Claude Code stores a session at its first prompt. `/cost` is a local
    // command: it makes the session exist in Claude Code's store, under this
    // id, without a model request, so the instance is Claude Code's from the
    // start (and its state is read, not assumed, before its first turn).
    const { args, env } = this.rootOptions(instance);
    args.push('--session-id', id);
    const run = await this.run(args, env, instance.cwd, '/cost');
    if (!readStore(this.paths.home, this.hostPath(cwd)).sessions.has(id)) {
      throw new RpcError(CODES.HOST_FAILURE, `claude stored no session ${id} for the start command (exit ${run.code ?? run.signal}): ${run.stderr.slice(-500)}`);
    }
    this.state.instances[id] = instance;
    this.saveState();
    return {
      outcome: 'ok', instance: id, effective: ceiling,
      // Claude Code holds permission rules, not an authority: the ceiling is the adapter's record.
      inferred: ['effective'],
    };
  }

  /**
   * Claude Code's fork: `--resume ID --fork-session --session-id NEW` copies
   * the session's history into a new session. Run with the local `/cost`
   * command, it makes no model request. The fork keeps its origin's ceiling
   * (the same options on every later turn); a subagent cannot be forked.
   */
  async fork(params) {
    const id = needString(params, 'instance');
    const origin = this.state.instances[id];
    if (!origin) return denied('instance_unknown', `no instance ${id}`, ['reason']);
    if (origin.parent) throw unsupported('forking a subagent: Claude Code forks main sessions (--fork-session), not subagents');
    const forkId = randomUUID();
    const instance = { role: origin.role, model: origin.model, ceiling: origin.ceiling, sealed: origin.sealed, cwd: origin.cwd, forkOf: id };
    const { args, env } = this.rootOptions(instance);
    args.push('--resume', id, '--fork-session', '--session-id', forkId);
    const run = await this.run(args, env, instance.cwd, '/cost');
    if (!readStore(this.paths.home, this.hostPath(instance.cwd)).sessions.has(forkId)) {
      const said = `${run.stderr} ${run.events.filter((e) => e.type === 'result').map((e) => e.result).join(' ')}`.trim();
      if (/No conversation found/i.test(said)) return denied('instance_unknown', `Claude Code: ${said.slice(0, 300)}`);
      throw new RpcError(CODES.HOST_FAILURE, `claude stored no fork ${forkId} of ${id} (exit ${run.code ?? run.signal}): ${said.slice(-500)}`);
    }
    this.state.instances[forkId] = instance;
    this.saveState();
    return { outcome: 'ok', instance: forkId, effective: instance.ceiling, inferred: ['effective'] };
  }

  /** The `claude -p` options that carry a root's ceiling: permission mode, deny and allow rules, MCP servers, spawn depth. */
  rootOptions(root, { forTurn = false } = {}) {
    const ceiling = root.ceiling;
    const args = ['-p', '--output-format', 'stream-json', '--verbose'];
    const env = { ...this.claudeEnv };
    const deny = [];
    const allow = [];
    // full-access: no permission checks at all; otherwise Claude Code's
    // default mode, where anything not allowed by a rule would ask, and with
    // no one to ask (-p) is denied: approval policy `never`.
    args.push('--permission-mode', ceiling.sandbox === 'full-access' ? 'bypassPermissions' : 'default');
    if (ceiling.sandbox === 'read-only') deny.push(...WRITING_TOOLS);
    if (ceiling.sandbox && ceiling.sandbox['workspace-write']) {
      for (const r of ceiling.sandbox['workspace-write'].writable_roots || []) args.push('--add-dir', this.hostPath(r));
    }
    if (ceiling.delegation_depth === 0) deny.push('Agent');
    else env.CLAUDE_CODE_MAX_SUBAGENT_SPAWN_DEPTH = String(ceiling.delegation_depth);
    if (this.mcpServers.length) {
      const config = { mcpServers: Object.fromEntries(this.mcpServers.map((s) => [s.name, { type: 'http', url: s.url }])) };
      const file = join(this.paths.root, 'mcp.json');
      writeAtomic(file, JSON.stringify(config, null, 2) + '\n');
      args.push('--mcp-config', file, '--strict-mcp-config');
      // A sealed tool the policy runs unasked gets an allow rule; every other
      // sealed tool asks, which under `never` (no prompt tool: nobody to ask)
      // Claude Code itself turns into a denial. A tool served but not sealed
      // is removed.
      const sealed = new Set(root.sealed || []);
      for (const entry of this.catalogue.values()) {
        if (!sealed.has(entry.name)) deny.push(entry.claude);
        // A read-only sandbox refuses these classes before anyone is asked: removed, as the writing built-ins are.
        else if (ceiling.sandbox === 'read-only' && READ_ONLY_REFUSED.includes(entry.class)) deny.push(entry.claude);
        else if (runsUnasked(entry.class, ceiling)) allow.push(entry.claude);
      }
    }
    // Asking is a person's approval, over the control protocol on stdio;
    // with `never` there is no one to ask and an ask is a denial.
    if (forTurn && ceiling.approval_policy !== 'never') args.push('--permission-prompt-tool', 'stdio');
    if (deny.length) args.push('--disallowedTools', deny.join(','));
    if (allow.length) args.push('--allowedTools', allow.join(','));
    return { args, env };
  }

  async turn(params) {
    const id = needString(params, 'instance');
    const input = needString(params, 'input');
    const instance = this.state.instances[id];
    if (!instance) return denied('instance_unknown', `no instance ${id}`, ['reason']);
    if (instance.parent) {
      throw unsupported('a turn on a subagent: Claude Code continues a subagent only through its parent (SendMessage), not from outside');
    }
    const { sessions } = readStore(this.paths.home, this.hostPath(instance.cwd));
    if (this.live.has(id)) return denied('policy_denied', `instance ${id} is waiting for a person's answer to Claude Code's permission request`, ['reason']);
    const { args, env } = this.rootOptions(instance, { forTurn: true });
    // The start created the session under the instance id; every turn resumes it.
    args.push(sessions.has(id) ? '--resume' : '--session-id', id);
    const run = new LiveRun({ bin: this.bin, args, env, cwd: this.hostPath(instance.cwd), onSpawn: (child) => this.running.add(child) });
    run.prompt(input);
    return this.settle(id, run);
  }

  /** Waits for the run of root `id` to end or to ask a person, and reports either. */
  async settle(id, run, answered) {
    const settled = await run.settle(this.turnTimeoutMs);
    if (settled.timedOut) {
      this.live.delete(id);
      throw new RpcError(CODES.HOST_FAILURE, `claude did not finish the turn within ${this.turnTimeoutMs} ms; killed. stderr: ${run.stderr.slice(-500)}`);
    }
    const digest = digestEvents(run.events);
    this.registerChildren(id, digest);
    if (settled.pending) {
      this.live.set(id, run);
      const approval = this.recordApproval(id, settled.pending);
      const toolCall = { tool: approval.tool, outcome: 'pending_approval', approval: approval.id };
      if (answered) return { outcome: 'ok', instance: approval.instance, tool_call: toolCall };
      return { outcome: 'ok', instance: id, turn: { reply: 'tool_call', tool: approval.tool }, tool_call: toolCall };
    }
    this.live.delete(id);
    if (!digest.result && run.code !== 0) {
      throw new RpcError(CODES.HOST_FAILURE, `claude exited ${run.code ?? run.signal} without a result: ${run.stderr.slice(-800)}`);
    }
    if (answered) return this.answeredReport(answered, digest);
    const readOnly = (instance) => instance && instance.ceiling && instance.ceiling.sandbox === 'read-only';
    const report = turnReport(digest, {
      nameBack: (name) => this.nameBack(name),
      // A tool this root's read-only mapping removed: Claude Code says only "No such tool available".
      // The call names it as the model did: Claude Code's name, or the harness's when none was offered.
      removedForReadOnly: (name) => readOnly(this.state.instances[id])
        && [...this.catalogue.values()].some((t) => (t.claude === name || t.name === name) && READ_ONLY_REFUSED.includes(t.class)),
      childEffective: (child) => (this.state.instances[child.agentId] || {}).ceiling,
    });
    return {
      outcome: 'ok', instance: id, turn: report.turn,
      ...(report.tool_call ? { tool_call: report.tool_call } : {}),
      ...(report.detail ? { detail: report.detail } : {}),
      ...(report.inferred.length ? { inferred: report.inferred } : {}),
    };
  }

  /** Records the subagents a run created (from its stream-json events). */
  registerChildren(id, digest) {
    const instance = this.state.instances[id];
    for (const child of childrenOf(digest, id)) {
      if (this.state.instances[child.id]) continue;
      const parentCeiling = (this.state.instances[child.parent] || {}).ceiling || instance.ceiling;
      this.state.instances[child.id] = { parent: child.parent, role: child.role, model: MODEL_ID, ceiling: this.childCeiling(parentCeiling, child.role) };
    }
    this.saveState();
  }

  /**
   * A pending approval for Claude Code's permission request. Claude Code
   * keeps no approval records: the id, state and decision are the adapter's
   * bookkeeping (reported as inferred), the tool and arguments Claude Code's.
   */
  recordApproval(root, pending) {
    const request = pending.request;
    const tool = this.nameBack(request.tool_name);
    const entry = [...this.catalogue.values()].find((t) => t.name === tool);
    // A subagent's request names the agent; the main thread's does not.
    const instance = request.agent_id && this.state.instances[request.agent_id] ? request.agent_id : root;
    const approval = {
      id: `a-${this.state.approvals.length + 1}`, instance, root, class: entry ? entry.class : 'generic', tool,
      tool_digest: entry ? entry.digest : 'sha256:unknown', arguments_digest: digestOf(request.input || {}),
      state: 'pending', request_id: pending.request_id, tool_use_id: request.tool_use_id,
    };
    this.state.approvals.push(approval);
    this.saveState();
    return approval;
  }

  /** What became of the call a person answered, from Claude Code's tool result for it. */
  answeredReport(approval, digest) {
    return answeredReport(approval, digest);
  }

  /**
   * Whether Claude Code's permission request behind an approval is gone: it
   * lives only in the `claude` run that asked it, so once that run has ended
   * (a restart, a crash) there is nothing to answer.
   */
  requestGone(approval) {
    return questionGone(approval, this.live);
  }

  /** A person's answer: allow or deny Claude Code's pending permission request. */
  async answer(params) {
    const requestId = needString(params, 'request');
    const decision = needString(params, 'decision');
    if (!['allow', 'deny'].includes(decision)) {
      throw unsupported(`decision ${decision}: Claude Code's answers are allow and deny (and permission updates wider than one exact call)`);
    }
    const approval = this.state.approvals.find((a) => a.id === requestId);
    if (!approval) return denied('instance_unknown', `no approval request ${requestId}`, ['reason']);
    const run = this.live.get(approval.root);
    if (this.requestGone(approval)) {
      // Not listed by state/observe any more: the host holds no such request.
      return denied('instance_unknown', `Claude Code's permission request behind ${requestId} ended with the claude process that asked it (a restart); Claude Code keeps no permission request in its store, so nothing is left to answer and nothing runs`, ['reason']);
    }
    if (approval.state !== 'pending') return denied('event_replayed', `approval request ${requestId} was already answered`, ['reason']);
    // A person's deny is decided and never dispatched; an allow goes out to Claude Code.
    approval.state = decision === 'allow' ? 'dispatched' : 'decided';
    approval.decision = decision;
    approval.decided_by = 'person';
    this.saveState();
    run.answer(decision === 'allow');
    return this.settle(approval.root, run, approval);
  }

  /** One `claude` run in the instance's working directory, killed with the adapter if it is still running. */
  async run(args, env, cwd, input) {
    const run = await runClaude({
      bin: this.bin, args, env, cwd: this.hostPath(cwd), input, timeoutMs: this.turnTimeoutMs,
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

  /** The harness's name for a tool Claude Code called by its own (`mcp__server__tool`). */
  nameBack(name) {
    for (const entry of this.catalogue.values()) if (entry.claude === name) return entry.name;
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
        if (agent) state = agent.meta.finished ? 'completed' : 'running';
        else { state = 'completed'; inferred.push('state'); }
      } else if (sessions.has(id)) {
        // `claude -p` runs to the end of a turn before the adapter answers, so
        // a stored session is idle: completed once the model answered in it,
        // running (started, no turn yet) before.
        state = sessionAnswered(sessions.get(id).path) ? 'completed' : 'running';
      } else {
        // Not in Claude Code's store (a start that never finished).
        state = 'running';
        inferred.push('state');
      }
      instances.push({
        id, state, role: known.role, model: known.model || MODEL_ID, ceiling: known.ceiling,
        ...(known.parent ? { parent: known.parent } : {}), inferred,
      });
    }
    // A request that ended with its `claude` process is gone: Claude Code holds it nowhere.
    const approvals = this.state.approvals.filter((a) => !this.requestGone(a)).map((a) => ({
      id: a.id, instance: a.instance, class: a.class, tool: a.tool, tool_digest: a.tool_digest,
      arguments_digest: a.arguments_digest, state: a.state,
      ...(a.decision ? { decision: a.decision, decided_by: a.decided_by } : {}),
    }));
    return {
      outcome: 'ok',
      observed: {
        now: 0, auto_approve: false, instances, approvals,
        // Claude Code keeps no approval records: they are the adapter's bookkeeping,
        // and so is a list a gone request was dropped from.
        ...(this.state.approvals.length ? { inferred: ['approvals'] } : {}),
      },
    };
  }

  /** Ends every running `claude` (stdin closed or SIGTERM: the harness is restarting us). */
  shutdown() {
    for (const run of this.live.values()) run.stop();
    this.live.clear();
    for (const child of this.running) killGroup(child, 'SIGKILL');
    this.running.clear();
  }
}

async function main() {
  if (process.argv.includes('--install')) {
    const bin = ensureClaude({ env: process.env, log: (level, message) => process.stderr.write(`${level}: ${message}\n`) });
    process.stderr.write(`claude-code ${bin.version} at ${bin.command}\n`);
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

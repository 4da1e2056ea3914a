#!/usr/bin/env node
// delegation-harness adapter for Gemini CLI: speaks host protocol v1 on stdio and runs each turn as `gemini -p` with stream-json output.
//
// Usage: node adapter.mjs            (the harness runs it: --host gemini-cli)
//        node adapter.mjs --install  (install the pinned Gemini CLI into the cache and exit)
// See README.md beside this file for what maps to what.

import { randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { CODES, RpcError, serve, logNotification } from './lib/rpc.mjs';
import {
  ensureGemini, isolatedEnv, storePaths, writeSettings, runGemini, killGroup, readStore, readJson, writeAtomic,
  GEMINI_MODEL,
} from './lib/gemini.mjs';
import { turnReport, acpTurnReport, eligibility, toolOfTitle, argumentsOf, READ_ONLY_REFUSED } from './lib/mapping.mjs';
import { toolCatalogue, digestOf } from './lib/mcp.mjs';
import { startRelay } from './lib/mcp-relay.mjs';
import { AcpRun } from './lib/acp.mjs';

const PROTOCOL_VERSION = '1.0';
const MODEL_ID = 'reference-model';
/** The harness's conventional child role, defined even when `host/configure` names no roles. */
const DEFAULT_ROLES = ['worker'];
/** Gemini CLI's built-in tools that write files or run commands: what a read-only instance may not hold. */
const WRITING_TOOLS = ['write_file', 'replace', 'run_shell_command'];
/** The tools a read-only role's agent definition lists (Gemini CLI's reading tools). */
const READING_TOOLS = ['read_file', 'list_directory', 'glob', 'grep_search'];

const denied = (reason, detail, inferred) => ({ outcome: 'denied', reason, ...(detail ? { detail } : {}), ...(inferred ? { inferred } : {}) });
const needString = (params, key) => {
  if (!params || typeof params[key] !== 'string') throw new RpcError(CODES.INVALID_PARAMS, `params.${key} must be a string`);
  return params[key];
};
const unsupported = (message) => new RpcError(CODES.UNSUPPORTED_OPTION, message);
const tomlString = (s) => JSON.stringify(String(s));

export class Adapter {
  constructor({ env = process.env, notify = () => {} } = {}) {
    this.env = env;
    this.notify = notify;
    // Below the harness's default 30 s step deadline, so a hung run is reported, not timed out.
    this.turnTimeoutMs = Number(env.GEMINI_CLI_ADAPTER_TURN_TIMEOUT_MS || 25000);
    this.initialized = false;
    this.running = new Set();
    this.mcpServers = [];
    this.catalogue = new Map();
    this.relays = [];
    /** Roots whose `gemini --acp` waits for a person's answer, by instance id. */
    this.live = new Map();
  }

  log(level, message) {
    process.stderr.write(`[adapter] ${level}: ${message}\n`);
    this.notify(level, message);
  }

  // ---- durable adapter state (what Gemini CLI's own store does not say) --------------------

  loadState() {
    this.state = readJson(this.paths.state, { instances: {}, configuration: {}, approvals: [] });
    this.state.approvals = this.state.approvals || [];
  }

  saveState() { writeAtomic(this.paths.state, JSON.stringify(this.state, null, 2) + '\n'); }

  /** A harness path (`/w/repo`) inside the store, where Gemini CLI really runs. */
  hostPath(path) {
    const local = join(this.paths.fs, path);
    mkdirSync(local, { recursive: true });
    return local;
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
        throw new RpcError(CODES.METHOD_NOT_FOUND, `${method}: Gemini CLI has no equivalent this adapter can drive honestly (see README.md)`);
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
    this.bin = ensureGemini({ env: this.env, log: (l, m) => this.log(l, m) });
    this.geminiEnv = isolatedEnv(this.storeDir, this.modelEndpoint, this.env);
    // Gemini CLI reaches each MCP server through a relay that drops the SSE
    // events without data its MCP client cannot read (lib/mcp-relay.mjs).
    // GEMINI_CLI_ADAPTER_NO_RELAY=1 connects Gemini CLI to the servers
    // directly: the reproduction of README finding 1.
    this.relays = this.env.GEMINI_CLI_ADAPTER_NO_RELAY === '1' ? [] : await Promise.all(this.mcpServers.map((s) => startRelay(s.url)));
    writeSettings(this.paths, this.mcpServers.map((s, i) => ({ name: s.name, url: this.relays.length ? this.relays[i].url : s.url })));
    this.initialized = true;
    return {
      host: { name: 'gemini-cli', version: this.bin.version },
      protocol_version: PROTOCOL_VERSION,
      // restart: sessions (and the subagents they started) are Gemini CLI's files under store_dir;
      // mcp: the harness's servers are Gemini CLI MCP servers (httpUrl in settings.json).
      // Not nested-delegation: Gemini CLI gives no subagent the invoke_agent tool
      // ("We do not allow agents to call other agents", local-executor.ts).
      capabilities: ['restart', 'mcp'],
    };
  }

  async configure(params) {
    const config = params || {};
    // Refused rather than accepted and ignored: Gemini CLI has none of these.
    if (config.authorizer_required) throw unsupported('Gemini CLI cannot consult an external authorizer before starting a subagent');
    if (config.strict_mode) throw unsupported('strict_mode: Gemini CLI has no sandbox policy by which to refuse an unsandboxed subagent');
    if (config.auto_approve) throw unsupported('auto_approve: Gemini CLI has no persistence-gated automatic approval');
    for (const [name, role] of Object.entries(config.roles || {})) {
      if (role && ((role.provider && role.provider !== 'harness') || (role.sandbox && role.sandbox.external) || role.approval_policy)) {
        throw unsupported(`role ${name}: only a role's sandbox and tools become a Gemini CLI agent definition`);
      }
    }
    if (this.mcpServers.length) await this.refreshCatalogue();
    for (const [name, role] of Object.entries(config.roles || {})) {
      // An empty `tools:` list would not be this role's default: Gemini CLI
      // would give the agent its own default tools instead.
      if (role && Array.isArray(role.tools) && !role.tools.some((t) => this.catalogue.has(t))) {
        throw unsupported(`role ${name}: none of its tools (${role.tools.join(', ')}) is served by the harness's MCP servers, and an agent definition cannot list none`);
      }
    }
    this.state.configuration = config;
    this.saveState();
    this.writeAgents();
    return { outcome: 'ok' };
  }

  /**
   * Each role is a custom agent (`~/.gemini/agents/ROLE.md` in the isolated
   * home): a role whose default names tools lists Gemini CLI's names of
   * those it serves; a read-only role lists only the reading tools (and, of
   * its named tools, those a read-only sandbox does not refuse).
   */
  writeAgents() {
    const configured = this.state.configuration.roles || {};
    const dir = join(this.paths.gemini, 'agents');
    mkdirSync(dir, { recursive: true });
    for (const name of new Set([...DEFAULT_ROLES, ...Object.keys(configured)])) {
      const role = configured[name] || {};
      const lines = ['---', `name: ${name}`, `description: The delegation-harness role ${name}`, 'kind: local'];
      const readOnly = role.sandbox === 'read-only';
      const named = Array.isArray(role.tools)
        ? role.tools.map((t) => this.catalogue.get(t)).filter((t) => t && !(readOnly && READ_ONLY_REFUSED.includes(t.class))).map((t) => t.gemini)
        : null;
      const tools = named ?? (readOnly ? READING_TOOLS : null);
      if (tools) lines.push('tools:', ...tools.map((t) => `  - ${t}`));
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
    if (sandbox && typeof sandbox === 'object' && sandbox.external) throw unsupported('Gemini CLI has no external sandboxes');
    const policy = params.approval_policy ?? 'never';
    // `gemini -p` asks no one: a tool that would ask is refused. Under
    // `never` that refusal is the policy; under `on-request` and `untrusted`
    // a turn that would have asked is answered -32001 (see turn). A granular
    // policy has no Gemini CLI form.
    if (!['never', 'on-request', 'untrusted'].includes(policy)) {
      throw unsupported(`approval policy ${JSON.stringify(policy)}: Gemini CLI's policy rules are per tool, not per action class`);
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
    // Gemini CLI takes the session id it is given (--session-id) at the first
    // turn and resumes it by that id later: the instance id is that id. A
    // session exists in Gemini CLI's store only after its first prompt, which
    // is a model request, so the start itself runs nothing.
    const id = randomUUID();
    // A root with a sealed tool a person must allow runs its turns in ACP
    // mode, where Gemini CLI asks its client; every other root runs
    // `gemini -p`, which asks no one.
    const asksPerson = sealed.some((t) => eligibility(t.class, ceiling) === 'ask');
    this.state.instances[id] = { role, model: MODEL_ID, ceiling, sealed: sealed.map((t) => t.name), cwd, ...(asksPerson ? { acp: true } : {}) };
    this.saveState();
    return { outcome: 'ok', instance: id, effective: ceiling, inferred: ['effective'] };
  }

  /**
   * The policy file carrying a root's ceiling: invoke_agent and the tools it
   * may not hold denied, each sealed MCP tool by its eligibility (allowed,
   * denied, or left to Gemini CLI's default, which asks). Answers
   * `{file, denied, readOnlyDenied, wouldAsk}`.
   */
  writePolicy(id, root) {
    const rules = [];
    const denied = new Set();
    const readOnlyDenied = new Set();
    const wouldAsk = new Set();
    const rule = (toolName, decision, priority) => {
      if (decision === 'deny') denied.add(toolName);
      rules.push(`[[rule]]\ntoolName = ${tomlString(toolName)}\ndecision = "${decision}"\npriority = ${priority}\n`);
    };
    if (root.ceiling.delegation_depth === 0) rule('invoke_agent', 'deny', 900);
    if (root.ceiling.sandbox === 'read-only') for (const t of WRITING_TOOLS) rule(t, 'deny', 900);
    const sealed = new Set(root.sealed || []);
    // A tool Gemini CLI leaves out is called under the harness's name (the
    // endpoint has no Gemini CLI name to use): both names are recorded.
    for (const entry of this.catalogue.values()) {
      const decision = sealed.has(entry.name) ? eligibility(entry.class, root.ceiling) : 'policy_denied';
      if (decision === 'runs') {
        rule(entry.gemini, 'allow', 900);
      } else if (decision === 'ask') {
        wouldAsk.add(entry.gemini);
        wouldAsk.add(entry.name);
      } else {
        rule(entry.gemini, 'deny', 900);
        denied.add(entry.name);
        if (decision === 'read_only_context') {
          readOnlyDenied.add(entry.gemini);
          readOnlyDenied.add(entry.name);
        }
      }
    }
    const file = join(this.paths.policies, `${id}.toml`);
    writeAtomic(file, rules.join('\n') || '# no rules: Gemini CLI\'s defaults\n');
    return { file, denied, readOnlyDenied, wouldAsk };
  }

  async turn(params) {
    const id = needString(params, 'instance');
    const input = needString(params, 'input');
    const instance = this.state.instances[id];
    if (!instance) {
      if (this.childOf(id)) throw unsupported('a turn on a subagent: Gemini CLI runs a subagent only within its parent\'s invoke_agent call');
      return denied('instance_unknown', `no instance ${id}`, ['reason']);
    }
    if (this.live.has(id)) return denied('policy_denied', `instance ${id} is waiting for a person's answer to Gemini CLI's permission request`, ['reason']);
    const sessions = readStore(this.paths.gemini);
    const policy = this.writePolicy(id, instance);
    const common = [
      '-m', GEMINI_MODEL, '--policy', policy.file,
      // yolo would run what a person must allow: only a root that asks no one gets it.
      '--approval-mode', instance.ceiling.sandbox === 'full-access' && !instance.acp ? 'yolo' : 'default',
    ];
    const env = { ...this.geminiEnv, GEMINI_CLI_CUSTOM_HEADERS: `x-delegation-instance:${id}` };
    if (instance.acp) return this.acpTurn(id, instance, input, common, env, policy);
    const args = [
      ...common, '-o', 'stream-json',
      sessions.has(id) ? '--resume' : '--session-id', id,
      `--prompt=${input}`,
    ];
    const run = await runGemini({
      bin: this.bin, args, env, cwd: this.hostPath(instance.cwd), timeoutMs: this.turnTimeoutMs,
      onSpawn: (child) => this.running.add(child),
    });
    this.running.clear();
    if (run.timedOut) {
      throw new RpcError(CODES.HOST_FAILURE, `gemini did not finish the turn within ${this.turnTimeoutMs} ms; killed. stderr: ${run.stderr.slice(-500)}`);
    }
    const result = run.events.find((e) => e.type === 'result');
    if (!result && run.code !== 0) {
      throw new RpcError(CODES.HOST_FAILURE, `gemini exited ${run.code ?? run.signal} without a result: ${run.stderr.slice(-800)}`);
    }
    const session = readStore(this.paths.gemini).get(id);
    const report = turnReport(run.events, {
      subagents: session ? session.subagents : [],
      nameBack: (name) => this.nameBack(name),
      childEffective: (child) => this.childCeiling(instance.ceiling, child.agentName),
      stderr: run.stderr,
      policyDenied: policy.denied,
      wouldAsk: policy.wouldAsk,
      readOnlyDenied: policy.readOnlyDenied,
    });
    if (report.asks && instance.ceiling.approval_policy !== 'never') {
      throw unsupported(`Gemini CLI would ask a person before ${report.turn.tool} (${report.detail}); a headless \`gemini -p\` run cannot ask, so approval policy ${instance.ceiling.approval_policy} is not expressed for this call`);
    }
    return {
      outcome: 'ok', instance: id, turn: report.turn,
      ...(report.tool_call ? { tool_call: report.tool_call } : {}),
      ...(report.detail ? { detail: report.detail } : {}),
      ...(report.inferred.length ? { inferred: report.inferred } : {}),
    };
  }

  /**
   * A turn of a root that may ask a person: `gemini --acp`, a new session at
   * the first turn (Gemini CLI chooses its id, recorded beside the instance)
   * and Gemini CLI's stored session later.
   */
  async acpTurn(id, instance, input, args, env, policy) {
    // Gemini CLI 0.61.0's `session/load` starts a new chat record for the
    // session before it looks the session up; within the clock minute of the
    // session file's creation that record is appended to the same file, hides
    // the conversation, and the load fails ("No previous sessions found for
    // this project", README finding 14). A turn that passes or fails by the
    // clock is not driven; GEMINI_CLI_ADAPTER_ACP_LOAD=1 drives it anyway:
    // the reproduction.
    if (instance.session && this.env.GEMINI_CLI_ADAPTER_ACP_LOAD !== '1') {
      throw unsupported('a later turn of a root that may ask a person (ACP mode): Gemini CLI 0.61.0\'s session/load fails when it comes within the clock minute its session file was created (README finding 14), so whether this turn runs would depend on the clock');
    }
    const run = new AcpRun({ bin: this.bin, args, env, cwd: this.hostPath(instance.cwd), onSpawn: (child) => this.running.add(child) });
    try {
      const session = await run.start(instance.session || null, input);
      if (!instance.session) {
        instance.session = session;
        this.saveState();
      }
    } catch (e) {
      run.stop();
      throw new RpcError(CODES.HOST_FAILURE, `gemini --acp could not open the session: ${e.message}${e.rpc && e.rpc.data !== undefined ? ` (${JSON.stringify(e.rpc.data).slice(0, 800)})` : ''}; stderr: ${run.stderr.slice(-800)}`);
    }
    return this.settle(id, run, policy);
  }

  /** Waits for root `id`'s ACP run to end or to ask a person, and reports either; `answered` is the approval a person just answered. */
  async settle(id, run, policy, answered) {
    const settled = await run.settle(this.turnTimeoutMs);
    if (settled.timedOut) {
      this.live.delete(id);
      throw new RpcError(CODES.HOST_FAILURE, `gemini --acp did not finish the turn within ${this.turnTimeoutMs} ms; killed. stderr: ${run.stderr.slice(-500)}`);
    }
    if (settled.pending) {
      this.live.set(id, { run, policy });
      const approval = this.recordApproval(id, settled.pending.params);
      const toolCall = { tool: approval.tool, outcome: 'pending_approval', approval: approval.id };
      if (answered) return { outcome: 'ok', instance: id, tool_call: toolCall };
      return { outcome: 'ok', instance: id, turn: { reply: 'tool_call', tool: approval.tool }, tool_call: toolCall };
    }
    this.live.delete(id);
    await run.finish();
    for (const child of this.running) if (child.exitCode !== null || child.signalCode !== null) this.running.delete(child);
    const instance = this.state.instances[id];
    const stored = readStore(this.paths.gemini).get(instance.session);
    const report = acpTurnReport(run.updates, {
      done: settled.done,
      answered,
      messages: stored ? stored.messages : [],
      subagents: stored ? stored.subagents : [],
      nameBack: (name) => this.nameBack(name),
      childEffective: (child) => this.childCeiling(instance.ceiling, child.agentName),
      policyDenied: policy.denied,
      readOnlyDenied: policy.readOnlyDenied,
      stderr: run.stderr,
    });
    if (answered) {
      const toolCall = { ...report.tool_call, approval: answered.id };
      return {
        outcome: toolCall.outcome === 'denied' ? 'denied' : 'ok', instance: id, tool_call: toolCall,
        ...(toolCall.outcome === 'denied' ? { reason: toolCall.reason } : {}),
        ...(report.detail ? { detail: report.detail } : {}),
        ...(report.inferred.length ? { inferred: report.inferred } : {}),
      };
    }
    return {
      outcome: 'ok', instance: id, turn: report.turn,
      ...(report.tool_call ? { tool_call: report.tool_call } : {}),
      ...(report.detail ? { detail: report.detail } : {}),
      ...(report.inferred.length ? { inferred: report.inferred } : {}),
    };
  }

  /**
   * A pending approval for Gemini CLI's `session/request_permission`. Gemini
   * CLI keeps no approval records: the id, state and decision are the
   * adapter's bookkeeping (reported inferred); the call is Gemini CLI's
   * (its id, and the tool's name as its title shows it).
   */
  recordApproval(root, params) {
    const call = params.toolCall || {};
    const tool = this.nameBack(toolOfTitle(call.title));
    const entry = this.catalogue.get(tool);
    const approval = {
      id: `a-${this.state.approvals.length + 1}`, instance: root, root, class: entry ? entry.class : 'generic', tool,
      tool_digest: entry ? entry.digest : 'sha256:unknown', arguments_digest: digestOf(argumentsOf(call)),
      state: 'pending', tool_call_id: call.toolCallId,
    };
    this.state.approvals.push(approval);
    this.saveState();
    return approval;
  }

  /** A person's answer: allow or deny (this one call) Gemini CLI's pending permission request. */
  async answer(params) {
    const requestId = needString(params, 'request');
    const decision = needString(params, 'decision');
    const approval = this.state.approvals.find((a) => a.id === requestId);
    if (!approval) return denied('instance_unknown', `no approval request ${requestId}`, ['reason']);
    // Gemini CLI's request was answered once and is gone: whatever the
    // decision, nothing is sent and nothing runs again.
    if (approval.state !== 'pending') return denied('event_replayed', `approval request ${requestId} was already answered`, ['reason']);
    if (!['allow', 'deny'].includes(decision)) {
      throw unsupported(`decision ${decision}: Gemini CLI's permission options are allow or reject this call, or allow always (for the session, the server or the tool: wider than one exact call)`);
    }
    const live = this.live.get(approval.root);
    if (!live || !live.run.pending || live.run.pending.params.toolCall?.toolCallId !== approval.tool_call_id) {
      // Gemini CLI keeps a permission request in its process only: after a
      // restart there is nothing to answer, and nothing is sent.
      return denied('policy_denied', `Gemini CLI's permission request behind ${requestId} ended with its \`gemini --acp\` process (a restart); it stays pending in the adapter's records`, ['reason']);
    }
    if (!live.run.answer(decision === 'allow')) {
      throw new RpcError(CODES.HOST_FAILURE, `Gemini CLI offered no ${decision === 'allow' ? 'allow_once' : 'reject_once'} option for ${requestId}`);
    }
    // A person's deny is decided and never dispatched; an allow goes out to Gemini CLI.
    approval.state = decision === 'allow' ? 'dispatched' : 'decided';
    approval.decision = decision;
    approval.decided_by = 'person';
    this.saveState();
    return this.settle(approval.root, live.run, live.policy, approval);
  }

  /** The subagent with instance id `id` (the model's invoke_agent call id) in Gemini CLI's store, with its root. */
  childOf(id) {
    for (const [root, session] of readStore(this.paths.gemini)) {
      const found = session.subagents.find((s) => s.callId === id);
      if (found) return { root, ...found };
    }
    return null;
  }

  /** A subagent's ceiling as the adapter configured it: its parent's with no delegation (Gemini CLI gives subagents no invoke_agent), narrowed by its role's agent definition. */
  childCeiling(parent, roleName) {
    const role = (this.state.configuration.roles || {})[roleName] || {};
    const ceiling = { ...parent, delegation_depth: 0 };
    if (role.sandbox === 'read-only') ceiling.sandbox = 'read-only';
    if (Array.isArray(role.tools)) {
      ceiling.tools = Object.fromEntries(Object.entries(parent.tools || {}).filter(([name]) => role.tools.includes(name)));
    }
    return ceiling;
  }

  /** The harness's name for a tool Gemini CLI called by its own (`mcp_harness_notes.read`). */
  nameBack(name) {
    for (const entry of this.catalogue.values()) if (entry.gemini === name) return entry.name;
    return name;
  }

  observe() {
    const sessions = readStore(this.paths.gemini);
    const instances = [];
    for (const [id, known] of Object.entries(this.state.instances)) {
      // An ACP root's session has the id Gemini CLI chose for it.
      const session = sessions.get(known.session || id);
      // A root is in Gemini CLI's store from its first turn on; a turn runs
      // to its end before the adapter answers, so a stored session is idle:
      // completed once the model answered in it. One whose `gemini --acp`
      // waits for a person's answer is running.
      const state = this.live.has(id) ? 'running' : session ? (session.answered ? 'completed' : 'running') : 'running';
      instances.push({
        id, state, role: known.role, model: known.model || MODEL_ID, ceiling: known.ceiling,
        inferred: session ? ['ceiling'] : ['ceiling', 'state'],
      });
      for (const child of session ? session.subagents : []) {
        instances.push({
          id: child.callId, parent: id, role: child.agentName || 'unknown', model: known.model || MODEL_ID,
          state: child.status === 'success' && child.state === 'completed' ? 'completed' : 'failed',
          ceiling: this.childCeiling(known.ceiling, child.agentName),
          inferred: ['ceiling'],
        });
      }
    }
    const approvals = this.state.approvals.map((a) => ({
      id: a.id, instance: a.instance, class: a.class, tool: a.tool, tool_digest: a.tool_digest,
      arguments_digest: a.arguments_digest, state: a.state,
      ...(a.decision ? { decision: a.decision, decided_by: a.decided_by } : {}),
    }));
    return {
      outcome: 'ok',
      observed: {
        now: 0, auto_approve: false, instances, approvals,
        // Gemini CLI keeps no approval records: they are the adapter's bookkeeping.
        ...(approvals.length ? { inferred: ['approvals'] } : {}),
      },
    };
  }

  /** Ends every running `gemini` (stdin closed or SIGTERM: the harness is restarting us). */
  shutdown() {
    for (const { run } of this.live.values()) run.stop();
    this.live.clear();
    for (const child of this.running) killGroup(child, 'SIGKILL');
    this.running.clear();
    for (const relay of this.relays) relay.close();
    this.relays = [];
  }
}

async function main() {
  if (process.argv.includes('--install')) {
    const bin = ensureGemini({ env: process.env, log: (level, message) => process.stderr.write(`${level}: ${message}\n`) });
    process.stderr.write(`gemini-cli ${bin.version} at ${bin.args[0] || bin.command}\n`);
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

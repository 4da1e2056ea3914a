#!/usr/bin/env node
// delegation-harness adapter for GitHub Copilot CLI: speaks host protocol v1 on stdio and runs each turn as `copilot -p` with JSON-lines output.
//
// Usage: node adapter.mjs            (the harness runs it: --host copilot)
//        node adapter.mjs --install  (install the pinned Copilot CLI into the cache and exit)
// See README.md beside this file for what maps to what.

import { randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { CODES, RpcError, serve, logNotification } from './lib/rpc.mjs';
import { ensureCopilot, isolatedEnv, storePaths, runCopilot, killGroup, readSessions, readJson, writeAtomic } from './lib/copilot.mjs';
import { digestEvents, childrenOf, turnReport, askedNobody, TASK_TOOL } from './lib/mapping.mjs';
import { toolCatalogue } from './lib/mcp.mjs';

const PROTOCOL_VERSION = '1.0';
const MODEL_ID = 'reference-model';
/** The harness's conventional child role, defined even when `host/configure` names no roles. */
const DEFAULT_ROLES = ['worker'];
/**
 * Copilot's permission kinds that write files or run commands (`copilot help
 * permissions`): what a read-only instance is denied. `write` covers every
 * file-writing tool, `shell` every command.
 */
const WRITING_KINDS = ['shell', 'write'];
/** The built-in tools a read-only custom agent keeps (its `tools:` list): reading, searching and delegating. */
const READ_ONLY_AGENT_TOOLS = ['view', 'grep', 'glob', 'task', 'read_agent', 'list_agents'];
/** The MCP tool classes a read-only sandbox refuses (the protocol's eligibility table: read_only_context). */
const READ_ONLY_REFUSED = ['file-write', 'shell', 'generic'];

const denied = (reason, detail, inferred) => ({ outcome: 'denied', reason, ...(detail ? { detail } : {}), ...(inferred ? { inferred } : {}) });
const needString = (params, key) => {
  if (!params || typeof params[key] !== 'string') throw new RpcError(CODES.INVALID_PARAMS, `params.${key} must be a string`);
  return params[key];
};
const unsupported = (message) => new RpcError(CODES.UNSUPPORTED_OPTION, message);

/**
 * The protocol's eligibility of a sealed MCP tool of class `toolClass` under
 * `ceiling`: `runs` (no one is asked), `ask`, or the reason it is refused.
 * The adapter turns `runs` into a Copilot allow rule and a refusal into a
 * deny rule, so that Copilot itself lets the call through or refuses it.
 */
export function eligibility(toolClass, ceiling) {
  if (toolClass === 'read') return 'runs';
  const sandbox = ceiling.sandbox;
  if (sandbox === 'read-only' && READ_ONLY_REFUSED.includes(toolClass)) return 'read_only_context';
  if (toolClass === 'network') {
    const network = sandbox === 'full-access' || Boolean(sandbox && sandbox['workspace-write'] && sandbox['workspace-write'].network);
    if (!network) return 'policy_denied';
  }
  if (ceiling.approval_policy === 'never') return 'policy_denied';
  if (toolClass === 'file-write' && ceiling.approval_policy === 'on-request') return 'runs';
  return 'ask';
}

export class Adapter {
  constructor({ env = process.env, notify = () => {} } = {}) {
    this.env = env;
    this.notify = notify;
    // Below the harness's default 30 s step deadline, so a hung run is reported, not timed out.
    this.turnTimeoutMs = Number(env.COPILOT_ADAPTER_TURN_TIMEOUT_MS || 25000);
    // How delegation depth 0 is expressed: `exclude` (the default: --excluded-tools task,
    // which removes the tool) or `deny` (--deny-tool task, the permission rule the
    // README's finding 1 shows has no effect on task): for reproducing that finding
    // with the harness's own observers.
    this.depthZero = env.COPILOT_ADAPTER_DEPTH0 === 'deny' ? 'deny' : 'exclude';
    this.initialized = false;
    this.running = new Set();
    this.mcpServers = [];
    this.catalogue = new Map();
  }

  log(level, message) {
    process.stderr.write(`[adapter] ${level}: ${message}\n`);
    this.notify(level, message);
  }

  // ---- durable adapter state (what Copilot's own store does not say) -------------------------

  loadState() {
    this.state = readJson(this.paths.state, { instances: {}, configuration: {} });
  }

  saveState() { writeAtomic(this.paths.state, JSON.stringify(this.state, null, 2) + '\n'); }

  /** A harness path (`/w/repo`) inside the store, where Copilot really runs. */
  hostPath(path) {
    const local = join(this.paths.fs, path);
    mkdirSync(local, { recursive: true });
    return local;
  }

  /** The root an instance belongs to: Copilot runs one session per root, its subagents inside it. */
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
      case 'state/observe': return this.observe();
      default:
        throw new RpcError(CODES.METHOD_NOT_FOUND, `${method}: GitHub Copilot CLI has no equivalent this adapter can drive honestly (see README.md)`);
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
    this.bin = ensureCopilot({ env: this.env, log: (l, m) => this.log(l, m) });
    this.copilotEnv = isolatedEnv(this.storeDir, this.modelEndpoint, this.bin, this.env);
    this.initialized = true;
    return {
      host: { name: 'copilot', version: this.bin.version },
      protocol_version: PROTOCOL_VERSION,
      // nested-delegation: a subagent is offered `task` too;
      // restart: sessions and their subagents' events are Copilot's files under store_dir;
      // mcp: the harness's servers are Copilot HTTP MCP servers (--additional-mcp-config).
      capabilities: ['nested-delegation', 'restart', 'mcp'],
    };
  }

  async configure(params) {
    const config = params || {};
    // Refused rather than accepted and ignored: Copilot has none of these.
    if (config.authorizer_required) throw unsupported('Copilot cannot consult an external authorizer before starting a subagent');
    if (config.strict_mode) throw unsupported('strict_mode: Copilot has no sandbox policy by which to refuse an unsandboxed subagent');
    if (config.auto_approve) throw unsupported('auto_approve: Copilot has no persistence-gated automatic approval');
    for (const [name, role] of Object.entries(config.roles || {})) {
      if (role && (role.tools || (role.provider && role.provider !== 'harness') || (role.sandbox && role.sandbox.external))) {
        throw unsupported(`role ${name}: only a role's sandbox becomes a Copilot custom agent definition`);
      }
    }
    this.state.configuration = config;
    this.saveState();
    this.writeAgents();
    if (this.mcpServers.length) await this.refreshCatalogue();
    return { outcome: 'ok' };
  }

  /** Each role is a custom agent (`~/.copilot/agents/ROLE.agent.md` in the isolated home): a read-only role keeps only the reading tools. */
  writeAgents() {
    const configured = this.state.configuration.roles || {};
    const dir = join(this.paths.home, '.copilot', 'agents');
    mkdirSync(dir, { recursive: true });
    for (const name of new Set([...DEFAULT_ROLES, ...Object.keys(configured)])) {
      const role = configured[name] || {};
      const lines = ['---', `name: ${name}`, `description: The delegation-harness role ${name}`];
      if (role.sandbox === 'read-only') lines.push(`tools: ${JSON.stringify(READ_ONLY_AGENT_TOOLS)}`);
      lines.push('---', `You are the ${name} subagent. Do the task you are given.`, '');
      writeFileSync(join(dir, `${name}.agent.md`), lines.join('\n'));
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
    if (sandbox && typeof sandbox === 'object' && sandbox.external) throw unsupported('Copilot has no external sandboxes');
    const policy = params.approval_policy ?? 'never';
    if (!['never', 'on-request', 'untrusted'].includes(policy)) {
      throw unsupported(`approval policy ${JSON.stringify(policy)}: Copilot's permission rules are per tool kind (shell, write, MCP server, url), not per action class`);
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
    // Copilot takes the session id it is given (--session-id) and names its
    // session folder after it in every request's system prompt, where the
    // harness's endpoint reads it: the instance id is that id. The session
    // itself is created by the first turn.
    const id = randomUUID();
    this.state.instances[id] = { role, model: MODEL_ID, ceiling, sealed: sealed.map((t) => t.name), cwd };
    this.saveState();
    return {
      outcome: 'ok', instance: id, effective: ceiling,
      // Copilot holds permission rules and tool filters, not an authority: the ceiling is the adapter's record.
      inferred: ['effective'],
    };
  }

  /** The `copilot -p` options that carry a root's ceiling: permission rules, tool filters, MCP servers. */
  rootOptions(root) {
    const ceiling = root.ceiling;
    const args = ['--output-format', 'json', '--no-ask-user', '--no-auto-update', '--disable-builtin-mcps',
      '--no-custom-instructions', '--log-dir', this.paths.logs];
    const deny = [];
    const exclude = [];
    const allow = [];
    // `never`: nothing asks; everything runs unless a deny rule refuses it.
    // `on-request`: writes inside the allowed paths and the sealed read-class
    // MCP tools run unasked, anything else asks; `untrusted`: everything asks.
    // Copilot asks a person only interactively (or over ACP); `copilot -p`
    // answers its own ask with a denial, which turn() reports as the
    // adapter's gap (-32001), never as Copilot's refusal.
    if (ceiling.approval_policy === 'never') args.push(ceiling.sandbox === 'full-access' ? '--allow-all' : '--allow-all-tools');
    else if (ceiling.sandbox === 'full-access') args.push('--allow-all-paths', '--allow-all-urls');
    if (ceiling.approval_policy === 'on-request' && ceiling.sandbox !== 'read-only') allow.push('write');
    if (ceiling.sandbox === 'read-only') deny.push(...WRITING_KINDS);
    if (ceiling.sandbox && ceiling.sandbox['workspace-write']) {
      for (const r of ceiling.sandbox['workspace-write'].writable_roots || []) args.push('--add-dir', this.hostPath(r));
    }
    if (ceiling.delegation_depth === 0) {
      if (this.depthZero === 'deny') deny.push(TASK_TOOL);
      else exclude.push(TASK_TOOL);
    }
    // Copilot's own nesting limit (`subagents.maxDepth` in its settings, read
    // at start): a subagent at that depth is answered "Maximum sub-agent
    // depth of N reached" when it calls `task`. One home serves every root of
    // the store, so it is written before each run for the root that runs.
    const settings = ceiling.delegation_depth > 0 ? { subagents: { maxDepth: ceiling.delegation_depth } } : {};
    writeAtomic(join(this.copilotEnv.COPILOT_HOME, 'settings.json'), JSON.stringify(settings, null, 2) + '\n');
    if (this.mcpServers.length) {
      const config = { mcpServers: Object.fromEntries(this.mcpServers.map((s) => [s.name, { type: 'http', url: s.url, tools: ['*'] }])) };
      const file = join(this.paths.root, 'mcp-config.json');
      writeAtomic(file, JSON.stringify(config, null, 2) + '\n');
      args.push('--additional-mcp-config', `@${file}`);
      // A tool served but not sealed is not offered. A sealed tool gets an
      // allow rule where the protocol's eligibility table runs it unasked and
      // a deny rule where the table refuses it (Copilot then refuses the call
      // itself: "denied due to the following rules"); every other sealed tool
      // asks.
      const sealed = new Set(root.sealed || []);
      for (const entry of this.catalogue.values()) {
        if (!sealed.has(entry.name)) { exclude.push(entry.copilot); continue; }
        const verdict = eligibility(entry.class, ceiling);
        if (verdict === 'runs') allow.push(`${entry.server}(${entry.name})`);
        else if (verdict !== 'ask') deny.push(`${entry.server}(${entry.name})`);
      }
    }
    for (const rule of allow) args.push(`--allow-tool=${rule}`);
    for (const rule of deny) args.push(`--deny-tool=${rule}`);
    if (exclude.length) args.push(`--excluded-tools=${exclude.join(',')}`);
    return args;
  }

  async turn(params) {
    const id = needString(params, 'instance');
    const input = needString(params, 'input');
    const instance = this.state.instances[id];
    if (!instance) return denied('instance_unknown', `no instance ${id}`, ['reason']);
    if (instance.parent) {
      throw unsupported('a turn on a subagent: Copilot continues a subagent only through its parent\'s model (write_agent on a background agent), not from outside');
    }
    const args = [`--prompt=${input}`, ...this.rootOptions(instance), '--session-id', id];
    const run = await this.run(args, instance.cwd);
    if (run.timedOut) {
      throw new RpcError(CODES.HOST_FAILURE, `copilot did not finish the turn within ${this.turnTimeoutMs} ms; killed. stderr: ${run.stderr.slice(-500)}`);
    }
    const digest = digestEvents(run.events);
    this.registerChildren(id, digest);
    if (!digest.result && run.code !== 0 && !digest.lastError) {
      throw new RpcError(CODES.HOST_FAILURE, `copilot exited ${run.code ?? run.signal} without a result: ${run.stderr.slice(-800)}`);
    }
    const asked = askedNobody(digest);
    if (asked) {
      throw unsupported(`Copilot asked for permission (${asked}); \`copilot -p\` has no one to ask and denied it itself: a person's approval is not reachable through this adapter`);
    }
    const report = turnReport(digest, {
      nameBack: (name) => this.nameBack(name),
      childEffective: (child) => (this.state.instances[child] || {}).ceiling,
      taskRemoved: instance.ceiling.delegation_depth === 0 && this.depthZero === 'exclude',
      // The reason behind a deny rule the adapter set for a sealed MCP tool: Copilot names only the rule.
      denyRuleReason: (name) => {
        const entry = [...this.catalogue.values()].find((t) => t.copilot === name || t.name === name);
        const verdict = entry ? eligibility(entry.class, instance.ceiling) : 'runs';
        return verdict === 'runs' || verdict === 'ask' ? null : verdict;
      },
    });
    return {
      outcome: 'ok', instance: id, turn: report.turn,
      ...(report.tool_call ? { tool_call: report.tool_call } : {}),
      ...(report.detail ? { detail: report.detail } : {}),
      ...(report.inferred.length ? { inferred: report.inferred } : {}),
    };
  }

  /** Records the subagents a run created (from its JSON events). */
  registerChildren(id, digest) {
    const instance = this.state.instances[id];
    for (const child of childrenOf(digest, id)) {
      if (this.state.instances[child.id]) continue;
      const parentCeiling = (this.state.instances[child.parent] || {}).ceiling || instance.ceiling;
      this.state.instances[child.id] = { parent: child.parent, role: child.role, model: MODEL_ID, agentId: child.agentId, ceiling: this.childCeiling(parentCeiling, child.role) };
    }
    this.saveState();
  }

  /** One `copilot` run in the instance's working directory, killed with the adapter if it is still running. */
  async run(args, cwd) {
    const run = await runCopilot({
      bin: this.bin, args, env: this.copilotEnv, cwd: this.hostPath(cwd), timeoutMs: this.turnTimeoutMs,
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
    return ceiling;
  }

  /** The harness's name for a tool Copilot called by its own (`harness-notes-read`). */
  nameBack(name) {
    for (const entry of this.catalogue.values()) if (entry.copilot === name) return entry.name;
    return name;
  }

  /**
   * The instances as Copilot's store holds them: a root is its session
   * (`session-state/<id>/events.jsonl`), completed once the model answered
   * in it; a subagent is its `subagent.started` event in its root's session,
   * completed or failed by `subagent.completed`/`subagent.failed`. A
   * subagent in the store that the adapter never registered (a run cut off
   * by a restart) is listed too.
   */
  observe() {
    const sessions = readSessions(this.paths.home);
    const fromStore = new Map();
    for (const [rootId, known] of Object.entries(this.state.instances)) {
      if (known.parent || !sessions.has(rootId)) continue;
      for (const child of childrenOf(digestEvents(sessions.get(rootId)), rootId)) fromStore.set(child.id, child);
    }
    const instances = [];
    const listed = new Set();
    for (const [id, known] of Object.entries(this.state.instances)) {
      const inferred = ['ceiling'];
      let state;
      if (known.parent) {
        const child = fromStore.get(id);
        if (child) state = child.state;
        else { state = 'completed'; inferred.push('state'); }
      } else if (sessions.has(id)) {
        // `copilot -p` runs to the end of a turn before the adapter answers,
        // so a stored session is idle: completed once the model answered.
        state = sessions.get(id).some((e) => e.type === 'assistant.message' && !(e.data || {}).parentToolCallId) ? 'completed' : 'running';
      } else {
        // Copilot creates the session at the first turn: none yet.
        state = 'running';
        inferred.push('state');
      }
      listed.add(id);
      instances.push({
        id, state, role: known.role, model: known.model || MODEL_ID, ceiling: known.ceiling,
        ...(known.parent ? { parent: known.parent } : {}), inferred,
      });
    }
    for (const [id, child] of fromStore) {
      if (listed.has(id)) continue;
      const parentCeiling = (this.state.instances[child.parent] || {}).ceiling || {};
      instances.push({
        id, state: child.state, role: child.role, model: MODEL_ID, parent: child.parent,
        ceiling: this.childCeiling(parentCeiling, child.role), inferred: ['ceiling'],
      });
    }
    return { outcome: 'ok', observed: { now: 0, auto_approve: false, instances, approvals: [] } };
  }

  /** Ends every running `copilot` (stdin closed or SIGTERM: the harness is restarting us). */
  shutdown() {
    for (const child of this.running) killGroup(child, 'SIGKILL');
    this.running.clear();
  }
}

async function main() {
  if (process.argv.includes('--install')) {
    const bin = ensureCopilot({ env: process.env, log: (level, message) => process.stderr.write(`${level}: ${message}\n`) });
    process.stderr.write(`copilot ${bin.version} at ${bin.command}\n`);
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

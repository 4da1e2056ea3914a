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
import { ensureCopilot, isolatedEnv, storePaths, runCopilot, killGroup, readSessions, readSessionEvents, readJson, writeAtomic } from './lib/copilot.mjs';
import { digestEvents, childrenOf, turnReport, askedNobody, TASK_TOOL } from './lib/mapping.mjs';
import { toolCatalogue, digestOf } from './lib/mcp.mjs';
import { AcpProcess } from './lib/acp.mjs';

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

/** What approval policy `policy` does with class `toolClass`: `run`, `ask` or `deny` (PROTOCOL.md, Approval policies). */
export function policyVerdict(policy, toolClass) {
  if (policy && typeof policy === 'object' && policy.granular) {
    if ((policy.granular.deny || []).includes(toolClass)) return 'deny';
    return (policy.granular.ask || []).includes(toolClass) ? 'ask' : 'run';
  }
  if (toolClass === 'read') return 'run';
  if (policy === 'never') return 'deny';
  return policy === 'on-request' && toolClass === 'file-write' ? 'run' : 'ask';
}

/**
 * The protocol's eligibility of a tool call of class `toolClass` under
 * `ceiling`: `runs` (no one is asked), `ask`, or the reason it is refused.
 * The adapter turns `runs` into a Copilot allow rule and a refusal into a
 * deny rule, so that Copilot itself lets the call through or refuses it.
 */
export function eligibility(toolClass, ceiling) {
  const sandbox = ceiling.sandbox;
  if (sandbox === 'read-only' && READ_ONLY_REFUSED.includes(toolClass)) return 'read_only_context';
  if (toolClass === 'network') {
    const network = sandbox === 'full-access' || Boolean(sandbox && sandbox['workspace-write'] && sandbox['workspace-write'].network);
    if (!network) return 'policy_denied';
  }
  const verdict = policyVerdict(ceiling.approval_policy, toolClass);
  return verdict === 'run' ? 'runs' : verdict === 'ask' ? 'ask' : 'policy_denied';
}

/** Whether a root's policy can ask a person for anything: such a root runs as Copilot's ACP server. */
export const asksPerson = (ceiling) => {
  const policy = ceiling.approval_policy;
  if (policy && typeof policy === 'object' && policy.granular) return (policy.granular.ask || []).length > 0;
  return policy !== 'never';
};

const withTimeout = (promise, ms, what) => Promise.race([
  promise,
  new Promise((_, reject) => setTimeout(() => reject(new Error(`${what} not answered within ${ms} ms`)), ms)),
]);

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
    // Root instance id -> its `copilot --acp` process (roots whose policy can ask a person).
    this.acp = new Map();
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
    this.state.approvals = this.state.approvals || [];
    // A permission request is a request of the `copilot --acp` process that
    // asked it; that process ended with the previous adapter (a restart), so
    // Copilot holds none of the requests still pending then, and neither is
    // listed or answerable any more.
    for (const approval of this.state.approvals) if (approval.state === 'pending') approval.lost = true;
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
      case 'approval/answer': return this.answer(params);
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
      if (role && ((role.provider && role.provider !== 'harness') || (role.sandbox && role.sandbox.external))) {
        throw unsupported(`role ${name}: only a role's sandbox and tools become a Copilot custom agent definition`);
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

  /** Each role is a custom agent (`~/.copilot/agents/ROLE.agent.md` in the isolated home): a read-only role keeps only the reading tools. */
  writeAgents() {
    const configured = this.state.configuration.roles || {};
    const dir = join(this.paths.home, '.copilot', 'agents');
    mkdirSync(dir, { recursive: true });
    for (const name of new Set([...DEFAULT_ROLES, ...Object.keys(configured)])) {
      const role = configured[name] || {};
      const lines = ['---', `name: ${name}`, `description: The delegation-harness role ${name}`];
      if (Array.isArray(role.tools)) {
        // Copilot's own tool list of a custom agent, MCP tools as `server/tool`:
        // whether a spawn of it is held to its parent's tools is Copilot's to
        // decide and the harness's to observe (zc/047, zc/048).
        const names = role.tools.map((tool) => this.catalogue.get(tool)).filter(Boolean)
          .filter((t) => role.sandbox !== 'read-only' || !READ_ONLY_REFUSED.includes(t.class))
          .map((t) => `${t.server}/${t.name}`);
        // An empty list would read as "every tool".
        if (!names.length) throw unsupported(`role ${name}: none of its tools is served, and a Copilot agent with an empty tool list has every tool`);
        lines.push(`tools: ${JSON.stringify([...(role.sandbox === 'read-only' ? READ_ONLY_AGENT_TOOLS : []), ...names])}`);
      } else if (role.sandbox === 'read-only') lines.push(`tools: ${JSON.stringify(READ_ONLY_AGENT_TOOLS)}`);
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
    const granular = policy && typeof policy === 'object' && policy.granular;
    if (!granular && !['never', 'on-request', 'untrusted'].includes(policy)) {
      throw unsupported(`approval policy ${JSON.stringify(policy)}: not one Copilot's permission rules can express`);
    }
    if (granular && [...(granular.ask || []), ...(granular.deny || [])].includes('delegation')) {
      // Copilot's task tool asks no permission, and a deny rule on it does not stop a subagent (README finding 1).
      throw unsupported(`approval policy ${JSON.stringify(policy)}: Copilot cannot ask about or refuse delegation by a permission rule`);
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
    const instance = { role, model: MODEL_ID, ceiling, sealed: sealed.map((t) => t.name), cwd };
    let id;
    if (asksPerson(ceiling)) {
      // A root whose policy can ask a person runs as Copilot's ACP server,
      // whose permission requests the adapter relays (approval/answer). ACP
      // assigns the session id (session/new), and a session without a prompt
      // cannot be loaded by another process: the process lives from here on,
      // and the instance id is Copilot's session id.
      instance.acp = true;
      const proc = this.startAcp(instance);
      try {
        id = await withTimeout(proc.open({ cwd: this.hostPath(cwd) }), this.turnTimeoutMs, 'session/new');
      } catch (e) {
        proc.stop();
        throw new RpcError(CODES.HOST_FAILURE, `copilot --acp made no session: ${e.message}. stderr: ${proc.stderr.slice(-500)}`);
      }
      this.acp.set(id, proc);
    } else {
      // Copilot takes the session id it is given (--session-id) and names its
      // session folder after it in every request's system prompt, where the
      // harness's endpoint reads it: the instance id is that id. The session
      // itself is created by the first turn.
      id = randomUUID();
    }
    this.state.instances[id] = instance;
    this.saveState();
    return {
      outcome: 'ok', instance: id, effective: ceiling,
      // Copilot holds permission rules and tool filters, not an authority: the ceiling is the adapter's record.
      inferred: ['effective'],
    };
  }

  /** A `copilot --acp` process for a root, with the root's options. */
  startAcp(instance) {
    const args = this.rootOptions(instance).filter((a, i, all) => a !== '--output-format' && all[i - 1] !== '--output-format');
    return new AcpProcess({ bin: this.bin, args, env: this.copilotEnv, cwd: this.hostPath(instance.cwd), onSpawn: (child) => this.running.add(child) });
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
    else if (ceiling.approval_policy && ceiling.approval_policy.granular) {
      // A granular policy names classes: Copilot's built-in kinds get the rule of theirs.
      for (const [kind, toolClass] of [['shell', 'shell'], ['write', 'file-write']]) {
        const verdict = eligibility(toolClass, ceiling);
        if (verdict === 'runs') allow.push(kind);
        else if (verdict !== 'ask') deny.push(kind);
      }
    }
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
    if (instance.acp) return this.acpTurn(id, instance, input);
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
    return this.turnReply(id, instance, digest);
  }

  /** The turn's reply from what Copilot recorded of it. */
  turnReply(id, instance, digest) {
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

  /**
   * A turn of an ACP root: `session/prompt` on its process (started again
   * and the session loaded after a restart), answered when the prompt ends
   * or when Copilot asks the adapter for a person's permission.
   */
  async acpTurn(id, instance, input) {
    if (this.state.approvals.some((a) => a.root === id && a.state === 'pending' && this.acp.has(id))) {
      return denied('policy_denied', `instance ${id} is waiting for a person's answer to Copilot's permission request`, ['reason']);
    }
    let proc = this.acp.get(id);
    if (!proc || proc.exited) {
      proc = this.startAcp(instance);
      try {
        await withTimeout(proc.open({ cwd: this.hostPath(instance.cwd), sessionId: id }), this.turnTimeoutMs, 'session/load');
      } catch (e) {
        proc.stop();
        // Copilot's own refusal: an ACP session that never had a prompt is
        // not loadable by another process, though its folder is in the store.
        if (/Session .* not found/i.test(e.message)) return denied('instance_unknown', `Copilot: ${e.message}`);
        throw new RpcError(CODES.HOST_FAILURE, `copilot --acp could not load session ${id}: ${e.message}. stderr: ${proc.stderr.slice(-500)}`);
      }
      this.acp.set(id, proc);
    }
    proc.turnStart = readSessionEvents(this.paths.home, id).length;
    proc.prompt(id, input);
    return this.settleAcp(id, proc);
  }

  /** Waits for the ACP root's prompt to end or to ask a person, and reports either (`answered`: the approval just answered). */
  async settleAcp(id, proc, answered) {
    const settled = await proc.settle(this.turnTimeoutMs);
    if (settled.timedOut || settled.exited) {
      proc.stop();
      this.acp.delete(id);
      throw new RpcError(CODES.HOST_FAILURE, `copilot --acp ${settled.timedOut ? `did not finish the turn within ${this.turnTimeoutMs} ms; killed` : 'exited during the turn'}. stderr: ${proc.stderr.slice(-500)}`);
    }
    const callId = settled.pending && settled.pending.params.toolCall && settled.pending.params.toolCall.toolCallId;
    // Copilot writes its events file as it goes: wait until it holds what the ACP answer announced.
    const events = await this.turnEvents(id, proc.turnStart, (digest) => (callId ? digest.toolNames.has(callId) : true));
    if (settled.done) {
      // The prompt's answer is Copilot's end of the turn, as `result` is in a `copilot -p` run.
      events.push({ type: 'result', exitCode: settled.done.error ? 1 : 0 });
    }
    const digest = digestEvents(events);
    this.registerChildren(id, digest);
    if (settled.pending) {
      const approval = this.recordApproval(id, settled.pending, digest);
      const toolCall = { tool: approval.tool, outcome: 'pending_approval', approval: approval.id };
      if (answered) return { outcome: 'ok', instance: approval.instance, tool_call: toolCall };
      return { outcome: 'ok', instance: id, turn: { reply: 'tool_call', tool: approval.tool }, tool_call: toolCall };
    }
    if (answered) return this.answeredReport(answered, digest);
    return this.turnReply(id, this.state.instances[id], digest);
  }

  /** The events of root `id` since the turn began, read again (for at most 2 s) until `ready(digest)` and the file stops growing. */
  async turnEvents(id, from, ready) {
    let last = -1;
    for (let waited = 0; ; waited += 100) {
      const events = readSessionEvents(this.paths.home, id).slice(from);
      if ((events.length === last && ready(digestEvents(events))) || waited >= 2000) return events;
      last = events.length;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /**
   * A pending approval for Copilot's permission request. Copilot keeps no
   * approval records: the id, state and decision are the adapter's
   * bookkeeping (reported inferred); the tool, its arguments and the asking
   * instance (a subagent's call names its task call) are Copilot's.
   */
  recordApproval(root, pending, digest) {
    const toolCall = pending.params.toolCall || {};
    const copilotName = digest.toolNames.get(toolCall.toolCallId) || toolCall.title || 'unknown';
    const tool = this.nameBack(copilotName);
    const entry = [...this.catalogue.values()].find((t) => t.name === tool);
    const owner = digest.callOwner.get(toolCall.toolCallId);
    const approval = {
      id: `a-${this.state.approvals.length + 1}`, instance: owner && this.state.instances[owner] ? owner : root, root,
      class: entry ? entry.class : 'generic', tool, tool_digest: entry ? entry.digest : 'sha256:unknown',
      arguments_digest: digestOf(digest.toolArguments.get(toolCall.toolCallId) || toolCall.rawInput || {}),
      state: 'pending', tool_call_id: toolCall.toolCallId,
    };
    this.state.approvals.push(approval);
    this.saveState();
    return approval;
  }

  /** What became of the call a person answered, from Copilot's tool result for it. */
  answeredReport(approval, digest) {
    const result = digest.results.get(approval.tool_call_id);
    const executed = result && result.success;
    const toolCall = executed
      ? { tool: approval.tool, outcome: 'executed', approval: approval.id, result: result.text }
      : { tool: approval.tool, outcome: 'denied', reason: 'policy_denied', approval: approval.id };
    // The reason of a refused call is the person's deny; after an allow, a
    // failed call's reason is the adapter's reading, as is a call Copilot
    // recorded no result for.
    return {
      outcome: executed ? 'ok' : 'denied', instance: approval.instance, tool_call: toolCall,
      ...(executed ? {} : { reason: 'policy_denied' }),
      ...(!result ? { inferred: ['tool_call', 'reason'] } : !executed && approval.decision === 'allow' ? { inferred: ['reason'] } : {}),
    };
  }

  /** A person's answer: allow or deny Copilot's pending permission request (allow once, reject once). */
  async answer(params) {
    const requestId = needString(params, 'request');
    const decision = needString(params, 'decision');
    if (!['allow', 'deny'].includes(decision)) {
      throw unsupported(`decision ${decision}: Copilot's permission answers are allow once, deny, or always allow (a rule wider than one exact call)`);
    }
    const approval = this.state.approvals.find((a) => a.id === requestId);
    if (!approval) return denied('instance_unknown', `no approval request ${requestId}`, ['reason']);
    if (approval.lost) {
      return denied('instance_unknown', `Copilot holds no permission request ${requestId} any more: it ended with the copilot --acp process that asked it (a restart)`, ['reason']);
    }
    if (approval.state !== 'pending') return denied('event_replayed', `approval request ${requestId} was already answered`, ['reason']);
    const proc = this.acp.get(approval.root);
    const pendingId = proc && proc.pending && proc.pending.params.toolCall && proc.pending.params.toolCall.toolCallId;
    if (!proc || pendingId !== approval.tool_call_id) {
      throw new RpcError(CODES.HOST_FAILURE, `Copilot's permission request behind ${requestId} ended with its process (a restart): nothing is left to answer`);
    }
    // A person's deny is decided and never dispatched; an allow goes out to Copilot.
    approval.state = decision === 'allow' ? 'dispatched' : 'decided';
    approval.decision = decision;
    approval.decided_by = 'person';
    this.saveState();
    proc.answer(decision === 'allow');
    return this.settleAcp(approval.root, proc, approval);
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
    if (Array.isArray(role.tools)) {
      ceiling.tools = Object.fromEntries(Object.entries(parent.tools || {}).filter(([name]) => role.tools.includes(name)));
    }
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
        const waiting = this.acp.has(id) && this.acp.get(id).pending;
        state = !waiting && sessions.get(id).some((e) => e.type === 'assistant.message' && !(e.data || {}).parentToolCallId) ? 'completed' : 'running';
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
    const approvals = this.state.approvals.filter((a) => !a.lost).map((a) => ({
      id: a.id, instance: a.instance, class: a.class, tool: a.tool, tool_digest: a.tool_digest,
      arguments_digest: a.arguments_digest, state: a.state,
      ...(a.decision ? { decision: a.decision, decided_by: a.decided_by } : {}),
    }));
    return {
      outcome: 'ok',
      observed: {
        now: 0, auto_approve: false, instances, approvals,
        // Copilot keeps no approval records: they are the adapter's bookkeeping.
        ...(approvals.length ? { inferred: ['approvals'] } : {}),
      },
    };
  }

  /** Ends every running `copilot` (stdin closed or SIGTERM: the harness is restarting us). */
  shutdown() {
    for (const proc of this.acp.values()) proc.stop();
    this.acp.clear();
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

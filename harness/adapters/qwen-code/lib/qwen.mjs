// Installing, isolating and running Qwen Code (`qwen` with stream-json output: headless, or with stream-json input and its control protocol when a person may be asked), and reading the session and subagent files it keeps.

import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, dirname } from 'node:path';
import { readJson, writeAtomic, killGroup as killGroupAlike } from '../../node-common/files.mjs';
import { StreamJsonRun } from '../../node-common/stream-json-run.mjs';
export { readJson, writeAtomic };

export const QWEN_VERSION = '0.24.4';
export const PACKAGE = '@qwen-code/qwen-code';
/** The model name Qwen Code is told to use; the harness's endpoint echoes it. */
export const MODEL_NAME = 'reference-model';

/** Where the pinned Qwen Code is installed: `$QWEN_CODE_ADAPTER_CACHE`, else `$XDG_CACHE_HOME/delegation-harness/qwen-code-VERSION`. */
export function cacheDir(env = process.env) {
  if (env.QWEN_CODE_ADAPTER_CACHE) return env.QWEN_CODE_ADAPTER_CACHE;
  const base = env.XDG_CACHE_HOME || join(env.HOME || homedir(), '.cache');
  return join(base, 'delegation-harness', `qwen-code-${QWEN_VERSION}`);
}

/** The package's entry script, when the cache holds a working Qwen Code of the pinned version. */
function entryIn(dir) {
  const entry = join(dir, 'node_modules', '@qwen-code', 'qwen-code', 'cli-entry.js');
  if (!existsSync(entry)) return null;
  const check = spawnSync(process.execPath, [entry, '--version'], { encoding: 'utf8', timeout: 60000 });
  return check.status === 0 && check.stdout.trim() === QWEN_VERSION ? entry : null;
}

/**
 * The Qwen Code command: `QWEN_CODE_ADAPTER_BIN` (a maintainer's own build,
 * or the tests' fake, as a command line), else the pinned version from the
 * cache, installed with npm on first use and run by this Node. npm's output
 * goes to stderr, never to the protocol's stdout.
 */
export function ensureQwen({ env = process.env, log = () => {} } = {}) {
  if (env.QWEN_CODE_ADAPTER_BIN) {
    const parts = env.QWEN_CODE_ADAPTER_BIN.split(' ').filter(Boolean);
    return { command: parts[0], args: parts.slice(1), version: env.QWEN_CODE_ADAPTER_BIN_VERSION || 'override' };
  }
  const dir = cacheDir(env);
  let entry = entryIn(dir);
  if (!entry) {
    log('info', `installing ${PACKAGE}@${QWEN_VERSION} into ${dir} (first use; about 145 MB)`);
    mkdirSync(dir, { recursive: true });
    const npm = spawnSync('npm', ['install', '--prefix', dir, '--no-audit', '--no-fund', `${PACKAGE}@${QWEN_VERSION}`], {
      stdio: ['ignore', 2, 2],
      env,
    });
    if (npm.status !== 0) throw new Error(`npm install ${PACKAGE}@${QWEN_VERSION} failed (status ${npm.status})`);
    entry = entryIn(dir);
    if (!entry) throw new Error(`npm installed ${PACKAGE}@${QWEN_VERSION} but ${dir} holds no working qwen of that version`);
  }
  return { command: process.execPath, args: [entry], version: QWEN_VERSION };
}

/** The folders of one store: Qwen Code's home (its `.qwen` store), temporary files, and the harness's paths. */
export function storePaths(storeDir) {
  const root = join(storeDir, 'qwen-code');
  return {
    root,
    home: join(root, 'home'),
    tmp: join(root, 'tmp'),
    fs: join(root, 'fs'),
    state: join(root, 'adapter-state.json'),
    mcp: join(root, 'mcp.json'),
  };
}

/**
 * HOME, every XDG_* folder and the temporary folder inside the store, and
 * the harness's model endpoint as an OpenAI-compatible API. Only what a
 * process needs is kept from the caller: Qwen Code reads many OPENAI_*,
 * QWEN_* and DASHSCOPE_* variables, and none of the caller's may leak in.
 */
export function isolatedEnv(storeDir, modelEndpoint, base = process.env) {
  const paths = storePaths(storeDir);
  const env = {};
  for (const key of ['PATH', 'LANG', 'LC_ALL', 'TERM', 'QWEN_CODE_ADAPTER_FAKE_LOG']) if (base[key] !== undefined) env[key] = base[key];
  Object.assign(env, {
    HOME: paths.home,
    XDG_CONFIG_HOME: join(paths.home, '.config'),
    XDG_DATA_HOME: join(paths.home, '.local', 'share'),
    XDG_STATE_HOME: join(paths.home, '.local', 'state'),
    XDG_CACHE_HOME: join(paths.home, '.cache'),
    XDG_RUNTIME_DIR: join(paths.home, '.runtime'),
    TMPDIR: paths.tmp,
    TMP: paths.tmp,
    TEMP: paths.tmp,
    OPENAI_BASE_URL: `${modelEndpoint.replace(/\/$/, '')}/v1`,
    OPENAI_API_KEY: 'delegation-harness',
    OPENAI_MODEL: MODEL_NAME,
  });
  for (const key of ['XDG_CONFIG_HOME', 'XDG_DATA_HOME', 'XDG_STATE_HOME', 'XDG_CACHE_HOME', 'XDG_RUNTIME_DIR', 'TMPDIR']) {
    mkdirSync(env[key], { recursive: true, mode: 0o700 });
  }
  return env;
}

/**
 * Qwen Code's user settings in the isolated home: no memory extraction (an
 * extra subagent request after every turn), no usage statistics, telemetry
 * or update checks, every tool's schema in the first request (MCP tools
 * would otherwise be deferred behind `tool_search`), no retries (a scripted
 * failure must reach the turn), and Qwen Code's own session id on every
 * request as `x-delegation-instance` (a `${session_id}` header value Qwen
 * Code fills in per request), by which the harness's endpoint counts a main
 * session's requests. A subagent's requests carry the same header; the
 * endpoint tells them apart by their body.
 */
export function writeSettings(home) {
  const settings = {
    general: { enableAutoUpdate: false },
    memory: { enableManagedAutoMemory: false },
    privacy: { usageStatisticsEnabled: false },
    telemetry: { enabled: false },
    tools: { toolSearch: { enabled: false } },
    outboundCorrelation: { allowDynamicHeaderValues: true },
    model: { generationConfig: { maxRetries: 0, customHeaders: { 'x-delegation-instance': '${session_id}' } } },
  };
  writeAtomic(join(home, '.qwen', 'settings.json'), JSON.stringify(settings, null, 2) + '\n');
}

/** Qwen Code's folder name for a project directory: every character outside [a-zA-Z0-9] becomes `-`. */
export const projectSlug = (cwd) => cwd.replace(/[^a-zA-Z0-9]/g, '-');

/**
 * Runs one headless `qwen` turn and collects its stream-json events. `input`
 * is the prompt, written to stdin (so a prompt starting with `-` is never an
 * option). The process is started in its own group, which is killed at the
 * timeout with SIGKILL (0.15.10 ignored SIGTERM; the group kill does not
 * depend on it). Resolves `{events, code,
 * signal, stderr, timedOut}`.
 */
export function runQwen({ bin, args, env, cwd, input, timeoutMs, onSpawn = () => {} }) {
  return new Promise((resolve) => {
    const child = spawn(bin.command, [...bin.args, ...args], { env, cwd, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    onSpawn(child);
    const events = [];
    let buffer = '';
    let stderr = '';
    let timedOut = false;
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk) => {
      buffer += chunk;
      let i;
      while ((i = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, i).trim();
        buffer = buffer.slice(i + 1);
        if (!line) continue;
        try {
          events.push(JSON.parse(line));
        } catch {
          stderr += `[stdout, not JSON] ${line}\n`;
        }
      }
    });
    child.stderr.on('data', (d) => { stderr = (stderr + d).slice(-20000); });
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(child, 'SIGKILL');
    }, timeoutMs);
    child.on('error', (e) => { stderr += `spawn failed: ${e.message}\n`; });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ events, code, signal, stderr, timedOut });
    });
    child.stdin.on('error', () => {});
    child.stdin.end(input);
  });
}

/** Kills a detached child's whole process group (Qwen Code's own helpers too). */
export function killGroup(child, signal = 'SIGKILL') {
  killGroupAlike(child, signal);
}

/**
 * What Qwen Code's own store holds for one project directory: each main
 * session (`projects/<slug>/chats/<session>.jsonl`) and each subagent
 * (`projects/<slug>/subagents/<session>/agent-<agentId>.meta.json`, with its
 * `agentId`, `toolUseId`, `parentAgentId`, `status` and `depth`).
 */
export function readStore(home, cwd) {
  const dir = join(home, '.qwen', 'projects', projectSlug(cwd));
  const sessions = new Map();
  const agents = new Map();
  let names = [];
  try { names = readdirSync(join(dir, 'chats')); } catch { /* no session yet */ }
  for (const name of names) {
    if (name.endsWith('.jsonl')) sessions.set(name.slice(0, -'.jsonl'.length), { path: join(dir, 'chats', name) });
  }
  let parents = [];
  try { parents = readdirSync(join(dir, 'subagents')); } catch { /* no subagent yet */ }
  for (const session of parents) {
    let files = [];
    try { files = readdirSync(join(dir, 'subagents', session)); } catch { continue; }
    for (const file of files) {
      if (!file.endsWith('.meta.json')) continue;
      const meta = readJson(join(dir, 'subagents', session, file), null);
      if (meta && typeof meta.agentId === 'string') agents.set(meta.agentId, { session, meta });
    }
  }
  return { sessions, agents };
}

/** Whether the model answered in a main session: its chat record holds an assistant entry. */
export function sessionAnswered(path) {
  let text = '';
  try { text = readFileSync(path, 'utf8'); } catch { return false; }
  for (const line of text.split('\n')) {
    if (!line.includes('"assistant"')) continue;
    try {
      if (JSON.parse(line).type === 'assistant') return true;
    } catch { /* a partial last line */ }
  }
  return false;
}

/** The longest a `can_use_tool` question waits for its answer that Qwen Code accepts (10 minutes). */
const CAN_USE_TOOL_TIMEOUT_MS = 600000;

/**
 * One `qwen` run with stream-json input and Qwen Code's control protocol
 * (its SDK mode), kept alive across a person's approval: an `initialize`
 * control request carries the session's subagent definitions (in SDK mode
 * Qwen Code lists only these, not the agent files), then the prompt as a
 * user message. Every call that asks becomes a `can_use_tool` control
 * request; the run settles when it ends (a `result` event) or asks, and
 * `answer` continues it with a person's decision.
 */
export class LiveRun extends StreamJsonRun {
  constructor({ bin, args, env, cwd, agents, onSpawn = () => {} }) {
    super({ bin, args, env, cwd, onSpawn });
    this.initError = null;
    // Qwen Code cancels a call whose question is not answered in time (60 s
    // by default): the longest wait it takes, so the answer stays a person's.
    this.write({ type: 'control_request', request_id: 'delegation-harness-init', request: { subtype: 'initialize', agents, timeout: { canUseTool: CAN_USE_TOOL_TIMEOUT_MS } } });
  }

  /** The answer to the adapter's initialize: a refusal ends the run's usefulness. */
  onControlResponse(event) {
    const response = event.response || {};
    if (response.request_id === 'delegation-harness-init' && response.subtype !== 'success') {
      this.initError = String(response.error || 'initialize refused');
      this.child.stdin.end();
      this.wake();
    }
  }

  userMessage(text) {
    return { type: 'user', session_id: '', message: { role: 'user', content: text }, parent_tool_use_id: null };
  }
}

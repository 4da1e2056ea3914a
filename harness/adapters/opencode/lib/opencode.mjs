// Installing, isolating, configuring, starting and stopping `opencode serve`, and a small HTTP client for its API.

import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync, renameSync, readFileSync, copyFileSync, cpSync, rmSync, symlinkSync, lstatSync, appendFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { homedir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { READ_ONLY_REFUSES } from './mapping.mjs';
import { writeAtomic } from '../../node-common/files.mjs';

export const OPENCODE_VERSION = '1.18.33';
/** The provider and model names the adapter configures in opencode.json. */
export const PROVIDER_ID = 'harness';
export const MODEL_ID = 'reference-model';

const HERE = dirname(fileURLToPath(import.meta.url));
export const PLUGIN_SOURCE = join(HERE, '..', 'plugin', 'delegation-attribution.js');

/** Where the pinned opencode is installed: `$XDG_CACHE_HOME/delegation-harness/opencode-VERSION`. */
export function cacheDir(env = process.env) {
  const base = env.XDG_CACHE_HOME || join(env.HOME || homedir(), '.cache');
  return join(base, 'delegation-harness', `opencode-${OPENCODE_VERSION}`);
}

function platformPackage() {
  const os = { linux: 'linux', darwin: 'darwin', win32: 'windows' }[process.platform] || process.platform;
  return `opencode-${os}-${process.arch}`;
}

/** The opencode binary inside an install folder (the platform package, so npm's postinstall is not needed). */
export function binaryIn(dir) {
  const exe = process.platform === 'win32' ? 'opencode.exe' : 'opencode';
  const pkg = platformPackage();
  for (const name of [pkg, `${pkg}-baseline`, `${pkg}-musl`, `${pkg}-baseline-musl`]) {
    const candidate = join(dir, 'node_modules', name, 'bin', exe);
    if (existsSync(candidate)) return candidate;
  }
  return null;
}

/**
 * The opencode command to run: `OPENCODE_ADAPTER_BIN` (a maintainer's own
 * binary, or the tests' fake), else the pinned version from the cache,
 * installed with npm on first use. npm's output goes to stderr, never stdout.
 */
export function ensureOpencode({ env = process.env, log = () => {} } = {}) {
  if (env.OPENCODE_ADAPTER_BIN) {
    const parts = env.OPENCODE_ADAPTER_BIN.split(' ').filter(Boolean);
    return { command: parts[0], args: parts.slice(1), version: env.OPENCODE_ADAPTER_BIN_VERSION || 'override' };
  }
  const dir = cacheDir(env);
  let binary = binaryIn(dir);
  if (!binary) {
    log('info', `installing opencode-ai@${OPENCODE_VERSION} into ${dir} (first use; about 350 MB)`);
    mkdirSync(dir, { recursive: true });
    const npm = spawnSync('npm', ['install', '--prefix', dir, '--no-audit', '--no-fund', `opencode-ai@${OPENCODE_VERSION}`], {
      stdio: ['ignore', 2, 2],
      env,
    });
    if (npm.status !== 0) throw new Error(`npm install opencode-ai@${OPENCODE_VERSION} failed (status ${npm.status})`);
    binary = binaryIn(dir);
    if (!binary) throw new Error(`npm installed opencode-ai@${OPENCODE_VERSION} but no platform binary ${platformPackage()} is in ${dir}/node_modules`);
  }
  return { command: binary, args: [], version: OPENCODE_VERSION };
}

/**
 * HOME, every XDG_*_HOME and the temporary folder inside the store, plus
 * opencode's own switches: a run writes nothing outside its store (bun and
 * opencode put scratch files in TMPDIR, npm in HOME).
 */
export function isolatedEnv(storeDir, base = process.env) {
  const home = join(storeDir, 'opencode', 'home');
  const tmp = join(storeDir, 'opencode', 'tmp');
  const env = { ...base };
  for (const key of Object.keys(env)) {
    if (key.startsWith('OPENCODE_') && key !== 'OPENCODE_ADAPTER_BIN') delete env[key];
  }
  Object.assign(env, {
    HOME: home,
    XDG_CONFIG_HOME: join(home, '.config'),
    XDG_DATA_HOME: join(home, '.local', 'share'),
    XDG_STATE_HOME: join(home, '.local', 'state'),
    XDG_CACHE_HOME: join(home, '.cache'),
    XDG_RUNTIME_DIR: join(home, '.runtime'),
    TMPDIR: tmp,
    TMP: tmp,
    TEMP: tmp,
    OPENCODE_DISABLE_AUTOUPDATE: '1',
    OPENCODE_DISABLE_MODELS_FETCH: '1',
  });
  for (const key of ['XDG_CONFIG_HOME', 'XDG_DATA_HOME', 'XDG_STATE_HOME', 'XDG_CACHE_HOME', 'XDG_RUNTIME_DIR', 'TMPDIR']) mkdirSync(env[key], { recursive: true, mode: 0o700 });
  return env;
}

/** The folder opencode serves (its project directory), inside the store. */
export function workspaceDir(storeDir) {
  return join(storeDir, 'opencode', 'workspace');
}

/**
 * opencode permission rules (config form) for a role's default authority:
 * what the role may not do. `served` are the MCP tools the harness's servers
 * serve (`{opencode, class}`): a read-only role may not run a shell,
 * file-write or generic one and a role without network a network one, so
 * those are denied by opencode's name for them, as opencode's own `edit`,
 * `bash` and `webfetch` are (without them a `reviewer` child ran a
 * file-write MCP tool its role forbids).
 */
export function rolePermission(role = {}, served = []) {
  const permission = { task: 'allow' };
  const sandbox = role.sandbox;
  const readOnly = sandbox === 'read-only';
  if (readOnly) Object.assign(permission, { edit: 'deny', bash: 'deny' });
  const ws = sandbox && sandbox['workspace-write'];
  const offline = readOnly || (ws && ws.network === false);
  if (offline) Object.assign(permission, { webfetch: 'deny', websearch: 'deny' });
  for (const tool of served) {
    const cls = tool.class || 'mcp';
    if ((readOnly && READ_ONLY_REFUSES.has(cls)) || (offline && cls === 'network')) permission[tool.opencode] = 'deny';
  }
  if (role.delegation_depth === 0) permission.task = 'deny';
  return permission;
}

/**
 * The opencode.json the adapter writes. `subagentDepth` is opencode's own
 * nesting limit (a session with that many ancestors may not call `task`);
 * `roles` (name -> role default authority) become subagents, so the
 * harness's role names are valid `subagent_type`s, each with the permission
 * rules its default allows (`served`: the MCP tools, for the rules that
 * name them); `mcpServers` are the harness's MCP servers as
 * opencode remote servers. Per-root rules go on the session (see
 * `sessionPermission`).
 */
export function opencodeConfig({ modelEndpoint, subagentDepth, roles, mcpServers = [], served = [] }) {
  const agent = {};
  const roleMap = Array.isArray(roles) ? Object.fromEntries(roles.map((r) => [r, {}])) : roles;
  for (const [role, defaults] of Object.entries(roleMap)) {
    agent[role] = {
      mode: 'subagent',
      description: `The delegation harness's \`${role}\` role.`,
      // An explicit task rule, so opencode does not add its own blanket
      // `task: deny` to children: nesting is then bounded by subagent_depth.
      permission: rolePermission(defaults, served),
    };
  }
  const mcp = {};
  for (const server of mcpServers) mcp[server.name] = { type: 'remote', url: server.url, oauth: false, timeout: 10000 };
  return {
    $schema: 'https://opencode.ai/config.json',
    autoupdate: false,
    share: 'disabled',
    snapshot: false,
    provider: {
      [PROVIDER_ID]: {
        npm: '@ai-sdk/openai-compatible',
        name: 'delegation harness model endpoint',
        options: { baseURL: `${modelEndpoint.replace(/\/+$/, '')}/v1`, apiKey: 'harness' },
        models: { [MODEL_ID]: { name: MODEL_ID } },
      },
    },
    model: `${PROVIDER_ID}/${MODEL_ID}`,
    small_model: `${PROVIDER_ID}/${MODEL_ID}`,
    subagent_depth: subagentDepth,
    permission: { task: 'allow' },
    agent,
    ...(mcpServers.length ? { mcp } : {}),
  };
}


/** Writes opencode.json into the workspace and the attribution plugin into opencode's config folder. */
export function writeOpencodeFiles(storeDir, env, config) {
  const ws = workspaceDir(storeDir);
  mkdirSync(ws, { recursive: true });
  writeAtomic(join(ws, 'opencode.json'), JSON.stringify(config, null, 2) + '\n');
  const pluginDir = join(env.XDG_CONFIG_HOME, 'opencode', 'plugin');
  mkdirSync(pluginDir, { recursive: true });
  copyFileSync(PLUGIN_SOURCE, join(pluginDir, 'delegation-attribution.js'));
  return ws;
}

/**
 * opencode installs `@opencode-ai/plugin` into its global config folder with
 * npm on its first start in a new HOME (tens of MB from the registry, often
 * longer than the harness's 30 s step deadline). The adapter keeps one
 * installed copy beside the binary (`config-seed`) and copies it into each
 * new store, so a run needs no network after `--install`.
 */
export function seedDir(env = process.env) {
  return join(cacheDir(env), 'config-seed');
}

const SEED_MARKER = join('node_modules', '@opencode-ai', 'plugin', 'package.json');

/**
 * Gives a store's opencode config folder the seed when it has none; answers
 * whether the store is seeded. `node_modules` (about 4000 files) is a
 * symlink to the seed's, not a copy: opencode only reads it once it is
 * installed (checked: the seed is unchanged after runs), and a copy cost
 * 2-3 s of every scenario's start on this machine under load.
 */
export function seedConfig(env, isolated) {
  const target = join(isolated.XDG_CONFIG_HOME, 'opencode');
  if (existsSync(join(target, SEED_MARKER))) return true;
  const seed = seedDir(env);
  if (!existsSync(join(seed, SEED_MARKER))) return false;
  mkdirSync(target, { recursive: true });
  for (const name of ['package.json', 'package-lock.json', 'bun.lock', '.gitignore']) {
    if (existsSync(join(seed, name))) copyFileSync(join(seed, name), join(target, name));
  }
  const link = join(target, 'node_modules');
  let present = false;
  try { lstatSync(link); present = true; } catch { /* none yet */ }
  if (present) rmSync(link, { recursive: true, force: true });
  symlinkSync(join(seed, 'node_modules'), link, 'dir');
  return true;
}

/** Saves a store's installed opencode config folder as the seed (once it finished installing). */
export function saveSeed(env, isolated) {
  const source = join(isolated.XDG_CONFIG_HOME, 'opencode');
  if (!existsSync(join(source, SEED_MARKER))) return false;
  const seed = seedDir(env);
  const tmp = `${seed}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  for (const name of ['node_modules', 'package.json', 'package-lock.json', 'bun.lock', '.gitignore']) {
    if (existsSync(join(source, name))) cpSync(join(source, name), join(tmp, name), { recursive: true });
  }
  rmSync(seed, { recursive: true, force: true });
  renameSync(tmp, seed);
  return true;
}

export function seedInstalled(isolated) {
  return existsSync(join(isolated.XDG_CONFIG_HOME, 'opencode', SEED_MARKER));
}

/** A free TCP port on 127.0.0.1. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * opencode events after which a running turn may have settled or asked a
 * person: a session's status changed (busy, idle, retry), it went idle or
 * failed, a permission was asked or answered, the instance was disposed.
 * Not message or part updates: a turn streams many, and it is settled only
 * once its session is idle, which opencode announces after them.
 */
export const SETTLING_EVENTS = new Set([
  'session.status', 'session.idle', 'session.error', 'permission.asked', 'permission.replied', 'server.instance.disposed',
]);

/**
 * One running `opencode serve`. It stays in the adapter's process group, so
 * the harness's SIGKILL to the group reaches it even if the adapter dies.
 */
export class OpencodeServer {
  constructor({ command, args, env, cwd, log }) {
    Object.assign(this, { command, args, env, cwd, log });
    this.child = null;
    this.url = null;
    this.exited = null;
    this.eventStream = null;
    this.eventSeq = 0;
    this.eventWaiters = new Set();
  }

  /**
   * Starts `opencode serve` on a free port. Once in a full run opencode
   * exited at once with `ServeError` before it listened, most likely
   * because the port, free when chosen, was taken before it bound it
   * (several stores start at once on a busy machine). Such an early exit
   * is retried on a new port, at most `attempts` times in all; a start that
   * hangs is not, and one that keeps failing is still an error.
   */
  async start({ readyTimeoutMs = 20000, attempts = 3 } = {}) {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.startOnce({ readyTimeoutMs });
      } catch (e) {
        if (!e.earlyExit || attempt >= attempts) throw e;
        this.log('warn', `${e.message}; starting it again on another port (attempt ${attempt + 1} of ${attempts})`);
      }
    }
  }

  async startOnce({ readyTimeoutMs }) {
    const port = await freePort();
    this.url = `http://127.0.0.1:${port}`;
    const child = spawn(this.command, [...this.args, 'serve', '--hostname', '127.0.0.1', '--port', String(port)], {
      cwd: this.cwd,
      env: this.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    this.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    let spawnError = null;
    child.once('error', (e) => { spawnError = e; });
    // opencode's own output goes to our stderr (the harness keeps its tail), never to stdout.
    child.stdout.on('data', (d) => process.stderr.write(`[opencode] ${d}`));
    child.stderr.on('data', (d) => process.stderr.write(`[opencode] ${d}`));
    let gone = false;
    this.exited.then(() => { gone = true; });
    this.startedAt = Date.now();
    const deadline = Date.now() + readyTimeoutMs;
    while (Date.now() < deadline) {
      if (spawnError) throw new Error(`could not start opencode (${this.command}): ${spawnError.message}`);
      if (gone) throw Object.assign(new Error(`opencode serve exited before it was ready (${this.command})`), { earlyExit: true });
      try {
        // Short probes: a request sent while opencode is still booting can hang unanswered.
        const res = await fetch(`${this.url}/session/status`, { signal: AbortSignal.timeout(2000) });
        if (res.ok) {
          this.measure('ready');
          return this;
        }
      } catch { /* not listening yet */ }
      await sleep(100);
    }
    await this.stop();
    throw new Error(`opencode serve did not answer on ${this.url} within ${readyTimeoutMs} ms`);
  }

  /**
   * Appends what opencode serve has cost so far (wall time since its start,
   * its own CPU time from /proc) to `OPENCODE_ADAPTER_CPU_LOG`, one JSON line
   * per event, for `bench/start-cost.mjs`; nothing when unset or off Linux.
   */
  measure(event) {
    const path = process.env.OPENCODE_ADAPTER_CPU_LOG;
    if (!path || !this.child) return;
    try {
      const fields = readFileSync(`/proc/${this.child.pid}/stat`, 'utf8').split(') ')[1].split(' ');
      const ticks = Number(fields[11]) + Number(fields[12]);
      appendFileSync(path, JSON.stringify({ event, cwd: this.cwd, wall_ms: Date.now() - this.startedAt, cpu_ms: ticks * 10 }) + '\n');
    } catch { /* no /proc: nothing to measure */ }
  }

  /** SIGTERM, then SIGKILL after `graceMs` (opencode does not always exit on SIGTERM). */
  async stop({ graceMs = 1000 } = {}) {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    this.measure('stop');
    this.closeEvents();
    try { child.kill('SIGTERM'); } catch { /* already gone */ }
    const done = await Promise.race([this.exited.then(() => true), sleep(graceMs).then(() => false)]);
    if (!done) {
      try { child.kill('SIGKILL'); } catch { /* already gone */ }
      await Promise.race([this.exited, sleep(1000)]);
    }
  }

  /**
   * Follows opencode's event stream (`GET /event`, server-sent events), so
   * that a waiting turn looks again when opencode says something changed
   * instead of every 100 ms: each look costs opencode about 40 ms of CPU
   * (measured: status, permission and message list of one session), which
   * at ten looks a second took as much CPU as the turn itself on a loaded
   * machine. Only the events after which a turn can have settled count
   * (`SETTLING_EVENTS`); streamed text deltas do not. A stream that ends
   * (opencode disposed its instance, or stopped) is opened again by the next
   * wait; while none is open, waits fall back to short sleeps.
   */
  watchEvents() {
    if (this.eventStream || !this.url) return;
    const controller = new AbortController();
    const stream = { controller, connected: false };
    this.eventStream = stream;
    (async () => {
      try {
        const res = await fetch(`${this.url}/event`, { signal: controller.signal, headers: { accept: 'text/event-stream' } });
        if (!res.ok || !res.body) return;
        stream.connected = true;
        const decoder = new TextDecoder();
        let buffer = '';
        for await (const chunk of res.body) {
          buffer += decoder.decode(chunk, { stream: true });
          let end;
          while ((end = buffer.indexOf('\n\n')) >= 0) {
            this.onEvent(buffer.slice(0, end));
            buffer = buffer.slice(end + 2);
          }
        }
      } catch { /* stopped, disposed or never there: waits fall back to sleeping */ } finally {
        stream.connected = false;
        if (this.eventStream === stream) this.eventStream = null;
        this.wakeWaiters();
      }
    })();
  }

  onEvent(block) {
    const data = block.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).join('\n');
    let event;
    try { event = JSON.parse(data); } catch { return; }
    if (!event || !SETTLING_EVENTS.has(event.type)) return;
    // A session turning busy settles nothing: the look that matters comes when it is idle again.
    const status = event.type === 'session.status' && event.properties && event.properties.status;
    if (status && status.type === 'busy') return;
    this.eventSeq++;
    this.wakeWaiters();
  }

  wakeWaiters() {
    for (const wake of this.eventWaiters || []) wake();
  }

  closeEvents() {
    const stream = this.eventStream;
    this.eventStream = null;
    if (stream) stream.controller.abort();
  }

  /**
   * Waits until a settling event newer than `seq` arrived (answers at once
   * if one already did), or `fallbackMs` passed; without an open event
   * stream, `idleMs`. Never shorter than `minMs`, so a burst of events
   * makes one look, not one per event.
   */
  async waitForChange(seq, { fallbackMs = 3000, idleMs = 100, minMs = 200 } = {}) {
    this.watchEvents();
    const started = Date.now();
    const connected = this.eventStream && this.eventStream.connected;
    if (this.eventSeq === seq) {
      await new Promise((resolve) => {
        const timer = setTimeout(done, connected ? fallbackMs : idleMs);
        const waiters = this.eventWaiters;
        function done() { clearTimeout(timer); waiters.delete(done); resolve(); }
        waiters.add(done);
      });
    }
    const spent = Date.now() - started;
    if (spent < minMs) await sleep(minMs - spent);
  }

  /** Synchronous last resort when the adapter itself is about to die. */
  killNow() {
    const child = this.child;
    if (child && child.exitCode === null && child.signalCode === null) {
      this.measure('kill');
      try { child.kill('SIGKILL'); } catch { /* already gone */ }
    }
  }

  /**
   * One API call; answers `{status, body}` (body parsed as JSON when it is).
   * 60 s by default: at load 40 a fork (opencode copies the messages) took
   * longer than the 10 s this was, and the step errored.
   */
  async call(method, path, body, { timeoutMs = 60000 } = {}) {
    const res = await fetch(`${this.url}${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    let parsed = text;
    try { parsed = text === '' ? null : JSON.parse(text); } catch { /* keep text */ }
    return { status: res.status, body: parsed };
  }
}

/** Reads a JSON file, or `fallback` when it does not exist. */
export function readJson(path, fallback) {
  if (!existsSync(path)) return fallback;
  return JSON.parse(readFileSync(path, 'utf8'));
}

export { writeAtomic };

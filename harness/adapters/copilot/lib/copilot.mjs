// Installing, isolating and running GitHub Copilot CLI (`copilot -p --output-format json`), and reading the session events it keeps.

import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, dirname } from 'node:path';
import { readJson, writeAtomic, killGroup } from '../../node-common/files.mjs';
export { readJson, writeAtomic, killGroup };

export const COPILOT_VERSION = '1.0.102';
export const PACKAGE = '@github/copilot';
/** The model Copilot is told it runs (a well-known id, so its tool set and limits are a real model's); the wire model is the harness's. */
export const COPILOT_MODEL = 'gpt-4.1';
export const WIRE_MODEL = 'reference-model';

/** Where the pinned Copilot is installed: `$COPILOT_ADAPTER_CACHE`, else `$XDG_CACHE_HOME/delegation-harness/copilot-VERSION`. */
export function cacheDir(env = process.env) {
  if (env.COPILOT_ADAPTER_CACHE) return env.COPILOT_ADAPTER_CACHE;
  const base = env.XDG_CACHE_HOME || join(env.HOME || homedir(), '.cache');
  return join(base, 'delegation-harness', `copilot-${COPILOT_VERSION}`);
}

const platformPackage = () => `copilot-${process.platform}-${process.arch}`;

/**
 * The package Copilot's native binary unpacks on its first run (about 235
 * MB: its JavaScript, ripgrep, tree-sitter grammars) into
 * `$XDG_CACHE_HOME/copilot/pkg/<platform>/<version>`. The install unpacks it
 * once into the cache; every run is pointed at it with `COPILOT_CLI_DIST_DIR`,
 * so no store gets a copy.
 */
export const distDir = (dir) => join(dir, 'unpacked', 'copilot', 'pkg', `${process.platform}-${process.arch}`, COPILOT_VERSION);

/** The native binary npm puts behind `copilot` (its npm-loader.js only finds and runs it). */
function binaryIn(dir) {
  const candidate = join(dir, 'node_modules', '@github', platformPackage(), 'copilot');
  if (!existsSync(candidate)) return null;
  const check = spawnSync(candidate, ['--version'], {
    encoding: 'utf8',
    timeout: 60000,
    // The first run unpacks the package here (and only here).
    env: { PATH: process.env.PATH, HOME: join(dir, 'unpacked'), XDG_CACHE_HOME: join(dir, 'unpacked'), COPILOT_AUTO_UPDATE: 'false' },
  });
  if (check.status !== 0 || !check.stdout.includes(COPILOT_VERSION)) return null;
  return existsSync(join(distDir(dir), '.extraction-complete')) ? candidate : null;
}

/**
 * The Copilot command: `COPILOT_ADAPTER_BIN` (a maintainer's own build, or
 * the tests' fake, as a command line), else the pinned version from the
 * cache, installed with npm on first use. npm's output goes to stderr, never
 * to the protocol's stdout.
 */
export function ensureCopilot({ env = process.env, log = () => {} } = {}) {
  if (env.COPILOT_ADAPTER_BIN) {
    const parts = env.COPILOT_ADAPTER_BIN.split(' ').filter(Boolean);
    return { command: parts[0], args: parts.slice(1), version: env.COPILOT_ADAPTER_BIN_VERSION || 'override', dist: null };
  }
  const dir = cacheDir(env);
  let binary = binaryIn(dir);
  if (!binary) {
    log('info', `installing ${PACKAGE}@${COPILOT_VERSION} into ${dir} (first use; 189 MB, and 235 MB unpacked by its first run)`);
    mkdirSync(dir, { recursive: true });
    // --ignore-scripts: the package has no install script it needs; its
    // platform binary comes as an optional dependency.
    const npm = spawnSync('npm', ['install', '--prefix', dir, '--no-audit', '--no-fund', '--ignore-scripts', `${PACKAGE}@${COPILOT_VERSION}`], {
      stdio: ['ignore', 2, 2],
      env,
    });
    if (npm.status !== 0) throw new Error(`npm install ${PACKAGE}@${COPILOT_VERSION} failed (status ${npm.status})`);
    binary = binaryIn(dir);
    if (!binary) throw new Error(`npm installed ${PACKAGE}@${COPILOT_VERSION} but ${dir} holds no working copilot binary of that version (or its first run unpacked nothing to ${distDir(dir)})`);
  }
  return { command: binary, args: [], version: COPILOT_VERSION, dist: distDir(dir) };
}

/** The folders of one store: Copilot's home (its `.copilot` store), temporary files, and the harness's paths. */
export function storePaths(storeDir) {
  const root = join(storeDir, 'copilot');
  return {
    root,
    home: join(root, 'home'),
    tmp: join(root, 'tmp'),
    fs: join(root, 'fs'),
    logs: join(root, 'logs'),
    state: join(root, 'adapter-state.json'),
  };
}

/**
 * HOME, every XDG_* folder and the temporary folder inside the store, the
 * harness's model endpoint as Copilot's own provider (BYOK, Chat
 * Completions) and Copilot's offline mode: no GitHub sign-in, telemetry,
 * GitHub MCP server or update check.
 */
export function isolatedEnv(storeDir, modelEndpoint, bin, base = process.env) {
  const paths = storePaths(storeDir);
  const env = {};
  // Only what a process needs to run; Copilot reads many COPILOT_*, GH_* and
  // GITHUB_* variables (tokens among them), and none of the caller's may leak in.
  for (const key of ['PATH', 'LANG', 'LC_ALL', 'TERM', 'COPILOT_ADAPTER_FAKE_LOG']) if (base[key] !== undefined) env[key] = base[key];
  Object.assign(env, {
    HOME: paths.home,
    COPILOT_HOME: join(paths.home, '.copilot'),
    XDG_CONFIG_HOME: join(paths.home, '.config'),
    XDG_DATA_HOME: join(paths.home, '.local', 'share'),
    XDG_STATE_HOME: join(paths.home, '.local', 'state'),
    XDG_CACHE_HOME: join(paths.home, '.cache'),
    XDG_RUNTIME_DIR: join(paths.home, '.runtime'),
    TMPDIR: paths.tmp,
    TMP: paths.tmp,
    TEMP: paths.tmp,
    COPILOT_OFFLINE: 'true',
    COPILOT_AUTO_UPDATE: 'false',
    COPILOT_PROVIDER_BASE_URL: `${modelEndpoint.replace(/\/$/, '')}/v1`,
    COPILOT_PROVIDER_API_KEY: 'delegation-harness',
    COPILOT_MODEL,
    COPILOT_PROVIDER_WIRE_MODEL: WIRE_MODEL,
    NO_COLOR: '1',
  });
  if (bin && bin.dist) env.COPILOT_CLI_DIST_DIR = bin.dist;
  // Copilot's persisted MCP tool cache offers a session's model the tools it
  // listed in an earlier run until the live list arrives, and refuses a call
  // of a cached tool whose live definition differs; which comes first is a
  // race, so a verdict on drift would depend on load (README finding 8). Off
  // by default; COPILOT_ADAPTER_MCP_TOOL_CACHE=on leaves Copilot's default.
  if (base.COPILOT_ADAPTER_MCP_TOOL_CACHE !== 'on') env.COPILOT_MCP_TOOL_CACHE = 'false';
  for (const key of ['XDG_CONFIG_HOME', 'XDG_DATA_HOME', 'XDG_STATE_HOME', 'XDG_CACHE_HOME', 'XDG_RUNTIME_DIR', 'TMPDIR', 'COPILOT_HOME']) {
    mkdirSync(env[key], { recursive: true, mode: 0o700 });
  }
  return env;
}

/** Parses JSON lines, skipping a partial last line; what is not JSON is returned apart. */
export function jsonLines(text) {
  const events = [];
  const other = [];
  for (const line of text.split('\n')) {
    const trimmed = line.trim();
    if (!trimmed) continue;
    try {
      events.push(JSON.parse(trimmed));
    } catch {
      other.push(trimmed);
    }
  }
  return { events, other };
}

/**
 * Runs one `copilot -p` turn and collects its JSON events. Resolves
 * `{events, code, signal, stderr, timedOut}`.
 */
export function runCopilot({ bin, args, env, cwd, timeoutMs, onSpawn = () => {} }) {
  return new Promise((resolve) => {
    const child = spawn(bin.command, [...bin.args, ...args], { env, cwd, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    onSpawn(child);
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk) => { stdout += chunk; });
    child.stderr.on('data', (d) => { stderr = (stderr + d).slice(-20000); });
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(child, 'SIGKILL');
    }, timeoutMs);
    child.on('error', (e) => { stderr += `spawn failed: ${e.message}\n`; });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const { events, other } = jsonLines(stdout);
      if (other.length) stderr += other.map((l) => `[stdout, not JSON] ${l}\n`).join('');
      resolve({ events, code, signal, stderr, timedOut });
    });
  });
}

/** Copilot's own store: each session's events (`~/.copilot/session-state/<id>/events.jsonl`), by session id. */
export function readSessions(home) {
  const dir = join(home, '.copilot', 'session-state');
  const sessions = new Map();
  let names = [];
  try {
    names = readdirSync(dir);
  } catch {
    return sessions;
  }
  for (const name of names) {
    let text = '';
    try {
      text = readFileSync(join(dir, name, 'events.jsonl'), 'utf8');
    } catch {
      // A session made by ACP's session/new has its folder (workspace.yaml) before its first prompt.
      if (existsSync(join(dir, name, 'workspace.yaml'))) sessions.set(name, []);
      continue;
    }
    sessions.set(name, jsonLines(text).events);
  }
  return sessions;
}

/** One session's events in Copilot's store (`session-state/<id>/events.jsonl`), empty when it has none yet. */
export function readSessionEvents(home, sessionId) {
  try {
    return jsonLines(readFileSync(join(home, '.copilot', 'session-state', sessionId, 'events.jsonl'), 'utf8')).events;
  } catch {
    return [];
  }
}

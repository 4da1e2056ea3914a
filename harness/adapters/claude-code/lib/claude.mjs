// Installing, isolating and running Claude Code (`claude -p`, stream-json), and reading the session files it keeps.

import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, dirname } from 'node:path';
import { readJson, writeAtomic, killGroup } from '../../node-common/files.mjs';
import { StreamJsonRun } from '../../node-common/stream-json-run.mjs';
export { readJson, writeAtomic, killGroup };

export const CLAUDE_VERSION = '2.1.332';
export const PACKAGE = '@anthropic-ai/claude-code';

/** Where the pinned Claude Code is installed: `$CLAUDE_CODE_ADAPTER_CACHE`, else `$XDG_CACHE_HOME/delegation-harness/claude-code-VERSION`. */
export function cacheDir(env = process.env) {
  if (env.CLAUDE_CODE_ADAPTER_CACHE) return env.CLAUDE_CODE_ADAPTER_CACHE;
  const base = env.XDG_CACHE_HOME || join(env.HOME || homedir(), '.cache');
  return join(base, 'delegation-harness', `claude-code-${CLAUDE_VERSION}`);
}

/** The native binary npm puts behind `claude` (the package's postinstall is not needed to run it). */
function binaryIn(dir) {
  const candidate = join(dir, 'node_modules', '@anthropic-ai', 'claude-code', 'bin', 'claude.exe');
  if (!existsSync(candidate)) return null;
  // Before its postinstall the package's bin is a stub; the platform package holds the real one.
  const check = spawnSync(candidate, ['--version'], { encoding: 'utf8', timeout: 30000 });
  return check.status === 0 && check.stdout.includes(CLAUDE_VERSION) ? candidate : null;
}

/**
 * The Claude Code command: `CLAUDE_CODE_ADAPTER_BIN` (a maintainer's own
 * build, or the tests' fake, as a command line), else the pinned version
 * from the cache, installed with npm on first use. npm's output goes to
 * stderr, never to the protocol's stdout.
 */
export function ensureClaude({ env = process.env, log = () => {} } = {}) {
  if (env.CLAUDE_CODE_ADAPTER_BIN) {
    const parts = env.CLAUDE_CODE_ADAPTER_BIN.split(' ').filter(Boolean);
    return { command: parts[0], args: parts.slice(1), version: env.CLAUDE_CODE_ADAPTER_BIN_VERSION || 'override' };
  }
  const dir = cacheDir(env);
  let binary = binaryIn(dir);
  if (!binary) {
    log('info', `installing ${PACKAGE}@${CLAUDE_VERSION} into ${dir} (first use; about 235 MB)`);
    mkdirSync(dir, { recursive: true });
    const npm = spawnSync('npm', ['install', '--prefix', dir, '--no-audit', '--no-fund', `${PACKAGE}@${CLAUDE_VERSION}`], {
      stdio: ['ignore', 2, 2],
      env,
    });
    if (npm.status !== 0) throw new Error(`npm install ${PACKAGE}@${CLAUDE_VERSION} failed (status ${npm.status})`);
    binary = binaryIn(dir);
    if (!binary) throw new Error(`npm installed ${PACKAGE}@${CLAUDE_VERSION} but ${dir} holds no working claude binary of that version`);
  }
  return { command: binary, args: [], version: CLAUDE_VERSION };
}

/** The folders of one store: Claude Code's home (its `.claude` store), temporary files, and the harness's paths. */
export function storePaths(storeDir) {
  const root = join(storeDir, 'claude-code');
  return {
    root,
    home: join(root, 'home'),
    tmp: join(root, 'tmp'),
    fs: join(root, 'fs'),
    state: join(root, 'adapter-state.json'),
  };
}

/**
 * HOME, every XDG_* folder and the temporary folder inside the store, the
 * harness's model endpoint as Anthropic's API, and Claude Code's switches
 * for no traffic but the model's: a run writes and sends nothing elsewhere.
 */
export function isolatedEnv(storeDir, modelEndpoint, base = process.env) {
  const paths = storePaths(storeDir);
  const env = {};
  // Only what a process needs to run; Claude Code reads many ANTHROPIC_* and
  // CLAUDE_* variables, and none of the caller's may leak in.
  for (const key of ['PATH', 'LANG', 'LC_ALL', 'TERM', 'CLAUDE_CODE_ADAPTER_FAKE_LOG']) if (base[key] !== undefined) env[key] = base[key];
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
    ANTHROPIC_BASE_URL: modelEndpoint,
    ANTHROPIC_API_KEY: 'delegation-harness',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_TELEMETRY: '1',
    DISABLE_AUTOUPDATER: '1',
    DISABLE_ERROR_REPORTING: '1',
    // Every tool in the model's tool list from the first request: by default
    // Claude Code defers MCP tools (and SendMessage, TaskStop, ...) behind
    // ToolSearch, so a model could call them only after a search.
    ENABLE_TOOL_SEARCH: 'false',
    // A scripted failure must reach the turn, not be retried away.
    CLAUDE_CODE_MAX_RETRIES: '0',
    // bypassPermissions (a full-access instance) refuses to run as root without it.
    IS_SANDBOX: '1',
  });
  for (const key of ['XDG_CONFIG_HOME', 'XDG_DATA_HOME', 'XDG_STATE_HOME', 'XDG_CACHE_HOME', 'XDG_RUNTIME_DIR', 'TMPDIR']) {
    mkdirSync(env[key], { recursive: true, mode: 0o700 });
  }
  return env;
}

/** Claude Code's folder name for a project directory: every character outside [a-zA-Z0-9] becomes `-`. */
export const projectSlug = (cwd) => cwd.replace(/[^a-zA-Z0-9]/g, '-');

/**
 * Runs one `claude -p` turn and collects its stream-json events. `input` is
 * the prompt, written to stdin (so a prompt starting with `-` is never an
 * option). Resolves `{events, code, signal, stderr, timedOut}`.
 */
export function runClaude({ bin, args, env, cwd, input, timeoutMs, onSpawn = () => {} }) {
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

/**
 * What Claude Code's own store holds for one project directory: each main
 * session (`projects/<slug>/<session>.jsonl`) and each subagent of it
 * (`<session>/subagents/agent-<id>.jsonl` with its `.meta.json`).
 */
export function readStore(home, cwd) {
  const dir = join(home, '.claude', 'projects', projectSlug(cwd));
  const sessions = new Map();
  const agents = new Map();
  let names = [];
  try {
    names = readdirSync(dir);
  } catch {
    return { sessions, agents };
  }
  for (const name of names) {
    if (!name.endsWith('.jsonl')) continue;
    const session = name.slice(0, -'.jsonl'.length);
    sessions.set(session, { path: join(dir, name) });
    const subagents = join(dir, session, 'subagents');
    let files = [];
    try { files = readdirSync(subagents); } catch { continue; }
    for (const file of files) {
      const m = file.match(/^agent-(.+)\.meta\.json$/);
      if (!m) continue;
      const meta = readJson(join(subagents, file), null);
      if (meta) agents.set(m[1], { session, meta, transcript: join(subagents, `agent-${m[1]}.jsonl`) });
    }
  }
  return { sessions, agents };
}

/** The `tool_use` ids an agent's transcript holds (to find which agent spawned a grandchild). */
export function toolUseIdsIn(path) {
  const ids = new Set();
  let text = '';
  try { text = readFileSync(path, 'utf8'); } catch { return ids; }
  for (const line of text.split('\n')) {
    if (!line.includes('tool_use')) continue;
    try {
      const entry = JSON.parse(line);
      const content = entry && entry.message && entry.message.content;
      if (Array.isArray(content)) for (const block of content) if (block && block.type === 'tool_use') ids.add(block.id);
    } catch { /* a partial last line */ }
  }
  return ids;
}

/** Whether the model answered in a main session: its transcript holds an assistant message outside subagents. */
export function sessionAnswered(path) {
  let text = '';
  try { text = readFileSync(path, 'utf8'); } catch { return false; }
  for (const line of text.split('\n')) {
    if (!line.includes('"assistant"')) continue;
    try {
      const entry = JSON.parse(line);
      if (entry.type === 'assistant' && !entry.isSidechain) return true;
    } catch { /* a partial last line */ }
  }
  return false;
}

/**
 * One `claude -p` run with stream-json input, kept alive across a person's
 * approval: it settles when the run ends (a `result` event) or when Claude
 * Code asks permission (`--permission-prompt-tool stdio`: a `can_use_tool`
 * control request), and `answer` continues it.
 */
export class LiveRun extends StreamJsonRun {}

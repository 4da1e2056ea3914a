// Installing, isolating and running Gemini CLI (`gemini -p`, stream-json), and reading the session files it keeps.

import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, dirname } from 'node:path';
import { readJson, writeAtomic, killGroup } from '../../node-common/files.mjs';
export { readJson, writeAtomic, killGroup };

export const GEMINI_VERSION = '0.61.0';
export const PACKAGE = '@google/gemini-cli';
/** The model every run is pinned to: a pinned model makes Gemini CLI skip its complexity router call. */
export const GEMINI_MODEL = 'gemini-2.5-pro';
/** Gemini CLI's prefix of a tool call's id in stream-json and in its session store (`invoke_agent__<model's call id>`). */
export const DELEGATION_TOOL = 'invoke_agent';

/** Where the pinned Gemini CLI is installed: `$GEMINI_CLI_ADAPTER_CACHE`, else `$XDG_CACHE_HOME/delegation-harness/gemini-cli-VERSION`. */
export function cacheDir(env = process.env) {
  if (env.GEMINI_CLI_ADAPTER_CACHE) return env.GEMINI_CLI_ADAPTER_CACHE;
  const base = env.XDG_CACHE_HOME || join(env.HOME || homedir(), '.cache');
  return join(base, 'delegation-harness', `gemini-cli-${GEMINI_VERSION}`);
}

/**
 * The installed bundle, if it answers `--version` with the pinned version.
 * Gemini CLI writes to `~/.gemini` even for `--version`, so the check runs
 * with a home inside the cache folder.
 */
function bundleIn(dir) {
  const script = join(dir, 'node_modules', '@google', 'gemini-cli', 'bundle', 'gemini.js');
  if (!existsSync(script)) return null;
  // Checked once per install (a start of Gemini CLI costs seconds under load).
  const stamp = join(dir, `.checked-${GEMINI_VERSION}`);
  if (existsSync(stamp)) return script;
  const home = join(dir, 'version-check-home');
  mkdirSync(home, { recursive: true });
  const check = spawnSync(process.execPath, [script, '--version'], {
    encoding: 'utf8', timeout: 60000, env: { PATH: process.env.PATH, HOME: home, TMPDIR: home },
  });
  if (check.status !== 0 || check.stdout.trim() !== GEMINI_VERSION) return null;
  writeFileSync(stamp, `${check.stdout.trim()}\n`);
  return script;
}

/**
 * The Gemini CLI command: `GEMINI_CLI_ADAPTER_BIN` (a maintainer's own build,
 * or the tests' fake, as a command line), else the pinned version from the
 * cache, installed with npm on first use. npm's output goes to stderr, never
 * to the protocol's stdout.
 */
export function ensureGemini({ env = process.env, log = () => {} } = {}) {
  if (env.GEMINI_CLI_ADAPTER_BIN) {
    const parts = env.GEMINI_CLI_ADAPTER_BIN.split(' ').filter(Boolean);
    return { command: parts[0], args: parts.slice(1), version: env.GEMINI_CLI_ADAPTER_BIN_VERSION || 'override' };
  }
  const dir = cacheDir(env);
  let script = bundleIn(dir);
  if (!script) {
    log('info', `installing ${PACKAGE}@${GEMINI_VERSION} into ${dir} (first use; about 100 MB)`);
    mkdirSync(dir, { recursive: true });
    const npm = spawnSync('npm', ['install', '--prefix', dir, '--no-audit', '--no-fund', `${PACKAGE}@${GEMINI_VERSION}`], {
      stdio: ['ignore', 2, 2],
      env,
    });
    if (npm.status !== 0) throw new Error(`npm install ${PACKAGE}@${GEMINI_VERSION} failed (status ${npm.status})`);
    script = bundleIn(dir);
    if (!script) throw new Error(`npm installed ${PACKAGE}@${GEMINI_VERSION} but ${dir} holds no gemini of that version`);
  }
  return { command: process.execPath, args: [script], version: GEMINI_VERSION };
}

/** The folders of one store: Gemini CLI's home (its `.gemini` store), temporary files, policies and the harness's paths. */
export function storePaths(storeDir) {
  const root = join(storeDir, 'gemini-cli');
  return {
    root,
    home: join(root, 'home'),
    gemini: join(root, 'home', '.gemini'),
    tmp: join(root, 'tmp'),
    fs: join(root, 'fs'),
    policies: join(root, 'policies'),
    state: join(root, 'adapter-state.json'),
  };
}

/**
 * HOME, every XDG_* folder and the temporary folder inside the store, the
 * harness's model endpoint as the Gemini API with a dummy key, and the
 * workspace trusted without asking: a run writes and sends nothing elsewhere.
 */
export function isolatedEnv(storeDir, modelEndpoint, base = process.env) {
  const paths = storePaths(storeDir);
  const env = {};
  // Only what a process needs to run; Gemini CLI reads many GEMINI_* and
  // GOOGLE_* variables, and none of the caller's may leak in.
  for (const key of ['PATH', 'LANG', 'LC_ALL', 'TERM', 'GEMINI_CLI_ADAPTER_FAKE_LOG']) if (base[key] !== undefined) env[key] = base[key];
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
    GOOGLE_GEMINI_BASE_URL: modelEndpoint,
    GEMINI_API_KEY: 'delegation-harness',
    // Without it a headless run in an untrusted folder stops to ask.
    GEMINI_CLI_TRUST_WORKSPACE: 'true',
    // No sandbox container (none is installed; the harness's paths are the workspace).
    GEMINI_SANDBOX: 'false',
  });
  for (const key of ['XDG_CONFIG_HOME', 'XDG_DATA_HOME', 'XDG_STATE_HOME', 'XDG_CACHE_HOME', 'XDG_RUNTIME_DIR', 'TMPDIR']) {
    mkdirSync(env[key], { recursive: true, mode: 0o700 });
  }
  return env;
}

/**
 * The user settings every run reads (`~/.gemini/settings.json` in the
 * isolated home): API-key auth against the harness's endpoint, no usage
 * statistics, no update checks, and the harness's MCP servers.
 */
export function writeSettings(paths, mcpServers) {
  const settings = {
    security: { auth: { selectedType: 'gemini-api-key' } },
    privacy: { usageStatisticsEnabled: false },
    general: { enableAutoUpdate: false, enableAutoUpdateNotification: false },
    ...(mcpServers.length ? { mcpServers: Object.fromEntries(mcpServers.map((s) => [s.name, { httpUrl: s.url }])) } : {}),
  };
  writeAtomic(join(paths.gemini, 'settings.json'), JSON.stringify(settings, null, 2) + '\n');
}

/**
 * Runs one `gemini` turn and collects its stream-json events. Resolves
 * `{events, code, signal, stderr, timedOut}`. Its stdin is closed: Gemini CLI
 * would otherwise add piped input to the prompt.
 */
export function runGemini({ bin, args, env, cwd, timeoutMs, onSpawn = () => {} }) {
  return new Promise((resolve) => {
    const child = spawn(bin.command, [...bin.args, ...args], { env, cwd, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
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
  });
}

/** The model's call id behind Gemini CLI's id of a tool call (`invoke_agent__<id>` → `<id>`). */
export const callIdOf = (toolId, name = DELEGATION_TOOL) =>
  String(toolId || '').startsWith(`${name}__`) ? String(toolId).slice(name.length + 2) : String(toolId || '');

/**
 * One session file as Gemini CLI keeps it (JSONL: a header line with
 * `sessionId` and `kind`, then messages, each written again when updated,
 * and `$set` lines): `{header, messages, calls}` with the last version of
 * each message, and every tool call any version recorded (by call id, its
 * last recorded version). A resumed session's history is written again
 * (`$set`) without the tool calls of earlier turns; the lines before it are
 * still Gemini CLI's record of those calls and of the subagents they started.
 */
function readSessionFile(path) {
  let text = '';
  try { text = readFileSync(path, 'utf8'); } catch { return null; }
  let header = null;
  const messages = new Map();
  const calls = new Map();
  const record = (m) => {
    messages.set(m.id, m);
    if (m.type !== 'gemini') return;
    for (const call of m.toolCalls || []) if (call && call.id) calls.set(call.id, { ...calls.get(call.id), ...call });
  };
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    let entry;
    try { entry = JSON.parse(line); } catch { continue; /* a partial last line */ }
    if (!header && entry.sessionId) { header = entry; continue; }
    if (entry.$set && Array.isArray(entry.$set.messages)) {
      for (const m of entry.$set.messages) if (m && m.id) record(m);
      continue;
    }
    if (entry.id && entry.type) record(entry);
  }
  return header ? { header, messages: [...messages.values()], calls: [...calls.values()] } : null;
}

/**
 * What Gemini CLI's own store holds: each main session
 * (`~/.gemini/tmp/<project>/chats/session-*.jsonl`) by its session id, whether
 * the model answered in it, and each subagent it started: the `invoke_agent`
 * call's id (the model's), Gemini CLI's `agentId`, the agent's name, and the
 * call's status and the subagent's state as the session records them.
 *
 * A session can span several files: `--resume` records a new file under the
 * same session id (named by the minute it starts; within the same minute it
 * appends to the resumed file), holding the start-up context, then writes
 * the history again into the resumed file without the earlier turns' tool
 * calls, and goes on there. Every file of a session id is read, oldest
 * first; a subagent is every `invoke_agent` call with an `agentId` any of
 * them recorded.
 */
export function readStore(geminiDir) {
  const files = new Map();
  const projects = join(geminiDir, 'tmp');
  let names = [];
  try { names = readdirSync(projects); } catch { return new Map(); }
  for (const project of names) {
    const chats = join(projects, project, 'chats');
    let entries = [];
    try { entries = readdirSync(chats); } catch { continue; }
    for (const file of entries) {
      if (!file.startsWith('session-') || !file.endsWith('.jsonl')) continue;
      const session = readSessionFile(join(chats, file));
      if (!session || session.header.kind === 'subagent') continue;
      const id = session.header.sessionId;
      if (!files.has(id)) files.set(id, []);
      files.get(id).push({ ...session, chats, path: join(chats, file) });
    }
  }
  const sessions = new Map();
  for (const [id, parts] of files) {
    parts.sort((a, b) => String(a.header.startTime || '').localeCompare(String(b.header.startTime || '')));
    const merged = new Map();
    const calls = new Map();
    for (const part of parts) {
      for (const m of part.messages) merged.set(m.id, m);
      for (const call of part.calls) calls.set(call.id, { ...calls.get(call.id), ...call });
    }
    const messages = [...merged.values()];
    const answered = messages.some((m) => m.type === 'gemini');
    const subagents = [];
    for (const call of calls.values()) {
      if (call.name !== DELEGATION_TOOL || !call.agentId) continue;
      const display = call.resultDisplay || {};
      subagents.push({
        callId: callIdOf(call.id), agentId: call.agentId, agentName: (call.args || {}).agent_name,
        status: call.status, state: display.state, terminateReason: display.terminateReason,
        transcript: join(parts[0].chats, id, `${call.agentId}.jsonl`),
      });
    }
    // The file that holds the conversation: the one with the most messages.
    const main = parts.reduce((a, b) => (b.messages.length > a.messages.length ? b : a));
    sessions.set(id, { path: main.path, answered, subagents, messages });
  }
  return sessions;
}

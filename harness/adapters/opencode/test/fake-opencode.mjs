// A fake `opencode serve` for the adapter's tests: the HTTP API subset the adapter uses, with scripted behaviour and no model.
//
// Run as `node fake-opencode.mjs serve --hostname H --port P` in a workspace
// folder. Sessions persist in `fake-db.json` there (like opencode's SQLite).
// A prompt containing SPAWN calls `task` (a child session unless the session
// denies task: then the `invalid` tool, as opencode does); DEEP makes task
// fail with opencode's depth error; FAIL leaves the session retrying;
// SLOWSTART starts the turn seconds late; NOANSWER ends it without an answer;
// `CALL <tool>` calls that tool, as opencode would by the session's rules
// (deny: hidden, so the `invalid` tool; ask: a pending permission request
// until it is replied to; allow: it runs); anything else is echoed.
// POST /instance/dispose counts in `fake-disposals.txt`, each prompt's
// session and agent go to `fake-prompts.txt`; each server start
// appends to `fake-starts.txt`. FAKE_IGNORE_SIGTERM=1 ignores SIGTERM; FAKE_PID_FILE gets the pid.
import { createServer } from 'node:http';
import { existsSync, readFileSync, writeFileSync, appendFileSync } from 'node:fs';

const args = process.argv.slice(2);
const port = Number(args[args.indexOf('--port') + 1]);
const host = args[args.indexOf('--hostname') + 1];
const DB = 'fake-db.json';
const db = existsSync(DB) ? JSON.parse(readFileSync(DB, 'utf8')) : { sessions: {}, messages: {}, seq: 0 };
const status = {};
const permissions = {};
appendFileSync('fake-starts.txt', 'start\n');
// FAKE_FAIL_STARTS names a file holding N: the next N starts fail as
// opencode does when it cannot listen (ServeError), before answering.
if (process.env.FAKE_FAIL_STARTS && existsSync(process.env.FAKE_FAIL_STARTS)) {
  const left = Number(readFileSync(process.env.FAKE_FAIL_STARTS, 'utf8'));
  if (left > 0) {
    writeFileSync(process.env.FAKE_FAIL_STARTS, String(left - 1));
    process.stderr.write('Error: Unexpected error\n\nServeError\n');
    process.exit(1);
  }
}
if (process.env.FAKE_ENV_FILE) writeFileSync(process.env.FAKE_ENV_FILE, JSON.stringify(process.env));
// The tools opencode has: a few built-in ones and `<server>_<tool>` for every MCP server in opencode.json.
const mcpServers = () => Object.keys((existsSync('opencode.json') && JSON.parse(readFileSync('opencode.json', 'utf8')).mcp) || {});
const toolExists = (tool) => ['read', 'edit', 'bash', 'webfetch'].includes(tool) || mcpServers().some((s) => tool.startsWith(`${s}_`));
const glob = (g, text) => new RegExp(`^${g.split('*').map((x) => x.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*')}$`).test(text);
const evaluate = (rules, permission) => {
  const hit = [...rules].reverse().find((r) => glob(r.permission, permission) && glob(r.pattern, '*'));
  return hit ? hit.action : 'allow';
};
// GET /event: server-sent events, `session.status` when a session turns
// busy and after every stored change (each idle transition is stored),
// `permission.asked` with each permission request, as opencode publishes
// them (FAKE_NO_EVENTS=1: no event stream, a 404 as from an
// opencode without one). Each GET /session/status is counted in
// `fake-status-polls.txt`.
const listeners = new Set();
const publish = (type) => {
  for (const res of listeners) res.write(`data: ${JSON.stringify({ type, properties: {} })}\n\n`);
};
const save = () => { writeFileSync(DB, JSON.stringify(db)); publish('session.status'); };
const busy = (sid) => { status[sid] = { type: 'busy' }; publish('session.status'); };
const id = (prefix) => `${prefix}_${String(++db.seq).padStart(6, '0')}`;
if (process.env.FAKE_PID_FILE) writeFileSync(process.env.FAKE_PID_FILE, String(process.pid));
if (process.env.FAKE_IGNORE_SIGTERM) process.on('SIGTERM', () => {});

function createSession(body) {
  const s = { id: id('ses'), title: body.title || '', permission: body.permission || [], time: { created: Date.now() } };
  if (body.parentID) s.parentID = body.parentID;
  if (body.agent) s.agent = body.agent;
  db.sessions[s.id] = s;
  db.messages[s.id] = [];
  save();
  return s;
}

const user = (text) => ({ info: { id: id('msg'), role: 'user' }, parts: [{ type: 'text', text }] });
const assistant = (parts) => ({ info: { id: id('msg'), role: 'assistant', time: { created: Date.now(), completed: Date.now() } }, parts });

function run(sid, text) {
  const msgs = db.messages[sid];
  msgs.push(user(text));
  // SLOWSTART: the prompt is stored at once but the session turns busy only
  // seconds later, as real opencode does on a loaded machine (its first
  // prompt took 2.4 s to start at load 9 here).
  if (text.includes('SLOWSTART')) {
    setTimeout(() => work(sid, msgs, text), Number(process.env.FAKE_SLOW_START_MS || 6000));
    return;
  }
  // NOANSWER: busy, then idle without any assistant message.
  if (text.includes('NOANSWER')) {
    busy(sid);
    setTimeout(() => { delete status[sid]; }, 500);
    return;
  }
  work(sid, msgs, text);
}

function work(sid, msgs, text) {
  busy(sid);
  // SLOWTURN: the model takes 3 s (a turn long enough to count the adapter's looks).
  setTimeout(() => {
    if (text.includes('FAIL')) {
      status[sid] = { type: 'retry', attempt: 1, message: 'fake model 503', next: Date.now() + 60000 };
      return;
    }
    const session = db.sessions[sid];
    const deniesTask = session.permission.some((r) => r.permission === 'task' && r.action === 'deny');
    const call = text.match(/CALL (\S+)/);
    if (call) {
      const tool = call[1];
      const action = evaluate(session.permission, tool);
      const callID = id('call');
      if (action === 'deny' || !toolExists(tool)) {
        msgs.push(assistant([{ type: 'tool', tool: 'invalid', callID, state: { status: 'completed', input: { tool, error: 'unavailable' }, output: `Model tried to call unavailable tool '${tool}'.` } }]));
        msgs.push(assistant([{ type: 'text', text: 'ok' }]));
      } else {
        const message = assistant([{ type: 'tool', tool, callID, state: { status: 'running', input: { path: 'x' } } }]);
        delete message.info.time.completed;
        msgs.push(message);
        const finish = (ok) => {
          message.parts[0].state = ok ? { status: 'completed', input: { path: 'x' }, output: `ran ${tool}` } : { status: 'error', input: { path: 'x' }, error: 'The user rejected permission to use this specific tool call.' };
          message.info.time.completed = Date.now();
          // As opencode (continue_loop_on_deny off): a rejected call ends the loop, no follow-up answer.
          if (ok) msgs.push(assistant([{ type: 'text', text: 'ok' }]));
          delete status[sid];
          save();
        };
        if (action === 'ask') {
          const pid = id('per');
          permissions[pid] = { request: { id: pid, sessionID: sid, permission: tool, patterns: ['*'], metadata: {}, always: ['*'], tool: { messageID: message.info.id, callID } }, finish };
          save();
          publish('permission.asked');
          return;
        }
        finish(true);
      }
      delete status[sid];
      save();
      return;
    }
    if (text.includes('SPAWN') && deniesTask) {
      msgs.push(assistant([{ type: 'tool', tool: 'invalid', state: { status: 'completed', input: { tool: 'task', error: 'unavailable' }, output: "The arguments provided to the tool are invalid: Model tried to call unavailable tool 'task'." } }]));
      msgs.push(assistant([{ type: 'text', text: 'ok' }]));
    } else if (text.includes('DEEP')) {
      msgs.push(assistant([{ type: 'tool', tool: 'task', state: { status: 'error', input: { subagent_type: 'worker' }, error: 'Subagent depth limit reached (1).' } }]));
      msgs.push(assistant([{ type: 'text', text: 'ok' }]));
    } else if (text.includes('SPAWN')) {
      const child = createSession({ parentID: sid, title: 'delegate to worker (@worker subagent)', agent: 'worker', permission: session.permission });
      db.messages[child.id].push(user('child task'), assistant([{ type: 'text', text: 'child done' }]));
      msgs.push(assistant([{ type: 'tool', tool: 'task', state: { status: 'completed', input: { subagent_type: 'worker' }, output: 'child done', metadata: { sessionId: child.id } } }]));
      msgs.push(assistant([{ type: 'text', text: 'ok' }]));
    } else {
      msgs.push(assistant([{ type: 'text', text: `echo: ${text}` }]));
    }
    delete status[sid];
    save();
  }, text.includes('SLOWTURN') ? 3000 : 30);
}

const server = createServer((req, res) => {
  let raw = '';
  req.on('data', (c) => { raw += c; });
  req.on('end', () => {
    const body = raw ? JSON.parse(raw) : {};
    const send = (code, value) => {
      res.writeHead(code, { 'content-type': 'application/json' });
      res.end(value === undefined ? '' : JSON.stringify(value));
    };
    const path = new URL(req.url, 'http://x').pathname;
    const m = path.match(/^\/session\/([^/]+)(\/[a-z_]+)?$/);
    const sid = m && decodeURIComponent(m[1]);
    if (req.method === 'GET' && path === '/session/status') {
      appendFileSync('fake-status-polls.txt', 'poll\n');
      return send(200, status);
    }
    if (req.method === 'GET' && path === '/event') {
      if (process.env.FAKE_NO_EVENTS) return send(404, { name: 'NotFoundError' });
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.write(`data: ${JSON.stringify({ type: 'server.connected', properties: {} })}\n\n`);
      listeners.add(res);
      res.on('close', () => listeners.delete(res));
      return undefined;
    }
    if (req.method === 'GET' && path === '/permission') return send(200, Object.values(permissions).map((p) => p.request));
    if (req.method === 'POST' && path === '/instance/dispose') { appendFileSync('fake-disposals.txt', 'dispose\n'); return send(200, true); }
    const waitFor = path.match(/^\/api\/session\/([^/]+)\/wait$/);
    if (req.method === 'POST' && waitFor) {
      const sid = decodeURIComponent(waitFor[1]);
      if (!db.sessions[sid]) return send(404, { name: 'SessionNotFoundError' });
      const poll = () => (status[sid] ? setTimeout(poll, 20) : send(204));
      return poll();
    }
    const reply = path.match(/^\/permission\/([^/]+)\/reply$/);
    if (req.method === 'POST' && reply) {
      const p = permissions[reply[1]];
      if (!p) return send(404, { name: 'PermissionNotFoundError' });
      delete permissions[reply[1]];
      p.finish(body.reply !== 'reject');
      return send(200, true);
    }
    if (req.method === 'GET' && path === '/session') return send(200, Object.values(db.sessions));
    if (req.method === 'POST' && path === '/session') return send(200, createSession(body));
    if (!m) return send(404, { name: 'NotFoundError' });
    const session = db.sessions[sid];
    if (!session) return send(404, { name: 'NotFoundError', data: { message: `Session not found: ${sid}` } });
    const sub = m[2] || '';
    if (req.method === 'GET' && sub === '') return send(200, session);
    if (req.method === 'GET' && sub === '/children') return send(200, Object.values(db.sessions).filter((s) => s.parentID === sid));
    if (req.method === 'GET' && sub === '/message') return send(200, db.messages[sid]);
    if (req.method === 'POST' && sub === '/prompt_async') {
      appendFileSync('fake-prompts.txt', `${JSON.stringify({ session: sid, agent: body.agent ?? null })}\n`);
      run(sid, body.parts.map((p) => p.text).join(''));
      return send(204);
    }
    if (req.method === 'POST' && sub === '/abort') { delete status[sid]; return send(200, true); }
    if (req.method === 'POST' && sub === '/fork') {
      // As opencode 1.18.33: the fork gets none of the origin's permission rules.
      const fork = createSession({ title: `${session.title} (fork #1)`, ...(session.parentID ? { parentID: session.parentID } : {}), ...(session.agent ? { agent: session.agent } : {}) });
      db.messages[fork.id] = JSON.parse(JSON.stringify(db.messages[sid]));
      save();
      return send(200, fork);
    }
    if (req.method === 'DELETE' && sub === '') {
      const drop = (x) => { for (const c of Object.values(db.sessions)) if (c.parentID === x) drop(c.id); delete db.sessions[x]; delete db.messages[x]; };
      drop(sid);
      save();
      return send(200, true);
    }
    return send(404, { name: 'NotFoundError' });
  });
});
server.listen(port, host, () => process.stderr.write(`fake opencode listening on http://${host}:${port}\n`));

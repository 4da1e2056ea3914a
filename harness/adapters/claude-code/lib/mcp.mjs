// The harness's MCP servers as Claude Code sees them: Claude Code's names for their tools, and the digests of the definitions they serve.
//
// Claude Code names an MCP tool `mcp__<server>__<tool>`, each part with every
// character outside [a-zA-Z0-9_-] replaced by `_`, and its permission rules
// key on that name. The digests are the protocol's (SHA-256 over RFC 8785
// JSON of the definition as served); Claude Code keeps no digest, so they
// come from the adapter's own `tools/list` and are reported as inferred.
// The streamable-HTTP client is the same as the opencode adapter's.

import { createHash } from 'node:crypto';

/** Claude Code's sanitisation of a server or tool name. */
export const sanitize = (name) => String(name).replace(/[^a-zA-Z0-9_-]/g, '_');

/** The name Claude Code gives tool `tool` of MCP server `server`. */
export const claudeToolName = (server, tool) => `mcp__${sanitize(server)}__${sanitize(tool)}`;

/** RFC 8785 canonical JSON (object keys by UTF-16 code units; numbers and strings as ECMAScript prints them). */
export function canonicalJson(value) {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const keys = Object.keys(value).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k])}`).join(',')}}`;
}

export const digestOf = (definition) => `sha256:${createHash('sha256').update(canonicalJson(definition)).digest('hex')}`;

/** Reads one JSON-RPC answer from a streamable-HTTP response (plain JSON or an SSE stream). */
async function rpcAnswer(res, id) {
  const text = await res.text();
  const type = res.headers.get('content-type') || '';
  const candidates = type.includes('text/event-stream')
    ? text.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim())
    : [text];
  for (const c of candidates) {
    try {
      const msg = JSON.parse(c);
      if (msg && msg.id === id) return msg;
    } catch { /* not a message */ }
  }
  throw new Error(`MCP server answered ${res.status} without a response to request ${id}: ${text.slice(0, 200)}`);
}

/** `tools/list` of one streamable-HTTP MCP server: the raw definitions, every page. */
export async function listTools(url, { timeoutMs = 10000 } = {}) {
  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  let nextId = 1;
  const post = async (message) => {
    const res = await fetch(url, { method: 'POST', headers, body: JSON.stringify(message), signal: AbortSignal.timeout(timeoutMs) });
    const session = res.headers.get('mcp-session-id');
    if (session) headers['mcp-session-id'] = session;
    return res;
  };
  const request = async (method, params) => {
    const id = nextId++;
    const answer = await rpcAnswer(await post({ jsonrpc: '2.0', id, method, params }), id);
    if (answer.error) throw new Error(`MCP ${method} failed: ${answer.error.message}`);
    return answer.result;
  };
  await request('initialize', { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'delegation-harness-claude-code-adapter', version: '1' } });
  const note = await post({ jsonrpc: '2.0', method: 'notifications/initialized' });
  await note.text();
  const tools = [];
  let cursor;
  do {
    const page = await request('tools/list', cursor ? { cursor } : {});
    tools.push(...(page.tools || []));
    cursor = page.nextCursor;
  } while (cursor);
  if (headers['mcp-session-id']) {
    await fetch(url, { method: 'DELETE', headers, signal: AbortSignal.timeout(timeoutMs) }).then((r) => r.text(), () => {});
  }
  return tools;
}

/**
 * Every tool the servers serve now: `{name, server, claude, digest, class}` per
 * tool name. A name served by two servers is ambiguous and left out.
 */
export async function toolCatalogue(servers) {
  const byName = new Map();
  const ambiguous = new Set();
  for (const server of servers) {
    for (const definition of await listTools(server.url)) {
      if (byName.has(definition.name)) ambiguous.add(definition.name);
      const cls = definition.annotations && definition.annotations['x-delegation-class'];
      byName.set(definition.name, {
        name: definition.name, server: server.name, claude: claudeToolName(server.name, definition.name),
        digest: digestOf(definition), class: typeof cls === 'string' ? cls : 'mcp',
      });
    }
  }
  for (const name of ambiguous) byName.delete(name);
  return byName;
}

// The harness's MCP servers as a Node adapter sees them: an MCP client over streamable HTTP (tools/list, every page), the protocol's digests of the definitions served (SHA-256 over RFC 8785 JSON), and each tool's host name. Shared by the opencode and Claude Code adapters.

import { createHash } from 'node:crypto';

/** The sanitisation opencode and Claude Code both apply to a server or tool name. */
export const sanitize = (name) => String(name).replace(/[^a-zA-Z0-9_-]/g, '_');

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
export async function listTools(url, { timeoutMs = 10000, clientName = 'delegation-harness-adapter' } = {}) {
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
  await request('initialize', { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: clientName, version: '1' } });
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
 * Every tool the servers serve now: `{name, server, [key], digest, class}` per
 * tool name, `[key]` being the host's own name for it (`hostName(server,
 * tool)`). A name served by two servers is ambiguous and left out.
 */
export async function toolCatalogue(servers, { key, hostName, clientName }) {
  const byName = new Map();
  const ambiguous = new Set();
  for (const server of servers) {
    for (const definition of await listTools(server.url, { clientName })) {
      if (byName.has(definition.name)) ambiguous.add(definition.name);
      const cls = definition.annotations && definition.annotations['x-delegation-class'];
      byName.set(definition.name, {
        name: definition.name, server: server.name, [key]: hostName(server.name, definition.name),
        digest: digestOf(definition), class: typeof cls === 'string' ? cls : 'mcp',
      });
    }
  }
  for (const name of ambiguous) byName.delete(name);
  return byName;
}

// A fake streamable-HTTP MCP server for the adapter's tests: answers initialize and tools/list (one session, SSE answers) and counts tool calls.
import { createServer } from 'node:http';

/** Serves `tools` (raw MCP definitions); resolves `{url, calls, close}`. */
export function startFakeMcp(tools) {
  const state = { calls: 0, sessions: 0 };
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => { raw += c; });
    req.on('end', () => {
      if (req.method === 'DELETE') { res.writeHead(200); res.end(); return; }
      if (req.method !== 'POST') { res.writeHead(405); res.end(); return; }
      const msg = JSON.parse(raw);
      if (msg.id === undefined) { res.writeHead(202); res.end(); return; }
      let result;
      if (msg.method === 'initialize') {
        state.sessions++;
        result = { protocolVersion: '2025-03-26', capabilities: { tools: {} }, serverInfo: { name: 'fake', version: '1' } };
      } else if (msg.method === 'tools/list') {
        if (req.headers['mcp-session-id'] !== 'fake-session') { res.writeHead(400); res.end('no session'); return; }
        result = { tools };
      } else if (msg.method === 'tools/call') {
        state.calls++;
        result = { content: [{ type: 'text', text: 'ran' }] };
      }
      res.writeHead(200, { 'content-type': 'text/event-stream', 'mcp-session-id': 'fake-session' });
      res.end(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: msg.id, result })}\n\n`);
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => {
    resolve({ url: `http://127.0.0.1:${server.address().port}/mcp`, state, close: () => new Promise((r) => server.close(r)) });
  }));
}

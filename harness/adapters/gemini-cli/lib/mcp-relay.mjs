// A loopback relay in front of each harness MCP server that drops SSE events without data, which Gemini CLI 0.61.0's MCP client cannot read (README, finding 1); everything else passes unchanged.
//
// The harness's MCP server (rmcp, streamable HTTP) opens each SSE stream with
// a priming event (an `id:` and an empty `data:` line, for reconnection).
// Gemini CLI's MCP client parses every event's data as JSON, fails with
// "Unexpected end of JSON input", disconnects, and never offers the server's
// tools. The relay forwards each request as it came (method, path, headers,
// body) and each answer as it went, only without such events, so the tool
// server still sees, counts and answers every call itself.

import http from 'node:http';

/** Whether an SSE event (its lines, without the blank line ending it) is one to pass on: any event but one whose data lines are all empty. */
export function keepEvent(event) {
  const data = event.split(/\r?\n/).filter((line) => line.startsWith('data:'));
  return data.length === 0 || data.some((line) => line.slice(5).trim() !== '');
}

/** Starts a relay to the MCP server at `target`; answers `{url, close}`, `url` being the same path on the relay's port. */
export function startRelay(target) {
  const upstreamUrl = new URL(target);
  const server = http.createServer((req, res) => {
    const headers = { ...req.headers, host: upstreamUrl.host };
    const query = req.url.includes('?') ? req.url.slice(req.url.indexOf('?')) : '';
    const upstream = http.request({
      hostname: upstreamUrl.hostname, port: upstreamUrl.port, method: req.method,
      path: `${upstreamUrl.pathname}${query}`, headers,
    }, (answer) => {
      const type = String(answer.headers['content-type'] || '');
      if (!type.includes('text/event-stream')) {
        res.writeHead(answer.statusCode, answer.headers);
        answer.pipe(res);
        return;
      }
      const { 'content-length': _length, ...rest } = answer.headers;
      res.writeHead(answer.statusCode, rest);
      let buffer = '';
      answer.setEncoding('utf8');
      answer.on('data', (chunk) => {
        buffer += chunk;
        let end;
        while ((end = buffer.search(/\r?\n\r?\n/)) >= 0) {
          const separator = buffer.slice(end).match(/^\r?\n\r?\n/)[0];
          const event = buffer.slice(0, end);
          buffer = buffer.slice(end + separator.length);
          if (keepEvent(event)) res.write(`${event}\n\n`);
        }
      });
      answer.on('end', () => {
        if (buffer.trim() && keepEvent(buffer)) res.write(buffer);
        res.end();
      });
      answer.on('error', () => res.destroy());
    });
    upstream.on('error', (e) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`delegation-harness Gemini CLI adapter relay: ${e.message}`);
    });
    res.on('close', () => upstream.destroy());
    req.pipe(upstream);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      resolve({
        url: `http://127.0.0.1:${port}${upstreamUrl.pathname}${upstreamUrl.search}`,
        close: () => { server.closeAllConnections(); server.close(); },
      });
    });
  });
}

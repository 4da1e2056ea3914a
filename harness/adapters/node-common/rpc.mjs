// JSON-RPC 2.0 framing for host protocol v1: one message per line on stdin/stdout (shared by the Node adapters).
//
// Requests are handled strictly one at a time and answered in order (the
// protocol says the harness waits for each answer). Nothing but protocol
// lines is ever written to the output stream.

export const CODES = Object.freeze({
  PARSE_ERROR: -32700,
  INVALID_REQUEST: -32600,
  METHOD_NOT_FOUND: -32601,
  INVALID_PARAMS: -32602,
  INTERNAL_ERROR: -32603,
  UNSUPPORTED_OPTION: -32001,
  HOST_FAILURE: -32002,
  NOT_INITIALIZED: -32003,
  UNSUPPORTED_VERSION: -32004,
});

/** An error the handler throws to answer with a JSON-RPC error object. */
export class RpcError extends Error {
  constructor(code, message, data) {
    super(message);
    this.code = code;
    this.data = data;
  }
}

/**
 * Reads lines from `input`, calls `handle(method, params)` for each request
 * and writes the answer to `output`. Resolves when the input ends and the
 * last request has been answered.
 */
export function serve({ input, output, handle, log = () => {} }) {
  const write = (message) => output.write(JSON.stringify(message) + '\n');
  let buffer = '';
  let queue = Promise.resolve();

  const processLine = async (line) => {
    if (line.trim() === '') return;
    let request;
    try {
      request = JSON.parse(line);
    } catch (e) {
      write({ jsonrpc: '2.0', id: null, error: { code: CODES.PARSE_ERROR, message: `not JSON: ${e.message}` } });
      return;
    }
    const id = request && Number.isInteger(request.id) ? request.id : null;
    if (!request || typeof request !== 'object' || request.jsonrpc !== '2.0' || typeof request.method !== 'string') {
      write({ jsonrpc: '2.0', id, error: { code: CODES.INVALID_REQUEST, message: 'not a JSON-RPC 2.0 request' } });
      return;
    }
    if (id === null) return; // a notification: the harness sends none, nothing to answer
    try {
      const result = await handle(request.method, request.params);
      write({ jsonrpc: '2.0', id, result });
    } catch (e) {
      const code = e instanceof RpcError ? e.code : CODES.INTERNAL_ERROR;
      const error = { code, message: String(e.message || e) };
      if (e instanceof RpcError && e.data !== undefined) error.data = e.data;
      if (!(e instanceof RpcError)) log('error', `internal error in ${request.method}: ${e.stack || e}`);
      write({ jsonrpc: '2.0', id, error });
    }
  };

  return new Promise((resolve) => {
    input.setEncoding('utf8');
    input.on('data', (chunk) => {
      buffer += chunk;
      let newline;
      while ((newline = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + 1);
        queue = queue.then(() => processLine(line));
      }
    });
    input.on('end', () => {
      if (buffer.trim() !== '') {
        const line = buffer;
        buffer = '';
        queue = queue.then(() => processLine(line));
      }
      queue.then(resolve);
    });
  });
}

/** A `log` notification line. */
export function logNotification(level, message) {
  return JSON.stringify({ jsonrpc: '2.0', method: 'log', params: { level, message } }) + '\n';
}

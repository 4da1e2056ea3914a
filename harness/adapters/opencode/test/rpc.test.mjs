// Tests of the protocol framing: one JSON line per answer, ids echoed, errors coded as PROTOCOL.md says.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { serve, RpcError, CODES } from '../lib/rpc.mjs';

async function exchange(text, handle) {
  const input = new PassThrough();
  const output = new PassThrough();
  let out = '';
  output.setEncoding('utf8');
  output.on('data', (d) => { out += d; });
  const done = serve({ input, output, handle });
  input.end(text);
  await done;
  return out.split('\n').filter(Boolean).map((l) => JSON.parse(l));
}

test('answers each request with its id, in order, one line each', async () => {
  const slow = async (method) => { if (method === 'a') await new Promise((r) => setTimeout(r, 30)); return { outcome: 'ok', detail: method }; };
  const out = await exchange('{"jsonrpc":"2.0","id":1,"method":"a"}\n\n{"jsonrpc":"2.0","id":2,"method":"b"}\n', slow);
  assert.deepEqual(out.map((m) => [m.id, m.result.detail]), [[1, 'a'], [2, 'b']]);
});

test('a line that is not JSON is a parse error with a null id', async () => {
  const out = await exchange('{nope\n', async () => ({}));
  assert.equal(out[0].id, null);
  assert.equal(out[0].error.code, CODES.PARSE_ERROR);
});

test('RpcError becomes a JSON-RPC error with its code; other throws are internal errors', async () => {
  const out = await exchange('{"jsonrpc":"2.0","id":1,"method":"x"}\n{"jsonrpc":"2.0","id":2,"method":"y"}\n', async (m) => {
    if (m === 'x') throw new RpcError(CODES.METHOD_NOT_FOUND, 'no x');
    throw new Error('boom');
  });
  assert.equal(out[0].error.code, -32601);
  assert.equal(out[1].error.code, -32603);
  assert.ok(!('result' in out[0]) && !('result' in out[1]));
});

test('a last line without a newline is still answered at end of input', async () => {
  const out = await exchange('{"jsonrpc":"2.0","id":7,"method":"z"}', async () => ({ outcome: 'ok' }));
  assert.equal(out[0].id, 7);
});

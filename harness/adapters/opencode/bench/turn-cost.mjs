#!/usr/bin/env node
// opencode serve's own CPU time per turn when the adapter waits by polling every 100 ms (as before) and by waiting on opencode's event stream (now), against a model endpoint that answers after a delay.
//
// Usage: node bench/turn-cost.mjs [TURNS=3] [MODEL_DELAY_MS=5000]
// The delay stands for a turn's wall time on a loaded machine (60-120 s at
// load 20-40, where a poll also takes longer); CPU time is read from /proc,
// so the two ways compare at any load. Needs the pinned opencode installed
// (`node adapter.mjs --install`). Prints one JSON line per way.

import { createServer } from 'node:http';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isolatedEnv, opencodeConfig, writeOpencodeFiles, OpencodeServer, seedConfig, ensureOpencode } from '../lib/opencode.mjs';

const turns = Number(process.argv[2] || 3);
const delayMs = Number(process.argv[3] || 5000);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const model = createServer((req, res) => {
  req.resume();
  req.on('end', () => setTimeout(() => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const chunk = (delta, finish) => `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 0, model: 'reference-model', choices: [{ index: 0, delta, finish_reason: finish }], ...(finish ? { usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } } : {}) })}\n\n`;
    res.end(chunk({ role: 'assistant', content: 'hello' }, null) + chunk({}, 'stop') + 'data: [DONE]\n\n');
  }, delayMs));
});
await new Promise((r) => model.listen(0, '127.0.0.1', r));
const endpoint = `http://127.0.0.1:${model.address().port}`;

async function measure(way) {
  const store = mkdtempSync(join(tmpdir(), 'opencode-turn-cost-'));
  const env = isolatedEnv(store, process.env);
  seedConfig(process.env, env);
  const cwd = writeOpencodeFiles(store, env, opencodeConfig({ modelEndpoint: endpoint, subagentDepth: 1, roles: ['worker'] }));
  const server = new OpencodeServer({ ...ensureOpencode(), env, cwd, log: () => {} });
  const cpu = () => {
    const f = readFileSync(`/proc/${server.child.pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(f[11]) + Number(f[12])) * 10;
  };
  try {
    await server.start({ readyTimeoutMs: 180000 });
    const session = (await server.call('POST', '/session', { title: 'bench' }, { timeoutMs: 60000 })).body;
    // The first turn loads opencode's provider plugins (about as much CPU as its start): not counted.
    const perTurn = [];
    let looks = 0;
    for (let n = 0; n <= turns; n++) {
      const before = cpu();
      await server.call('POST', `/session/${session.id}/prompt_async`, { parts: [{ type: 'text', text: `turn ${n}` }] }, { timeoutMs: 60000 });
      for (;;) {
        const seq = server.eventSeq;
        looks++;
        await server.call('GET', '/session/status', undefined, { timeoutMs: 60000 });
        await server.call('GET', '/permission', undefined, { timeoutMs: 60000 });
        const messages = (await server.call('GET', `/session/${session.id}/message`, undefined, { timeoutMs: 60000 })).body;
        const last = messages[messages.length - 1];
        if (messages.length >= 2 * (n + 1) && last.info.role === 'assistant' && last.info.time.completed) break;
        if (way === 'poll') await sleep(100);
        else await server.waitForChange(seq);
      }
      if (n > 0) perTurn.push(cpu() - before);
    }
    return { way, turns, model_delay_ms: delayMs, looks, cpu_ms_per_turn: Math.round(perTurn.reduce((a, b) => a + b, 0) / perTurn.length), load: readFileSync('/proc/loadavg', 'utf8').split(' ')[0] };
  } finally {
    await server.stop();
    rmSync(store, { recursive: true, force: true });
  }
}

for (const way of ['poll', 'events']) console.log(JSON.stringify(await measure(way)));
model.close();

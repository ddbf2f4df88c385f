// A crowd against `pagoda serve` on the default model: 2,000 concurrent streams all complete with
// their token counts (the C++ side probes /health meanwhile, from another process than this busy
// event loop); then 2,000 slow clients (a byte every 10 s, never a whole request) delay neither
// /health nor a completion by more than 100 ms.
// Run by tests/server/crowd_test.cpp: node crowd_test.mjs PORT API_KEY MODEL streams|slow
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { test } from 'node:test';

import { client, model, port } from './openai_client.mjs';

const phase = process.argv[5];

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const agent = new http.Agent({ keepAlive: false });

// One GET /health on a fresh connection; its latency in ms.
function health() {
  return new Promise((resolve, reject) => {
    const t = performance.now();
    http.get({ host: '127.0.0.1', port, path: '/health', agent }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve(performance.now() - t) : reject(new Error(`${res.statusCode}`))));
    }).on('error', reject);
  });
}

const quantile = (xs, q) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * q))];

async function completionMs() {
  const t = performance.now();
  const r = await client.completions.create({ model, prompt: 'In the beginning', max_tokens: 4, temperature: 0 });
  assert.equal(r.usage.completion_tokens, 4);
  return performance.now() - t;
}

test('2,000 concurrent streams complete with their token counts', { skip: phase !== 'streams' }, async () => {
  const N = 2000;
  const maxTokens = 8;
  const one = async (i) => {
    const stream = await client.completions.create({
      model, prompt: `stream ${i}`, max_tokens: maxTokens, ignore_eos: true, stream: true,
      stream_options: { include_usage: true },
    });
    let usage = null;
    let text = '';
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) text += c.text;
    }
    return usage;
  };
  const results = await Promise.allSettled(Array.from({ length: N }, (_, i) => one(i)));
  const failed = results.filter((r) => r.status === 'rejected');
  assert.equal(failed.length, 0, `${failed.length} streams failed, first: ${failed[0]?.reason}`);
  for (const r of results) assert.equal(r.value.completion_tokens, maxTokens);
  console.log(`${N} streams completed with ${maxTokens} tokens each`);
});

test('2,000 slow connections delay neither /health nor a completion by 100 ms', { skip: phase !== 'slow' }, async () => {
  const before = { health: [], completion: [] };
  for (let i = 0; i < 20; ++i) before.health.push(await health());
  for (let i = 0; i < 5; ++i) before.completion.push(await completionMs());

  const sockets = [];
  await Promise.all(Array.from({ length: 2000 }, () => new Promise((resolve, reject) => {
    const s = net.connect({ host: '127.0.0.1', port }, () => { s.write('P'); resolve(); });
    s.on('error', reject);
    sockets.push(s);
  })));
  const drip = setInterval(() => { for (const s of sockets) s.write('O'); }, 10_000);
  await sleep(200);
  const during = { health: [], completion: [] };
  for (let i = 0; i < 20; ++i) during.health.push(await health());
  for (let i = 0; i < 5; ++i) during.completion.push(await completionMs());
  clearInterval(drip);
  for (const s of sockets) s.destroy();

  const med = (xs) => quantile(xs, 0.5);
  console.log(`health ${med(before.health).toFixed(1)} -> ${med(during.health).toFixed(1)} ms, ` +
              `completion ${med(before.completion).toFixed(1)} -> ${med(during.completion).toFixed(1)} ms`);
  assert.ok(med(during.health) - med(before.health) < 100, 'slow clients delayed /health');
  assert.ok(med(during.completion) - med(before.completion) < 100, 'slow clients delayed a completion');
  assert.ok(quantile(during.health, 0.99) < 100 + quantile(before.health, 0.99), 'slow clients delayed /health (p99)');
});

// Load: 200 concurrent streams all finish with the right token counts; then 50 clients that hang up
// mid-stream leave the KV cache exactly as empty as before (through /metrics).
// Run by tests/server/server_test.cpp: node load_test.mjs PORT API_KEY MODEL
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { client, metric, metrics, model } from './openai_client.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitIdle(timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const m = await metrics();
    if (metric(m, 'vllm:num_requests_running') === 0 && metric(m, 'vllm:num_requests_waiting') === 0) return m;
    assert.ok(Date.now() < deadline, `server not idle: ${JSON.stringify(m)}`);
    await sleep(50);
  }
}

test('200 concurrent streams complete with their token counts', async () => {
  const before = await waitIdle(10_000);
  const one = async (i) => {
    const stream = await client.completions.create({
      model, prompt: `request ${i}`, max_tokens: 8, ignore_eos: true, stream: true, stream_options: { include_usage: true },
    });
    let usage = null;
    let finish = null;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) if (c.finish_reason) finish = c.finish_reason;
    }
    return { usage, finish };
  };
  const results = await Promise.all(Array.from({ length: 200 }, (_, i) => one(i)));
  for (const r of results) {
    assert.equal(r.finish, 'length');
    assert.equal(r.usage.completion_tokens, 8);
  }
  const after = await waitIdle(10_000);
  assert.equal(
    metric(after, 'vllm:generation_tokens_total') - metric(before, 'vllm:generation_tokens_total'), 1600);
  assert.equal(
    metric(after, 'vllm:request_success_total', 'finished_reason="length"') -
      metric(before, 'vllm:request_success_total', 'finished_reason="length"'), 200);
  assert.equal(metric(after, 'vllm:kv_cache_usage_perc'), 0);
  assert.equal(metric(after, 'vllm:e2e_request_latency_seconds_count') -
      metric(before, 'vllm:e2e_request_latency_seconds_count'), 200);
});

test('50 clients that disconnect mid-stream free everything', async () => {
  const before = await waitIdle(10_000);
  assert.equal(metric(before, 'vllm:kv_cache_usage_perc'), 0);
  const maxTokens = 3000;
  const one = async (i) => {
    const controller = new AbortController();
    const stream = await client.completions.create(
      { model, prompt: `long ${i}`, max_tokens: maxTokens, ignore_eos: true, stream: true },
      { signal: controller.signal });
    let chunks = 0;
    try {
      for await (const chunk of stream) {
        if (chunk.choices.length && ++chunks === 3) controller.abort();
      }
    } catch (e) {
      if (e.name !== 'AbortError' && !(e.constructor?.name ?? '').includes('Abort')) throw e;
    }
    return chunks;
  };
  const chunks = await Promise.all(Array.from({ length: 50 }, (_, i) => one(i)));
  for (const c of chunks) assert.ok(c >= 3);
  const after = await waitIdle(30_000);
  assert.equal(metric(after, 'vllm:kv_cache_usage_perc'), 0);
  const aborted = metric(after, 'vllm:request_success_total', 'finished_reason="abort"') -
      metric(before, 'vllm:request_success_total', 'finished_reason="abort"');
  assert.equal(aborted, 50);
  const generated = metric(after, 'vllm:generation_tokens_total') - metric(before, 'vllm:generation_tokens_total');
  assert.ok(generated < 50 * maxTokens / 2, `generated ${generated}: the disconnected requests were not aborted`);
});

// /v1/embeddings through the official `openai` npm client, against the independent float64
// reference of tests/fixtures/embeddings/qwen3-tiny-tied.json (tools/embedding_reference.py):
// float and base64 encodings (the client's default asks for base64 and decodes it), `dimensions`,
// strings, lists of strings, token ids and lists of token-id lists, usage.
// Run by tests/server/embeddings_server_test.cpp: node embeddings_test.mjs PORT API_KEY MODEL FIXTURE
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { test } from 'node:test';

import { call, client, model } from './openai_client.mjs';

const fixture = JSON.parse(fs.readFileSync(process.argv[5], 'utf8'));
const cases = fixture.cases;
const MIN_COSINE = 0.99999;
const MAX_ABS_DIFF = 1e-6;  // fp32 rounding is ~1e-7 here

function expectClose(got, want, what) {
  assert.equal(got.length, want.length, `${what}: length`);
  let dot = 0, ng = 0, nw = 0, maxDiff = 0;
  for (let i = 0; i < got.length; ++i) {
    dot += got[i] * want[i];
    ng += got[i] * got[i];
    nw += want[i] * want[i];
    maxDiff = Math.max(maxDiff, Math.abs(got[i] - want[i]));
  }
  const cosine = dot / Math.sqrt(ng * nw);
  assert.ok(cosine >= MIN_COSINE && maxDiff <= MAX_ABS_DIFF,
            `${what}: cosine ${cosine}, max abs diff ${maxDiff}`);
}

const tokens = (c) => c.token_ids.length;

test('float: each input alone matches the reference, with usage', async () => {
  for (const c of cases) {
    const r = await client.embeddings.create({ model, input: c.input, encoding_format: 'float' });
    assert.equal(r.object, 'list');
    assert.equal(r.model, model);
    assert.equal(r.data.length, 1);
    assert.equal(r.data[0].object, 'embedding');
    assert.equal(r.data[0].index, 0);
    assert.ok(Array.isArray(r.data[0].embedding));
    expectClose(r.data[0].embedding, c.embedding, c.name);
    assert.equal(r.usage.prompt_tokens, tokens(c), `${c.name}: prompt_tokens`);
    assert.equal(r.usage.total_tokens, tokens(c), `${c.name}: total_tokens`);
  }
});

test('the client default (base64, decoded by the client) matches the reference', async () => {
  const texts = cases.filter((c) => typeof c.input === 'string');
  const r = await client.embeddings.create({ model, input: texts.map((c) => c.input) });
  assert.equal(r.data.length, texts.length);
  texts.forEach((c, i) => {
    assert.equal(r.data[i].index, i);
    assert.ok(r.data[i].embedding instanceof Float32Array || Array.isArray(r.data[i].embedding));
    expectClose(Array.from(r.data[i].embedding), c.embedding, `${c.name} (base64 default)`);
  });
  assert.equal(r.usage.prompt_tokens, texts.reduce((n, c) => n + tokens(c), 0));
});

test('explicit base64 is little-endian float32 bytes', async () => {
  const ids = cases.filter((c) => Array.isArray(c.input));
  const r = await client.embeddings.create({ model, input: ids.map((c) => c.input), encoding_format: 'base64' });
  ids.forEach((c, i) => {
    const s = r.data[i].embedding;
    assert.equal(typeof s, 'string', 'a base64 string');
    const buf = Buffer.from(s, 'base64');
    assert.equal(buf.length, 4 * c.embedding.length);
    const got = [];
    for (let k = 0; k < buf.length; k += 4) got.push(buf.readFloatLE(k));
    expectClose(got, c.embedding, `${c.name} (base64)`);
  });
});

test('one list of token ids is one input', async () => {
  const c = cases.find((x) => x.name === 'token_ids');
  const r = await client.embeddings.create({ model, input: c.input, encoding_format: 'float' });
  assert.equal(r.data.length, 1);
  expectClose(r.data[0].embedding, c.embedding, 'token ids');
});

test('dimensions: Matryoshka truncation, re-normalised', async () => {
  for (const c of cases) {
    for (const [d, want] of Object.entries(c.dimensions)) {
      const r = await client.embeddings.create({ model, input: c.input, encoding_format: 'float', dimensions: Number(d) });
      assert.equal(r.data[0].embedding.length, Number(d));
      expectClose(r.data[0].embedding, want, `${c.name} dimensions ${d}`);
      const b = await client.embeddings.create({ model, input: c.input, dimensions: Number(d) });
      expectClose(Array.from(b.data[0].embedding), want, `${c.name} dimensions ${d} (base64)`);
    }
  }
});

test('errors come back as OpenAI errors through the client', async () => {
  await assert.rejects(client.embeddings.create({ model, input: [], encoding_format: 'float' }),
                       (e) => e.status === 400 && /empty/.test(e.message));
  await assert.rejects(client.embeddings.create({ model, input: 'x', dimensions: 0 }),
                       (e) => e.status === 400 && /greater than 0/.test(e.message));
  await assert.rejects(client.embeddings.create({ model, input: 'x', dimensions: fixture.hidden_size + 1 }),
                       (e) => e.status === 400 && /dimensions/.test(e.message));
  await assert.rejects(client.embeddings.create({ model: 'nope', input: 'x' }), (e) => e.status === 404);
  await assert.rejects(client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] }),
                       (e) => e.status === 400 && /does not support Chat Completions API/.test(e.message));
  await assert.rejects(client.completions.create({ model, prompt: 'hi' }),
                       (e) => e.status === 400 && /does not support Completions API/.test(e.message));
  const bad = await call('POST', '/v1/embeddings', { model, input: 'x', encoding_format: 'int8' });
  assert.equal(bad.status, 400);
});

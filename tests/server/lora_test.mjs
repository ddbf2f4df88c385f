// LoRA adapters through the official `openai` client: /v1/models lists the base model, then each
// adapter with the base as its parent; each name answers with its own greedy tokens (printed for
// tests/server/lora_server_test.cpp, which holds them to runs of the merged weights); a name that
// is neither is a 404.
// Run as: PAGODA_PROMPT='[ids]' [PAGODA_MAX_TOKENS=N] node lora_test.mjs PORT API_KEY MODEL ADAPTER...
import assert from 'node:assert/strict';

import { client, model, OpenAI } from './openai_client.mjs';

const adapters = process.argv.slice(5);
const prompt = JSON.parse(process.env.PAGODA_PROMPT);
const maxTokens = Number(process.env.PAGODA_MAX_TOKENS ?? 8);

const list = await client.models.list();
assert.deepEqual(list.data.map((m) => m.id), [model, ...adapters]);
for (const m of list.data.slice(1)) assert.equal(m.parent, model);

const tokens = {};
for (const name of [model, ...adapters]) {
  const r = await client.completions.create({
    model: name, prompt, max_tokens: maxTokens, temperature: 0, ignore_eos: true, return_token_ids: true,
  });
  assert.equal(r.choices[0].finish_reason, 'length');
  tokens[name] = r.choices[0].token_ids;
}
// The chat route takes the adapter too (its answer differs from the base model's).
const chat = async (name) => (await client.chat.completions.create({
  model: name, messages: [{ role: 'user', content: 'Hello' }], max_tokens: 6, temperature: 0, ignore_eos: true,
})).choices[0].message.content;
assert.notEqual(await chat(adapters[0]), await chat(model));
await assert.rejects(client.completions.create({ model: 'no-such-adapter', prompt, max_tokens: 1 }),
  (e) => e instanceof OpenAI.NotFoundError);
console.log('TOKENS ' + JSON.stringify(tokens));

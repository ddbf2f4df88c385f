// The API beyond the basics, through the official `openai` npm client: logit_bias, echo, fields that
// are accepted and documented as doing nothing, fields refused by name until structured outputs
// exist, the vLLM side routes; and chat messages (content null with tool calls, text parts)
// rendered exactly as jinja2 renders them for the request-level cases of a template fixture.
// Run by tests/server/api_server_test.cpp:
//   node api_test.mjs PORT API_KEY MODEL api
//   node api_test.mjs PORT API_KEY MODEL render FIXTURE.json
//   node api_test.mjs PORT API_KEY MODEL prefix      (a server with --enable-prompt-tokens-details)
//   node api_test.mjs PORT API_KEY MODEL prefix-chat (the same, of a hybrid model with a chat template)
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { test } from 'node:test';

import { call, client, metrics, model, OpenAI } from './openai_client.mjs';

const [mode, fixture] = process.argv.slice(5);
const greedy = { model, temperature: 0 };

test('logit_bias changes the greedy tokens', { skip: mode !== 'api' }, async () => {
  const plain = await client.completions.create({ ...greedy, prompt: 'Hello there', max_tokens: 3, ignore_eos: true });
  // Id 113 is the byte 'q' in the test tokenizer (ids 0..255 are the bytes).
  assert.notEqual(plain.choices[0].text, 'qqq');
  const biased = await client.completions.create({
    ...greedy, prompt: 'Hello there', max_tokens: 3, ignore_eos: true, logit_bias: { 113: 100 },
  });
  assert.equal(biased.choices[0].text, 'qqq');
  const chat = await client.chat.completions.create({
    ...greedy, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, logit_bias: { 113: 100 },
  });
  assert.equal(chat.choices[0].message.content, 'qq');
  await assert.rejects(
    client.completions.create({ ...greedy, prompt: 'x', max_tokens: 1, logit_bias: { 999999: 1 } }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'logit_bias');
  await assert.rejects(
    client.completions.create({ ...greedy, prompt: 'x', max_tokens: 1, logit_bias: { 5: 101 } }),
    (e) => e instanceof OpenAI.BadRequestError);
});

test('echo puts the prompt before the completion, whole and streamed', { skip: mode !== 'api' }, async () => {
  const plain = await client.completions.create({ ...greedy, prompt: 'Echo me', max_tokens: 4, ignore_eos: true });
  const echoed = await client.completions.create({ ...greedy, prompt: 'Echo me', max_tokens: 4, ignore_eos: true, echo: true });
  assert.equal(echoed.choices[0].text, 'Echo me' + plain.choices[0].text);
  const stream = await client.completions.create({ ...greedy, prompt: 'Echo me', max_tokens: 4, ignore_eos: true, echo: true, stream: true });
  let text = '';
  for await (const chunk of stream) for (const c of chunk.choices) text += c.text;
  assert.equal(text, echoed.choices[0].text);
  await assert.rejects(client.completions.create({ ...greedy, prompt: 'x', suffix: 'y', max_tokens: 1 }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'suffix');
});

test('fields that do nothing are accepted', { skip: mode !== 'api' }, async () => {
  const base = await client.chat.completions.create({ ...greedy, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 });
  const r = await client.chat.completions.create({
    ...greedy, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4,
    user: 'u1', metadata: { k: 'v' }, store: false, service_tier: 'auto', parallel_tool_calls: true,
    reasoning_effort: 'low', response_format: { type: 'text' },
  });
  assert.equal(r.choices[0].message.content, base.choices[0].message.content);
});

test('structured outputs: schema, regex, choice and forced tool calls hold on the default model', { skip: mode !== 'structured' }, async () => {
  // The default model knows no JSON: only the mask makes these outputs valid. Checks are written
  // here from the schema (JSON.parse, RegExp), not by pagoda.
  const messages = [{ role: 'user', content: 'hi' }];
  const schema = {
    type: 'object', additionalProperties: false, required: ['name', 'n', 'tags'],
    properties: { name: { type: 'string', maxLength: 8 }, n: { type: 'integer', minimum: 0, maximum: 9 },
      tags: { type: 'array', items: { enum: ['a', 'b'] }, maxItems: 3 } },
  };
  const parse = (text) => { try { return JSON.parse(text); } catch (e) { assert.fail(`${e.message}: ${JSON.stringify(text)}`); } };
  const checkObj = (o) => {
    assert.deepEqual(Object.keys(o).sort(), ['n', 'name', 'tags']);
    assert.equal(typeof o.name, 'string'); assert.ok([...o.name].length <= 8);
    assert.ok(Number.isInteger(o.n) && o.n >= 0 && o.n <= 9);
    assert.ok(Array.isArray(o.tags) && o.tags.length <= 3 && o.tags.every((t) => t === 'a' || t === 'b'));
  };
  for (const temperature of [0, 1]) {
    const r = await client.chat.completions.create({ messages, max_tokens: 200, temperature, seed: 3,
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema, strict: true } } });
    assert.equal(r.choices[0].finish_reason, 'stop', r.choices[0].message.content);
    checkObj(parse(r.choices[0].message.content));
    const re = await client.completions.create({ prompt: 'x', max_tokens: 20, temperature, seed: 5, guided_regex: '[a-z]{3}-\\d{2}' });
    assert.match(re.choices[0].text, /^[a-z]{3}-\d{2}$/);
    const ch = await client.completions.create({ prompt: 'x', max_tokens: 20, temperature, seed: 7,
      structured_outputs: { choice: ['yes', 'no', 'maybe'] } });
    assert.ok(['yes', 'no', 'maybe'].includes(ch.choices[0].text), ch.choices[0].text);
    // The Responses API's text.format, as chat's response_format.
    const resp = await client.responses.create({ input: 'hi', max_output_tokens: 200, temperature,
      text: { format: { type: 'json_schema', name: 'x', schema, strict: true } } });
    assert.equal(resp.status, 'completed', resp.output_text);
    checkObj(parse(resp.output_text));
    const obj = await client.chat.completions.create({ messages, max_tokens: 60, temperature, seed: 9,
      response_format: { type: 'json_object' } });
    if (obj.choices[0].finish_reason === 'stop') assert.equal(typeof parse(obj.choices[0].message.content), 'object');
  }
  const tools = [{ type: 'function', function: { name: 'get_weather', parameters: {
    type: 'object', required: ['city', 'unit'], additionalProperties: false,
    properties: { city: { type: 'string', maxLength: 10 }, unit: { enum: ['c', 'f'] } } } } }];
  for (const tool_choice of ['required', { type: 'function', function: { name: 'get_weather' } }]) {
    const r = await client.chat.completions.create({ messages, max_tokens: 200, temperature: 0, tools, tool_choice,
      parallel_tool_calls: false });
    const calls = r.choices[0].message.tool_calls;
    assert.equal(calls?.length, 1, JSON.stringify(r.choices[0].message));
    assert.equal(calls[0].function.name, 'get_weather');
    const args = parse(calls[0].function.arguments);
    assert.deepEqual(Object.keys(args).sort(), ['city', 'unit']);
    assert.ok(typeof args.city === 'string' && ['c', 'f'].includes(args.unit));
  }
  // What cannot be enforced is a 400 naming the field and the keyword.
  await assert.rejects(client.chat.completions.create({ messages, max_tokens: 2,
    response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'number', multipleOf: 0.3 } } } }),
  (e) => e instanceof OpenAI.BadRequestError && e.param === 'response_format' && /multipleOf/.test(e.message));
  await assert.rejects(client.completions.create({ prompt: 'x', max_tokens: 2, guided_regex: '(a)\\1' }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'guided_regex' && /backreference/.test(e.message));
});

test('vLLM side routes: /version, /ping, /load', { skip: mode !== 'api' }, async () => {
  const v = await call('GET', '/version');
  assert.equal(v.status, 200);
  assert.match(v.json().version, /^\d+\.\d+\.\d+$/);
  assert.equal((await call('GET', '/ping')).status, 200);
  const load = await call('GET', '/load');
  assert.equal(load.status, 200);
  assert.equal(load.json().server_load, 0);
  const models = await client.models.list();
  assert.ok(models.data[0].max_model_len > 0);
});

test('request messages render as jinja2 renders them', { skip: mode !== 'render' }, async () => {
  const cases = JSON.parse(fs.readFileSync(fixture, 'utf8')).filter((c) => c.request);
  assert.ok(cases.length >= 3, `${fixture} has no request-level cases`);
  for (const c of cases) {
    const tok = await call('POST', '/tokenize', { model, ...c.request });
    assert.equal(tok.status, 200, `${c.name}: ${tok.text}`);
    const detok = await call('POST', '/detokenize', { model, tokens: tok.json().tokens });
    assert.equal(detok.json().prompt, c.render, c.name);
  }
});

test('prefix caching: cached_tokens in usage, cache_salt, the counters', { skip: mode !== 'prefix' }, async () => {
  // Long enough for several 16-token blocks; new text each run of the test, so the first is a miss.
  const prompt = `Run ${Date.now()}: ` + 'the quick brown fox jumps over the lazy dog. '.repeat(12);
  const req = { ...greedy, prompt, max_tokens: 2, ignore_eos: true };
  const before = await metrics();
  const first = await client.completions.create(req);
  assert.equal(first.usage.prompt_tokens_details.cached_tokens, 0);
  const n = first.usage.prompt_tokens;
  const again = await client.completions.create(req);
  // Every full block but the one holding the last prompt token (that one is always computed).
  assert.equal(again.usage.prompt_tokens_details.cached_tokens, Math.floor((n - 1) / 16) * 16);
  assert.equal(again.choices[0].text, first.choices[0].text);

  const stream = await client.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
  let usage = null;
  for await (const chunk of stream) if (chunk.usage) usage = chunk.usage;
  assert.equal(usage.prompt_tokens_details.cached_tokens, Math.floor((n - 1) / 16) * 16);

  // A salt is a pool of its own: nothing shared with unsalted requests or other salts.
  const salted = await client.completions.create({ ...req, cache_salt: 'tenant-a' });
  assert.equal(salted.usage.prompt_tokens_details.cached_tokens, 0);
  const salted2 = await client.completions.create({ ...req, cache_salt: 'tenant-b' });
  assert.equal(salted2.usage.prompt_tokens_details.cached_tokens, 0);
  const salted3 = await client.completions.create({ ...req, cache_salt: 'tenant-a' });
  assert.ok(salted3.usage.prompt_tokens_details.cached_tokens > 0);
  assert.equal(salted3.choices[0].text, first.choices[0].text);
  await assert.rejects(client.completions.create({ ...req, cache_salt: '' }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'cache_salt');

  const messages = [{ role: 'system', content: prompt }, { role: 'user', content: 'hi' }];
  const c1 = await client.chat.completions.create({ ...greedy, messages, max_tokens: 2 });
  const c2 = await client.chat.completions.create({ ...greedy, messages, max_tokens: 2 });
  assert.ok(c2.usage.prompt_tokens_details.cached_tokens >= c1.usage.prompt_tokens - 16);

  const after = await metrics();
  const key = (name) => Object.keys(after).find((k) => k.startsWith(`vllm:${name}{`));
  const queries = after[key('prefix_cache_queries_total')] - (before[key('prefix_cache_queries_total')] ?? 0);
  const hits = after[key('prefix_cache_hits_total')] - (before[key('prefix_cache_hits_total')] ?? 0);
  assert.ok(queries >= 7 * n, `queries ${queries}`);
  assert.ok(hits >= 3 * Math.floor((n - 1) / 16) * 16, `hits ${hits}`);
  assert.ok(hits < queries);
  assert.ok(Object.keys(after).some((k) => k.startsWith('vllm:cache_config_info{') && k.includes('enable_prefix_caching="True"')));
});

test('hybrid prefix caching: a shared system prompt hits from the second chat request', { skip: mode !== 'prefix-chat' }, async () => {
  const system = `Session ${Date.now()}. ` + 'You answer in the words of the King James Bible, briefly and plainly. '.repeat(6);
  const ask = (q) => client.chat.completions.create({
    ...greedy, max_tokens: 2, messages: [{ role: 'system', content: system }, { role: 'user', content: q }],
  });
  const a = await ask('Who made the heaven and the earth?');
  assert.equal(a.usage.prompt_tokens_details.cached_tokens, 0);
  const b = await ask('What is the first day?');
  // The system prompt's full blocks (the chat route told the engine where it ends).
  assert.ok(b.usage.prompt_tokens_details.cached_tokens >= 48, JSON.stringify(b.usage));
  assert.ok(b.usage.prompt_tokens_details.cached_tokens < b.usage.prompt_tokens);
  // The next turn of the same conversation resumes after the previous turn's prompt.
  const turn2 = await client.chat.completions.create({
    ...greedy, max_tokens: 2, messages: [{ role: 'system', content: system },
      { role: 'user', content: 'What is the first day?' }, { role: 'assistant', content: b.choices[0].message.content },
      { role: 'user', content: 'And the second?' }],
  });
  assert.ok(turn2.usage.prompt_tokens_details.cached_tokens >= b.usage.prompt_tokens_details.cached_tokens, JSON.stringify(turn2.usage));
});

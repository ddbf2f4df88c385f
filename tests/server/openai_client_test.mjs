// The server through the official `openai` npm client: completions and chat, whole and streamed,
// n > 1, stop strings and stop tokens, logprobs, tools, reasoning, usage. The model has random
// weights, so the checks are on structure, counts and finish reasons; greedy decoding makes runs
// repeatable, so a stop string is picked from an earlier greedy output.
// Run by tests/server/server_test.cpp: node openai_client_test.mjs PORT API_KEY MODEL
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { call, client, model, OpenAI } from './openai_client.mjs';

const greedy = { model, temperature: 0, ignore_eos: true };

async function collectCompletionStream(params) {
  const stream = await client.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  const texts = {};
  const finish = {};
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      texts[c.index] = (texts[c.index] ?? '') + c.text;
      if (c.finish_reason) finish[c.index] = c.finish_reason;
    }
  }
  return { texts, finish, usage };
}

test('models lists the served name', async () => {
  const list = await client.models.list();
  assert.equal(list.data[0].id, model);
  assert.equal(list.data[0].object, 'model');
});

test('completion: length, usage, and streaming gives the same greedy text', async () => {
  const r = await client.completions.create({ ...greedy, prompt: 'Hello there', max_tokens: 7 });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 7);
  const tok = (await call('POST', '/tokenize', { prompt: 'Hello there' })).json();
  assert.equal(r.usage.prompt_tokens, tok.count);
  assert.equal(r.usage.total_tokens, tok.count + 7);

  const s = await collectCompletionStream({ ...greedy, prompt: 'Hello there', max_tokens: 7 });
  assert.equal(s.texts[0], r.choices[0].text);
  assert.equal(s.finish[0], 'length');
  assert.equal(s.usage.completion_tokens, 7);
  assert.equal(s.usage.prompt_tokens, tok.count);
});

test('completion: token-id prompts and batches of prompts', async () => {
  const r = await client.completions.create({ ...greedy, prompt: [[104, 105], [106, 107, 108]], max_tokens: 3 });
  assert.equal(r.choices.length, 2);
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1]);
  assert.equal(r.usage.prompt_tokens, 5);
  assert.equal(r.usage.completion_tokens, 6);
});

test('completion: n > 1, whole and streamed', async () => {
  const r = await client.completions.create({ model, prompt: 'abc', n: 3, max_tokens: 4, seed: 7, ignore_eos: true });
  assert.equal(r.choices.length, 3);
  assert.deepEqual(r.choices.map((c) => c.index).sort(), [0, 1, 2]);
  for (const c of r.choices) assert.equal(c.finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 12);
  // Seeded: the same request gives the same choices.
  const again = await client.completions.create({ model, prompt: 'abc', n: 3, max_tokens: 4, seed: 7, ignore_eos: true });
  assert.deepEqual(again.choices.map((c) => c.text), r.choices.map((c) => c.text));

  const s = await collectCompletionStream({ model, prompt: 'abc', n: 2, max_tokens: 5, ignore_eos: true });
  assert.deepEqual(Object.keys(s.finish).sort(), ['0', '1']);
  assert.equal(s.finish[0], 'length');
  assert.equal(s.finish[1], 'length');
  assert.equal(s.usage.completion_tokens, 10);
});

test('completion: stop strings end the text before them', async () => {
  const base = await client.completions.create({ ...greedy, prompt: 'The quick brown fox', max_tokens: 40 });
  const text = base.choices[0].text;
  // A two-character stop string whose first occurrence is at k >= 2.
  let k = -1;
  for (let i = 2; i + 2 <= text.length; ++i) {
    const s = text.slice(i, i + 2);
    if (!s.includes('\uFFFD') && text.indexOf(s) === i) { k = i; break; }
  }
  assert.ok(k > 0, `no usable stop string in ${JSON.stringify(text)}`);
  const stop = text.slice(k, k + 2);
  for (const stopParam of [stop, ['\u0000never', stop]]) {
    const r = await client.completions.create({ ...greedy, prompt: 'The quick brown fox', max_tokens: 40, stop: stopParam });
    assert.equal(r.choices[0].text, text.slice(0, k));
    assert.equal(r.choices[0].finish_reason, 'stop');
    assert.equal(r.choices[0].stop_reason, stop);
  }
  const s = await collectCompletionStream({ ...greedy, prompt: 'The quick brown fox', max_tokens: 40, stop });
  assert.equal(s.texts[0], text.slice(0, k));
  assert.equal(s.finish[0], 'stop');
});

test('completion: stop_token_ids', async () => {
  const all = Array.from({ length: 512 }, (_, i) => i);
  const r = await client.completions.create({ model, prompt: 'x', max_tokens: 10, stop_token_ids: all });
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.equal(r.usage.completion_tokens, 1);
  assert.equal(typeof r.choices[0].stop_reason, 'number');
});

test('completion: logprobs', async () => {
  const r = await client.completions.create({ ...greedy, prompt: 'Hi', max_tokens: 4, logprobs: 2 });
  const lp = r.choices[0].logprobs;
  assert.equal(lp.tokens.length, 4);
  assert.equal(lp.token_logprobs.length, 4);
  assert.equal(lp.top_logprobs.length, 4);
  assert.equal(lp.text_offset.length, 4);
  for (let i = 0; i < 4; ++i) {
    assert.ok(lp.token_logprobs[i] <= 0);
    const top = Object.values(lp.top_logprobs[i]);
    assert.ok(top.length >= 1 && top.length <= 2);
    // Greedy: the chosen token is the most likely one.
    assert.ok(Math.abs(lp.token_logprobs[i] - Math.max(...top)) < 1e-4);
  }
});

test('chat: whole and streamed, usage matches /tokenize', async () => {
  const messages = [{ role: 'system', content: 'You are brief.' }, { role: 'user', content: 'Say hi.' }];
  const r = await client.chat.completions.create({ ...greedy, messages, max_tokens: 6 });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 6);
  const tok = (await call('POST', '/tokenize', { messages, add_generation_prompt: true })).json();
  assert.equal(r.usage.prompt_tokens, tok.count);

  const stream = await client.chat.completions.create({
    ...greedy, messages, max_tokens: 6, stream: true, stream_options: { include_usage: true },
  });
  let first = true;
  let content = '';
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (first) { assert.equal(c.delta.role, 'assistant'); first = false; }
      content += c.delta.content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(content, r.choices[0].message.content ?? '');
  assert.equal(finish, 'length');
  assert.equal(usage.completion_tokens, 6);
  assert.equal(usage.prompt_tokens, tok.count);
});

test('chat: n > 1 and logprobs', async () => {
  const r = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'x' }], n: 2, max_tokens: 3, ignore_eos: true, logprobs: true, top_logprobs: 3,
  });
  assert.equal(r.choices.length, 2);
  for (const c of r.choices) {
    assert.equal(c.logprobs.content.length, 3);
    for (const e of c.logprobs.content) {
      assert.equal(typeof e.token, 'string');
      assert.ok(e.logprob <= 0);
      assert.ok(Array.isArray(e.bytes));
      assert.equal(e.top_logprobs.length, 3);
    }
  }
  assert.equal(r.usage.completion_tokens, 6);
});

test('chat: tools reach the template; tool calls structure', async () => {
  const messages = [{ role: 'user', content: 'Weather in Paris?' }];
  const tools = [{
    type: 'function',
    function: { name: 'get_weather', description: 'Weather for a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
  }];
  const plain = (await call('POST', '/tokenize', { messages })).json();
  const withTools = (await call('POST', '/tokenize', { messages, tools, return_token_strs: true })).json();
  assert.ok(withTools.count > plain.count + 20);
  const rendered = (await call('POST', '/detokenize', { tokens: withTools.tokens })).json().prompt;
  assert.ok(rendered.includes('"name": "get_weather"'), rendered);
  assert.ok(rendered.includes('<tools>'), rendered);
  const r = await client.chat.completions.create({ ...greedy, messages, tools, max_tokens: 5 });
  assert.equal(r.usage.prompt_tokens, withTools.count);
  assert.ok(['length', 'stop', 'tool_calls'].includes(r.choices[0].finish_reason));

  // A previous assistant tool call and its result render through the template too.
  const history = [
    ...messages,
    { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: '{"temp": 21}' },
  ];
  const t = (await call('POST', '/tokenize', { messages: history, tools })).json();
  const text = (await call('POST', '/detokenize', { tokens: t.tokens })).json().prompt;
  assert.ok(text.includes('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'), text);
  assert.ok(text.includes('<tool_response>\n{"temp": 21}\n</tool_response>'), text);
  const r2 = await client.chat.completions.create({ ...greedy, messages: history, tools, max_tokens: 3 });
  assert.equal(r2.usage.prompt_tokens, t.count);
});

test('chat: chat_template_kwargs and reasoning', async () => {
  const messages = [{ role: 'user', content: 'Think.' }];
  const on = (await call('POST', '/tokenize', { messages })).json();
  const off = (await call('POST', '/tokenize', { messages, chat_template_kwargs: { enable_thinking: false } })).json();
  const offText = (await call('POST', '/detokenize', { tokens: off.tokens })).json().prompt;
  assert.ok(offText.endsWith('<|im_start|>assistant\n<think>\n\n</think>\n\n'), offText);
  assert.ok(off.count > on.count);

  // The prompt opens <think> (continue_final_message): the output is reasoning until </think>.
  const prefill = [...messages, { role: 'assistant', content: '<think>\nhmm' }];
  const r = await client.chat.completions.create({
    ...greedy, messages: prefill, add_generation_prompt: false, continue_final_message: true, max_tokens: 6,
  });
  const msg = r.choices[0].message;
  assert.equal(typeof msg.reasoning, 'string');
  assert.ok(msg.reasoning.length > 0);
  assert.equal(msg.reasoning_content, msg.reasoning);  // the older name, kept for older clients
  // Streamed: every reasoning delta carries both names, and together they make the same text.
  const stream = await client.chat.completions.create({
    ...greedy, messages: prefill, add_generation_prompt: false, continue_final_message: true, max_tokens: 6, stream: true,
  });
  let streamed = '';
  for await (const chunk of stream) {
    const delta = chunk.choices[0]?.delta ?? {};
    if (delta.reasoning !== undefined) {
      assert.equal(delta.reasoning_content, delta.reasoning);
      streamed += delta.reasoning;
    }
  }
  assert.equal(streamed, msg.reasoning);
});

test('bad requests come back as OpenAI errors', async () => {
  await assert.rejects(
    client.completions.create({ model, prompt: 'x', temperature: -3 }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.error?.param === 'temperature',
  );
  await assert.rejects(
    client.chat.completions.create({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }),
    (e) => e instanceof OpenAI.NotFoundError && e.status === 404,
  );
  const bad = new OpenAI({ baseURL: client.baseURL, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(bad.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
});

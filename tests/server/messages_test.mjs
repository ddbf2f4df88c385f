// POST /v1/messages through the official `@anthropic-ai/sdk` npm client: messages.create,
// messages.stream (its text events and finalMessage), tools (a forced tool_use, then a tool_result
// turn), count_tokens, the key as x-api-key and as a bearer token, and errors in Anthropic's shape.
// The references are the server's chat route and JSON schemas written here, never the Messages
// route's own output: greedy text must equal the greedy chat completion of the same conversation in
// chat form, and the token counts its usage.
// Run by tests/server/messages_server_test.cpp: node messages_test.mjs PORT API_KEY MODEL
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { apiKey, baseURL, client as openai, model } from './openai_client.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const entry = path.join(root, 'tests/data/node/node_modules/@anthropic-ai/sdk/index.mjs');
const { default: Anthropic } = await import(pathToFileURL(entry).href);

const anthropic = new Anthropic({ baseURL, apiKey, maxRetries: 0, timeout: 120_000 });
// ignore_eos (vLLM's extension, taken here too) makes every greedy answer run to max_tokens, so
// the two routes are compared over the same number of tokens.
const greedy = { model, temperature: 0, ignore_eos: true };

async function chatReference(messages, maxTokens, extra = {}) {
  const r = await openai.chat.completions.create({ ...greedy, messages, max_tokens: maxTokens, ...extra });
  const m = r.choices[0].message;
  return { content: m.content ?? '', reasoning: m.reasoning_content ?? '', usage: r.usage, choice: r.choices[0] };
}

const textOf = (msg) => msg.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
const thinkingOf = (msg) => msg.content.filter((b) => b.type === 'thinking').map((b) => b.thinking).join('');

function checkShape(msg) {
  assert.match(msg.id, /^msg_[0-9a-f]{32}$/);
  assert.equal(msg.type, 'message');
  assert.equal(msg.role, 'assistant');
  assert.equal(msg.model, model);
  assert.ok(Array.isArray(msg.content));
  for (const b of msg.content) assert.ok(['text', 'thinking', 'tool_use'].includes(b.type), JSON.stringify(b));
  assert.equal(typeof msg.usage.input_tokens, 'number');
  assert.equal(typeof msg.usage.output_tokens, 'number');
}

test('messages.create: system and user turns; greedy output equals the chat completion', async () => {
  const msg = await anthropic.messages.create({
    ...greedy, max_tokens: 8, system: 'Answer briefly.', messages: [{ role: 'user', content: 'Say hi.' }],
  });
  checkShape(msg);
  const ref = await chatReference([{ role: 'system', content: 'Answer briefly.' }, { role: 'user', content: 'Say hi.' }], 8);
  assert.equal(textOf(msg), ref.content);
  assert.equal(thinkingOf(msg), ref.reasoning);
  assert.equal(msg.stop_reason, 'max_tokens');
  assert.equal(msg.stop_sequence, null);
  assert.equal(msg.usage.input_tokens, ref.usage.prompt_tokens);
  assert.equal(msg.usage.output_tokens, 8);

  // Text blocks (system and user) are the same prompt as the strings.
  const blocks = await anthropic.messages.create({
    ...greedy, max_tokens: 8, system: [{ type: 'text', text: 'Answer briefly.' }],
    messages: [{ role: 'user', content: [{ type: 'text', text: 'Say hi.' }] }],
  });
  assert.equal(textOf(blocks), ref.content);
  assert.equal(blocks.usage.input_tokens, ref.usage.prompt_tokens);
});

test('messages.create: stop_sequences end the answer with stop_reason stop_sequence', async () => {
  const messages = [{ role: 'user', content: 'Tell me about the sea.' }];
  const free = await chatReference(messages, 24);
  // A piece from the middle of the free answer: the answer stops right before it.
  const text = free.content;
  assert.ok(text.length > 8, `the greedy answer is too short to cut: ${JSON.stringify(text)}`);
  const stop = text.slice(5, 8);
  const msg = await anthropic.messages.create({ ...greedy, max_tokens: 24, messages, stop_sequences: [stop] });
  assert.equal(msg.stop_reason, 'stop_sequence');
  assert.equal(msg.stop_sequence, stop);
  assert.equal(textOf(msg), text.slice(0, text.indexOf(stop)));
  const ref = await chatReference(messages, 24, { stop: [stop] });
  assert.equal(ref.choice.finish_reason, 'stop');
  assert.equal(msg.usage.output_tokens, ref.usage.completion_tokens);
});

test('messages.stream: text events and finalMessage equal messages.create', async () => {
  const params = { ...greedy, max_tokens: 10, messages: [{ role: 'user', content: 'Say hi.' }] };
  const whole = await anthropic.messages.create(params);
  const stream = anthropic.messages.stream(params);
  let texts = '';
  stream.on('text', (delta) => { texts += delta; });
  const types = [];
  for await (const event of stream) if (event.type !== 'ping') types.push(event.type);
  const final = await stream.finalMessage();
  checkShape(final);
  assert.equal(texts, textOf(whole));
  assert.deepEqual(final.content, whole.content);
  assert.equal(final.stop_reason, 'max_tokens');
  assert.deepEqual(final.usage, whole.usage);
  // Anthropic's order: message_start, each block's start / deltas / stop, message_delta, message_stop.
  assert.equal(types[0], 'message_start');
  assert.deepEqual(types.slice(-2), ['message_delta', 'message_stop']);
  const blockEvents = types.slice(1, -2);
  assert.equal(blockEvents[0], 'content_block_start');
  assert.equal(blockEvents.at(-1), 'content_block_stop');
  assert.equal(blockEvents.filter((t) => t === 'content_block_start').length, whole.content.length, types.join(','));
  assert.equal(blockEvents.filter((t) => t === 'content_block_stop').length, whole.content.length, types.join(','));
  assert.ok(blockEvents.every((t) => t.startsWith('content_block_')), types.join(','));
});

const weatherTool = {
  name: 'get_weather', description: 'Weather for a city',
  input_schema: { type: 'object', required: ['city'], additionalProperties: false,
    properties: { city: { type: 'string', maxLength: 8 } } },
};
const timeTool = { name: 'get_time', input_schema: { type: 'object', properties: {} } };

// Checked from the schema above, not by pagoda.
function checkWeatherUse(block) {
  assert.equal(block.type, 'tool_use');
  assert.equal(block.name, 'get_weather');
  assert.match(block.id, /^toolu_/);
  assert.deepEqual(Object.keys(block.input), ['city']);
  assert.ok(typeof block.input.city === 'string' && [...block.input.city].length <= 8, JSON.stringify(block.input));
}

test('tools: tool_choice {type: tool} gives a tool_use block; the tool_result turn renders like chat', async () => {
  const tools = [weatherTool, timeTool];
  const question = { role: 'user', content: 'Weather in Paris?' };
  const forced = { model, temperature: 0, max_tokens: 120, tools, tool_choice: { type: 'tool', name: 'get_weather' },
    messages: [question] };
  const msg = await anthropic.messages.create(forced);
  checkShape(msg);
  const uses = msg.content.filter((b) => b.type === 'tool_use');
  assert.ok(uses.length >= 1, JSON.stringify(msg.content));
  uses.forEach(checkWeatherUse);
  assert.equal(msg.stop_reason, 'tool_use');

  // Streamed: the input arrives as input_json_delta, and finalMessage parses it.
  const stream = anthropic.messages.stream(forced);
  const final = await stream.finalMessage();
  const withoutIds = (content) => content.map(({ id, ...rest }) => rest);  // ids are new each time
  assert.deepEqual(withoutIds(final.content), withoutIds(msg.content));
  final.content.filter((b) => b.type === 'tool_use').forEach(checkWeatherUse);
  assert.equal(final.stop_reason, 'tool_use');

  // The call and its result sent back: the prompt is the chat form of the same conversation.
  const use = uses[0];
  const history = [question, { role: 'assistant', content: [use] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '21 degrees' }] }];
  const next = await anthropic.messages.create({ ...greedy, max_tokens: 6, tools, messages: history });
  checkShape(next);
  const chatTools = tools.map((t) => ({ type: 'function',
    function: { name: t.name, ...(t.description ? { description: t.description } : {}), parameters: t.input_schema } }));
  const ref = await chatReference([
    { role: 'user', content: 'Weather in Paris?' },
    { role: 'assistant', content: null, tool_calls: [{ id: use.id, type: 'function',
      function: { name: 'get_weather', arguments: JSON.stringify(use.input) } }] },
    { role: 'tool', tool_call_id: use.id, content: '21 degrees' }], 6, { tools: chatTools });
  assert.equal(next.usage.input_tokens, ref.usage.prompt_tokens);
  assert.equal(textOf(next), ref.content);

  // tool_choice any: a call of one of the tools.
  const any = await anthropic.messages.create({ ...forced, tool_choice: { type: 'any' } });
  const anyUses = any.content.filter((b) => b.type === 'tool_use');
  assert.ok(anyUses.length >= 1, JSON.stringify(any.content));
  for (const b of anyUses) {
    assert.ok(['get_weather', 'get_time'].includes(b.name), b.name);
    if (b.name === 'get_weather') checkWeatherUse(b);
  }
});

test('messages.countTokens: the prompt tokens of the chat form', async () => {
  const messages = [{ role: 'user', content: 'Count me.' }];
  const n = await anthropic.messages.countTokens({ model, system: 'Be exact.', messages });
  const ref = await chatReference([{ role: 'system', content: 'Be exact.' }, ...messages], 1);
  assert.equal(n.input_tokens, ref.usage.prompt_tokens);
});

test('auth: x-api-key and bearer tokens are taken, a wrong key is authentication_error', async () => {
  const body = JSON.stringify({ model, max_tokens: 1, messages: [{ role: 'user', content: 'x' }] });
  const post = (headers) => fetch(`${baseURL}/v1/messages`, {
    method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  assert.equal((await post({ 'x-api-key': apiKey })).status, 200);
  assert.equal((await post({ authorization: `Bearer ${apiKey}` })).status, 200);
  const bad = await post({ 'x-api-key': `${apiKey}-wrong` });
  assert.equal(bad.status, 401);
  assert.deepEqual(Object.keys(await bad.json()), ['type', 'error']);
  await assert.rejects(
    new Anthropic({ baseURL, apiKey: 'wrong', maxRetries: 0 }).messages.create({ model, max_tokens: 1,
      messages: [{ role: 'user', content: 'x' }] }),
    (e) => e instanceof Anthropic.AuthenticationError && e.error?.type === 'error' &&
      e.error?.error?.type === 'authentication_error');
});

test('errors: Anthropic error objects with the right status', async () => {
  const isInvalid = (re) => (e) => e instanceof Anthropic.BadRequestError && e.status === 400 &&
    e.error?.type === 'error' && e.error?.error?.type === 'invalid_request_error' && re.test(e.error.error.message);
  // max_tokens is required.
  await assert.rejects(anthropic.messages.create({ model, messages: [{ role: 'user', content: 'x' }] }),
    isInvalid(/max_tokens/));
  // Images are refused: text only.
  await assert.rejects(anthropic.messages.create({ model, max_tokens: 1, messages: [{ role: 'user', content: [
    { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } }] }] }),
  isInvalid(/image/));
  // A forced tool that is not among the tools.
  await assert.rejects(anthropic.messages.create({ model, max_tokens: 1, tools: [timeTool],
    tool_choice: { type: 'tool', name: 'nope' }, messages: [{ role: 'user', content: 'x' }] }), isInvalid(/nope/));
  // An unknown model is not_found_error (404).
  await assert.rejects(anthropic.messages.create({ model: 'no-such-model', max_tokens: 1,
    messages: [{ role: 'user', content: 'x' }] }),
  (e) => e instanceof Anthropic.NotFoundError && e.error?.error?.type === 'not_found_error');
  // A prompt beyond the context.
  await assert.rejects(anthropic.messages.create({ model, max_tokens: 1,
    messages: [{ role: 'user', content: 'word '.repeat(5000) }] }), isInvalid(/./));
});

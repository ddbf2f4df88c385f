// POST /v1/responses through the official `openai` npm client: responses.create and
// responses.stream. The model has random weights, so the references are the server's other route
// and its tokenizer: greedy output of the Responses API must equal the greedy chat completion of
// the same messages, and the input token count the /tokenize count of those messages through the
// chat template.
// Run by tests/server/server_test.cpp: node responses_test.mjs PORT API_KEY MODEL
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { baseURL, apiKey, call, client, model, OpenAI } from './openai_client.mjs';

const greedy = { model, temperature: 0, ignore_eos: true };
// With these, a response's message parts carry each token's logprob: they pin the prompt (a prompt
// that differs by one token gives other values even where the greedy text is the same).
const withLogprobs = { include: ['message.output_text.logprobs'], top_logprobs: 1 };

// The chat completion (greedy) of `messages`, split as the Responses items split it.
async function chatReference(messages, maxTokens, extra = {}) {
  const r = await client.chat.completions.create({
    ...greedy, messages, max_tokens: maxTokens, logprobs: true, top_logprobs: 1, ...extra,
  });
  const m = r.choices[0].message;
  return {
    content: m.content ?? '', reasoning: m.reasoning_content ?? '', usage: r.usage, finish: r.choices[0].finish_reason,
    logprobs: r.choices[0].logprobs.content,
  };
}

// The response's output equals the chat completion's: text, reasoning and, when the output is all
// message text (the fixture's greedy outputs for these prompts are), every token's logprob.
function assertSameOutput(r, ref) {
  assert.equal(messageText(r), ref.content);
  assert.equal(reasoningText(r), ref.reasoning);
  assert.equal(ref.reasoning, '', 'pick a prompt whose greedy output has no <think>: logprobs go with message text');
  const lps = itemsOfType(r, 'message').flatMap((m) => m.content.flatMap((c) => c.logprobs));
  assert.equal(lps.length, ref.logprobs.length);
  lps.forEach((lp, i) => {
    assert.equal(lp.token, ref.logprobs[i].token);
    assert.ok(Math.abs(lp.logprob - ref.logprobs[i].logprob) < 1e-6, `token ${i}: ${lp.logprob} vs ${ref.logprobs[i].logprob}`);
  });
}

function itemsOfType(response, type) {
  return response.output.filter((item) => item.type === type);
}

function messageText(response) {
  return itemsOfType(response, 'message').map((m) => m.content.map((c) => c.text).join('')).join('');
}

function reasoningText(response) {
  return itemsOfType(response, 'reasoning').map((r) => (r.content ?? []).map((c) => c.text).join('')).join('');
}

function checkResponseShape(r, maxTokens) {
  assert.equal(r.object, 'response');
  assert.match(r.id, /^resp_[0-9a-f]{32}$/);
  assert.equal(typeof r.created_at, 'number');
  assert.equal(r.model, model);
  assert.equal(r.max_output_tokens, maxTokens);
  assert.equal(r.store, false);
  assert.equal(r.error, null);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
  assert.equal(r.usage.input_tokens_details.cached_tokens, 0);
  assert.equal(typeof r.usage.output_tokens_details.reasoning_tokens, 'number');
  for (const item of r.output) {
    assert.ok(['reasoning', 'message', 'function_call'].includes(item.type), JSON.stringify(item));
    if (item.type === 'message') {
      assert.match(item.id, /^msg_/);
      assert.equal(item.role, 'assistant');
      for (const part of item.content) {
        assert.equal(part.type, 'output_text');
        assert.deepEqual(part.annotations, []);
      }
    }
  }
}

test('responses.create: text input is one user message; greedy output equals the chat completion', async () => {
  const r = await client.responses.create({ ...greedy, ...withLogprobs, input: 'Say hi.', max_output_tokens: 6 });
  checkResponseShape(r, 6);
  assert.equal(r.status, 'incomplete');
  assert.deepEqual(r.incomplete_details, { reason: 'max_output_tokens' });
  assert.equal(r.temperature, 0);
  assert.equal(r.usage.output_tokens, 6);
  const messages = [{ role: 'user', content: 'Say hi.' }];
  const tok = (await call('POST', '/tokenize', { messages })).json();
  assert.equal(r.usage.input_tokens, tok.count);
  const ref = await chatReference(messages, 6);
  assert.equal(ref.finish, 'length');
  assertSameOutput(r, ref);
  assert.equal(r.output_text, ref.content);  // the client's own concatenation of the message items
});

test('responses.create: message list with instructions renders like the chat messages', async () => {
  const input = [
    { role: 'user', content: [{ type: 'input_text', text: 'Name a colour.' }, { type: 'input_text', text: 'One word.' }] },
    { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Blue.', annotations: [] }] },
    { role: 'user', content: 'Another.' },
  ];
  const r = await client.responses.create({
    ...greedy, ...withLogprobs, instructions: 'You are brief.', input, max_output_tokens: 5,
  });
  checkResponseShape(r, 5);
  assert.equal(r.instructions, 'You are brief.');
  const messages = [
    { role: 'system', content: 'You are brief.' },
    { role: 'user', content: 'Name a colour.\nOne word.' },
    { role: 'assistant', content: 'Blue.' },
    { role: 'user', content: 'Another.' },
  ];
  const tok = (await call('POST', '/tokenize', { messages })).json();
  assert.equal(r.usage.input_tokens, tok.count);
  assertSameOutput(r, await chatReference(messages, 5));
});

test('responses.create: a function tool conversation renders like its chat form', async () => {
  const parameters = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] };
  const tools = [{ type: 'function', name: 'get_weather', description: 'Weather for a city', parameters }];
  const input = [
    { role: 'user', content: 'Weather in Paris?' },
    { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city": "Paris"}' },
    { type: 'function_call_output', call_id: 'call_1', output: '{"temp": 21}' },
  ];
  const r = await client.responses.create({ ...greedy, ...withLogprobs, input, tools, max_output_tokens: 4 });
  checkResponseShape(r, 4);
  assert.deepEqual(r.tools, tools);
  assert.equal(r.tool_choice, 'auto');
  const chatTools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather for a city', parameters } }];
  const messages = [
    { role: 'user', content: 'Weather in Paris?' },
    { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }] },
    { role: 'tool', content: '{"temp": 21}', tool_call_id: 'call_1' },
  ];
  const tok = (await call('POST', '/tokenize', { messages, tools: chatTools, return_token_strs: true })).json();
  assert.equal(r.usage.input_tokens, tok.count);
  // The template saw the tool, the call and its result.
  const rendered = (await call('POST', '/detokenize', { tokens: tok.tokens })).json().prompt;
  assert.ok(rendered.includes('"name": "get_weather"'), rendered);
  assert.ok(rendered.includes('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'), rendered);
  assert.ok(rendered.includes('<tool_response>\n{"temp": 21}\n</tool_response>'), rendered);
  assertSameOutput(r, await chatReference(messages, 4, { tools: chatTools }));
  for (const call of itemsOfType(r, 'function_call')) {
    assert.match(call.call_id, /^call_/);
    assert.equal(call.status, 'completed');
    JSON.parse(call.arguments);
  }
});

test('responses.create: a partial assistant turn is continued; <think> output is a reasoning item', async () => {
  // The prompt opens <think>, so the output is reasoning until </think> (as the chat route splits it).
  const input = [
    { role: 'user', content: 'Think.' },
    { type: 'message', role: 'assistant', status: 'in_progress', content: [{ type: 'output_text', text: '<think>\nhmm', annotations: [] }] },
  ];
  const r = await client.responses.create({ ...greedy, input, max_output_tokens: 6 });
  checkResponseShape(r, 6);
  const messages = [{ role: 'user', content: 'Think.' }, { role: 'assistant', content: '<think>\nhmm' }];
  const ref = await chatReference(messages, 6, { add_generation_prompt: false, continue_final_message: true });
  assert.ok(ref.reasoning.length > 0);
  assert.equal(reasoningText(r), ref.reasoning);
  assert.equal(messageText(r), ref.content);
  assert.equal(r.output[0].type, 'reasoning');
  assert.match(r.output[0].id, /^rs_/);
  assert.ok(r.usage.output_tokens_details.reasoning_tokens > 0);
  assert.ok(r.usage.output_tokens_details.reasoning_tokens <= 6);
  const tok = (await call('POST', '/tokenize', { messages, add_generation_prompt: false, continue_final_message: true })).json();
  assert.equal(r.usage.input_tokens, tok.count);
});

test('responses.create: output_text logprobs', async () => {
  const r = await client.responses.create({
    ...greedy, input: 'Count.', max_output_tokens: 5, include: ['message.output_text.logprobs'], top_logprobs: 2,
  });
  const parts = itemsOfType(r, 'message').flatMap((m) => m.content);
  const logprobs = parts.flatMap((p) => p.logprobs);
  if (reasoningText(r) === '') assert.equal(logprobs.length, 5);
  for (const lp of logprobs) {
    assert.equal(typeof lp.token, 'string');
    assert.ok(Array.isArray(lp.bytes));
    assert.equal(lp.top_logprobs.length, 2);
    // Greedy: the chosen token is the most likely one.
    assert.ok(Math.abs(lp.logprob - Math.max(...lp.top_logprobs.map((t) => t.logprob))) < 1e-4);
  }
});

// The events of one responses.stream, checked for order and numbering; the final response.
async function collectStream(params) {
  const stream = client.responses.stream(params);
  const events = [];
  for await (const event of stream) events.push(event);
  const final = await stream.finalResponse();
  events.forEach((e, i) => assert.equal(e.sequence_number, i, `event ${i} ${e.type}`));
  assert.equal(events[0].type, 'response.created');
  assert.equal(events[1].type, 'response.in_progress');
  assert.equal(events[0].response.status, 'in_progress');
  assert.deepEqual(events[0].response.output, []);
  assert.equal(events[0].response.usage, null);
  const last = events.at(-1);
  assert.equal(last.type, `response.${final.status}`);
  assert.equal(last.response.id, events[0].response.id);
  // Every item: added, its parts and deltas, then done, before the next item starts.
  let open = null;
  const deltas = { text: '', reasoning: '', args: '' };
  for (const e of events.slice(2, -1)) {
    if (e.type === 'response.output_item.added') {
      assert.equal(open, null, 'an item opened before the last one was done');
      open = e.item;
      assert.equal(e.item.status, 'in_progress');
    } else if (e.type === 'response.output_item.done') {
      assert.equal(e.item.id, open.id);
      assert.equal(e.item.type, open.type);
      open = null;
    } else {
      assert.ok(open, `${e.type} outside an item`);
      if (e.item_id !== undefined) assert.equal(e.item_id, open.id);
      if (e.type === 'response.output_text.delta') deltas.text += e.delta;
      if (e.type === 'response.reasoning_text.delta') deltas.reasoning += e.delta;
      if (e.type === 'response.function_call_arguments.delta') deltas.args += e.delta;
    }
  }
  assert.equal(open, null);
  return { events, final, deltas };
}

test('responses.stream: numbered events in order; deltas make the final text; same output as whole', async () => {
  const params = { ...greedy, instructions: 'Be brief.', input: 'Say hi.', max_output_tokens: 8 };
  const { events, final, deltas } = await collectStream(params);
  const types = events.map((e) => e.type);
  const whole = await client.responses.create(params);
  assert.equal(final.status, 'incomplete');
  assert.equal(final.usage.output_tokens, 8);
  assert.equal(final.usage.input_tokens, whole.usage.input_tokens);
  assert.equal(messageText(final), deltas.text);
  assert.equal(final.output_text, deltas.text);
  assert.equal(reasoningText(final), deltas.reasoning);
  assert.equal(deltas.text, messageText(whole));
  assert.equal(deltas.reasoning, reasoningText(whole));
  assert.deepEqual(final.output.map((i) => i.type), whole.output.map((i) => i.type));
  if (deltas.text) {
    const start = types.indexOf('response.content_part.added');
    const firstDelta = types.indexOf('response.output_text.delta');
    assert.ok(types.indexOf('response.output_item.added') < start && start < firstDelta);
    assert.ok(types.lastIndexOf('response.output_text.delta') < types.indexOf('response.output_text.done'));
    const done = events.find((e) => e.type === 'response.output_text.done');
    assert.equal(done.text, deltas.text);
  }
});

test('responses.stream: reasoning then message, as the whole response', async () => {
  const input = [
    { role: 'user', content: 'Think.' },
    { type: 'message', role: 'assistant', status: 'in_progress', content: '<think>\nhmm' },
  ];
  const params = { ...greedy, input, max_output_tokens: 6 };
  const { events, final, deltas } = await collectStream(params);
  const whole = await client.responses.create(params);
  assert.ok(deltas.reasoning.length > 0);
  assert.equal(deltas.reasoning, reasoningText(whole));
  assert.equal(deltas.text, messageText(whole));
  assert.equal(final.output[0].type, 'reasoning');
  assert.ok(events.some((e) => e.type === 'response.reasoning_text.delta'));
  const done = events.find((e) => e.type === 'response.reasoning_text.done');
  assert.equal(done.text, deltas.reasoning);
  assert.equal(final.usage.output_tokens_details.reasoning_tokens, whole.usage.output_tokens_details.reasoning_tokens);
});

test('responses stream on the wire: event lines name the data type; no [DONE]', async () => {
  const res = await fetch(`${baseURL}/v1/responses`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${apiKey}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ ...greedy, input: 'x', max_output_tokens: 3, stream: true }),
  });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type'), /^text\/event-stream/);
  const text = await res.text();
  assert.ok(!text.includes('[DONE]'), text.slice(-300));
  const blocks = text.split('\n\n').filter((b) => b && !b.startsWith(':'));
  for (const block of blocks) {
    const [eventLine, dataLine] = block.split('\n');
    assert.match(eventLine, /^event: /);
    assert.match(dataLine, /^data: /);
    assert.equal(JSON.parse(dataLine.slice(6)).type, eventLine.slice(7));
  }
  assert.equal(JSON.parse(blocks.at(-1).split('\n')[1].slice(6)).type, 'response.incomplete');
});

test('responses: what needs stored state is a 400 that says so', async () => {
  await assert.rejects(
    client.responses.create({ model, input: 'x', previous_response_id: 'resp_123' }),
    (e) => e instanceof OpenAI.BadRequestError && e.error?.param === 'previous_response_id' && /store/.test(e.message),
  );
  await assert.rejects(
    client.responses.create({ model, input: 'x', tool_choice: 'required' }),
    (e) => e instanceof OpenAI.BadRequestError && e.error?.param === 'tool_choice' && /tools/.test(e.message),
  );
  await assert.rejects(
    client.responses.create({ model: 'nope', input: 'x' }),
    (e) => e instanceof OpenAI.NotFoundError,
  );
  // store: true is accepted; nothing is stored.
  const r = await client.responses.create({ ...greedy, input: 'x', max_output_tokens: 1, store: true });
  assert.equal(r.store, false);
  assert.equal(r.usage.output_tokens, 1);
});

// tool_choice required / named: the output is calls of the given tools only (the grammar makes
// them; the random model knows no tool syntax), function_call items whose arguments fit the
// parameters schema (checked here from the schema, not by pagoda), whole and streamed.
test('responses: tool_choice required and named give function_call items that fit the schema', async () => {
  const parameters = { type: 'object', required: ['city'], additionalProperties: false,
    properties: { city: { type: 'string', maxLength: 8 } } };
  const tools = [{ type: 'function', name: 'get_weather', parameters },
    { type: 'function', name: 'get_time', parameters: { type: 'object', properties: {} } }];
  const check = (items, name) => {
    assert.ok(items.length >= 1, JSON.stringify(items));
    for (const item of items) {
      if (name) assert.equal(item.name, name);
      else assert.ok(['get_weather', 'get_time'].includes(item.name), item.name);
      const args = JSON.parse(item.arguments);
      if (item.name === 'get_weather') {
        assert.deepEqual(Object.keys(args), ['city']);
        assert.ok(typeof args.city === 'string' && [...args.city].length <= 8, item.arguments);
      }
    }
  };
  for (const [toolChoice, name] of [['required', null], [{ type: 'function', name: 'get_weather' }, 'get_weather']]) {
    const r = await client.responses.create({ model, input: 'Weather in Paris?', tools, tool_choice: toolChoice,
      temperature: 0, max_output_tokens: 120 });
    assert.deepEqual(r.tool_choice, toolChoice);
    check(itemsOfType(r, 'function_call'), name);
    const stream = await client.responses.create({ model, input: 'Weather in Paris?', tools, tool_choice: toolChoice,
      temperature: 0, max_output_tokens: 120, stream: true });
    let done = null;
    for await (const event of stream) if (event.type === 'response.completed') done = event.response;
    assert.ok(done, 'no response.completed event');
    check(itemsOfType(done, 'function_call'), name);
  }
});

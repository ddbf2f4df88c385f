// Tool calls in one family's syntax through the official `openai` client: the family's template
// states the tools; tool_choice auto, required and named, each whole and streamed (the client's
// stream helper assembles the tool-call deltas); a returned call goes back through the template.
// The model has random weights, so it never writes a call by itself: under auto a regex in the
// family's syntax (vLLM's structured_outputs, allowed beside tool_choice auto) makes it write one,
// and the auto-mode parser has to find it; required and named are the server's own grammar. The
// checks are on names and on the arguments against the tools' schemas, written here.
// Run by tests/server/family_tool_calls_test.cpp: node family_tool_calls_test.mjs PORT API_KEY MODEL PARSER
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { call, client, model } from './openai_client.mjs';

const parser = process.argv[5];

const tools = [
  {
    type: 'function',
    function: {
      name: 'get_weather', description: 'weather in a city',
      parameters: {
        type: 'object', required: ['city', 'unit'], additionalProperties: false,
        properties: { city: { type: 'string', maxLength: 10 }, unit: { enum: ['c', 'f'] } },
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'get_time', description: 'time in a zone',
      parameters: {
        type: 'object', required: ['zone'], additionalProperties: false,
        properties: { zone: { type: 'string', pattern: '^[A-Z]{3}$' }, hours: { type: 'integer', minimum: 0, maximum: 23 } },
      },
    },
  },
];

// Per family: what its template writes when it states the tools (plain text, not special tokens,
// so /detokenize shows it), the regex of one get_weather call in its syntax, and how a call the
// assistant made reads once rendered back.
const families = {
  llama3_json: {
    statesTools: 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}',
    autoRegex: '\\{"name": "get_weather", "parameters": \\{"city": "[a-z]{1,8}", "unit": "(c|f)"\\}\\}',
    renderedCall: (city) => `{"name": "get_weather", "parameters": {"city": "${city}"`,
  },
  mistral: {
    statesTools: '{"type": "function", "function": {"name": "get_weather"',
    // [TOOL_CALLS] is a special token, which a grammar cannot write: it comes as plain text here.
    autoRegex: '\\[TOOL_CALLS\\]\\[\\{"name": "get_weather", "arguments": \\{"city": "[a-z]{1,8}", "unit": "(c|f)"\\}\\}\\]',
    renderedCall: (city) => `"city": "${city}"`,
  },
  pythonic: {
    statesTools: 'answer with nothing but a Python list of calls with keyword arguments',
    autoRegex: '\\[get_weather\\(city="[a-z]{1,8}", unit="(c|f)"\\)\\]',
    renderedCall: (city) => `[get_weather(city="${city}"`,
  },
};
const family = families[parser];
if (!family) {
  console.error(`unknown parser '${parser}': one of ${Object.keys(families).join(', ')}`);
  process.exit(2);
}

const messages = [{ role: 'user', content: 'What is the weather in Paris, and which time is it?' }];
const base = { model, messages, tools, temperature: 1, seed: 3, max_tokens: 120 };

// A call's name and arguments against the tool's schema.
function checkCall(c, wantName) {
  assert.equal(c.type, 'function', JSON.stringify(c));
  assert.equal(typeof c.id, 'string');
  assert.ok(c.id.length > 0);
  if (wantName) assert.equal(c.function.name, wantName);
  const args = JSON.parse(c.function.arguments);
  if (c.function.name === 'get_weather') {
    assert.deepEqual(Object.keys(args).sort(), ['city', 'unit']);
    assert.ok(typeof args.city === 'string' && [...args.city].length <= 10, JSON.stringify(args));
    assert.ok(['c', 'f'].includes(args.unit), JSON.stringify(args));
  } else {
    assert.equal(c.function.name, 'get_time');
    assert.ok(Object.keys(args).every((k) => k === 'zone' || k === 'hours'), JSON.stringify(args));
    assert.match(args.zone, /^[A-Z]{3}$/);
    if ('hours' in args) assert.ok(Number.isInteger(args.hours) && args.hours >= 0 && args.hours <= 23);
  }
  return args;
}

function checkCalls(choice, wantName) {
  assert.equal(choice.finish_reason, 'tool_calls', JSON.stringify(choice));
  const calls = choice.message.tool_calls;
  assert.ok(Array.isArray(calls) && calls.length >= 1, JSON.stringify(choice.message));
  assert.ok(!choice.message.content, `the call leaked into content: ${JSON.stringify(choice.message)}`);
  for (const c of calls) checkCall(c, wantName);
  assert.equal(new Set(calls.map((c) => c.id)).size, calls.length, 'tool call ids repeat');
  return calls;
}

// Streamed: the client's helper assembles the deltas; each delta is checked on the way.
async function streamed(params) {
  const stream = client.chat.completions.stream({ ...params, stream: true });
  const started = new Set();
  stream.on('chunk', (chunk) => {
    for (const d of chunk.choices[0]?.delta?.tool_calls ?? []) {
      assert.equal(typeof d.index, 'number', JSON.stringify(d));
      if (!started.has(d.index)) {
        // The first fragment of a call names it.
        assert.ok(d.id && d.type === 'function' && d.function?.name, JSON.stringify(d));
        started.add(d.index);
      }
    }
  });
  const done = await stream.finalChatCompletion();
  assert.ok(started.size >= 1, 'no tool-call delta came');
  return done.choices[0];
}

test('the family template states the tools', async () => {
  const plain = (await call('POST', '/tokenize', { messages })).json();
  const withTools = (await call('POST', '/tokenize', { messages, tools })).json();
  assert.ok(withTools.count > plain.count + 20, `${withTools.count} vs ${plain.count}`);
  const rendered = (await call('POST', '/detokenize', { tokens: withTools.tokens })).json().prompt;
  assert.ok(rendered.includes(family.statesTools), rendered);
  assert.ok(rendered.includes('get_time'), rendered);
});

test('auto: a call in the family syntax comes back as tool_calls, whole and streamed', async () => {
  const params = { ...base, tool_choice: 'auto', structured_outputs: { regex: family.autoRegex } };
  const whole = (await client.chat.completions.create(params)).choices[0];
  const [c] = checkCalls(whole, 'get_weather');
  assert.equal(whole.message.tool_calls.length, 1);
  assert.match(JSON.parse(c.function.arguments).city, /^[a-z]{1,8}$/);
  const s = await streamed(params);
  checkCalls(s, 'get_weather');
  assert.equal(s.message.tool_calls.length, 1);
});

test('auto: an answer in no call syntax stays content', async () => {
  const params = { ...base, tool_choice: 'auto', structured_outputs: { regex: 'It is sunny in [a-z]{1,8}\\.' } };
  for (const choice of [(await client.chat.completions.create(params)).choices[0], await streamed0(params)]) {
    assert.equal(choice.finish_reason, 'stop', JSON.stringify(choice));
    assert.match(choice.message.content, /^It is sunny in [a-z]{1,8}\.$/);
    assert.ok(!choice.message.tool_calls?.length, JSON.stringify(choice.message));
  }
});

// Streamed without expecting calls.
async function streamed0(params) {
  return (await client.chat.completions.stream({ ...params, stream: true }).finalChatCompletion()).choices[0];
}

test('required: calls of the given tools, whole and streamed', async () => {
  const params = { ...base, tool_choice: 'required' };
  checkCalls((await client.chat.completions.create(params)).choices[0]);
  checkCalls(await streamed(params));
});

test('named: calls of that function only, whole and streamed', async () => {
  for (const name of ['get_time', 'get_weather']) {
    const params = { ...base, tool_choice: { type: 'function', function: { name } } };
    checkCalls((await client.chat.completions.create(params)).choices[0], name);
    checkCalls(await streamed(params), name);
  }
});

test('a returned call and its result go back through the template', async () => {
  const params = { ...base, tool_choice: { type: 'function', function: { name: 'get_weather' } } };
  const answer = (await client.chat.completions.create({ ...params, parallel_tool_calls: false })).choices[0];
  const [c] = checkCalls(answer, 'get_weather');
  const history = [
    ...messages,
    { role: 'assistant', content: null, tool_calls: [c] },
    { role: 'tool', tool_call_id: c.id, content: '{"temperature": 21}' },
  ];
  const t = await call('POST', '/tokenize', { messages: history, tools });
  assert.equal(t.status, 200, t.text);
  const rendered = (await call('POST', '/detokenize', { tokens: t.json().tokens })).json().prompt;
  const { city } = JSON.parse(c.function.arguments);
  assert.ok(rendered.includes(family.renderedCall(city)), rendered);
  assert.ok(rendered.includes('21'), rendered);
  const next = await client.chat.completions.create({ model, messages: history, tools, max_tokens: 3 });
  assert.equal(next.usage.prompt_tokens, t.json().count);
});

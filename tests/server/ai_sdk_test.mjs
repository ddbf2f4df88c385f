// tool_choice "required" and a named tool through the Vercel AI SDK (`ai` with its OpenAI-compatible
// provider, tests/data/node from tools/fetch_test_data.sh) against pagoda serving the default
// model, which knows no tool-call syntax: only the grammar makes the calls. The SDK itself throws
// AI_ToolChoiceViolationError when a step's calls break the tool choice; the arguments are checked
// here against the parameters schema (written from the schema, not by pagoda).
// Run by tests/server/api_server_test.cpp: node ai_sdk_test.mjs PORT API_KEY MODEL
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const modules = path.join(root, 'tests/data/node/node_modules');
const load = (p) => import(pathToFileURL(path.join(modules, p)).href);
const { generateText, streamText, jsonSchema, tool } = await load('ai/dist/index.js');
const { createOpenAICompatible } = await load('@ai-sdk/openai-compatible/dist/index.js');

const [port, apiKey, modelName] = process.argv.slice(2);
const provider = createOpenAICompatible({ name: 'pagoda', baseURL: `http://127.0.0.1:${port}/v1`, apiKey });
const model = provider.chatModel(modelName);

const weatherSchema = {
  type: 'object', required: ['city', 'unit'], additionalProperties: false,
  properties: { city: { type: 'string', maxLength: 10 }, unit: { enum: ['c', 'f'] } },
};
const timeSchema = {
  type: 'object', required: ['zone'], additionalProperties: false,
  properties: { zone: { type: 'string', pattern: '^[A-Z]{3}$' }, hours: { type: 'integer', minimum: 0, maximum: 23 } },
};
const tools = {
  get_weather: tool({ description: 'weather in a city', inputSchema: jsonSchema(weatherSchema) }),
  get_time: tool({ description: 'time in a zone', inputSchema: jsonSchema(timeSchema) }),
};

function checkCall(call) {
  const input = call.input;
  assert.equal(typeof input, 'object', JSON.stringify(call));
  if (call.toolName === 'get_weather') {
    assert.deepEqual(Object.keys(input).sort(), ['city', 'unit']);
    assert.ok(typeof input.city === 'string' && [...input.city].length <= 10, JSON.stringify(input));
    assert.ok(['c', 'f'].includes(input.unit), JSON.stringify(input));
  } else {
    assert.equal(call.toolName, 'get_time');
    assert.ok(Object.keys(input).every((k) => k === 'zone' || k === 'hours'), JSON.stringify(input));
    assert.match(input.zone, /^[A-Z]{3}$/);
    if ('hours' in input) assert.ok(Number.isInteger(input.hours) && input.hours >= 0 && input.hours <= 23);
  }
}

const choices = [['required', null], [{ type: 'tool', toolName: 'get_time' }, 'get_time'],
  [{ type: 'tool', toolName: 'get_weather' }, 'get_weather']];

test('generateText: tool choice required and named give calls that fit the schema', async () => {
  for (const [toolChoice, name] of choices) {
    for (const temperature of [0, 1]) {
      const r = await generateText({ model, tools, toolChoice, temperature, seed: 11, maxOutputTokens: 200,
        prompt: 'What is the weather in Paris?' });
      assert.ok(r.toolCalls.length >= 1, JSON.stringify(r.content));
      for (const call of r.toolCalls) {
        if (name) assert.equal(call.toolName, name);
        checkCall(call);
      }
      assert.equal(r.finishReason, 'tool-calls');
    }
  }
});

test('streamText: the same through the stream', async () => {
  for (const [toolChoice, name] of choices) {
    const r = streamText({ model, tools, toolChoice, temperature: 1, seed: 5, maxOutputTokens: 200,
      prompt: 'Which time is it?', onError: ({ error }) => { throw error; } });
    const calls = await r.toolCalls;
    assert.ok(calls.length >= 1);
    for (const call of calls) {
      if (name) assert.equal(call.toolName, name);
      checkCall(call);
    }
  }
});

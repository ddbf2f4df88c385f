// The structured-output clients people use, against pagoda serving the default (tiny, random) model,
// with the zod schemas of each library's own documentation examples plus one with ints, ranges,
// an email and a uuid: openai-node's zodResponseFormat / zodFunction through
// client.chat.completions.parse, LangChain JS's ChatOpenAI.withStructuredOutput (json_schema and
// functionCalling), and the Vercel AI SDK's generateObject through @ai-sdk/openai-compatible with
// structured outputs on. The model writes nonsense: only the grammar makes the output fit, so every
// check is `Schema.parse` by zod itself, never a content.
// Run by tests/server/structured_clients_test.cpp: node structured_clients_test.mjs PORT API_KEY MODEL
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const modules = path.join(root, 'tests/data/node/node_modules');
const load = (p) => import(pathToFileURL(path.join(modules, p)).href);
const { z } = await load('zod/index.js');
const { default: OpenAI } = await load('openai/index.mjs');
const { zodResponseFormat, zodFunction } = await load('openai/helpers/zod.mjs');
const { ChatOpenAI } = await load('@langchain/openai/dist/index.js');
const { generateObject } = await load('ai/dist/index.js');
const { createOpenAICompatible } = await load('@ai-sdk/openai-compatible/dist/index.js');

const [port, apiKey, modelName] = process.argv.slice(2);
const baseURL = `http://127.0.0.1:${port}/v1`;
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120_000 });
// Enough tokens for every schema here to close (the grammar keeps strings short only where the
// schema bounds them, so a random model may run long: the tests cap free strings with .max()).
const maxTokens = 400;

// OpenAI's structured-outputs guide: CalendarEvent and MathReasoning.
const CalendarEvent = z.object({ name: z.string().max(20), date: z.string().max(20),
  participants: z.array(z.string().max(12)).max(3) });
const Step = z.object({ explanation: z.string().max(24), output: z.string().max(12) });
const MathReasoning = z.object({ steps: z.array(Step).max(2), final_answer: z.string().max(12) });
// The formats and ranges zod users write: .int(), .positive(), .min()/.max(), .email(), .uuid(),
// enums, nested objects, optional and nullable.
const userShape = {
  id: z.string().uuid(),
  email: z.string().email(),
  age: z.number().int().min(18).max(99),
  score: z.number().int().positive(),
  ratio: z.number().min(0).max(1),
  role: z.enum(['admin', 'user', 'guest']),
  tags: z.array(z.string().max(8)).min(1).max(3),
  address: z.object({ city: z.string().max(12), zip: z.string().regex(/^[0-9]{5}$/) }),
  nickname: z.string().max(10).nullable(),
};
const User = z.object({ ...userShape, bio: z.string().max(10).optional() });
// openai-node's helper itself refuses .optional() without .nullable() (OpenAI's strict mode wants
// every field required), so its User makes bio nullable instead, as OpenAI's guide says to.
const OpenAiUser = z.object({ ...userShape, bio: z.string().max(10).nullable() });
// LangChain's structured-output doc: the joke.
const Joke = z.object({
  setup: z.string().max(30).describe('The setup of the joke'),
  punchline: z.string().max(30).describe('The punchline to the joke'),
  rating: z.number().int().min(1).max(10).optional().describe('How funny the joke is, from 1 to 10'),
});
// The AI SDK's generateObject doc: the recipe.
const Recipe = z.object({
  recipe: z.object({
    name: z.string().max(20),
    ingredients: z.array(z.object({ name: z.string().max(12), amount: z.string().max(8) })).max(3),
    steps: z.array(z.string().max(20)).max(3),
  }),
});


test('openai-node: chat.completions.parse with zodResponseFormat', async () => {
  for (const [name, Schema] of Object.entries({ CalendarEvent, MathReasoning, User: OpenAiUser, Recipe })) {
    const r = await client.chat.completions.parse({
      model: modelName, max_tokens: maxTokens, temperature: 1, seed: 3,
      messages: [{ role: 'user', content: `Give me a ${name}.` }],
      response_format: zodResponseFormat(Schema, name),
    });
    const m = r.choices[0].message;
    assert.equal(r.choices[0].finish_reason, 'stop', `${name}: ${m.content}`);
    assert.ok(m.parsed, `${name}: ${m.content}`);
    Schema.parse(m.parsed);
  }
});

test('openai-node: chat.completions.parse with zodFunction tools', async () => {
  const tools = [zodFunction({ name: 'create_user', parameters: OpenAiUser }),
    zodFunction({ name: 'add_event', parameters: CalendarEvent })];
  for (const choice of ['required', { type: 'function', function: { name: 'create_user' } }]) {
    const r = await client.chat.completions.parse({
      model: modelName, max_tokens: maxTokens, temperature: 1, seed: 5, tools, tool_choice: choice,
      messages: [{ role: 'user', content: 'Sign up Ann.' }],
    });
    const calls = r.choices[0].message.tool_calls;
    assert.ok(calls && calls.length >= 1, JSON.stringify(r.choices[0].message));
    for (const c of calls) {
      const Schema = c.function.name === 'create_user' ? OpenAiUser : CalendarEvent;
      if (typeof choice === 'object') assert.equal(c.function.name, 'create_user');
      Schema.parse(c.function.parsed_arguments);
    }
  }
});

test('LangChain JS: ChatOpenAI.withStructuredOutput', async () => {
  // The request bodies, to check each method asked the server for what it says (not a prompt only).
  const bodies = [];
  const fetchSpy = (url, init) => { bodies.push(JSON.parse(init.body)); return fetch(url, init); };
  const llm = new ChatOpenAI({ model: modelName, apiKey, configuration: { baseURL, fetch: fetchSpy }, maxTokens,
    temperature: 1, maxRetries: 0 });
  for (const method of ['jsonSchema', 'functionCalling']) {
    for (const [name, Schema] of Object.entries({ Joke, User })) {
      const structured = llm.withStructuredOutput(Schema, { name, method, strict: true });
      const out = await structured.invoke(`Tell me a ${name}.`);
      const body = bodies.at(-1);
      if (method === 'jsonSchema') assert.equal(body.response_format?.type, 'json_schema', JSON.stringify(body));
      else assert.ok(body.tools?.length === 1 && body.tool_choice, JSON.stringify(body));
      Schema.parse(out);
    }
  }
});

test('Vercel AI SDK: generateObject through @ai-sdk/openai-compatible', async () => {
  const provider = createOpenAICompatible({ name: 'pagoda', baseURL, apiKey, supportsStructuredOutputs: true });
  const model = provider.chatModel(modelName);
  for (const [name, Schema] of Object.entries({ Recipe, User })) {
    const { object } = await generateObject({ model, schema: Schema, schemaName: name, maxRetries: 0,
      maxOutputTokens: maxTokens, temperature: 1, seed: 7, prompt: `Generate a ${name}.` });
    Schema.parse(object);
  }
});

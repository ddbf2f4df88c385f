// Prints, as one JSON array, the JSON schemas the official clients send for zod schemas like those
// of their docs: openai-node's zodResponseFormat (ints, ranges, email, uuid, enums, optional,
// nullable, nested arrays) and the AI SDK's zodSchema (generateObject). json_schema_test.cpp
// compiles them and checks generated outputs with python3-jsonschema.
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const modules = path.join(root, 'tests/data/node/node_modules');
const load = (p) => import(pathToFileURL(path.join(modules, p)).href);
const { z } = await load('zod/index.js');
const { zodResponseFormat } = await load('openai/helpers/zod.mjs');
const { zodSchema } = await load('ai/dist/index.js');

const user = z.object({
  name: z.string(),
  age: z.number().int().min(18),
  score: z.number().int().positive(),
  ratio: z.number().min(0).max(1),
  email: z.string().email(),
  id: z.string().uuid(),
});
const event = z.object({
  name: z.string(),
  date: z.string(),
  participants: z.array(z.string()),
});
const recipe = z.object({
  recipe: z.object({
    name: z.string(),
    ingredients: z.array(z.object({ name: z.string(), amount: z.string() })),
    steps: z.array(z.string()),
  }),
});
const step = z.object({ explanation: z.string(), output: z.string() });
const math = z.object({ steps: z.array(step), final_answer: z.string() });
const misc = z.object({
  kind: z.enum(['a', 'b']),
  count: z.number().int().nonnegative().max(100),
  price: z.number().positive(),
  note: z.string().nullable(),
  tags: z.array(z.string()).max(3),
  when: z.string().datetime(),
  site: z.string().url(),
});

const out = [];
for (const [schema, name] of [[user, 'user'], [event, 'event'], [math, 'math'], [misc, 'misc']])
  out.push(zodResponseFormat(schema, name).json_schema.schema);
for (const schema of [recipe, user, misc]) out.push(await zodSchema(schema).jsonSchema);
console.log(JSON.stringify(out));

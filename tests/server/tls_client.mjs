// The official `openai` client over HTTPS (tests/server/tls_test.cpp): one chat completion, whole
// and streamed. NODE_EXTRA_CA_CERTS names the test's self-signed certificate. Arguments: PORT MODEL.
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const entry = path.join(root, 'tests/data/node/node_modules/openai/index.mjs');
const { default: OpenAI } = await import(pathToFileURL(entry).href);

const [port, model] = process.argv.slice(2);
if (!port || !model) {
  console.error('usage: node tls_client.mjs PORT MODEL');
  process.exit(2);
}
const client = new OpenAI({ baseURL: `https://127.0.0.1:${port}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60_000 });
const messages = [{ role: 'user', content: 'hello' }];

const whole = await client.chat.completions.create({ model, messages, max_tokens: 4 });
if (whole.object !== 'chat.completion' || whole.choices.length !== 1 || whole.usage.completion_tokens < 1) {
  console.error('unexpected chat completion:', JSON.stringify(whole));
  process.exit(1);
}

const stream = await client.chat.completions.create({ model, messages, max_tokens: 4, stream: true });
let chunks = 0;
let finish = null;
for await (const chunk of stream) {
  chunks += 1;
  finish = chunk.choices[0]?.finish_reason ?? finish;
}
if (chunks < 2 || !finish) {
  console.error(`unexpected stream: ${chunks} chunks, finish_reason ${finish}`);
  process.exit(1);
}
console.log('ok');

// Shared by the server's Node tests: the official `openai` client from tests/data/node (installed by
// tools/fetch_test_data.sh), and the command-line arguments PORT API_KEY MODEL.
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const entry = path.join(root, 'tests/data/node/node_modules/openai/index.mjs');
const { default: OpenAI } = await import(pathToFileURL(entry).href);

export const [port, apiKey, model] = process.argv.slice(2);
if (!port || !apiKey || !model) {
  console.error('usage: node SCRIPT PORT API_KEY MODEL');
  process.exit(2);
}
export const baseURL = `http://127.0.0.1:${port}`;
export const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey, maxRetries: 0, timeout: 120_000 });
export { OpenAI };

// POST/GET with the key, JSON in and out (for vLLM's routes the client has no method for).
export async function call(method, route, body) {
  const res = await fetch(`${baseURL}${route}`, {
    method,
    headers: { Authorization: `Bearer ${apiKey}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, text, json: () => JSON.parse(text) };
}

// /metrics as { 'name{labels}': value }.
export async function metrics() {
  const { text } = await call('GET', '/metrics');
  const out = {};
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    out[line.slice(0, at)] = Number(line.slice(at + 1));
  }
  return out;
}

// The value of the first series whose name (and labels, when given) match.
export function metric(all, name, labelText = '') {
  for (const [key, value] of Object.entries(all)) {
    const base = key.split('{')[0];
    if (base === name && key.includes(labelText)) return value;
  }
  return undefined;
}

// Images through the official `openai` client (tests/server/vision_server_test.cpp): each reference
// prompt of the multimodal fixture sent as a chat message of text and base64 image parts (the
// fixture's PNG and JPEG files, read here), its greedy tokens printed for the C++ test to hold to
// transformers'; the first prompt again, with the prefix cache's cached_tokens printed.
// Run as: PAGODA_CASES='[{"parts": [...], "max_tokens": N}, ...]' node vision_test.mjs PORT API_KEY MODEL
// where a part is {"text": "..."} or {"image": "/path/to/file.png"}.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { client, model } from './openai_client.mjs';

const mime = { '.png': 'image/png', '.jpg': 'image/jpeg', '.jpeg': 'image/jpeg', '.webp': 'image/webp' };
const content = (parts) => parts.map((p) => (p.text !== undefined
  ? { type: 'text', text: p.text }
  : { type: 'image_url', image_url: { url: `data:${mime[path.extname(p.image)]};base64,${fs.readFileSync(p.image).toString('base64')}` } }));

const ask = async (c) => {
  const r = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: content(c.parts) }], max_tokens: c.max_tokens, temperature: 0,
    ignore_eos: true, return_token_ids: true,
  });
  assert.equal(r.choices[0].finish_reason, 'length');
  return { tokens: r.choices[0].token_ids, prompt: r.prompt_token_ids, cached: r.usage.prompt_tokens_details?.cached_tokens ?? 0 };
};

const cases = JSON.parse(process.env.PAGODA_CASES);
const out = [];
for (const c of cases) out.push(await ask(c));
out.push(await ask(cases[0]));  // the same image again: its blocks come from the prefix cache
console.log('RESULTS ' + JSON.stringify(out));

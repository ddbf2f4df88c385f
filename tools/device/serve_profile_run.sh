#!/usr/bin/env bash
# Run ON the GPU machine (carry .deps and tests/data/qwen3-tokenizer): one of `pagoda bench serve`'s
# presets (gpustack's published profiles, docs/performance.md) against `pagoda serve` on a random
# bf16 checkpoint of a released shape (make_gguf_checkpoint.sh with NO_GGUF=1: the checkpoint and
# Qwen3's tokenizer padded to its vocabulary), as vLLM's figures for that profile were measured:
# --max-num-seqs 512.
#   SHAPE=qwen3.5-9b PRESET=throughput [SERVE_ARGS=...] [BENCH_ARGS=...] tools/device/serve_profile_run.sh
# PROFILE_STEPS=N: the server times every N-th step op by op (serve --profile-steps) and the bench
# prints its tables for the measured requests (bench serve --profile; docs/performance.md).
# Results: $OUT/profile_<shape>_<preset>.json (vLLM's keys) and the table on stdout.
set -uo pipefail
cd "$(dirname "$0")/../.."
shape="${SHAPE:-qwen3.5-9b}"
preset="${PRESET:-throughput}"
work="${WORK:-/tmp/serve_profile}"
out="${OUT:-/tmp/serve_profile_out}"
mkdir -p "$work" "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
git log -1 --format='commit %h %s' 2>/dev/null || true
tools/device/build.sh >/dev/null || exit 1
export LD_LIBRARY_PATH="$PWD/.deps/root/usr/lib/x86_64-linux-gnu"
NO_GGUF=1 tools/device/make_gguf_checkpoint.sh "$shape" "$work/$shape" /tmp "${TOKENIZER_DIR:-tests/data/qwen3-tokenizer}" |
  grep -a '^\[ckpt\]' || exit 1
port=8123
# shellcheck disable=SC2086
build-gpu/pagoda serve "$work/$shape" --device cuda --host 127.0.0.1 --port "$port" --max-num-seqs 512 \
  --max-model-len 4096 --served-model-name m ${PROFILE_STEPS:+--profile-steps $PROFILE_STEPS} ${SERVE_ARGS:-} \
  > "$out/serve.log" 2>&1 &
server=$!
for _ in $(seq 600); do curl -sf "127.0.0.1:$port/health" >/dev/null && break; sleep 0.5; done
grep -E "engine:|Memory plan|graphs" "$out/serve.log" | head -5
# shellcheck disable=SC2086
build-gpu/pagoda bench serve --preset "$preset" --port "$port" --model m --disable-tqdm \
  --result-file "$out/profile_${shape}_${preset}.json" ${PROFILE_STEPS:+--profile} ${BENCH_ARGS:-}
status=$?
grep -E "Avg prompt throughput|stats" "$out/serve.log" | tail -3
kill "$server"; wait "$server" 2>/dev/null
exit $status

#!/usr/bin/env bash
# Run ON the GPU machine (carry .deps): prefix caching on against off (tools/bench_prefix_cache.sh)
# on random-weight Qwen3-0.6B and Qwen3.5-0.8B (hybrid) shaped checkpoints made there by
# tools/make_random_checkpoint.py (transformers), bf16, CUDA graphs on. Builds first unless
# SKIP_BUILD is set. RUNS (default 3) rounds of on/off.
# Everything goes to $OUT/prefix_cache.log as it happens (a timed-out call still brings it back).
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-/tmp/prefix_out}"
mkdir -p "$out"
exec > >(tee -a "$out/prefix_cache.log") 2>&1
export LD_LIBRARY_PATH="$PWD/.deps/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
git log -1 --format=%h 2>/dev/null
[[ -n "${SKIP_BUILD:-}" ]] || tools/device/build.sh >/tmp/prefix_build.log 2>&1 || { tail -30 /tmp/prefix_build.log; exit 1; }
for shape in qwen3-0.6b qwen3.5-0.8b; do
  [[ -d /tmp/ckpt/$shape ]] || python3 tools/make_random_checkpoint.py --shape "$shape" --out /tmp/ckpt/$shape
  echo "=== $shape"
  BENCH_ARGS="--vocab-size 151643" tools/bench_prefix_cache.sh build-gpu/pagoda /tmp/ckpt/$shape "${RUNS:-3}" \
    --device cuda --gpu-memory-utilization 0.4
done

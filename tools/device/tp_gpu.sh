#!/usr/bin/env bash
# Run ON a machine of 2 or 4 GPUs (kind nvidia-h200-x2 / -x4; carry .deps/root.tar.xz): tensor
# parallelism through NCCL (issue 32).
#   PART=check: pagoda_gpu_tests' CudaTensorParallel cases (the family fixtures in fp32 with graphs at
#     2 and, on 4 GPUs, 4 ranks against one GPU; n-gram drafts with rejections at 2).
#   PART=bench: a random checkpoint of SHAPE (default qwen3.5-9b; tools/make_random_checkpoint.py has
#     no 27B shape yet) served at TP=1 and TP=2 side by side:
#     `bench serve` tg128-like decode (1 stream) and the throughput profile (PERF.md), N prompts.
# NCCL_NVLS_ENABLE=0 always (the communicator also forces it): the shared hosts forbid multicast.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
[[ -d .deps/root || ! -f .deps/root.tar.xz ]] || tar -C .deps -xJf .deps/root.tar.xz
export LD_LIBRARY_PATH="$PWD/.deps/root/usr/lib/x86_64-linux-gnu" PATH="/usr/local/cuda/bin:$PATH"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
nvidia-smi topo -m 2>/dev/null | head -8
tools/device/build.sh >/dev/null || exit 1
status=0
if [[ ${PART:-check} == check ]]; then
  build-gpu/pagoda_gpu_tests --gtest_filter='*CudaTensorParallel*' 2>&1 | grep -E "^\[ *(FAILED|PASSED|  OK) |Failure|rror" | cut -c1-300
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  exit $status
fi
shape="${SHAPE:-qwen3.5-9b}" ckpt="/tmp/ckpt_${SHAPE:-qwen3.5-9b}"
[[ -d $ckpt ]] || python3 tools/make_random_checkpoint.py --shape "$shape" --out "$ckpt" >/tmp/ckpt.log 2>&1 || { tail /tmp/ckpt.log; exit 1; }
for tp in 1 2; do
  build-gpu/pagoda serve "$ckpt" --device cuda --port 8321 --tensor-parallel-size $tp --max-num-seqs 512 \
    >"$OUT/serve_tp$tp.log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do curl -sf localhost:8321/health >/dev/null && break; sleep 1; done
  grep -E "rank [0-9]:|KV cache|weights loaded" "$OUT/serve_tp$tp.log" | head -12
  build-gpu/pagoda bench serve --port 8321 --num-prompts 8 --max-concurrency 1 --random-input-len 128 \
    --random-output-len 128 --ignore-eos >"$OUT/tg_tp$tp.txt" 2>&1
  build-gpu/pagoda bench serve --port 8321 --preset throughput --num-prompts "${N:-1000}" >"$OUT/thr_tp$tp.txt" 2>&1
  echo "--- TP=$tp"; grep -hE "Output token throughput|Total token throughput|Mean TPOT" "$OUT/tg_tp$tp.txt" "$OUT/thr_tp$tp.txt"
  kill $pid; wait $pid
done
exit $status

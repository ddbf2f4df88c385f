#!/usr/bin/env bash
# Run ON a machine of 2 or 4 GPUs (kind nvidia-h200-x2 / -x4; carry .deps/root-cuda.tar.xz and
# .deps/qwen3-tokenizer.tar.xz, tools/device/pack_carry.sh): tensor and data parallelism through
# NCCL (issue 32).
#   PART=check: pagoda_gpu_tests' CudaCommunicator (sums against the host's, eager and in graphs) and
#     CudaTensorParallel cases (the family fixtures in fp32 with graphs at 2 and, on 4 GPUs, 4 ranks
#     against one GPU; n-gram drafts with rejections at 2).
#   PART=bench SHAPES="qwen3.5-27b qwen3-8b": a random checkpoint of each shape served at TP=1 and
#     TP=2 (NCCL alone, then with the peer-memory all-reduce) side by side: `bench serve` single-stream decode (8 requests of 128 in / 128 out, one at a
#     time: tg128) and the throughput profile (PERF.md: random 1,024 in / 128 out, N requests at
#     once, default 1,000), every PROFILE_STEPS-th step timed op by op (all-reduce included) on both.
#   PART=dp SHAPE=qwen3.5-9b: the throughput profile against --data-parallel-size 2 and 1.
#   PART=bench+dp: both, in one call.
# NCCL_NVLS_ENABLE=0 always (the communicator also forces it): the shared hosts forbid multicast.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH="/usr/local/cuda/bin:$PATH"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
nvidia-smi topo -m 2>/dev/null | head -4
git log -1 --format='commit %h %s' 2>/dev/null || true
# NCCL: the CUDA toolkit's when it ships one, else the nvidia-nccl wheel beside PyTorch.
if [[ ! -f /usr/local/cuda/include/nccl.h ]]; then
  nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__) if nvidia.nccl.__file__ else list(nvidia.nccl.__path__)[0])' 2>/dev/null)
  lib=$(ls "$nccl"/lib/libnccl.so* 2>/dev/null | head -1)
  [[ -n $lib && -f $nccl/include/nccl.h ]] || { echo "no NCCL: neither /usr/local/cuda nor the nvidia-nccl wheel has it" >&2; exit 1; }
  export CMAKE_ARGS="-DPAGODA_NCCL_LIBRARY=$lib -DPAGODA_NCCL_INCLUDE=$nccl/include"
  export LD_LIBRARY_PATH="$nccl/lib:${LD_LIBRARY_PATH:-}"
fi
tools/device/build.sh >/dev/null || exit 1
grep -E "^PAGODA_NCCL_(LIBRARY|INCLUDE)" build-gpu/CMakeCache.txt
export LD_LIBRARY_PATH="$PWD/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
part=${PART:-check}
if [[ $part == check ]]; then
  build-gpu/pagoda_gpu_tests --gtest_filter='*CudaCommunicator*:*CudaTensorParallel*' 2>&1 | tee "$OUT/check.log" |
    grep -E "^\[ *(FAILED|PASSED|  OK) |Failure|rror|Expected|Which is|actual" | cut -c1-300 | head -80
  exit "${PIPESTATUS[0]}"
fi
port=8321
# serve_one NAME CKPT ARGS...: starts the server, runs the benches named in $BENCHES, stops it.
serve_one() {
  local name=$1 ckpt=$2
  shift 2
  build-gpu/pagoda serve "$ckpt" --device cuda --host 127.0.0.1 --port $port --max-model-len 4096 \
    --served-model-name m ${PROFILE_STEPS:+--profile-steps $PROFILE_STEPS} "$@" >"$OUT/serve_$name.log" 2>&1 &
  local pid=$! t0=$SECONDS
  for _ in $(seq 1200); do curl -sf 127.0.0.1:$port/health >/dev/null && break; kill -0 $pid 2>/dev/null || break; sleep 0.5; done
  echo "--- $name (ready after $((SECONDS - t0)) s)"
  grep -aE "rank [0-9]: (weights|KV|kv|Memory|memory)|tensor parallel size|DP rank|error|Error" "$OUT/serve_$name.log" | head -12
  if [[ $BENCHES == *tg* ]]; then
    timeout 120 build-gpu/pagoda bench serve --port $port --model m --disable-tqdm --num-prompts 8 --max-concurrency 1 \
      --random-input-len 128 --random-output-len 128 --ignore-eos ${PROFILE_STEPS:+--profile} >"$OUT/tg_$name.txt" 2>&1
    grep -hE "Output token throughput|Mean TPOT" "$OUT/tg_$name.txt"
    grep -h "all_reduce" "$OUT/tg_$name.txt" | head -4
  fi
  if [[ $BENCHES == *thr* ]]; then
    timeout "${THR_TIMEOUT:-240}" build-gpu/pagoda bench serve --port $port --model m --disable-tqdm --preset throughput --num-prompts "${N:-1000}" \
      ${PROFILE_STEPS:+--profile} >"$OUT/thr_$name.txt" 2>&1
    grep -hE "Successful|Total token throughput|Mean TTFT|Mean TPOT" "$OUT/thr_$name.txt"
    grep -hE "all_reduce|^#+ |ms/step|steps" "$OUT/thr_$name.txt" | head -12
  fi
  kill $pid; wait $pid 2>/dev/null
}
ckpt() {  # the random checkpoint of shape $1 with Qwen3's tokenizer padded to its vocabulary
  NO_GGUF=1 tools/device/make_gguf_checkpoint.sh "$1" "/tmp/ckpt_$1" /tmp tests/data/qwen3-tokenizer | grep -a '^\[ckpt\]'
}
# PART=bench: per shape the single-stream decode of both sizes first, then the throughput profile at
# TP=2, then (after PART=bench+dp's data-parallel pair) at TP=1, so that a run cut short keeps the
# pairs it finished. MAX_SEQS_TP1: --max-num-seqs of TP=1 where one GPU cannot hold 512 sequences'
# recurrent state beside the weights (the 27B shape: 256).
[[ $part == bench || $part == dp || $part == bench+dp ]] || { echo "PART is check, bench, dp or bench+dp" >&2; exit 2; }
shapes=${SHAPES:-qwen3.5-27b qwen3-8b}
if [[ $part == bench || $part == bench+dp ]]; then
  for shape in $shapes; do
    ckpt "$shape" || exit 1
    BENCHES=tg serve_one "${shape}_tp1" "/tmp/ckpt_$shape" --max-num-seqs "${MAX_SEQS_TP1:-512}"
    # TP=2 with every sum through NCCL (the peer-memory all-reduce off), then with it.
    BENCHES=tg serve_one "${shape}_tp2_nccl" "/tmp/ckpt_$shape" --tensor-parallel-size 2 --max-num-seqs 512 --disable-custom-all-reduce
    BENCHES="tg thr" serve_one "${shape}_tp2" "/tmp/ckpt_$shape" --tensor-parallel-size 2 --max-num-seqs 512
  done
fi
if [[ $part == dp || $part == bench+dp ]]; then
  shape=${SHAPE:-qwen3.5-9b}
  ckpt "$shape" || exit 1
  for dp in 2 1; do BENCHES=thr serve_one "${shape}_dp$dp" "/tmp/ckpt_$shape" --data-parallel-size $dp --max-num-seqs 512; done
fi
if [[ $part == bench || $part == bench+dp ]]; then
  for shape in $shapes; do
    BENCHES=thr serve_one "${shape}_tp1_thr" "/tmp/ckpt_$shape" --max-num-seqs "${MAX_SEQS_TP1:-512}"
  done
fi

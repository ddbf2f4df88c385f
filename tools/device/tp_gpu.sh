#!/usr/bin/env bash
# Run ON a machine of 2 or 4 GPUs (kind nvidia-h200-x2 / -x4; carry .deps/root-cuda.tar.xz and
# .deps/qwen3-tokenizer.tar.xz, tools/device/pack_carry.sh): tensor and data parallelism through
# NCCL (issue 32). PARTS (default "check"), run in the order given:
#   check: pagoda_gpu_tests' CudaCommunicator (sums against the host's, eager and in graphs) and
#     CudaTensorParallel cases (the family fixtures in fp32 with graphs at 2 and, on 4 GPUs, 4 ranks
#     against one GPU; n-gram drafts with rejections at 2).
#   decode: per shape of SHAPES (default "qwen3.5-27b"), a random checkpoint served at TP=1, TP=2 with
#     every sum through NCCL and TP=2 as it serves by default (the peer-memory all-reduce), each
#     answering `bench serve`'s single-stream decode (8 requests of 128 in / 128 out, one at a time:
#     tg128).
#   thr: per shape, the throughput profile (PERF.md: random 1,024 in / 128 out, N requests at once,
#     default 1,000) at TP=2, then at TP=1 (MAX_SEQS_TP1: its --max-num-seqs where one GPU cannot
#     hold 512 sequences' recurrent state beside the weights — the 27B shape: 256).
#   dp: the throughput profile on SHAPE (default qwen3.5-9b) at --data-parallel-size 2, then 1.
#   top1: per shape, bf16 next-token top-1 agreement of TP=2 with TP=1 (tools/top1_agreement.py: 256
#     teacher-forced positions of seeded random prompts), printed and in $OUT/bench.txt.
#   big: a model one GPU cannot hold (BIG_SHAPE, default qwen2.5-72b: 145 GB of bf16 weights, zero,
#     in a sparse file — make_random_checkpoint.py --sparse): one GPU's start, which must be refused
#     with a clear message, then TP=2 (--max-num-seqs 128) answering tg128 and the throughput
#     profile with N_BIG requests (default 200).
# PROFILE_STEPS=N: every N-th step timed op by op (all-reduces included) in every server.
# A checkpoint is made once per machine (/tmp/ckpt_SHAPE). ~10 min for "check decode thr" at the 27B
# shape is over one call's limit: "check decode" then "thr dp" in the next call fits.
# NCCL_NVLS_ENABLE=0 always (the communicator also forces it): the shared hosts forbid multicast.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/out}
# Every server's log and bench output in /tmp/tp_logs; $OUT gets check.log, bench.txt (the bench
# outputs, headed) and serve_tails.txt (each server's last lines): the device returns 8 files at most.
logs=/tmp/tp_logs
mkdir -p "$OUT" "$logs"
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
status=0
check_part() {
  build-gpu/pagoda_gpu_tests --gtest_filter='*CudaCommunicator*:*CudaTensorParallel*' 2>&1 | tee "$OUT/check.log" |
    grep -E "^\[ *(FAILED|PASSED|  OK) |Failure|rror|Expected|Which is|actual" | cut -c1-300 | head -80
  [[ ${PIPESTATUS[0]} -eq 0 ]] || status=1
}
port=8321
# serve_one NAME CKPT ARGS...: starts the server, runs the benches named in $BENCHES, stops it.
serve_one() {
  local name=$1 ckpt=$2
  shift 2
  build-gpu/pagoda serve "$ckpt" --device cuda --host 127.0.0.1 --port $port --max-model-len 4096 \
    --served-model-name m ${PROFILE_STEPS:+--profile-steps $PROFILE_STEPS} "$@" >"$logs/serve_$name.log" 2>&1 &
  local pid=$! t0=$SECONDS
  for _ in $(seq 1200); do curl -sf 127.0.0.1:$port/health >/dev/null && break; kill -0 $pid 2>/dev/null || break; sleep 0.5; done
  echo "--- $name (ready after $((SECONDS - t0)) s)"
  grep -aE "rank [0-9]: (weights|KV|kv|Memory|memory)|tensor parallel size|DP rank|error|Error" "$logs/serve_$name.log" | head -12
  if [[ $BENCHES == *tg* ]]; then
    timeout 120 build-gpu/pagoda bench serve --port $port --model m --disable-tqdm --num-prompts 8 --max-concurrency 1 \
      --random-input-len 128 --random-output-len 128 --ignore-eos ${PROFILE_STEPS:+--profile} >"$logs/tg_$name.txt" 2>&1
    { echo "==== tg $name"; cat "$logs/tg_$name.txt"; } >>"$OUT/bench.txt"
    grep -hE "Output token throughput|Mean TPOT" "$logs/tg_$name.txt"
    grep -hE "all_reduce|all_gather|add_rms_norm|decode steps" "$logs/tg_$name.txt" | head -6
  fi
  if [[ $BENCHES == *top1* ]]; then
    timeout 300 python3 tools/top1_agreement.py collect --port $port --model m --out "$logs/top1_$name.json"
  fi
  if [[ $BENCHES == *thr* ]]; then
    timeout "${THR_TIMEOUT:-240}" build-gpu/pagoda bench serve --port $port --model m --disable-tqdm --preset throughput --num-prompts "${N:-1000}" \
      ${PROFILE_STEPS:+--profile} >"$logs/thr_$name.txt" 2>&1
    { echo "==== throughput $name"; cat "$logs/thr_$name.txt"; } >>"$OUT/bench.txt"
    grep -hE "Successful|Total token throughput|Mean TTFT|Mean TPOT" "$logs/thr_$name.txt"
    grep -hE "all_reduce|^#+ |ms/step|steps" "$logs/thr_$name.txt" | head -12
  fi
  kill $pid; wait $pid 2>/dev/null
  { echo "==== $name"; grep -av "POST /v1\|loading weights" "$logs/serve_$name.log" | tail -40; } >>"$OUT/serve_tails.txt"
}
ckpt() {  # the random checkpoint of shape $1 with Qwen3's tokenizer padded to its vocabulary
  NO_GGUF=1 tools/device/make_gguf_checkpoint.sh "$1" "/tmp/ckpt_$1" /tmp tests/data/qwen3-tokenizer | grep -a '^\[ckpt\]'
}
shapes=${SHAPES:-qwen3.5-27b}
for part in ${PARTS:-${PART:-check}}; do
  case $part in
    check) check_part ;;
    decode)
      for shape in $shapes; do
        ckpt "$shape" || exit 1
        BENCHES=tg serve_one "${shape}_tp1" "/tmp/ckpt_$shape" --max-num-seqs "${MAX_SEQS_TP1:-512}"
        BENCHES=tg serve_one "${shape}_tp2_nccl" "/tmp/ckpt_$shape" --tensor-parallel-size 2 --max-num-seqs 512 \
          --disable-custom-all-reduce
        BENCHES=tg serve_one "${shape}_tp2" "/tmp/ckpt_$shape" --tensor-parallel-size 2 --max-num-seqs 512
      done ;;
    thr)
      for shape in $shapes; do
        ckpt "$shape" || exit 1
        BENCHES=thr serve_one "${shape}_tp2_thr" "/tmp/ckpt_$shape" --tensor-parallel-size 2 --max-num-seqs 512
        BENCHES=thr serve_one "${shape}_tp1_thr" "/tmp/ckpt_$shape" --max-num-seqs "${MAX_SEQS_TP1:-512}"
      done ;;
    dp)
      shape=${SHAPE:-qwen3.5-9b}
      ckpt "$shape" || exit 1
      for dp in 2 1; do BENCHES=thr serve_one "${shape}_dp$dp" "/tmp/ckpt_$shape" --data-parallel-size $dp --max-num-seqs 512; done ;;
    top1)
      for shape in $shapes; do
        ckpt "$shape" || exit 1
        BENCHES=top1 serve_one "${shape}_top1_tp1" "/tmp/ckpt_$shape" --max-num-seqs 64
        BENCHES=top1 serve_one "${shape}_top1_tp2" "/tmp/ckpt_$shape" --tensor-parallel-size 2 --max-num-seqs 64
        { echo "==== top-1 agreement ${shape}: TP=2 against TP=1 (bf16)"
          python3 tools/top1_agreement.py compare "$logs/top1_${shape}_top1_tp1.json" "$logs/top1_${shape}_top1_tp2.json"
        } | tee -a "$OUT/bench.txt"
      done ;;
    big)
      shape=${BIG_SHAPE:-qwen2.5-72b}
      SPARSE=1 ckpt "$shape" || exit 1
      du -sh --apparent-size "/tmp/ckpt_$shape/model.safetensors"; du -sh "/tmp/ckpt_$shape/model.safetensors"
      timeout 300 build-gpu/pagoda serve "/tmp/ckpt_$shape" --device cuda --host 127.0.0.1 --port $port \
        --max-model-len 4096 --max-num-seqs 128 >"$logs/serve_${shape}_tp1.log" 2>&1
      echo "--- ${shape} on one GPU: exit $?"
      grep -aiE "error|memory plan|weights" "$logs/serve_${shape}_tp1.log" | head -5 | cut -c1-400
      { echo "==== ${shape}_tp1"; tail -20 "$logs/serve_${shape}_tp1.log"; } >>"$OUT/serve_tails.txt"
      BENCHES="tg thr" N=${N_BIG:-200} serve_one "${shape}_tp2" "/tmp/ckpt_$shape" --tensor-parallel-size 2 \
        --max-num-seqs 128 ;;
    *) echo "PARTS: check, decode, thr, dp, top1, big — not '$part'" >&2; exit 2 ;;
  esac
done
exit $status

#!/usr/bin/env bash
# Run ON the GPU machine (carry .deps/root.tar.xz): LoRA adapters on CUDA, checked and timed.
#   PART=check: the PEFT-made adapters of the family fixtures (tools/make_lora_fixtures.py, with peft
#     there; tars of tests/fixtures/lora/* into $OUT/lora, to commit; ONLY="name ..." makes just those),
#     (FIXTURES=0: the committed ones, not made again), then pagoda_gpu_tests' LoRA cases (CudaLoraPeft: PEFT's references; CudaLora: adapters against
#     the merged weights, a mixed batch; fp32 with graphs) and the op table's lora_expand cases on cuda.
#   PART=bench: a random Qwen3-8B-shape checkpoint (SHAPE) and 8 random rank-16 adapters
#     (tools/make_random_lora.py); `bench serve` (random IN in / OUT out, N prompts at concurrency C)
#     against the plain server, then a LoRA server with one adapter named by every request (--max-loras 1, then 8), then
#     with the 8 adapters spread over the requests (--lora-modules): the issue's ratios. First the
#     8B gate_up kernels alone (`bench kernels --filter gate_up`: base GEMM, shrink, expand), the
#     expand's legacy and tile kernels A/B (PAGODA_LORA_EXPAND); KERNELS_ONLY=1 stops there.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
[[ -d .deps/root || ! -f .deps/root.tar.xz ]] || tar -C .deps -xJf .deps/root.tar.xz
export LD_LIBRARY_PATH="$PWD/.deps/root/usr/lib/x86_64-linux-gnu" PATH="/usr/local/cuda/bin:$PATH"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
status=0
if [[ ${PART:-check} == check ]]; then
  mkdir -p "$OUT/lora"
  # shellcheck disable=SC2086
  if [[ ${FIXTURES:-1} == 1 ]]; then
    python3 tools/make_lora_fixtures.py --out tests/fixtures/lora ${ONLY:+--only $ONLY} 2>&1 | grep -v Loading | tail -20 || status=1
    for d in tests/fixtures/lora/*/; do tar -C tests/fixtures/lora -cf "$OUT/lora/$(basename "$d").tar" "$(basename "$d")"; done
  fi
  tools/device/build.sh >/dev/null || exit 1
  build-gpu/pagoda_gpu_tests --gtest_filter='*Lora*' 2>&1 | grep -E "^\[ *(FAILED|PASSED|  OK) |Failure|rror" | cut -c1-300
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  cmake --build build-gpu -j"$(nproc)" --target pagoda_tests 2>&1 | grep -E "error|FAILED" && exit 1
  build-gpu/pagoda_tests --gtest_filter='Backends/OpTable.*cuda*lora_expand*:Backends/OpTable.*cuda*_linear' 2>&1 |
    grep -E "^\[ *(FAILED|PASSED|  OK) |Failure|differ|SKIPPED" | cut -c1-300
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  exit $status
fi
shape="${SHAPE:-qwen3-8b}" ckpt="/tmp/ckpt_${SHAPE:-qwen3-8b}" adapters=/tmp/lora_adapters
[[ -d $ckpt ]] || python3 tools/make_random_checkpoint.py --shape "$shape" --out "$ckpt" >/tmp/ckpt.log 2>&1 &
tools/device/build.sh >/dev/null || exit 1
for impl in legacy tiles; do
  echo "--- lora kernels, PAGODA_LORA_EXPAND=$impl"
  PAGODA_LORA_EXPAND=$impl build-gpu/pagoda bench kernels --device cuda --filter '8B gate_up' 2>&1 | grep -v -E 'fp8|int4|FP8|INT4' | tail -24
done
[[ ${KERNELS_ONLY:-0} == 1 ]] && { wait; exit 0; }
wait
python3 tools/make_random_lora.py "$ckpt" "$adapters" --count 8 --rank 16 || exit 1
modules=()
for i in 0 1 2 3 4 5 6 7; do modules+=("a$i=$adapters/a$i"); done
bench() {  # label, then extra bench serve arguments
  local label=$1; shift
  build-gpu/pagoda bench serve --port 8321 --num-prompts "${N:-256}" --max-concurrency "${C:-64}" \
    --random-input-len "${IN:-256}" --random-output-len "${OUT_LEN:-256}" --ignore-eos "$@" >"$OUT/bench_$label.txt" 2>&1
  echo "--- $label (rc $?)"; grep -E "Output token throughput|Total token throughput|Successful|Mean TPOT" "$OUT/bench_$label.txt"
}
serve() {
  build-gpu/pagoda serve "$ckpt" --device cuda --port 8321 --max-num-seqs 64 "$@" >"$OUT/serve.log" 2>&1 &
  pid=$!
  for _ in $(seq 300); do curl -sf localhost:8321/health >/dev/null && return 0; sleep 1; done
  echo "the server did not come up"; tail -20 "$OUT/serve.log"; return 1
}
serve || exit 1
bench base
kill $pid; wait $pid
# One adapter as a single-adapter deployment runs it (vLLM's default --max-loras 1), then in 8 slots.
serve --lora-modules a0="$adapters/a0" --max-loras 1 --max-lora-rank 16 || exit 1
bench one_adapter_max_loras_1 --lora-modules a0
kill $pid; wait $pid
serve --lora-modules "${modules[@]}" --max-loras 8 --max-lora-rank 16 || exit 1
bench one_adapter --lora-modules a0
bench eight_adapters --lora-modules a0 a1 a2 a3 a4 a5 a6 a7
kill $pid; wait $pid
exit $status

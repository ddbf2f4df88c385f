#!/usr/bin/env bash
# Run ON the GPU machine from the repository root, carrying .deps: the mixture-of-experts kernels
# checked and timed, the grouped GEMV for decode against the tiled grouped GEMM (PAGODA_MOE_GEMV=0)
# in the same call.
#   1. builds pagoda, pagoda_gpu_tests and pagoda_tests (tools/device/build.sh) while
#      tools/make_random_checkpoint.py makes the Qwen3-30B-A3B shape with 12 of its 48 layers
#      (SHAPE, into WORK/SHAPE; kept while the machine is held, so a second call skips it);
#   2. the op table's MoE rows (cpu, cuda bf16, cuda fp32) against the naive formulas and the CPU op,
#      and every MoE test of pagoda_tests that runs on CUDA (the transformers fixtures);
#   3. `pagoda bench kernels --filter 30B-A3B` (the grouped GEMMs of one layer, GB/s against the
#      measured copy rate) and `pagoda bench offline` on the checkpoint, each with PAGODA_MOE_GEMV=0
#      then 1.
# Environment: SHAPE (default qwen3-30b-a3b-12l), WORK (default /tmp/moe_gpu), OUT (results).
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/.deps/root/usr/lib/x86_64-linux-gnu" PATH="/usr/local/cuda/bin:$PATH"
shape="${SHAPE:-qwen3-30b-a3b-12l}"
work="${WORK:-/tmp/moe_gpu}"
out="${OUT:-/tmp/moe_gpu_out}"
build="${BUILD:-build-gpu}"
mkdir -p "$work" "$out"
stamp() { echo "=== $1 ($(date +%T), ${SECONDS}s)"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"

stamp "build + checkpoint"
if [[ ! -f $work/$shape/done ]]; then
  (python3 tools/make_random_checkpoint.py --shape "$shape" --out "$work/$shape" > "$out/ckpt.log" 2>&1 &&
    touch "$work/$shape/done"; tail -1 "$out/ckpt.log") &
fi
tools/device/build.sh > "$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
cmake --build "$build" -j"$(nproc)" --target pagoda_tests > "$out/build_tests.log" 2>&1 ||
  { grep -E "error" "$out/build_tests.log" | head; exit 1; }
wait
status=0

stamp "op table (MoE rows) and the MoE tests"
"$build/pagoda_tests" --gtest_filter='Backends/OpTable.*moe*:*Moe*:*moe*' 2>&1 | tee "$out/tests.txt" |
  grep -E "^\[ *(FAILED|PASSED|SKIPPED) |Failure|differ" | head -40
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
"$build/pagoda_gpu_tests" --gtest_filter='*Moe*:*moe*' 2>&1 | grep -E "^\[ *(FAILED|PASSED) |Failure|tests ran" | head

stamp "kernels: the grouped GEMMs of a Qwen3-30B-A3B layer"
for g in 0 1; do
  echo "--- PAGODA_MOE_GEMV=$g"
  PAGODA_MOE_GEMV=$g timeout 200 "$build/pagoda" bench kernels --device cuda --filter 30B-A3B \
    --json "$out/kernels_gemv$g.json" 2>&1 | tee "$out/kernels_gemv$g.txt" | grep -E "^\||copy|GEMM" | head -20
done

if [[ -f $work/$shape/done ]]; then
  "$build/pagoda" info "$work/$shape" 2>&1 | grep -E "^parameters|^active" | head -3
  for g in 0 1; do
    stamp "bench offline, PAGODA_MOE_GEMV=$g"
    PAGODA_MOE_GEMV=$g timeout 200 "$build/pagoda" bench offline "$work/$shape" --device cuda \
      --json "$out/offline_gemv$g.json" > "$out/offline_gemv$g.txt" 2> "$out/offline_gemv$g.err"
    echo "rc $?"
    cat "$out/offline_gemv$g.txt"
  done
else
  echo "no checkpoint ($out/ckpt.log):"; tail -5 "$out/ckpt.log"; status=1
fi
stamp done
exit $status

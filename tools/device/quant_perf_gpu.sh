#!/usr/bin/env bash
# Run ON the GPU machine: issue 31's speed in one call, each part's log under $OUT as it runs —
# the 4-bit checks and kernels (tools/device/int4_gpu.sh PART=check), Nsight Compute on the 4-bit
# skinny GEMM (8B gate_up, one token: DRAM throughput, occupancy, warp stalls), the 8B-shape bf16
# vs GPTQ `bench offline` (int4_gpu.sh PART=bench), then the FP8 KV cache at a long context
# (tools/device/fp8_kv_gpu.sh PART=perf), reusing one build and one random checkpoint. SKIP_NCU=1,
# SKIP_FP8KV=1 leave those parts out.
#   run: carry [".deps/root.tar.xz"], command "bash tools/device/quant_perf_gpu.sh"
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
[[ -d .deps/root || ! -f .deps/root.tar.xz ]] || tar -C .deps -xJf .deps/root.tar.xz
export PATH="/usr/local/cuda/bin:$PATH"
export LD_LIBRARY_PATH="$PWD/.deps/root/usr/lib/x86_64-linux-gnu"
PART=check bash tools/device/int4_gpu.sh > "$OUT/int4_check.log" 2>&1
echo "== 4-bit checks and kernels (rc $?)"
grep -vE "^\[ *OK|Warning|policy|^ *$|suppress|project dev|CMP0167|kv-events" "$OUT/int4_check.log" | tail -45
if [[ -z ${SKIP_NCU:-} ]]; then
  ncu_bin=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  echo "== ncu: linear_int4 8B gate_up T=1"
  "$ncu_bin" --clock-control none -k regex:gemv_int4 -c 2 --section SpeedOfLight --section Occupancy \
    --section WarpStateStats build-gpu/pagoda bench kernels --device cuda --filter "8B gate_up T=1 24576x4096 group" \
    > "$OUT/ncu.log" 2>&1
  grep -E "gemv_int4|DRAM Throughput|Memory Throughput|Duration|Achieved Occupancy|Theoretical Occupancy|Registers|Stall|stall|cycles being stalled" \
    "$OUT/ncu.log" | cut -c1-200 | head -40
fi
PART=bench bash tools/device/int4_gpu.sh > "$OUT/int4_bench.log" 2>&1
echo "== bench offline bf16 vs GPTQ (rc $?)"
grep -vE "Warning|policy|^ *$|suppress|project dev|CMP0167|kv-events|loading weights" "$OUT/int4_bench.log" | tail -30
[[ -n ${SKIP_FP8KV:-} ]] && exit 0
OUT=/tmp/fp8kv_out BUILD=build-gpu SKIP_BUILD=1 PART=perf bash tools/device/fp8_kv_gpu.sh > /dev/null 2>&1
echo "== FP8 KV cache at a long context (rc $?)"
cp /tmp/fp8kv_out/fp8_kv.log "$OUT/fp8_kv_perf.log" 2>/dev/null
cat "$OUT/fp8_kv_perf.log"

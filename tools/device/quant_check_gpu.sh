#!/usr/bin/env bash
# Run ON the GPU machine: every correctness check of issue 31 in one call — the 4-bit fixtures made
# with transformers and checked (tools/device/int4_gpu.sh PART=check), then the FP8 KV cache's checks
# (tools/device/fp8_kv_gpu.sh PART=check) reusing the same build. The carried dependencies may come
# packed (.deps/root.tar.xz: the tree plus .deps/root is over the device's 64 MiB transfer limit).
#   run: carry [".deps/root.tar.xz"], command "bash tools/device/quant_check_gpu.sh"
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
[[ -d .deps/root || ! -f .deps/root.tar.xz ]] || tar -C .deps -xJf .deps/root.tar.xz
status=0
echo "===== 4-bit weights"
OUT="$OUT" PART=check bash tools/device/int4_gpu.sh 2>&1 | tee "$OUT/int4_check.log" || true
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
echo "===== FP8 KV cache"
OUT=/tmp/fp8kv_out BUILD=build-gpu SKIP_BUILD=1 PART=check bash tools/device/fp8_kv_gpu.sh >/dev/null 2>&1 || status=1
cp /tmp/fp8kv_out/fp8_kv.log /tmp/fp8kv_out/optable_all.log "$OUT"/ 2>/dev/null
cat /tmp/fp8kv_out/fp8_kv.log
exit $status

#!/usr/bin/env bash
# Run ON the GPU machine (carry .deps): FP8 weights checked and timed — the op table's linear_fp8
# cases (CUDA against the naive formula and the CPU twin), the CUDA fixture parity test on the FP8
# fixtures (fp32 activations, transformers' dequantized reference), `bench kernels` on the 8B
# linear_fp8 shapes beside bf16 linear, then `bench offline` on a random Qwen3-8B-shape checkpoint,
# bf16 against --quantization fp8, alternating ROUNDS times: tg128 and batched decode.
#   bash tools/device/fp8_gpu.sh   (PART=check: tests and kernels; PART=perf: kernels and runs; PART=bench: runs;
#                                   KT="1|2|8": the kernels' token counts; BS=4,16: the batched points)
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/.deps/root/usr/lib/x86_64-linux-gnu" PATH="/usr/local/cuda/bin:$PATH"
shape="${SHAPE:-qwen3-8b}"
ckpt="/tmp/ckpt_${shape}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
git log -1 --format='commit %h' 2>/dev/null
[[ -d $ckpt ]] || python3 tools/make_random_checkpoint.py --shape "$shape" --out "$ckpt" >/tmp/ckpt.log 2>&1 &
tools/device/build.sh >/dev/null || exit 1
[[ ${PART:-all} == perf || ${PART:-all} == bench ]] || { cmake --build build-gpu -j"$(nproc)" --target pagoda_tests pagoda_gpu_tests 2>&1 | grep -E "error|FAILED" && exit 1; }
status=0
if [[ ${PART:-all} != bench && ${PART:-all} != perf ]]; then
echo "== op table: linear_fp8 (and linear)"
build-gpu/pagoda_tests --gtest_filter='Backends/OpTable.*linear*' 2>&1 |
  grep -E "differ|linear_fp8 T=|^\[ *(FAILED|PASSED) " | grep -v "SKIPPED" | cut -c1-300 | head -40 || true
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
echo "== CUDA fixture parity, FP8 fixtures"
build-gpu/pagoda_gpu_tests --gtest_filter='*fp8*' 2>&1 | grep -E "^\[ *(FAILED|PASSED|  OK) |differ|rror" | cut -c1-300 || true
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
fi
if [[ ${PART:-all} != bench ]]; then
echo "== bench kernels (8B shapes)"
build-gpu/pagoda bench kernels --device cuda --filter "8B" 2>&1 | grep -E "^\| (linear|linear gemv|linear_fp8) .*8B (qkv|gate_up|down) T=(${KT:-1|8|64|2048}) " | grep -v "block 128\|cublaslt" | cut -c1-110 | head -40
fi
wait
[[ ${PART:-all} == check ]] && exit $status
for r in $(seq "${ROUNDS:-2}"); do
  for q in none fp8; do
    flag=(); [[ $q == fp8 ]] && flag=(--quantization fp8)
    build-gpu/pagoda bench offline "$ckpt" --device cuda --pp 512 --tg 128 --batch-sizes ${BS:-16,64} --prompt-len 256 \
      --gen-len 256 "${flag[@]}" > /tmp/fp8_$q.txt 2>&1
    echo "--- weights $q round $r (rc $?)"; grep -E "^\| (pp|tg|B=)|weights loaded|^load|cuBLASLt" /tmp/fp8_$q.txt | cut -c1-160 | head -12
    grep -iE "error" /tmp/fp8_$q.txt | head -3
  done
done
exit $status

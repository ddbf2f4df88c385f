#!/usr/bin/env bash
# Run ON the GPU machine (carry .deps): 4-bit weights (AWQ / GPTQ / compressed-tensors W4A16) made,
# checked and timed.
#   PART=check: with MAKE_FIXTURES=1 the fixtures made with transformers (tools/make_int4_fixtures.py
#     → $OUT/models, to commit; they are committed), the op table's linear_int4 cases (CUDA against the naive formula and the CPU twin), the
#     CUDA fixture parity test on the 4-bit fixtures (fp32 activations), and the 8B kernels.
#   PART=bench: a random Qwen3-8B-shape checkpoint quantized to GPTQ groups of 128
#     (tools/quantize_int4_checkpoint.py), `bench offline` bf16 against it, ROUNDS times: pp512,
#     tg128 and batched decode (BS, default 16,64).
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/.deps/root/usr/lib/x86_64-linux-gnu" PATH="/usr/local/cuda/bin:$PATH"
OUT=${OUT:-/tmp/out}
shape="${SHAPE:-qwen3-8b}"
ckpt="/tmp/ckpt_${shape}" q4="/tmp/ckpt_${shape}_gptq"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
git log -1 --format='commit %h' 2>/dev/null
status=0
if [[ ${PART:-check} == check ]]; then
  if [[ -n ${MAKE_FIXTURES:-} ]]; then
    mkdir -p "$OUT/models"
    python3 tools/make_int4_fixtures.py --out tests/fixtures/models 2>&1 | tail -30 || status=1
    for d in qwen3-tiny-awq qwen3-tiny-gptq qwen3-tiny-w4a16 qwen3_5-tiny-gptq; do
      [[ -d tests/fixtures/models/$d ]] && tar -C tests/fixtures/models -cf "$OUT/models/$d.tar" "$d"
    done
  fi
  tools/device/build.sh >/dev/null || exit 1
  cmake --build build-gpu -j"$(nproc)" --target pagoda_tests 2>&1 | grep -E "error|FAILED" && exit 1
  echo "== op table: linear_int4"
  build-gpu/pagoda_tests --gtest_filter='Backends/OpTable.*linear_int4*' 2>&1 |
    grep -E "differ|linear_int4 T=|^\[ *(FAILED|PASSED) " | grep -v "SKIPPED" | cut -c1-300 | head -40 || true
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  echo "== CPU: family references and the Linear tests on the 4-bit fixtures"
  build-gpu/pagoda_tests --gtest_filter='*awq*:*gptq*:*w4a16*:LinearInt4*:QuantizationConfig*' 2>&1 |
    grep -E "^\[ *(FAILED|PASSED|  OK) |differ|rror" | cut -c1-300 | tail -30 || true
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  echo "== CUDA fixture parity, 4-bit fixtures"
  build-gpu/pagoda_gpu_tests --gtest_filter='*awq*:*gptq*:*w4a16*' 2>&1 | grep -E "^\[ *(FAILED|PASSED|  OK) |differ|rror" | cut -c1-300 || true
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  echo "== bench kernels (8B shapes)"
  build-gpu/pagoda bench kernels --device cuda --filter "8B" 2>&1 |
    grep -E "^\| (linear|linear gemv|linear_int4) .*8B (qkv|gate_up|down) T=(${KT:-1|2|8|16|32|64}) " | grep -v "block 128\|per-channel\|cublaslt" | cut -c1-110 | head -40
  exit $status
fi
( [[ -d $ckpt ]] || python3 tools/make_random_checkpoint.py --shape "$shape" --out "$ckpt" >/tmp/ckpt.log 2>&1
  python3 tools/quantize_int4_checkpoint.py "$ckpt" "$q4" --format gptq --group 128 >/tmp/q4.log 2>&1 ) &
tools/device/build.sh >/dev/null || exit 1
wait
tail -n 2 /tmp/ckpt.log /tmp/q4.log
for r in $(seq "${ROUNDS:-1}"); do
  for dir in "$ckpt" "$q4"; do
    build-gpu/pagoda bench offline "$dir" --device cuda --pp 512 --tg 128 --batch-sizes ${BS:-16,64} --prompt-len 256 \
      --gen-len 256 > /tmp/run.txt 2>&1
    echo "--- $(basename "$dir") round $r (rc $?)"
    cp /tmp/run.txt "$OUT/offline_$(basename "$dir")_$r.txt" 2>/dev/null
    grep -E "^\| (pp|tg|B=)|INFO\] weights: |weights loaded|^load" /tmp/run.txt | cut -c1-160 | head -12
    grep -iE "error" /tmp/run.txt | head -3
  done
done
exit $status

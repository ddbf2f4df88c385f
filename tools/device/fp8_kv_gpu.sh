#!/usr/bin/env bash
# Run ON the GPU machine (carry .deps): the FP8 KV cache (--kv-cache-dtype fp8) on CUDA, checked and
# timed. Builds into $BUILD with tools/device/build.sh, then
#   check: the op table's FP8-cache cases of reshape_and_cache, qk_norm_rope_and_cache and
#          paged_attention on cuda (bf16: tensor cores) and cuda_fp32 (SIMT) against the naive formula
#          and the CPU twin, then every other case of those ops (their kernels changed for all cache
#          dtypes); CudaFp8KvCache (every value written as the CPU encodes it, every code read as it
#          decodes it) and CudaPrefixCaching (the FP8 case: cache on = off token for token); held-out
#          perplexity of the shipped models on cuda with the bf16 and the fp8 cache (within 2% of
#          transformers' bf16);
#   perf:  `bench kernels` paged_attention with the bf16 and the fp8 cache (Qwen3-8B heads), then
#          `bench offline` on a random Qwen3-8B-shape checkpoint at a long context, --kv-cache-dtype
#          auto against fp8, ROUNDS times, both tables printed.
#   bash tools/device/fp8_kv_gpu.sh
# Environment: PART (all | check | perf; default all), BUILD (default /tmp/build-fp8kv), SKIP_BUILD=1
# (reuse $BUILD), PROMPT (8192), GEN (128), BATCH (batched points, default 64), ROUNDS (1), SHAPE
# (qwen3-8b), OUT (default /tmp/fp8kv_out: every log, tee'd as it happens, so a timed-out run still
# brings them back).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out="${OUT:-/tmp/fp8kv_out}"
mkdir -p "$out"
exec > >(tee -a "$out/fp8_kv.log") 2>&1
export LD_LIBRARY_PATH="$PWD/.deps/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="/usr/local/cuda/bin:$PATH"

part="${PART:-all}"
build="${BUILD:-/tmp/build-fp8kv}"
shape="${SHAPE:-qwen3-8b}"
ckpt="/tmp/ckpt_${shape}"
nvidia-smi -L
git log -1 --format='commit %h %s' 2>/dev/null
ckpt_pid=
if [[ $part != check && ! -d $ckpt ]]; then
  python3 tools/make_random_checkpoint.py --shape "$shape" --out "$ckpt" >"$out/ckpt.log" 2>&1 &
  ckpt_pid=$!
fi
if [[ -z ${SKIP_BUILD:-} ]]; then
  BUILD="$build" tools/device/build.sh >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
  if [[ $part != perf ]]; then
    cmake --build "$build" -j"$(nproc)" --target pagoda_tests pagoda_gpu_tests >>"$out/build.log" 2>&1 ||
      { grep -E "error|FAILED" "$out/build.log" | head -20; exit 1; }
  fi
fi
status=0

if [[ $part != perf ]]; then
  ops='Backends/OpTable.*/cuda*_reshape_and_cache:Backends/OpTable.*/cuda*_qk_norm_rope_and_cache:Backends/OpTable.*/cuda*_paged_attention'
  echo "== op table, FP8-cache cases (cuda, cuda_fp32)"
  PAGODA_OPTABLE_LARGE=1 PAGODA_OPTABLE_MATCH=F8_E4M3 "$build/pagoda_tests" --gtest_filter="$ops" >"$out/optable_fp8.log" 2>&1 ||
    status=1
  grep -E "Failure|differ|SKIPPED|FAILED|PASSED|^\[ +OK" "$out/optable_fp8.log" | cut -c1-300 | head -60
  echo "== op table, every case of those ops (cuda, cuda_fp32)"
  PAGODA_OPTABLE_LARGE=1 "$build/pagoda_tests" --gtest_filter="$ops" >"$out/optable_all.log" 2>&1 || status=1
  grep -E "Failure|differ|SKIPPED CASE|FAILED|PASSED" "$out/optable_all.log" | cut -c1-300 | head -60
  echo "== pagoda_gpu_tests: CudaFp8KvCache, CudaPrefixCaching"
  "$build/pagoda_gpu_tests" --gtest_filter='CudaFp8KvCache.*:*CudaPrefixCaching*' >"$out/gputests.log" 2>&1 || status=1
  grep -E "^\[ *(FAILED|PASSED|  OK) |Failure|differ|encoded" "$out/gputests.log" | cut -c1-300 | head -40
  echo "== held-out perplexity on cuda (ctx 512, stride 512): bf16 cache vs fp8 cache, transformers' bf16 reference"
  for model in qwen3-kjv qwen3_5-kjv; do
    want=$(python3 -c "import json; w=[w for w in json.load(open('tests/fixtures/heldout_reference.json'))['models']['$model']['windows'] if w['ctx']==512 and w['stride']==512][0]; print(w['perplexity'])")
    for kv in auto fp8; do
      got=$("$build/pagoda" perplexity "models/$model" --file tests/fixtures/heldout.txt --ctx 512 --stride 512 \
              --device cuda --kv-cache-dtype "$kv" 2>>"$out/perplexity.log" | awk '/^perplexity/ {print $2}')
      verdict=$(python3 -c "g='$got'; print('FAIL (no result)' if not g else ('ok' if abs(float(g)/$want-1) <= 0.02 else 'FAIL (over 2%)'))")
      printf '%-12s kv %-4s perplexity %-10s transformers %.4f  ratio %s  %s\n' "$model" "$kv" "${got:-?}" "$want" \
        "$(python3 -c "g='$got'; print('%.4f' % (float(g)/$want) if g else '?')")" "$verdict"
      [[ $verdict == ok ]] || status=1
    done
  done
fi

if [[ $part != check ]]; then
  echo "== bench kernels: paged_attention, bf16 cache vs fp8 cache (Qwen3-8B heads)"
  "$build/pagoda" bench kernels --device cuda --filter "paged_attention" >"$out/kernels.log" 2>&1
  grep -E "Hq32/Hkv8 D128|Hq16/Hkv8 D128 B=1 q=2048" "$out/kernels.log" | cut -c1-150 | head -30
  [[ -z $ckpt_pid ]] || wait "$ckpt_pid"  # the checkpoint (not a bare wait: the tee above is a child too)
  [[ -f $ckpt/config.json ]] || { echo "no checkpoint at $ckpt:"; tail -5 "$out/ckpt.log"; exit 1; }
  echo "== bench offline $ckpt: B=${BATCH:-64} P=${PROMPT:-8192} G=${GEN:-128}, --kv-cache-dtype auto vs fp8"
  for r in $(seq "${ROUNDS:-1}"); do
    for kv in auto fp8; do
      log="$out/offline_${kv}_$r.txt"
      "$build/pagoda" bench offline "$ckpt" --device cuda --kv-cache-dtype "$kv" --pp 0 --tg 0 \
        --batch-sizes "${BATCH:-64}" --prompt-len "${PROMPT:-8192}" --gen-len "${GEN:-128}" >"$log" 2>&1
      rc=$?
      echo "--- --kv-cache-dtype $kv, round $r (rc $rc)"
      grep -iE "kv cache|blocks" "$log" | head -3 | cut -c1-200
      grep -E "^\|" "$log"
      grep -iE "error" "$log" | head -3
      [ $rc -eq 0 ] || status=1
    done
  done
fi
exit $status

#!/usr/bin/env bash
# On the GPU machine (carry .deps/root.tar.xz): speculative decoding at a real shape — a random
# Qwen3-8B-shape checkpoint (tools/make_random_checkpoint.py; the KJV tokenizer of models/qwen3-kjv
# turns tools/data/repetitive_prompt.txt into ids, all inside Qwen3's vocabulary), n-gram drafts
# (k = 4, lookup 2..4, adaptive by default) against plain decoding, alternating, ROUNDS each
# (SHAPED=1: tools/make_shaped_checkpoint.py's 8B shape instead — one block of weights repeated, a
# model that repeats itself, so the drafts are right: the known-acceptance point; TESTS=0: no tests)
# (tools/bench_spec_decode.sh): single stream (tg128), then BATCHES (default 64) copies of the prompt
# at once. First, with EAGLE3=1, the EAGLE-3 references (tools/device/make_eagle3_fixtures.sh) and the
# CUDA speculative tests (`pagoda_gpu_tests --gtest_filter='*Speculative*:*Eagle3*'`). Logs in $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
[[ -d .deps/root || ! -f .deps/root.tar.xz ]] || tar -C .deps -xJf .deps/root.tar.xz
export LD_LIBRARY_PATH="$PWD/.deps/root/usr/lib/x86_64-linux-gnu" PATH="/usr/local/cuda/bin:$PATH"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if [[ ${SHAPED:-0} == 1 ]]; then  # one block of weights repeated: the model repeats itself, drafts are right
  ckpt=/tmp/ckpt_shaped_qwen3-8b
  [[ -d $ckpt ]] || python3 tools/make_shaped_checkpoint.py --shape qwen3-8b --out "$ckpt" >/tmp/ckpt.log 2>&1 &
else
  ckpt=/tmp/ckpt_qwen3-8b
  [[ -d $ckpt ]] || python3 tools/make_random_checkpoint.py --shape qwen3-8b --out "$ckpt" >/tmp/ckpt.log 2>&1 &
fi
status=0
if [[ ${EAGLE3:-0} == 1 ]]; then
  OUT="$OUT" bash tools/device/make_eagle3_fixtures.sh 2>&1 | tail -12 || status=1
  tar xzf "$OUT/eagle3_fixtures.tar.gz"  # the references, so the CUDA tests below check against them
fi
if [[ ${TESTS:-1} == 1 ]]; then
  tools/device/build.sh >/dev/null || exit 1
  build-gpu/pagoda_gpu_tests --gtest_filter='*Speculative*:*Eagle3*' 2>&1 |
    grep -E "^\[ *(FAILED|PASSED|  OK|SKIPPED) |Failure|rror" | cut -c1-250 | tail -30
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
else
  TARGETS=pagoda tools/device/build.sh >/dev/null || exit 1
fi
wait
cp models/qwen3-kjv/tokenizer.json models/qwen3-kjv/tokenizer_config.json "$ckpt/"
ngram='{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4}'
echo "== qwen3-8b shape ($ckpt), ngram, single stream" | tee -a "$OUT/bench.log"
tools/bench_spec_decode.sh build-gpu/pagoda "$ckpt" "$ngram" "${ROUNDS:-2}" --device cuda 2>&1 | tee -a "$OUT/bench.log"
for b in ${BATCHES:-64}; do
  echo "== qwen3-8b shape, ngram, $b at once" | tee -a "$OUT/bench.log"
  BATCH=$b tools/bench_spec_decode.sh build-gpu/pagoda "$ckpt" "$ngram" "${ROUNDS:-2}" --device cuda 2>&1 | tee -a "$OUT/bench.log"
done
exit $status

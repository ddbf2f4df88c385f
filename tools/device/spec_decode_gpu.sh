#!/usr/bin/env bash
# On the GPU machine (carry .deps): speculative decoding on CUDA — the lossless GPU tests, then
# single-stream decode with and without drafts (tools/bench_spec_decode.sh) on the shipped models:
# n-gram on both, the MTP head on the Qwen3.5 one. Logs in $OUT.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp}
tools/device/build.sh 2>&1 | tail -3
export LD_LIBRARY_PATH="$PWD/.deps/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
build-gpu/pagoda_gpu_tests --gtest_color=no --gtest_filter='*Speculative*' 2>&1 | grep -vE "^\[pagoda" | tee "$out/gputests.log" | tail -15
ngram='{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4}'
for model in models/default models/qwen3-kjv; do
  [[ -d $model ]] || continue
  echo "== $model ngram" | tee -a "$out/bench.log"
  tools/bench_spec_decode.sh build-gpu/pagoda "$model" "$ngram" 5 --device cuda 2>&1 | tee -a "$out/bench.log"
done
for k in 1 2 3; do
  echo "== models/default mtp k=$k" | tee -a "$out/bench.log"
  tools/bench_spec_decode.sh build-gpu/pagoda models/default "{\"method\": \"mtp\", \"num_speculative_tokens\": $k}" 5 \
    --device cuda 2>&1 | tee -a "$out/bench.log"
done

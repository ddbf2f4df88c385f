#!/usr/bin/env bash
# Run ON the GPU machine (carry .deps): the recurrent state in bf16 (--mamba-ssm-cache-dtype
# bfloat16) checked and timed — the op table's gated_delta_rule cases (a bf16-state one among them),
# pagoda_gpu_tests, `bench kernels` on the Qwen3.5-9B GDN shapes with an fp32 and a bf16 state, then
# `bench offline` decode at B sequences on a random 9B-shape checkpoint of LAYERS layers, float32 and
# bfloat16 state alternating ROUNDS times.
#   bash tools/device/ssm_state_gpu.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/.deps/root/usr/lib/x86_64-linux-gnu" PATH="/usr/local/cuda/bin:$PATH"
layers="${LAYERS:-4}" b="${B:-512}"
ckpt="/tmp/ckpt_qwen3.5-9b_${layers}l"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
git log -1 --format='commit %h' 2>/dev/null
tools/device/build.sh >/dev/null || exit 1
cmake --build build-gpu -j"$(nproc)" --target pagoda_tests 2>&1 | grep -E "error|FAILED" && exit 1
[[ -d $ckpt ]] || python3 tools/make_random_checkpoint.py --shape qwen3.5-9b --layers "$layers" --out "$ckpt" >/dev/null 2>&1 &
status=0
echo "== op table: gated_delta_rule"
PAGODA_OPTABLE_LARGE=1 build-gpu/pagoda_tests --gtest_filter='Backends/OpTable.*gated_delta_rule*' 2>&1 |
  grep -E "differ|SKIPPED CASE.*state|FAILED|PASSED" | cut -c1-300 || true
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
echo "== pagoda_gpu_tests"
build-gpu/pagoda_gpu_tests 2>&1 | grep -E "^\[ *(FAILED|PASSED) |differ" | cut -c1-300 || true
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
echo "== bench kernels"
build-gpu/pagoda bench kernels --device cuda --filter "gated_delta_rule" 2>&1 | grep "^| gated.*Hv32"
wait
for r in $(seq "${ROUNDS:-2}"); do
  for dt in float32 bfloat16; do
    build-gpu/pagoda bench offline "$ckpt" --device cuda --pp 0 --tg 0 --batch-sizes "$b" --prompt-len 128 \
      --gen-len 128 --max-num-seqs "$b" --mamba-ssm-cache-dtype "$dt" > /tmp/ssm_$dt.txt 2>&1
    echo "--- state $dt round $r (rc $?)"; grep -E "^\| (point|B=)" /tmp/ssm_$dt.txt; grep -iE "error" /tmp/ssm_$dt.txt | head -3
  done
done
exit $status

#!/usr/bin/env bash
# Run ON the GPU machine (carry .deps): one call that builds, checks and measures, writing every log
# under $OUT (or /tmp/perf_out). Steps are chosen by the STEPS variable (default: all), in order:
#   build     tools/device/build.sh (pagoda + pagoda_gpu_tests, sm_90a)
#   tests     pagoda_gpu_tests (GTEST_FILTER to narrow)
#   offline   pagoda bench offline on a random Qwen3-0.6B-shape checkpoint, CUDA graphs on, then
#             --enforce-eager (same run, same GPU)
#   parity    tools/device/gpu_parity.sh (tiny fixtures' greedy tokens vs transformers)
#   logits    tools/compare_logits.py (pagoda vs HF bf16, HF bf16 vs HF fp32, pagoda vs HF fp32)
#   kernels   pagoda bench kernels
# e.g. STEPS="build tests offline parity" tools/device/perf_run.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-/tmp/perf_out}"
mkdir -p "$out"
steps="${STEPS:-build tests offline parity logits kernels}"
export LD_LIBRARY_PATH="$PWD/.deps/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1
has() { [[ " $steps " == *" $1 "* ]]; }
stamp() { echo "=== $1 ($(date +%T), ${SECONDS}s)"; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader | tee "$out/gpu.txt"
git log -1 --format=%h 2>/dev/null | tee "$out/commit.txt"
if has build; then
  stamp build
  tools/device/build.sh > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
  grep -iE "warning|error" "$out/build.log" | head -20
fi
if has tests; then
  stamp tests
  build-gpu/pagoda_gpu_tests --gtest_color=no --gtest_brief=1 ${GTEST_FILTER:+--gtest_filter=$GTEST_FILTER} \
    > "$out/gpu_tests.log" 2>&1
  tail -25 "$out/gpu_tests.log"
fi
if has offline || has logits; then
  [[ -d /tmp/q06 ]] || python3 tools/make_random_checkpoint.py --shape qwen3-0.6b --out /tmp/q06 > "$out/ckpt.log" 2>&1
fi
if has offline; then
  stamp offline
  build-gpu/pagoda bench offline /tmp/q06 --device cuda --json "$out/offline_graphs.json" \
    > "$out/offline_graphs.txt" 2> "$out/offline_graphs.err"
  cat "$out/offline_graphs.txt"; grep -i "graph\|error" "$out/offline_graphs.err" | head -5
  if [[ -z "${SKIP_EAGER:-}" ]]; then
    build-gpu/pagoda bench offline /tmp/q06 --device cuda --enforce-eager --json "$out/offline_eager.json" \
      > "$out/offline_eager.txt" 2> "$out/offline_eager.err"
    cat "$out/offline_eager.txt"; grep -i "error" "$out/offline_eager.err" | head -5
  fi
fi
if has parity; then
  stamp parity
  tools/device/gpu_parity.sh 2>&1 | tee "$out/parity.txt"
  echo "--- the same with --enforce-eager"
  PARITY_FLAGS=--enforce-eager tools/device/gpu_parity.sh 2>&1 | tee "$out/parity_eager.txt"
fi
if has logits; then
  stamp logits
  python3 tools/compare_logits.py --model /tmp/q06 --pagoda build-gpu/pagoda > "$out/logits.txt" 2>&1
  grep -vE "^  prompt" "$out/logits.txt" | tail -12
fi
if has kernels; then
  stamp kernels
  build-gpu/pagoda bench kernels --json "$out/kernels.json" ${KERNEL_ARGS:-} > "$out/kernels.txt" 2> "$out/kernels.err"
  cat "$out/kernels.txt"; grep -i "error" "$out/kernels.err" | head -5
fi
stamp done

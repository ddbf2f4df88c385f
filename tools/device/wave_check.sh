#!/usr/bin/env bash
# Run ON the GPU machine (carry .deps, made by tools/device/fetch_debs.sh): after a wave of CPU-side
# work, check that the CUDA build still builds, that every GPU test still passes, that the fp32
# fixture parity holds, and that the new HTTP front end serves a CUDA engine end to end:
#   1. tools/device/build.sh, then pagoda_gpu_tests (every kernel vs its CPU twin; fixture parity)
#   2. tools/device/gpu_parity.sh with --dtype float32 (greedy tokens vs transformers fp32)
#   3. `pagoda serve --device cuda` of the shipped model and `pagoda bench serve` against it (200
#      requests, every one must complete), then the offline points of the shipped model
# Everything it prints is the record (docs/benchmarks.md quotes it).
set -uo pipefail
cd "$(dirname "$0")/../.."
status=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
tools/device/build.sh || { echo "BUILD FAILED"; exit 1; }
build="${BUILD:-build-gpu}"
export LD_LIBRARY_PATH="$PWD/.deps/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

echo "=== pagoda_gpu_tests"
"$build/pagoda_gpu_tests" --gtest_color=no 2>&1 | grep -E "^\[  (PASSED|FAILED)|FAILED|tests ran" || status=1
"$build/pagoda_gpu_tests" --gtest_color=no >/dev/null 2>&1 || { echo "pagoda_gpu_tests: FAILED"; status=1; }

echo "=== fp32 parity"
PARITY_FLAGS="--dtype float32" tools/device/gpu_parity.sh || status=1

echo "=== serve --device cuda + bench serve"
"$build/pagoda" serve --device cuda --port 8123 --host 127.0.0.1 > /tmp/serve.log 2>&1 &
pid=$!
for _ in $(seq 1 120); do curl -sf localhost:8123/health >/dev/null 2>&1 && break; sleep 0.5; done
curl -s localhost:8123/v1/chat/completions -H 'Content-Type: application/json' \
  -d '{"messages": [{"role": "user", "content": "Who was Moses?"}], "max_tokens": 32, "temperature": 0}'
echo
"$build/pagoda" bench serve --base-url http://127.0.0.1:8123 --num-prompts 200 --request-rate inf \
  --random-input-len 128 --random-output-len 64 2>&1 | tail -22 || status=1
kill -TERM $pid; wait $pid; echo "serve exit $?"
tail -3 /tmp/serve.log

echo "=== bench offline (shipped model)"
"$build/pagoda" bench offline models/default --device cuda 2>&1 | tail -15 || status=1
echo "wave_check: status $status"
exit $status

#!/usr/bin/env bash
# Run ON the GPU machine (carry .deps): after a merge, in one call — pagoda_gpu_tests whole, and
# `pagoda serve` with no --device on the shipped model: `--device auto` must pick cuda there.
set -uo pipefail
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
tools/device/build.sh >/dev/null || exit 1
export LD_LIBRARY_PATH="$PWD/.deps/root/usr/lib/x86_64-linux-gnu"
status=0
echo "== pagoda_gpu_tests"
build-gpu/pagoda_gpu_tests --gtest_color=no 2>&1 | grep -E "^\[ *(FAILED|PASSED) |Failure" || true
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
echo "== serve with the default --device"
build-gpu/pagoda serve --port 8124 > /tmp/smoke_serve.log 2>&1 &
pid=$!
for _ in $(seq 120); do curl -sf 127.0.0.1:8124/health >/dev/null && break; sleep 0.5; done
curl -s 127.0.0.1:8124/v1/completions -H 'Content-Type: application/json' \
  -d '{"prompt": "In the beginning", "max_tokens": 8, "temperature": 0}' | head -c 300; echo
kill $pid; wait $pid 2>/dev/null
grep -m1 "engine: device" /tmp/smoke_serve.log
grep -q "engine: device cuda" /tmp/smoke_serve.log || { echo "--device auto did not pick cuda"; status=1; }
exit $status

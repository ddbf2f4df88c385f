#!/usr/bin/env bash
# Run ON the GPU machine (carry .deps): real CUDA errors injected into engine steps (docs/faults.md)
# — the CudaFault* GPU tests — then the rest of pagoda_gpu_tests.
set -uo pipefail
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
tools/device/build.sh >/dev/null || exit 1
export LD_LIBRARY_PATH="$PWD/.deps/root/usr/lib/x86_64-linux-gnu"
build="${BUILD:-build-gpu}"
status=0
echo "== injected CUDA faults"
"$build/pagoda_gpu_tests" --gtest_color=no --gtest_filter='CudaFault*:Fixtures/CudaFault*' 2>&1 | tail -40
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
echo "== every GPU test"
"$build/pagoda_gpu_tests" --gtest_color=no 2>&1 | grep -E "^\[ *(FAILED|PASSED) |Failure" || true
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
exit $status

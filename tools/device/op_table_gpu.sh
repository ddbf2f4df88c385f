#!/usr/bin/env bash
# Run ON the GPU machine (carry .deps): the op table on every compiled backend (cpu, cuda bf16,
# cuda fp32), its large cases included, and the GPU test binary.
#   bash tools/device/op_table_gpu.sh [extra gtest filter for the table, default every op]
set -uo pipefail
cd "$(dirname "$0")/../.."
tools/device/build.sh >/dev/null || exit 1
export LD_LIBRARY_PATH="$PWD/.deps/root/usr/lib/x86_64-linux-gnu" PATH="/usr/local/cuda/bin:$PATH"
build="${BUILD:-build-gpu}"
cmake --build "$build" -j"$(nproc)" --target pagoda_tests 2>&1 | grep -E "error|FAILED" && exit 1
status=0
echo "== op table (PAGODA_OPTABLE_LARGE=1)"
PAGODA_OPTABLE_LARGE=1 "$build/pagoda_tests" --gtest_filter="${1:-Backends/OpTable.*:OpTableCases.*}" 2>&1 |
  grep -vE "^\[ *(RUN|OK) " | grep -E "Failure|differ|SKIPPED CASE|FAILED|PASSED" || true
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
echo "== pagoda_gpu_tests"
"$build/pagoda_gpu_tests" 2>&1 | grep -E "^\[ *(FAILED|PASSED) |Failure" || true
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
exit $status

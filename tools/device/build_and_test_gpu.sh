#!/usr/bin/env bash
# Run ON the GPU machine (carry .deps): builds with tools/device/build.sh and runs pagoda_gpu_tests.
#   tools/device/build_and_test_gpu.sh [gtest args, e.g. --gtest_filter='CudaPagedAttention.*']
set -euo pipefail
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
tools/device/build.sh
"${BUILD:-build-gpu}/pagoda_gpu_tests" --gtest_color=no "$@"

#!/usr/bin/env bash
# Run ON the GPU machine, from a copy of the repository that carries .deps (tools/device/fetch_debs.sh,
# run here first): configures against the carried -dev packages, builds pagoda_gpu_tests for the
# GPU's own architecture only (faster than the default sm_80 + sm_90a), and runs it.
#   tools/device/build_and_test_gpu.sh [gtest args, e.g. --gtest_filter='CudaPagedAttention.*']
# Environment: BUILD (build dir, default build-gpu), CUDA_ARCH (default 90a), JOBS (default nproc).
set -euo pipefail
cd "$(dirname "$0")/../.."
root="$PWD/.deps/root"
[[ -d $root/usr ]] || { echo "missing .deps/root: run tools/device/fetch_debs.sh where there is network" >&2; exit 2; }
export PKG_CONFIG_PATH="$root/usr/lib/x86_64-linux-gnu/pkgconfig:$root/usr/share/pkgconfig"
export PKG_CONFIG_SYSROOT_DIR="$root"  # the .pc files say prefix=/usr
export LD_LIBRARY_PATH="$root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="/usr/local/cuda/bin:$PATH"
build="${BUILD:-build-gpu}"
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DPAGODA_TESTS=ON -DPAGODA_BENCH=OFF \
  -DCMAKE_PREFIX_PATH="$root/usr" -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90a}" >/dev/null
cmake --build "$build" -j"${JOBS:-$(nproc)}" --target pagoda_gpu_tests
"$build/pagoda_gpu_tests" --gtest_color=no "$@"

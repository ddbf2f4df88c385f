#!/usr/bin/env bash
# Run ON the GPU machine: builds the named llama.cpp targets (CUDA, sm_90, Release, nothing optional;
# BACKEND=vulkan: the Vulkan backend instead, against the carried .deps/root)
# from a copy of llama.cpp's public source that the caller brought (never downloaded or vendored by
# this repository). Used by llama_bench_run.sh and serve_bench_run.sh for the side-by-side runs.
#
#   tools/device/build_llama_cpp.sh LLAMA_CPP_SOURCE_DIR BUILD_DIR TARGET...
#
# BUILD_TIMEOUT (seconds, default 900) bounds the compile; a later call resumes it.
set -uo pipefail
[[ $# -ge 3 && -d $1 ]] || { echo "usage: $0 LLAMA_CPP_SOURCE_DIR BUILD_DIR TARGET..." >&2; exit 2; }
src=$1 build=$2
shift 2
backend=(-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90)
if [[ ${BACKEND:-cuda} == vulkan ]]; then
  # The loader, headers, glslc and SPIRV-Headers from the carried .debs (tools/device/fetch_vulkan_debs.sh:
  # VULKAN_ROOT is where its Debian 13 tarball was unpacked; Debian 12's headers are too old for it).
  root="${VULKAN_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)/.deps/root}"
  export PATH="$root/usr/bin:$PATH" LD_LIBRARY_PATH="$root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  backend=(-DGGML_CUDA=OFF -DGGML_VULKAN=ON -DCMAKE_PREFIX_PATH="$root/usr" -DLLAMA_BUILD_SERVER=OFF)
fi
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release "${backend[@]}" \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF &&
  timeout "${BUILD_TIMEOUT:-900}" cmake --build "$build" -j"$(nproc)" --target "$@"

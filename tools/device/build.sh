#!/usr/bin/env bash
# Run ON the GPU machine from a copy of the repository that carries .deps (tools/device/fetch_debs.sh,
# run where there is network): builds `pagoda` and `pagoda_gpu_tests` for the GPU's architecture
# against the carried -dev packages. Environment: BUILD (default build-gpu), CUDA_ARCH (default 90a), TARGETS (default
# "pagoda pagoda_gpu_tests"), CMAKE_ARGS (more -D settings, e.g. where NCCL is).
set -euo pipefail
cd "$(dirname "$0")/../.."
# The carried forms, unpacked here: the whole .deps/root (root.tar.xz) or, to stay under the device's
# 64 MiB transfer limit beside a tokenizer, the CUDA build's part of it (root-cuda.tar.xz: no Vulkan);
# Qwen3's full tokenizer for the random checkpoints (qwen3-tokenizer.tar.xz).
for t in root root-cuda; do
  [[ -d .deps/root || ! -f .deps/$t.tar.xz ]] || tar -C .deps -xJf ".deps/$t.tar.xz"
done
[[ -d tests/data/qwen3-tokenizer || ! -f .deps/qwen3-tokenizer.tar.xz ]] ||
  { mkdir -p tests/data && tar -C tests/data -xJf .deps/qwen3-tokenizer.tar.xz; }
root="$PWD/.deps/root"
[[ -d $root/usr ]] || { echo "missing .deps/root: run tools/device/fetch_debs.sh where there is network" >&2; exit 2; }
export PKG_CONFIG_PATH="$root/usr/lib/x86_64-linux-gnu/pkgconfig:$root/usr/share/pkgconfig"
export PKG_CONFIG_SYSROOT_DIR="$root"  # the .pc files say prefix=/usr
export PATH="/usr/local/cuda/bin:$PATH"
# cpp-httplib's .pc names openssl, zlib and brotli as private requirements; the GPU machine has their
# runtime libraries but no .pc files: stand-ins let pkg-config resolve it (nothing is linked from them).
stub="$PWD/.deps/stub-pc"
mkdir -p "$stub"
export PKG_CONFIG_PATH="$PKG_CONFIG_PATH:$stub"
for m in openssl zlib libbrotlicommon libbrotlidec libbrotlienc; do
  pkg-config --exists "$m" 2>/dev/null ||
    printf 'Name: %s\nDescription: stand-in (tools/device/build.sh)\nVersion: 99\n' "$m" > "$stub/$m.pc"
done
build="${BUILD:-build-gpu}"
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DPAGODA_TESTS=ON -DPAGODA_BENCH=OFF \
  -DCMAKE_PREFIX_PATH="$root/usr" -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90a}" ${CMAKE_ARGS:-} >/dev/null
targets=(${TARGETS:-pagoda pagoda_gpu_tests})
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}" 2>&1 | grep -vE "^\[[0-9]+/[0-9]+\] (Building|Linking)" || true
for t in "${targets[@]}"; do test -x "$build/$t" || exit 1; done
echo "LD_LIBRARY_PATH=$root/usr/lib/x86_64-linux-gnu"

#!/usr/bin/env bash
# Run ON the GPU machine (carry .deps, with tools/device/fetch_vulkan_debs.sh's packages): the Vulkan
# backend on the NVIDIA GPU through the driver's Vulkan ICD — the op table (large cases too) and the
# engine tests against the CPU, then `pagoda bench offline` with --device vulkan beside --device
# cuda on the same checkpoints, in one run. Logs under $OUT. (models/ need not be carried: the
# hybrid fixture and a random Qwen3-0.6B-shaped checkpoint made here are benchmarked.)
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-/tmp/vk_out}"
mkdir -p "$out"
root="$PWD/.deps/root"
export LD_LIBRARY_PATH="$root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$root/usr/bin:/usr/local/cuda/bin:$PATH"
stamp() { echo "=== $1 ($(date +%T), ${SECONDS}s)"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
git log -1 --format=%h 2>/dev/null | tee "$out/commit.txt"
# The driver's Vulkan ICD: its manifest where the container has one, else one written here for the
# driver's library (the loader then finds it through VK_DRIVER_FILES).
stamp icd
ls /usr/share/vulkan/icd.d /etc/vulkan/icd.d 2>&1 | tee "$out/icd.txt"
if ! compgen -G '/usr/share/vulkan/icd.d/nvidia*' >/dev/null && ! compgen -G '/etc/vulkan/icd.d/nvidia*' >/dev/null; then
  lib=$(ldconfig -p | grep -oE '/[^ ]*libGLX_nvidia\.so\.0' | head -1)
  echo "no NVIDIA ICD manifest; driver library: ${lib:-none}" | tee -a "$out/icd.txt"
  [[ -n $lib ]] || { echo "this container has no NVIDIA Vulkan driver library"; exit 3; }
  printf '{"file_format_version": "1.0.0", "ICD": {"library_path": "%s", "api_version": "1.3"}}\n' "$lib" \
    > "$out/nvidia_icd.json"
  export VK_DRIVER_FILES="$out/nvidia_icd.json" VK_ICD_FILENAMES="$out/nvidia_icd.json"
fi
stamp build
BUILD=build-gpu tools/device/build.sh > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
grep -q "Vulkan backend ON" build-gpu/CMakeCache.txt 2>/dev/null || grep -i "vulkan" "$out/build.log" | head
cmake --build build-gpu -j"$(nproc)" --target pagoda_tests > "$out/build_tests.log" 2>&1 || { tail -30 "$out/build_tests.log"; exit 1; }
# The devices, and the loader's errors when it finds none (the NVIDIA container's ICD, see docs).
VK_LOADER_DEBUG=error build-gpu/pagoda info tests/fixtures/models/qwen3-tiny-tied 2>&1 |
  grep -iE "loader|vulkan dev|^ +vulkan:" | tee "$out/devices.txt"
stamp optable
PAGODA_OPTABLE_LARGE=1 build-gpu/pagoda_tests --gtest_filter='Backends/OpTable.*vulkan*' > "$out/optable.log" 2>&1
grep -E "^\[ +(FAILED|OK|PASSED) |Failure|differ" "$out/optable.log" | tail -30
stamp engine
build-gpu/pagoda_tests --gtest_filter='*VulkanEngine*' > "$out/engine.log" 2>&1
grep -E "^\[ +(FAILED|OK|PASSED) |Failure" "$out/engine.log" | tail -10
stamp offline
[[ -d /tmp/q06 ]] || python3 tools/make_random_checkpoint.py --shape qwen3-0.6b --out /tmp/q06 > "$out/ckpt.log" 2>&1
for model in tests/fixtures/models/qwen3_5-tiny-text /tmp/q06; do
  for dev in cuda vulkan; do
    name="$(basename "$model")_$dev"
    timeout 300 build-gpu/pagoda bench offline "$model" --device "$dev" --dtype float32 \
      ${BENCH_ARGS:---kv-cache-memory 8GiB --max-model-len 4096} \
      --json "$out/offline_$name.json" > "$out/offline_$name.txt" 2> "$out/offline_$name.err"
    echo "--- $name (rc $?)"; tail -12 "$out/offline_$name.txt"
  done
done
stamp done

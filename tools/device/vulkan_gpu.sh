#!/usr/bin/env bash
# Run ON the GPU machine: the Vulkan backend on the NVIDIA GPU through the driver's Vulkan ICD.
#
# Carry (each call under 64 MiB, so in turns):
#   .deps/root.tar.xz  tools/device/fetch_debs.sh + fetch_vulkan_debs.sh (headers, glslc, libraries)
#   .gl                the device tool's loader .debs (`apt-get download libvulkan1 libegl1 libglvnd0
#                      libopengl0 libgl1 libglx0 libgles2` for amd64), unpacked into / every run
#   .glv               the vulkan-validationlayers .deb: with it the tests run with the layer on
#
# PART (one call each, back to back on one machine; a build stays while the machine is held):
#   probe   the loader finds the GPU? (seconds: tools/device/vulkan_probe.c)
#   build   probe, then pagoda and pagoda_tests (carry .deps/root.tar.xz .gl)
#   run     on that build (carry .gl .glv): the op table (large cases too), every family's fixture
#           through the engine, serve --device vulkan, then (OFFLINE=0 skips it) `bench offline` on
#           Vulkan beside CUDA
#   perf    build pagoda alone, then PERF_RUNS (cuda, vulkan, vulkan_scalar = gemv.comp, vulkan_bN =
#           N commands a submitted batch) on a random Qwen3-0.6B-shaped checkpoint with PERF_ARGS's
#           points, then (PROFILE=0 skips it) every dispatch of a short Vulkan run timed
#   all     (default) build, then run
# Logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-/tmp/vk_out}"
mkdir -p "$out"
[[ -d .deps/root || ! -f .deps/root.tar.xz ]] || tar -C .deps -xJf .deps/root.tar.xz
root="$PWD/.deps/root"
export LD_LIBRARY_PATH="$root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$root/usr/bin:/usr/local/cuda/bin:$PATH"
stamp() { echo "=== $1 ($(date +%T), ${SECONDS}s)"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
git log -1 --format=%h 2>/dev/null | tee "$out/commit.txt"
# The loader and the GL-vendor libraries (libglvnd) the NVIDIA ICD needs, as Debian .debs carried in
# .gl (the device tool's headless-rendering recipe): unpacked into / and registered with ldconfig.
stamp icd
echo "before: $(ldconfig -p | grep -c libvulkan) libvulkan entries" | tee "$out/icd.txt"
if compgen -G '.gl/*.deb' >/dev/null; then
  for f in .gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
ldconfig -p | grep -E 'libvulkan|libGLX_nvidia|libEGL_nvidia|libGLdispatch' | tee -a "$out/icd.txt"
ls /usr/share/vulkan/icd.d /etc/vulkan/icd.d /usr/local/nvidia/share/vulkan/icd.d 2>&1 | tee -a "$out/icd.txt"
nv_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if ! compgen -G '/usr/share/vulkan/icd.d/nvidia*' >/dev/null && ! compgen -G '/etc/vulkan/icd.d/nvidia*' >/dev/null &&
   [[ -f $nv_icd ]]; then
  export VK_DRIVER_FILES=$nv_icd
  export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
fi
echo "VK_DRIVER_FILES=${VK_DRIVER_FILES:-unset}" | tee -a "$out/icd.txt"
# Seconds, not a build, to learn whether the loader finds the GPU.
gcc -I"$root/usr/include" tools/device/vulkan_probe.c -o /tmp/vulkan_probe -L"$root/usr/lib/x86_64-linux-gnu" -lvulkan &&
  VK_LOADER_DEBUG=error,warn /tmp/vulkan_probe 2>&1 | tee "$out/probe.txt"
grep -q "NVIDIA" "$out/probe.txt" || { echo "no NVIDIA Vulkan device (above)"; exit 3; }
[[ ${PART:-all} == probe ]] && exit 0
if [[ ${PART:-all} != run ]]; then
  stamp build
  targets="pagoda pagoda_tests"
  [[ ${PART:-all} == perf ]] && targets=pagoda
  BUILD=build-gpu TARGETS="$targets" tools/device/build.sh > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
  grep -i "vulkan" "$out/build.log" | head -5
fi
[[ ${PART:-all} == build ]] && exit 0
if [[ ${PART:-all} == perf ]]; then
  # The decode GEMV's A/B (gemv16.comp against gemv.comp) beside pagoda's CUDA backend, on a random
  # Qwen3-0.6B-shaped checkpoint, then where a Vulkan decode step's device time goes (every dispatch
  # waited for and timed: PAGODA_VULKAN_PROFILE=1).
  stamp perf
  python3 tools/make_random_checkpoint.py --shape qwen3-0.6b --out /tmp/q06 > "$out/ckpt.log" 2>&1 || { tail "$out/ckpt.log"; exit 1; }
  # PERF_RUNS: cuda, vulkan, vulkan_scalar (gemv.comp), vulkan_bN (PAGODA_VULKAN_BATCH=N commands a
  # submitted batch); PERF_ARGS: the bench's points.
  args=(--dtype float32 --kv-cache-memory 8GiB --max-model-len 4096)
  read -r -a points <<< "${PERF_ARGS:---batch-sizes 1 16 64}"
  for run in ${PERF_RUNS:-cuda vulkan vulkan_scalar}; do
    dev=${run%%_*}
    [[ $run == vulkan_scalar ]] && export PAGODA_VULKAN_GEMV=scalar
    [[ $run == vulkan_b* ]] && export PAGODA_VULKAN_BATCH=${run#vulkan_b}
    timeout 240 build-gpu/pagoda bench offline /tmp/q06 --device "$dev" "${args[@]}" "${points[@]}" \
      --json "$out/perf_$run.json" > "$out/perf_$run.txt" 2>&1
    echo "--- $run (rc $?)"; grep -E "^\| (pp|tg|B=)" "$out/perf_$run.txt"
    unset PAGODA_VULKAN_GEMV PAGODA_VULKAN_BATCH
  done
  [[ ${PROFILE:-1} == 1 ]] || { stamp done; exit 0; }
  PAGODA_VULKAN_PROFILE=1 timeout 120 build-gpu/pagoda bench offline /tmp/q06 --device vulkan --dtype float32 \
    --kv-cache-memory 8GiB --max-model-len 4096 --pp 0 --tg 32 --batch-sizes 1 --prompt-len 16 --gen-len 16 \
    > "$out/profile.txt" 2>&1
  echo "--- profile (rc $?)"; grep -iA40 "shader" "$out/profile.txt" | head -45
  stamp done
  exit 0
fi
# The devices, and the loader's errors when it finds none (the NVIDIA container's ICD, see docs).
VK_LOADER_DEBUG=error build-gpu/pagoda info tests/fixtures/models/qwen3-tiny-tied 2>&1 |
  grep -iE "loader|vulkan dev|^ +vulkan:" | tee "$out/devices.txt"
stamp optable
# The Khronos validation layer (vulkan-validationlayers .deb, carried in .glv: too large to travel
# with .deps in one call) aborts on any error it reports, as in CI.
if compgen -G '.glv/*.deb' >/dev/null; then
  for f in .glv/*.deb; do dpkg -x "$f" /; done
  ldconfig
  export PAGODA_VULKAN_VALIDATION=1
fi
echo "validation: ${PAGODA_VULKAN_VALIDATION:-off}" | tee "$out/validation.txt"
PAGODA_OPTABLE_LARGE=1 build-gpu/pagoda_tests --gtest_filter='Backends/OpTable.*vulkan*' > "$out/optable.log" 2>&1
grep -E "^\[ +(FAILED|OK|PASSED) |Failure|differ" "$out/optable.log" | tail -30
stamp engine
# Every family's fixture through the engine, the delta-rule paths, masks on the device, and `serve
# --device vulkan` answering the README's request as the CPU does (the openai-client case needs node,
# which the GPU machine lacks: it runs on lavapipe in CI).
build-gpu/pagoda_tests --gtest_filter='*VulkanEngine*:*VulkanGdnPath*:StructuredEngine.Vulkan*:VulkanServe.Answers*:VisionReference.OnVulkan*' \
  > "$out/engine.log" 2>&1
grep -E "^\[ +(FAILED|OK|PASSED) |Failure" "$out/engine.log" | tail -40
[[ ${OFFLINE:-1} == 1 ]] || exit 0
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

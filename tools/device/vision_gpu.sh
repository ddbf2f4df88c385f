#!/usr/bin/env bash
# Run ON the GPU machine (carry .deps/root.tar.xz): images in on CUDA, checked and timed.
#   PART=check: pagoda_gpu_tests' CudaVision cases (the multimodal fixture against transformers, fp32,
#     graphs on) and the op table's vision cases on cuda (layer_norm, gelu, rope_axes, segment_attention).
#   PART=bench (carry tests/data/qwen3-tokenizer too): `bench kernels --filter` for the tower's ops, then a random Qwen3.5-9B-shape checkpoint
#     with the vision tower (tools/make_random_checkpoint.py --vision) served on the GPU, and
#     tools/vision_bench.py: time to first token of 1-image requests (new 1024x1024 image each)
#     against text-only requests of the same length, and the encoder's merged tokens per second.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
[[ -d .deps/root || ! -f .deps/root.tar.xz ]] || tar -C .deps -xJf .deps/root.tar.xz
export LD_LIBRARY_PATH="$PWD/.deps/root/usr/lib/x86_64-linux-gnu" PATH="/usr/local/cuda/bin:$PATH"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
status=0
if [[ ${PART:-check} == check ]]; then
  tools/device/build.sh >/dev/null || exit 1
  build-gpu/pagoda_gpu_tests --gtest_filter='*CudaVision*' 2>&1 | grep -E "^\[ *(FAILED|PASSED|  OK) |Failure|rror|Expected|Which|differ" | cut -c1-300
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  cmake --build build-gpu -j"$(nproc)" --target pagoda_tests 2>&1 | grep -E "error|FAILED" && exit 1
  build-gpu/pagoda_tests --gtest_filter='Backends/OpTable.*cuda*layer_norm*:Backends/OpTable.*cuda*gelu*:Backends/OpTable.*cuda*rope_axes*:Backends/OpTable.*cuda*segment_attention*' 2>&1 |
    grep -E "^\[ *(FAILED|PASSED|  OK) |Failure|differ|SKIPPED" | cut -c1-300
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  exit $status
fi
ckpt=/tmp/ckpt_qwen3.5-9b-vision
[[ -f $ckpt/ready ]] || { { [[ -f $ckpt/config.json ]] || python3 tools/make_random_checkpoint.py --shape qwen3.5-9b --vision --out "$ckpt" >/tmp/ckpt.log 2>&1; } &&
  python3 tools/vision_bench.py prepare "$ckpt" "${TOKENIZER_DIR:-tests/data/qwen3-tokenizer}" && touch "$ckpt/ready"; } &
tools/device/build.sh >/dev/null || exit 1
[[ -n ${SKIP_KERNELS:-} ]] || for f in layer_norm gelu rope_axes segment_attention; do build-gpu/pagoda bench kernels --device cuda --filter "$f" 2>&1 | tail -6; done
wait
[[ -f $ckpt/ready ]] || { cat /tmp/ckpt.log; exit 1; }
build-gpu/pagoda serve "$ckpt" --device cuda --port 8123 --served-model-name m --max-model-len 8192 \
  --no-enable-prefix-caching >/tmp/serve.log 2>&1 &
pid=$!
for _ in $(seq 1 240); do curl -sf http://127.0.0.1:8123/health >/dev/null && break; sleep 1; done
python3 tools/vision_bench.py measure 8123 --images 5 --size 1024 | tee "$OUT/vision_bench.json" || status=1
python3 tools/vision_bench.py measure 8123 --images 5 --size 512 | tee -a "$OUT/vision_bench.json" || status=1
kill $pid; wait $pid 2>/dev/null
grep -E "vision|image|error|Error" /tmp/serve.log | head -20
exit $status

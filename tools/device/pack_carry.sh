#!/usr/bin/env bash
# Run HERE after tools/device/fetch_debs.sh (and fetch_vulkan_debs.sh): packs what a device call
# carries into files small enough for the 64 MiB transfer limit beside the tracked tree —
#   .deps/root.tar.xz            the whole .deps/root (Vulkan runs: tools/device/vulkan_gpu.sh)
#   .deps/root-cuda.tar.xz       its CUDA build's part (no Vulkan/SPIR-V, no unused static archives)
#   .deps/qwen3-tokenizer.tar.xz tests/data/qwen3-tokenizer (the random checkpoints' tokenizer)
# tools/device/build.sh unpacks whichever was carried.
set -euo pipefail
cd "$(dirname "$0")/../.."
tar -C .deps -cJf .deps/root.tar.xz root
tar -C .deps -cJf .deps/root-cuda.tar.xz --exclude='root/usr/share/doc*' --exclude='root/usr/share/man' \
  --exclude='root/usr/share/lintian' --exclude='*/libz.a' --exclude='*/libutf8proc.a' --exclude='*/libpng*.a' \
  --exclude='*/libbrotli*.a' --exclude='*/libwebp*.a' --exclude='*/libpcre2*.a' --exclude='*/libjpeg.a' \
  --exclude='root/usr/include/vulkan' --exclude='root/usr/include/spirv' --exclude='root/usr/include/vk_video' \
  --exclude='*libshaderc*' --exclude='root/usr/bin/glslc' --exclude='root/usr/bin/spirv-*' --exclude='*SPIRV*' \
  --exclude='*libvulkan*' root
[[ ! -d tests/data/qwen3-tokenizer ]] || tar -C tests/data -cJf .deps/qwen3-tokenizer.tar.xz qwen3-tokenizer
ls -la .deps/*.tar.xz

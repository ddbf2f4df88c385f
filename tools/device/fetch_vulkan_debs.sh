#!/usr/bin/env bash
# Run HERE (not on the GPU machine), after tools/device/fetch_debs.sh: adds to .deps/root what the
# Vulkan backend builds with — the loader and headers, glslc (shaderc) and spirv-val (and SPIRV-Headers,
# which llama.cpp's Vulkan build needs for the side-by-side) — so that
# tools/device/vulkan_gpu.sh can build and run it on the NVIDIA machine (whose driver brings the
# Vulkan ICD; the machine has no Debian -dev packages and no network).
set -euo pipefail
cd "$(dirname "$0")/../.."
pkgs=(libvulkan1 libvulkan-dev glslc libshaderc1 spirv-tools spirv-headers)
mkdir -p .deps/vkdebs .deps/root
(cd .deps/vkdebs && apt-get download "${pkgs[@]}" >/dev/null)
for f in .deps/vkdebs/*.deb; do dpkg -x "$f" .deps/root; done
rm -rf .deps/vkdebs .deps/root/usr/share/doc .deps/root/usr/share/man
# The carried tree must stay small (64 MiB with the sources): no static SPIRV-Tools, no registry XML,
# only the spirv tool the build runs, and only the headers vulkan.h includes.
rm -rf .deps/root/usr/share/vulkan/registry .deps/root/usr/lib/x86_64-linux-gnu/libSPIRV-Tools*.a
find .deps/root/usr/bin -name 'spirv-*' ! -name spirv-val -delete
find .deps/root/usr/include/vulkan -name 'vulkan*.hpp' -delete
find .deps/root -type l | while read -r l; do
  t=$(readlink "$l")
  if [[ $t == /* ]]; then ln -sfn "$(realpath -m --relative-to="$(dirname "$l")" ".deps/root$t")" "$l"; fi
done
du -sh .deps

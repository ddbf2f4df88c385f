#!/usr/bin/env bash
# Run ON the GPU machine (carry .deps/root-cuda.tar.xz and .deps/fla.tar.gz from
# tools/device/pack_fla.sh): issue 30's must-show 4 side by side in one call — fla's Triton
# chunk_gated_delta_rule (tools/device/fla_gdn_bench.py) and `pagoda bench kernels` on the same
# prefill steps, ROUNDS times alternating.
#   ROUNDS=2 bash tools/device/fla_gdn_gpu.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
export PATH="/usr/local/cuda/bin:$PATH"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" || exit 1
rm -rf /tmp/fla && mkdir -p /tmp/fla && tar -C /tmp/fla -xzf .deps/fla.tar.gz || exit 1
tools/device/build.sh >/dev/null || exit 1
export LD_LIBRARY_PATH="$PWD/.deps/root/usr/lib/x86_64-linux-gnu"
for r in $(seq "${ROUNDS:-2}"); do
  echo "== round $r"
  for c in "16 32 8 1024" "16 16 1 4096" "16 16 8 512"; do
    set -- $c
    PYTHONPATH=/tmp/fla python3 tools/device/fla_gdn_bench.py --hk "$1" --hv "$2" --b "$3" --t "$4" 2>&1 | tail -3
  done
  build-gpu/pagoda bench kernels --device cuda --filter gated_delta_rule 2>&1 | grep -E "q=(1024|4096|512) " | grep -v "state bf16"
done

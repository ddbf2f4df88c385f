#!/usr/bin/env bash
# Run ON the GPU machine (carry .deps): where the time of a model shape's steps goes, kernel by
# kernel, measured by Nsight Compute (gpu__time_duration of every kernel, clocks left alone) over
# `pagoda bench offline` on a random checkpoint of the shape with LAYERS layers (a quarter of
# Qwen3.5-9B's 32 keeps its 3 GDN : 1 attention pattern; per-layer cost is the released model's).
# Two runs: a prefill step (PREFILL_B prompts of PREFILL_P tokens in one step, as the throughput
# profile's steps are) and decode steps at DECODE_B sequences. Then `bench kernels` on the shape's
# own cases (filter KERNEL_FILTER) for their fraction of the roofline.
#   SHAPE=qwen3.5-9b LAYERS=4 tools/device/profile_kernels.sh
# Logs and the per-kernel CSVs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
shape="${SHAPE:-qwen3.5-9b}"
layers="${LAYERS:-4}"
out="${OUT:-/tmp/profile_out}"
ckpt="/tmp/ckpt_${shape}_${layers}l"
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/.deps/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="/usr/local/cuda/bin:$PATH"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
git log -1 --format='commit %h' 2>/dev/null | tee "$out/commit.txt"
tools/device/build.sh > "$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
[[ -d $ckpt ]] || python3 tools/make_random_checkpoint.py --shape "$shape" --layers "$layers" --out "$ckpt" \
  > "$out/ckpt.log" 2>&1 || { tail -5 "$out/ckpt.log"; exit 1; }
ncu_bin=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
profile() {  # name, then bench offline arguments
  local name=$1; shift
  "$ncu_bin" --clock-control none --metrics gpu__time_duration.sum --csv --log-file "$out/$name.csv" \
    build-gpu/pagoda bench offline "$ckpt" --device cuda --pp 0 --tg 0 "$@" > "$out/$name.txt" 2>&1
  echo "--- $name (rc $?): $*"
  python3 tools/device/ncu_summary.py "$out/$name.csv" "${TOP:-25}"
}
profile prefill --batch-sizes "${PREFILL_B:-8}" --prompt-len "${PREFILL_P:-1024}" --gen-len 1 \
  --max-num-batched-tokens 8192 --max-num-seqs 512
profile decode --batch-sizes "${DECODE_B:-512}" --prompt-len 1 --gen-len "${DECODE_G:-8}" --max-num-seqs 512
for f in ${KERNEL_FILTER:-Hv32 9B}; do
  build-gpu/pagoda bench kernels --device cuda --filter "$f" 2>&1 | tee -a "$out/kernels.txt"
done

#!/usr/bin/env bash
# Run ON the GPU machine (carry .deps and a copy of the Qwen3 tokenizer, e.g. .gpu-tok/ from
# tests/data/qwen3-tokenizer): decode tok/s with a JSON schema against without, at B=64 and B=1, on
# a random Qwen3-0.6B-shaped checkpoint, alternating ROUNDS times (`bench offline --json-schema`
# runs each point plain and then under the schema in the same run). Logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-/tmp/so_out}"
tok="${TOK:-.gpu-tok}"
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/.deps/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
tools/device/build.sh > "$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
[[ -d /tmp/q06 ]] || python3 tools/make_random_checkpoint.py --shape qwen3-0.6b --out /tmp/q06 > "$out/ckpt.log" 2>&1
for r in $(seq "${ROUNDS:-3}"); do
  for b in 64 1; do
    build-gpu/pagoda bench offline /tmp/q06 --device cuda --tokenizer "$tok" --pp 0 --tg 0 --batch-sizes "$b" \
      --prompt-len 64 --gen-len 128 --json-schema tools/data/bench_schema.json --json "$out/so_b${b}_r$r.json" \
      > "$out/so_b${b}_r$r.txt" 2> "$out/so_b${b}_r$r.err"
    echo "--- B=$b round $r (rc $?)"; grep -E "^\|" "$out/so_b${b}_r$r.txt" | grep -v -- "---"; tail -3 "$out/so_b${b}_r$r.err"
  done
done

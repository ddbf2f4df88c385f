#!/usr/bin/env bash
# Run ON the GPU machine, from the repository root, carrying .deps and Qwen3's tokenizer (TOKENIZER_DIR):
# `pagoda bench serve` against `pagoda serve` and, with the same client and the same requests,
# against llama.cpp's llama-server, on random bf16 checkpoints of the Qwen3-0.6B and Qwen3.5-0.8B
# shapes (tools/make_random_checkpoint.py) and the GGUF conversion of the same checkpoints.
# llama_bench_run.sh compares the offline engines on the same checkpoints and build (same WORK).
#
#   tools/device/serve_bench_run.sh LLAMA_CPP_SOURCE_DIR
#
# LLAMA_CPP_SOURCE_DIR is a checkout (or `git archive`) of llama.cpp's public source that the caller
# brought; this script never downloads or vendors it, it only builds llama-server from it (CUDA,
# sm_90) and runs its convert_hf_to_gguf.py. Checkpoints and GGUFs are made by
# make_gguf_checkpoint.sh (shared with llama_bench_run.sh; WORK/SHAPE/ready2 when done), so both
# servers get the same weights and the same tokenizer: Qwen3's tokenizer.json padded with placeholder
# tokens up to the checkpoint's vocab_size, so that every id random weights can sample decodes
# (Qwen3.5's vocabulary is 248,320; Qwen3's tokenizer has 151,669).
#
# The same helper zeroes, in the checkpoint and so in the GGUF, the rows of the embedding and lm_head
# of every token whose byte-level-BPE bytes are not valid UTF-8 on their own. Random weights would
# otherwise generate arbitrary byte fragments, and llama-server fails such a request (its chat-output
# parser, common_chat_peg_parse, rejects malformed UTF-8 even for /v1/completions). The client sends
# temperature 0 (greedy): a zero row gives a logit of exactly 0 while the largest of ~150k random
# logits is far above 0, so these tokens are never generated and every output is valid UTF-8, for
# both servers alike. Shapes, bytes moved and FLOPs are unchanged, so it is done always (harmless for
# the offline benchmarks too). Checkpoints from before this (marked only by the older WORK/SHAPE/ready)
# are zeroed and converted again.
#
# Environment:
#   STEPS       build ckpt bench (default: all, in that order)
#   SHAPES      default "qwen3-0.6b qwen3.5-0.8b"
#   SERVERS     default "pagoda llama"
#   CONC        concurrency levels, default "1 16 64"
#   NUM_PROMPTS requests per level (default: max(32, 4 x concurrency))
#   INPUT_LEN / OUTPUT_LEN   default 280 / 256 (random token-id prompts, ignore_eos)
#   DATASET     random (default) or sharegpt-like (`bench serve --dataset-name sharegpt-like`:
#               log-normal input and output lengths, medians 120 / 140 tokens; INPUT_LEN/OUTPUT_LEN unused)
#   SERVE_ARGS  extra flags for `pagoda serve` (e.g. --max-num-seqs 512)
#   NO_GGUF     1: checkpoints without their GGUF (SERVERS=pagoda only; make_gguf_checkpoint.sh)
#   WORK        scratch (builds, checkpoints, GGUFs), default /tmp/serve_bench
#   OUT         where the results go (gpu.txt, commit.txt, tables.md, results.tgz, logs.tgz),
#               default /tmp/serve_bench_out
#   TOKENIZER_DIR  Qwen3's tokenizer.json (or tokenizer.json.gz) + tokenizer_config.json
#               (default tests/data/qwen3-tokenizer)
#   BUILD_TIMEOUT  seconds for the two builds (default 900); a later call resumes them
set -uo pipefail
[[ $# -eq 1 && -d $1 ]] || { echo "usage: $0 LLAMA_CPP_SOURCE_DIR" >&2; exit 2; }
src=$(realpath "$1")
cd "$(dirname "$0")/../.."
repo=$PWD
out="${OUT:-/tmp/serve_bench_out}"
work="${WORK:-/tmp/serve_bench}"
logs="$work/logs"
mkdir -p "$out" "$work" "$logs"
tok="${TOKENIZER_DIR:-tests/data/qwen3-tokenizer}"
steps="${STEPS:-build ckpt bench}"
shapes="${SHAPES:-qwen3-0.6b qwen3.5-0.8b}"
servers="${SERVERS:-pagoda llama}"
conc="${CONC:-1 16 64}"
input_len="${INPUT_LEN:-280}"
dataset=(--random-input-len "${INPUT_LEN:-280}" --random-output-len "${OUTPUT_LEN:-256}")
[[ ${DATASET:-random} == sharegpt-like ]] && dataset=(--dataset-name sharegpt-like)
read -r -a serve_args <<< "${SERVE_ARGS:-}"
output_len="${OUTPUT_LEN:-256}"
export LD_LIBRARY_PATH="$repo/.deps/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1
has() { [[ " $steps " == *" $1 "* ]]; }
stamp() { echo "=== $1 ($(date +%T), ${SECONDS}s)"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
git log -1 --format=%h 2>/dev/null | tee "$out/commit.txt"

if has build; then
  stamp "build pagoda and llama-server (in parallel)"
  (timeout "${BUILD_TIMEOUT:-900}" tools/device/build.sh > "$logs/build_pagoda.log" 2>&1; echo "pagoda build rc $?") &
  if [[ " $servers " == *" llama "* ]]; then
    (
      tools/device/build_llama_cpp.sh "$src" "$work/llama-build" llama-server > "$logs/build_llama.log" 2>&1
      echo "llama-server build rc $?"
    ) &
  fi
fi

if has ckpt; then
  for shape in $shapes; do
    stamp "checkpoint + GGUF $shape"
    tools/device/make_gguf_checkpoint.sh "$shape" "$work/$shape" "$src" "$tok" > "$logs/ckpt_$shape.log" 2>&1 ||
      tail -25 "$logs/ckpt_$shape.log"
    grep -a '^\[ckpt\]' "$logs/ckpt_$shape.log" | tail -1
  done
fi
has build && { wait; stamp "builds done"; grep -iE "warning|error" "$logs/build_pagoda.log" | head -10; \
  grep -iE "error" "$logs/build_llama.log" | head -10; }

wait_up() {  # URL PID: until /health answers 200 (llama-server answers 503 while loading)
  for _ in $(seq 1 600); do
    kill -0 "$2" 2>/dev/null || return 1
    [[ $(curl -s -o /dev/null -w '%{http_code}' "$1/health") == 200 ]] && return 0
    sleep 0.2
  done
  return 1
}

tables() {  # the markdown tables of every result so far, and the results, into $OUT
  python3 - "$work" <<'EOF' | tee "$out/tables.md"
import glob, json, os, sys
rows = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*_c*.json"))):
    j = json.load(open(f))
    shape, server, c = j["label"].rsplit("_", 2)
    rows.setdefault(shape, []).append((int(c[1:]), server, j))
for shape, rs in rows.items():
    print(f"\n{shape}\n")
    print("| concurrency | server | requests (failed) | req/s | output tok/s | total tok/s | TTFT mean / p50 / p99 ms"
          " | TPOT mean / p50 ms | ITL p50 / p99 ms | E2EL mean ms | peak concurrency |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for c, server, j in sorted(rs, key=lambda r: (r[0], r[1] != "pagoda")):
        print(f"| {c} | {server} | {j['completed']} ({j['failed']}) | {j['request_throughput']:.2f} |"
              f" {j['output_throughput']:,.0f} | {j['total_token_throughput']:,.0f} |"
              f" {j['mean_ttft_ms']:.1f} / {j['median_ttft_ms']:.1f} / {j['p99_ttft_ms']:.1f} |"
              f" {j['mean_tpot_ms']:.2f} / {j['median_tpot_ms']:.2f} | {j['median_itl_ms']:.2f} / {j['p99_itl_ms']:.2f} |"
              f" {j['mean_e2el_ms']:.0f} | {j['peak_concurrency']} |")
EOF
  tar czf "$out/results.tgz" -C "$work" $(cd "$work" && ls ./*_c*.json ./*_c*.txt ./*_c*.svg 2>/dev/null)
  tar czf "$out/logs.tgz" -C "$logs" .
}

if has bench; then
  port=18000
  for shape in $shapes; do
    dir="$work/$shape"
    for server in $servers; do
      port=$((port + 1))
      url="http://127.0.0.1:$port"
      if [[ $server == pagoda ]]; then
        [[ -f $dir/zeroed ]] || { echo "no checkpoint for $shape ($dir/zeroed; STEPS=ckpt): skipping pagoda"; continue; }
        build-gpu/pagoda serve "$dir" --device cuda --host 127.0.0.1 --port "$port" --max-model-len 2048 \
          "${serve_args[@]}" > "$logs/serve_${server}_$shape.log" 2>&1 &
      else
        [[ -f $dir/ready2 ]] || { echo "no GGUF for $shape ($dir/ready2; STEPS=ckpt): skipping llama.cpp"; continue; }
        "$work/llama-build/bin/llama-server" -m "$dir/model.gguf" --host 127.0.0.1 --port "$port" \
          -np 64 -c $((64 * 768)) -fa on -ngl 99 --threads-http 128 > "$logs/serve_${server}_$shape.log" 2>&1 &
      fi
      pid=$!
      stamp "$server serving $shape (pid $pid)"
      if ! wait_up "$url" "$pid"; then
        echo "$server did not come up:"; tail -20 "$logs/serve_${server}_$shape.log"; kill "$pid" 2>/dev/null; continue
      fi
      for c in $conc; do
        n="${NUM_PROMPTS:-$(( c * 4 > 32 ? c * 4 : 32 ))}"
        tag="${shape}_${server}_c$c"
        build-gpu/pagoda bench serve --base-url "$url" --num-prompts "$n" --max-concurrency "$c" \
          "${dataset[@]}" --num-warmups 2 --seed 0 \
          --label "$tag" --disable-tqdm --result-file "$work/$tag.json" --plot "$work/$tag.svg" \
          > "$work/$tag.txt" 2>&1
        echo "--- $tag (rc $?, $n prompts)"
        grep -E "Successful|Failed|duration|Output token thr|Mean TTFT|Median TTFT|Mean TPOT|Median ITL|^error" \
          "$work/$tag.txt"
        tables > /dev/null
      done
      kill "$pid" 2>/dev/null
      wait "$pid" 2>/dev/null
    done
  done
fi
has bench && tables
tar czf "$out/logs.tgz" -C "$logs" .
stamp done

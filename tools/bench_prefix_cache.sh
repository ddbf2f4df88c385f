#!/usr/bin/env bash
# Prefix caching on against off, side by side in one run (issue 16's measurement), with
# `pagoda bench serve` against two servers of the same model: one with --enable-prefix-caching (the
# default), one with --no-enable-prefix-caching. The two are measured in turn (on off on off ...) so
# that drift on a shared machine hits both; medians of the runs, and the ratio on/off.
#   tools/bench_prefix_cache.sh PAGODA_BIN MODEL_DIR RUNS [serve flags...]
#   e.g. tools/bench_prefix_cache.sh build/pagoda models/default 3 --threads 2
# BENCH_ARGS: more `bench serve` flags (e.g. "--vocab-size 512" for a model without a tokenizer).
# Figures:
#   repeated prefixes: vLLM's prefix_repetition dataset, 4 prefixes of 2,000 tokens each followed by
#     a unique 24-token suffix, 40 requests one at a time: median TTFT (and the hit rate);
#   multi-turn: 8 conversations of 5 turns (a 512-token first message, 64-token replies and user
#     messages), 8 in flight, each turn sent when the last one is done: median TTFT, hit rate;
#   unique prompts: the random dataset (nothing to hit), 1,024-token prompts, 64 output tokens,
#     8 in flight: output token throughput: the cost of the cache's bookkeeping and snapshots.
set -euo pipefail
bin=$1 model=$2 runs=$3
shift 3
out=$(mktemp -d)
port_on=18431 port_off=18432
"$bin" serve "$model" --port $port_on --enable-prompt-tokens-details --max-model-len 2048 "$@" >"$out/on.log" 2>&1 &
pid_on=$!
"$bin" serve "$model" --port $port_off --enable-prompt-tokens-details --max-model-len 2048 --no-enable-prefix-caching "$@" \
  >"$out/off.log" 2>&1 &
pid_off=$!
trap 'kill $pid_on $pid_off 2>/dev/null; wait 2>/dev/null' EXIT
up() { python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$1/health', timeout=2)" 2>/dev/null; }
for port in $port_on $port_off; do
  for _ in $(seq 300); do up $port && break; sleep 0.2; done
  up $port || { echo "the server on port $port did not come up:"; for f in "$out"/*.log; do echo "== $f"; tail -n 20 "$f"; done; exit 1; }
done
bench() {  # PORT NAME RUN ARGS...
  local port=$1 name=$2 run=$3
  shift 3
  echo "[bench_prefix_cache] $name run $run (${SECONDS}s)" >&2
  "$bin" bench serve --base-url "http://127.0.0.1:$port" --disable-tqdm --seed "$run" --result-file "$out/$name.$run.json" \
    ${BENCH_ARGS:-} "$@" >/dev/null
}
repeated=(--dataset-name prefix_repetition --num-prompts 40 --prefix-repetition-prefix-len 2000
          --prefix-repetition-suffix-len 24 --prefix-repetition-num-prefixes 4 --prefix-repetition-output-len 16
          --max-concurrency 1)
multiturn=(--dataset-name multi-turn --num-prompts 40 --multi-turn-turns 5 --random-input-len 512
           --random-output-len 64 --multi-turn-user-len 64 --max-concurrency 8)
unique=(--dataset-name random --num-prompts 32 --random-input-len 1024 --random-output-len 64 --max-concurrency 8)
for ((i = 0; i < runs; i++)); do
  bench $port_on repeated_on "$i" "${repeated[@]}"
  bench $port_off repeated_off "$i" "${repeated[@]}"
  bench $port_on multiturn_on "$i" "${multiturn[@]}"
  bench $port_off multiturn_off "$i" "${multiturn[@]}"
  bench $port_on unique_on "$i" "${unique[@]}"
  bench $port_off unique_off "$i" "${unique[@]}"
done
python3 - "$out" "$runs" <<'PY'
import json, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
def med(name, key):
    return statistics.median(json.load(open(f"{out}/{name}.{i}.json"))[key] for i in range(runs))
rows = [("repeated prefixes", "median TTFT (ms)", "repeated", "median_ttft_ms"),
        ("repeated prefixes", "mean TTFT (ms)", "repeated", "mean_ttft_ms"),
        ("repeated prefixes", "prefix cache hit rate", "repeated", "prefix_cache_hit_rate"),
        ("multi-turn", "median TTFT (ms)", "multiturn", "median_ttft_ms"),
        ("multi-turn", "prefix cache hit rate", "multiturn", "prefix_cache_hit_rate"),
        ("unique prompts", "output tok/s", "unique", "output_throughput"),
        ("unique prompts", "median TTFT (ms)", "unique", "median_ttft_ms"),
        ("unique prompts", "prefix cache hit rate", "unique", "prefix_cache_hit_rate")]
print(f"{'dataset':18} {'figure':22} {'caching on':>11} {'caching off':>12} {'on/off':>7}")
for ds, fig, name, key in rows:
    on, off = med(f"{name}_on", key), med(f"{name}_off", key)
    ratio = f"{on / off:7.3f}" if off else "      -"
    print(f"{ds:18} {fig:22} {on:11.3f} {off:12.3f} {ratio}")
PY
grep -h "Memory plan\|snapshots" "$out/on.log" | head -3

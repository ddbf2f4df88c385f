#!/usr/bin/env bash
# pagoda's CPU backend beside llama.cpp's CPU build, on the same checkpoints, in one run: for each
# model, ROUNDS rounds of, in turn, pp512 with `pagoda bench offline --device cpu --pp 512 --tg 0`
# and `llama-bench -p 512 -n 0 -r 1`, then tg128 with `pagoda bench offline --pp 0 --tg 128` (which
# also measures the streaming read bandwidth just before it) and `llama-bench -p 0 -n 128 -r 1`, on
# the same checkpoint converted to a bf16 GGUF (tools/checkpoint_to_gguf.py). Each pair runs
# seconds apart and the order flips every round, so that the drift of a shared machine hits both.
# Prints every round and the medians, the pagoda/llama.cpp ratios (median and range of the
# per-round ratios), and decode as GB/s of weights against the read bandwidth of the same round.
#
#   LLAMA_SRC=/path/to/llama.cpp LLAMA_BUILD=/path/to/its/cpu/build \
#     tools/bench_llama_cpp_cpu.sh ROUNDS MODEL_DIR...
#
# llama.cpp is built outside the repository (see tools/llama_cpp_cpu_check.sh for the commands and
# the check that both engines compute the same model). Env: PAGODA (build/pagoda), THREADS (2),
# PP (512), TG (128), WORK (/tmp/pagoda-llama-bench:
# the GGUFs, converted once per checkpoint, and every run's output), PAGODA_FLAGS (extra flags for
# pagoda bench offline), PAGODA_ALT_ENV (e.g. "PAGODA_CPU_PREFILL=exact": each round also runs pagoda
# under these environment variables for its pp point, reported beside the default).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${LLAMA_SRC:?set LLAMA_SRC to a llama.cpp source tree (its gguf-py is used)}"
: "${LLAMA_BUILD:?set LLAMA_BUILD to its CPU build directory}"
(($# >= 2)) || { echo "usage: tools/bench_llama_cpp_cpu.sh ROUNDS MODEL_DIR..." >&2; exit 2; }
rounds=$1
shift
PAGODA=${PAGODA:-build/pagoda}
THREADS=${THREADS:-2}
PP=${PP:-512}
TG=${TG:-128}
WORK=${WORK:-/tmp/pagoda-llama-bench}
PY=${PY:-/usr/bin/python3}
mkdir -p "$WORK"
echo "# $(date -u '+%F %T UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# pagoda $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src || echo '+changes'), llama.cpp $LLAMA_BUILD"
for model in "$@"; do
  name=$(basename "$model")
  gguf="$WORK/$name-bf16.gguf"
  if [[ ! -s $gguf || $model/model.safetensors -nt $gguf ]]; then
    "$PY" tools/checkpoint_to_gguf.py "$model" --out "$gguf" --gguf-py "$LLAMA_SRC/gguf-py" >&2
  fi
  pagoda() {  # tag pp tg [env assignments...]
    local tag=$1 pp=$2 tg=$3
    shift 3
    env "$@" "$PAGODA" bench offline "$model" --device cpu --threads "$THREADS" --pp "$pp" --tg "$tg" \
      --batch-sizes 1 --prompt-len 16 --gen-len 1 --max-model-len $((PP + TG + 64)) ${PAGODA_FLAGS:-} \
      --json "$WORK/$name.$tag.$r.json" >"$WORK/$name.$tag.$r.txt" 2>/dev/null
  }
  llama() {  # tag pp tg
    "$LLAMA_BUILD/bin/llama-bench" -m "$gguf" -p "$2" -n "$3" -t "$THREADS" -r 1 -o jsonl \
      >"$WORK/$name.$1.$r.jsonl" 2>/dev/null
  }
  alt() { [[ -z ${PAGODA_ALT_ENV:-} ]] || pagoda alt-pp "$PP" 0 $PAGODA_ALT_ENV; }
  for ((r = 0; r < rounds; r++)); do
    if ((r % 2 == 0)); then
      pagoda pagoda-pp "$PP" 0; llama llama-pp "$PP" 0; alt
      pagoda pagoda-tg 0 "$TG"; llama llama-tg 0 "$TG"
    else
      alt; llama llama-pp "$PP" 0; pagoda pagoda-pp "$PP" 0
      llama llama-tg 0 "$TG"; pagoda pagoda-tg 0 "$TG"
    fi
    echo "# $name round $((r + 1)) done, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  done
  "$PY" - "$WORK" "$name" "$rounds" "$PP" "$TG" "$gguf" "${PAGODA_ALT_ENV:-}" <<'PY'
import json, os, re, statistics, sys
work, name, rounds, pp, tg, gguf, alt = sys.argv[1:8]
rounds = int(rounds)
def pagoda(tag, r, point, key):
    return {p["name"]: p for p in json.load(open(f"{work}/{name}.{tag}.{r}.json"))["points"]}[point][key]
def llama(tag, r):
    return json.loads(open(f"{work}/{name}.{tag}.{r}.jsonl").readline())["avg_ts"]
rows = []
for r in range(rounds):
    txt = open(f"{work}/{name}.pagoda-tg.{r}.txt").read()
    m = re.search(r"GB/s of weights read = (\d+)% of the ([\d.]+) GB/s streaming read", txt)
    wb = re.search(r"\(weights ([\d.]+) GiB\)", txt)
    x = dict(p_pp=pagoda("pagoda-pp", r, f"pp{pp}", "prefill_tok_s"), l_pp=llama("llama-pp", r),
             p_tg=pagoda("pagoda-tg", r, f"tg{tg}", "decode_tok_s"), l_tg=llama("llama-tg", r),
             read=float(m.group(2)) if m else 0.0, wbytes=float(wb.group(1)) * 2**30 if wb else 0.0)
    if alt:
        x["a_pp"] = pagoda("alt-pp", r, f"pp{pp}", "prefill_tok_s")
    rows.append(x)
print(f"\n## {name} (llama.cpp: {os.path.basename(gguf)}; weights {rows[0]['wbytes'] / 1e9:.3f} GB)")
a_head = f" pagoda pp{pp} with {alt} | ratio |" if alt else ""
print(f"| round | pagoda pp{pp} | llama.cpp pp{pp} | ratio |{a_head} pagoda tg{tg} | llama.cpp tg{tg} | ratio | "
      "read GB/s | pagoda decode GB/s (fraction of read) | llama.cpp decode GB/s (fraction) |")
print("|---" * (10 + (2 if alt else 0)) + "|")
fr = lambda g, rd: f"{g:.1f} ({100 * g / rd:.0f}%)" if rd else f"{g:.1f}"
for i, x in enumerate(rows):
    pg, lg = x["p_tg"] * x["wbytes"] / 1e9, x["l_tg"] * x["wbytes"] / 1e9
    a_col = f" {x['a_pp']:.1f} | {x['a_pp'] / x['l_pp']:.2f} |" if alt else ""
    print(f"| {i + 1} | {x['p_pp']:.1f} | {x['l_pp']:.1f} | {x['p_pp'] / x['l_pp']:.2f} |{a_col} {x['p_tg']:.2f} | "
          f"{x['l_tg']:.2f} | {x['p_tg'] / x['l_tg']:.2f} | {x['read']:.1f} | {fr(pg, x['read'])} | {fr(lg, x['read'])} |")
med = lambda k: statistics.median(x[k] for x in rows)
def ratio(a, b):
    q = [x[a] / x[b] for x in rows]
    return f"**{statistics.median(q):.2f}** ({min(q):.2f}..{max(q):.2f})"
fp = [x["p_tg"] * x["wbytes"] / 1e9 / x["read"] for x in rows if x["read"]]
fl = [x["l_tg"] * x["wbytes"] / 1e9 / x["read"] for x in rows if x["read"]]
a_col = f" {med('a_pp'):.1f} | {ratio('a_pp', 'l_pp')} |" if alt else ""
print(f"| median | {med('p_pp'):.1f} | {med('l_pp'):.1f} | {ratio('p_pp', 'l_pp')} |{a_col} {med('p_tg'):.2f} | "
      f"{med('l_tg'):.2f} | {ratio('p_tg', 'l_tg')} | {med('read'):.1f} | "
      f"{100 * statistics.median(fp):.0f}% | {100 * statistics.median(fl):.0f}% |")
PY
done

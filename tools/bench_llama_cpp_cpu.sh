#!/usr/bin/env bash
# pagoda's CPU backend beside llama.cpp's CPU build, on the same checkpoints, in one run: for each
# model, ROUNDS rounds of `pagoda bench offline --device cpu` (pp512, tg128; it also measures the
# streaming read bandwidth just before its tg point) and `llama-bench -p 512 -n 128` on the same
# checkpoint converted to a bf16 GGUF (tools/checkpoint_to_gguf.py), the two in turn (the order
# flips every round) so that the machine's drift hits both. Prints every run and, per model, the
# medians, pagoda/llama.cpp ratios (with the range of the per-round ratios), and decode as GB/s of
# weights against the read bandwidth measured in the same rounds.
#
#   LLAMA_SRC=/path/to/llama.cpp LLAMA_BUILD=/path/to/its/cpu/build \
#     tools/bench_llama_cpp_cpu.sh ROUNDS MODEL_DIR...
#
# llama.cpp is built outside the repository (see tools/llama_cpp_cpu_check.sh for the commands and
# the check that both engines compute the same model). Env: PAGODA (build/pagoda), THREADS (2),
# LLAMA_REPS (llama-bench repetitions per round, 2), PP (512), TG (128), WORK (/tmp/pagoda-llama-bench:
# the GGUFs, converted once per checkpoint, and every run's output), PAGODA_FLAGS (extra flags for
# pagoda bench offline), PAGODA_ALT_ENV (e.g. "PAGODA_CPU_PREFILL=bf16": each round also runs pagoda
# under these environment variables, reported as a third engine beside the default).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${LLAMA_SRC:?set LLAMA_SRC to a llama.cpp source tree (its gguf-py is used)}"
: "${LLAMA_BUILD:?set LLAMA_BUILD to its CPU build directory}"
(($# >= 2)) || { echo "usage: tools/bench_llama_cpp_cpu.sh ROUNDS MODEL_DIR..." >&2; exit 2; }
rounds=$1
shift
PAGODA=${PAGODA:-build/pagoda}
THREADS=${THREADS:-2}
LLAMA_REPS=${LLAMA_REPS:-2}
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
  for ((r = 0; r < rounds; r++)); do
    run_pagoda() {  # $1: output tag, then env assignments
      local tag=$1
      shift
      env "$@" "$PAGODA" bench offline "$model" --device cpu --threads "$THREADS" --pp "$PP" --tg "$TG" --batch-sizes 1 \
        --prompt-len 16 --gen-len 1 --max-model-len $((PP + TG + 64)) ${PAGODA_FLAGS:-} \
        --json "$WORK/$name.$tag.$r.json" >"$WORK/$name.$tag.$r.txt" 2>/dev/null
    }
    run_llama() {
      "$LLAMA_BUILD/bin/llama-bench" -m "$gguf" -p "$PP" -n "$TG" -t "$THREADS" -r "$LLAMA_REPS" -o jsonl \
        >"$WORK/$name.llama.$r.jsonl" 2>/dev/null
    }
    alt() { [[ -z ${PAGODA_ALT_ENV:-} ]] || run_pagoda alt $PAGODA_ALT_ENV; }
    if ((r % 2 == 0)); then run_pagoda pagoda; run_llama; alt; else alt; run_llama; run_pagoda pagoda; fi
    echo "# $name round $((r + 1)) done, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  done
  for tag in pagoda ${PAGODA_ALT_ENV:+alt}; do
  "$PY" - "$WORK" "$name" "$rounds" "$PP" "$TG" "$gguf" "$tag" "${PAGODA_ALT_ENV:-}" <<'PY'
import json, os, re, statistics, sys
work, name, rounds, pp, tg, gguf, tag, alt = sys.argv[1:9]
rounds = int(rounds)
rows = []
for r in range(rounds):
    pts = {p["name"]: p for p in json.load(open(f"{work}/{name}.{tag}.{r}.json"))["points"]}
    txt = open(f"{work}/{name}.{tag}.{r}.txt").read()
    m = re.search(r"GB/s of weights read = (\d+)% of the ([\d.]+) GB/s streaming read", txt)
    wb = re.search(r"\(weights ([\d.]+) GiB\)", txt)
    lb = {}
    for line in open(f"{work}/{name}.llama.{r}.jsonl"):
        j = json.loads(line)
        lb["pp" if j["n_prompt"] > 0 else "tg"] = j["avg_ts"]
    rows.append(dict(p_pp=pts[f"pp{pp}"]["prefill_tok_s"], p_tg=pts[f"tg{tg}"]["decode_tok_s"],
                     l_pp=lb["pp"], l_tg=lb["tg"], read=float(m.group(2)) if m else 0.0,
                     wbytes=float(wb.group(1)) * 2**30 if wb else 0.0))
who = "pagoda" if tag == "pagoda" else f"pagoda with {alt}"
print(f"\n## {name}: {who} / llama.cpp ({os.path.basename(gguf)})")
print("| round | pagoda pp%s | llama.cpp pp%s | ratio | pagoda tg%s | llama.cpp tg%s | ratio | read GB/s | pagoda decode GB/s (fraction) | llama.cpp decode GB/s (fraction) |" % (pp, pp, tg, tg))
print("|---|---|---|---|---|---|---|---|---|---|")
for i, x in enumerate(rows):
    pg, lg = x["p_tg"] * x["wbytes"] / 1e9, x["l_tg"] * x["wbytes"] / 1e9
    fr = lambda g: f"{g:.1f} ({100 * g / x['read']:.0f}%)" if x["read"] else f"{g:.1f}"
    print(f"| {i + 1} | {x['p_pp']:.1f} | {x['l_pp']:.1f} | {x['p_pp'] / x['l_pp']:.2f} | {x['p_tg']:.2f} | "
          f"{x['l_tg']:.2f} | {x['p_tg'] / x['l_tg']:.2f} | {x['read']:.1f} | {fr(pg)} | {fr(lg)} |")
med = lambda k: statistics.median(x[k] for x in rows)
rp = [x["p_pp"] / x["l_pp"] for x in rows]
rt = [x["p_tg"] / x["l_tg"] for x in rows]
print(f"| median | {med('p_pp'):.1f} | {med('l_pp'):.1f} | **{statistics.median(rp):.2f}** ({min(rp):.2f}..{max(rp):.2f}) | "
      f"{med('p_tg'):.2f} | {med('l_tg'):.2f} | **{statistics.median(rt):.2f}** ({min(rt):.2f}..{max(rt):.2f}) | "
      f"{med('read'):.1f} | | |")
PY
  done
done

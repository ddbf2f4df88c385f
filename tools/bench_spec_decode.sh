#!/usr/bin/env bash
# Speculative decoding on the CPU, side by side in one run: single-stream decode (tg) of a prompt
# that quotes itself (tools/data/repetitive_prompt.txt), with and without drafts, alternating the
# two configurations ROUNDS times so that machine noise hits both alike. BATCH=n: the batched point
# of n copies of the prompt instead (its decode tok/s).
#   tools/bench_spec_decode.sh [PAGODA] [MODEL_DIR] [SPEC_JSON] [ROUNDS] [extra flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/pagoda}
model=${2:-models/default}
spec=${3:-'{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4}'}
rounds=${4:-5}
tg=${TG:-128}  # generated tokens per run
shift $(( $# < 4 ? $# : 4 ))
out=$(mktemp -d)
for r in $(seq "$rounds"); do
  for mode in plain spec; do
    # The tg point (points[0]), or with BATCH only the batched point of BATCH copies.
    if [[ -n ${BATCH:-} ]]; then points=(--tg 0 --batch-sizes "$BATCH"); else points=(--tg "$tg" --batch-sizes 1); fi
    args=(bench offline "$model" --pp 0 "${points[@]}" --gen-len "$tg" --threads 2
          --prompt-file tools/data/repetitive_prompt.txt --json "$out/$mode-$r.json" "$@")
    [[ $mode == spec ]] && args+=(--speculative-config "$spec")
    "$bin" "${args[@]}" >/dev/null 2>&1
  done
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def point(mode, r):
    return json.load(open(f"{out}/{mode}-{r}.json"))["points"][0]
plain = [point("plain", r)["decode_tok_s"] for r in range(1, rounds + 1)]
spec_pts = [point("spec", r) for r in range(1, rounds + 1)]
spec = [p["decode_tok_s"] for p in spec_pts]
ratios = [s / p for s, p in zip(spec, plain)]
p0 = spec_pts[0]
print(f"{point('plain', 1)['name']} decode tok/s, median of {rounds} alternating runs: without {statistics.median(plain):.1f}, "
      f"with {statistics.median(spec):.1f}, ratio {statistics.median(ratios):.3f} "
      f"(per-round ratios {', '.join(f'{x:.3f}' for x in ratios)})")
acc = p0["spec_num_accepted_tokens"]; dt = p0["spec_num_draft_tokens"]
print(f"acceptance: {acc}/{dt} draft tokens ({100 * acc / max(dt, 1):.1f}%), "
      f"mean acceptance length {p0['spec_mean_acceptance_length']:.2f}")
PY
rm -rf "$out"

#!/usr/bin/env bash
# Side-by-side CPU speed of two pagoda binaries (before / after a change): `pagoda bench offline`
# on one model, the two binaries in turn (A B A B ...) so drift hits both, then the median of each
# point's tok/s and the ratio after/before.
#   tools/bench_offline_ab.sh BEFORE_BIN AFTER_BIN MODEL_DIR RUNS [bench offline flags...]
# e.g. tools/bench_offline_ab.sh /tmp/pagoda-before build/pagoda models/default 5 --threads 2
set -euo pipefail
before=$1 after=$2 model=$3 runs=$4
shift 4
out=$(mktemp -d)
for ((i = 0; i < runs; i++)); do
  "$before" bench offline "$model" --json "$out/before.$i.json" "$@" >/dev/null
  "$after" bench offline "$model" --json "$out/after.$i.json" "$@" >/dev/null
done
python3 - "$out" "$runs" <<'PY'
import json, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
def points(side):
    res = {}
    for i in range(runs):
        for p in json.load(open(f"{out}/{side}.{i}.json"))["points"]:
            for key in ("prefill_tok_s", "decode_tok_s", "total_tok_s"):
                if p[key] > 0:
                    res.setdefault((p["name"], key), []).append(p[key])
    return res
b, a = points("before"), points("after")
print(f"{'point':8} {'figure':14} {'before (median)':>16} {'after (median)':>15} {'after/before':>13}  min..max ratio of pairs")
for k in b:
    mb, ma = statistics.median(b[k]), statistics.median(a[k])
    pairs = [x / y for x, y in zip(a[k], b[k])]
    print(f"{k[0]:8} {k[1]:14} {mb:16.1f} {ma:15.1f} {ma / mb:13.3f}  {min(pairs):.3f}..{max(pairs):.3f}")
PY

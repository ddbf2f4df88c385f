#!/usr/bin/env bash
# Did a change lose speed? `pagoda bench offline` of an older commit (the base) against this tree, on
# the same GPU in one call, rounds alternating base / this tree, on random checkpoints of the
# released shapes (tools/make_random_checkpoint.py).
#
# Here (where the repository's history is):  tools/device/ab_base_gpu.sh --pack REV
#   writes the base's source as the git-ignored .ab-base/base.tar.xz (+ REVISION) to carry; or
#   tools/device/ab_base_gpu.sh --pack-patch REV: only the text diff REV..HEAD (.ab-base/base.patch),
#   which the GPU machine reverses on a copy of this tree — what fits the device tool's 64 MiB when
#   the tree itself is most of it.
# On the GPU machine (carry .deps and .ab-base):  tools/device/ab_base_gpu.sh
#   builds both (tools/device/build.sh; the base in /tmp/ab-base), makes the checkpoints, runs
#   ROUNDS (default 2) rounds and prints each point's tok/s and the ratio this tree / base.
# Environment: SHAPES (default "qwen3-0.6b qwen3.5-0.8b qwen3-8b"), ROUNDS, OUT, BENCH_ARGS (extra
# flags for bench offline).
set -uo pipefail
cd "$(dirname "$0")/../.."
if [[ ${1:-} == --pack ]]; then
  rev=${2:?usage: $0 --pack REV}
  rm -rf .ab-base && mkdir -p .ab-base
  git archive "$rev" -- . ":(exclude)models" | xz -9 > .ab-base/base.tar.xz  # the shipped models stay home
  git rev-parse --short "$rev" > .ab-base/REVISION
  du -sh .ab-base
  exit 0
fi
if [[ ${1:-} == --pack-patch ]]; then
  rev=${2:?usage: $0 --pack-patch REV}
  rm -rf .ab-base && mkdir -p .ab-base
  # Sources only: fixtures and docs do not change what is built or measured.
  git diff "$rev" HEAD -- . ":(exclude)tests/fixtures" ":(exclude)docs" ":(exclude)models" > .ab-base/base.patch
  git rev-parse --short "$rev" > .ab-base/REVISION
  du -sh .ab-base
  exit 0
fi
[[ -f .ab-base/base.tar.xz || -f .ab-base/base.patch ]] ||
  { echo "no .ab-base/base.tar.xz or base.patch: run $0 --pack REV (or --pack-patch REV) here first" >&2; exit 2; }
export LD_LIBRARY_PATH="$PWD/.deps/root/usr/lib/x86_64-linux-gnu"
out="${OUT:-/tmp/ab_out}"
shapes="${SHAPES:-qwen3-0.6b qwen3.5-0.8b qwen3-8b}"
rounds="${ROUNDS:-2}"
base=/tmp/ab-base
mkdir -p "$out" "$base"
stamp() { echo "=== $1 ($(date +%T), ${SECONDS}s)"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
echo "base $(cat .ab-base/REVISION), this tree $(git log -1 --format=%h 2>/dev/null)"

stamp "build both, checkpoints meanwhile"
if [[ ! -x $base/build-gpu/pagoda ]]; then
  if [[ -f .ab-base/base.tar.xz ]]; then
    tar -xJf .ab-base/base.tar.xz -C "$base"
  else  # this tree's sources with the change reversed
    tar -cf - --exclude=./build-gpu --exclude=./.deps --exclude=./.ab-base --exclude=./models . | tar -xf - -C "$base"
    (cd "$base" && patch -R -p1 -s < "$OLDPWD/.ab-base/base.patch") || { echo "the base patch did not reverse" >&2; exit 1; }
  fi
  ln -sfn "$PWD/.deps" "$base/.deps"
fi
(for shape in $shapes; do
  [[ -f /tmp/ckpt/$shape/config.json ]] ||
    python3 tools/make_random_checkpoint.py --shape "$shape" --out "/tmp/ckpt/$shape" > "$out/ckpt_$shape.log" 2>&1
done) &
(cd "$base" && tools/device/build.sh > "$out/build_base.log" 2>&1) || { tail -20 "$out/build_base.log"; exit 1; }
tools/device/build.sh > "$out/build.log" 2>&1 || { tail -20 "$out/build.log"; exit 1; }
wait

read -r -a extra <<< "${BENCH_ARGS:-}"
for shape in $shapes; do
  for ((r = 0; r < rounds; r++)); do
    for side in base tree; do
      bin=build-gpu/pagoda
      [[ $side == base ]] && bin=$base/build-gpu/pagoda
      stamp "$shape round $r $side"
      timeout 300 "$bin" bench offline "/tmp/ckpt/$shape" --device cuda "${extra[@]}" \
        --json "$out/${shape}_${side}_$r.json" > "$out/${shape}_${side}_$r.txt" 2>&1 || echo "rc $?"
    done
  done
done

python3 - "$out" "$rounds" $shapes <<'EOF'
import json, statistics, sys
out, rounds, shapes = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print("| shape | point | metric | base tok/s (median) | this tree | tree / base |")
print("|---|---|---|---|---|---|")
for shape in shapes:
    runs = {}
    for side in ("base", "tree"):
        for r in range(rounds):
            try:
                pts = json.load(open(f"{out}/{shape}_{side}_{r}.json"))["points"]
            except (OSError, ValueError, KeyError):
                continue
            for p in pts:
                for metric in ("prefill_tok_s", "decode_tok_s"):
                    if p.get(metric):
                        runs.setdefault((p["name"], metric), {}).setdefault(side, []).append(p[metric])
    for (name, metric), v in runs.items():
        if "base" in v and "tree" in v:
            b, t = statistics.median(v["base"]), statistics.median(v["tree"])
            print(f"| {shape} | {name} | {metric.split('_')[0]} | {b:,.1f} | {t:,.1f} | {t / b:.3f} |")
EOF
stamp done

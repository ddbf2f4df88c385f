#!/usr/bin/env bash
# Make the EAGLE-3 head fixtures' references (tools/make_eagle3_fixtures.py) on the GPU machine:
#
#   bash tools/device/make_eagle3_fixtures.sh
#
# Needs python3 with torch, transformers 5.x (and the tests/fixtures/models targets, tracked); no
# network, CPU only, a few seconds. Writes tests/fixtures/eagle3/<head>/{config.json,
# model.safetensors, reference.json} into a scratch tree (config and weights byte-identical to the
# committed ones; the tool refuses to write a reference its float64 check disagrees with) and packs
# it into $OUT/eagle3_fixtures.tar.gz (paths tests/fixtures/eagle3/...); unpack at the repository root.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/pagoda-fixtures-out}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
tmp=$(mktemp -d)
status=0
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" \
  | tee "$OUT/make_eagle3_fixtures.log"
python3 tools/make_eagle3_fixtures.py --out "$tmp/tests/fixtures/eagle3" 2>&1 | tee -a "$OUT/make_eagle3_fixtures.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
for d in "$tmp"/tests/fixtures/eagle3/*/; do
  name=$(basename "$d")
  cmp -s "$d/model.safetensors" "tests/fixtures/eagle3/$name/model.safetensors" \
    || { echo "WARNING: $name/model.safetensors differs from the committed one" | tee -a "$OUT/make_eagle3_fixtures.log"; status=1; }
done
tar czf "$OUT/eagle3_fixtures.tar.gz" -C "$tmp" tests
exit $status

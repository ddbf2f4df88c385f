#!/usr/bin/env bash
# Make the mixture-of-experts fixtures and parameter counts (tools/make_moe_fixtures.py) on the GPU
# machine:
#
#   bash tools/device/make_moe_fixtures.sh [NAME ...]
#
# Needs python3 with torch, transformers 5.x and safetensors; no network. Packs what it made into
# $OUT/moe_fixtures.tar.gz (paths tests/fixtures/models/... and tests/fixtures/configs/...); unpack
# at the repository root.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/pagoda-fixtures-out}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
tmp=$(mktemp -d)
status=0
only=()
[ $# -gt 0 ] && only=(--only "$@")
python3 tools/make_moe_fixtures.py --out "$tmp/tests/fixtures/models" --counts "$tmp/tests/fixtures/configs" \
  "${only[@]}" 2>&1 | tee "$OUT/make_moe_fixtures.log" || status=1
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
tar czf "$OUT/moe_fixtures.tar.gz" -C "$tmp" tests
exit $status

#!/usr/bin/env bash
# On the GPU machine (torch + transformers 5.17): the MTP head's reference logits for
# tests/fixtures/models/qwen3_5-tiny-mtp (tools/make_mtp_fixture.py reference), copied to $OUT.
set -euo pipefail
cd "$(dirname "$0")/../.."
python3 tools/make_mtp_fixture.py reference 2>&1 | tee "${OUT:-/tmp}/mtp_reference.log"
cp tests/fixtures/models/qwen3_5-tiny-mtp/reference.json "${OUT:-/tmp}/"

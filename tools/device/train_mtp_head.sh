#!/usr/bin/env bash
# On the GPU machine: trains the shipped Qwen3.5 model's MTP head (tools/train_mtp_head.py).
# Needs .train-data/prepared (tools/prepare_training_data.sh, here; carry it). Results in $OUT.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1
python3 tools/train_mtp_head.py --model models/qwen3_5-kjv --data .train-data/prepared --out "$OUT/qwen3_5-kjv" "$@" \
  2>&1 | tee "$OUT/train_mtp_head.log"

#!/bin/bash
# Makes the FP8 fixtures (tools/make_fp8_fixtures.py) where torch + transformers are: the GPU machine.
# Usage (device tool, repo root): bash tools/device/make_fp8_fixtures_gpu.sh  → $OUT/models/<name>/
set -euo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/models"
python3 -c "import torch, transformers, safetensors; print(torch.__version__, transformers.__version__)"
python3 tools/make_fp8_fixtures.py --out "$OUT/models" 2>&1 | tail -40
du -sh "$OUT"/models/*

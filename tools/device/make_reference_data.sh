#!/usr/bin/env bash
# Make the model fixtures and the tokenizer reference on the GPU machine, in one command:
#
#   bash tools/device/make_reference_data.sh
#
# Run from the repository root (the device tool's working directory), with
# tests/data/qwen3-tokenizer/tokenizer.json carried.  The other tokenizers' references
# (tools/tokenizer_reference.py --model all) are remade for those of tests/data/{gemma3,llama3_1,
# llama3_2,mistral_nemo,deepseek_v3,gptoss,llama2}-tokenizer that are carried too; together they exceed one run's carry
# limit, so carry them over two runs (e.g. gemma3 + llama2 + deepseek_v3, then gptoss + llama3_1)
# with TOKENIZERS_ONLY=1, which skips the model fixtures.  Needs python3 with torch, transformers 5.x,
# safetensors, numpy and tokenizers; no network.  Everything it makes is packed into
# $OUT/fixtures.tar.gz (paths tests/fixtures/...), next to the two logs and versions.txt;
# unpack at the repository root with:  tar xzf <files_at>/fixtures.tar.gz
# Exit status: 0 only if both scripts succeeded (the tarball is made either way).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/pagoda-fixtures-out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

"$PY" - > "$OUT/versions.txt" 2>&1 <<'PYEOF'
import importlib, platform, sys
print("python", sys.version.split()[0], platform.platform())
for m in ("torch", "transformers", "tokenizers", "safetensors", "numpy", "fla", "causal_conv1d", "kernels"):
    try:
        print(m, getattr(importlib.import_module(m), "__version__", "?"))
    except Exception as e:
        print(m, "not importable:", type(e).__name__)
PYEOF
cat "$OUT/versions.txt"

status=0
if [ -z "${TOKENIZERS_ONLY:-}" ]; then
  "$PY" tools/make_fixtures.py --out tests/fixtures/models 2>&1 | tee "$OUT/make_fixtures.log" || status=1
fi
"$PY" tools/tokenizer_reference.py --model all --backend tokenizers --skip-missing 2>&1 \
    | tee "$OUT/tokenizer_reference_models.log" || status=1
if [ -n "${TOKENIZERS_ONLY:-}" ] && [ ! -f tests/data/qwen3-tokenizer/tokenizer.json ]; then
  echo "qwen3: skipped (not carried)" | tee "$OUT/tokenizer_reference.log"
elif [ -f tests/data/qwen3-tokenizer/tokenizer.json ]; then
  "$PY" tools/tokenizer_reference.py \
      --tokenizer tests/data/qwen3-tokenizer/tokenizer.json \
      --out tests/fixtures/tokenizer/qwen3_reference.json 2>&1 | tee "$OUT/tokenizer_reference.log" || status=1
else
  echo "MISSING tests/data/qwen3-tokenizer/tokenizer.json (carry it)" | tee "$OUT/tokenizer_reference.log"
  status=1
fi

paths=()
for p in tests/fixtures/models tests/fixtures/tokenizer; do [ -e "$p" ] && paths+=("$p"); done
if [ ${#paths[@]} -gt 0 ]; then
  tar czf "$OUT/fixtures.tar.gz" "${paths[@]}"
  ls -l "$OUT"
  tar tzvf "$OUT/fixtures.tar.gz"
fi
echo "make_reference_data: status $status"
exit $status

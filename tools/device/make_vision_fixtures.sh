#!/usr/bin/env bash
# Run ON the GPU machine: the tiny multimodal Qwen3.5 fixture (tools/make_vision_fixtures.py,
# transformers 5.17 on the CPU there) as a tar in $OUT to commit under tests/fixtures/vision/, and
# the transformers sources its port reads (vision_utils.py, the image-processing backends) in
# $OUT/hf_src for reading.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/hf_src" /tmp/vision_fixtures
root=$(python3 -c 'import transformers, os; print(os.path.dirname(transformers.__file__))')
cp "$root"/vision_utils.py "$root"/image_processing_backends.py "$OUT/hf_src/" 2>/dev/null
python3 -c 'import torchvision, PIL; print("torchvision", torchvision.__version__, "PIL", PIL.__version__)'
python3 tools/make_vision_fixtures.py --out /tmp/vision_fixtures ${MOE:+--moe} 2>&1 | grep -v Loading | tail -30
rc=${PIPESTATUS[0]}
tar -C /tmp/vision_fixtures -cf "$OUT/vision_fixtures.tar" .
exit "$rc"

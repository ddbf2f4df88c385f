#!/usr/bin/env bash
# Run ON the GPU machine: copy the installed transformers' sources that a port reads (the model
# folders named in MODELS, default the Qwen3.5 / Qwen-VL family and its image processors) into
# $OUT/hf_src, with the versions of torch / transformers / PIL / torchvision. For reading only.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/hf_src"
python3 - <<'PY' > "$OUT/hf_src/versions.txt" 2>&1
import importlib
for m in ["torch", "transformers", "PIL", "torchvision", "peft", "numpy"]:
    try:
        print(m, importlib.import_module(m).__version__)
    except Exception as e:
        print(m, "absent", e)
PY
root=$(python3 -c 'import transformers, os; print(os.path.dirname(transformers.__file__))')
for m in ${MODELS:-qwen3_5 qwen3_5_moe qwen3_vl qwen2_vl qwen2_5_vl gemma3 siglip}; do
  [[ -d $root/models/$m ]] && tar -C "$root/models" -cf "$OUT/hf_src/$m.tar" "$m"
done
tar -C "$root" -cf "$OUT/hf_src/core.tar" image_processing_utils.py image_processing_utils_fast.py \
  image_transforms.py image_utils.py processing_utils.py video_utils.py 2>/dev/null
python3 -c 'import PIL, os; print(os.path.dirname(PIL.__file__))' >> "$OUT/hf_src/versions.txt"
ls "$OUT/hf_src"

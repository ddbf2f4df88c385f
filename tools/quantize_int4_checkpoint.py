#!/usr/bin/env python3
"""Quantize a bf16 checkpoint's projections to 4 bits (GPTQ layout, groups of 128, asymmetric) for
speed runs at real shapes: tools/make_random_checkpoint.py's Qwen3-8B shape → a W4A16 checkpoint of
the same model, as a GPTQ writer stores it (tools/make_int4_fixtures.py has the layouts). Round-to-
nearest per group (no calibration: the weights are random, the bytes and shapes are what matter).

    python3 tools/quantize_int4_checkpoint.py IN_DIR OUT_DIR [--format gptq|awq|w4a16] [--group 128]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_int4_fixtures as m4  # noqa: E402
from make_fixtures import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--format", default="gptq", choices=["gptq", "awq", "w4a16"])
    ap.add_argument("--group", type=int, default=128)
    args = ap.parse_args()
    m4.GROUP = args.group
    sym = args.format == "w4a16"
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    os.makedirs(args.dst, exist_ok=True)
    for f in os.listdir(args.src):
        if not f.endswith(".safetensors"):
            shutil.copy(os.path.join(args.src, f), args.dst)
    count = 0
    for path in sorted(glob.glob(os.path.join(args.src, "*.safetensors"))):
        sd = load_file(path)
        out = {}
        for name, t in sd.items():
            if not m4.QUANTIZED.search(name) or t.dim() != 2 or t.shape[0] % 8 or t.shape[1] % args.group:
                out[name] = t
                continue
            q, z, scale, _ = m4.quantize(t.to(dev).float(), sym, torch.bfloat16 if sym else torch.float16)
            for k, v in m4.stored_tensors(name[: -len(".weight")], args.format, q, z, scale).items():
                out[k] = v.cpu().contiguous()
            count += 1
        save_file(out, os.path.join(args.dst, os.path.basename(path)), metadata={"format": "pt"})
    index = os.path.join(args.dst, "model.safetensors.index.json")
    if os.path.exists(index):  # the tensor names changed: rebuild the map
        weight_map = {}
        for path in sorted(glob.glob(os.path.join(args.dst, "*.safetensors"))):
            for k in load_file(path).keys():
                weight_map[k] = os.path.basename(path)
        with open(index, "w") as f:
            json.dump({"metadata": {}, "weight_map": weight_map}, f, indent=2)
    with open(os.path.join(args.dst, "config.json")) as f:
        config = json.load(f)
    config["quantization_config"] = m4.quantization_config(args.format, sym)
    with open(os.path.join(args.dst, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
    print(f"quantized {count} projections to 4 bits ({args.format}, group {args.group})")


if __name__ == "__main__":
    main()

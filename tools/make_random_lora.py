#!/usr/bin/env python3
"""Random LoRA adapters for a checkpoint, in PEFT's file format, for speed runs on the GPU.

    python3 tools/make_random_lora.py CKPT_DIR OUT_DIR --count 8 --rank 16

Writes OUT_DIR/a0 .. a{count-1}: adapter_config.json and adapter_model.safetensors with
base_model.model.<module>.lora_A.weight [r, in] and lora_B.weight [out, r] (bf16) for every decoder
projection of the checkpoint (q/k/v/o, gate/up/down, Qwen3.5's in_proj_qkv / in_proj_z / out_proj).
Values are small and random (both A and B nonzero), seeded per adapter: every byte a served adapter
moves is there; what they compute is meaningless. Reads only the checkpoint's tensor shapes.
"""
from __future__ import annotations

import argparse
import json
import os
import re

import torch
from safetensors import safe_open
from safetensors.torch import save_file

PROJ = re.compile(r"\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj|in_proj_qkv|in_proj_z|out_proj)\.weight$")


def shapes(ckpt):
    out = {}
    for f in sorted(os.listdir(ckpt)):
        if f.endswith(".safetensors"):
            with safe_open(os.path.join(ckpt, f), "pt") as st:
                for name in st.keys():
                    if PROJ.search(name) and not name.startswith(("mtp.", "model.visual")):
                        out[name] = st.get_slice(name).get_shape()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt")
    ap.add_argument("out")
    ap.add_argument("--count", type=int, default=8)
    ap.add_argument("--rank", type=int, default=16)
    args = ap.parse_args()
    found = shapes(args.ckpt)
    assert found, f"no decoder projections in {args.ckpt}"
    targets = sorted({n.rsplit(".", 2)[-2] for n in found})
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    for i in range(args.count):
        g = torch.Generator(device=dev).manual_seed(1000 + i)
        tensors = {}
        for name, (rows, cols) in found.items():
            stem = "base_model.model." + name[: -len(".weight")]
            a = (torch.rand(args.rank, cols, generator=g, device=dev) - 0.5) * 0.02
            b = (torch.rand(rows, args.rank, generator=g, device=dev) - 0.5) * 0.02
            tensors[stem + ".lora_A.weight"] = a.to(torch.bfloat16).cpu()
            tensors[stem + ".lora_B.weight"] = b.to(torch.bfloat16).cpu()
        d = os.path.join(args.out, f"a{i}")
        os.makedirs(d, exist_ok=True)
        save_file(tensors, os.path.join(d, "adapter_model.safetensors"))
        with open(os.path.join(d, "adapter_config.json"), "w") as f:
            json.dump({"peft_type": "LORA", "r": args.rank, "lora_alpha": 2 * args.rank, "target_modules": targets,
                       "bias": "none", "base_model_name_or_path": os.path.abspath(args.ckpt)}, f)
    print(f"{args.count} adapters of rank {args.rank} on {len(found)} projections ({', '.join(targets)}) in {args.out}")


if __name__ == "__main__":
    main()

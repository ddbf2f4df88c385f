#!/usr/bin/env python3
"""A random-weight Qwen3-0.6B-shaped checkpoint without PyTorch (plain Python, any machine), for
CPU speed runs (`pagoda bench offline`) where tools/make_random_checkpoint.py (transformers) cannot
run:

    python3 tools/make_shaped_checkpoint.py --out /tmp/ckpt/qwen3-0.6b-shaped

Same config.json fields, tensor names, shapes and dtype (bf16) as the released checkpoint, so every
byte read and every FLOP is real. Values: one seeded block of normal(0, 0.02) bf16 numbers (norm
weights 1.0) repeated through each tensor: the text is meaningless, the speed is not.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import struct

CONFIG = {
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 151936,
    "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28,
    "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "rms_norm_eps": 1e-6,
    "max_position_embeddings": 40960, "rope_theta": 1000000.0, "tie_word_embeddings": True,
    "hidden_act": "silu", "torch_dtype": "bfloat16", "bos_token_id": 151643,
    "eos_token_id": 151645,
}


def tensors(c):
    H, I, D = c["hidden_size"], c["intermediate_size"], c["head_dim"]
    Hq, Hkv = c["num_attention_heads"], c["num_key_value_heads"]
    yield "model.embed_tokens.weight", [c["vocab_size"], H]
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        yield p + "input_layernorm.weight", [H]
        yield p + "post_attention_layernorm.weight", [H]
        yield p + "self_attn.q_proj.weight", [Hq * D, H]
        yield p + "self_attn.k_proj.weight", [Hkv * D, H]
        yield p + "self_attn.v_proj.weight", [Hkv * D, H]
        yield p + "self_attn.o_proj.weight", [H, Hq * D]
        yield p + "self_attn.q_norm.weight", [D]
        yield p + "self_attn.k_norm.weight", [D]
        yield p + "mlp.gate_proj.weight", [I, H]
        yield p + "mlp.up_proj.weight", [I, H]
        yield p + "mlp.down_proj.weight", [H, I]
    yield "model.norm.weight", [H]


def bf16(x):
    return struct.unpack("<I", struct.pack("<f", x))[0] >> 16


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    block = struct.pack("<65536H", *(bf16(rng.gauss(0.0, 0.02)) for _ in range(65536)))
    one = struct.pack("<H", bf16(1.0))
    header, offset, layout = {}, 0, list(tensors(CONFIG))
    for name, shape in layout:
        n = 1
        for d in shape:
            n *= d
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + 2 * n]}
        offset += 2 * n
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head)
        for name, shape in layout:
            n = 1
            for d in shape:
                n *= d
            if name.endswith("norm.weight"):
                f.write(one * n)
                continue
            full, rest = divmod(2 * n, len(block))
            for _ in range(full):
                f.write(block)
            f.write(block[:rest])
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(CONFIG, f, indent=2)
    print(f"wrote {args.out}: {offset / 1e9:.2f} GB of bf16 weights")


if __name__ == "__main__":
    main()

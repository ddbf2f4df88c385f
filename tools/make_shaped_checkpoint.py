#!/usr/bin/env python3
"""A random-weight Qwen3-0.6B- or Qwen3.5-0.8B-shaped checkpoint without PyTorch (plain Python, any
machine), for CPU speed runs (`pagoda bench offline`) where tools/make_random_checkpoint.py
(transformers) cannot run:

    python3 tools/make_shaped_checkpoint.py --out /tmp/ckpt/qwen3-0.6b-shaped
    python3 tools/make_shaped_checkpoint.py --shape qwen3.5-0.8b --out /tmp/ckpt/qwen3_5-0.8b-shaped

Same config.json fields, tensor names, shapes and dtype (bf16) as the released checkpoint, so every
byte read and every FLOP is real. Values: one seeded block of normal(0, 0.02) bf16 numbers (norm
weights 1.0 where the model multiplies by w, 0 where by 1 + w) repeated through each tensor: the text
is meaningless, the speed is not. Qwen3.5: the text-only layout (`model.`, flat config), with A_log and
the Gated DeltaNet norm in fp32 as released (shapes from docs/models.md, Qwen/Qwen3.5-0.8B).
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


# Qwen3-8B's shape (untied lm_head), for GPU runs where a model that repeats itself is wanted
# (speculative decoding at a known acceptance: its drafts are right).
CONFIG_8B = dict(CONFIG, hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
                 num_attention_heads=32, num_key_value_heads=8, tie_word_embeddings=False)


CONFIG_35 = {
    "architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_text", "vocab_size": 248320,
    "hidden_size": 1024, "intermediate_size": 3584, "num_hidden_layers": 24,
    "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 6,
    "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
    "linear_num_key_heads": 16, "linear_num_value_heads": 16, "linear_key_head_dim": 128,
    "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "rms_norm_eps": 1e-6,
    "max_position_embeddings": 262144, "partial_rotary_factor": 0.25,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                        "mrope_section": [11, 11, 10], "mrope_interleaved": True},
    "tie_word_embeddings": True, "hidden_act": "silu", "dtype": "bfloat16",
    "bos_token_id": None, "eos_token_id": 248044,
}


def tensors_35(c):
    """(name, shape, dtype, fill): fill 'rand', 'one' or 'zero'."""
    H, I, D = c["hidden_size"], c["intermediate_size"], c["head_dim"]
    Hq, Hkv = c["num_attention_heads"], c["num_key_value_heads"]
    Hk, Hv = c["linear_num_key_heads"], c["linear_num_value_heads"]
    dk, dv = c["linear_key_head_dim"], c["linear_value_head_dim"]
    C = 2 * Hk * dk + Hv * dv
    yield "model.embed_tokens.weight", [c["vocab_size"], H], "BF16", "rand"
    for i, kind in enumerate(c["layer_types"]):
        p = f"model.layers.{i}."
        yield p + "input_layernorm.weight", [H], "BF16", "zero"
        yield p + "post_attention_layernorm.weight", [H], "BF16", "zero"
        if kind == "full_attention":
            yield p + "self_attn.q_proj.weight", [2 * Hq * D, H], "BF16", "rand"
            yield p + "self_attn.k_proj.weight", [Hkv * D, H], "BF16", "rand"
            yield p + "self_attn.v_proj.weight", [Hkv * D, H], "BF16", "rand"
            yield p + "self_attn.o_proj.weight", [H, Hq * D], "BF16", "rand"
            yield p + "self_attn.q_norm.weight", [D], "BF16", "zero"
            yield p + "self_attn.k_norm.weight", [D], "BF16", "zero"
        else:
            a = p + "linear_attn."
            yield a + "in_proj_qkv.weight", [C, H], "BF16", "rand"
            yield a + "in_proj_z.weight", [Hv * dv, H], "BF16", "rand"
            yield a + "in_proj_b.weight", [Hv, H], "BF16", "rand"
            yield a + "in_proj_a.weight", [Hv, H], "BF16", "rand"
            yield a + "conv1d.weight", [C, 1, c["linear_conv_kernel_dim"]], "BF16", "rand"
            yield a + "dt_bias", [Hv], "BF16", "zero"
            yield a + "A_log", [Hv], "F32", "zero"
            yield a + "norm.weight", [dv], "F32", "one"
            yield a + "out_proj.weight", [H, Hv * dv], "BF16", "rand"
        yield p + "mlp.gate_proj.weight", [I, H], "BF16", "rand"
        yield p + "mlp.up_proj.weight", [I, H], "BF16", "rand"
        yield p + "mlp.down_proj.weight", [H, I], "BF16", "rand"
    yield "model.norm.weight", [H], "BF16", "zero"


def tensors_3(c):
    for name, shape in tensors(c):
        yield name, shape, "BF16", "one" if name.endswith("norm.weight") else "rand"


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
    if not c["tie_word_embeddings"]:
        yield "lm_head.weight", [c["vocab_size"], H]


def bf16(x):
    return struct.unpack("<I", struct.pack("<f", x))[0] >> 16


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shape", choices=["qwen3-0.6b", "qwen3-8b", "qwen3.5-0.8b"], default="qwen3-0.6b")
    args = ap.parse_args()
    config = {"qwen3-0.6b": CONFIG, "qwen3-8b": CONFIG_8B, "qwen3.5-0.8b": CONFIG_35}[args.shape]
    layout = list(tensors_35(config)) if config is CONFIG_35 else list(tensors_3(config))
    rng = random.Random(args.seed)
    block = struct.pack("<65536H", *(bf16(rng.gauss(0.0, 0.02)) for _ in range(65536)))
    fills = {("BF16", "one"): struct.pack("<H", bf16(1.0)), ("BF16", "zero"): b"\0\0",
             ("F32", "one"): struct.pack("<f", 1.0), ("F32", "zero"): b"\0\0\0\0"}
    header, offset = {}, 0
    for name, shape, dtype, _ in layout:
        n = 1
        for d in shape:
            n *= d
        size = n * (2 if dtype == "BF16" else 4)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head)
        for name, shape, dtype, fill in layout:
            n = 1
            for d in shape:
                n *= d
            if fill != "rand":
                f.write(fills[(dtype, fill)] * n)
                continue
            full, rest = divmod(2 * n, len(block))
            for _ in range(full):
                f.write(block)
            f.write(block[:rest])
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    print(f"wrote {args.out}: {offset / 1e9:.2f} GB of bf16 weights")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Random-weight checkpoints of the released shapes (docs/performance.md), for speed and parity on the GPU.

    python3 tools/make_random_checkpoint.py --shape qwen3-0.6b --out /tmp/ckpt/qwen3-0.6b

Shapes and file layout are those of the real checkpoints (from_config + save_pretrained, bf16),
so every byte moved and every FLOP is real; only the text is meaningless. Seeded. --sparse writes
the same files with every weight zero as a sparse file (the safetensors header, then a hole): the
shapes, bytes moved and FLOPs of a dense model are still real, the disk holds next to nothing —
for shapes larger than the machine's disk (dense only: a MoE's router would send every token to the
same experts). The Qwen3.5
shapes are saved text-only (Qwen3_5ForCausalLM, model_type qwen3_5_text) unless --vision is given:
then as the released multimodal checkpoint (Qwen3_5ForConditionalGeneration with the Qwen3.5 vision
tower: 27 blocks of 1152, 16 heads, patch 16, merge 2) and its preprocessor_config.json. Weights are
made on the GPU when one is present (an 8B model initialised on the CPU takes minutes).
"""
from __future__ import annotations

import argparse
import time

import torch

SHAPES = {
    # name: (family, kwargs)  — values from docs/models.md
    "qwen3-0.6b": ("qwen3", dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                                 num_attention_heads=16, num_key_value_heads=8, tie_word_embeddings=True)),
    "qwen3-1.7b": ("qwen3", dict(hidden_size=2048, intermediate_size=6144, num_hidden_layers=28,
                                 num_attention_heads=16, num_key_value_heads=8, tie_word_embeddings=True)),
    "qwen3-8b": ("qwen3", dict(hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
                               num_attention_heads=32, num_key_value_heads=8, tie_word_embeddings=False)),
    "qwen3.5-0.8b": ("qwen3_5", dict(hidden_size=1024, intermediate_size=3584, num_hidden_layers=24,
                                     num_attention_heads=8, num_key_value_heads=2,
                                     linear_num_key_heads=16, linear_num_value_heads=16,
                                     tie_word_embeddings=True)),
    "qwen3.5-4b": ("qwen3_5", dict(hidden_size=2560, intermediate_size=9216, num_hidden_layers=32,
                                   num_attention_heads=16, num_key_value_heads=4,
                                   linear_num_key_heads=16, linear_num_value_heads=32,
                                   tie_word_embeddings=True)),
    "qwen3.5-9b": ("qwen3_5", dict(hidden_size=4096, intermediate_size=12288, num_hidden_layers=32,
                                   num_attention_heads=16, num_key_value_heads=4,
                                   linear_num_key_heads=16, linear_num_value_heads=32,
                                   tie_word_embeddings=False)),
    # Qwen3.5-27B's config.json values (tensor parallelism, issue 32: 54 GB of bf16 weights).
    "qwen3.5-27b": ("qwen3_5", dict(hidden_size=5120, intermediate_size=17408, num_hidden_layers=64,
                                    num_attention_heads=24, num_key_value_heads=4,
                                    linear_num_key_heads=16, linear_num_value_heads=48,
                                    tie_word_embeddings=False)),
    # The new families at their released 8B-class shapes (issue 21: pp512, tg128, B=N against llama.cpp).
    "llama3.1-8b": ("llama", dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                                  num_attention_heads=32, num_key_value_heads=8, tie_word_embeddings=False)),
    "qwen2.5-7b": ("qwen2", dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                                 num_attention_heads=28, num_key_value_heads=4, tie_word_embeddings=False)),
    # A model larger than one GPU (145 GB in bf16; an H200 holds ~135 GB): issue 32's "a model that
    # does not fit one GPU serves". Too large for the GPU machines' disks as real bytes: --sparse.
    "qwen2.5-72b": ("qwen2", dict(hidden_size=8192, intermediate_size=29568, num_hidden_layers=80,
                                  num_attention_heads=64, num_key_value_heads=8, tie_word_embeddings=False)),
    # Qwen3-30B-A3B with 12 of its 48 layers (a quarter of the weights: the checkpoint and its GGUF
    # fit the GPU machine's 64 GB disk); per-layer cost is the released model's, totals scale by 4.
    "qwen3-30b-a3b-12l": ("qwen3_moe", dict(hidden_size=2048, intermediate_size=6144, num_hidden_layers=12,
                                            moe_intermediate_size=768, num_experts=128, num_experts_per_tok=8,
                                            num_attention_heads=32, num_key_value_heads=4,
                                            tie_word_embeddings=False)),
}


def make_config(shape: str, layers: int = 0):
    family, kw = SHAPES[shape]
    if layers:  # a shape's per-layer cost with fewer layers (profiling): totals scale by the ratio
        kw = dict(kw, num_hidden_layers=layers)
    if family == "qwen3":
        from transformers import Qwen3Config
        return Qwen3Config(vocab_size=151936, head_dim=128, rms_norm_eps=1e-6,
                           max_position_embeddings=40960,
                           rope_parameters={"rope_type": "default", "rope_theta": 1e6},
                           eos_token_id=151645, bos_token_id=151643, **kw)
    if family == "qwen3_moe":  # Qwen3-30B-A3B's config.json values
        from transformers import Qwen3MoeConfig
        return Qwen3MoeConfig(vocab_size=151936, head_dim=128, rms_norm_eps=1e-6, max_position_embeddings=40960,
                              rope_parameters={"rope_type": "default", "rope_theta": 1e6}, norm_topk_prob=True,
                              decoder_sparse_step=1, mlp_only_layers=[], eos_token_id=151645,
                              bos_token_id=151643, **kw)
    if family == "llama":  # Llama-3.1-8B's config.json values
        from transformers import LlamaConfig
        return LlamaConfig(vocab_size=128256, head_dim=128, rms_norm_eps=1e-5, max_position_embeddings=131072,
                           rope_parameters={"rope_type": "llama3", "rope_theta": 5e5, "factor": 8.0,
                                            "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                            "original_max_position_embeddings": 8192},
                           bos_token_id=128000, eos_token_id=[128001, 128008, 128009], **kw)
    if family == "qwen2":  # Qwen2.5-7B-Instruct's config.json values
        from transformers import Qwen2Config
        return Qwen2Config(vocab_size=152064, rms_norm_eps=1e-6, max_position_embeddings=32768,
                           rope_parameters={"rope_type": "default", "rope_theta": 1e6},
                           use_sliding_window=False, bos_token_id=151643, eos_token_id=151645, **kw)
    from transformers import Qwen3_5TextConfig
    return Qwen3_5TextConfig(vocab_size=248320, head_dim=256, linear_key_head_dim=128,
                             linear_value_head_dim=128, linear_conv_kernel_dim=4,
                             full_attention_interval=4, rms_norm_eps=1e-6,
                             max_position_embeddings=262144,
                             rope_parameters={"rope_type": "default", "rope_theta": 1e7,
                                              "partial_rotary_factor": 0.25,
                                              "mrope_section": [11, 11, 10]},
                             eos_token_id=248044, **kw)


def write_sparse(args):
    """The checkpoint's config and one model.safetensors whose data is a hole (zeros on read)."""
    import json
    import os

    from transformers import AutoModelForCausalLM, GenerationConfig

    assert not args.vision and SHAPES[args.shape][0] in ("qwen3", "llama", "qwen2"), "--sparse is for dense shapes"
    cfg = make_config(args.shape, args.layers)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    os.makedirs(args.out, exist_ok=True)
    cfg.save_pretrained(args.out)
    GenerationConfig(eos_token_id=cfg.eos_token_id, bos_token_id=getattr(cfg, "bos_token_id", None)).save_pretrained(args.out)
    header, at = {}, 0
    for name, p in model.state_dict().items():
        n = p.numel() * 2
        header[name] = {"dtype": "BF16", "shape": list(p.shape), "data_offsets": [at, at + n]}
        at += n
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    with open(os.path.join(args.out, "model.safetensors"), "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        f.truncate(8 + len(text) + at)
    print(f"{args.shape}: {at / 2e6:.1f}M parameters (zero, sparse: {at / 1e9:.1f} GB apparent), saved to {args.out}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", required=True, choices=sorted(SHAPES))
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layers", type=int, default=0, help="override num_hidden_layers (0: the shape's)")
    ap.add_argument("--vision", action="store_true", help="Qwen3.5 shapes: with the vision tower (multimodal)")
    ap.add_argument("--sparse", action="store_true", help="every weight zero, in a sparse file (dense shapes)")
    args = ap.parse_args()
    if args.sparse:
        return write_sparse(args)
    from transformers import AutoModelForCausalLM, GenerationConfig

    torch.manual_seed(args.seed)
    cfg = make_config(args.shape, args.layers)
    t0 = time.time()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.vision:
        assert SHAPES[args.shape][0] == "qwen3_5", "--vision is for the Qwen3.5 shapes"
        from transformers import Qwen2VLImageProcessor, Qwen3_5Config, Qwen3_5ForConditionalGeneration
        vision = dict(depth=27, hidden_size=1152, intermediate_size=4304, num_heads=16, in_channels=3,
                      patch_size=16, temporal_patch_size=2, spatial_merge_size=2, out_hidden_size=cfg.hidden_size,
                      num_position_embeddings=2304, hidden_act="gelu_pytorch_tanh")
        text = cfg.to_dict()
        cfg = Qwen3_5Config(text_config=text, vision_config=vision, tie_word_embeddings=text["tie_word_embeddings"])
        with torch.device(device):
            model = Qwen3_5ForConditionalGeneration(cfg).to(torch.bfloat16)
        Qwen2VLImageProcessor(patch_size=16, temporal_patch_size=2, merge_size=2, image_mean=[0.5, 0.5, 0.5],
                              image_std=[0.5, 0.5, 0.5], min_pixels=65536,
                              max_pixels=16777216).save_pretrained(args.out)
    else:
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    if SHAPES[args.shape][0] == "qwen3_5":
        # Released Qwen3.5 checkpoints keep A_log and the GDN norm weight in fp32 (docs/models.md).
        for name, p in model.named_parameters():
            if name.endswith("A_log") or name.endswith("linear_attn.norm.weight"):
                p.data = p.data.float()
    text_cfg = cfg.get_text_config()
    model.generation_config = GenerationConfig(eos_token_id=text_cfg.eos_token_id,
                                              bos_token_id=getattr(text_cfg, "bos_token_id", None))
    model.save_pretrained(args.out)
    n = sum(p.numel() for p in model.parameters())
    print(f"{args.shape}: {n / 1e6:.1f}M parameters, saved to {args.out} in {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()

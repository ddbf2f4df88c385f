#!/usr/bin/env python3
"""Make tiny random-weight Llama 3.x checkpoints and their greedy references.

Run on the GPU machine (torch, transformers 5.x, safetensors; no network), on its CPU so the output
is deterministic:

    python3 tools/make_llama_fixtures.py --out tests/fixtures/models

Writes tests/fixtures/models/<name>/ (config.json, generation_config.json, model.safetensors as
save_pretrained writes them, reference.json in the format of tools/make_fixtures.py: prompt_ids,
generated_ids (greedy, eos ignored), prompt_last_logits).

The reference is transformers' LlamaForCausalLM reloaded from the SAVED directory in fp32 with eager
attention, cross-checked against an independent float64 implementation written here from
transformers' models/llama/modeling_llama.py and modeling_rope_utils.py
(`_compute_llama3_parameters`), which reads only config.json and the safetensors file:
  * LlamaAttention: q/k/v/o_proj all carry a bias iff attention_bias; no q/k norm;
    scaling = head_dim**-0.5; head_dim = config.head_dim or hidden_size // num_attention_heads.
  * RoPE: rotate_half (NeoX pairing i, i + d/2) over the whole head; inv_freq from
    rope_parameters (rope_type "llama3": factor, low_freq_factor, high_freq_factor,
    original_max_position_embeddings).
  * LlamaMLP: down(silu(gate(x)) * up(x)) (mlp_bias False here); LlamaRMSNorm multiplies by plain w.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402  (blocks optional kernel packages, imports torch)
from make_fixtures import torch, transformers, load_file  # noqa: E402

PROMPT_LENGTHS = [1, 6, 40, 130]
NEW_TOKENS = 16
NAIVE_TOL = 2e-3


def spec_list():
    return [
        # GQA 3:1, explicit head_dim (not hidden / heads), tied embeddings, biases on q/k/v/o,
        # llama3 RoPE scaling whose three bands all occur at head_dim 20 (wavelengths 6..27k).
        {"name": "llama3-tiny-tied-bias", "seed": 31, "tied": True, "vocab": 384, "hidden": 72,
         "inter": 136, "layers": 2, "heads": 6, "kv": 2, "head_dim": 20, "bias": True,
         "rope": {"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0,
                  "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 64}},
        # MHA, head_dim = hidden / heads, untied lm_head, no biases, other llama3 factors.
        {"name": "llama3-tiny-untied", "seed": 32, "tied": False, "vocab": 320, "hidden": 64,
         "inter": 96, "layers": 3, "heads": 4, "kv": 4, "head_dim": 16, "bias": False,
         "rope": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 4.0,
                  "low_freq_factor": 1.0, "high_freq_factor": 2.0,
                  "original_max_position_embeddings": 32}},
    ]


def make_config(spec):
    return transformers.LlamaConfig(
        vocab_size=spec["vocab"], hidden_size=spec["hidden"], intermediate_size=spec["inter"],
        num_hidden_layers=spec["layers"], num_attention_heads=spec["heads"],
        num_key_value_heads=spec["kv"], head_dim=spec["head_dim"], hidden_act="silu",
        max_position_embeddings=4096, rms_norm_eps=1e-5, tie_word_embeddings=spec["tied"],
        attention_bias=spec["bias"], mlp_bias=False, rope_parameters=dict(spec["rope"]),
        bos_token_id=1, eos_token_id=2, pad_token_id=None)


def reinit_(model, seed):
    g = torch.Generator().manual_seed(seed)
    for name, p in model.named_parameters():
        d = p.data
        if name.endswith("norm.weight"):
            d.normal_(1.0, 0.25, generator=g)
        elif name.endswith(".bias"):
            d.normal_(0.0, 0.3, generator=g)
        elif name.endswith("embed_tokens.weight") or name == "lm_head.weight":
            d.normal_(0.0, 0.5, generator=g)
        elif name.endswith(".weight") and d.dim() == 2:
            d.normal_(0.0, 1.5 / math.sqrt(d.shape[1]), generator=g)
        else:
            raise AssertionError(f"no init rule for {name}")


# --- independent float64 Llama -------------------------------------------------------------------

def llama3_inv_freq(rp, dim):
    inv = 1.0 / (rp["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    if rp.get("rope_type", rp.get("type", "default")) != "llama3":
        return inv
    factor, low, high = rp["factor"], rp["low_freq_factor"], rp["high_freq_factor"]
    old = rp["original_max_position_embeddings"]
    out = []
    for f in inv.tolist():
        wavelen = 2 * math.pi / f
        if wavelen < old / high:
            out.append(f)
        elif wavelen > old / low:
            out.append(f / factor)
        else:
            s = (old / wavelen - low) / (high - low)
            out.append((1 - s) * f / factor + s * f)
    return torch.tensor(out, dtype=torch.float64)


def naive_logits(model_dir, ids):
    with open(os.path.join(model_dir, "config.json")) as f:
        c = json.load(f)
    W = {k: v.to(torch.float64) for k, v in load_file(os.path.join(model_dir,
                                                                 "model.safetensors")).items()}
    H, nh, nkv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    hd = c.get("head_dim") or H // nh
    rp = c.get("rope_parameters") or dict(c.get("rope_scaling") or {}, rope_theta=c["rope_theta"])
    inv = llama3_inv_freq(rp, hd)
    eps = c["rms_norm_eps"]
    T = len(ids)
    pos = torch.arange(T, dtype=torch.float64)
    ang = torch.outer(pos, inv)
    cos = torch.cat([ang.cos(), ang.cos()], -1)
    sin = torch.cat([ang.sin(), ang.sin()], -1)

    def rms(x, w):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w

    def lin(x, name):
        y = x @ W[name + ".weight"].T
        return y + W[name + ".bias"] if name + ".bias" in W else y

    def rope(x):  # [T, heads, hd]
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        rot = torch.cat([-x2, x1], -1)
        return x * cos[:, None, :] + rot * sin[:, None, :]

    x = W["model.embed_tokens.weight"][torch.tensor(ids)]
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms(x, W[p + "input_layernorm.weight"])
        q = rope(lin(h, p + "self_attn.q_proj").view(T, nh, hd))
        k = rope(lin(h, p + "self_attn.k_proj").view(T, nkv, hd))
        v = lin(h, p + "self_attn.v_proj").view(T, nkv, hd)
        rep = nh // nkv
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        s = torch.einsum("qhd,khd->hqk", q, k) * hd ** -0.5 + mask
        o = torch.einsum("hqk,khd->qhd", torch.softmax(s, -1), v).reshape(T, nh * hd)
        x = x + lin(o, p + "self_attn.o_proj")
        h = rms(x, W[p + "post_attention_layernorm.weight"])
        g = lin(h, p + "mlp.gate_proj")
        x = x + lin(g * torch.sigmoid(g) * lin(h, p + "mlp.up_proj"), p + "mlp.down_proj")
    x = rms(x, W["model.norm.weight"])
    head = W.get("lm_head.weight", W["model.embed_tokens.weight"])
    return x @ head.T


# --- references -----------------------------------------------------------------------------------

def greedy(model, prompt):
    seq, gen, first, margins = list(prompt), [], None, []
    for step in range(NEW_TOKENS):
        lg = mf.hf_logits(model, seq, "cpu")[-1]
        if step == 0:
            first = lg.clone()
        top = torch.topk(lg, 2)
        margins.append(float(top.values[0] - top.values[1]))
        gen.append(int(top.indices[0]))
        seq.append(gen[-1])
    return gen, first, min(margins)


def build(spec, out_dir):
    cls = transformers.LlamaForCausalLM
    torch.manual_seed(spec["seed"])
    model = cls(make_config(spec)).eval()
    reinit_(model, spec["seed"])
    mf.check_tied(model, spec["tied"])
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    model.save_pretrained(out_dir)
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 1, "eos_token_id": 2, "do_sample": False,
                   "transformers_version": transformers.__version__}, f, indent=2)
        f.write("\n")
    model = cls.from_pretrained(out_dir, dtype=torch.float32, attn_implementation="eager").eval()
    mf.check_tied(model, spec["tied"])
    cases, worst = [], 0.0
    for idx, length in enumerate(PROMPT_LENGTHS):
        for attempt in range(mf.MAX_ATTEMPTS):
            prompt = mf.make_prompt(spec["seed"], idx, attempt, length, spec["vocab"])
            gen, first, margin = greedy(model, prompt)
            full = prompt + gen[:-1]
            ref = mf.hf_logits(model, full, "cpu").double()
            n64 = naive_logits(out_dir, full)
            diff = float((ref - n64).abs().max())
            assert diff < NAIVE_TOL, f"{spec['name']} len {length}: HF vs float64 diff {diff}"
            if margin >= mf.MIN_MARGIN:
                break
            print(f"    prompt len {length}: margin {margin:.2e}, reseeding")
        else:
            raise AssertionError(f"no usable prompt of length {length}")
        worst = max(worst, diff)
        cases.append({"prompt_len": length, "prompt_ids": prompt, "generated_ids": gen,
                      "prompt_last_logits": mf.f32_list(first), "min_top2_margin": margin,
                      "full_sequence_hf_vs_f64_max_abs_diff": diff})
        print(f"    prompt len {length:3d}: margin {margin:.3f} f64 diff {diff:.2e} gen {gen[:6]}")
    with open(os.path.join(out_dir, "config.json")) as f:
        cfg = json.load(f)
    ref = {"model": spec["name"], "architecture": "LlamaForCausalLM",
           "made_by": "tools/make_llama_fixtures.py", "reference_dtype": "float32",
           "reference_method": ("HF from_pretrained(saved dir, dtype=float32, eager); greedy loop "
                                "over the full sequence, use_cache=False; eos NOT applied"),
           "max_new_tokens": NEW_TOKENS, "eos_ignored": True,
           "naive_f64_check": f"max |HF fp32 - float64 (this file)| = {worst:.3e}",
           "torch_version": torch.__version__, "transformers_version": transformers.__version__,
           "config": cfg, "cases": cases}
    mf.write_reference(os.path.join(out_dir, "reference.json"), ref)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="tests/fixtures/models")
    args = ap.parse_args()
    torch.set_num_threads(8)
    torch.use_deterministic_algorithms(True, warn_only=True)
    print(f"torch {torch.__version__} transformers {transformers.__version__}")
    for spec in spec_list():
        print(f"== {spec['name']}")
        build(spec, os.path.join(args.out, spec["name"]))


if __name__ == "__main__":
    main()

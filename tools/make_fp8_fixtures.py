#!/usr/bin/env python3
"""Make tiny random-weight FP8 checkpoints with greedy references from Hugging Face transformers.

Each fixture is a Qwen3 or Qwen3.5 model whose projections are quantized to e4m3fn as the
checkpoints people serve store them:
  - qwen3-tiny-fp8-block / qwen3_5-tiny-fp8-block: Qwen/DeepSeek "fp8" format, `weight_scale_inv`
    per 32x32 block (Qwen's released checkpoints use 128x128; 32 keeps the model tiny and gives
    partial blocks), config.json `quantization_config: {quant_method: fp8, weight_block_size}`;
  - qwen3-tiny-fp8-channel: llm-compressor's compressed-tensors FP8 with one `weight_scale` per
    output channel.
The reference is the same transformers model with every quantized weight replaced by its
dequantized value (e4m3 code as fp32 times its scale, in fp32: the format's definition), run in
fp32 on the CPU with eager attention — the "dequantized-weights fp32 reference".

Run on the GPU machine (torch, transformers 5.x, safetensors; no network):

    python3 tools/make_fp8_fixtures.py --out tests/fixtures/models [--only NAME ...]

Writes tests/fixtures/models/<name>/ (config.json, generation_config.json, model.safetensors,
reference.json in tools/make_family_fixtures.py's format).
"""

from __future__ import annotations

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_family_fixtures as fam  # noqa: E402  (its greedy loop: NEW_TOKENS = 16, as here)
import make_fixtures as mf  # noqa: E402
from make_fixtures import torch, transformers  # noqa: E402

PROMPT_LENGTHS = [1, 7, 40, 130]
NEW_TOKENS = fam.NEW_TOKENS
BLOCK = 32
QUANTIZED = re.compile(r"\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj|in_proj_qkv|in_proj_z|"
                       r"out_proj)\.weight$")
FP8_MAX = 448.0


def spec_list():
    from transformers import Qwen3_5TextConfig

    L, F_ = "linear_attention", "full_attention"
    return [
        dict(name="qwen3-tiny-fp8-block", family="qwen3", arch="Qwen3ForCausalLM", seed=2001, scheme="block",
             # intermediate 112 = 3.5 blocks: partial blocks in gate/up rows and in down's columns.
             make_config=lambda: mf.qwen3_config(384, 64, 112, 2, 4, 2, 16, True, 1000000.0, 1e-6, 2)),
        dict(name="qwen3-tiny-fp8-channel", family="qwen3", arch="Qwen3ForCausalLM", seed=2002, scheme="channel",
             make_config=lambda: mf.qwen3_config(384, 64, 96, 2, 4, 2, 16, False, 1000000.0, 1e-6, 2)),
        dict(name="qwen3_5-tiny-fp8-block", family="qwen3_5", arch="Qwen3_5ForCausalLM", seed=2003, scheme="block",
             make_config=lambda: Qwen3_5TextConfig(
                 **mf.qwen3_5_text_kwargs(4, 64, 112, 4, 2, 32, 2, 4, 16, 24, 384, True, 2, [L, F_, L, F_]))),
    ]


def quantize_block(w):
    n, k = w.shape
    sr, sc = -(-n // BLOCK), -(-k // BLOCK)
    padded = torch.zeros(sr * BLOCK, sc * BLOCK, dtype=torch.float32)
    padded[:n, :k] = w
    blocks = padded.view(sr, BLOCK, sc, BLOCK)
    amax = blocks.abs().amax(dim=(1, 3))
    scale = torch.where(amax > 0, amax / FP8_MAX, torch.ones_like(amax))
    q = (blocks / scale[:, None, :, None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    deq = (q.float() * scale[:, None, :, None]).reshape(sr * BLOCK, sc * BLOCK)[:n, :k].contiguous()
    return q.reshape(sr * BLOCK, sc * BLOCK)[:n, :k].contiguous(), scale.float().contiguous(), deq


def quantize_channel(w):
    amax = w.abs().amax(dim=1, keepdim=True)
    scale = torch.where(amax > 0, amax / FP8_MAX, torch.ones_like(amax))
    q = (w / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q, scale.float().contiguous(), (q.float() * scale).contiguous()


def quantization_config(scheme):
    if scheme == "block":
        return {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3",
                "weight_block_size": [BLOCK, BLOCK], "modules_to_not_convert": ["lm_head"]}
    return {"quant_method": "compressed-tensors", "format": "float-quantized", "quantization_status": "compressed",
            "config_groups": {"group_0": {
                "targets": ["Linear"],
                "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True, "dynamic": False},
                "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "symmetric": True,
                                      "dynamic": True}}},
            "ignore": ["lm_head"]}


def build(spec, out_dir):
    cfg = spec["make_config"]()
    cls = getattr(transformers, spec["arch"])
    torch.manual_seed(spec["seed"])
    model = cls(cfg).eval()
    mf.reinit_(model, spec["family"], spec["seed"])
    quantized = {}
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not QUANTIZED.search(name):
                continue
            q, scale, deq = (quantize_block if spec["scheme"] == "block" else quantize_channel)(p.data.float())
            p.data.copy_(deq)  # the reference runs on exactly the dequantized weights
            quantized[name] = (q, scale)
    assert quantized, "no projection matched"
    suffix = "_scale_inv" if spec["scheme"] == "block" else "_scale"
    replaced = {name: {name: q, name + suffix: scale} for name, (q, scale) in quantized.items()}
    fam.write_quantized_fixture(
        spec, model, out_dir, replaced, quantization_config(spec["scheme"]), "tools/make_fp8_fixtures.py",
        "transformers model with each FP8 weight replaced by its dequantized value (e4m3 code as fp32 times its "
        "scale, fp32), eager, float32 on the CPU; greedy loop over the full sequence, use_cache=False; eos NOT applied",
        PROMPT_LENGTHS)


def main():
    fam.fixture_main(__doc__.split("\n")[0], spec_list(), build)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Make tiny random-weight 4-bit checkpoints (AWQ, GPTQ, compressed-tensors W4A16) with greedy
references from Hugging Face transformers.

Each fixture is a Qwen3 or Qwen3.5 model whose projections are quantized to 4-bit integers in groups
of GROUP input columns and stored as the checkpoints people serve store them:
  - qwen3-tiny-awq: AutoAWQ's GEMM layout (quant_method awq, version gemm): qweight int32 [K, N/8]
    with eight output columns to a word in the order 0 2 4 6 1 3 5 7, qzeros [G, N/8] likewise,
    scales fp16 [G, N]; asymmetric (zero points);
  - qwen3-tiny-gptq: GPTQ (quant_method gptq, checkpoint_format gptq, desc_act false, sym false):
    qweight int32 [K/8, N] with eight input rows to a word, lowest nibble first, qzeros [G, N/8]
    storing each zero point minus one, scales fp16 [G, N], g_idx;
  - qwen3-tiny-w4a16: llm-compressor's compressed-tensors pack-quantized W4A16 (symmetric, group
    strategy): weight_packed int32 [N, K/8] holding value + 8, lowest nibble first, weight_scale
    bf16 [N, G], weight_shape;
  - qwen3_5-tiny-gptq: Qwen3.5 (Gated DeltaNet) in GPTQ, symmetric (every zero point 8, stored 7);
    its small in_proj_b / in_proj_a stay bf16 beside the 4-bit q|k|v and z of the same projection.
The layouts are those of the writers (AutoAWQ's WQLinear_GEMM.from_linear, GPTQ's QuantLinear.pack,
compressed-tensors' pack_to_int32). When the compressed-tensors package is importable, its own
unpacking is run on the packed weights as a cross-check.

The reference is the same transformers model with every quantized weight replaced by its
dequantized value ((q - z) * scale in fp32, the scale as stored: fp16 or bf16), run in fp32 on the
CPU with eager attention — the "dequantized-weights fp32 reference".

Run on the GPU machine (torch, transformers 5.x, safetensors; no network):

    python3 tools/make_int4_fixtures.py --out tests/fixtures/models [--only NAME ...]
"""

from __future__ import annotations

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_family_fixtures as fam  # noqa: E402
import make_fixtures as mf  # noqa: E402
from make_fixtures import torch, transformers  # noqa: E402

PROMPT_LENGTHS = [1, 7, 40, 130]
NEW_TOKENS = fam.NEW_TOKENS
GROUP = 32
QUANTIZED = re.compile(r"\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj|in_proj_qkv|in_proj_z|"
                       r"out_proj)\.weight$")
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]


def spec_list():
    from transformers import Qwen3_5TextConfig

    L, F_ = "linear_attention", "full_attention"
    return [
        dict(name="qwen3-tiny-awq", family="qwen3", arch="Qwen3ForCausalLM", seed=3001, fmt="awq", sym=False,
             make_config=lambda: mf.qwen3_config(384, 64, 96, 2, 4, 2, 16, True, 1000000.0, 1e-6, 2)),
        dict(name="qwen3-tiny-gptq", family="qwen3", arch="Qwen3ForCausalLM", seed=3002, fmt="gptq", sym=False,
             make_config=lambda: mf.qwen3_config(384, 64, 96, 2, 4, 2, 16, False, 1000000.0, 1e-6, 2)),
        dict(name="qwen3-tiny-w4a16", family="qwen3", arch="Qwen3ForCausalLM", seed=3003, fmt="w4a16", sym=True,
             make_config=lambda: mf.qwen3_config(384, 64, 96, 2, 4, 2, 16, True, 1000000.0, 1e-6, 2)),
        dict(name="qwen3_5-tiny-gptq", family="qwen3_5", arch="Qwen3_5ForCausalLM", seed=3004, fmt="gptq", sym=True,
             make_config=lambda: Qwen3_5TextConfig(
                 **mf.qwen3_5_text_kwargs(4, 64, 96, 4, 2, 32, 2, 4, 16, 16, 384, True, 2, [L, F_, L, F_]))),
    ]


def quantize(w, sym, scale_dtype):
    """w [N, K] fp32 -> q int64 [N, K] in [0, 15], z int64 [N, G], scale [N, G] (scale_dtype), deq fp32."""
    n, k = w.shape
    g = w.view(n, k // GROUP, GROUP)
    if sym:
        amax = g.abs().amax(dim=2)
        scale = torch.where(amax > 0, amax / 7.0, torch.ones_like(amax)).to(scale_dtype)
        z = torch.full_like(amax, 8, dtype=torch.int64)
    else:
        lo = g.amin(dim=2).clamp(max=0)
        hi = g.amax(dim=2).clamp(min=0)
        scale = torch.where(hi > lo, (hi - lo) / 15.0, torch.ones_like(hi)).to(scale_dtype)
        z = torch.round(-lo / scale.float()).clamp(0, 15).to(torch.int64)
    s = scale.float()
    q = (torch.round(g / s[:, :, None]) + z[:, :, None]).clamp(0, 15).to(torch.int64)
    deq = ((q - z[:, :, None]).float() * s[:, :, None]).reshape(n, k).contiguous()
    return q.reshape(n, k), z, scale, deq


def to_int32(words):
    """int64 words holding 32-bit patterns -> int32 (two's complement), as the writers store them."""
    return ((words + 2**31) % 2**32 - 2**31).to(torch.int32).contiguous()


def pack_last(v, order=None):
    """Packs the last dim (a multiple of 8) eight to a word, nibble i = element order[i] of each eight."""
    v = v.reshape(*v.shape[:-1], v.shape[-1] // 8, 8)
    order = order or list(range(8))
    words = torch.zeros(v.shape[:-1], dtype=torch.int64, device=v.device)
    for i in range(8):
        words |= (v[..., order[i]] & 15) << (4 * i)
    return to_int32(words)


def stored_tensors(stem, fmt, q, z, scale):
    n, k = q.shape
    if fmt == "awq":
        return {stem + ".qweight": pack_last(q.t().contiguous(), AWQ_ORDER),   # [K, N/8]
                stem + ".qzeros": pack_last(z.t().contiguous(), AWQ_ORDER),    # [G, N/8]
                stem + ".scales": scale.t().contiguous()}                      # [G, N]
    if fmt == "gptq":
        qt = q.t().contiguous().view(k // 8, 8, n)                             # input rows 8r + i
        words = torch.zeros(k // 8, n, dtype=torch.int64, device=q.device)
        for i in range(8):
            words |= (qt[:, i, :] & 15) << (4 * i)
        return {stem + ".qweight": to_int32(words),                             # [K/8, N]
                stem + ".qzeros": pack_last(((z - 1) & 15).t().contiguous()),   # [G, N/8], v1: zero - 1
                stem + ".scales": scale.t().contiguous(),                       # [G, N]
                stem + ".g_idx": torch.arange(k, dtype=torch.int32) // GROUP}
    # compressed-tensors pack-quantized, symmetric: the signed value q - 8 stored as (q - 8) + 8.
    return {stem + ".weight_packed": pack_last(q),                              # [N, K/8]
            stem + ".weight_scale": scale.contiguous(),                         # [N, G]
            stem + ".weight_shape": torch.tensor([n, k], dtype=torch.int32)}


def cross_check_compressed_tensors(packed, q, shape):
    try:
        from compressed_tensors.compressors.quantized_compressors.pack_quantized import unpack_from_int32
    except Exception as e:  # noqa: BLE001 (optional package)
        return f"compressed-tensors not importable ({type(e).__name__}); cross-check skipped"
    got = unpack_from_int32(packed, 4, torch.Size(shape))
    assert torch.equal(got.to(torch.int64), q - 8), "compressed-tensors unpacks other values"
    return "compressed-tensors unpack_from_int32 agrees"


def quantization_config(fmt, sym):
    if fmt == "awq":
        return {"quant_method": "awq", "bits": 4, "group_size": GROUP, "zero_point": True, "version": "gemm",
                "modules_to_not_convert": None}
    if fmt == "gptq":
        return {"quant_method": "gptq", "bits": 4, "group_size": GROUP, "desc_act": False, "sym": sym,
                "checkpoint_format": "gptq", "true_sequential": True, "damp_percent": 0.01}
    return {"quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed",
            "config_groups": {"group_0": {
                "targets": ["Linear"],
                "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": GROUP,
                            "symmetric": True, "dynamic": False, "actorder": None},
                "input_activations": None, "output_activations": None}},
            "ignore": ["lm_head"]}


def build(spec, out_dir):
    cfg = spec["make_config"]()
    cls = getattr(transformers, spec["arch"])
    torch.manual_seed(spec["seed"])
    model = cls(cfg).eval()
    mf.reinit_(model, spec["family"], spec["seed"])
    scale_dtype = torch.bfloat16 if spec["fmt"] == "w4a16" else torch.float16
    stored, notes = {}, set()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not QUANTIZED.search(name):
                continue
            q, z, scale, deq = quantize(p.data.float(), spec["sym"], scale_dtype)
            p.data.copy_(deq)  # the reference runs on exactly the dequantized weights
            stem = name[: -len(".weight")]
            t = stored_tensors(stem, spec["fmt"], q, z, scale)
            if spec["fmt"] == "w4a16":
                notes.add(cross_check_compressed_tensors(t[stem + ".weight_packed"], q, q.shape))
            stored[name] = t
    assert stored, "no projection matched"
    for n in sorted(notes):
        print("    " + n)
    fam.write_quantized_fixture(
        spec, model, out_dir, stored, quantization_config(spec["fmt"], spec["sym"]), "tools/make_int4_fixtures.py",
        "transformers model with each 4-bit weight replaced by its dequantized value ((q - z) * scale, the scale as "
        "stored, fp32), eager, float32 on the CPU; greedy loop over the full sequence, use_cache=False; eos NOT applied",
        PROMPT_LENGTHS)


def main():
    fam.fixture_main(__doc__.split("\n")[0], spec_list(), build)


if __name__ == "__main__":
    main()

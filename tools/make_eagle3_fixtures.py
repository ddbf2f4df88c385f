#!/usr/bin/env python3
"""Tiny random EAGLE-3 draft heads for the fixture targets, and their references.

    python3 tools/make_eagle3_fixtures.py --out tests/fixtures/eagle3                  # GPU machine
    python3 tools/make_eagle3_fixtures.py --out tests/fixtures/eagle3 --weights-only   # stdlib only

For each head in HEADS it writes tests/fixtures/eagle3/<name>/:
  config.json        LlamaForCausalLMEagle3 as published heads have it (draft_vocab_size, optional
                     target_hidden_size, eagle_aux_hidden_state_layer_ids, norm_before_residual)
  model.safetensors  the published layout: fc.weight [H, 3*Ht], midlayer.{input_layernorm,
                     hidden_norm, post_attention_layernorm}.weight, midlayer.self_attn.{q,k,v}_proj
                     [*, 2H] (+ biases with attention_bias), o_proj, midlayer.mlp.{gate,up,down}_proj,
                     norm.weight, lm_head.weight [draft_vocab, H], d2t I64 [draft_vocab]
                     (target id = i + d2t[i]), t2d BOOL [vocab]; embed_tokens.weight only for a head
                     whose hidden size differs from its target's (otherwise shared with the target)
  reference.json     (not with --weights-only) see REFERENCE below
The weights come from Python's `random` with a fixed seed and are written by this file's own
safetensors writer, so --weights-only (no torch) and a full run write byte-identical weights.

REFERENCE. The target is the fixture checkpoint in tests/fixtures/models/<target>, loaded with
transformers (float32, eager attention, CPU). For each prompt (seeded random ids):
  * aux_layer_ids: the target layers whose residual stream feeds the head, ascending (vLLM collects
    them in layer order): the head config's eagle_aux_hidden_state_layer_ids, else
    (2, L // 2, L - 3) for L target layers. Id i < L is the residual stream at the INPUT of layer i,
    transformers' output_hidden_states[i] (0 = the embeddings); id L is the stream after the last
    layer, before the final norm. Captured with forward pre-hooks on the decoder layers and on the
    final norm, and compared with output_hidden_states (aux_matches_output_hidden_states).
  * aux_hidden_last: those states at the last prompt position, [n_aux][Ht].
  * target_next: the target's greedy token after the prompt (the token the first draft pass is fed
    at the last prompt position).
  * first_pass_logits: the head's logits (draft vocabulary) at every prompt position p of the first
    draft pass: position p reads fc(concat of aux states at p) and the token at p + 1 (the prompt's,
    then target_next at the last position). first_pass_argmax: their argmax (draft ids).
  * draft_tokens: K greedy drafts in TARGET ids (draft id d -> d + d2t[d]): draft 1 from the last
    row of the first pass; draft j + 1 from a pass at position n - 1 + j fed draft j (a target id)
    and the head's own pre-norm output of the pass before (vLLM's eagle proposer).
    draft_ids: the same in draft ids; draft_margins: top-1 minus top-2 logit of each decision.
The reference is checked against an independent float64 implementation in this file (Python's
standard library: the target from transformers' modeling_qwen3 / modeling_llama, the head from
vLLM's source; stdlib_f64_check): logits within 1e-3 and the same greedy decisions, or nothing is
written. `--stdlib-reference` writes reference.json from that implementation alone (no torch), a
stand-in in the sense of docs/testing (its made_by says so).
The head is computed by an independent fp32 torch implementation written from vLLM's
model_executor/models/llama_eagle3.py (LlamaDecoderLayer with layer_idx 0, LlamaModel, Eagle3
LlamaForCausalLM.compute_logits) and v1/spec_decode/eagle.py (the proposer's shifted inputs):
    h0       = fc(cat(aux))                           first pass; later passes: the pre-norm output
    e        = input_layernorm(embed(token))
    residual = h0; h = hidden_norm(h0)                 (norm_before_residual: residual = hidden_norm(h0))
    a        = o_proj(attn(q/k/v_proj(cat(e, h))))     causal, RoPE (Llama's), GQA, own KV cache
    residual = a + residual; m = mlp(post_attention_layernorm(residual))
    prenorm  = m + residual; logits = lm_head(norm(prenorm))

Dependencies: Python standard library; for the reference also torch and transformers (5.x).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eagle3_f64 import F64Target, f64_case  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
MODELS = os.path.join(ROOT, "tests", "fixtures", "models")
NUM_DRAFTS = 4
PROMPT_LENGTHS = [1, 9, 23, 41]

HEADS = [
    # A head as most published ones are: its hidden size is the target's, no embed_tokens (shared
    # with the target), default aux layers (3 target layers: (2, 1, 0) -> layers 0, 1, 2).
    dict(name="qwen3-gqa4-eagle3", target="qwen3-tiny-untied-gqa4", seed=3601,
         hidden=96, inter=160, heads=4, kv_heads=2, head_dim=None, draft_vocab=64,
         eps=1e-6, rope={"rope_theta": 10000.0}, attention_bias=False, own_embed=False,
         aux_ids=None, norm_before_residual=None),
    # A head narrower than its target (target_hidden_size), its own embed_tokens, q/k/v/o biases,
    # Llama-3 RoPE scaling (transformers 5's rope_parameters), explicit aux layers including
    # L = 3 (after the last layer, before the final norm), norm_before_residual.
    dict(name="llama3-untied-eagle3", target="llama3-tiny-untied", seed=3602,
         hidden=48, inter=80, heads=4, kv_heads=2, head_dim=12, draft_vocab=96,
         eps=1e-5, rope={"rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 4.0,
                                             "low_freq_factor": 1.0, "high_freq_factor": 2.0,
                                             "original_max_position_embeddings": 32}},
         attention_bias=True, own_embed=True, aux_ids=[0, 2, 3], norm_before_residual=True),
]


# ---------------------------------------------------------------------------------------------
# Standard-library part: config and weights.

def target_config(spec):
    with open(os.path.join(MODELS, spec["target"], "config.json")) as f:
        return json.load(f)


def head_config(spec):
    t = target_config(spec)
    c = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": spec["hidden"],
        "intermediate_size": spec["inter"],
        "num_attention_heads": spec["heads"],
        "num_key_value_heads": spec["kv_heads"],
        "num_hidden_layers": 1,
        "hidden_act": "silu",
        "rms_norm_eps": spec["eps"],
        "max_position_embeddings": 4096,
        "vocab_size": t["vocab_size"],
        "draft_vocab_size": spec["draft_vocab"],
        "tie_word_embeddings": False,
        "attention_bias": spec["attention_bias"],
        "torch_dtype": "float32",
    }
    if spec["head_dim"] is not None:
        c["head_dim"] = spec["head_dim"]
    c.update(spec["rope"])
    if spec["hidden"] != t["hidden_size"]:
        c["target_hidden_size"] = t["hidden_size"]
    if spec["aux_ids"] is not None:
        c["eagle_aux_hidden_state_layer_ids"] = list(spec["aux_ids"])
    if spec["norm_before_residual"] is not None:
        c["norm_before_residual"] = spec["norm_before_residual"]
    return c


def head_dim_of(c):
    return c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]


def aux_layer_ids(c, num_target_layers):
    """Ascending, distinct: the order vLLM's target forward appends them in."""
    ids = c.get("eagle_aux_hidden_state_layer_ids")
    if not ids:
        L = num_target_layers
        ids = [2, L // 2, L - 3]
    return sorted(set(ids))


def make_d2t(rng, vocab, draft_vocab):
    # A published head's draft vocabulary is a sorted subset of the target's (its most frequent
    # tokens); d2t[i] = target_id[i] - i (non-negative, non-decreasing). Ids 0..2 are always in.
    rest = sorted(rng.sample(range(3, vocab), draft_vocab - 3))
    target_ids = [0, 1, 2] + rest
    d2t = [tid - i for i, tid in enumerate(target_ids)]
    t2d = [0] * vocab
    for tid in target_ids:
        t2d[tid] = 1
    return target_ids, d2t, t2d


def head_tensors(spec):
    """name -> (dtype, shape, flat values), in a fixed order."""
    c = head_config(spec)
    t = target_config(spec)
    rng = random.Random(spec["seed"])
    H, I, Ht = c["hidden_size"], c["intermediate_size"], t["hidden_size"]
    D, Hq, Hkv = head_dim_of(c), c["num_attention_heads"], c["num_key_value_heads"]
    V, Vd = c["vocab_size"], c["draft_vocab_size"]
    n_aux = len(aux_layer_ids(c, t["num_hidden_layers"]))
    assert n_aux == 3, "an EAGLE-3 head reads three target layers"
    out = {}

    def matrix(name, rows, cols, gain=1.5):
        std = gain / math.sqrt(cols)
        out[name] = ("F32", [rows, cols], [rng.gauss(0.0, std) for _ in range(rows * cols)])

    def vector(name, n, mean, std):
        out[name] = ("F32", [n], [rng.gauss(mean, std) for _ in range(n)])

    if spec["own_embed"]:
        out["embed_tokens.weight"] = ("F32", [V, H], [rng.gauss(0.0, 0.5) for _ in range(V * H)])
    matrix("fc.weight", H, 3 * Ht)
    p = "midlayer."
    vector(p + "input_layernorm.weight", H, 1.0, 0.25)
    vector(p + "hidden_norm.weight", H, 1.0, 0.25)
    vector(p + "post_attention_layernorm.weight", H, 1.0, 0.25)
    matrix(p + "self_attn.q_proj.weight", Hq * D, 2 * H)
    matrix(p + "self_attn.k_proj.weight", Hkv * D, 2 * H)
    matrix(p + "self_attn.v_proj.weight", Hkv * D, 2 * H)
    matrix(p + "self_attn.o_proj.weight", H, Hq * D)
    if c["attention_bias"]:
        vector(p + "self_attn.q_proj.bias", Hq * D, 0.0, 0.1)
        vector(p + "self_attn.k_proj.bias", Hkv * D, 0.0, 0.1)
        vector(p + "self_attn.v_proj.bias", Hkv * D, 0.0, 0.1)
        vector(p + "self_attn.o_proj.bias", H, 0.0, 0.1)
    matrix(p + "mlp.gate_proj.weight", I, H)
    matrix(p + "mlp.up_proj.weight", I, H)
    matrix(p + "mlp.down_proj.weight", H, I)
    vector("norm.weight", H, 1.0, 0.25)
    matrix("lm_head.weight", Vd, H, gain=4.0)
    _, d2t, t2d = make_d2t(rng, V, Vd)
    out["d2t"] = ("I64", [Vd], d2t)
    out["t2d"] = ("BOOL", [V], t2d)
    return c, out


def write_safetensors(path, tensors):
    fmt = {"F32": ("<%df", 4), "I64": ("<%dq", 8), "BOOL": ("<%dB", 1)}
    header, blobs, offset = {}, [], 0
    for name, (dtype, shape, values) in tensors.items():
        code, size = fmt[dtype]
        n = 1
        for s in shape:
            n *= s
        assert len(values) == n, name
        blob = struct.pack(code % n, *values)
        pad = (-offset) % 8  # every tensor 8-byte aligned
        if pad:
            blobs.append(b"\0" * pad)
            offset += pad
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((-len(text)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def write_weights(spec, out_root):
    c, tensors = head_tensors(spec)
    d = os.path.join(out_root, spec["name"])
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(c, f, indent=2, sort_keys=True)
        f.write("\n")
    write_safetensors(os.path.join(d, "model.safetensors"), tensors)
    print("wrote %s/config.json, model.safetensors (%d tensors)" % (d, len(tensors)))
    return d, c, tensors


# ---------------------------------------------------------------------------------------------
# An independent float64 implementation in the standard library: the target (Qwen3 / Llama, from
# transformers' modeling_qwen3.py / modeling_llama.py) and the head (from vLLM's llama_eagle3.py).
# The full run checks the torch reference against it (stdlib_f64_check in reference.json);
# --stdlib-reference writes reference.json from it alone, where torch cannot be had.

def stdlib_reference(spec, out_dir, c, tensors):
    target = F64Target(os.path.join(MODELS, spec["target"]))
    ids_aux = aux_layer_ids(c, target.c["num_hidden_layers"])
    rng = random.Random(spec["seed"] * 7 + 1)
    V = c["vocab_size"]
    cases = []
    for n in PROMPT_LENGTHS:
        for attempt in range(20):
            prompt = [rng.randrange(3, V) for _ in range(n)]
            case = f64_case(c, tensors, target, ids_aux, prompt, NUM_DRAFTS)
            if min([case["first_pass_min_margin"], case["target_next_margin"]] + case["draft_margins"]) >= 1e-3:
                break
        case["seed_attempt"] = attempt
        cases.append(case)
    ref = {"made_by": "tools/make_eagle3_fixtures.py --stdlib-reference (float64, Python's standard library; a "
                      "stand-in until the torch reference is made)",
           "target": "tests/fixtures/models/" + spec["target"], "aux_layer_ids": ids_aux,
           "num_drafts": NUM_DRAFTS, "cases": cases}
    with open(os.path.join(out_dir, "reference.json"), "w") as f:
        json.dump(ref, f, separators=(",", ":"))
        f.write("\n")
    print("wrote %s/reference.json (stdlib float64): drafts %s" % (out_dir, [cs["draft_tokens"] for cs in cases]))


# ---------------------------------------------------------------------------------------------
# Reference part (torch + transformers).

def reference(spec, out_dir, c, tensors):
    import torch
    import transformers

    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    tdir = os.path.join(MODELS, spec["target"])
    target = transformers.AutoModelForCausalLM.from_pretrained(tdir, dtype=torch.float32,
                                                               attn_implementation="eager").eval()
    tc = target_config(spec)
    L = tc["num_hidden_layers"]
    ids_aux = aux_layer_ids(c, L)
    assert all(0 <= i <= L for i in ids_aux), ids_aux

    w = {}
    for name, (dtype, shape, values) in tensors.items():
        if dtype == "F32":
            w[name] = torch.tensor(values, dtype=torch.float32).reshape(shape)
        elif dtype == "I64":
            w[name] = torch.tensor(values, dtype=torch.int64).reshape(shape)
    H, D = c["hidden_size"], head_dim_of(c)
    Hq, Hkv = c["num_attention_heads"], c["num_key_value_heads"]
    eps = c["rms_norm_eps"]
    nbr = bool(c.get("norm_before_residual", False))
    embed = w["embed_tokens.weight"] if "embed_tokens.weight" in w else \
        target.get_input_embeddings().weight.detach().float()
    assert embed.shape[1] == H, "a head without embed_tokens must have the target's hidden size"
    d2t = w["d2t"]

    # RoPE: default by hand; anything else from transformers' Llama rotary embedding built from the
    # head's own config (the same rope_type code vLLM's get_rope follows).
    if "rope_parameters" in c and c["rope_parameters"].get("rope_type", "default") != "default":
        lc = transformers.LlamaConfig(hidden_size=H, num_attention_heads=Hq, num_key_value_heads=Hkv,
                                      head_dim=D, max_position_embeddings=c["max_position_embeddings"],
                                      rope_parameters=dict(c["rope_parameters"]))
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
        rot = LlamaRotaryEmbedding(config=lc)
        inv_freq = rot.inv_freq.detach().double()
        rope_scale = float(getattr(rot, "attention_scaling", 1.0))
    else:
        theta = c.get("rope_theta", (c.get("rope_parameters") or {}).get("rope_theta", 10000.0))
        inv_freq = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
        rope_scale = 1.0

    def rms(x, weight):
        x32 = x.float()
        return x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * weight

    def lin(x, name):
        y = x @ w[name + ".weight"].T
        if name + ".bias" in w:
            y = y + w[name + ".bias"]
        return y

    def rope(x, pos):  # x [n, heads, D], NeoX halves (Llama's rotate_half)
        ang = pos.double()[:, None] * inv_freq[None, :]
        emb = torch.cat([ang, ang], dim=-1)
        cos = (emb.cos() * rope_scale).float()[:, None, :]
        sin = (emb.sin() * rope_scale).float()[:, None, :]
        x1, x2 = x[..., : D // 2], x[..., D // 2:]
        return x * cos + torch.cat([-x2, x1], dim=-1) * sin

    class HeadCache:
        def __init__(self):
            self.k = torch.zeros(0, Hkv, D)
            self.v = torch.zeros(0, Hkv, D)

    def head_pass(cache, tokens, positions, h0):
        """One draft pass over consecutive positions; returns (logits [n, Vd], prenorm [n, H])."""
        p = "midlayer."
        e = rms(embed[tokens], w[p + "input_layernorm.weight"])
        if nbr:
            h = rms(h0, w[p + "hidden_norm.weight"])
            residual = h
        else:
            residual = h0
            h = rms(h0, w[p + "hidden_norm.weight"])
        x = torch.cat([e, h], dim=-1)
        n = x.shape[0]
        q = rope(lin(x, p + "self_attn.q_proj").view(n, Hq, D), positions)
        k = rope(lin(x, p + "self_attn.k_proj").view(n, Hkv, D), positions)
        v = lin(x, p + "self_attn.v_proj").view(n, Hkv, D)
        start = cache.k.shape[0]
        assert int(positions[0]) == start, "passes must be contiguous"
        cache.k = torch.cat([cache.k, k])
        cache.v = torch.cat([cache.v, v])
        kk = cache.k.repeat_interleave(Hq // Hkv, dim=1)  # [ctx, Hq, D]
        vv = cache.v.repeat_interleave(Hq // Hkv, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q, kk) / math.sqrt(D)
        ctx = cache.k.shape[0]
        qpos = torch.arange(start, start + n)[:, None]
        kpos = torch.arange(ctx)[None, :]
        scores = scores.masked_fill((kpos > qpos)[None], float("-inf"))
        attn = torch.einsum("hqk,khd->qhd", scores.softmax(-1), vv).reshape(n, Hq * D)
        a = lin(attn, p + "self_attn.o_proj")
        residual = a + residual
        m_in = rms(residual, w[p + "post_attention_layernorm.weight"])
        g = lin(m_in, p + "mlp.gate_proj")
        u = lin(m_in, p + "mlp.up_proj")
        m = lin(torch.nn.functional.silu(g) * u, p + "mlp.down_proj")
        prenorm = m + residual
        logits = rms(prenorm, w["norm.weight"]) @ w["lm_head.weight"].T
        return logits, prenorm

    # Residual stream captures: pre-hooks on every decoder layer and on the final norm.
    captured = {}

    def layer_hook(i):
        def hook(module, args, kwargs):
            captured[i] = (args[0] if args else kwargs["hidden_states"]).detach().clone()
        return hook

    layers = target.model.layers
    handles = [layers[i].register_forward_pre_hook(layer_hook(i), with_kwargs=True) for i in range(L)]
    handles.append(target.model.norm.register_forward_pre_hook(layer_hook(L), with_kwargs=True))

    def top2(row):
        v = torch.topk(row, 2).values
        return float(v[0] - v[1])

    rng = random.Random(spec["seed"] * 7 + 1)
    V = c["vocab_size"]
    cases, matches = [], True
    with torch.no_grad():
        for n in PROMPT_LENGTHS:
            for attempt in range(20):
                prompt = [rng.randrange(3, V) for _ in range(n)]
                captured.clear()
                out = target(torch.tensor([prompt]), output_hidden_states=True)
                hs = out.hidden_states
                aux = [captured[i][0] for i in ids_aux]  # each [n, Ht]
                for i in ids_aux:
                    if i < L and hs is not None and len(hs) == L + 1:
                        matches = matches and torch.equal(hs[i][0], captured[i][0])
                t_logits = out.logits[0, -1]
                target_next = int(t_logits.argmax())
                fed = prompt[1:] + [target_next]
                cache = HeadCache()
                h0 = lin(torch.cat(aux, dim=-1), "fc")
                logits, prenorm = head_pass(cache, torch.tensor(fed), torch.arange(n), h0)
                margins = [top2(r) for r in logits]
                draft_ids, draft_tokens, draft_margins = [], [], []
                row, hid = logits[-1], prenorm[-1:]
                for j in range(NUM_DRAFTS):
                    d = int(row.argmax())
                    draft_ids.append(d)
                    draft_tokens.append(d + int(d2t[d]))
                    draft_margins.append(top2(row))
                    if j + 1 == NUM_DRAFTS:
                        break
                    pos = n + j  # draft j + 1 goes in after the last prompt position
                    lg, pre = head_pass(cache, torch.tensor([draft_tokens[-1]]), torch.tensor([pos]), hid)
                    row, hid = lg[0], pre
                if min(margins + draft_margins + [top2(t_logits)]) >= 1e-3:
                    break
            cases.append({
                "prompt": prompt,
                "seed_attempt": attempt,
                "target_next": target_next,
                "target_next_margin": round(top2(t_logits), 6),
                "aux_hidden_last": [[float("%.9g" % x) for x in a[-1].tolist()] for a in aux],
                "first_pass_logits": [[float("%.9g" % x) for x in r.tolist()] for r in logits],
                "first_pass_argmax": [int(x) for x in logits.argmax(-1).tolist()],
                "first_pass_min_margin": round(min(margins), 6),
                "draft_ids": draft_ids,
                "draft_tokens": draft_tokens,
                "draft_margins": [round(m, 6) for m in draft_margins],
            })
    for h in handles:
        h.remove()
    # The independent float64 implementation must agree: same greedy decisions, logits within 1e-3.
    f64_target = F64Target(tdir)
    worst, same = 0.0, True
    for case in cases:
        f = f64_case(c, tensors, f64_target, ids_aux, case["prompt"], NUM_DRAFTS)
        for a, b in zip(case["first_pass_logits"], f["first_pass_logits"]):
            worst = max(worst, max(abs(x - y) for x, y in zip(a, b)))
        for key in ("target_next", "first_pass_argmax", "draft_ids", "draft_tokens"):
            same = same and case[key] == f[key]
    print("stdlib float64 check: first-pass logits within %.3g, same greedy decisions: %s" % (worst, same))
    if worst > 1e-3 or not same:
        raise SystemExit("the torch reference and the float64 implementation disagree; not writing reference.json")
    ref = {
        "made_by": "tools/make_eagle3_fixtures.py (transformers %s, torch %s)" % (transformers.__version__,
                                                                                torch.__version__),
        "target": "tests/fixtures/models/" + spec["target"],
        "aux_layer_ids": ids_aux,
        "aux_matches_output_hidden_states": bool(matches),
        "stdlib_f64_check": {"max_first_pass_logit_diff": float("%.3g" % worst), "same_greedy_decisions": same},
        "num_drafts": NUM_DRAFTS,
        "note": "first pass position p: fc(aux[p]) and token p + 1 (target_next at the last); drafts in "
                "target ids (draft id + d2t); see the tool's docstring",
        "cases": cases,
    }
    if not matches:
        print("WARNING: the hooked residual streams differ from output_hidden_states (see docstring)")
    with open(os.path.join(out_dir, "reference.json"), "w") as f:
        json.dump(ref, f, separators=(",", ":"))
        f.write("\n")
    print("wrote %s/reference.json: %d prompts, aux layers %s, drafts %s" % (
        out_dir, len(cases), ids_aux, [cs["draft_tokens"] for cs in cases]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "eagle3"))
    ap.add_argument("--weights-only", action="store_true",
                    help="config.json + model.safetensors only (Python's standard library, no reference)")
    ap.add_argument("--stdlib-reference", action="store_true",
                    help="reference.json from the float64 standard-library implementation alone (no torch)")
    ap.add_argument("--only", nargs="*", default=None)
    args = ap.parse_args()
    for spec in HEADS:
        if args.only and spec["name"] not in args.only:
            continue
        d, c, tensors = write_weights(spec, args.out)
        if args.stdlib_reference:
            stdlib_reference(spec, d, c, tensors)
        elif not args.weights_only:
            reference(spec, d, c, tensors)


if __name__ == "__main__":
    sys.exit(main())

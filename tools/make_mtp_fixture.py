#!/usr/bin/env python3
"""The Qwen3.5 fixture with a multi-token-prediction head (tests/fixtures/models/qwen3_5-tiny-mtp).

  python3 tools/make_mtp_fixture.py build       # here, Python's standard library only
  python3 tools/make_mtp_fixture.py reference   # where torch + transformers 5.17 are (tools/device/)

`build` copies qwen3_5-tiny-text (made by transformers) and adds `mtp.*` tensors of random weights
in the layout of Qwen3.5 checkpoints (one full-attention decoder layer with its output gate, fc over
[embedding; hidden], three zero-centred norms). transformers does not load the head, so
`reference` computes it from transformers' own building blocks (Qwen3_5DecoderLayer, its RMSNorm
and rotary embedding) wired as vLLM's qwen3_5_mtp wires them: for every position t of a prompt,
logits(t + 2) = lm_head(norm(layer(fc([norm_e(embed(x[t+1])); norm_h(h[t])]))) with h the model's
final-norm hidden states, the layer at position t over the causal prefix. It writes reference.json.
"""
import json
import os
import random
import shutil
import struct
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SRC = os.path.join(ROOT, "tests/fixtures/models/qwen3_5-tiny-text")
DST = os.path.join(ROOT, "tests/fixtures/models/qwen3_5-tiny-mtp")
PROMPTS = [[5, 77, 300, 12, 9, 401, 77, 300, 12, 9, 401, 77, 300, 150, 3, 499, 23, 23, 88, 61],
           list(range(40, 110, 3))]


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    return header, data


def build():
    cfg = json.load(open(os.path.join(SRC, "config.json")))
    os.makedirs(DST, exist_ok=True)
    for name in os.listdir(SRC):
        if name not in ("model.safetensors", "reference.json", "config.json"):
            shutil.copy(os.path.join(SRC, name), os.path.join(DST, name))
    cfg["mtp_num_hidden_layers"] = 1
    json.dump(cfg, open(os.path.join(DST, "config.json"), "w"), indent=2)
    H, I, D = cfg["hidden_size"], cfg["intermediate_size"], cfg["head_dim"]
    Hq, Hkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    rng = random.Random(1234)
    shapes = {
        "mtp.fc.weight": [H, 2 * H],
        "mtp.pre_fc_norm_embedding.weight": [H],
        "mtp.pre_fc_norm_hidden.weight": [H],
        "mtp.norm.weight": [H],
        "mtp.layers.0.input_layernorm.weight": [H],
        "mtp.layers.0.post_attention_layernorm.weight": [H],
        "mtp.layers.0.self_attn.q_proj.weight": [2 * Hq * D, H],
        "mtp.layers.0.self_attn.k_proj.weight": [Hkv * D, H],
        "mtp.layers.0.self_attn.v_proj.weight": [Hkv * D, H],
        "mtp.layers.0.self_attn.o_proj.weight": [H, Hq * D],
        "mtp.layers.0.self_attn.q_norm.weight": [D],
        "mtp.layers.0.self_attn.k_norm.weight": [D],
        "mtp.layers.0.mlp.gate_proj.weight": [I, H],
        "mtp.layers.0.mlp.up_proj.weight": [I, H],
        "mtp.layers.0.mlp.down_proj.weight": [H, I],
    }
    header, data = read_safetensors(os.path.join(SRC, "model.safetensors"))
    meta = header.pop("__metadata__", None)
    out = bytearray(data)
    for name, shape in shapes.items():
        n = 1
        for s in shape:
            n *= s
        # Norm weights are zero-centred (1 + w): small values around 0; matrices as HF initialises.
        std = 0.1 if len(shape) == 1 else 0.05
        values = [rng.gauss(0.0, std) for _ in range(n)]
        begin = len(out)
        out += struct.pack("<%df" % n, *values)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [begin, len(out)]}
    if meta is not None:
        header["__metadata__"] = meta
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    with open(os.path.join(DST, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        f.write(out)
    print("wrote", DST)


def reference():
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM
    from transformers.models.qwen3_5 import modeling_qwen3_5 as m

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(DST, dtype=torch.float32, attn_implementation="eager").eval()
    cfg = model.config
    weights = load_file(os.path.join(DST, "model.safetensors"))
    mtp = {k[len("mtp."):]: v for k, v in weights.items() if k.startswith("mtp.")}
    H = cfg.hidden_size
    full = cfg.layer_types.index("full_attention")
    layer = m.Qwen3_5DecoderLayer(cfg, layer_idx=full).eval()
    layer.load_state_dict({k[len("layers.0."):]: v for k, v in mtp.items() if k.startswith("layers.0.")})

    def norm(name):
        n = m.Qwen3_5RMSNorm(H, eps=cfg.rms_norm_eps)
        n.load_state_dict({"weight": mtp[name + ".weight"]})
        return n.eval()

    norm_e, norm_h, final = norm("pre_fc_norm_embedding"), norm("pre_fc_norm_hidden"), norm("norm")
    fc = torch.nn.Linear(2 * H, H, bias=False)
    fc.load_state_dict({"weight": mtp["fc.weight"]})
    cases = []
    with torch.no_grad():
        for prompt in PROMPTS:
            ids = torch.tensor([prompt])
            out = model(ids, output_hidden_states=True)
            h = out.hidden_states[-1]  # after the model's final norm
            n = len(prompt) - 1
            e = model.model.embed_tokens(ids[:, 1:])
            x = fc(torch.cat([norm_e(e), norm_h(h[:, :n])], dim=-1))
            pos = torch.arange(n)[None]
            # The text model's multimodal RoPE takes (3, batch, n) positions: t, h, w all = t for text.
            pe = model.model.rotary_emb(x, pos[None].expand(3, 1, n))
            mask = torch.full((n, n), float("-inf")).triu(1)[None, None]
            y = layer(x, position_embeddings=pe, attention_mask=mask, position_ids=pos)
            y = y[0] if isinstance(y, tuple) else y
            logits = model.lm_head(final(y))[0]
            cases.append({"prompt": prompt,
                          "mtp_logits": [[round(v, 6) for v in row] for row in logits.tolist()],
                          "mtp_argmax": logits.argmax(-1).tolist()})
    json.dump({"made_by": "tools/make_mtp_fixture.py reference (transformers %s, torch %s)" % (
                   __import__("transformers").__version__, torch.__version__),
               "note": "MTP head logits for position t + 2 from h[t] and token t + 1, t = 0 .. len - 2",
               "cases": cases}, open(os.path.join(DST, "reference.json"), "w"))
    print("wrote reference.json")


if __name__ == "__main__":
    {"build": build, "reference": reference}[sys.argv[1] if len(sys.argv) > 1 else "build"]()

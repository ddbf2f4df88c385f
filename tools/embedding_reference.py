#!/usr/bin/env python3
"""Reference embeddings for the /v1/embeddings tests, from an implementation independent of pagoda.

What sentence-transformers (and vLLM's pooling runner) compute for a Qwen3-Embedding checkpoint:
  1. tokenize with the tokenizer's post-processor (Qwen3-Embedding's tokenizer.json appends
     <|endoftext|> through a TemplateProcessing post-processor: `tokenizer(text)` gives ids + [eos]);
     token-id inputs are used as given;
  2. the Qwen3 decoder forward (transformers' Qwen3Model: RMSNorm, q/k RMSNorm per head, NeoX rope,
     GQA causal attention, SwiGLU MLP) and its final norm -> last_hidden_state;
  3. last-token pooling (sentence-transformers Pooling, pooling_mode_lasttoken);
  4. L2 normalisation (the Normalize module); with `dimensions` d (Matryoshka), the first d values
     re-normalised (vLLM's embedding head truncates, then normalises).

Pure Python in float64 (json, struct, math only: no numpy or torch needed), written from
transformers' modeling_qwen3.py, the same math as tools/make_fixtures.py's `naive_logits` (which
needs torch). The model is the tiny fixture tests/fixtures/models/qwen3-tiny-tied; its tokenizer is
the small byte-level BPE that the server tests build (tests/server/server_harness.h,
tiny_tokenizer_json) plus Qwen3-Embedding's post-processor; `tiny_bpe` below re-implements it.

    python3 tools/embedding_reference.py --out tests/fixtures/embeddings/qwen3-tiny-tied.json

With --check-hf (where torch, transformers and tokenizers are installed: the GPU machine) it also
checks the token ids against Hugging Face `tokenizers` and the vectors against transformers'
Qwen3Model in float64, and records the agreement in the fixture ("hf_check").
"""
from __future__ import annotations

import argparse
import json
import math
import os
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "tests/fixtures/models/qwen3-tiny-tied")
EOS_ID = 500  # <|endoftext|> in the tiny tokenizer (its first added token)

# (name, input): strings go through the tokenizer (+ <|endoftext|>); lists are token ids as given.
CASES = [
    ("short_text", "Hello world"),
    ("sentence", "the quick brown fox jumps over the lazy dog"),
    ("long_text", "a b c d e f g h i j k l m n o p q r s t u v w x y z, abcdefghij klmnopqrst uvwxyz " * 2),
    ("special_in_text", "ab<|endoftext|>cd"),
    ("token_ids", [5, 17, 300, 42, 499, 3]),
    ("one_token", [7]),
]
DIMENSIONS = [16, 1]  # Matryoshka truncations stored besides the full vector


# ---------------------------------------------------------------------------------------------
# Tokenizer: byte-level BPE, one word per text (ByteLevel pre-tokenizer with use_regex false),
# ids 0..255 the byte-level alphabet in byte order, then the two-letter merges "aa", "ab", ...
# (rank order) up to id 499, then added tokens from 500 (<|endoftext|> first).
# ---------------------------------------------------------------------------------------------


def byte_to_unicode():
    """GPT-2's byte-level alphabet: printable bytes map to themselves, the rest to U+0100.."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    out, n = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + n)
            n += 1
    return out


def tiny_vocab():
    b2u = byte_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    ranks = {}
    nid = 256
    for a in "abcdefghijklmnopqrstuvwxyz":
        for b in "abcdefghijklmnopqrstuvwxyz":
            if nid >= 500:
                break
            vocab[a + b] = nid
            ranks[(a, b)] = nid - 256
            nid += 1
    return b2u, vocab, ranks


def bpe_word(symbols, ranks):
    while True:
        best = None
        for i in range(len(symbols) - 1):
            r = ranks.get((symbols[i], symbols[i + 1]))
            if r is not None and (best is None or r < best[0]):
                best = (r, i)
        if best is None:
            return symbols
        i = best[1]
        symbols = symbols[:i] + [symbols[i] + symbols[i + 1]] + symbols[i + 2:]


def tiny_bpe(text):
    """ids of `text` as `tokenizer(text)` gives them: added tokens split out, BPE, then + [eos]."""
    b2u, vocab, ranks = tiny_vocab()
    ids = []
    special = "<|endoftext|>"
    parts = text.split(special)
    for k, part in enumerate(parts):
        if part:
            symbols = [b2u[b] for b in part.encode("utf-8")]
            ids += [vocab[s] for s in bpe_word(symbols, ranks)]
        if k + 1 < len(parts):
            ids.append(EOS_ID)
    return ids + [EOS_ID]  # the TemplateProcessing post-processor: "$A <|endoftext|>"


# ---------------------------------------------------------------------------------------------
# safetensors (F32 / BF16 / F16) -> nested lists of floats
# ---------------------------------------------------------------------------------------------


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        raw = data[a:b]
        dt = info["dtype"]
        if dt == "F32":
            vals = list(struct.unpack(f"<{len(raw) // 4}f", raw))
        elif dt == "BF16":
            vals = [struct.unpack("<f", b"\0\0" + raw[i:i + 2])[0] for i in range(0, len(raw), 2)]
        elif dt == "F16":
            vals = list(struct.unpack(f"<{len(raw) // 2}e", raw))
        else:
            raise SystemExit(f"{path}: tensor {name} has dtype {dt}, not a float type")
        shape = info["shape"]
        if len(shape) == 2:
            r, c = shape
            vals = [vals[i * c:(i + 1) * c] for i in range(r)]
        out[name] = vals
    return out


# ---------------------------------------------------------------------------------------------
# Qwen3 forward in float64 (transformers' modeling_qwen3.py)
# ---------------------------------------------------------------------------------------------


def matvec(w, x):  # w [out][in], x [in]
    return [math.fsum(wi * xi for wi, xi in zip(row, x)) for row in w]


def rms_norm(x, w, eps):
    inv = 1.0 / math.sqrt(math.fsum(v * v for v in x) / len(x) + eps)
    return [v * inv * g for v, g in zip(x, w)]


def rope(x, pos, theta):  # NeoX rotate-half over the whole head
    d = len(x)
    half = d // 2
    out = list(x)
    for i in range(half):
        ang = pos * (1.0 / theta ** (2 * i / d))
        c, s = math.cos(ang), math.sin(ang)
        out[i] = x[i] * c - x[i + half] * s
        out[i + half] = x[i + half] * c + x[i] * s
    return out


def silu(v):
    return v / (1.0 + math.exp(-v))


def last_hidden_state(cfg, W, ids):
    """The final-norm hidden state of every position [T][H] (Qwen3Model.last_hidden_state)."""
    H, eps = cfg["hidden_size"], cfg.get("rms_norm_eps", 1e-6)
    nH, nKV, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg.get("head_dim", 128)
    rp = cfg.get("rope_parameters") or {}
    theta = rp.get("rope_theta", cfg.get("rope_theta"))
    assert (rp.get("rope_type") or "default") == "default", "only default rope is implemented here"
    group = nH // nKV
    h = [list(W["model.embed_tokens.weight"][t]) for t in ids]
    T = len(ids)
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        qs, ks, vs = [], [], []
        for t in range(T):
            x = rms_norm(h[t], W[p + "input_layernorm.weight"], eps)
            q = matvec(W[p + "self_attn.q_proj.weight"], x)
            k = matvec(W[p + "self_attn.k_proj.weight"], x)
            v = matvec(W[p + "self_attn.v_proj.weight"], x)
            qs.append([rope(rms_norm(q[i * hd:(i + 1) * hd], W[p + "self_attn.q_norm.weight"], eps), t, theta)
                       for i in range(nH)])
            ks.append([rope(rms_norm(k[i * hd:(i + 1) * hd], W[p + "self_attn.k_norm.weight"], eps), t, theta)
                       for i in range(nKV)])
            vs.append([v[i * hd:(i + 1) * hd] for i in range(nKV)])
        for t in range(T):
            o = []
            for head in range(nH):
                kv = head // group
                scores = [math.fsum(a * b for a, b in zip(qs[t][head], ks[s][kv])) / math.sqrt(hd)
                          for s in range(t + 1)]
                m = max(scores)
                e = [math.exp(sc - m) for sc in scores]
                z = math.fsum(e)
                o += [math.fsum(e[s] * vs[s][kv][d] for s in range(t + 1)) / z for d in range(hd)]
            attn = matvec(W[p + "self_attn.o_proj.weight"], o)
            h[t] = [a + b for a, b in zip(h[t], attn)]
            x = rms_norm(h[t], W[p + "post_attention_layernorm.weight"], eps)
            g = matvec(W[p + "mlp.gate_proj.weight"], x)
            u = matvec(W[p + "mlp.up_proj.weight"], x)
            mlp = matvec(W[p + "mlp.down_proj.weight"], [silu(a) * b for a, b in zip(g, u)])
            h[t] = [a + b for a, b in zip(h[t], mlp)]
    assert len(h[0]) == H
    return [rms_norm(row, W["model.norm.weight"], eps) for row in h]


def normalize(v):
    n = math.sqrt(math.fsum(x * x for x in v))
    return [x / max(n, 1e-12) for x in v]  # torch.nn.functional.normalize's eps


def tiny_tokenizer_json():
    """The tokenizer.json the server tests write (server_harness.h) + Qwen3-Embedding's post-processor."""
    b2u, vocab, _ = tiny_vocab()
    merges = [[k[0], k[1]] for k in sorted(tiny_vocab()[2], key=lambda k: tiny_vocab()[2][k])]
    names = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>",
             "<tool_response>", "</tool_response>", "<|pad_0|>", "<|pad_1|>", "<|pad_2|>"]
    special = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad_0|>", "<|pad_1|>", "<|pad_2|>"}
    added = [{"id": 500 + i, "content": n, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": n in special} for i, n in enumerate(names)]
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                              "use_regex": False},
            "post_processor": {"type": "TemplateProcessing",
                               "single": [{"Sequence": {"id": "A", "type_id": 0}},
                                          {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}],
                               "pair": [{"Sequence": {"id": "A", "type_id": 0}},
                                        {"Sequence": {"id": "B", "type_id": 1}},
                                        {"SpecialToken": {"id": "<|endoftext|>", "type_id": 1}}],
                               "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [EOS_ID],
                                                                    "tokens": ["<|endoftext|>"]}}},
            "decoder": None,  # encoding only
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "vocab": vocab, "merges": merges}}


def check_with_hf(cases):
    """Where torch/transformers/tokenizers are importable (the GPU machine): the same ids from HF
    tokenizers, and the same vectors from transformers' Qwen3Model (float64) + last token + normalize."""
    import torch
    import transformers
    from tokenizers import Tokenizer
    tok = Tokenizer.from_str(json.dumps(tiny_tokenizer_json()))
    model = transformers.AutoModel.from_pretrained(MODEL, dtype=torch.float64, attn_implementation="eager").eval()
    worst = 0.0
    for c in cases:
        if isinstance(c["input"], str):
            ids = tok.encode(c["input"]).ids  # add_special_tokens=True: the post-processor runs
            assert ids == c["token_ids"], f"{c['name']}: HF tokenizers gives {ids}, tiny_bpe {c['token_ids']}"
        with torch.no_grad():
            h = model(torch.tensor([c["token_ids"]])).last_hidden_state[0, -1]
        e = torch.nn.functional.normalize(h, dim=-1).tolist()
        worst = max(worst, max(abs(a - b) for a, b in zip(e, c["embedding"])))
    print(f"transformers {transformers.__version__} Qwen3Model float64 vs this script: max abs diff {worst:.3g}",
          file=sys.stderr)
    # transformers' Qwen3RMSNorm computes in float32 whatever the model dtype: ~1e-7 apart.
    assert worst < 1e-6, worst
    return {"transformers": transformers.__version__, "max_abs_diff": worst}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--check-hf", action="store_true",
                    help="also check ids against HF tokenizers and vectors against transformers' Qwen3Model")
    args = ap.parse_args()
    with open(os.path.join(MODEL, "config.json")) as f:
        cfg = json.load(f)
    W = read_safetensors(os.path.join(MODEL, "model.safetensors"))
    cases = []
    for name, inp in CASES:
        ids = tiny_bpe(inp) if isinstance(inp, str) else list(inp)
        pooled = last_hidden_state(cfg, W, ids)[-1]  # last-token pooling
        case = {"name": name, "input": inp, "token_ids": ids,
                "embedding": [float(f"{v:.12g}") for v in normalize(pooled)]}
        case["dimensions"] = {str(d): [float(f"{v:.12g}") for v in normalize(pooled[:d])] for d in DIMENSIONS}
        cases.append(case)
        print(f"{name}: {len(ids)} tokens", file=sys.stderr)
    out = {
        "generated_by": "tools/embedding_reference.py (pure-Python float64 Qwen3 forward)",
        "model": "tests/fixtures/models/qwen3-tiny-tied",
        "tokenizer": "tests/server/server_harness.h tiny_tokenizer_json() + post_processor "
                     "TemplateProcessing \"$A <|endoftext|>\" (as Qwen3-Embedding's tokenizer.json)",
        "pooling": "last token of the final-norm hidden state, L2-normalised; dimensions: first d, re-normalised",
        "hidden_size": cfg["hidden_size"],
        "eos_token_id": EOS_ID,
        "cases": cases,
    }
    if args.check_hf:
        out["hf_check"] = check_with_hf(cases)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()

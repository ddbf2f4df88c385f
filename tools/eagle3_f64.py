"""The float64 reference of tools/make_eagle3_fixtures.py, in Python's standard library alone.

The target (Qwen3 / Llama decoder layers, written from transformers' modeling_qwen3.py and
modeling_llama.py: RMSNorm, q/k norms when the checkpoint has them, NeoX RoPE with the default or
llama3 frequency rule, GQA, SwiGLU) and the EAGLE-3 head (written from vLLM's llama_eagle3.py; the
rules are in make_eagle3_fixtures.py's docstring). Slow (pure Python) but independent of torch, of
transformers and of pagoda.
"""

import json
import math
import os
import struct


def read_safetensors_flat(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        code = {"F32": "f", "I64": "q"}.get(info["dtype"])
        if code is None:
            continue
        size = struct.calcsize(code)
        out[name] = (info["shape"], list(struct.unpack("<%d%s" % ((b - a) // size, code), data[a:b])))
    return out


def _rows(shape_values):
    shape, v = shape_values
    if len(shape) == 1:
        return list(v)
    r, c = shape
    return [v[i * c:(i + 1) * c] for i in range(r)]


def _matvec(w, x, bias=None):
    out = [sum(map(float.__mul__, row, x)) for row in w]
    return [o + b for o, b in zip(out, bias)] if bias is not None else out


def _rms(x, w, eps):
    inv = 1.0 / math.sqrt(sum(v * v for v in x) / len(x) + eps)
    return [v * inv * g for v, g in zip(x, w)]


def _silu(v):
    return v / (1.0 + math.exp(-v)) if v > -700 else 0.0


def _inv_freq(D, rope):
    """rope: {"rope_type", "rope_theta", ...}; transformers' default and llama3 rules."""
    theta = rope.get("rope_theta", 10000.0)
    inv = [1.0 / theta ** (2 * i / D) for i in range(D // 2)]
    kind = rope.get("rope_type", "default") or "default"
    if kind == "default":
        return inv
    assert kind == "llama3", kind
    factor, lo, hi = rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"]
    old = rope["original_max_position_embeddings"]
    lo_wl, hi_wl = old / lo, old / hi
    out = []
    for f in inv:
        wl = 2 * math.pi / f
        g = f / factor if wl > lo_wl else f
        if not (wl < hi_wl) and not (wl > lo_wl):
            smooth = (old / wl - lo) / (hi - lo)
            g = (1 - smooth) * g / factor + smooth * g
        out.append(g)
    return out


def _rope(x, pos, inv):
    half = len(inv)
    out = list(x)
    for i, f in enumerate(inv):
        c, s = math.cos(pos * f), math.sin(pos * f)
        out[i] = x[i] * c - x[i + half] * s
        out[i + half] = x[i + half] * c + x[i] * s
    return out


def _attend(q_heads, keys, values, upto, group, D):
    """q_heads [Hq][D]; keys/values [ctx][Hkv][D]; causal up to position `upto` inclusive."""
    o = []
    for h, q in enumerate(q_heads):
        kv = h // group
        sc = [sum(map(float.__mul__, q, keys[s][kv])) / math.sqrt(D) for s in range(upto + 1)]
        m = max(sc)
        e = [math.exp(v - m) for v in sc]
        z = sum(e)
        o += [sum(e[s] * values[s][kv][d] for s in range(upto + 1)) / z for d in range(D)]
    return o


def _rope_cfg(c):
    if "rope_parameters" in c:
        return dict(c["rope_parameters"])
    r = dict(c.get("rope_scaling") or {})
    r["rope_theta"] = c.get("rope_theta", 10000.0)
    r.setdefault("rope_type", r.pop("type", "default") if "type" in r else "default")
    return r


class F64Target:
    def __init__(self, model_dir):
        with open(os.path.join(model_dir, "config.json")) as f:
            self.c = json.load(f)
        self.w = {k: _rows(v) for k, v in read_safetensors_flat(os.path.join(model_dir, "model.safetensors")).items()}
        c = self.c
        self.D = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
        self.inv = _inv_freq(self.D, _rope_cfg(c))
        self.qk_norm = "model.layers.0.self_attn.q_norm.weight" in self.w

    def forward(self, ids):
        """(streams, logits_last): streams[i][t] the residual stream at the input of layer i (i = L: after
        the last layer, before the final norm); the full-vocab logits of the last position."""
        c, w, D = self.c, self.w, self.D
        Hq, Hkv, eps = c["num_attention_heads"], c["num_key_value_heads"], c["rms_norm_eps"]
        h = [list(w["model.embed_tokens.weight"][t]) for t in ids]
        streams = []
        for layer in range(c["num_hidden_layers"]):
            streams.append([list(r) for r in h])
            p = "model.layers.%d." % layer
            b = lambda n: w.get(p + "self_attn.%s.bias" % n)
            qs, ks, vs = [], [], []
            for t in range(len(ids)):
                x = _rms(h[t], w[p + "input_layernorm.weight"], eps)
                q = _matvec(w[p + "self_attn.q_proj.weight"], x, b("q_proj"))
                k = _matvec(w[p + "self_attn.k_proj.weight"], x, b("k_proj"))
                v = _matvec(w[p + "self_attn.v_proj.weight"], x, b("v_proj"))
                qh = [q[i * D:(i + 1) * D] for i in range(Hq)]
                kh = [k[i * D:(i + 1) * D] for i in range(Hkv)]
                if self.qk_norm:
                    qh = [_rms(x_, w[p + "self_attn.q_norm.weight"], eps) for x_ in qh]
                    kh = [_rms(x_, w[p + "self_attn.k_norm.weight"], eps) for x_ in kh]
                qs.append([_rope(x_, t, self.inv) for x_ in qh])
                ks.append([_rope(x_, t, self.inv) for x_ in kh])
                vs.append([v[i * D:(i + 1) * D] for i in range(Hkv)])
            for t in range(len(ids)):
                a = _matvec(w[p + "self_attn.o_proj.weight"], _attend(qs[t], ks, vs, t, Hq // Hkv, D), b("o_proj"))
                h[t] = [x_ + y for x_, y in zip(h[t], a)]
                x = _rms(h[t], w[p + "post_attention_layernorm.weight"], eps)
                g = _matvec(w[p + "mlp.gate_proj.weight"], x)
                u = _matvec(w[p + "mlp.up_proj.weight"], x)
                m = _matvec(w[p + "mlp.down_proj.weight"], [_silu(x_) * y for x_, y in zip(g, u)])
                h[t] = [x_ + y for x_, y in zip(h[t], m)]
        streams.append([list(r) for r in h])
        head = w["lm_head.weight"] if "lm_head.weight" in w else w["model.embed_tokens.weight"]
        logits = _matvec(head, _rms(h[-1], w["model.norm.weight"], eps))
        return streams, logits


class F64Head:
    def __init__(self, c, tensors, target):
        self.c = c
        self.w = {k: _rows((shape, vals)) for k, (dt, shape, vals) in tensors.items() if dt in ("F32", "I64")}
        self.D = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
        self.inv = _inv_freq(self.D, _rope_cfg(c))
        self.embed = self.w.get("embed_tokens.weight") or target.w["model.embed_tokens.weight"]
        self.keys, self.values = [], []

    def run(self, tokens, positions, h0_rows):
        """One pass over consecutive positions: (logits rows, pre-norm rows)."""
        c, w, D = self.c, self.w, self.D
        Hq, Hkv, eps = c["num_attention_heads"], c["num_key_value_heads"], c["rms_norm_eps"]
        p = "midlayer."
        b = lambda n: w.get(p + "self_attn.%s.bias" % n)
        residuals, qs = [], []
        for tok, pos, h0 in zip(tokens, positions, h0_rows):
            assert pos == len(self.keys)
            e = _rms(self.embed[tok], w[p + "input_layernorm.weight"], eps)
            hn = _rms(h0, w[p + "hidden_norm.weight"], eps)
            residuals.append(hn if c.get("norm_before_residual") else list(h0))
            x = e + hn
            q = _matvec(w[p + "self_attn.q_proj.weight"], x, b("q_proj"))
            k = _matvec(w[p + "self_attn.k_proj.weight"], x, b("k_proj"))
            v = _matvec(w[p + "self_attn.v_proj.weight"], x, b("v_proj"))
            qs.append([_rope(q[i * D:(i + 1) * D], pos, self.inv) for i in range(Hq)])
            self.keys.append([_rope(k[i * D:(i + 1) * D], pos, self.inv) for i in range(Hkv)])
            self.values.append([v[i * D:(i + 1) * D] for i in range(Hkv)])
        logits, prenorms = [], []
        for q, pos, r in zip(qs, positions, residuals):
            a = _matvec(w[p + "self_attn.o_proj.weight"], _attend(q, self.keys, self.values, pos, Hq // Hkv, D),
                        b("o_proj"))
            r = [x_ + y for x_, y in zip(r, a)]
            x = _rms(r, w[p + "post_attention_layernorm.weight"], eps)
            g = _matvec(w[p + "mlp.gate_proj.weight"], x)
            u = _matvec(w[p + "mlp.up_proj.weight"], x)
            pre = [x_ + y for x_, y in zip(_matvec(w[p + "mlp.down_proj.weight"], [_silu(x_) * y for x_, y in zip(g, u)]), r)]
            prenorms.append(pre)
            logits.append(_matvec(w["lm_head.weight"], _rms(pre, w["norm.weight"], eps)))
        return logits, prenorms


def _argmax(row):
    return max(range(len(row)), key=lambda i: row[i])


def _top2(row):
    a, b = sorted(row)[-2:]
    return b - a


def f64_case(c, tensors, target, ids_aux, prompt, num_drafts):
    """The reference.json fields of one prompt, in float64."""
    streams, t_logits = target.forward(prompt)
    n = len(prompt)
    aux = [streams[i] for i in ids_aux]
    target_next = _argmax(t_logits)
    head = F64Head(c, tensors, target)
    fc = head.w["fc.weight"]
    h0 = [_matvec(fc, sum((a[t] for a in aux), [])) for t in range(n)]
    logits, pre = head.run(prompt[1:] + [target_next], list(range(n)), h0)
    d2t = head.w["d2t"]
    draft_ids, draft_tokens, margins = [], [], []
    row, hid = logits[-1], pre[-1]
    for j in range(num_drafts):
        d = _argmax(row)
        draft_ids.append(d)
        draft_tokens.append(d + int(d2t[d]))
        margins.append(_top2(row))
        if j + 1 == num_drafts:
            break
        lg, pr = head.run([draft_tokens[-1]], [n + j], [hid])
        row, hid = lg[0], pr[0]
    return {
        "prompt": prompt,
        "target_next": target_next,
        "target_next_margin": round(_top2(t_logits), 6),
        "aux_hidden_last": [[float("%.9g" % x) for x in a[-1]] for a in aux],
        "first_pass_logits": [[float("%.9g" % x) for x in r] for r in logits],
        "first_pass_argmax": [_argmax(r) for r in logits],
        "first_pass_min_margin": round(min(_top2(r) for r in logits), 6),
        "draft_ids": draft_ids,
        "draft_tokens": draft_tokens,
        "draft_margins": [round(m, 6) for m in margins],
    }

#!/usr/bin/python3
"""Convert a Hugging Face checkpoint directory, as pagoda loads it (safetensors + config.json +
tokenizer.json [+ tokenizer_config.json]), into a GGUF file for llama.cpp, without PyTorch or
transformers (which llama.cpp's own convert_hf_to_gguf.py needs and this machine does not have):

    python3 tools/checkpoint_to_gguf.py models/qwen3-kjv --out /tmp/gguf/qwen3-kjv-bf16.gguf \
        --gguf-py /path/to/llama.cpp/gguf-py [--outtype bf16|f32]

For benchmarking pagoda beside llama.cpp's CPU build (tools/bench_llama_cpp_cpu.sh) and checking
that the two agree (tools/llama_cpp_cpu_check.sh). Needs numpy (Debian `python3-numpy`, in
tools/setup.sh; run with /usr/bin/python3) and llama.cpp's `gguf` Python package, which is not
in Debian: `--gguf-py` names the gguf-py folder of a llama.cpp source tree and is put on sys.path at
run time (nothing of llama.cpp is copied here).

Families: Qwen3 (`qwen3`) and Qwen3.5 dense text models (`qwen35`, Gated DeltaNet + gated attention).
The tensor names, metadata keys and transforms are those llama.cpp's converter applies for these
architectures (conversion/qwen.py of llama.cpp), re-implemented on numpy arrays:
- every 1-D tensor and every norm is written as F32, as is the Gated DeltaNet conv1d ([C, 1, K]
  squeezed to [C, K]), A_log and dt_bias; 2-D weights in --outtype (bf16 copies the checkpoint's bf16
  bits unchanged);
- Qwen3.5: A_log -> -exp(A_log) (llama.cpp's ssm_a), dt_bias -> ssm_dt.bias, the (1 + w) RMSNorm
  weights (every `*norm.weight` but the Gated DeltaNet's own) written as 1 + w, and where there are
  more value heads than key heads the value heads reordered from grouped-by-key-head to tiled order
  (in_proj_qkv's V rows, in_proj_z, in_proj_a/b, A_log, dt_bias, conv1d's V channels, out_proj's
  columns), as llama.cpp's ggml graph expects. The MTP head (`mtp.*`) is not converted.
- Tokenizer: byte-level BPE ("gpt2" model) with the pre-tokenizer named from tokenizer.json's split
  regex (Qwen2's -> "qwen2", Qwen3.5's -> "qwen35"), tokens padded to vocab_size with unused
  "[PAD<i>]" entries, added special tokens as CONTROL; merges and bos/eos/pad ids from gguf's
  SpecialVocab (tokenizer.json + tokenizer_config.json).
"""
from __future__ import annotations

import argparse
import json
import os
import struct
import sys

import numpy as np

QWEN2_SPLIT = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
               "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
QWEN35_SPLIT = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}"
                "\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
PRE_TOKENIZERS = {QWEN2_SPLIT: "qwen2", QWEN35_SPLIT: "qwen35"}
NP_DTYPES = {"BF16": np.uint16, "F16": np.float16, "F32": np.float32}


def fail(msg):
    sys.exit(f"checkpoint_to_gguf: {msg}")


# ---------------------------------------------------------------------------------------------
# safetensors (mapped, read-only)

def read_safetensors(ckpt):
    """{name: (dtype, shape, memmap view)} over every shard of the checkpoint."""
    index = os.path.join(ckpt, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    out = {}
    for fn in files:
        path = os.path.join(ckpt, fn)
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
        data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
        for name, info in header.items():
            if name == "__metadata__":
                continue
            if info["dtype"] not in NP_DTYPES:
                fail(f"{fn}: tensor {name} has dtype {info['dtype']}; only BF16, F16 and F32 convert")
            a, b = info["data_offsets"]
            view = data[a:b].view(NP_DTYPES[info["dtype"]]).reshape(info["shape"])
            out[name] = (info["dtype"], list(info["shape"]), view)
    return out


def to_f32(dtype, a):
    if dtype == "BF16":
        return (a.astype(np.uint32) << 16).view(np.float32)
    return a.astype(np.float32)


# ---------------------------------------------------------------------------------------------
# architecture: hyper-parameters

def arch_of(cfg):
    mt = cfg.get("model_type", "")
    archs = cfg.get("architectures") or [""]
    if mt == "qwen3" or archs[0] == "Qwen3ForCausalLM":
        return "qwen3"
    if mt in ("qwen3_5_text", "qwen3_5") or archs[0] == "Qwen3_5ForCausalLM":
        if "text_config" in cfg:
            fail("the multimodal Qwen3.5 layout (text_config) is not handled; convert the text model")
        return "qwen35"
    fail(f"model_type {mt!r} ({archs[0]}): only qwen3 and qwen3_5 text checkpoints convert")


def rope_params(cfg):
    rp = dict(cfg.get("rope_parameters") or cfg.get("rope_scaling") or {})
    if "rope_theta" not in rp and "rope_theta" in cfg:
        rp["rope_theta"] = cfg["rope_theta"]
    if "partial_rotary_factor" not in rp and "partial_rotary_factor" in cfg:
        rp["partial_rotary_factor"] = cfg["partial_rotary_factor"]
    rtype = rp.get("rope_type", rp.get("type", "default"))
    if rtype not in ("default", None):
        fail(f"rope_type {rtype!r}: only unscaled rope converts here")
    return rp


def write_hparams(w, gguf, cfg, arch, file_type):
    rp = rope_params(cfg)
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_rope_freq_base(rp["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    head_dim = cfg.get("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"])
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_file_type(file_type)
    if arch != "qwen35":
        return
    w.add_ssm_conv_kernel(cfg["linear_conv_kernel_dim"])
    w.add_ssm_state_size(cfg["linear_key_head_dim"])
    w.add_ssm_group_count(cfg["linear_num_key_heads"])
    w.add_ssm_time_step_rank(cfg["linear_num_value_heads"])
    w.add_ssm_inner_size(cfg["linear_value_head_dim"] * cfg["linear_num_value_heads"])
    w.add_full_attention_interval(full_attention_interval(cfg))
    w.add_rope_dimension_count(int(head_dim * rp.get("partial_rotary_factor", 0.25)))
    sections = list(rp.get("mrope_section", [11, 11, 10]))
    w.add_rope_dimension_sections((sections + [0, 0, 0, 0])[:4])


def full_attention_interval(cfg):
    """llama.cpp knows the layer kinds only as "every n-th layer is full attention"."""
    types = cfg.get("layer_types")
    n = cfg.get("full_attention_interval", 4)
    if types is None:
        return n
    full = [i for i, t in enumerate(types) if t == "full_attention"]
    n = full[0] + 1 if full else len(types) + 1
    expect = ["full_attention" if (i + 1) % n == 0 else "linear_attention" for i in range(len(types))]
    if types != expect:
        fail(f"layer_types {types} is not 'every {n}-th layer full attention', which llama.cpp needs")
    return n


# ---------------------------------------------------------------------------------------------
# tensors

def reorder_v_heads(a, dim, nk, nv_per_k, head_dim):
    """Value heads grouped by key head [k0: v0..v(r-1), k1: ...] -> tiled [v0: k0 k1 .., v1: ..]."""
    shape = a.shape
    a = a.reshape(shape[:dim] + (nk, nv_per_k, head_dim) + shape[dim + 1:])
    return np.ascontiguousarray(np.swapaxes(a, dim, dim + 1)).reshape(shape)


def qwen35_transform(cfg, name, dtype, a):
    """(new HF-style name, array, is_float32) after llama.cpp's Qwen3.5 transforms."""
    nk, nv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    dk, dv = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"]
    f32 = False
    if nk != nv and "linear_attn." in name:
        r = nv // nk
        if ".in_proj_qkv." in name:
            qk = 2 * nk * dk
            a = np.concatenate([a[:qk], reorder_v_heads(a[qk:], 0, nk, r, dv)], axis=0)
        elif ".in_proj_z." in name:
            a = reorder_v_heads(a, 0, nk, r, dv)
        elif ".in_proj_b." in name or ".in_proj_a." in name:
            a = reorder_v_heads(a, 0, nk, r, 1)
        elif name.endswith(".A_log") or name.endswith(".dt_bias"):
            a = reorder_v_heads(a, 0, nk, r, 1)
        elif ".conv1d." in name:
            a = a.reshape(a.shape[0], -1)
            qk = 2 * nk * dk
            a = np.concatenate([a[:qk], reorder_v_heads(a[qk:], 0, nk, r, dv)], axis=0)
        elif ".out_proj." in name:
            a = reorder_v_heads(a, 1, nk, r, dv)
    if name.endswith(".A_log"):
        a, f32 = -np.exp(to_f32(dtype, a)), True
    elif name.endswith(".dt_bias"):
        name = name[: -len(".dt_bias")] + ".dt_proj.bias"
    elif ".conv1d." in name:
        a = a.reshape(a.shape[0], -1)
    elif name.endswith("norm.weight") and not name.endswith("linear_attn.norm.weight"):
        a, f32 = to_f32(dtype, a) + np.float32(1.0), True
    return name, a, f32


def f32_to_bf16_bits(x):
    """Round to nearest even, as ggml and torch do."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def write_tensors(w, gguf, cfg, arch, tensors, outtype):
    arch_enum = gguf.MODEL_ARCH.QWEN35 if arch == "qwen35" else gguf.MODEL_ARCH.QWEN3
    tmap = gguf.get_tensor_name_map(arch_enum, cfg["num_hidden_layers"])
    skipped, written, nbytes = 0, 0, 0
    for name, (dtype, shape, a) in tensors.items():
        if name.startswith(("mtp.", "model.mtp.")):
            skipped += 1  # the MTP head: llama.cpp would need it as an extra nextn block
            continue
        hf, f32 = name, dtype == "F32"
        if arch == "qwen35":
            hf, a, f32 = qwen35_transform(cfg, name, dtype, a)
            f32 = f32 or a.dtype == np.float32
        new = tmap.get_name(hf, try_suffixes=(".weight", ".bias"))
        if new is None:
            fail(f"tensor {name}: no llama.cpp name for it in arch {arch}")
        want_f32 = (a.ndim <= 1 or new.endswith("_norm.weight") or ".ssm_conv1d." in new
                    or not new.endswith(".weight") or outtype == "f32")
        if want_f32:
            out = np.ascontiguousarray(a if f32 else to_f32(dtype, a), dtype=np.float32)
            w.add_tensor(new, out)
        elif dtype == "BF16" and not f32:
            out = np.ascontiguousarray(a)  # the checkpoint's bits, unchanged
            w.add_tensor(new, out, raw_dtype=gguf.GGMLQuantizationType.BF16)
        else:
            out = f32_to_bf16_bits(a if f32 else to_f32(dtype, a))
            w.add_tensor(new, out, raw_dtype=gguf.GGMLQuantizationType.BF16)
        written += 1
        nbytes += out.nbytes
    return written, skipped, nbytes


# ---------------------------------------------------------------------------------------------
# tokenizer

def split_regex(pre):
    """The regex of the Split pre-tokenizer (alone or inside a Sequence) of tokenizer.json."""
    items = pre.get("pretokenizers", [pre]) if pre else []
    for p in items:
        if p.get("type") == "Split":
            return p.get("pattern", {}).get("Regex")
    return None


def write_tokenizer(w, gguf, ckpt, cfg):
    path = os.path.join(ckpt, "tokenizer.json")
    if not os.path.exists(path):
        fail(f"{path}: missing (copy the tokenizer files beside the weights)")
    with open(path, encoding="utf-8") as f:
        tok = json.load(f)
    model = tok.get("model", {})
    if model.get("type") != "BPE":
        fail(f"{path}: tokenizer model {model.get('type')!r}; only byte-level BPE converts")
    regex = split_regex(tok.get("pre_tokenizer"))
    pre = PRE_TOKENIZERS.get(regex)
    if pre is None:
        fail(f"{path}: pre-tokenizer regex {regex!r} is not one llama.cpp names here (qwen2, qwen35)")
    n = cfg["vocab_size"]
    tokens = [f"[PAD{i}]" for i in range(n)]
    types = [gguf.TokenType.UNUSED] * n
    for text, i in model["vocab"].items():
        if i >= n:
            fail(f"{path}: token id {i} is past vocab_size {n}")
        tokens[i], types[i] = text, gguf.TokenType.NORMAL
    for a in tok.get("added_tokens", []):
        i, text = a["id"], a["content"]
        if i >= n:
            fail(f"{path}: added token id {i} is past vocab_size {n}")
        special = a.get("special") or (text.startswith("<|") and text.endswith("|>"))
        tokens[i] = text
        types[i] = gguf.TokenType.CONTROL if special else gguf.TokenType.USER_DEFINED
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    gguf.SpecialVocab(ckpt, load_merges=True, n_vocab=n).add_to_gguf(w)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint", help="directory with config.json, *.safetensors, tokenizer.json")
    ap.add_argument("--out", required=True, help="the .gguf file to write")
    ap.add_argument("--outtype", choices=["bf16", "f32"], default="bf16",
                    help="type of the 2-D weights (norms and small tensors are always f32)")
    ap.add_argument("--gguf-py", required=True,
                    help="the gguf-py folder of a llama.cpp source tree (its `gguf` package)")
    args = ap.parse_args()
    if not os.path.isdir(os.path.join(args.gguf_py, "gguf")):
        fail(f"--gguf-py {args.gguf_py}: no gguf/ package there (give llama.cpp's gguf-py folder)")
    sys.path.insert(0, args.gguf_py)
    import gguf  # noqa: E402  (llama.cpp's package, found through --gguf-py)

    with open(os.path.join(args.checkpoint, "config.json")) as f:
        cfg = json.load(f)
    arch = arch_of(cfg)
    tensors = read_safetensors(args.checkpoint)
    file_type = gguf.LlamaFileType.MOSTLY_BF16 if args.outtype == "bf16" else gguf.LlamaFileType.ALL_F32
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    w = gguf.GGUFWriter(args.out, arch, use_temp_file=args.outtype == "f32")
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name(os.path.basename(os.path.normpath(args.checkpoint)))
    write_hparams(w, gguf, cfg, arch, file_type)
    write_tokenizer(w, gguf, args.checkpoint, cfg)
    written, skipped, nbytes = write_tensors(w, gguf, cfg, arch, tensors, args.outtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    note = f", {skipped} MTP tensors left out" if skipped else ""
    print(f"wrote {args.out}: arch {arch}, {written} tensors, {nbytes / 1e9:.3f} GB of tensor data{note}")


if __name__ == "__main__":
    main()
